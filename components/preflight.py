"""HostPreflight: before anything runs on a host, check what every step there takes for granted.

One step per host, run as the login user (not through sudo, which it checks): passwordless sudo
for a non-root user, a supported Debian/Ubuntu release, Docker on hosts that run containers, the
NVIDIA container toolkit on GPU hosts, its Docker runtime on Slurm GPU workers, /dev/fuse on
Slurm workers (users' Apptainer images). Every other step
of the host depends on it, so a missing prerequisite fails once, first, with one line naming the
host and the fix.
"""

from __future__ import annotations

from pathlib import Path

import pulumi
from pulumi_command import remote as command_remote
from pydantic import Field

from components.base import Args
from components.remote import Ssh
from components.scripts import Raw, RemoteScript, fill, no_undo, script, wrap

SHELL = Path(__file__).with_name("shell")
SUPPORTED_OS = ("debian:12", "debian:13", "ubuntu:22.04", "ubuntu:24.04")


def preflight(host: str, docker: bool, nvidia: bool, nvidia_docker: bool = False, fuse: bool = False) -> RemoteScript:
    """The preflight script of one host (pure)."""
    wants = (("docker", docker), ("nvidia", nvidia), ("nvidia-docker", nvidia_docker), ("fuse", fuse))
    checks = [name for name, wanted in wants if wanted]
    body = fill(
        SHELL / "preflight.sh",
        host=host,
        supported=Raw(" | ".join(SUPPORTED_OS)),
        checks=Raw("\n".join(fill(SHELL / f"preflight-{c}.sh", host=host).rstrip("\n") for c in checks)),
    )
    create = script(host, f"{host}-preflight", body)
    return RemoteScript(f"{host}-preflight", host, create, no_undo(host, f"{host}-preflight"))


class HostPreflightArgs(Args):
    ssh: Ssh = Field(description="Connection to the host (without the preflight dependency).")
    docker: bool = Field(description="Whether the host runs containers (Docker must be there).")
    nvidia: bool = Field(description="Whether the host runs GPU containers (the NVIDIA toolkit must be there).")
    nvidia_docker: bool = Field(
        default=False, description="Whether Docker runs GPU containers (its nvidia runtime must be registered)."
    )
    fuse: bool = Field(default=False, description="Whether the host runs a Slurm worker (/dev/fuse must be there).")


class HostPreflight(pulumi.ComponentResource):
    """Children: ``<host>-preflight`` (the checks, as the login user)."""

    step: pulumi.Resource
    """The check every other step of the host waits for."""

    def __init__(self, name: str, args: HostPreflightArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("hpc:host:HostPreflight", name, None, opts)
        s = preflight(args.ssh.name, args.docker, args.nvidia, args.nvidia_docker, args.fuse)
        self.step = command_remote.Command(
            f"{name}-check",
            connection=args.ssh.connection(),
            create=wrap(s.create),  # as the login user: it is what checks sudo
            delete=wrap(s.delete) if s.delete else None,
            add_previous_output_in_env=False,
            opts=pulumi.ResourceOptions(parent=self),
        )
        self.register_outputs({})
