"""Policies for the cluster's trust boundaries: who may reach a secret, a volume or the host.

* ``ssh-host-keys-pinned``: every SSH connection (remote commands, Docker providers) checks a
  pinned host key: the channel carries the munge key, passwords and tokens.
* ``no-secret-on-shared-volume``: no secret is written to the shared volume, and no container
  mounts its munge key from there (anything on the subnet can read the volume).
* ``nfs-clients-exclude-container-range``: neither the NFS export nor Gluster's auth.allow admits
  the container range (jobs and pods could claim any uid).
* ``privileged-containers-allowlist``: added capabilities, the host cgroup namespace and a
  writable host cgroup tree only for the containers named in the allow-list (slurmd: device
  confinement needs CAP_SYS_ADMIN), no privileged container at all.
* ``inference-pods-hardened`` and ``trust-remote-code-listed``: model servers run non-root with
  no privilege escalation and no capabilities; models that run their repository's code are listed.
* ``model-servers-hold-no-credentials``: a model server (it may run its repository's code) holds
  no Hugging Face token and no service account token: the download Job alone has the token.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Mapping
from typing import Any

from pulumi_policy import ResourceValidationArgs, StackValidationArgs

from policy import facts

DOCKER_PROVIDER = "pulumi:providers:docker"
# The containers that may hold extra privileges, and why (README, "Trust model").
PRIVILEGE_ALLOWLIST = {
    "slurm-worker": "slurmd starts job steps and confines them to their GPUs, CPUs and memory: CAP_SYS_ADMIN, "
    "CAP_SYS_NICE (task affinity of another user's job), CAP_SYSLOG on GPU nodes (the health check reads "
    "XIDs from the kernel log) and "
    "a writable cgroup tree (each proven needed on real Slurm; the host cgroup namespace is not)"
}
_PUT_FILE = re.compile(r"hpc_put_file\s+'?([^\s']+)'?")
_CLIENTS = re.compile(r"\bClients\s*=\s*([^;]+);")
_FSTAB_MOUNT = re.compile(r"^want='\S+ (\S+) glusterfs ", re.M)
_AUTH_ALLOW = re.compile(r"^wanted 'auth\.allow' '([^']*)'", re.M)
_HF_TOKEN_ENV = re.compile(r"^(HF_TOKEN|HUGGING_?FACE(_HUB)?_TOKEN)$")


def ssh_host_keys_pinned(args: ResourceValidationArgs, report: Any) -> None:
    if args.resource_type == facts.REMOTE_COMMAND:
        conn = args.props.get("connection") or {}
        if isinstance(conn, Mapping) and not conn.get("hostKey"):
            report(
                f"The remote command {args.name} connects to {conn.get('host', '?')} without a pinned host key; set "
                "hostKey on that host in hpc:hosts (ssh-keyscan output, checked against the host's console)."
            )
    elif args.resource_type == DOCKER_PROVIDER:
        raw = args.props.get("sshOpts") or []
        opts = raw if isinstance(raw, str) else " ".join(raw)  # provider inputs arrive JSON-encoded
        if str(args.props.get("host", "")).startswith("ssh://") and "KnownHostsCommand=" not in opts:
            report(
                f"The Docker provider {args.name} connects over SSH without a pinned host key; set hostKey on that "
                "host in hpc:hosts."
            )


def _shared_mounts(args: StackValidationArgs) -> set[str]:
    mounts: set[str] = set()
    for r in args.resources:
        if r.resource_type == facts.REMOTE_COMMAND:
            mounts.update(_FSTAB_MOUNT.findall(facts.step_script(r.props)))
    return mounts


def _under(path: str, mounts: set[str]) -> bool:
    return any(path == m or path.startswith(m.rstrip("/") + "/") for m in mounts)


def no_secret_on_shared_volume(args: StackValidationArgs, report: Any) -> None:
    mounts = _shared_mounts(args)
    for r in args.resources:
        if r.resource_type == facts.REMOTE_COMMAND and facts.step_headers(r.props).get("secret-stdin"):
            for path in _PUT_FILE.findall(facts.step_script(r.props)):
                if _under(path, mounts):
                    report(
                        f"The step {r.name} writes a secret to {path} on the shared volume, which every host on the "
                        "subnet can read; write it to each host's own disk.",
                        r.urn,
                    )
        elif r.resource_type == facts.DOCKER_CONTAINER:
            for v in r.props.get("volumes") or []:
                if v.get("containerPath") == "/etc/munge" and _under(str(v.get("hostPath", "")), mounts):
                    report(
                        f"The container {r.name} reads its munge key from the shared volume ({v.get('hostPath')}); "
                        "mount it from the host's own disk.",
                        r.urn,
                    )


def nfs_clients_exclude_container_range(args: ResourceValidationArgs, report: Any) -> None:
    if args.resource_type != facts.REMOTE_COMMAND:
        return
    ranges = [ipaddress.ip_network(c) for c in args.get_config().get("containerRanges", [])]
    script = facts.step_script(args.props)
    clients: list[str] = []
    what = ""
    if facts.step_headers(args.props).get("file") == "/etc/ganesha/ganesha.conf":
        clients = [c.strip() for m in _CLIENTS.findall(args.props.get("stdin") or "") for c in m.split(",")]
        what = "NFS export"
    elif m := _AUTH_ALLOW.search(script):
        clients = [c.strip() for c in m.group(1).split(",") if c.strip()]
        what = "Gluster auth.allow"
    for c in clients:
        try:
            net = ipaddress.ip_network(c, strict=False)
        except ValueError:
            report(f"The {what} of {args.name} admits {c!r}, which is not an address or network; list host addresses.")
            continue
        for r in ranges:
            if net.overlaps(r):
                report(
                    f"The {what} of {args.name} admits {net}, which overlaps the container range {r}: a job or a "
                    "pod there could claim any uid; list the hosts' addresses only (hpc:storage.allowedClients)."
                )


def privileged_containers_allowlist(args: ResourceValidationArgs, report: Any) -> None:
    if args.resource_type != facts.DOCKER_CONTAINER:
        return
    name = str(args.props.get("name", args.name))
    granted = []
    if args.props.get("privileged"):
        report(f"The container {name} is privileged; no container of this cluster may be (grant what it needs).")
    if (args.props.get("capabilities") or {}).get("adds"):
        granted.append("capabilities " + ",".join((args.props.get("capabilities") or {})["adds"]))
    if args.props.get("cgroupnsMode") == "host":
        granted.append("the host cgroup namespace")
    for v in args.props.get("volumes") or []:
        if str(v.get("hostPath", "")).startswith("/sys/fs/cgroup") and not v.get("readOnly"):
            granted.append("a writable host /sys/fs/cgroup")
    if granted and name not in PRIVILEGE_ALLOWLIST:
        report(
            f"The container {name} is given {', '.join(granted)}; only "
            f"{', '.join(sorted(PRIVILEGE_ALLOWLIST))} may hold extra privileges (policy/trust.py): remove them."
        )


def inference_pods_hardened(args: ResourceValidationArgs, report: Any) -> None:
    if args.resource_type != facts.DEPLOYMENT:
        return
    pod = facts.pod_spec(args.props)
    pod_ctx = pod.get("securityContext") or {}
    for c in facts.containers(args.props):
        ctx = c.get("securityContext") or {}
        problems = []
        if not (ctx.get("runAsNonRoot") or pod_ctx.get("runAsNonRoot")):
            problems.append("may run as root (runAsNonRoot)")
        if ctx.get("allowPrivilegeEscalation") is not False:
            problems.append("may escalate privileges (allowPrivilegeEscalation: false)")
        if "ALL" not in ((ctx.get("capabilities") or {}).get("drop") or []):
            problems.append("keeps its capabilities (drop: [ALL])")
        if ctx.get("privileged"):
            problems.append("is privileged")
        if problems:
            report(f"The container {c.get('name')} of {args.name} {'; '.join(problems)}.")


def trust_remote_code_listed(args: ResourceValidationArgs, report: Any) -> None:
    if args.resource_type != facts.DEPLOYMENT:
        return
    for c in facts.containers(args.props):
        if "--trust-remote-code" in (c.get("args") or []):
            report(
                f"The model server {args.name} runs code from its model repository (--trust-remote-code); keep "
                "trustRemoteCode only for models that need it and whose repository you trust."
            )


def model_servers_hold_no_credentials(args: ResourceValidationArgs, report: Any) -> None:
    if args.resource_type != facts.DEPLOYMENT:
        return
    servers = [c for c in facts.containers(args.props) if list(c.get("command") or [])[:2] == ["vllm", "serve"]]
    for c in servers:
        held = [str(e.get("name")) for e in c.get("env") or [] if _HF_TOKEN_ENV.match(str(e.get("name")))]
        if held:
            report(
                f"The model server {args.name} holds {', '.join(held)} (code from a model repository could read "
                "it); download the weights with the model's Job and serve with HF_HUB_OFFLINE=1."
            )
    if servers and facts.pod_spec(args.props).get("automountServiceAccountToken") is not False:
        report(f"The model server {args.name} mounts a service account token; set automountServiceAccountToken: false.")
