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
from collections.abc import Iterator, Mapping
from ipaddress import IPv4Address, IPv4Network
from typing import Any

import pulumi
from pydantic import (
    Field,
    ValidationError,
    model_validator,
)

from components.inference import capacity
from stacks import config_backup, config_checks, config_errors, config_people, config_scheduling, config_site, paths
from stacks.config_base import (
    CONTAINER_ROLES,
    NAMESPACE,
    RESERVED_PORTS,
    WORKER_ROLES,
    ConfigError,
    Environment,
    Role,
    _Model,
    password_problems,
    secret_problem,
)
from stacks.config_errors import Problem, encode
from stacks.config_parts import (
    HostConfig,
    InferenceConfig,
    K3sConfig,
    ModelConfig,
    MonitoringConfig,
    NetworkConfig,
    RackConfig,
    SlurmConfig,
    StorageConfig,
)
from stacks.config_people import GroupConfig, IdentityConfig, People, UserConfig
from stacks.config_secrets import (
    PLANNED_SECRET_KEYS,
    PROD_PLANNED_SECRET_KEYS,
    REQUIRED_SECRET_KEYS,
    SECRET_KEYS,
    ClusterSecrets,
)

# A client network wider than a /8 is not a cluster network: an allow-list that wide allows anyone.
MAX_CLIENT_ADDRESSES = 2**24


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
    monitoring: MonitoringConfig = Field(default_factory=MonitoringConfig, description="Metrics and alerts.")
    users: list[UserConfig] = Field(default_factory=list, description="People who use the cluster.")
    groups: list[GroupConfig] = Field(default_factory=list, description="Their Unix groups.")
    identity: IdentityConfig = Field(default_factory=IdentityConfig, description="External user directories.")
    backup: config_backup.BackupConfig = Field(default_factory=config_backup.BackupConfig, description="Backups.")

    @model_validator(mode="after")
    def _cross_checks(self) -> ClusterConfig:
        """Every cross-field rule runs; all their problems are reported together. A rule that
        trips over an earlier problem (a host name that does not exist) adds nothing."""
        found: list[tuple[str, str]] = []
        checks = (
            self._people, self._hosts, self._roles, self._storage, self._paths_apart, self._partitions_hosts,
            self._models, self._scheduling, self._site,
        )  # fmt: skip
        for check in checks:
            try:
                found.extend(check())
            except (StopIteration, IndexError, KeyError, AttributeError, TypeError, ValueError):
                if not found:
                    raise
        if found:
            raise encode(found)
        return self

    def _site(self) -> Iterator[Problem]:
        yield from config_site.problems(self.hosts, self.network, self.inference, self.slurm.registry)
        yield from config_site.monitoring_problems(self.monitoring, self.network)
        s = self.slurm
        yield from config_backup.problems(self.backup, self.storage.mount_point, s.state_path, s.db_path)

    def _people(self) -> Iterator[Problem]:
        yield from People.model_construct(users=self.users, groups=self.groups).problems()
        owner = (self.storage.owner_uid, self.storage.owner_gid)
        yield from config_people.id_problems(self.users, self.groups, self.identity.ldap, owner)
        deploy = {h.ssh_user: h.name for h in self.hosts}
        for u in self.users:  # host accounts of users get no SSH: the deploy account must keep it
            if u.name in deploy:
                why = f"{u.name!r} is the SSH user of host {deploy[u.name]}; choose another name"
                yield (f"users[{u.name}].name", why)

    def _scheduling(self) -> Iterator[Problem]:
        users = {u.name: u.slurm_account for u in self.users}
        workers = [h.name for h in self.with_role(Role.GPU_WORKER) + self.with_role(Role.CPU_WORKER)]
        yield from config_scheduling.problems(self.slurm.scheduling, users, workers, "slurm.scheduling")

    @property
    def people(self) -> People:
        return People(users=self.users, groups=self.groups)

    # ---- cross-field rules (each names the key it blames) -------------------------------------
    def _hosts(self) -> Iterator[Problem]:
        seen_names: dict[str, int] = {}
        seen_addrs: dict[IPv4Address, int] = {}
        seen_ctr: dict[IPv4Address, int] = {}
        net = self.network
        for i, h in enumerate(self.hosts):
            if h.name in seen_names:
                yield (f"hosts[{i}].name", f"hosts[{seen_names[h.name]}] and hosts[{i}] are both named {h.name!r}")
            seen_names[h.name] = i
            if h.address in seen_addrs:
                yield (
                    f"hosts[{i}].address",
                    f"duplicate address {h.address} (also {self.hosts[seen_addrs[h.address]].name})",
                )
            seen_addrs[h.address] = i
            if h.address not in net.subnet:
                yield (f"hosts[{i}].address", f"{h.address} is outside the subnet {net.subnet}")
            if h.address in (net.subnet.network_address, net.subnet.broadcast_address, net.gateway):
                yield (f"hosts[{i}].address", f"{h.address} is not a usable host address")
            if h.address in net.container_range:
                yield (
                    f"hosts[{i}].address",
                    f"{h.address} is inside the container range {net.container_range}",
                )
            if h.has(Role.LOGIN) and (h.has(Role.SLURM_HEAD) or h.has(Role.GPU_WORKER)):
                yield (f"hosts[{i}].roles", f"login needs a host of its own ({h.name} has one containerAddress)")
            needs_container = any(h.has(r) for r in CONTAINER_ROLES)
            if needs_container and h.container_address is None:
                yield (f"hosts[{i}].containerAddress", "required on a slurm-head, gpu-worker or login host")
            if h.container_address is not None:
                if h.container_address in (net.subnet.network_address, net.subnet.broadcast_address):
                    yield (f"hosts[{i}].containerAddress", f"{h.container_address} is not a usable host address")
                elif h.container_address not in net.container_range:
                    yield (
                        f"hosts[{i}].containerAddress",
                        f"{h.container_address} is outside the container range {net.container_range}",
                    )
                if h.container_address in seen_ctr:
                    yield (
                        f"hosts[{i}].containerAddress",
                        f"duplicate container address {h.container_address}",
                    )
                seen_ctr[h.container_address] = i
            yield from self._gpu_ownership(i, h)
            if h.has(Role.CPU_WORKER) and (h.has(Role.GPU_WORKER) or h.has(Role.SLURM_HEAD)):
                yield (f"hosts[{i}].roles", f"{h.name}: cpu-worker cannot share a host with gpu-worker, slurm-head")
            if h.has(Role.GPU_WORKER) and h.hardware.gpus is None:
                yield (
                    f"hosts[{i}].profile",
                    f"gpu-worker {h.name} has profile {h.profile!r}, which has no GPUs",
                )
            if h.rack is not None and self.racks and h.rack not in self.racks:
                yield (f"hosts[{i}].rack", f"unknown rack {h.rack!r}")

    @staticmethod
    def _gpu_ownership(i: int, h: HostConfig) -> Iterator[Problem]:
        """Each GPU has one owner: Slurm or inference, never both."""
        key = f"hosts[{i}].inferenceGpus"
        both = h.has(Role.GPU_WORKER) and h.has(Role.INFERENCE)
        if h.inference_gpus is not None and not both:
            yield (key, f"{h.name}: only a host that is both gpu-worker and inference splits its GPUs")
        if not both:
            return
        count = h.hardware.gpus.count if h.hardware.gpus else 0
        listed = h.inference_gpus or []
        if not listed:
            yield (key, f"{h.name} is gpu-worker and inference: say which GPUs serve models (the rest go to Slurm)")
        if len(set(listed)) != len(listed) or max(listed) >= count:
            yield (key, f"{h.name} has GPUs 0-{count - 1}; {listed} lists one twice or one it does not have")
        if len(listed) == count:
            yield (key, f"every GPU of {h.name} serves models: drop its gpu-worker role (no GPU left for Slurm)")

    def _roles(self) -> Iterator[Problem]:
        heads = self.with_role(Role.SLURM_HEAD)
        if len(heads) != 1:
            yield ("hosts", f"exactly one slurm-head host is required, found {len(heads)}")
        servers = self.with_role(Role.K3S_SERVER)
        if len(servers) > 1:
            names = ", ".join(h.name for h in servers)
            yield ("hosts", f"at most one k3s-server host is allowed, found {len(servers)} ({names})")
        if self.with_role(Role.K3S_AGENT) and not servers:
            yield ("hosts", "k3s-agent hosts need a k3s-server host")
        if self.with_role(Role.INFERENCE) and not servers:
            yield ("hosts", "inference hosts run on k3s and need a k3s-server host")
        for i, h in enumerate(self.hosts):
            if h.has(Role.INFERENCE) and not (h.has(Role.K3S_SERVER) or h.has(Role.K3S_AGENT)):
                yield (f"hosts[{i}].roles", f"inference host {h.name} must also be k3s-server or k3s-agent")

    def _storage(self) -> Iterator[Problem]:
        st = self.storage
        n = len(self.with_role(Role.STORAGE))
        per_set = st.bricks_per_set
        layout = "replica 2 arbiter 1" if st.arbiter else f"replica {st.replica}"
        if n < per_set:
            yield ("storage.replica", f"{layout} needs at least {per_set} storage hosts, found {n}")
        elif n % per_set:
            yield (
                "storage.replica",
                f"{layout} needs a multiple of {per_set} storage hosts, found {n}",
            )
        storage_names = {h.name for h in self.with_role(Role.STORAGE)}
        for i, g in enumerate(st.ganesha_hosts or []):
            if g not in storage_names:
                yield (f"storage.ganeshaHosts[{i}]", f"{g!r} is not a storage host")
        for i, c in enumerate(st.allowed_clients or []):
            if c.overlaps(self.network.container_range):
                yield (
                    f"storage.allowedClients[{i}]",
                    f"{c} includes the container range {self.network.container_range}: jobs and pods there "
                    "could claim any uid; list the hosts' networks without it",
                )
            if c.num_addresses > MAX_CLIENT_ADDRESSES:
                yield (f"storage.allowedClients[{i}]", f"{c} is wider than a /8; name the cluster's networks")

    def _paths_apart(self) -> Iterator[Problem]:
        keys = {
            "storage.brickPath": self.storage.brick_path,
            "storage.mountPoint": self.storage.mount_point,
            "slurm.statePath": self.slurm.state_path,
            "slurm.dbPath": self.slurm.db_path,
        }
        pair = paths.nesting(keys)
        if pair is not None:
            inner, outer = pair
            yield (inner, f"{keys[inner]} is inside (or equal to) hpc:{outer} {keys[outer]}; keep them apart")

    def _partitions_hosts(self) -> Iterator[Problem]:
        workers = {h.name for r in WORKER_ROLES for h in self.with_role(r)}
        for i, p in enumerate(self.slurm.partitions):
            for j, name in enumerate(p.hosts or []):
                if name not in workers:
                    yield (f"slurm.partitions[{i}].hosts[{j}]", f"{name!r} is not a gpu-worker or cpu-worker host")

    def _models(self) -> Iterator[Problem]:
        by_name = {h.name: h for h in self.hosts}
        used: dict[tuple[str, int], str] = {}
        for i, m in enumerate(self.inference.models):
            key = f"inference.models[{i}]"
            host = by_name.get(m.host)
            if host is None or not host.has(Role.INFERENCE):
                yield (f"{key}.host", f"model {m.name}: {m.host!r} is not an inference host")
            if m.port in RESERVED_PORTS or m.port == self.inference.webui_port:
                yield (f"{key}.port", f"model {m.name}: port {m.port} is reserved on {m.host}")
            if (m.host, m.port) in used:
                yield (
                    f"{key}.port",
                    f"model {m.name}: port {m.port} on {m.host} is already used by {used[(m.host, m.port)]}",
                )
            used[(m.host, m.port)] = m.name
            yield from config_checks.model_problems(key, m)
        yield from self._check_capacity()
        need = capacity.model_cache_needed_gib(sum(m.load().weight_bytes for m in self.inference.models))
        if need > self.inference.model_cache_gib:
            yield (
                "inference.modelCacheGib",
                f"the models' weights need {need} GiB in the model cache (twice their {need // 2}+ GiB), "
                f"more than {self.inference.model_cache_gib}; raise it to at least {need}",
            )

    def _check_capacity(self) -> Iterator[Problem]:
        """The GPU memory model (components/inference/capacity.py), per inference host."""
        index = {m.name: i for i, m in enumerate(self.inference.models)}
        hosts = {m.host for m in self.inference.models}
        names = {h.name for h in self.hosts}
        first = {n: min(index[m.name] for m in self.inference.models if m.host == n) for n in hosts}
        for name in sorted(hosts & names, key=first.__getitem__):
            gpus = self.host(name).hardware.gpus
            placed = [m for m in self.inference.models if m.host == name]
            if gpus is None:
                i = index[placed[0].name]
                yield (f"inference.models[{i}].host", f"model {placed[0].name}: host {name} has no GPUs")
                continue
            _, serving = self.host(name).gpu_owners()
            for m in placed:
                slurms = [g for g in m.load().gpus if g not in serving and g < gpus.count]
                if slurms:
                    yield (
                        f"inference.models[{index[m.name]}].gpuIndex",
                        f"model {m.name} would use GPU {slurms[0]} of {name}, which Slurm owns "
                        f"(hpc:hosts[{name}].inferenceGpus lists {list(serving)})",
                    )
            hw = self.host(name).hardware
            loads = [m.load() for m in placed]
            problems = capacity.check_host(loads, gpus.count, gpus.memory_mib * 1024 * 1024, hw.cpus, hw.memory_mib)
            for p in problems:
                yield (f"inference.models[{index[p.model]}].{p.field}", p.message)

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
    def enforce_associations(self) -> bool:
        explicit = self.slurm.enforce_associations
        return self.is_prod if explicit is None else explicit

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


# ---- secrets: stacks/config_secrets.py; loading ---------------------------------------------
def parse(raw: Mapping[str, Any]) -> ClusterConfig:
    """Validate plain config data (top-level keys without the ``hpc:`` prefix); every problem
    is reported at once in one ``ConfigError``."""
    try:
        return ClusterConfig.model_validate(dict(raw))
    except ValidationError as e:
        raise ConfigError.of(config_errors.problems(e, raw, ClusterConfig)) from None


def _passed_keys() -> set[str]:
    """Every config key the engine passed in: the language host hands the program its stack's
    config as ``PULUMI_CONFIG`` (the offline plan does the same, ``offline.record``)."""
    return set(pulumi.runtime.get_config_env())


def _namespace_values() -> dict[str, Any]:
    """Every ``hpc:*`` key the engine passed in, parsed (objects are JSON strings)."""
    cfg = pulumi.Config(NAMESPACE)
    out: dict[str, Any] = {}
    for full in sorted(_passed_keys()):
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


def load() -> tuple[ClusterConfig, ClusterSecrets]:
    """Read and validate all ``hpc:*`` config once. Raises one ConfigError listing every problem
    (keys the program would never read, values, secrets) before any resource."""
    found = config_errors.namespace_typos(_passed_keys(), pulumi.get_project(), config_keys())
    cluster: ClusterConfig | None = None
    try:
        cluster = parse(_namespace_values())
    except ConfigError as e:
        found.extend(e.problems)
    cfg = pulumi.Config(NAMESPACE)
    models = cluster is None or bool(cluster.inference.models)
    ldap = cluster.identity.ldap if cluster is not None else None
    binds = ldap is not None and ldap.bind_dn is not None
    monitored = cluster is None or cluster.monitoring.enabled
    backed_up = cluster is not None and cluster.backup.enabled
    for key in SECRET_KEYS:
        required = (
            key in REQUIRED_SECRET_KEYS
            or (key == "hfToken" and models)
            or (key == "ldapBindPassword" and binds)
            or (key == "monitoringPassword" and monitored)
            or (key == "backupPassword" and backed_up)
        )
        if (problem := secret_problem(key, cfg.get(key), required)) is not None:
            found.append(problem)
    if bool(cfg.get("tlsCertificate")) != bool(cfg.get("tlsKey")):
        found.append((f"{NAMESPACE}:tlsKey", "set both hpc:tlsCertificate and hpc:tlsKey, or neither"))
    elif cluster is not None and cluster.is_prod and cluster.inference.models and not cfg.get("tlsCertificate"):
        found.append(
            (f"{NAMESPACE}:tlsCertificate", "a prod stack serves its models only over HTTPS: set hpc:tlsCertificate "
             "and hpc:tlsKey (the site's certificate and key, pulumi config set --secret)")
        )  # fmt: skip
    if cluster is not None and cfg.get("ldapBindPassword") and not binds:
        found.append(
            (f"{NAMESPACE}:ldapBindPassword", "set only with hpc:identity.ldap.bindDn (else the bind is anonymous)")
        )
    for key in ("monitoringPassword", "backupPassword"):
        found.extend(password_problems(f"{NAMESPACE}:{key}", cfg.get(key)))
    if found or cluster is None:
        raise ConfigError.of(found)
    for warning in config_checks.warnings(cluster.inference.models):
        pulumi.log.warn(warning)
    hf = cfg.get_secret("hfToken") if cfg.get("hfToken") else None
    cert = cfg.get_secret("tlsCertificate") if cfg.get("tlsCertificate") else None
    tls_key = cfg.get_secret("tlsKey") if cfg.get("tlsKey") else None
    webhook = cfg.get_secret("alertWebhookUrl") if cfg.get("alertWebhookUrl") else None
    return cluster, ClusterSecrets(
        ssh_private_key=cfg.require_secret("sshPrivateKey"),
        hf_token=hf,
        tls_certificate=cert,
        tls_key=tls_key,
        alert_webhook_url=webhook,
        watchdog_webhook_url=cfg.get_secret("watchdogWebhookUrl") if cfg.get("watchdogWebhookUrl") else None,
        ldap_bind_password=cfg.get_secret("ldapBindPassword") if binds else None,
        monitoring_password=cfg.get_secret("monitoringPassword") if monitored else None,
        backup_password=cfg.get_secret("backupPassword") if backed_up else None,
    )


def config_keys() -> list[str]:
    """Top-level config keys the model accepts (camelCase), secrets included."""
    fields = [f.alias or name for name, f in ClusterConfig.model_fields.items()]
    return sorted([*fields, *SECRET_KEYS])


__all__ = [
    "PLANNED_SECRET_KEYS",
    "PROD_PLANNED_SECRET_KEYS",
    "SECRET_KEYS",
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
