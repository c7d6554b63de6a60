"""The policies, by area. Each validator reads only what the engine sends for a resource (its
inputs) or for the stack; messages are sentences naming the resource and the fix.

Defaults here; per-stack levels and parameters come from the policy config that ``make plan``
writes to ``build/<stack>/policy-config.json`` (``pulumi preview --policy-pack policy
--policy-pack-config build/<stack>/policy-config.json`` uses the same file).
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Callable
from typing import Any

from pulumi_policy import (
    EnforcementLevel,
    ResourceValidationArgs,
    ResourceValidationPolicy,
    StackValidationArgs,
    StackValidationPolicy,
)
from pulumi_policy.policy import Policy

from components.credentials import PLACEHOLDER_SECRETS
from components.hardware import MIN_NVIDIA_DRIVER_BRANCH, NVIDIA_RUNTIME
from components.inference.capacity import GIB, ModelLoad, check_host
from policy import facts, trust

MANDATORY, ADVISORY = EnforcementLevel.MANDATORY, EnforcementLevel.ADVISORY
# report(message) or report(message, urn): the SDK's ReportViolation with the urn optional.
Report = Callable[..., None]


# ---- storage ------------------------------------------------------------------------------------
def gluster_replica_safe(args: ResourceValidationArgs, report: Report) -> None:
    if args.resource_type != facts.REMOTE_COMMAND:
        return
    h = facts.step_headers(args.props)
    if h.get("stateful") != "gluster-volume":
        return
    replica, arbiter = int(h.get("replica", "0")), h.get("arbiter") == "1"
    if not (replica >= 3 or (replica == 2 and arbiter)):
        report(
            f"The Gluster volume step {args.name} creates a replica {replica} volume without an arbiter, which "
            "can split its brain; set hpc:storage.replica to 3 or add an arbiter (arbiter: true)."
        )


_CLIENTS = re.compile(r"\bClients\s*=\s*([^;]+);")
_SQUASH = re.compile(r"\bSquash\s*=\s*([A-Za-z_]+)\s*;")
_OPEN_CLIENTS = {"*", "0.0.0.0/0", "0.0.0.0", "::/0"}


def nfs_export_restricted(args: ResourceValidationArgs, report: Report) -> None:
    if args.resource_type != facts.REMOTE_COMMAND:
        return
    h = facts.step_headers(args.props)
    if h.get("file") != "/etc/ganesha/ganesha.conf":
        return
    conf = args.props.get("stdin") or ""
    clients = [c.strip() for m in _CLIENTS.findall(conf) for c in m.split(",")]
    if not clients:
        report(f"The NFS export of {args.name} names no clients; restrict it with hpc:storage.allowedClients.")
    elif _OPEN_CLIENTS & set(clients):
        report(
            f"The NFS export of {args.name} is open to every address ({', '.join(clients)}); list the cluster's "
            "networks in hpc:storage.allowedClients."
        )
    squash = {s.lower() for s in _SQUASH.findall(conf)}
    if {"no_root_squash", "none", "noidsquash"} & squash and h.get("allow-no-root-squash") != "1":
        report(
            f"The NFS export of {args.name} uses No_Root_Squash without hpc:storage.allowNoRootSquash; use "
            "root_squash or allow it explicitly in the stack file."
        )


# ---- images ---------------------------------------------------------------------------------------
def images_pinned(args: ResourceValidationArgs, report: Report) -> None:
    refs: list[tuple[str, str]] = []
    if args.resource_type == facts.DOCKER_IMAGE:
        refs.append(("image", str(args.props.get("imageName", ""))))
        dockerfile = facts.dockerfile_of(args.props)
        if dockerfile:
            path, text = dockerfile
            for base in facts.from_lines(text):
                if "@sha256:" not in base or facts.image_problem(base):
                    report(
                        f"The image {args.name} builds FROM {base} in {path}; pin the base image by tag and "
                        "digest (name:tag@sha256:...)."
                    )
    elif args.resource_type == facts.DOCKER_CONTAINER:
        refs.append(("container image", str(args.props.get("image", ""))))
    elif args.resource_type == facts.DEPLOYMENT:
        refs += [(f"container {c.get('name')}", str(c.get("image", ""))) for c in facts.containers(args.props)]
    for what, ref in refs:
        problem = facts.image_problem(ref)
        if problem:
            report(f"The {what} of {args.name} ({ref}) {problem}; pin it to a release tag (and digest).")


# ---- secrets and credentials ---------------------------------------------------------------------
def secrets_stay_secret(args: ResourceValidationArgs, report: Report) -> None:
    if args.resource_type == facts.REMOTE_COMMAND:
        h = facts.step_headers(args.props)
        if args.props.get("environment"):
            report(
                f"The remote command {args.name} passes values through its environment; send secrets on stdin "
                "(SSH servers drop or log environment variables)."
            )
        if "secret-stdin" in h and args.props.get("logging") != "none":
            report(
                f"The remote command {args.name} receives a secret ({h['secret-stdin']}) on stdin but logs its "
                "output; set logging to none."
            )
        for key in ("create", "delete"):
            text = facts.step_script(args.props, key)
            if re.search(r"(--password[= ]\S|IDENTIFIED BY '[^$@])|(TOKEN|PASSWORD)=[A-Za-z0-9]{8,}", text):
                report(f"The {key} script of {args.name} carries a secret on its command line; read it from stdin.")
    elif args.resource_type == facts.DEPLOYMENT:
        for c in facts.containers(args.props):
            for name, _ in facts.literal_env(c.get("env")):
                if facts.SECRET_NAME.search(name):
                    report(
                        f"The Deployment {args.name} sets {name} as a literal value in container {c.get('name')}; "
                        "take it from a Secret with valueFrom.secretKeyRef."
                    )
            if any(a.startswith("--api-key") for a in c.get("args") or []):
                report(
                    f"The Deployment {args.name} passes --api-key on the command line; use VLLM_API_KEY from a Secret."
                )
    elif args.resource_type == facts.DOCKER_CONTAINER:
        for name, _ in facts.literal_env(args.props.get("envs")):
            if facts.SECRET_NAME.search(name):
                report(f"The container {args.name} sets {name} in its environment; mount it as a file from the host.")


_DEFAULT_CRED_PATTERNS = (
    (re.compile(r"chpasswd"), "sets a password with chpasswd"),
    (re.compile(r"NOPASSWD"), "grants passwordless sudo"),
    (re.compile(r"PasswordAuthentication\s+yes", re.I), "enables SSH password login"),
    (re.compile(r"\b(admin|root):(admin|root|password|changeme)\b"), "uses a default user:password"),
)


def no_default_credentials(args: ResourceValidationArgs, report: Report) -> None:
    texts: list[tuple[str, str]] = []
    if args.resource_type == facts.DOCKER_IMAGE:
        dockerfile = facts.dockerfile_of(args.props)
        if dockerfile:
            texts.append(dockerfile)
    elif args.resource_type == facts.REMOTE_COMMAND:
        texts.append(("its create script", facts.step_script(args.props)))
        texts.append(("its file", str(args.props.get("stdin") or "")))
    elif args.resource_type == facts.DEPLOYMENT:
        for c in facts.containers(args.props):
            for name, value in facts.literal_env(c.get("env")):
                if value.strip().lower() in PLACEHOLDER_SECRETS:
                    report(
                        f"The Deployment {args.name} sets {name} to the default credential {value!r}; "
                        "generate it (pulumi_random) and pass it from a Secret."
                    )
    for where, text in texts:
        instructions = "\n".join(line for line in text.splitlines() if not line.lstrip().startswith("#"))
        for pattern, what in _DEFAULT_CRED_PATTERNS:
            if pattern.search(instructions):
                report(f"{args.name} {what} in {where}; remove it (no default credentials or password logins).")


# ---- GPU workloads --------------------------------------------------------------------------------
_PINNED = re.compile(r"^\d+(,\d+)*$")


def gpu_workloads_pinned(args: ResourceValidationArgs, report: Report) -> None:
    """A GPU container runs on the GPUs the capacity model gave it, and only those."""
    if args.resource_type != facts.DEPLOYMENT:
        return
    spec = facts.pod_spec(args.props)
    for c in facts.containers(args.props):
        vllm = any("vllm" in str(x) for x in c.get("command") or [])
        wants_gpu = spec.get("runtimeClassName") == NVIDIA_RUNTIME or vllm
        visible = dict(facts.literal_env(c.get("env"))).get("NVIDIA_VISIBLE_DEVICES", "")
        if wants_gpu and not _PINNED.match(visible):
            report(
                f"The Deployment {args.name} must pin container {c.get('name')} to its GPUs with "
                f"NVIDIA_VISIBLE_DEVICES (indexes, not {visible or 'unset'!r})."
            )


def workloads_set_resources(args: ResourceValidationArgs, report: Report) -> None:
    if args.resource_type != facts.DEPLOYMENT:
        return
    for c in facts.containers(args.props):
        res = c.get("resources") or {}
        missing = [
            f"{kind}.{r}"
            for kind in ("requests", "limits")
            for r in ("cpu", "memory")
            if r not in (res.get(kind) or {})
        ]
        if missing:
            report(f"The Deployment {args.name} should set {', '.join(missing)} on container {c.get('name')}.")


def _flag(args: list[str], name: str, default: str | None = None) -> str | None:
    return args[args.index(name) + 1] if name in args else default


def gpu_memory_budget(args: StackValidationArgs, report: Report) -> None:
    """Re-run the capacity model on the model Deployments and the GPU nodes' labels."""
    gpus: dict[str, tuple[int, float]] = {}
    for r in args.resources:
        if r.resource_type == "kubernetes:core/v1:NodePatch":
            md = r.props.get("metadata") or {}
            labels = md.get("labels") or {}
            if "hpc-cluster.io/gpu-memory-gib" in labels:
                gpus[str(md.get("name"))] = (
                    int(labels["hpc-cluster.io/gpu-count"]),
                    float(labels["hpc-cluster.io/gpu-memory-gib"]) * GIB,
                )
    placed: dict[str, list[ModelLoad]] = defaultdict(list)
    urns: dict[str, str] = {}
    for r in args.resources:
        if r.resource_type != facts.DEPLOYMENT:
            continue
        md = r.props.get("metadata") or {}
        ann = md.get("annotations") or {}
        if "capacity.hpc-cluster.io/params-billion" not in ann:
            continue
        node = str((facts.pod_spec(r.props).get("nodeSelector") or {}).get("kubernetes.io/hostname"))
        c = facts.containers(r.props)[0]
        a = [str(x) for x in c.get("args") or []]
        name = md.get("name", r.name)
        urns[name] = r.urn
        placed[node].append(
            ModelLoad(
                name=name,
                model_id=a[0],
                params_billion=float(ann["capacity.hpc-cluster.io/params-billion"]),
                dtype=_flag(a, "--dtype", "bfloat16") or "bfloat16",
                kv_cache_dtype=_flag(a, "--kv-cache-dtype", "auto") or "auto",
                max_model_len=int(v) if (v := _flag(a, "--max-model-len")) else None,
                tensor_parallel_size=int(_flag(a, "--tensor-parallel-size", "1") or 1),
                gpu_index=int(ann.get("capacity.hpc-cluster.io/gpu-index", "0")),
                gpu_memory_utilization=float(_flag(a, "--gpu-memory-utilization", "0.9") or 0.9),
                enforce_eager="--enforce-eager" in a,
            )
        )
    for node, models in sorted(placed.items(), key=lambda kv: str(kv[0])):
        if node not in gpus:
            report(
                f"The models {', '.join(m.name for m in models)} are pinned to {node}, which has no GPU labels; "
                "run them on a labelled GPU node.",
                urns[models[0].name],
            )
            continue
        count, memory = gpus[node]
        for p in check_host(models, count, memory):
            report(
                f"The Deployment {p.model} does not fit its GPU budget on {node}: {p.message}; lower "
                "gpu_memory_utilization or move the model.",
                urns[p.model],
            )


# ---- Slurm ----------------------------------------------------------------------------------------
def slurm_constrain_devices(args: ResourceValidationArgs, report: Report) -> None:
    if args.resource_type != facts.REMOTE_COMMAND:
        return
    h = facts.step_headers(args.props)
    if h.get("file") != "/etc/slurm/cgroup.conf":
        return
    conf = str(args.props.get("stdin") or "")
    if not re.search(r"^ConstrainDevices=yes\s*$", conf, re.M):
        report(
            f"The Slurm cgroup.conf installed by {args.name} does not set ConstrainDevices=yes, so jobs can open "
            "GPUs they were not given; set hpc:slurm.cgroupEnforcement to true."
        )


def nvidia_driver_branch(args: ResourceValidationArgs, report: Report) -> None:
    if args.resource_type != facts.REMOTE_COMMAND:
        return
    branch = facts.step_headers(args.props).get("min-driver-branch")
    if branch is not None and int(branch) < MIN_NVIDIA_DRIVER_BRANCH:
        report(
            f"The GPU preflight {args.name} accepts driver branch R{branch}; require R{MIN_NVIDIA_DRIVER_BRANCH} "
            "or newer, as the spec sheets do."
        )


_NODE_GPUS = re.compile(r"^NodeName=\S+ .*\bGres=gpu:[^:\s]+:(\d+)", re.M)


def slurm_gpu_share_capped(args: StackValidationArgs, report: Report) -> None:
    """No account can hold every GPU unless the stack says so (holdsAllGpus): Slurm's GPUs from
    slurm.conf's node lines, each account's cap from the accounting step's header
    (render_scheduling.accounting)."""
    gpus = 0
    accounting = []
    for r in args.resources:
        if r.resource_type != facts.REMOTE_COMMAND:
            continue
        h = facts.step_headers(r.props)
        if h.get("file") == "/etc/slurm/slurm.conf":
            gpus += sum(int(n) for n in _NODE_GPUS.findall(str(r.props.get("stdin") or "")))
        if "gpu-caps" in h:
            accounting.append((r, h))
    for r, h in accounting:
        caps = dict(item.split(":", 1) for item in h["gpu-caps"].split(",") if item != "-")
        allowed = set(h.get("holds-all-gpus", "-").split(","))
        for account in (a for a in h.get("accounts", "-").split(",") if a not in ("-", "")):
            cap = int(caps[account]) if account in caps else None
            if gpus and (cap is None or cap >= gpus) and account not in allowed:
                held = "every GPU" if cap is None else f"{cap} GPUs"
                report(
                    f"The Slurm account {account} ({r.name}) may hold {held} of the cluster's {gpus}; cap it "
                    f"(hpc:slurm.scheduling.accounts[{account}].maxGpus, or a QoS maxGpusPerAccount) or allow it "
                    "explicitly with holdsAllGpus: true.",
                    r.urn,
                )


# ---- power and state ------------------------------------------------------------------------------
def rack_power_budget(args: StackValidationArgs, report: Report) -> None:
    cfg = args.get_config() or {}
    budgets: dict[str, int] = cfg.get("racks") or {}
    load: dict[str, int] = defaultdict(int)
    members: dict[str, list[str]] = defaultdict(list)
    for h in cfg.get("hosts") or []:
        if h.get("rack"):
            load[h["rack"]] += int(h["peakPowerW"])
            members[h["rack"]].append(h["name"])
    for rack, watts in sorted(load.items()):
        budget = budgets.get(rack)
        if budget is not None and watts > budget:
            report(
                f"Rack {rack} would draw {watts} W at peak ({', '.join(members[rack])}), above its budget of "
                f"{budget} W; move hosts to another rack or raise hpc:racks.{rack}.powerBudgetW."
            )


def stateful_protected(args: ResourceValidationArgs, report: Report) -> None:
    if args.resource_type != facts.REMOTE_COMMAND:
        return
    h = facts.step_headers(args.props)
    if "stateful" not in h or h.get("allow-destroy") == "1":
        return
    if not args.opts.protect:
        report(
            f"The step {args.name} holds {h['stateful']} and must be protected from deletion (protect=True); "
            "deleting it would lose data."
        )


# ---- the pack -------------------------------------------------------------------------------------
def _r(name: str, description: str, fn: Any, level: EnforcementLevel) -> ResourceValidationPolicy:
    return ResourceValidationPolicy(name=name, description=description, validate=fn, enforcement_level=level)


POLICIES: list[Policy] = [
    _r(
        "gluster-replica-safe",
        "Gluster volumes use replica 3 or replica 2 with an arbiter.",
        gluster_replica_safe,
        ADVISORY,
    ),
    _r("nfs-export-restricted", "NFS exports name their clients and squash root.", nfs_export_restricted, MANDATORY),
    _r("images-pinned", "Images and build bases are pinned, never :latest.", images_pinned, MANDATORY),
    _r(
        "secrets-stay-secret",
        "Secrets reach resources only through stdin, Secrets or files.",
        secrets_stay_secret,
        MANDATORY,
    ),
    _r("no-default-credentials", "No default users, passwords or password logins.", no_default_credentials, MANDATORY),
    StackValidationPolicy(
        name="gpu-memory-budget",
        description="Models fit their GPUs' memory.",
        validate=gpu_memory_budget,
        enforcement_level=MANDATORY,
    ),
    _r("gpu-workloads-pinned", "GPU workloads are pinned to their GPUs.", gpu_workloads_pinned, MANDATORY),
    _r(
        "workloads-set-resources",
        "Workloads set CPU and memory requests and limits.",
        workloads_set_resources,
        ADVISORY,
    ),
    _r(
        "slurm-constrain-devices",
        "Slurm confines jobs to their GPUs (ConstrainDevices).",
        slurm_constrain_devices,
        ADVISORY,
    ),
    StackValidationPolicy(
        name="rack-power-budget",
        description="Racks stay within their power budget.",
        validate=rack_power_budget,
        enforcement_level=ADVISORY,
    ),
    _r("stateful-protected", "Stateful steps are protected from deletion.", stateful_protected, MANDATORY),
    _r("nvidia-driver-branch", "GPU nodes require NVIDIA driver R550 or newer.", nvidia_driver_branch, ADVISORY),
    StackValidationPolicy(
        name="slurm-gpu-share-capped",
        description="No Slurm account can hold every GPU unless the stack says so.",
        validate=slurm_gpu_share_capped,
        enforcement_level=ADVISORY,
    ),
    # trust boundaries (policy/trust.py)
    _r("ssh-host-keys-pinned", "SSH connections check a pinned host key.", trust.ssh_host_keys_pinned, MANDATORY),
    StackValidationPolicy(
        name="no-secret-on-shared-volume",
        description="No secret is written to, or read from, the shared volume.",
        validate=trust.no_secret_on_shared_volume,
        enforcement_level=MANDATORY,
    ),
    _r(
        "nfs-clients-exclude-container-range",
        "Neither NFS nor Gluster admits the container range.",
        trust.nfs_clients_exclude_container_range,
        MANDATORY,
    ),
    _r(
        "privileged-containers-allowlist",
        "Extra container privileges only where the allow-list says why.",
        trust.privileged_containers_allowlist,
        MANDATORY,
    ),
    _r(
        "inference-pods-hardened",
        "Model servers run non-root, without escalation or capabilities.",
        trust.inference_pods_hardened,
        MANDATORY,
    ),
    _r(
        "trust-remote-code-listed",
        "Models that run repository code are listed.",
        trust.trust_remote_code_listed,
        ADVISORY,
    ),
    _r(
        "model-servers-hold-no-credentials",
        "Model servers hold no Hugging Face or service account token.",
        trust.model_servers_hold_no_credentials,
        MANDATORY,
    ),
]
