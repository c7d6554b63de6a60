"""The scheduling policy on the real Slurm containers: fair share, QoS limits, preemption,
reservations and the usage report, driven by the plan (hpc:slurm.scheduling).

The lab is the Slurm suite's (tests/integration/test_slurm.py) cut down to the head and two GPU
workers (two stand-in GPUs each: four in all). alice is in account physics, bob in chem, one
share each. Timings are the stack's own short values (usage recomputed every minute), not sleeps
of real hours. The one wait Slurm imposes: a preempted, requeued job may start again only when
the credential of its first run has expired (cred_expire, 120 s by default).
"""

from __future__ import annotations

import copy
import datetime as dt
import re
import time
from typing import Any

import pytest

from tests.integration import docker_lab
from tests.integration import lab as labmod
from tests.integration.steps import run_step
from tests.integration.test_slurm import (
    AFTER_THE_HEAD,
    CTR_ADDR,
    NODE_FILES,
    TOOLS,
    USERS,
    Cluster,
    Planned,
    run_head_steps,
    running,
    stack,
)

pytestmark = pytest.mark.integration

NET = "10.79.0"  # the Slurm suite's test stack: its addresses, in a lab of this module's own
HOSTS = ["head", "w1", "w2"]
ALL_GPUS = "-N2 --gres=gpu:a100:2"  # both workers, both GPUs each
SCHEDULING: dict[str, Any] = {
    "priority": {"calcPeriodMinutes": 1, "decayHalfLife": "1-0"},
    "qos": [
        {"name": "normal", "priority": 100, "preempts": ["scavenger"]},
        {"name": "high", "priority": 200, "maxGpusPerUser": 2, "maxWall": "1:00:00"},
        {"name": "scavenger", "usageFactor": 0},
    ],
    "accounts": [{"name": "physics", "shares": 1}, {"name": "chem", "shares": 1}],
}
ACCOUNTS = {"alice": "physics", "bob": "chem"}
# README ("Sharing the GPUs"): GPU-minutes per account so far today, from the job records
README_USAGE = (
    "sacct -a -n -X -P -D -S now-1day -o Account,AllocTRES,ElapsedRaw | awk -F'|' "
    "'match($2, /gres\\/gpu=[0-9]+/) { g = substr($2, RSTART + 9, RLENGTH - 9); m[$1] += g * $3 / 60 } "
    'END { for (a in m) printf "%s %.2f\\n", a, m[a] }\''
)


def config(scheduling: dict[str, Any] | None = None, accounts: dict[str, str] = ACCOUNTS) -> dict[str, Any]:
    cfg = stack(2)
    cfg["hpc:slurm"] = cfg["hpc:slurm"] | {"scheduling": scheduling or SCHEDULING}
    cfg["hpc:users"] = [u | {"account": accounts[u["name"]]} for u in cfg["hpc:users"]]
    return cfg


def planned_with(**changes: Any) -> Planned:
    scheduling = copy.deepcopy(SCHEDULING) | changes.pop("scheduling", {})
    return Planned(0, config=config(scheduling, **changes))


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    labmod.require(*TOOLS)
    planned = Planned(0, config=config())
    builder = docker_lab.Builder(tmp_path_factory.mktemp("builder"))
    lab = labmod.Lab(HOSTS, net=NET)
    c = Cluster(lab, builder, HOSTS, CTR_ADDR["head"])
    with running(c, builder):
        c.prepare()
        for host in HOSTS:
            run_step(lab, planned.steps[f"{host}-accounts"])
        run_head_steps(lab, planned)
        for w in ("w1", "w2"):
            run_step(lab, planned.steps[f"{w}-gpu-preflight"])
            run_step(lab, planned.steps[f"{w}-munge-key-file"])
            for name in NODE_FILES:
                run_step(lab, planned.steps[f"{w}-{name}"])
        c.deploy(planned, "head")
        labmod.wait_until(lambda: c.in_head("scontrol ping")[1].count("is UP") == 1, "slurmctld", 120)
        for w in ("w1", "w2"):
            c.deploy(planned, w)
        labmod.wait_until(lambda: c.idle() == {"w1", "w2"}, "w1 and w2 idle", 120)
        for name in ("head-homes", *AFTER_THE_HEAD):
            run_step(lab, planned.steps[name])
        yield c, planned


def submit(c: Cluster, user: str, args: str) -> str:
    """sbatch as ``user`` (root when empty), from the shared jobs directory; the job id."""
    uid = str(USERS[user]) if user else ""
    rc, out = c.daemons["head"].exec("slurm-head", f"sbatch --parsable -o /dev/null {args}", user=uid,
                                     workdir="/home/jobs")  # fmt: skip
    assert rc == 0, out
    return out.strip()


def sacct(c: Cluster, job: str, fields: str = "State") -> list[str]:
    """Each record of the job (a requeued job has one per run), oldest first."""
    return c.in_head(f"sacct -a -n -X -P -D -j {job} -o {fields}")[1].strip().splitlines()


def done(c: Cluster, *jobs: str) -> bool:
    return all(sacct(c, j)[-1:] == ["COMPLETED"] for j in jobs)


def test_the_policy_reaches_slurmctld_and_slurmdbd_and_a_second_run_changes_nothing(cluster):
    c, planned = cluster
    conf = c.in_head("scontrol show config")[1]
    for line in ("PriorityType            = priority/multifactor", "PriorityWeightFairShare = 100000",
                 "PriorityCalcPeriod      = 00:01:00", "PreemptType             = preempt/qos",
                 "PreemptMode             = REQUEUE",
                 "AccountingStorageEnforce = associations,limits,qos,safe"):  # fmt: skip
        assert line in conf, line
    assoc = c.in_head("sacctmgr -n -P show assoc format=account,user,parentname,fairshare,qos,defaultqos")[1]
    assert "physics||root|1|high,normal,scavenger|normal" in assoc.splitlines(), assoc
    assert "physics|alice||1|high,normal,scavenger|normal" in assoc.splitlines(), assoc
    assert "chem|bob||1|high,normal,scavenger|normal" in assoc.splitlines(), assoc
    qos = c.in_head("sacctmgr -n -P show qos format=name,priority,maxwall,maxtrespu,preempt,usagefactor")[1]
    assert {"normal|100|||scavenger|1.000000", "high|200|01:00:00|gres/gpu=2||1.000000",
            "scavenger|0||||0.000000"} <= set(qos.splitlines()), qos  # fmt: skip
    again = run_head_steps(c.lab, planned) | {n: run_step(c.lab, planned.steps[n]).stdout for n in AFTER_THE_HEAD}
    for name, out in again.items():
        assert out.rstrip().endswith("hpc: result=unchanged"), f"{name}:\n{out}"


def test_fair_share_starts_the_lighter_groups_job_first(cluster):
    c, _ = cluster
    used = submit(c, "alice", f"{ALL_GPUS} -t 5 --wrap 'sleep 20'")
    labmod.wait_until(lambda: done(c, used), "alice's job to use the GPUs", 120)
    # what it cost: its billing TRES is its partition's weights applied to what it held (a GPU-hour
    # costs more than a CPU-hour: the weights slurmctld itself parsed from the rendered slurm.conf)
    part, alloc = sacct(c, used, "Partition,AllocTRES")[-1].split("|")
    weights = re.search(r"TRESBillingWeights=(\S+)", c.in_head(f"scontrol -o show partition {part}")[1])
    assert weights, part
    weight = dict(kv.split("=", 1) for kv in weights.group(1).split(","))
    held = dict(kv.split("=", 1) for kv in alloc.split(","))
    assert set(weight) == {"CPU", "GRES/gpu"} and float(weight["GRES/gpu"]) > float(weight["CPU"]), weight
    cost = int(held["cpu"]) * float(weight["CPU"]) + int(held["gres/gpu"]) * float(weight["GRES/gpu"])
    assert int(held["billing"]) == int(cost), (weight, held)

    def usage() -> dict[str, int]:
        rows = c.in_head("sshare -a -n -P -o account,user,rawusage")[1].splitlines()
        return {r.split("|")[1]: int(r.split("|")[2]) for r in rows if r.split("|")[1] in ACCOUNTS}

    labmod.wait_until(lambda: usage().get("alice", 0) > 0 and usage().get("bob") == 0, "alice's usage", 90)
    blocker = submit(c, "", f"{ALL_GPUS} -t 5 --wrap 'sleep 300'")  # holds every GPU until cancelled
    labmod.wait_until(lambda: sacct(c, blocker)[-1:] == ["RUNNING"], "the blocker", 60)
    first = submit(c, "alice", f"{ALL_GPUS} -t 5 --wrap 'sleep 5'")  # submitted first, but her group used more
    second = submit(c, "bob", f"{ALL_GPUS} -t 5 --wrap 'sleep 5'")

    def factors() -> dict[str, int]:  # the fair-share part of each pending job's priority
        return {r.split()[0]: int(r.split()[1]) for r in c.in_head("sprio -h -o '%i %F'")[1].splitlines()}

    # the factors are recomputed every calcPeriodMinutes (1): wait for Slurm's own numbers
    rows = labmod.wait_until(lambda: (f := factors()) and f.get(second, 0) > 0 and f, "the fair-share factors", 150)
    print(f"sprio (job, fair-share priority): {rows}")
    assert rows[second] > rows[first], rows  # the fair-share factor behind the order
    c.in_head(f"scancel {blocker}")
    labmod.wait_until(lambda: done(c, first, second), "both jobs", 180)
    start = {j: sacct(c, j, "Start")[-1] for j in (first, second)}
    assert start[second] < start[first], start  # bob's job started first


def pending_reason(c, job: str, timeout: float = 60) -> str:  # type: ignore[no-untyped-def]
    """A pending job's reason once a scheduling pass has looked at it: until then squeue says
    "None" (a job just submitted), which is no reason to assert on."""
    return str(labmod.wait_until(lambda: (r := c.in_head(f"squeue -h -j {job} -o %r")[1].strip()) not in ("", "None")
                                 and r, f"a scheduling pass over job {job}", timeout))  # fmt: skip


def test_a_job_over_its_qos_gpu_limit_pends_with_slurms_reason(cluster):
    c, _ = cluster
    one = submit(c, "alice", "--qos=high -N1 --gres=gpu:a100:2 -t 5 --wrap 'sleep 15'")
    two = submit(c, "alice", "--qos=high -N1 --gres=gpu:a100:2 -t 5 --wrap 'sleep 5'")  # 4 GPUs: over her 2
    labmod.wait_until(lambda: sacct(c, one)[-1:] == ["RUNNING"], "the first job", 60)
    reason = pending_reason(c, two)
    assert reason == "QOSMaxGRESPerUser", reason  # although two GPUs are free
    labmod.wait_until(lambda: done(c, one, two), "both jobs, one after the other", 120)
    assert sacct(c, two, "Start")[-1] >= sacct(c, one, "End")[-1]


def test_a_normal_job_preempts_a_scavenger_job_which_is_requeued_and_completes(cluster):
    c, _ = cluster
    scavenger = submit(c, "alice", f"--qos=scavenger --requeue {ALL_GPUS} -t 5 --wrap 'sleep 30'")
    labmod.wait_until(lambda: sacct(c, scavenger)[-1:] == ["RUNNING"], "the scavenger job", 60)
    normal = submit(c, "bob", "-N1 --gres=gpu:a100:2 -t 5 --wrap 'sleep 10'")
    labmod.wait_until(lambda: sacct(c, normal)[-1:] in (["RUNNING"], ["COMPLETED"]), "bob's job to start", 60)
    assert sacct(c, scavenger)[0] == "PREEMPTED"
    assert "Restarts=1" in c.in_head(f"scontrol show job {scavenger}")[1]
    # requeued, not lost: it runs again once its first credential has expired (cred_expire, 120 s)
    labmod.wait_until(lambda: done(c, scavenger), "the requeued job to complete", 300)
    assert sacct(c, scavenger) == ["PREEMPTED", "COMPLETED"] and done(c, normal)


def test_a_reservation_keeps_its_nodes_free_and_goes_with_the_stack(cluster):
    c, _ = cluster
    start = (dt.datetime.now(dt.UTC) + dt.timedelta(minutes=3)).strftime("%Y-%m-%dT%H:%M:%S")
    reservation = {"name": "maint", "nodes": ["w2"], "start": start, "duration": "1:00:00"}
    held = planned_with(scheduling={"reservations": [reservation]})
    out = run_step(c.lab, held.steps["head-slurm-reservations"]).stdout
    assert "hpc: changed: created reservation maint: nodes w2" in out, out
    short = submit(c, "alice", "-w w2 -t 1 --wrap 'sleep 2'")  # ends before the window opens
    long = submit(c, "alice", "-w w2 -t 30 --wrap 'sleep 2'")  # would run into it
    labmod.wait_until(lambda: done(c, short), "the short job", 120)
    # w2 runs nothing, yet the long job waits: Slurm says the node is not available (the
    # reservation; its wording moves between "May be reserved for other job" and "Reserved for
    # maintenance", and sinfo shows w2 idle or planned)
    for _ in range(3):
        assert c.in_head("squeue -h -t R -w w2 -o %i")[1].strip() == ""
        reason = pending_reason(c, long)
        assert reason.startswith("ReqNodeNotAvail") and sacct(c, long) == ["PENDING"], reason
        time.sleep(10)
    both = planned_with(scheduling={"reservations": [reservation | {"nodes": ["w1", "w2"]}]})
    out = run_step(c.lab, both.steps["head-slurm-reservations"]).stdout
    assert "hpc: changed: changed reservation maint: nodes w1,w2" in out, out
    assert "Nodes=w[1-2]" in c.in_head("scontrol show reservation maint")[1]
    assert run_step(c.lab, both.steps["head-slurm-reservations"]).stdout.rstrip().endswith("result=unchanged")
    gone = planned_with(scheduling={"reservations": []})
    out = run_step(c.lab, gone.steps["head-slurm-reservations"]).stdout
    assert "hpc: changed: deleted reservation maint" in out, out
    labmod.wait_until(lambda: done(c, long), "the long job once the window is gone", 120)


def test_the_usage_report_gives_gpu_minutes_per_account(cluster):
    """What each account's jobs held, from the job records (GPUs x elapsed), as the README's
    "today so far" command computes it; and Slurm's own report runs for the cluster. (`sreport`
    reports only complete hours, the rollup's: a test cannot wait for the next one.)"""
    c, _ = cluster
    rc, out = c.in_head(README_USAGE)
    assert rc == 0, out
    minutes = {a: float(m) for a, m in (line.split() for line in out.splitlines())}
    print(f"GPU-minutes per account, from the job records: {minutes}")
    for account in ("physics", "chem"):
        rows = c.in_head(f"sacct -a -n -X -P -D -A {account} -S now-1day -o AllocTRES,ElapsedRaw")[1].splitlines()
        held = sum(int(tres.split("gres/gpu=")[1].split(",")[0]) * int(s) for tres, s in
                   (r.split("|") for r in rows) if "gres/gpu=" in tres)  # fmt: skip
        assert held > 0 and abs(minutes[account] - held / 60) < 0.01, (account, minutes, held)
    rc, report = c.in_head("sreport -P cluster AccountUtilizationByUser -T gres/gpu -t hours start=now-1day end=now")
    assert rc == 0 and "Cluster|Account|Login|Proper Name|TRES Name|Used" in report, report


def test_a_renamed_account_keeps_its_history(cluster):
    c, _ = cluster
    before = c.in_head("sacct -a -n -X -P -A chem -S now-1day -o JobID")[1].split()
    assert before
    renamed = planned_with(
        scheduling={"accounts": [{"name": "physics"}, {"name": "chemistry"}]},
        accounts={"alice": "physics", "bob": "chemistry"},
    )
    out = run_step(c.lab, renamed.steps["head-slurm-accounting"]).stdout
    for line in ("added account chemistry", "added bob to account chemistry", "removed bob from account chem",
                 "removed account chem"):  # fmt: skip
        assert f"hpc: changed: {line}" in out, out
    assert c.in_head("sacctmgr -n -P show user bob format=defaultaccount")[1].strip() == "chemistry"
    assert c.in_head("sacct -a -n -X -P -A chem -S now-1day -o JobID")[1].split() == before  # history stays
    job = submit(c, "bob", "-t 1 --wrap true")
    labmod.wait_until(lambda: done(c, job), "bob's job in his new account", 60)
    assert sacct(c, job, "Account") == ["chemistry"]
