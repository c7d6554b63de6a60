"""The deployment model behind make bench: critical path and --parallel scheduling."""

from benchmarks import run as bench
from offline.plan import PlanRun, Record


def rec(name, deps=(), custom=True):
    return Record(
        urn=name,
        type="command:remote:Command",
        name=name,
        custom=custom,
        parent=None,
        provider=None,
        dependencies=list(deps),
        property_dependencies={},
        inputs={},
        outputs={},
        options={},
    )


def plan_of(*records):
    return PlanRun("p", "s", {r.urn: r for r in records}, {})


def test_duration_table_by_step_suffix_and_type():
    assert bench.duration(rec("gpu1-drain")) == 5
    assert bench.duration(rec("x-glusterd")) == 60
    assert bench.duration(rec("component", custom=False)) == 0


def test_critical_path_is_the_longest_chain_not_the_sum():
    # a fan-out of 100 independent 30 s mounts after a 60 s glusterd: 90 s, not 3060 s
    records = [rec("s-glusterd")] + [rec(f"h{i}-mount-fstab", ["s-glusterd"]) for i in range(100)]
    seconds, chain = bench.critical_path(plan_of(*records))
    assert seconds == 90 and chain[0] == "s-glusterd" and chain[1].endswith("-mount-fstab")


def test_parallel_slots_serialize_the_fan_out():
    records = [rec("s-glusterd")] + [rec(f"h{i}-mount-fstab", ["s-glusterd"]) for i in range(32)]
    assert bench.parallel_makespan(plan_of(*records), 16) == 60 + 2 * 30
    assert bench.parallel_makespan(plan_of(*records), 64) == 90
