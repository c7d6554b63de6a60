"""Remote steps of the backups (pure): ``<head>-backup`` installs restic, the ``hpc-backup``
program (``programs/hpc-backup``: every backup and restore), its config, the repository
password (stdin) and the timer on the Slurm head, which holds all three kinds: the accounting DB
(in the head container), the controller state and the shared volume's mount."""

from __future__ import annotations

import shlex
from dataclasses import dataclass
from pathlib import Path

from components.monitoring.spec import TEXTFILE_DIR
from components.scripts import Raw, RemoteScript, fill, put_file, script

PROGRAMS = Path(__file__).with_name("programs")
SCRIPTS = Path(__file__).with_name("scripts")
PROGRAM = "/usr/local/sbin/hpc-backup"
CONF_DIR = "/etc/hpc-cluster/backup"
CONF = f"{CONF_DIR}/backup.conf"
PASSWORD_FILE = f"{CONF_DIR}/password"
STATUS_DIR = "/var/lib/hpc-cluster/backup"
CACHE_DIR = "/var/cache/hpc-cluster/restic"
METRICS_FILE = f"{TEXTFILE_DIR}/hpc_backup.prom"
UNIT_DIR = "/etc/systemd/system"
RANDOM_DELAY = "15min"  # a site's heads do not all hit one backup server at the same second


@dataclass(frozen=True)
class BackupPlan:
    """Everything the head's backups need to know (plain data, no secrets)."""

    head: str
    repository: str  # as restic names it
    sftp_command: str  # the ssh command restic runs for an sftp: repository, else ""
    container: str  # the Slurm head container (mariadb-dump runs in it)
    database: str
    state_dir: str  # host path of the controller state
    volume_mount: str
    paths: tuple[str, ...]  # relative to volume_mount
    excludes: tuple[str, ...]
    keep_last: int
    keep_hourly: int
    keep_daily: int
    keep_weekly: int
    keep_monthly: int
    on_calendar: str
    max_age_s: int
    require_mount: bool = True  # a volume that is not mounted is never backed up (as empty)


def conf(p: BackupPlan) -> str:
    """``backup.conf``: bash assignments the program sources (values quoted for bash)."""
    q = shlex.quote
    words = {
        "REPOSITORY": p.repository,
        "SFTP_COMMAND": p.sftp_command,
        "PASSWORD_FILE": PASSWORD_FILE,
        "CACHE_DIR": CACHE_DIR,
        "STATUS_DIR": STATUS_DIR,
        "WORK_DIR": f"{STATUS_DIR}/work",
        "METRICS_FILE": METRICS_FILE,
        "BACKUP_HOST": p.head,
        "HEAD_CONTAINER": p.container,
        "DB_NAME": p.database,
        "STATE_DIR": p.state_dir,
        "VOLUME_MOUNT": p.volume_mount,
        "REQUIRE_MOUNT": "1" if p.require_mount else "0",
        "KEEP_LAST": str(p.keep_last),
        "KEEP_HOURLY": str(p.keep_hourly),
        "KEEP_DAILY": str(p.keep_daily),
        "KEEP_WEEKLY": str(p.keep_weekly),
        "KEEP_MONTHLY": str(p.keep_monthly),
        "MAX_AGE_S": str(p.max_age_s),
    }
    lines = ["# Managed by hpc-cluster (Pulumi): components/backup/steps.py"]
    lines += [f"{k}={q(v)}" for k, v in words.items()]
    lines.append(f"VOLUME_PATHS=({' '.join(q(x) for x in p.paths)})")
    lines.append(f"EXCLUDES=({' '.join(q(x) for x in p.excludes)})")
    return "\n".join(lines) + "\n"


def units(p: BackupPlan) -> str:
    service = (
        "[Unit]\nDescription=Backups of the accounting DB, controller state and volume (hpc-cluster)\n"
        "After=network-online.target docker.service\nWants=network-online.target\n\n"
        f"[Service]\nType=oneshot\nExecStart={PROGRAM} run\nNice=10\nIOSchedulingClass=idle\n"
    )
    timer = (
        "[Unit]\nDescription=Backups (hpc-cluster)\n\n"
        f"[Timer]\nOnCalendar={p.on_calendar}\nPersistent=true\nRandomizedDelaySec={RANDOM_DELAY}\n\n"
        "[Install]\nWantedBy=timers.target\n"
    )
    mark = "if hpc_file_changed; then restart=1; fi\n"
    return (
        put_file(f"{UNIT_DIR}/hpc-backup.service", "0644", service) + mark
        + put_file(f"{UNIT_DIR}/hpc-backup.timer", "0644", timer) + mark
    )  # fmt: skip


def program_text() -> str:
    return (PROGRAMS / "hpc-backup").read_text()


def backup(p: BackupPlan) -> RemoteScript:
    """``<head>-backup``: its create (stdin: the repository password) and delete scripts."""
    common = {"conf_dir": CONF_DIR, "status_dir": STATUS_DIR, "program": PROGRAM}
    body = fill(
        SCRIPTS / "backup.sh",
        textfile_dir=TEXTFILE_DIR,
        program_text=Raw(program_text().rstrip()),
        conf=CONF,
        conf_text=Raw(conf(p).rstrip()),
        password_file=PASSWORD_FILE,
        units=Raw(units(p).rstrip()),
        **common,
    )
    undo = fill(
        SCRIPTS / "backup-delete.sh", unit_dir=UNIT_DIR, metrics_file=METRICS_FILE, repository=p.repository, **common
    )
    step = f"{p.head}-backup"
    return RemoteScript(step, p.head, script(p.head, step, body), script(p.head, f"{step}-delete", undo))
