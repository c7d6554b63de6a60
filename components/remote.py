"""Remote steps over SSH: turns a ``RemoteScript`` into a ``pulumi_command.remote.Command``.

One helper for every tier, so every remote step has the same contract:

* the script is the ``create`` command, its undo the ``delete`` command (``scripts.wrap``);
* a file the step installs, or a secret it needs, goes through ``stdin`` - never a command line;
  a step that receives a secret has its output logging switched off;
* a change of the script or of the file is an *update*, which re-runs ``create``; the scripts
  detect what differs and act only on that (restart only when a config file changed). No
  ``triggers`` on content: a trigger forces a replacement, which would run the delete script
  (stop the service) before the create.
"""

from __future__ import annotations

import pulumi
from pulumi_command import remote

from components.scripts import RemoteScript, wrap

# How hard a step tries to reach its host: pulumi-command's own defaults (10 dials of 15 s each),
# written out because a host that is rebooting (about 2 minutes) must not fail the step.
DIAL_ATTEMPTS = 10
DIAL_TIMEOUT_S = 15


class Ssh:
    """How to reach one host. The private key is a secret Output.

    A plain class, not a dataclass: component args (pydantic) check it by type only."""

    __slots__ = ("address", "after", "host_key", "name", "port", "private_key", "user")

    def __init__(
        self,
        *,
        name: str,
        address: str,
        user: str,
        port: int,
        private_key: pulumi.Input[str],
        host_key: str | None = None,
        after: list[pulumi.Resource] | None = None,
    ) -> None:
        self.name = name
        self.address = address
        self.user = user
        self.port = port
        self.private_key = private_key
        self.host_key = host_key  # verified by the provider on every connection when set
        self.after = after or []  # every step on this host runs after these (its preflight)

    @property
    def sudo(self) -> bool:
        """Steps run through passwordless sudo unless the login user is root."""
        return self.user != "root"

    def wrap(self, script_text: str) -> str:
        return wrap(script_text, sudo=self.sudo)

    def options(self, opts: pulumi.ResourceOptions) -> pulumi.ResourceOptions:
        """``opts`` plus a dependency on what every step of this host waits for."""
        if not self.after:
            return opts
        return pulumi.ResourceOptions.merge(opts, pulumi.ResourceOptions(depends_on=self.after))

    def without_preflight(self) -> Ssh:
        return Ssh(name=self.name, address=self.address, user=self.user, port=self.port,
                   private_key=self.private_key, host_key=self.host_key)  # fmt: skip

    def __repr__(self) -> str:
        return f"Ssh({self.user}@{self.name}/{self.address}:{self.port})"

    def connection(self) -> remote.ConnectionArgs:
        return remote.ConnectionArgs(
            host=self.address,
            user=self.user,
            port=self.port,
            private_key=self.private_key,
            host_key=self.host_key,
            dial_error_limit=DIAL_ATTEMPTS,
            per_dial_timeout=DIAL_TIMEOUT_S,
        )


def _checked(ssh: Ssh, step: RemoteScript) -> RemoteScript:
    if step.host != ssh.name:
        raise ValueError(f"step {step.step} is for host {step.host}, not {ssh.name}")
    return step


def run_with_triggers(
    resource_name: str,
    ssh: Ssh,
    step: RemoteScript,
    triggers: list[pulumi.Input[str]],
    *,
    opts: pulumi.ResourceOptions,
) -> remote.Command:
    """A step that must run again whenever ``triggers`` change (a replacement, by design).

    Only for steps whose delete is harmless (drain/resume around a container replacement)."""
    step = _checked(ssh, step)
    return remote.Command(
        resource_name,
        connection=ssh.connection(),
        create=ssh.wrap(step.create),
        delete=ssh.wrap(step.delete) if step.delete else None,
        triggers=triggers,
        add_previous_output_in_env=False,
        opts=ssh.options(opts),
    )


def _command(
    resource_name: str,
    ssh: Ssh,
    *,
    create: pulumi.Input[str],
    delete: pulumi.Input[str] | None,
    stdin: pulumi.Input[str] | None,
    secret_stdin: bool,
    opts: pulumi.ResourceOptions,
) -> remote.Command:
    return remote.Command(
        resource_name,
        connection=ssh.connection(),
        create=create,
        delete=delete,
        stdin=stdin,
        logging=remote.Logging.NONE if secret_stdin else None,
        add_previous_output_in_env=False,
        opts=ssh.options(opts),
    )


def run(
    resource_name: str,
    ssh: Ssh,
    step: RemoteScript,
    *,
    stdin: pulumi.Input[str] | None = None,
    secret_stdin: bool = False,
    opts: pulumi.ResourceOptions,
) -> remote.Command:
    """Register ``step`` as a remote command on ``ssh``'s host.

    ``stdin`` defaults to the step's file content; pass ``secret_stdin=True`` when it carries a
    secret (the value must already be a secret Output)."""
    step = _checked(ssh, step)
    return _command(
        resource_name,
        ssh,
        create=ssh.wrap(step.create),
        delete=ssh.wrap(step.delete) if step.delete else None,
        stdin=stdin if stdin is not None else step.file_content,
        secret_stdin=secret_stdin,
        opts=opts,
    )


def run_output(
    resource_name: str,
    ssh: Ssh,
    step: pulumi.Output[RemoteScript],
    *,
    stdin: pulumi.Input[str] | None = None,
    secret_stdin: bool = False,
    opts: pulumi.ResourceOptions,
) -> remote.Command:
    """Like ``run`` for a step rendered from Outputs (it depends on what they came from)."""
    step = step.apply(lambda s: _checked(ssh, s))
    return _command(
        resource_name,
        ssh,
        create=step.apply(lambda s: ssh.wrap(s.create)),
        # Output.apply's stubs do not admit None results; None means "no delete / no stdin".
        delete=step.apply(lambda s: ssh.wrap(s.delete) if s.delete else None),  # type: ignore[arg-type,return-value]
        stdin=stdin if stdin is not None else step.apply(lambda s: s.file_content),  # type: ignore[arg-type,return-value]
        secret_stdin=secret_stdin,
        opts=opts,
    )
