"""``make test``'s lanes (tests/lanes.py): every test runs in exactly one lane, a failing lane fails
the run, and an interrupted run stops its lanes' pytest processes."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

from tests import lanes


def collected(*args: str) -> list[str]:
    out = subprocess.run(
        [sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider", *args],
        cwd=lanes.ROOT, capture_output=True, text=True, check=True,
    ).stdout  # fmt: skip
    return [line for line in out.splitlines() if "::" in line]


def test_the_lanes_select_every_test_once():
    everything = collected("tests")
    per_lane = {name: collected(*args) for name, args in lanes.lane_args().items()}
    assert all(per_lane.values()), f"a lane selects nothing: {per_lane.keys()}"
    together = [t for tests in per_lane.values() for t in tests]
    assert sorted(together) == sorted(everything)
    assert len(set(together)) == len(together)
    assert any(t.startswith("tests/integration/test_slurm.py::") for t in per_lane["slurm"])
    assert not any(t.startswith("tests/integration/test_slurm.py::") for t in per_lane[lanes.REST])


def write_suite(path: Path, body: str) -> str:
    path.write_text(f"import time\n\n\ndef test_it():\n    {body}\n")
    return str(path)


def test_a_failing_lane_fails_the_run_and_each_line_names_its_lane(tmp_path, capsys):
    good = write_suite(tmp_path / "test_good.py", "assert True")
    bad = write_suite(tmp_path / "test_bad.py", "assert 1 == 2")
    assert lanes.run({"a": [good], "b": [good]}, ["-p", "no:cacheprovider"], build=tmp_path) == 0
    assert lanes.run({"a": [good], "b": [bad]}, ["-p", "no:cacheprovider"], build=tmp_path) == 1
    out = capsys.readouterr().out
    assert "[b] " in out and "assert 1 == 2" in out
    table = (tmp_path / "test-lanes.txt").read_text().splitlines()
    assert [row.split()[2:4] for row in table[:2]] == [["a", "rc=0"], ["b", "rc=1"]]
    assert "1 failed" in table[1]
    assert table[2].split()[:2] == ["b", "FAILED"] and "test_bad.py::test_it" in table[2]  # named in CI's tail
    assert len(table) == 3


def test_an_interrupted_run_stops_every_lane(tmp_path):
    slow = write_suite(tmp_path / "test_slow.py", "time.sleep(120)")
    script = (
        "import sys; from pathlib import Path; from tests import lanes\n"
        f"sys.exit(lanes.run({{'a': [{slow!r}], 'b': [{slow!r}]}}, ['-p', 'no:cacheprovider'],"
        f" build=Path({str(tmp_path)!r})))\n"
    )
    runner = subprocess.Popen([sys.executable, "-c", script], cwd=lanes.ROOT, stdout=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 60
    pids: list[int] = []
    while time.monotonic() < deadline and len(pids) < 2:  # both lanes' pytest have started the test
        pattern = f"-m pytest -o cache_dir=.* {slow}"
        out = subprocess.run(["pgrep", "-f", "--", pattern], capture_output=True, text=True).stdout
        pids = [int(p) for p in out.split()]
        time.sleep(0.2)
    assert len(pids) == 2, f"the lanes did not start: {pids}"
    time.sleep(1.0)  # inside the test's sleep
    runner.send_signal(signal.SIGTERM)
    assert runner.wait(30) == 1
    for pid in pids:
        assert not Path(f"/proc/{pid}").exists() or _zombie(pid), f"lane pytest {pid} still runs"
    assert "KeyboardInterrupt" in (runner.stdout.read() if runner.stdout else "")


def test_an_interrupt_the_lane_loses_is_repeated_until_pytest_takes_it(tmp_path, monkeypatch):
    # The first SIGINT is swallowed, as Python does with a KeyboardInterrupt raised in a weakref
    # callback; the sleep then goes on (PEP 475). Only a repeated SIGINT stops the lane.
    deaf, swallowed = tmp_path / "test_deaf.py", tmp_path / "swallowed"
    deaf.write_text(
        "import signal, time\n\n\n"
        "def test_it():\n"
        "    def swallow(signum, frame):\n"
        f"        open({str(swallowed)!r}, 'w').close()\n"
        "        signal.signal(signal.SIGINT, signal.default_int_handler)\n"
        "    signal.signal(signal.SIGINT, swallow)\n"
        "    print('ready', flush=True)\n"
        "    time.sleep(120)\n"
    )
    monkeypatch.setattr(lanes, "INTERRUPT_REPEAT_S", 1.0)
    lane = lanes.Lane("a", [str(deaf), "-s"], ["-p", "no:cacheprovider"],
                      threading.Lock(), tmp_path)  # fmt: skip
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and lane.proc.poll() is None and not any("ready" in x for x in lane.tail):
        time.sleep(0.1)
    started = time.monotonic()
    lane.interrupt()
    lane.interrupt()  # a second call (SIGTERM, then the runner's finally) starts no second stream
    try:
        assert lane.proc.wait(30) != 0
    finally:
        if lane.proc.poll() is None:  # only a test's own sleeping pytest: no lab to tear down
            os.killpg(lane.proc.pid, signal.SIGKILL)
    lane.reader.join(5)
    assert swallowed.exists(), f"the first SIGINT was not the one swallowed: {lane.tail}"
    assert lane.interrupted.is_set() and any("KeyboardInterrupt" in line for line in lane.tail)
    assert time.monotonic() - started < 20


def _zombie(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0] == "Z"
    except OSError:
        return True


def test_the_suites_times_of_every_lane_are_merged(tmp_path):
    a, b = lanes.Lane.__new__(lanes.Lane), lanes.Lane.__new__(lanes.Lane)
    a.times, b.times = tmp_path / "a.json", tmp_path / "b.json"
    a.times.write_text('{"integration/test_slurm": 500.0}')
    b.times.write_text('{"unit": 80.0, "integration/test_fastchat": 170.0}')
    assert list(lanes.merge_times([a, b]).items()) == [
        ("integration/test_slurm", 500.0), ("integration/test_fastchat", 170.0), ("unit", 80.0)
    ]  # fmt: skip
