"""Pure renderers for how Slurm shares the cluster: multifactor priority and preemption in
slurm.conf, and the two head steps that apply the rest idempotently.

* ``<head>-slurm-accounting`` (sacctmgr, slurmdbd): the QoS tiers, the account tree (parent,
  shares, allowed QoS, default QoS, GPU cap), the users' associations and default accounts. What
  the stack lists is added or changed; a QoS or an account this project made (described
  ``hpc-cluster``) that the stack no longer lists is removed, after the accounts that used it,
  and a user's association in such an account too. Slurm keeps a removed account's job records,
  so ``sacct -A <old>`` and ``sreport`` still show its history after a rename. Slurm's own QoS
  ``normal`` is changed when listed, never removed.
* ``<head>-slurm-reservations`` (scontrol, slurmctld): each listed reservation created or brought
  to the stack's nodes, window, flags, accounts and users; one that has ended is left to Slurm
  (which purges it); one the stack dropped is deleted. The names this project manages are kept
  in a file on the head host.

Changes are detected by reading Slurm before and after (``sacctmgr modify`` says "Modified"
whether or not a value changed), so a second run reports ``unchanged``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path

from components.scripts import Raw, RemoteScript, fill, script

SCRIPTS = Path(__file__).with_name("scripts")
MANAGED = "hpc-cluster"  # the description of the QoS and accounts this project manages
SLURM_QOS = "normal"
SLURMDBD_READY_TIMEOUT_S = 120
RESERVATIONS_FILE = "/etc/hpc-cluster/slurm-reservations"  # names of the reservations we manage
UNSET = "-1"  # sacctmgr's "no limit"


@dataclass(frozen=True)
class Priority:
    fairshare: int = 100000
    age: int = 1000
    qos: int = 10000
    job_size: int = 0
    partition: int = 0
    decay_half_life: str = "7-0"
    max_age: str = "7-0"
    calc_period_minutes: int = 5


@dataclass(frozen=True)
class Qos:
    name: str
    priority: int = 0
    max_wall: str | None = None
    max_gpus_per_user: int | None = None
    max_gpus_per_account: int | None = None
    max_gpus: int | None = None
    usage_factor: float = 1.0
    preempts: tuple[str, ...] = ()


@dataclass(frozen=True)
class Account:
    name: str
    parent: str = "root"
    shares: int = 1
    qos: tuple[str, ...] = (SLURM_QOS,)
    default_qos: str = SLURM_QOS
    max_gpus: int | None = None
    holds_all_gpus: bool = False


@dataclass(frozen=True)
class Reservation:
    name: str
    nodes: tuple[str, ...]
    start: str  # YYYY-MM-DDTHH:MM:SS, the controller's clock
    duration: str  # Slurm duration
    accounts: tuple[str, ...] = ()
    users: tuple[str, ...] = ()
    flags: tuple[str, ...] = ("maint", "ignore_jobs")

    @property
    def end(self) -> str:
        start = datetime.strptime(self.start, "%Y-%m-%dT%H:%M:%S")
        return (start + timedelta(minutes=duration_minutes(self.duration))).strftime("%Y-%m-%dT%H:%M:%S")


@dataclass(frozen=True)
class Scheduling:
    """Everything the scheduling policy says, as Slurm needs it."""

    priority: Priority = field(default_factory=Priority)
    preemption: str = "requeue"  # requeue | cancel | off
    enforce: bool = False  # AccountingStorageEnforce=associations,limits,qos,safe
    qos: tuple[Qos, ...] = (Qos(SLURM_QOS, priority=100, preempts=("scavenger",)), Qos("scavenger", usage_factor=0.0))
    accounts: tuple[Account, ...] = ()
    users: tuple[tuple[str, str], ...] = ()  # (user, default account)
    reservations: tuple[Reservation, ...] = ()

    def gpu_cap(self, account: Account) -> int | None:
        """The most GPUs an account's jobs can hold at once: its own cap, or the sum of the
        per-account caps of every QoS it may use (None: no cap)."""
        if account.max_gpus is not None:
            return account.max_gpus
        by_name = {q.name: q.max_gpus_per_account for q in self.qos}
        caps = [by_name.get(name) for name in account.qos]  # Slurm's own normal, unlisted: no cap
        return None if None in caps else sum(c for c in caps if c is not None)


def duration_minutes(value: str) -> int:
    """A Slurm duration in minutes: M, M:S, H:M:S, D-H, D-H:M, D-H:M:S (seconds rounded up)."""
    days, _, rest = value.rpartition("-") if "-" in value else ("0", "", value)
    parts = [int(p) for p in rest.split(":")]
    if "-" in value:  # after days: hours[:minutes[:seconds]]
        h, m, s = [*parts, 0, 0][:3]
    elif len(parts) == 3:
        h, m, s = parts
    else:
        h, (m, s) = 0, [*parts, 0][:2]
    total = int(days or 0) * 1440 + h * 60 + m
    return total + (1 if s else 0)


def conf_lines(s: Scheduling) -> str:
    """The slurm.conf lines of the policy (priority, preemption, enforcement)."""
    p = s.priority
    lines = [
        "PriorityType=priority/multifactor",
        f"PriorityDecayHalfLife={p.decay_half_life}",
        f"PriorityMaxAge={p.max_age}",
        f"PriorityCalcPeriod={p.calc_period_minutes}",
        f"PriorityWeightFairshare={p.fairshare}",
        f"PriorityWeightAge={p.age}",
        f"PriorityWeightQOS={p.qos}",
        f"PriorityWeightJobSize={p.job_size}",
        f"PriorityWeightPartition={p.partition}",
    ]
    if s.preemption != "off":
        lines += ["PreemptType=preempt/qos", f"PreemptMode={s.preemption.upper()}"]
    if s.enforce:
        # associations: only users with one run; limits and qos: QoS and account limits apply;
        # safe: a job starts only if its limits let it finish.
        lines.append("AccountingStorageEnforce=associations,limits,qos,safe")
    return "\n".join(lines) + "\n"


def billing(cpu: float, memory_gib: float, gpu: float | None) -> str:
    """A partition's TRESBillingWeights: what an hour of each costs in fair-share usage."""
    parts = [f"CPU={cpu:g}"]
    if memory_gib:
        parts.append(f"Mem={memory_gib:g}G")
    if gpu:
        parts.append(f"GRES/gpu={gpu:g}")
    return ",".join(parts)


def _tres(limit: int | None) -> str:
    return f"gres/gpu={UNSET if limit is None else limit}"


def accounting(host: str, container: str, cluster: str, s: Scheduling) -> RemoteScript:
    """QoS, the account tree and the users' associations in slurmdbd (see the module doc).
    Each account's GPU cap goes into the header: the policy pack reads it there
    (slurm-gpu-share-capped)."""
    qos = "".join(
        f"{q.name}|{q.priority}|{q.max_wall or UNSET}|{_tres(q.max_gpus_per_user)}|{_tres(q.max_gpus_per_account)}"
        f"|{_tres(q.max_gpus)}|{q.usage_factor:g}|{','.join(q.preempts)}\n"
        for q in s.qos
    )
    accounts = "".join(
        f"{a.name}|{a.parent}|{a.shares}|{','.join(a.qos)}|{a.default_qos}|{_tres(a.max_gpus)}\n"
        for a in _parents_first(s.accounts)
    )
    users = "".join(f"{user}|{account}\n" for user, account in s.users)
    caps = ",".join(f"{a.name}:{cap}" for a in s.accounts if (cap := s.gpu_cap(a)) is not None)
    body = fill(
        SCRIPTS / "accounting.sh",
        container=container,
        timeout=SLURMDBD_READY_TIMEOUT_S,
        cluster=cluster,
        managed=MANAGED,
        slurm_qos=SLURM_QOS,
        qos=Raw(qos),
        accounts=Raw(accounts),
        users=Raw(users),
    )
    headers = {
        "accounts": ",".join(a.name for a in s.accounts) or "-",
        "gpu-caps": caps or "-",
        "holds-all-gpus": ",".join(a.name for a in s.accounts if a.holds_all_gpus) or "-",
    }
    create = script(host, f"{host}-slurm-accounting", body, extra_headers=headers)
    delete = script(host, f"{host}-slurm-accounting-delete", 'echo "hpc: accounting stays in slurmdbd"\n')
    return RemoteScript(f"{host}-slurm-accounting", host, create, delete)


def _parents_first(accounts: tuple[Account, ...]) -> list[Account]:
    by_name = {a.name: a for a in accounts}

    def depth(a: Account) -> int:
        return 0 if a.parent not in by_name else 1 + depth(by_name[a.parent])

    return sorted(accounts, key=depth)


def reservations(host: str, container: str, s: Scheduling) -> RemoteScript:
    """The stack's reservations in slurmctld (see the module doc)."""
    rows = "".join(
        f"{r.name}|{','.join(sorted(r.nodes))}|{r.start}|{r.end}|{','.join(r.accounts)}|{','.join(r.users)}|"
        f"{','.join(sorted(r.flags))}\n"
        for r in s.reservations
    )
    body = fill(SCRIPTS / "reservations.sh", container=container, managed_file=RESERVATIONS_FILE, rows=Raw(rows))
    create = script(host, f"{host}-slurm-reservations", body)
    undo = fill(SCRIPTS / "reservations-delete.sh", container=container, managed_file=RESERVATIONS_FILE)
    delete = script(host, f"{host}-slurm-reservations-delete", undo)
    return RemoteScript(f"{host}-slurm-reservations", host, create, delete)
