"""The GPU checks around every job (components/slurm/scripts/gpu-job-check.sh), run for real by bash.

Stand-ins, for what cannot run here: ``nvidia-smi`` (no GPU: its ``-q`` sections and CSV query
formats as NVIDIA documents them, not recorded from a real GPU; what it shows may change after
a number of calls, as a dying process does) and ``scontrol`` (the controller's view of the node,
and a record of every update asked for). The decisions, the GPU matching and the waiting are
the program itself, with the environment slurmd gives a prolog (SLURM_JOB_ID, SLURM_JOB_GPUS).
"""

from __future__ import annotations

import subprocess
import time
from pathlib import Path

import pytest

from components.slurm import render_health as rh
from tests.unit.test_health_check import SCONTROL  # the controller stand-in both checks talk to

BUS = ["00000000:17:00.0", "00000000:18:00.0", "00000000:3B:00.0"]
# Device numbers that differ from nvidia-smi's indexes: a container shown /dev/nvidia2 and 3 only.
MINORS = [2, 3, 5]

NVIDIA_SMI = r"""#!/bin/bash
d=$(dirname "$0")
n=$(cat "$d/calls" 2>/dev/null || echo 0)
case "$1" in
  -q) cat "$d/q.txt"; echo $((n + 1)) >"$d/calls" ;;
  --query-gpu=pci.bus_id,memory.used) cat "$d/mem.csv" ;;
  --query-compute-apps=gpu_bus_id,pid,process_name,used_gpu_memory)
    if [ -e "$d/apps-until" ] && [ "$n" -gt "$(cat "$d/apps-until")" ]; then exit 0; fi
    cat "$d/apps.csv" ;;
  *) echo "stand-in: unexpected $*" >&2; exit 2 ;;
esac
"""


def q_text() -> str:
    """nvidia-smi -q's layout: a section per GPU opened by its bus id, Minor Number inside it."""
    return "".join(
        f"GPU {bus}\n    Product Name                          : NVIDIA A100 80GB PCIe\n"
        f"    Minor Number                          : {minor}\n    GPU UUID                              : GPU-{i}\n"
        for i, (bus, minor) in enumerate(zip(BUS, MINORS, strict=True))
    )


class Node:
    def __init__(self, tmp: Path, phase: str, gpus: int = 3, wait_s: int = 4):
        self.bin = tmp / "bin"
        self.bin.mkdir()
        for name, text in {"nvidia-smi": NVIDIA_SMI, "scontrol": SCONTROL}.items():
            (self.bin / name).write_text(text)
            (self.bin / name).chmod(0o755)
        self.file("q.txt", q_text())
        self.memory({})
        self.apps([])
        self.controller("ALLOCATED")
        self.program = tmp / "50-hpc-gpu"
        self.program.write_text(rh.job_check("w1", gpus, phase, wait_s=wait_s))
        self.program.chmod(0o755)

    def file(self, name: str, text: str) -> None:
        (self.bin / name).write_text(text)

    def memory(self, used: dict[str, int]) -> None:
        self.file("mem.csv", "".join(f"{b}, {used.get(b, 1)}\n" for b in BUS))

    def apps(self, rows: list[str]) -> None:
        self.file("apps.csv", "".join(r + "\n" for r in rows))

    def controller(self, state: str, reason: str = "") -> None:
        tail = f" Reason={reason} [root@2026-12-04T10:00:00]" if reason else ""
        self.file("node", f"NodeName=w1 Arch=x86_64 CPUs=32 State={state} ThreadsPerCore=1{tail}\n")

    def run(self, job_gpus: str | None = "2,3") -> tuple[int, str, list[str]]:
        updates = self.bin / "updates"
        updates.unlink(missing_ok=True)
        env = {"PATH": f"{self.bin}:/usr/bin:/bin", "SLURM_JOB_ID": "42"}
        if job_gpus is not None:
            env["SLURM_JOB_GPUS"] = job_gpus
        proc = subprocess.run([str(self.program)], env=env, capture_output=True, text=True, timeout=60)
        asked = updates.read_text().splitlines() if updates.exists() else []
        return proc.returncode, proc.stdout + proc.stderr, asked


def drained_for(asked: list[str]) -> str:
    assert len(asked) == 1 and "state=drain" in asked[0], asked
    return asked[0].split("reason=", 1)[1]


@pytest.fixture
def prolog(tmp_path: Path) -> Node:
    return Node(tmp_path, "prolog")


@pytest.fixture
def epilog(tmp_path: Path) -> Node:
    return Node(tmp_path, "epilog")


def test_free_gpus_let_the_job_start(prolog):
    assert prolog.run() == (0, "", [])


def test_a_process_on_one_of_the_jobs_gpus_refuses_the_job_and_drains(prolog):
    prolog.apps([f"{BUS[1]}, 4242, python3, 20480"])
    rc, out, asked = prolog.run()
    assert rc == 1, out
    assert drained_for(asked) == f"hpc-gpu: before job 42: GPU 3 ({BUS[1]}) runs pid 4242 python3 (20480 MiB)"


def test_another_jobs_gpu_on_a_shared_node_is_not_the_jobs_business(prolog):
    prolog.apps([f"{BUS[2]}, 777, train.py, 70000"])  # /dev/nvidia5: someone else's allocation
    prolog.memory({BUS[2]: 70001})
    assert prolog.run(job_gpus="2,3") == (0, "", [])
    rc, _, asked = prolog.run(job_gpus="5")
    assert rc == 1 and "GPU 5 (00000000:3B:00.0) runs pid 777 train.py" in drained_for(asked)


def test_memory_held_by_a_process_nobody_here_can_see_refuses_the_job(prolog):
    prolog.memory({BUS[0]: rh.GPU_BUSY_MIB + 1})  # another container's context: no pid listed
    rc, _, asked = prolog.run()
    assert rc == 1
    assert drained_for(asked) == (
        f"hpc-gpu: before job 42: GPU 2 ({BUS[0]}) has {rh.GPU_BUSY_MIB + 1} MiB in use by a process this "
        "node cannot see"
    )
    prolog.memory({BUS[0]: rh.GPU_BUSY_MIB})  # a driver's own few MiB, up to the threshold, is idle
    assert prolog.run()[0] == 0


def test_many_processes_are_summarised(prolog):
    prolog.apps([f"{BUS[0]}, {pid}, worker, 100" for pid in range(10, 15)])
    reason = drained_for(prolog.run()[2])
    assert reason.endswith("runs pid 10 worker (100 MiB) pid 11 worker (100 MiB) pid 12 worker (100 MiB) and 2 more")


def test_a_gpu_nvidia_smi_does_not_show_and_a_failing_nvidia_smi_refuse_the_job(prolog):
    rc, _, asked = prolog.run(job_gpus="2,7")
    assert rc == 1 and drained_for(asked) == "hpc-gpu: before job 42: GPU 7: not shown by nvidia-smi"
    lost = "Unable to determine the device handle for GPU0000:17:00.0: Unknown Error"
    prolog.file("nvidia-smi", f"#!/bin/bash\necho '{lost}'\nexit 15\n")
    rc, _, asked = prolog.run()
    assert rc == 1 and drained_for(asked) == f"hpc-gpu: before job 42: nvidia-smi failed: {lost}"


def test_a_job_without_gpus_and_a_cpu_node_are_not_checked(prolog, tmp_path):
    prolog.apps([f"{BUS[0]}, 4242, python3, 20480"])
    assert prolog.run(job_gpus=None) == (0, "", [])
    assert prolog.run(job_gpus="") == (0, "", [])
    (tmp_path / "cpu").mkdir()
    cpu = Node(tmp_path / "cpu", "prolog", gpus=0)
    (cpu.bin / "nvidia-smi").unlink()  # a CPU node has none
    assert cpu.run() == (0, "", [])


def test_an_admins_drain_keeps_its_reason_and_the_job_is_still_refused(prolog):
    prolog.apps([f"{BUS[0]}, 4242, python3, 20480"])
    prolog.controller("ALLOCATED+DRAIN", "fan replacement")
    rc, out, asked = prolog.run()
    assert (rc, asked) == (1, []) and "already drained: fan replacement" in out


def test_the_first_evidence_stays(epilog):
    epilog.apps([f"{BUS[0]}, 4242, python3, 20480"])
    epilog.controller(
        "IDLE+DRAIN", "hpc-gpu: before job 41: GPU 2 (00000000:17:00.0) runs pid 4242 python3 (20480 MiB)"
    )
    rc, out, asked = epilog.run()
    assert (rc, asked) == (0, []) and "already drained: hpc-gpu: before job 41" in out


def test_the_epilog_waits_for_a_process_that_is_going_away(epilog):
    epilog.apps([f"{BUS[0]}, 4242, python3, 20480"])
    epilog.file("apps-until", "2")  # gone after the second look
    rc, out, asked = epilog.run()
    assert (rc, asked) == (0, []), out


def test_the_epilog_drains_when_a_leftover_process_outlasts_the_wait_and_exits_0(epilog):
    epilog.apps([f"{BUS[1]}, 4242, python3, 20480"])
    started = time.monotonic()
    rc, out, asked = epilog.run()
    assert rc == 0, out  # not "Epilog error": the reason stays this check's evidence
    assert time.monotonic() - started >= 4
    assert drained_for(asked) == f"hpc-gpu: after job 42, for 4s: GPU 3 ({BUS[1]}) runs pid 4242 python3 (20480 MiB)"


def test_the_phase_is_checked():
    with pytest.raises(ValueError, match="one of prolog, epilog"):
        rh.job_check("w1", 2, "task", 5)
