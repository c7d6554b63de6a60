"""``hpc:backup``: what cannot be rebuilt, copied off the cluster on a schedule (restic).

A target is a path on the head (a disk of its own, or a mount of the site's backup server) or
``sftp:USER@HOST[:PORT]:/PATH`` (another host over SSH, with root's key on the head). The
repository is encrypted with ``hpc:backupPassword``. Kinds: the accounting DB, the controller
state, and ``paths`` of the shared volume (relative to its mount) minus ``exclude``.
"""

from __future__ import annotations

import posixpath
import re
from collections.abc import Iterator
from dataclasses import dataclass

from pydantic import Field, field_validator, model_validator

from stacks.config_base import _Model
from stacks.config_errors import Problem

SFTP = re.compile(
    r"^sftp:(?P<user>[a-z_][a-z0-9_.-]{0,31})@(?P<host>[A-Za-z0-9][A-Za-z0-9.-]{0,252})(?::(?P<port>[0-9]{1,5}))?"
    r":(?P<path>/[^\s:]*)$"
)
SCHEDULES = {"hourly": ("hourly", 2), "daily": ("*-*-* 02:30:00", 30), "weekly": ("Sun *-*-* 02:30:00", 180)}
CLOCK = re.compile(r"^([01][0-9]|2[0-3]):[0-5][0-9]$")
SSH_OPTIONS = "-o BatchMode=yes -o ConnectTimeout=20 -o ServerAliveInterval=30"


@dataclass(frozen=True)
class Target:
    """Where restic keeps the repository: ``repository`` as restic names it, and for SFTP the
    ``ssh`` command restic runs (non-interactive, bounded connect)."""

    repository: str
    sftp_command: str = ""


def target_of(text: str) -> Target:
    if m := SFTP.match(text):
        port = m["port"] or "22"
        ssh = f"ssh {SSH_OPTIONS} -p {port} {m['user']}@{m['host']} -s sftp"
        return Target(f"sftp:{m['user']}@{m['host']}:{m['path']}", ssh)
    return Target(text)


class Keep(_Model):
    """Snapshots kept per kind (restic forget --prune after each run)."""

    last: int = Field(default=3, ge=1, le=1000, description="The newest N snapshots, whenever they were taken.")
    hourly: int = Field(default=24, ge=0, le=8784, description="Newest snapshot of each of the last N hours.")
    daily: int = Field(default=7, ge=0, le=366, description="Newest snapshot of each of the last N days.")
    weekly: int = Field(default=4, ge=0, le=520, description="Newest of each of the last N weeks.")
    monthly: int = Field(default=6, ge=0, le=240, description="Newest of each of the last N months.")


class BackupConfig(_Model):
    """Backups of the accounting DB, the controller state and chosen directories of the volume."""

    enabled: bool = Field(default=False, description="Back up (needs target and hpc:backupPassword).")
    target: str | None = Field(default=None, description="A path on the head, or sftp:USER@HOST[:PORT]:/PATH.")
    schedule: str = Field(default="daily", description="hourly, daily (02:30), weekly (Sunday 02:30) or HH:MM daily.")
    stale_hours: int | None = Field(
        default=None, ge=1, le=24 * 60, description="Alert when the last good backup is older (default from schedule)."
    )
    keep: Keep = Field(default_factory=Keep, description="Retention.")
    paths: list[str] = Field(default_factory=lambda: ["home"], description="Directories of the volume, relative.")
    exclude: list[str] = Field(default_factory=list, description="restic --exclude patterns, e.g. '*/.cache'.")

    @field_validator("target")
    @classmethod
    def _target(cls, v: str | None) -> str | None:
        if v is None or SFTP.match(v):
            return v
        if not v.startswith("/") or posixpath.normpath(v) != v or v == "/":
            raise ValueError("name an absolute directory on the head (e.g. /srv/backup/hpc) or sftp:USER@HOST:/PATH")
        return v

    @field_validator("schedule")
    @classmethod
    def _schedule(cls, v: str) -> str:
        if v not in SCHEDULES and not CLOCK.match(v):
            raise ValueError(f"{v!r} is not hourly, daily, weekly or a time of day HH:MM (e.g. 01:15)")
        return v

    @field_validator("paths")
    @classmethod
    def _paths(cls, v: list[str]) -> list[str]:
        for p in v:
            norm = posixpath.normpath(p)
            if p.startswith("/") or norm != p or norm == "." or norm.startswith(".."):
                raise ValueError(f"{p!r}: name a directory relative to the volume's mount, e.g. home or checkpoints")
        return v

    @field_validator("exclude")
    @classmethod
    def _exclude(cls, v: list[str]) -> list[str]:
        for p in v:
            if not p or "\n" in p:
                raise ValueError("an exclude pattern is one non-empty line")
        return v

    @model_validator(mode="after")
    def _needs_target(self) -> BackupConfig:
        if self.enabled and self.target is None:
            raise ValueError("backup.target is required when backups are enabled: a path or sftp:USER@HOST:/PATH")
        return self

    @property
    def on_calendar(self) -> str:
        return SCHEDULES[self.schedule][0] if self.schedule in SCHEDULES else f"*-*-* {self.schedule}:00"

    @property
    def max_age_s(self) -> int:
        hours = self.stale_hours or SCHEDULES.get(self.schedule, SCHEDULES["daily"])[1]  # HH:MM runs daily
        return hours * 3600


def problems(backup: BackupConfig, volume_mount: str, state_path: str, db_path: str) -> Iterator[Problem]:
    """A target inside what it protects is no backup: the volume, the state or the DB directory."""
    if not backup.enabled or backup.target is None or not backup.target.startswith("/"):
        return
    for what, where in (("the shared volume", volume_mount), ("the controller state", state_path),
                        ("the accounting DB", db_path)):  # fmt: skip
        if backup.target == where or backup.target.startswith(where.rstrip("/") + "/"):
            yield ("backup.target", f"{backup.target} is inside {what} ({where}); name a disk or host of its own")
