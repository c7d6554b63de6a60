"""The stack configuration: one frozen, validated model read once from ``pulumi.Config("hpc")``.

``Pulumi.<stack>.yaml`` says what machines exist and what each is for; everything else is derived.
``load()`` reads every ``hpc:*`` key, validates the whole cluster (per-field types and every
cross-field rule) and raises ``ConfigError`` with one line naming the offending key, e.g.::

    hpc:storage.replica: replica 3 needs at least 3 storage hosts, found 2

before the program registers any resource. Secrets (the SSH private key, the Hugging Face token)
are checked for placeholder values here and then handed on only as secret ``Output``s.

Hosts, addresses and devices have no defaults: the stack file must say them. Tunables (replica
count, partitions, paths, ports) have opinionated defaults.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from ipaddress import IPv4Address, IPv4Network
from typing import Annotated, Any, Literal

import pulumi
from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    field_validator,
    model_validator,
)
from pydantic.alias_generators import to_camel

from components import hardware, hostkeys
from components.hardware import HardwareOverride, HardwareProfile
from components.inference import capacity
from stacks import paths

NAMESPACE = "hpc"
PLACEHOLDER_SECRETS = frozenset(
    {"changeme", "change-me", "admin", "password", "secret", "empty", "default", "root", "test"}
)
HOSTNAME_PATTERN = r"^[a-z][a-z0-9-]{0,62}$"
ABS_PATH_PATTERN = r"^/[A-Za-z0-9._/-]*$"
K3S_VERSION_PATTERN = r"^v1\.(\d+)\.\d+\+k3s\d+$"
RESERVED_PORTS = frozenset({22, 2049, 6443, 6817, 6818, 6819, 10250, 24007})


class ConfigError(pulumi.RunError):
    """Bad stack input: ``key`` names the config key, ``message`` says what is wrong."""

    def __init__(self, key: str, message: str) -> None:
        self.key = key
        self.message = message
        super().__init__(f"{key}: {message}")


def _at(path: str, message: str) -> ValueError:
    """A validator error that names a path relative to the model raising it."""
    return ValueError(f"@{path}: {message}")


class Role(StrEnum):
    """What a host is for. A host may carry several roles."""

    STORAGE = "storage"
    SLURM_HEAD = "slurm-head"
    GPU_WORKER = "gpu-worker"
    INFERENCE = "inference"
    K3S_SERVER = "k3s-server"
    K3S_AGENT = "k3s-agent"


class Environment(StrEnum):
    DEV = "dev"
    PROD = "prod"


class _Model(BaseModel):
    model_config = ConfigDict(
        frozen=True,
        extra="forbid",
        alias_generator=to_camel,
        populate_by_name=True,
        use_enum_values=False,
    )


Port = Annotated[int, Field(ge=1, le=65535)]
AbsPath = Annotated[str, Field(pattern=ABS_PATH_PATTERN)]
# A directory that host scripts create, mount or chown: normalised, never a system directory.
HostPath = Annotated[str, Field(pattern=ABS_PATH_PATTERN), AfterValidator(paths.host_path)]
Name = Annotated[str, Field(pattern=HOSTNAME_PATTERN)]


class HostConfig(_Model):
    """One machine of the site."""

    name: Name = Field(description="Host name (also the Slurm NodeName and k8s node name).")
    address: IPv4Address = Field(description="Address on the cluster subnet, used for SSH.")
    ssh_user: str = Field(pattern=r"^[a-z_][a-z0-9_-]{0,31}$", description="SSH login user.")
    ssh_port: Port = Field(default=22, description="SSH port.")
    host_key: Annotated[str, AfterValidator(hostkeys.parse)] | None = Field(
        default=None,
        description="The host's public SSH host key, '<type> <base64>' (ssh-keyscan, checked against the "
        "console); every connection refuses a host that answers with another key. Required by policy.",
    )
    profile: str = Field(description="Hardware profile key (components/hardware.py).")
    roles: list[Role] = Field(min_length=1, description="What the host is for.")
    overrides: HardwareOverride | None = Field(default=None, description="Changes to the profile for this host.")
    container_address: IPv4Address | None = Field(
        default=None,
        description="Static macvlan address of the host's Slurm container (inside containerRange).",
    )
    rack: str | None = Field(default=None, description="Rack the host sits in (power budgets).")

    @field_validator("profile")
    @classmethod
    def _known_profile(cls, v: str) -> str:
        if v not in hardware.CATALOGUE:
            raise ValueError(f"unknown profile {v!r}; known: {', '.join(hardware.profile_names())}")
        return v

    @field_validator("roles")
    @classmethod
    def _unique_roles(cls, v: list[Role]) -> list[Role]:
        dupes = [r.value for r, n in Counter(v).items() if n > 1]
        if dupes:
            raise ValueError(f"role {dupes[0]!r} listed twice")
        return v

    @property
    def hardware(self) -> HardwareProfile:
        """The host's profile with its overrides applied."""
        return hardware.resolve(self.profile, self.overrides)

    def has(self, role: Role) -> bool:
        return role in self.roles


class NetworkConfig(_Model):
    """The cluster network and the macvlan range for containers."""

    subnet: IPv4Network = Field(description="Cluster subnet (CIDR), e.g. 192.168.0.0/24.")
    gateway: IPv4Address = Field(description="Default gateway on the subnet.")
    parent_interface: str = Field(
        pattern=r"^[a-zA-Z0-9._-]{1,15}$", description="Host NIC the macvlan networks attach to."
    )
    container_range: IPv4Network = Field(
        description="Addresses reserved for containers (macvlan ip_range), inside the subnet."
    )

    @model_validator(mode="after")
    def _ranges(self) -> NetworkConfig:
        if self.gateway not in self.subnet:
            raise _at("gateway", f"{self.gateway} is outside the subnet {self.subnet}")
        if not self.container_range.subnet_of(self.subnet):
            raise _at("containerRange", f"{self.container_range} is outside the subnet {self.subnet}")
        if self.gateway in self.container_range:
            raise _at("containerRange", f"{self.container_range} contains the gateway {self.gateway}")
        return self


Squash = Literal["root_squash", "all_squash", "no_root_squash"]


class StorageConfig(_Model):
    """The Gluster volume and its NFS-Ganesha export."""

    volume: str = Field(default="gv0", pattern=r"^[a-z][a-z0-9_-]{0,31}$", description="Volume name.")
    brick_path: HostPath = Field(
        default="/srv/gluster/gv0/brick",
        description="Brick directory on every storage host (a dedicated filesystem in production).",
    )
    replica: int = Field(default=3, ge=2, le=6, description="Copies of every file.")
    arbiter: bool = Field(default=False, description="With replica 2: add an arbiter brick (replica 2 arbiter 1).")
    mount_point: HostPath = Field(default="/gfsv", description="Where every host mounts the volume.")
    export_pseudo: AbsPath = Field(default="/gv", description="NFSv4 pseudo path of the export.")
    nfs_versions: list[Literal[3, 4]] = Field(
        default=[4], min_length=1, description="NFS versions served (3 needs rpcbind)."
    )
    allowed_clients: list[IPv4Network] | None = Field(
        default=None,
        description="Networks allowed to mount the export (never the container range); default: every host.",
    )
    squash: Squash = Field(default="root_squash", description="Ganesha Squash mode.")
    nfs_grace: bool = Field(
        default=True,
        description="NFSv4 grace period after a Ganesha restart (lets clients reclaim state).",
    )
    allow_no_root_squash: bool = Field(
        default=False, description="Explicitly permit squash: no_root_squash (policy gate)."
    )
    ganesha_hosts: list[Name] | None = Field(
        default=None, description="Storage hosts that run NFS-Ganesha; default: the first by name."
    )
    owner_uid: int = Field(default=1000, ge=1, le=2**31, description="Owner uid of the volume root.")
    owner_gid: int = Field(default=1000, ge=1, le=2**31, description="Owner gid of the volume root.")
    allow_destroy: bool = Field(default=False, description="Let a stack deletion remove the volume and brick data.")
    options: dict[str, str] = Field(default_factory=dict, description="Extra 'gluster volume set' options.")

    @model_validator(mode="after")
    def _arbiter(self) -> StorageConfig:
        if self.arbiter and self.replica != 2:
            raise _at("arbiter", f"an arbiter needs replica 2, not replica {self.replica}")
        if self.squash == "no_root_squash" and not self.allow_no_root_squash:
            raise _at("squash", "no_root_squash needs allowNoRootSquash: true")
        return self

    @property
    def bricks_per_set(self) -> int:
        return 3 if self.arbiter else self.replica


class Partition(_Model):
    """A Slurm partition."""

    name: str = Field(pattern=r"^[a-z][a-z0-9_]{0,31}$", description="Partition name.")
    hosts: list[Name] | None = Field(default=None, description="GPU workers in it; default: all of them.")
    default: bool = Field(default=False, description="The default partition (exactly one).")
    max_time: str = Field(
        default="INFINITE",
        pattern=r"^(INFINITE|UNLIMITED|\d+(-\d{1,2})?(:\d{2}){0,2})$",
        description="Slurm MaxTime.",
    )


def _default_partitions() -> list[Partition]:
    return [Partition(name="gpu", default=True), Partition(name="debug", max_time="1:00:00")]


class SlurmConfig(_Model):
    """The Slurm batch system."""

    cluster_name: str = Field(pattern=r"^[a-z][a-z0-9_]{0,39}$", description="Slurm ClusterName.")
    partitions: list[Partition] = Field(default_factory=_default_partitions, min_length=1, description="Partitions.")
    cgroup_enforcement: bool | None = Field(
        default=None,
        description="ConstrainCores/RAMSpace/Devices via task/cgroup; default: on in prod.",
    )
    state_path: HostPath = Field(
        default="/var/lib/hpc/slurm/state", description="slurmctld StateSaveLocation on the head."
    )
    db_path: HostPath = Field(
        default="/var/lib/hpc/slurm/mariadb", description="Accounting database directory on the head."
    )
    registry: str | None = Field(
        default=None,
        pattern=r"^[a-z0-9.-]+(:\d+)?(/[a-z0-9._-]+)*$",
        description="Registry to push the Slurm images to; default: build on each host only.",
    )
    allow_destroy: bool = Field(
        default=False, description="Let a stack deletion remove Slurm state and the accounting DB."
    )
    max_unavailable: int = Field(
        default=1, ge=1, description="Workers drained at once when their containers are replaced (rolling)."
    )
    drain_timeout_seconds: int = Field(
        default=3600,
        ge=10,
        description="How long a drained worker waits for its jobs; then it is resumed and the step fails naming them.",
    )

    @model_validator(mode="after")
    def _partitions(self) -> SlurmConfig:
        names = Counter(p.name for p in self.partitions)
        for name, n in names.items():
            if n > 1:
                raise _at("partitions", f"partition {name!r} listed {n} times")
        defaults = [p.name for p in self.partitions if p.default]
        if len(defaults) != 1:
            raise _at("partitions", f"exactly one partition must be default, found {len(defaults)}")
        return self


class K3sConfig(_Model):
    """The k3s cluster."""

    version: str = Field(pattern=K3S_VERSION_PATTERN, description="k3s release, e.g. v1.31.4+k3s1.")

    @property
    def minor(self) -> str:
        m = re.match(K3S_VERSION_PATTERN, self.version)
        assert m is not None
        return f"1.{m.group(1)}"


class ModelConfig(_Model):
    """One LLM served by a vLLM OpenAI server."""

    name: str = Field(pattern=r"^[a-z][a-z0-9-]{0,40}$", description="Deployment/Service name.")
    display_name: str = Field(min_length=1, description="Name shown in FastChat.")
    model_id: str = Field(pattern=r"^[A-Za-z0-9._-]+/[A-Za-z0-9._-]+$", description="HF repo id.")
    host: Name = Field(description="Inference host that serves it.")
    port: Port = Field(description="Port of its OpenAI API on the host.")
    params_billion: float = Field(gt=0, le=2000, description="Parameter count in billions.")
    dtype: Literal["bfloat16", "float16", "float32"] = Field(description="Weight dtype (--dtype).")
    gpu_memory_utilization: float = Field(gt=0, le=1, description="Share of each GPU's memory vLLM may take.")
    kv_cache_dtype: Literal["auto", "fp8", "fp8_e4m3", "fp8_e5m2"] = Field(
        default="auto", description="--kv-cache-dtype."
    )
    max_model_len: int | None = Field(default=None, ge=256, description="--max-model-len.")
    tensor_parallel_size: int = Field(default=1, ge=1, le=16, description="GPUs the model spans.")
    gpu_index: int = Field(default=0, ge=0, description="First GPU it uses on its host.")
    enforce_eager: bool = Field(default=False, description="--enforce-eager (no CUDA graphs).")
    trust_remote_code: bool = Field(default=False, description="--trust-remote-code.")

    def load(self) -> capacity.ModelLoad:
        return capacity.ModelLoad(
            name=self.name,
            model_id=self.model_id,
            params_billion=self.params_billion,
            dtype=self.dtype,
            kv_cache_dtype=self.kv_cache_dtype,
            max_model_len=self.max_model_len,
            tensor_parallel_size=self.tensor_parallel_size,
            gpu_index=self.gpu_index,
            gpu_memory_utilization=self.gpu_memory_utilization,
            enforce_eager=self.enforce_eager,
        )


class InferenceConfig(_Model):
    """Models served on the inference hosts, and the FastChat front end."""

    models: list[ModelConfig] = Field(default_factory=list, description="Served models.")
    webui_port: Port = Field(default=7860, description="FastChat Gradio web UI port.")

    @model_validator(mode="after")
    def _unique(self) -> InferenceConfig:
        names = Counter(m.name for m in self.models)
        for i, m in enumerate(self.models):
            if names[m.name] > 1:
                raise _at(f"models[{i}].name", f"model name {m.name!r} is used twice")
        return self


class RackConfig(_Model):
    """A rack and its power budget."""

    power_budget_w: int = Field(ge=100, description="Power the rack may draw, in watts.")


class ClusterConfig(_Model):
    """The whole validated stack configuration (``hpc:*``)."""

    environment: Environment = Field(description="dev or prod: selects opinionated defaults.")
    hosts: list[HostConfig] = Field(min_length=1, description="Every machine of the site.")
    network: NetworkConfig = Field(description="Cluster network.")
    storage: StorageConfig = Field(default_factory=StorageConfig, description="Gluster + Ganesha.")
    slurm: SlurmConfig = Field(description="Slurm.")
    k3s: K3sConfig = Field(alias="k3s", description="k3s.")
    inference: InferenceConfig = Field(default_factory=InferenceConfig, description="LLM inference.")
    racks: dict[str, RackConfig] = Field(default_factory=dict, description="Racks with budgets.")

    # ---- cross-field rules (each names the key it blames) -------------------------------------
    @model_validator(mode="after")
    def _hosts(self) -> ClusterConfig:
        seen_names: dict[str, int] = {}
        seen_addrs: dict[IPv4Address, int] = {}
        seen_ctr: dict[IPv4Address, int] = {}
        net = self.network
        for i, h in enumerate(self.hosts):
            if h.name in seen_names:
                raise _at(f"hosts[{i}].name", f"duplicate host name {h.name!r} (also hosts[{seen_names[h.name]}])")
            seen_names[h.name] = i
            if h.address in seen_addrs:
                raise _at(
                    f"hosts[{i}].address",
                    f"duplicate address {h.address} (also hosts[{seen_addrs[h.address]}])",
                )
            seen_addrs[h.address] = i
            if h.address not in net.subnet:
                raise _at(f"hosts[{i}].address", f"{h.address} is outside the subnet {net.subnet}")
            if h.address in (net.subnet.network_address, net.subnet.broadcast_address, net.gateway):
                raise _at(f"hosts[{i}].address", f"{h.address} is not a usable host address")
            if h.address in net.container_range:
                raise _at(
                    f"hosts[{i}].address",
                    f"{h.address} is inside the container range {net.container_range}",
                )
            needs_container = h.has(Role.SLURM_HEAD) or h.has(Role.GPU_WORKER)
            if needs_container and h.container_address is None:
                raise _at(f"hosts[{i}].containerAddress", "required on a slurm-head or gpu-worker host")
            if h.container_address is not None:
                if h.container_address not in net.container_range:
                    raise _at(
                        f"hosts[{i}].containerAddress",
                        f"{h.container_address} is outside the container range {net.container_range}",
                    )
                if h.container_address in seen_ctr:
                    raise _at(
                        f"hosts[{i}].containerAddress",
                        f"duplicate container address {h.container_address}",
                    )
                seen_ctr[h.container_address] = i
            if h.has(Role.GPU_WORKER) and h.hardware.gpus is None:
                raise _at(
                    f"hosts[{i}].profile",
                    f"gpu-worker {h.name} has profile {h.profile!r}, which has no GPUs",
                )
            if h.rack is not None and self.racks and h.rack not in self.racks:
                raise _at(f"hosts[{i}].rack", f"unknown rack {h.rack!r}")
        return self

    @model_validator(mode="after")
    def _roles(self) -> ClusterConfig:
        heads = self.with_role(Role.SLURM_HEAD)
        if len(heads) != 1:
            raise _at("hosts", f"exactly one slurm-head host is required, found {len(heads)}")
        servers = self.with_role(Role.K3S_SERVER)
        if len(servers) > 1:
            names = ", ".join(h.name for h in servers)
            raise _at("hosts", f"at most one k3s-server host is allowed, found {len(servers)} ({names})")
        if self.with_role(Role.K3S_AGENT) and not servers:
            raise _at("hosts", "k3s-agent hosts need a k3s-server host")
        if self.with_role(Role.INFERENCE) and not servers:
            raise _at("hosts", "inference hosts run on k3s and need a k3s-server host")
        for i, h in enumerate(self.hosts):
            if h.has(Role.INFERENCE) and not (h.has(Role.K3S_SERVER) or h.has(Role.K3S_AGENT)):
                raise _at(f"hosts[{i}].roles", f"inference host {h.name} must also be k3s-server or k3s-agent")
        return self

    @model_validator(mode="after")
    def _storage(self) -> ClusterConfig:
        st = self.storage
        n = len(self.with_role(Role.STORAGE))
        per_set = st.bricks_per_set
        layout = "replica 2 arbiter 1" if st.arbiter else f"replica {st.replica}"
        if n < per_set:
            raise _at("storage.replica", f"{layout} needs at least {per_set} storage hosts, found {n}")
        if n % per_set:
            raise _at(
                "storage.replica",
                f"{layout} needs a multiple of {per_set} storage hosts, found {n}",
            )
        storage_names = {h.name for h in self.with_role(Role.STORAGE)}
        for i, g in enumerate(st.ganesha_hosts or []):
            if g not in storage_names:
                raise _at(f"storage.ganeshaHosts[{i}]", f"{g!r} is not a storage host")
        for i, c in enumerate(st.allowed_clients or []):
            if c.overlaps(self.network.container_range):
                raise _at(
                    f"storage.allowedClients[{i}]",
                    f"{c} includes the container range {self.network.container_range}: jobs and pods there "
                    "could claim any uid; list the hosts' networks without it",
                )
            if c.num_addresses > 2**24:
                raise _at(f"storage.allowedClients[{i}]", f"{c} is wider than a /8; name the cluster's networks")
        return self

    @model_validator(mode="after")
    def _paths_apart(self) -> ClusterConfig:
        keys = {
            "storage.brickPath": self.storage.brick_path,
            "storage.mountPoint": self.storage.mount_point,
            "slurm.statePath": self.slurm.state_path,
            "slurm.dbPath": self.slurm.db_path,
        }
        pair = paths.nesting(keys)
        if pair is not None:
            inner, outer = pair
            raise _at(inner, f"{keys[inner]} is inside (or equal to) hpc:{outer} {keys[outer]}; keep them apart")
        return self

    @model_validator(mode="after")
    def _partitions_hosts(self) -> ClusterConfig:
        workers = {h.name for h in self.with_role(Role.GPU_WORKER)}
        for i, p in enumerate(self.slurm.partitions):
            for j, name in enumerate(p.hosts or []):
                if name not in workers:
                    raise _at(f"slurm.partitions[{i}].hosts[{j}]", f"{name!r} is not a gpu-worker host")
        return self

    @model_validator(mode="after")
    def _models(self) -> ClusterConfig:
        by_name = {h.name: h for h in self.hosts}
        used: dict[tuple[str, int], str] = {}
        for i, m in enumerate(self.inference.models):
            key = f"inference.models[{i}]"
            host = by_name.get(m.host)
            if host is None or not host.has(Role.INFERENCE):
                raise _at(f"{key}.host", f"model {m.name}: {m.host!r} is not an inference host")
            if m.port in RESERVED_PORTS or m.port == self.inference.webui_port:
                raise _at(f"{key}.port", f"model {m.name}: port {m.port} is reserved on {m.host}")
            if (m.host, m.port) in used:
                raise _at(
                    f"{key}.port",
                    f"model {m.name}: port {m.port} on {m.host} is already used by {used[(m.host, m.port)]}",
                )
            used[(m.host, m.port)] = m.name
        self._check_capacity()
        return self

    def _check_capacity(self) -> None:
        """The GPU memory model (components/inference/capacity.py), per inference host."""
        index = {m.name: i for i, m in enumerate(self.inference.models)}
        hosts = {m.host for m in self.inference.models}
        for name in sorted(hosts, key=lambda n: min(index[m.name] for m in self.inference.models if m.host == n)):
            gpus = self.host(name).hardware.gpus
            placed = [m for m in self.inference.models if m.host == name]
            if gpus is None:
                i = index[placed[0].name]
                raise _at(f"inference.models[{i}].host", f"model {placed[0].name}: host {name} has no GPUs")
            problems = capacity.check_host([m.load() for m in placed], gpus.count, gpus.memory_mib * 1024 * 1024)
            if problems:
                p = problems[0]
                raise _at(f"inference.models[{index[p.model]}].{p.field}", p.message)

    # ---- derived views --------------------------------------------------------------------------
    def with_role(self, role: Role) -> list[HostConfig]:
        """Hosts carrying ``role``, in stack-file order."""
        return [h for h in self.hosts if h.has(role)]

    def host(self, name: str) -> HostConfig:
        return next(h for h in self.hosts if h.name == name)

    @property
    def is_prod(self) -> bool:
        return self.environment is Environment.PROD

    @property
    def slurm_head(self) -> HostConfig:
        return self.with_role(Role.SLURM_HEAD)[0]

    @property
    def cgroup_enforcement(self) -> bool:
        explicit = self.slurm.cgroup_enforcement
        return self.is_prod if explicit is None else explicit

    @property
    def storage_cli_host(self) -> HostConfig:
        """The storage host that runs the pool and volume steps: the first by name, so the order
        of the host list in the stack file does not matter."""
        return min(self.with_role(Role.STORAGE), key=lambda h: h.name)

    @property
    def ganesha_hosts(self) -> list[HostConfig]:
        names = self.storage.ganesha_hosts or [self.storage_cli_host.name]
        return [self.host(n) for n in names]

    @property
    def nfs_clients(self) -> list[IPv4Network]:
        """Who may mount the NFS export: the stack's networks, or every cluster host (never the
        container range: a job or a pod must not reach the volume with a uid it claims)."""
        if self.storage.allowed_clients:
            return list(self.storage.allowed_clients)
        return [IPv4Network(h.address) for h in sorted(self.hosts, key=lambda h: h.address)]

    @property
    def host_addresses(self) -> list[str]:
        """Every cluster host's address, in numeric order (Gluster's auth.allow)."""
        return [str(a) for a in sorted(h.address for h in self.hosts)]


# ---- secrets ------------------------------------------------------------------------------------
SECRET_KEYS = ("sshPrivateKey", "hfToken")
REQUIRED_SECRET_KEYS = ("sshPrivateKey",)


@dataclass(frozen=True)
class ClusterSecrets:
    """Secret stack inputs, only ever as secret Outputs."""

    ssh_private_key: pulumi.Output[str]
    hf_token: pulumi.Output[str] | None


# ---- loading -----------------------------------------------------------------------------------
def _key_of(loc: tuple[int | str, ...], message: str) -> tuple[str, str]:
    """Turn a pydantic error location (+ a relative '@path: ' prefix) into 'hpc:a.b[2].c'."""
    parts: list[str] = []
    for p in loc:
        if isinstance(p, int):
            parts[-1] = f"{parts[-1]}[{p}]" if parts else f"[{p}]"
        elif p.startswith(("function-", "literal[", "list[")) or ("[" in p and p.endswith("]")):
            continue  # pydantic's union / tagged-union branch names are not config keys
        else:
            parts.append(p)
    message = message.removeprefix("Value error, ")
    if message.startswith("@"):
        rel, _, message = message[1:].partition(": ")
        parts.extend(rel.split("."))
    key = ".".join(parts)
    return f"{NAMESPACE}:{key}" if key else f"{NAMESPACE}:", message


def parse(raw: Mapping[str, Any]) -> ClusterConfig:
    """Validate plain config data (top-level keys without the ``hpc:`` prefix)."""
    try:
        return ClusterConfig.model_validate(dict(raw))
    except ValidationError as e:
        err = e.errors(include_url=False)[0]
        key, message = _key_of(tuple(err["loc"]), str(err["msg"]))
        if err["type"] == "extra_forbidden":
            message = "unknown config key"
        elif err["type"] == "missing":
            message = "required config key is missing"
        raise ConfigError(key, message) from None


def _namespace_values() -> dict[str, Any]:
    """Every ``hpc:*`` key the engine passed in, parsed (objects are JSON strings)."""
    from pulumi.runtime import config as runtime_config

    keys = set(runtime_config.CONFIG.get()) | set(runtime_config.get_config_env())
    cfg = pulumi.Config(NAMESPACE)
    out: dict[str, Any] = {}
    for full in sorted(keys):
        ns, _, key = full.partition(":")
        if ns != NAMESPACE or key in SECRET_KEYS:
            continue
        text = cfg.get(key)
        if text is None:
            continue
        try:
            out[key] = json.loads(text)
        except json.JSONDecodeError:
            out[key] = text
    return out


def check_secret_value(key: str, value: str | None, required: bool) -> None:
    """Refuse missing and placeholder secrets (the value itself is never printed)."""
    full = f"{NAMESPACE}:{key}"
    if value is None or not value.strip():
        if required:
            raise ConfigError(full, "required secret is missing (pulumi config set --secret)")
        return
    if value.strip().lower() in PLACEHOLDER_SECRETS:
        raise ConfigError(full, "placeholder value refused; set a real secret")
    if not pulumi.runtime.is_config_secret(full):
        raise ConfigError(full, "must be set as a secret (pulumi config set --secret)")


def load() -> tuple[ClusterConfig, ClusterSecrets]:
    """Read and validate all ``hpc:*`` config once. Raises ConfigError before any resource."""
    cluster = parse(_namespace_values())
    cfg = pulumi.Config(NAMESPACE)
    for key in SECRET_KEYS:
        required = key in REQUIRED_SECRET_KEYS or (key == "hfToken" and bool(cluster.inference.models))
        check_secret_value(key, cfg.get(key), required)
    hf = cfg.get_secret("hfToken") if cfg.get("hfToken") else None
    return cluster, ClusterSecrets(ssh_private_key=cfg.require_secret("sshPrivateKey"), hf_token=hf)


def config_keys() -> list[str]:
    """Top-level config keys the model accepts (camelCase), secrets included."""
    fields = [f.alias or name for name, f in ClusterConfig.model_fields.items()]
    return sorted([*fields, *SECRET_KEYS])


__all__ = [
    "ClusterConfig",
    "ClusterSecrets",
    "ConfigError",
    "Environment",
    "HostConfig",
    "ModelConfig",
    "Role",
    "config_keys",
    "load",
    "parse",
]
