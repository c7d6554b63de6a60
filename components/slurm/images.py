"""Per-host Docker objects shared by the Slurm head and workers: the macvlan network and images."""

from __future__ import annotations

import hashlib
import json
import re
from functools import cache
from pathlib import Path

import pulumi
import pulumi_docker as docker
from pydantic import Field

from components.base import Args

IMAGES_DIR = Path(__file__).resolve().parents[2] / "images"
SLURM_CONTEXT = IMAGES_DIR / "slurm"
MACVLAN_NETWORK = "hpc-slurm"
PLATFORMS = {"x86_64": "linux/amd64", "aarch64": "linux/arm64"}


@cache
def context_hash(context: Path = SLURM_CONTEXT) -> str:
    """Tag for an image: a hash of its build context, so an unchanged context is never rebuilt."""
    h = hashlib.sha256()
    for path in sorted(p for p in context.rglob("*") if p.is_file()):
        h.update(path.relative_to(context).as_posix().encode() + b"\0" + path.read_bytes() + b"\0")
    return h.hexdigest()[:16]


def dockerfile_inputs(dockerfile: Path, context: Path) -> list[Path]:
    """The Dockerfile and every file its COPY/ADD instructions take from ``context`` (directories
    recursively, globs expanded), sorted: exactly what the image's bytes depend on besides the
    pinned base. A ``COPY --from=`` stage copy takes nothing from the context."""
    files = {dockerfile}
    logical = re.sub(r"\\\n", " ", dockerfile.read_text())
    for line in logical.splitlines():
        words = line.split()
        if not words or words[0].upper() not in ("COPY", "ADD"):
            continue
        args = [w for w in words[1:] if not w.startswith("--")]
        if any(w.startswith("--from=") for w in words[1:]):
            continue
        rest = " ".join(args)
        sources = json.loads(rest)[:-1] if rest.startswith("[") else args[:-1]
        for src in sources:
            matches = sorted(context.glob(src)) if any(c in src for c in "*?[") else [context / src]
            for m in matches:
                if not m.exists():
                    raise FileNotFoundError(f"{dockerfile.name}: COPY source {src!r} is not in {context}")
                files.update(m.rglob("*") if m.is_dir() else [m])
    return sorted(f for f in files if f.is_file())


@cache
def image_hash(role: str, context: Path | None = None) -> str:
    """Tag of the Slurm image for ``role``: a hash of its Dockerfile and exactly the files it
    copies, so an edit to one role's Dockerfile (or a file only it copies) replaces only that
    role's containers, and a shared file (the entrypoint) all of them."""
    context = context or SLURM_CONTEXT
    h = hashlib.sha256()
    for path in dockerfile_inputs(context / f"Dockerfile.{role}", context):
        h.update(path.relative_to(context).as_posix().encode() + b"\0" + path.read_bytes() + b"\0")
    return h.hexdigest()[:16]


class HostDockerArgs(Args):
    provider: docker.Provider = Field(description="The host's Docker provider (ssh://).")
    parent_interface: str = Field(description="NIC the macvlan network attaches to.")
    subnet: str = Field(description="Cluster subnet.")
    gateway: str = Field(description="Cluster gateway.")
    ip_range: str = Field(description="Container address range.")
    registry: str | None = Field(description="Registry to push to, or None to keep images local.")
    arch: str = Field(description="CPU architecture of the host.")


def macvlan_network(name: str, args: HostDockerArgs, parent: pulumi.Resource) -> docker.Network:
    """The host's macvlan network: containers appear on the cluster subnet with their own address."""
    return docker.Network(
        name,
        name=MACVLAN_NETWORK,
        driver="macvlan",
        options={"parent": args.parent_interface},
        ipam_configs=[docker.NetworkIpamConfigArgs(subnet=args.subnet, gateway=args.gateway, ip_range=args.ip_range)],
        opts=pulumi.ResourceOptions(parent=parent, provider=args.provider),
    )


def slurm_image(name: str, role: str, args: HostDockerArgs, parent: pulumi.Resource) -> docker.Image:
    """Build images/slurm/Dockerfile.<role> on the host (and push it when a registry is set: then
    this is the one build, and every other host pulls it by digest, ``pulled_image``)."""
    repo = f"{args.registry}/slurm-{role}" if args.registry else f"hpc-cluster/slurm-{role}"
    return docker.Image(
        name,
        image_name=f"{repo}:{image_hash(role)}",
        build=docker.DockerBuildArgs(
            context=str(SLURM_CONTEXT.relative_to(IMAGES_DIR.parent)),
            dockerfile=str((SLURM_CONTEXT / f"Dockerfile.{role}").relative_to(IMAGES_DIR.parent)),
            platform=PLATFORMS[args.arch],
        ),
        skip_push=args.registry is None,
        opts=pulumi.ResourceOptions(parent=parent, provider=args.provider),
    )


def image_ref(image: docker.Image, registry: str | None) -> pulumi.Output[str]:
    """How containers name an image: by digest once it is in the registry, else the local tag."""
    return image.repo_digest if registry else image.image_name


def pulled_image(
    name: str, ref: pulumi.Input[str], args: HostDockerArgs, parent: pulumi.Resource
) -> docker.RemoteImage:
    """The image the registry holds under ``ref`` (``repo@sha256:...``), pulled onto this host: the
    bytes built once, never rebuilt per host."""
    return docker.RemoteImage(
        name,
        name=ref,
        keep_locally=True,
        opts=pulumi.ResourceOptions(parent=parent, provider=args.provider),
    )
