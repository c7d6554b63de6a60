"""How the department shares the cluster: ``hpc:slurm.scheduling``.

Slurm's multifactor priority with fair-share dominant, the account tree (groups as accounts with
shares), QoS tiers with limits and preemption, billing weights so a GPU-hour costs more than a
CPU-hour, and maintenance reservations. Everything has an opinionated default, so a stack that
says nothing still schedules fairly: every account gets one share, the QoS ``normal`` preempts
``scavenger`` (free, requeued when preempted), fair-share outweighs age and QoS.

The rules between this section and the rest (users' accounts, reservation nodes) are in
``problems``; ``stacks.config`` runs them with every other cross-field rule.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterator
from datetime import datetime
from typing import Annotated, Literal

from pydantic import AfterValidator, Field

from stacks.config_base import _Model

SLURM_NAME = r"^[a-z][a-z0-9_-]{0,31}$"
# Slurm's time formats: minutes, minutes:seconds, hours:minutes:seconds, days-hours,
# days-hours:minutes, days-hours:minutes:seconds.
_DURATION = re.compile(r"^(\d+)(-\d{1,2})?(:\d{2}){0,2}$")
SLURM_QOS = "normal"  # slurmdbd's own QoS: managed when listed, never removed
MAX_PRIORITY_WEIGHT = 2**32 - 1  # Slurm stores each weight in 32 bits
RESERVATION_FLAGS = ("maint", "ignore_jobs", "daily", "weekly", "weekday", "weekend", "flex", "magnetic")


def _duration(value: str) -> str:
    if not _DURATION.match(value) or value in ("0", "0-0"):
        raise ValueError(
            "a Slurm duration is minutes, hours:minutes:seconds or days-hours[:minutes[:seconds]] "
            "(e.g. 90, 8:00:00, 7-0)"
        )
    return value


def _start(value: str) -> str:
    try:
        parsed = datetime.fromisoformat(value)
    except ValueError:
        raise ValueError(
            "a start time is YYYY-MM-DDTHH:MM[:SS] (the controller's time, UTC in the containers)"
        ) from None
    if parsed.tzinfo is not None:
        raise ValueError("give the start without a time zone: the controller's clock (UTC in the containers)")
    return parsed.strftime("%Y-%m-%dT%H:%M:%S")


Duration = Annotated[str, AfterValidator(_duration)]
SlurmName = Annotated[str, Field(pattern=SLURM_NAME)]


class PriorityConfig(_Model):
    """Slurm's multifactor priority (``PriorityWeight*``): each factor is in [0, 1], times its weight."""

    fairshare: int = Field(default=100000, ge=0, le=MAX_PRIORITY_WEIGHT, description="Fair-share weight (dominant).")
    age: int = Field(default=1000, ge=0, le=MAX_PRIORITY_WEIGHT, description="Weight of time spent pending.")
    qos: int = Field(default=10000, ge=0, le=MAX_PRIORITY_WEIGHT, description="Weight of the job's QoS priority.")
    job_size: int = Field(default=0, ge=0, le=MAX_PRIORITY_WEIGHT, description="Weight of the job's size.")
    partition: int = Field(default=0, ge=0, le=MAX_PRIORITY_WEIGHT, description="Weight of the partition.")
    decay_half_life: Duration = Field(default="7-0", description="Half-life of past usage (PriorityDecayHalfLife).")
    max_age: Duration = Field(default="7-0", description="Pending time at which the age factor is full.")
    calc_period_minutes: int = Field(default=5, ge=1, le=60, description="How often usage is recomputed (minutes).")


class BillingConfig(_Model):
    """What a job costs per hour in fair-share usage (``TRESBillingWeights`` on every partition)."""

    cpu: float = Field(default=1.0, ge=0, description="Per CPU.")
    memory_gib: float = Field(default=0.0, ge=0, description="Per GiB of memory (0: memory is free).")
    gpu: float | None = Field(
        default=None,
        gt=0,
        description="Per GPU; default: the partition's CPUs per GPU (a GPU-hour costs its share of a node).",
    )


class QosConfig(_Model):
    """A quality of service: priority, limits and whom it may preempt."""

    name: SlurmName = Field(description="QoS name (e.g. normal, high, long, scavenger).")
    priority: int = Field(default=0, ge=0, le=MAX_PRIORITY_WEIGHT, description="QoS priority.")
    max_wall: Duration | None = Field(default=None, description="Longest job (MaxWall); default: the partition's.")
    max_gpus_per_user: int | None = Field(default=None, ge=0, description="GPUs one user's jobs hold (MaxTRESPerUser).")
    max_gpus_per_account: int | None = Field(
        default=None, ge=0, description="GPUs one account's jobs hold (MaxTRESPerAccount)."
    )
    max_gpus: int | None = Field(default=None, ge=0, description="GPUs all its jobs hold together (GrpTRES).")
    usage_factor: float = Field(default=1.0, ge=0, description="Multiplies the usage its jobs are charged (0: free).")
    preempts: list[SlurmName] = Field(default_factory=list, description="QoS whose jobs it may preempt.")


class AccountConfig(_Model):
    """A Slurm account (a group, a lab): its shares, QoS and GPU cap."""

    name: SlurmName = Field(description="Account name.")
    parent: SlurmName | None = Field(default=None, description="Parent account; default: root.")
    shares: int = Field(default=1, ge=1, description="Fair-share shares among its siblings.")
    qos: list[SlurmName] | None = Field(default=None, description="QoS its users may use; default: every one.")
    default_qos: SlurmName | None = Field(default=None, description="QoS of a job that names none; default: normal.")
    max_gpus: int | None = Field(default=None, ge=0, description="GPUs its jobs hold together (GrpTRES).")
    holds_all_gpus: bool = Field(
        default=False, description="Say so to let it hold every GPU (refused in prod otherwise, by policy)."
    )


class ReservationConfig(_Model):
    """A reservation (maintenance by default): no other job runs on its nodes during it."""

    name: SlurmName = Field(description="Reservation name.")
    nodes: list[str] | None = Field(default=None, description="Slurm workers it holds; default: every worker.")
    start: Annotated[str, AfterValidator(_start)] = Field(description="Start, YYYY-MM-DDTHH:MM[:SS] (controller time).")
    duration: Duration = Field(description="How long, e.g. 8:00:00 or 1-0.")
    accounts: list[SlurmName] = Field(default_factory=list, description="Accounts that may run in it.")
    users: list[str] = Field(default_factory=list, description="Users that may run in it; default: root only.")
    flags: list[Literal[RESERVATION_FLAGS]] = Field(  # type: ignore[valid-type]
        default_factory=lambda: ["maint", "ignore_jobs"], description="Slurm reservation flags."
    )


def _default_qos() -> list[QosConfig]:
    return [
        QosConfig(name=SLURM_QOS, priority=100, preempts=["scavenger"]),
        QosConfig(name="scavenger", priority=0, usage_factor=0.0),
    ]


class SchedulingConfig(_Model):
    """Fair share, QoS, limits, preemption and reservations."""

    priority: PriorityConfig = Field(default_factory=PriorityConfig, description="Multifactor weights.")
    billing: BillingConfig = Field(default_factory=BillingConfig, description="TRES billing weights.")
    preemption: Literal["requeue", "cancel", "off"] = Field(
        default="requeue", description="What a preempted job undergoes (preempt/qos); off: no preemption."
    )
    qos: list[QosConfig] = Field(default_factory=_default_qos, description="QoS tiers.")
    accounts: list[AccountConfig] | None = Field(
        default=None, description="The account tree; default: one account per users' account, one share each."
    )
    reservations: list[ReservationConfig] = Field(default_factory=list, description="Maintenance reservations.")

    def account_list(self, user_accounts: list[str]) -> list[AccountConfig]:
        """The accounts, declared or derived from the users' accounts."""
        if self.accounts is not None:
            return self.accounts
        return [AccountConfig(name=a) for a in dict.fromkeys(user_accounts)]


Problem = tuple[str, str]


def problems(s: SchedulingConfig, users: dict[str, str], workers: list[str], prefix: str) -> Iterator[Problem]:
    """The section against itself and the stack: ``users`` maps each user to its Slurm account,
    ``workers`` are the Slurm nodes; keys start with ``prefix`` (hpc:slurm.scheduling)."""
    qos = {q.name for q in s.qos}
    for name, n in Counter(q.name for q in s.qos).items():
        if n > 1:
            yield (f"{prefix}.qos", f"QoS {name!r} is listed {n} times")
    for q in s.qos:
        for p in q.preempts:
            if p == q.name:
                yield (f"{prefix}.qos[{q.name}].preempts", f"QoS {q.name} cannot preempt itself")
            elif p not in qos:
                yield (f"{prefix}.qos[{q.name}].preempts", f"{p!r} is not a QoS of hpc:slurm.scheduling.qos")
        if q.preempts and s.preemption == "off":
            yield (f"{prefix}.qos[{q.name}].preempts", "preemption is off: drop preempts or set preemption")
    accounts = s.account_list(list(users.values()))
    names = [a.name for a in accounts]
    for name, n in Counter(names).items():
        if n > 1:
            yield (f"{prefix}.accounts", f"account {name!r} is listed {n} times")
    by_name = {a.name: a for a in accounts}
    for a in accounts:
        key = f"{prefix}.accounts[{a.name}]"
        if a.name == "root":
            yield (f"{key}.name", "root is Slurm's own top account; name yours differently")
        if a.parent is not None and a.parent not in by_name:
            yield (f"{key}.parent", f"{a.parent!r} is not an account of hpc:slurm.scheduling.accounts")
        for named in a.qos or []:
            if named not in qos and named != SLURM_QOS:
                yield (f"{key}.qos", f"{named!r} is not a QoS of hpc:slurm.scheduling.qos")
        allowed = a.qos if a.qos is not None else sorted(qos | {SLURM_QOS})
        if a.default_qos is not None and a.default_qos not in allowed:
            yield (f"{key}.defaultQos", f"{a.default_qos!r} is not one of the QoS it may use ({', '.join(allowed)})")
        seen, at = {a.name}, a
        while at.parent in by_name:
            at = by_name[at.parent]
            if at.name in seen:
                yield (f"{key}.parent", f"account {a.name} is its own ancestor")
                break
            seen.add(at.name)
    if s.accounts is not None:
        for user, account in users.items():
            if account not in by_name:
                yield (f"users[{user}].account", f"account {account!r} is not in hpc:slurm.scheduling.accounts")
    for r in s.reservations:
        key = f"{prefix}.reservations[{r.name}]"
        for node in r.nodes or []:
            if node not in workers:
                yield (f"{key}.nodes", f"{node!r} is not a Slurm worker")
        for account in r.accounts:
            if account not in by_name:
                yield (f"{key}.accounts", f"{account!r} is not a Slurm account of this stack")
        for u in r.users:
            if u not in users and u != "root":
                yield (f"{key}.users", f"{u!r} is not a user of hpc:users")
    for name, n in Counter(r.name for r in s.reservations).items():
        if n > 1:
            yield (f"{prefix}.reservations", f"reservation {name!r} is listed {n} times")
