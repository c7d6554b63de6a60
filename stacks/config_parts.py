"""The sections of the stack config: hosts, network, storage, Slurm, k3s, models, racks.

Each is a frozen pydantic model with a description on every field; rules that span sections live
on ``ClusterConfig`` (``stacks/config.py``).
"""

from __future__ import annotations

import re
from collections import Counter
from ipaddress import IPv4Address, IPv4Network
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BeforeValidator, Field, field_validator, model_validator

from components import hardware, hostkeys
from components.hardware import HardwareOverride, HardwareProfile
from components.inference import capacity
from stacks.config_base import (
    K3S_VERSION_PATTERN,
    AbsPath,
    HostPath,
    Name,
    Port,
    Role,
    _at,
    _Model,
)
from stacks.config_errors import encode
from stacks.config_scheduling import SchedulingConfig


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
    inference_gpus: list[Annotated[int, Field(ge=0)]] | None = Field(
        default=None,
        description="On a host that is both gpu-worker and inference: the GPUs (indexes) that serve models; "
        "Slurm gets the others. Each GPU has one owner.",
    )

    def gpu_owners(self) -> tuple[tuple[int, ...], tuple[int, ...]]:
        """(Slurm's GPUs, inference's GPUs) on this host."""
        count = self.hardware.gpus.count if self.hardware.gpus else 0
        if not self.has(Role.INFERENCE):
            return tuple(range(count)), ()
        if not self.has(Role.GPU_WORKER):
            return (), tuple(range(count))
        serving = tuple(sorted(self.inference_gpus or []))
        return tuple(i for i in range(count) if i not in serving), serving

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
        found: list[tuple[str, str]] = []
        net, rng, gw = self.subnet, self.container_range, self.gateway
        if net.is_loopback or net.is_multicast or net.is_link_local or net.is_unspecified or net.is_reserved:
            found.append(("subnet", f"{net} is loopback, multicast, link-local or reserved: not for hosts"))
        if net.prefixlen > 30:
            found.append(("subnet", f"{net} has no room for hosts; use a /30 or wider"))
        if gw not in net:
            found.append(("gateway", f"{gw} is outside the subnet {net}"))
        elif gw in (net.network_address, net.broadcast_address):
            found.append(("gateway", f"{gw} is the subnet's network or broadcast address, not a host"))
        if not rng.subnet_of(net):
            found.append(("containerRange", f"{rng} is outside the subnet {net}"))
        elif rng == net:
            found.append(("containerRange", f"{rng} is the whole subnet; reserve a part of it for containers"))
        if gw in rng:
            found.append(("containerRange", f"{rng} contains the gateway {gw}"))
        if found:
            raise encode(found)
        return self


Squash = Literal["root_squash", "all_squash", "no_root_squash"]


def _gluster_text(v: Any) -> Any:
    """A YAML number or bool as 'gluster volume set' takes it (10, on/off): the CLI passes it typed."""
    if isinstance(v, bool):
        return "on" if v else "off"
    if isinstance(v, (int, float)):
        return str(v)
    return v


GlusterOption = Annotated[str, BeforeValidator(_gluster_text)]


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
    owner_uid: int = Field(
        default=0, ge=0, le=2**31, description="Owner uid of the volume root (0755); never a user's: 0, root."
    )
    owner_gid: int = Field(default=0, ge=0, le=2**31, description="Owner gid of the volume root; default 0.")
    allow_destroy: bool = Field(default=False, description="Let a stack deletion remove the volume and brick data.")
    options: dict[str, GlusterOption] = Field(
        default_factory=dict, description="Extra 'gluster volume set' options (numbers and on/off as written)."
    )

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
    hosts: list[Name] | None = Field(default=None, description="Workers in it; default: every worker of its kind.")
    kind: Literal["gpu", "cpu"] = Field(default="gpu", description="Which workers it takes by default.")

    @field_validator("name")
    @classmethod
    def _not_reserved(cls, v: str) -> str:
        if v == "default":  # slurm.conf(5): PartitionName=DEFAULT sets every partition's defaults
            raise ValueError("'default' is Slurm's reserved partition name (PartitionName=DEFAULT); pick another")
        return v

    default: bool = Field(default=False, description="The default partition (exactly one).")
    max_time: str = Field(
        default="INFINITE",
        pattern=r"^(INFINITE|UNLIMITED|\d+(-\d{1,2})?(:\d{2}){0,2})$",
        description="Slurm MaxTime.",
    )


def _default_partitions() -> list[Partition]:
    # "cpu" holds the CPU-only workers (a Raspberry Pi, the CPU-only profile); it is left out of
    # slurm.conf while there are none.
    return [
        Partition(name="gpu", default=True),
        Partition(name="debug", max_time="1:00:00"),
        Partition(name="cpu", kind="cpu"),
    ]


class HealthConfig(_Model):
    """Slurm's node health check (components/slurm/render_health.py)."""

    enabled: bool = Field(default=True, description="Run the node health check on every compute node.")
    interval_seconds: int = Field(
        default=300, ge=10, le=86400, description="HealthCheckInterval: seconds between two runs on a node."
    )
    node_states: list[Literal["any", "alloc", "idle", "mixed", "nondrained_idle"]] = Field(
        default=["any"], min_length=1, description="HealthCheckNodeState: the nodes it runs on."
    )
    cycle: bool = Field(default=True, description="Spread the runs over the interval (CYCLE), not all at once.")
    min_free_mib: int = Field(default=1024, ge=0, description="Free space the job and state directories need, in MiB.")
    job_gpu_checks: bool = Field(
        default=True,
        description="Prolog/Epilog: a job's GPUs must be free before it starts and again after it ends, else drain.",
    )
    epilog_wait_seconds: int = Field(
        default=60,
        ge=0,
        le=3600,
        description="How long a job's GPUs may stay busy after it ended before the node drains.",
    )


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
    migrate: bool = Field(
        default=False,
        description="When statePath or dbPath changes, copy the old directory's data there (head stopped);"
        " without it such a move is refused.",
    )
    enforce_associations: bool | None = Field(
        default=None,
        description="AccountingStorageEnforce=associations,limits: only users with an association run; "
        "default: on in prod.",
    )
    max_unavailable: int = Field(
        default=1, ge=1, description="Workers drained at once when their containers are replaced (rolling)."
    )
    drain_timeout_seconds: int = Field(
        default=3600,
        ge=10,
        description="How long a drained worker waits for its jobs; then it is resumed and the step fails naming them.",
    )
    scheduling: SchedulingConfig = Field(
        default_factory=SchedulingConfig, description="Fair share, QoS, limits, preemption, reservations."
    )
    health: HealthConfig = Field(
        default_factory=HealthConfig, description="Node health checks that drain a failing node."
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


class MonitoringConfig(_Model):
    """Prometheus and Alertmanager on the Slurm head, exporters and collectors on every host."""

    enabled: bool = Field(default=True, description="Install monitoring.")
    scrape_interval: str = Field(default="30s", pattern=r"^[1-9][0-9]*[sm]$", description="Scrape interval, e.g. 30s.")
    retention: str = Field(default="30d", pattern=r"^[1-9][0-9]*[hdwy]$", description="How long metrics are kept.")
    gpu_metrics: Literal["nvidia-smi", "dcgm"] = Field(
        default="nvidia-smi",
        description="Where GPU metrics come from: this project's nvidia-smi collector, or the site's DCGM exporter.",
    )
    admin_networks: list[IPv4Network] = Field(
        default_factory=list,
        description="Networks (besides the head's loopback) that may reach Prometheus and Alertmanager "
        "(never the container range); both ask for TLS and the login either way.",
    )


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
    model_cache_gib: int = Field(
        default=200,
        ge=1,
        description="Size of the shared model cache (GiB): room for twice the models' weights; raise it "
        "only (Kubernetes refuses to shrink a bound claim).",
    )
    public_host: str | None = Field(
        default=None,
        pattern=r"^[a-z0-9]([a-z0-9.-]{0,251}[a-z0-9])?$",
        description="DNS name users reach the web UI and the APIs by (Ingress via k3s's Traefik); "
        "default: the k3s server's address. TLS when hpc:tlsCertificate and hpc:tlsKey are set.",
    )

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
