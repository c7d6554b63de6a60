"""Backups (``hpc:backup``): the config's one-line errors, the head's step as planned, the
password only as a secret on stdin. The restore drills on real daemons are in
tests/integration/test_slurm.py; the program itself runs against a real restic here."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from components.backup import steps
from offline import plan
from offline.mocks import plain
from stacks.config import ConfigError
from stacks.config_backup import BackupConfig, Target, target_of
from tests.unit.secret_inputs import only_on_stdin

HEAD = "head01"
PROD_BACKUP = {"enabled": True, "target": "sftp:restic@backup.hpc.internal:/srv/restic/hpc-prod",
               "paths": ["home"], "exclude": ["*/.cache"]}  # fmt: skip


@pytest.fixture(scope="module")
def prod():
    return plan.run("prod")


def backup_with(**changes):
    return {"hpc:backup": PROD_BACKUP | changes}


BAD = [
    ("no target", {"target": None}, "hpc:backup", "backup.target is required"),
    ("relative target", {"target": "backups/hpc"}, "hpc:backup.target", "absolute directory on the head"),
    ("root target", {"target": "/"}, "hpc:backup.target", "absolute directory"),
    ("target inside the volume", {"target": "/gfsv/backup"}, "hpc:backup.target", "inside the shared volume"),
    ("target inside the state", {"target": "/var/lib/hpc/slurm/state/b"}, "hpc:backup.target", "controller state"),
    ("schedule", {"schedule": "every night"}, "hpc:backup.schedule", "not hourly, daily, weekly"),
    ("clock", {"schedule": "25:00"}, "hpc:backup.schedule", "time of day HH:MM"),
    ("absolute path", {"paths": ["/etc"]}, "hpc:backup.paths", "relative to the volume's mount"),
    ("escaping path", {"paths": ["../etc"]}, "hpc:backup.paths", "relative to the volume's mount"),
    ("negative retention", {"keep": {"daily": -1}}, "hpc:backup.keep.daily", ""),
    ("unknown key", {"retention": 3}, "hpc:backup.retention", ""),
]


@pytest.mark.parametrize(("case", "changes", "key", "fragment"), BAD, ids=[b[0] for b in BAD])
def test_a_bad_backup_config_is_one_line_naming_the_key_and_registers_nothing(case, changes, key, fragment):
    with pytest.raises(ConfigError) as err:
        plan.run("prod", backup_with(**changes))
    assert key in [k for k, _ in err.value.problems], str(err.value)
    assert any(fragment in m for k, m in err.value.problems if k == key), str(err.value)
    assert all("\n" not in m and "Traceback" not in m for _, m in err.value.problems)
    assert err.value.registered == []


def test_backups_need_their_password():
    with pytest.raises(ConfigError) as err:
        plan.run("prod", {"hpc:backupPassword": None})
    assert err.value.key == "hpc:backupPassword" and "required secret is missing" in err.value.message
    assert err.value.registered == []


def test_a_short_backup_password_is_refused_without_showing_it(monkeypatch):
    from offline import mocks, record

    short = "short-pw"
    monkeypatch.setattr(record, "stand_in_secret",
                        lambda key: short if key == "hpc:backupPassword" else mocks.stand_in_secret(key))  # fmt: skip
    with pytest.raises(ConfigError) as err:
        plan.run("prod")
    assert err.value.key == "hpc:backupPassword" and "at least 16 characters" in err.value.message
    assert short not in str(err.value) and err.value.registered == []


def test_dev_backs_up_nothing_and_prod_runs_one_step_on_the_head(prod):
    dev = plan.run("dev")
    assert not [r for r in dev.resources if r.type == "hpc:backup:Backups"]
    [component] = [r for r in prod.resources if r.type == "hpc:backup:Backups"]
    [step] = [r for r in prod.resources if r.parent == component.urn]
    assert step.name == f"{HEAD}-backup"
    after = {r.name for r in prod.resources if r.urn in step.dependencies}
    assert {f"{HEAD}-container", f"{HEAD}-mount-fstab"} <= after, after  # the DB dump; the volume
    create = plain(step.inputs["create"])
    assert "REPOSITORY=sftp:restic@backup.hpc.internal:/srv/restic/hpc-prod" in create
    assert "SFTP_COMMAND='ssh -o BatchMode=yes -o ConnectTimeout=20 -o ServerAliveInterval=30 -p 22 " in create
    assert "OnCalendar=*-*-* 02:30:00" in create and "Persistent=true" in create
    assert "VOLUME_PATHS=(home)" in create and "EXCLUDES=('*/.cache')" in create
    assert "hpc: kept the backup repository" in plain(step.inputs["delete"])


def test_the_password_reaches_the_head_only_as_a_secret(prod):
    only_on_stdin(prod, f"{HEAD}-backup")


def test_the_schedule_sets_the_timer_and_the_age_that_alerts():
    assert BackupConfig(schedule="hourly").on_calendar == "hourly"
    assert BackupConfig(schedule="01:15").on_calendar == "*-*-* 01:15:00"
    assert BackupConfig(schedule="weekly").max_age_s == 180 * 3600
    assert BackupConfig(schedule="daily", stale_hours=8).max_age_s == 8 * 3600
    t = target_of("sftp:restic@b.example:2222:/srv/r")
    assert t.repository == "sftp:restic@b.example:/srv/r" and "-p 2222 restic@b.example -s sftp" in t.sftp_command
    assert target_of("/srv/backup") == Target("/srv/backup")  # a path is the repository as it is, no ssh


# ---- the program against a real restic -----------------------------------------------------------
def _lab(tmp: Path, **over: str) -> dict[str, str]:
    (tmp / "state").mkdir()
    (tmp / "state" / "job_state").write_text("jobs\n")
    (tmp / "vol" / "home" / "alice").mkdir(parents=True)
    (tmp / "vol" / "home" / "alice" / "notes.txt").write_text("secret research notes\n")
    (tmp / "tf").mkdir()
    (tmp / "pw").write_text("a-long-enough-password")
    (tmp / "pw").chmod(0o600)
    p = steps.BackupPlan(head="h1", repository=str(tmp / "repo"), sftp_command="", container="no-such-container",
                         database="slurm_acct_db", state_dir=str(tmp / "state"), volume_mount=str(tmp / "vol"),
                         paths=("home",), excludes=(), keep_last=3, keep_hourly=24, keep_daily=7, keep_weekly=4,
                         keep_monthly=6,
                         on_calendar="daily", max_age_s=3600, require_mount=False)  # fmt: skip
    text = steps.conf(p)
    moved = {steps.PASSWORD_FILE: tmp / "pw", steps.STATUS_DIR: tmp / "status", steps.CACHE_DIR: tmp / "cache",
             steps.METRICS_FILE: tmp / "tf" / "b.prom"}  # fmt: skip
    for old, new in moved.items():
        text = text.replace(old, str(new))
    for k, v in over.items():
        text += f"{k}={v}\n"
    (tmp / "conf").write_text(text)
    return {**os.environ, "HPC_BACKUP_CONF": str(tmp / "conf"), "PATH": f"{tmp}/bin:{os.environ['PATH']}"}


def _program(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(steps.PROGRAMS / "hpc-backup"), *args], env=env, capture_output=True, text=True,
                          timeout=120)  # fmt: skip


def _metrics(tmp: Path) -> dict[str, float]:
    out = {}
    for line in (tmp / "tf" / "b.prom").read_text().splitlines():
        if line and not line.startswith("#"):
            name, value = line.rsplit(" ", 1)
            out[name] = float(value)
    return out


def needs_restic(test):  # type: ignore[no-untyped-def]
    """A test of the program against real restic: CI installs it, so there a skip is a failure."""
    missing = subprocess.run(["sh", "-c", "command -v restic"]).returncode != 0
    skip = pytest.mark.skipif(missing, reason="restic is not installed (.ci/run installs it)")
    return pytest.mark.real_tool(skip(test))


@needs_restic
def test_a_failed_dump_is_never_a_snapshot_and_the_metrics_say_which_kind_failed(tmp_path):
    env = _lab(tmp_path)
    (tmp_path / "bin").mkdir()
    fake = tmp_path / "bin" / "docker"  # the head container's mariadb-dump dies half-way
    fake.write_text("#!/bin/sh\necho 'CREATE TABLE half'\necho 'mariadb-dump: Got error 2013: Lost connection' >&2\n"
                    "exit 2\n")  # fmt: skip
    fake.chmod(0o755)
    assert _program(env, "init").returncode == 0
    r = _program(env, "run")
    assert r.returncode == 1, r.stdout
    assert "db: mariadb-dump in no-such-container failed: mariadb-dump: Got error 2013" in r.stderr
    assert "failed: db" in r.stderr
    m = _metrics(tmp_path)
    assert m['hpc_backup_last_run_success{kind="db"}'] == 0
    assert m['hpc_backup_last_run_success{kind="state"}'] == 1 and m['hpc_backup_last_run_success{kind="volume"}'] == 1
    assert m["hpc_backup_max_age_seconds"] == 3600
    snaps = json.loads(subprocess.run(["restic", "snapshots", "--json"], env=env | {
        "RESTIC_REPOSITORY": str(tmp_path / "repo"), "RESTIC_PASSWORD_FILE": str(tmp_path / "pw")},
        capture_output=True, text=True, check=True).stdout)  # fmt: skip
    assert sorted(t for s in snaps for t in s["tags"]) == ["state", "volume"]


@needs_restic
def test_the_repository_holds_no_plaintext_and_a_wrong_password_reads_nothing(tmp_path):
    env = _lab(tmp_path)
    assert _program(env, "init").returncode == 0
    _program(env, "run")  # the DB kind fails here (no container); the volume is backed up
    for f in (tmp_path / "repo").rglob("*"):
        if f.is_file():
            assert b"secret research notes" not in f.read_bytes(), f
    (tmp_path / "pw").write_text("another-long-password")
    r = _program(env, "snapshots")
    assert r.returncode != 0 and "wrong password" in r.stderr


@needs_restic
def test_an_unreachable_or_missing_target_fails_loudly_quoting_restic(tmp_path):
    env = _lab(tmp_path, REPOSITORY="sftp:nobody@127.0.0.1:/nowhere",
               SFTP_COMMAND="'ssh -o BatchMode=yes -o ConnectTimeout=5 -p 1 nobody@127.0.0.1 -s sftp'")  # fmt: skip
    r = _program(env, "init")
    assert r.returncode == 1 and "cannot open or create the repository sftp:nobody@127.0.0.1:/nowhere" in r.stderr
    assert "Connection refused" in r.stderr or "connection refused" in r.stderr.lower(), r.stderr
    r = _program(env, "run")
    assert r.returncode == 1 and "state: backup failed" in r.stderr
    m = _metrics(tmp_path)
    assert all(m[f'hpc_backup_last_run_success{{kind="{k}"}}'] == 0 for k in ("db", "state", "volume"))
