"""The scheduling policy (hpc:slurm.scheduling): its renderers and its one-line refusals.

The behaviour on real daemons (fair share, QoS limits, preemption, reservations, the usage
report) is proven in tests/integration/test_scheduling.py.
"""

from __future__ import annotations

import copy

import pytest
import yaml

from components.scripts import headers
from components.slurm import render_scheduling as rs
from offline import plan
from stacks.config import ConfigError

DEV = yaml.safe_load((plan.ROOT / "Pulumi.dev.yaml").read_text())["config"]
PEOPLE = {
    "hpc:groups": [{"name": "physics", "gid": 30001}, {"name": "chem", "gid": 30002}],
    "hpc:users": [
        {"name": "alice", "uid": 20001, "group": "physics"},
        {"name": "bob", "uid": 20002, "group": "chem"},
    ],
}


def with_scheduling(scheduling: dict) -> dict:
    slurm = copy.deepcopy(DEV["hpc:slurm"])
    slurm["scheduling"] = scheduling
    return {"hpc:slurm": slurm, **PEOPLE}


def step(result: plan.PlanRun, name: str) -> str:
    from components.scripts import unwrap
    from offline.mocks import plain

    [r] = [r for r in result.of_type("command:remote:Command") if r.name == name]
    return unwrap(plain(r.inputs)["create"])


def test_defaults_weigh_fair_share_first_and_let_normal_preempt_scavenger():
    text = rs.conf_lines(rs.Scheduling(enforce=True))
    assert text == (
        "PriorityType=priority/multifactor\nPriorityDecayHalfLife=7-0\nPriorityMaxAge=7-0\nPriorityCalcPeriod=5\n"
        "PriorityWeightFairshare=100000\nPriorityWeightAge=1000\nPriorityWeightQOS=10000\nPriorityWeightJobSize=0\n"
        "PriorityWeightPartition=0\nPreemptType=preempt/qos\nPreemptMode=REQUEUE\n"
        "AccountingStorageEnforce=associations,limits,qos,safe\n"
    )
    assert "Preempt" not in rs.conf_lines(rs.Scheduling(preemption="off"))


@pytest.mark.parametrize(
    ("value", "minutes"),
    [("90", 90), ("90:30", 91), ("8:00:00", 480), ("7-0", 10080), ("1-12", 2160), ("1-2:30", 1590), ("0:00:01", 1)],
)
def test_slurm_durations_in_minutes(value, minutes):
    assert rs.duration_minutes(value) == minutes


def test_a_reservation_ends_its_duration_after_its_start():
    r = rs.Reservation("maint", ("w1",), "2026-12-31T22:00:00", "1-4:30")
    assert r.end == "2027-01-02T02:30:00"


def test_a_gpu_hour_costs_its_nodes_cpus_per_gpu_unless_the_stack_says():
    dev = plan.run("dev", with_scheduling({}))
    conf = next(r for r in dev.of_type("command:remote:Command") if r.name == "rpi1-slurm-conf")
    from offline.mocks import plain

    stdin = plain(conf.inputs)["stdin"]
    assert "PartitionName=cpu Nodes=rpi2,rpi3 Default=YES MaxTime=INFINITE State=UP TRESBillingWeights=CPU=1\n" in stdin
    assert rs.billing(1.0, 0.25, 28.0) == "CPU=1,Mem=0.25G,GRES/gpu=28"


def test_the_accounting_step_lists_qos_accounts_and_users_parents_first():
    s = rs.Scheduling(
        qos=(rs.Qos("normal", 100, preempts=("scavenger",)), rs.Qos("high", 200, "1-0", max_gpus_per_user=4)),
        accounts=(rs.Account("nlp", parent="cs", shares=3, max_gpus=8), rs.Account("cs", shares=2)),
        users=(("alice", "nlp"),),
    )
    text = rs.accounting("head", "slurm-head", "itest", s).create
    assert "normal|100|-1|gres/gpu=-1|gres/gpu=-1|gres/gpu=-1|1|scavenger\n" in text
    assert "high|200|1-0|gres/gpu=4|gres/gpu=-1|gres/gpu=-1|1|\n" in text
    tree = text.split("<<'HPC_ACCOUNTS'\n")[1]
    assert tree.index("cs|root|2|normal|normal|gres/gpu=-1") < tree.index("nlp|cs|3|normal|normal|gres/gpu=8")
    assert "alice|nlp\nHPC_WANTED" in text
    assert headers(text) | {"step": ""} == {
        "step": "",
        "host": "head",
        "accounts": "nlp,cs",
        "gpu-caps": "nlp:8",
        "holds-all-gpus": "-",
    }


def test_an_accounts_cap_is_its_own_or_the_sum_of_its_qos_caps():
    s = rs.Scheduling(qos=(rs.Qos("normal", max_gpus_per_account=4), rs.Qos("long", max_gpus_per_account=2)))
    assert s.gpu_cap(rs.Account("a", qos=("normal", "long"))) == 6
    assert s.gpu_cap(rs.Account("a", qos=("normal",), max_gpus=1)) == 1
    assert s.gpu_cap(rs.Account("a", qos=("normal", "scavenger"))) is None  # an unlisted QoS has no cap


def test_the_plan_puts_the_stacks_policy_on_the_head():
    result = plan.run("dev", with_scheduling({"accounts": [{"name": "physics", "shares": 3}, {"name": "chem"}]}))
    text = step(result, "rpi1-slurm-accounting")
    assert "physics|root|3|normal,scavenger|normal|gres/gpu=-1\n" in text
    assert "alice|physics\nbob|chem\n" in text
    assert "scavenger|0|-1|gres/gpu=-1|gres/gpu=-1|gres/gpu=-1|0|\n" in text
    reservations = step(result, "rpi1-slurm-reservations")
    assert "<<'HPC_RESERVATIONS'\nHPC_RESERVATIONS" in reservations  # none: any this project made are removed


def test_the_accounting_step_keeps_its_urn_from_the_people_component():
    result = plan.run("dev", with_scheduling({}))
    [r] = [r for r in result.of_type("command:remote:Command") if r.name == "rpi1-slurm-accounting"]
    assert r.parent.endswith("hpc:slurm:SlurmHead::rpi1")
    assert r.options["aliases"] == [{"spec": {"parentUrn": "urn:pulumi:dev::hpc-cluster::hpc:people:People::people"}}]


REFUSALS = [
    ({"qos": [{"name": "normal", "preempts": ["nosuch"]}]}, "hpc:slurm.scheduling.qos[normal].preempts", "not a QoS"),
    ({"qos": [{"name": "normal", "preempts": ["normal"]}]}, "hpc:slurm.scheduling.qos[normal].preempts", "itself"),
    ({"qos": [{"name": "a"}, {"name": "a"}]}, "hpc:slurm.scheduling.qos", "listed 2 times"),
    (
        {"qos": [{"name": "normal", "preempts": ["scavenger"]}, {"name": "scavenger"}], "preemption": "off"},
        "hpc:slurm.scheduling.qos[normal].preempts",
        "preemption is off",
    ),
    ({"accounts": [{"name": "physics"}]}, "hpc:users[bob].account", "'chem' is not in hpc:slurm.scheduling.accounts"),
    (
        {"accounts": [{"name": "physics", "parent": "chem"}, {"name": "chem", "parent": "physics"}]},
        "hpc:slurm.scheduling.accounts[physics].parent",
        "its own ancestor",
    ),
    (
        {"accounts": [{"name": "physics", "parent": "sciences"}, {"name": "chem"}]},
        "hpc:slurm.scheduling.accounts[physics].parent",
        "'sciences' is not an account",
    ),
    (
        {"accounts": [{"name": "physics", "qos": ["normal"], "defaultQos": "scavenger"}, {"name": "chem"}]},
        "hpc:slurm.scheduling.accounts[physics].defaultQos",
        "not one of the QoS it may use",
    ),
    (
        {"reservations": [{"name": "m", "nodes": ["rpi1"], "start": "2027-01-01T08:00", "duration": "8:00:00"}]},
        "hpc:slurm.scheduling.reservations[m].nodes",
        "'rpi1' is not a Slurm worker",
    ),
    (
        {"reservations": [{"name": "m", "start": "next monday", "duration": "8:00:00"}]},
        "hpc:slurm.scheduling.reservations[m].start",
        "a start time is YYYY-MM-DDTHH:MM[:SS]",
    ),
    (
        {"reservations": [{"name": "m", "start": "2027-01-01T08:00+02:00", "duration": "8:00:00"}]},
        "hpc:slurm.scheduling.reservations[m].start",
        "without a time zone",
    ),
    (
        {"reservations": [{"name": "m", "start": "2027-01-01T08:00", "duration": "8h"}]},
        "hpc:slurm.scheduling.reservations[m].duration",
        "a Slurm duration is minutes",
    ),
    ({"priority": {"fairshare": 2**32}}, "hpc:slurm.scheduling.priority.fairshare", "4294967295"),
]


@pytest.mark.parametrize(("scheduling", "key", "fragment"), REFUSALS, ids=[r[1] + ":" + r[2] for r in REFUSALS])
def test_a_bad_policy_is_refused_in_one_line_naming_the_key(scheduling, key, fragment):
    with pytest.raises(ConfigError) as err:
        plan.run("dev", with_scheduling(scheduling))
    assert any(k == key and fragment in m for k, m in err.value.problems), err.value.problems
    assert err.value.registered == []
