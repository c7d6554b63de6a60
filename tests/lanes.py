"""``make test``'s pytest, in lanes: independent pytest processes running side by side.

The real-daemon suites mostly wait (on dockerd, slurmctld, glusterd, SSH), so on two cores the
Slurm suites run in one lane while every other suite runs in the other: a suite never waits on
another lane. Each lane is an ordinary pytest run of its own paths; the last lane takes every
test the others do not (``--ignore`` of their paths), so a new test file always runs in exactly
one lane. Labs are already isolated per process (namespaces named by PID, private temp dirs), and
each lane has its own pytest cache and timing file.

Every line a lane prints is shown as it comes, prefixed ``[lane]``; at the end a table gives each
lane's wall time, exit status and pytest's summary line, then every failed test's name (CI keeps
only the end of a run's output), the suites' times are merged into
``build/test-times.json`` and the lanes' table written to ``build/test-lanes.txt`` (``.ci/run``
prints both).
The exit status is 0 only when every lane passed. ``HPC_LANES=1`` runs the lanes one after
another instead (to tell a lane interaction from a failure of the test itself).

Run: ``python -m tests.lanes [pytest args...]`` (extra arguments go to every lane).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import IO

ROOT = Path(__file__).resolve().parent.parent
BUILD = ROOT / "build"

# Lane name -> its test paths. The last lane (``REST``) runs everything the others do not.
LANES: dict[str, list[str]] = {
    "slurm": [
        "tests/integration/test_slurm.py",
        "tests/integration/test_scheduling.py",
        "tests/integration/test_directory.py",  # Slurm containers too (login node, SSSD)
        # the Slurm head and a worker on two VMs (about 8 min warm, 10 more cold for the image
        # layer); here, not beside the other VM suite in the rest lane, to balance the lanes
        "tests/vm/test_cgroup_v2.py",
    ],
}
REST = "rest"


def lane_args() -> dict[str, list[str]]:
    """Each lane's pytest arguments (paths and ignores): together they select every test once."""
    taken = [p for paths in LANES.values() for p in paths]
    return {**LANES, REST: ["tests", *(f"--ignore={p}" for p in taken)]}


# An interrupt is repeated this often until the lane's pytest reports it (see Lane.interrupt).
INTERRUPT_REPEAT_S = 5.0


def _pump(name: str, stream: IO[bytes], lane: Lane, lock: threading.Lock) -> None:
    for raw in iter(stream.readline, b""):
        line = raw.decode(errors="replace").rstrip("\n")
        lane.tail.append(line)
        del lane.tail[:-40]
        if line.startswith(("FAILED ", "ERROR ")):  # pytest's short summary: the tests that failed
            lane.failed.append(line[:300])
        if "KeyboardInterrupt" in line:  # pytest took the interrupt: it is tearing its labs down
            lane.interrupted.set()
        with lock:
            sys.stdout.write(f"[{name}] {line}\n")
            sys.stdout.flush()


def _summary(tail: list[str]) -> str:
    """pytest's last ``=== ... ===`` line (``12 passed, 1 failed in 3.2s``)."""
    for line in reversed(tail):
        if line.startswith("=") and (" passed" in line or " failed" in line or " error" in line or "no tests" in line):
            return line.strip("= ")
    return tail[-1] if tail else "(no output)"


class Lane:
    def __init__(self, name: str, args: list[str], extra: list[str], lock: threading.Lock, build: Path):
        self.name = name
        self.times = build / f"test-times-{name}.json"
        self.times.unlink(missing_ok=True)
        argv = [sys.executable, "-m", "pytest", "-o", f"cache_dir=build/pytest-cache-{name}", *args, *extra]
        env = {**os.environ, "HPC_TEST_TIMES": str(self.times), "PYTHONUNBUFFERED": "1"}
        self.started = time.monotonic()
        self.proc = subprocess.Popen(
            argv, cwd=ROOT, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
            start_new_session=True,  # its own process group: an interrupt reaches the whole lane
        )  # fmt: skip
        self.tail: list[str] = []
        self.failed: list[str] = []
        self.interrupted = threading.Event()
        self._interrupter: threading.Thread | None = None
        assert self.proc.stdout is not None
        pump_args = (name, self.proc.stdout, self, lock)
        self.reader = threading.Thread(target=_pump, args=pump_args, daemon=True)
        self.reader.start()
        self.seconds = 0.0

    def wait(self) -> int:
        rc = self.proc.wait()
        self.reader.join()
        self.seconds = time.monotonic() - self.started
        return rc

    def interrupt(self) -> None:
        """SIGINT to the lane's pytest: it tears its labs down (stops its daemons by PID) and exits.

        One SIGINT can be lost: Python reports a KeyboardInterrupt raised inside a weakref callback
        or a ``__del__`` as "Exception ignored" and pytest goes on. So the SIGINT is repeated every
        ``INTERRUPT_REPEAT_S`` until pytest prints its ``KeyboardInterrupt``, and then never again
        (a second one would cut the labs' teardown short); never a SIGKILL, for the same reason."""
        if self.proc.poll() is None and self._interrupter is None:
            self._interrupter = threading.Thread(target=self._interrupt_until_taken, daemon=True)
            self._interrupter.start()

    def _interrupt_until_taken(self) -> None:
        while self.proc.poll() is None and not self.interrupted.is_set():
            try:
                os.killpg(self.proc.pid, signal.SIGINT)
            except ProcessLookupError:
                return
            if self.interrupted.wait(INTERRUPT_REPEAT_S):
                return


def merge_times(lanes: list[Lane]) -> dict[str, float]:
    """Every lane's suite times in one table, slowest first."""
    merged: dict[str, float] = {}
    for lane in lanes:
        if lane.times.exists():
            merged.update(json.loads(lane.times.read_text()))
    return dict(sorted(merged.items(), key=lambda kv: -kv[1]))


def run(lanes_args: dict[str, list[str]], extra: list[str], serial: bool = False, build: Path = BUILD) -> int:
    """Run each lane's pytest (side by side unless ``serial``); 0 only when every lane passed.
    The merged times and the lanes' table go to ``build``."""
    build.mkdir(exist_ok=True)
    lock = threading.Lock()
    lanes: list[Lane] = []
    codes: dict[str, int] = {}

    def stop(signum: int, _frame: object) -> None:
        for lane in lanes:
            lane.interrupt()

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    try:
        for name, args in lanes_args.items():
            lanes.append(Lane(name, args, extra, lock, build))
            if serial:
                codes[name] = lanes[-1].wait()
        for lane in lanes:
            if lane.name not in codes:
                codes[lane.name] = lane.wait()
    finally:
        for lane in lanes:
            lane.interrupt()
    rows = [f"{lane.seconds:8.0f} s  {lane.name:6s}  rc={codes[lane.name]}  {_summary(lane.tail)}" for lane in lanes]
    # the failed tests' names under the table: CI keeps only the end of a run's output
    rows += [f"          {lane.name:6s}  {line}" for lane in lanes for line in lane.failed]
    print(f"\n=== lanes ({'one after another' if serial else 'side by side'})", *rows, sep="\n")
    (build / "test-times.json").write_text(json.dumps(merge_times(lanes), indent=1) + "\n")
    (build / "test-lanes.txt").write_text("".join(f"{row}\n" for row in rows))
    # pytest's 5 (nothing collected) in a lane is a failure too: a lane that runs nothing is a bug.
    return 0 if all(rc == 0 for rc in codes.values()) else 1


def main(extra: list[str]) -> int:
    return run(lane_args(), extra, serial=os.environ.get("HPC_LANES") == "1")


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
