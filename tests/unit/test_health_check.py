"""The node health check program (components/slurm/scripts/healthcheck.sh), run for real by bash.

Stand-ins, for what cannot run here: ``nvidia-smi`` (no GPU; its CSV and ``-q`` formats as
NVIDIA documents them, not recorded from a real GPU), ``dmesg`` (a kernel log with an XID),
``munge``/``unmunge`` and ``scontrol`` (the controller's view of the node, and a record of every
update the program asks for). Everything else (the checks, the decisions, df, the shared-volume
write) is the program itself.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from components.hardware import resolve
from components.slurm import render_health as rh

A100 = "NVIDIA A100 80GB PCIe"
HEALTHY = [f"{i}, 00000000:{0x17 + i:02X}:00.0, {A100}, 0, No" for i in range(2)]

NVIDIA_SMI = r"""#!/bin/bash
d=$(dirname "$0")
[ ! -e "$d/smi-fails" ] || { cat "$d/smi-fails"; exit 15; }
case "$1" in
  --query-gpu=*) cat "$d/gpus.csv" ;;
  -q) cat "$d/q.txt" ;;
  *) echo "stand-in: unexpected $*" >&2; exit 2 ;;
esac
"""
SCONTROL = r"""#!/bin/bash
d=$(dirname "$0")
case "$1 $2" in
  "-o show") cat "$d/node" ;;
  "update nodename="*) printf '%s\n' "$*" >>"$d/updates" ;;
  *) echo "stand-in: unexpected $*" >&2; exit 2 ;;
esac
"""


class Node:
    def __init__(self, tmp: Path, profile: str = "a100x2-80g", gpus: int = 2):
        self.bin = tmp / "bin"
        self.bin.mkdir()
        self.shared = tmp / "home"
        self.shared.mkdir()
        self.spool = tmp / "spool"
        self.spool.mkdir()
        tools = {
            "nvidia-smi": NVIDIA_SMI,
            "scontrol": SCONTROL,
            "dmesg": '#!/bin/bash\ncat "$(dirname "$0")/kmsg"\n',
            "munge": "#!/bin/bash\necho credential\n",
            "unmunge": "#!/bin/bash\ncat >/dev/null\n",
        }
        for name, text in tools.items():
            (self.bin / name).write_text(text)
            (self.bin / name).chmod(0o755)
        self.gpus(HEALTHY)
        self.file("kmsg", "[    2.1] nvidia: module license 'NVIDIA' taints kernel.\n")
        self.file("q.txt", "")
        self.controller("IDLE")
        self.program = tmp / "hpc-healthcheck"
        self.program.write_text(
            rh.program("w1", resolve(profile), gpus, rh.Health(min_free_mib=1), (str(self.spool),), str(self.shared))
        )
        self.program.chmod(0o755)

    def file(self, name: str, text: str) -> None:
        (self.bin / name).write_text(text)

    def gpus(self, rows: list[str]) -> None:
        self.file("gpus.csv", "".join(r + "\n" for r in rows))

    def controller(self, state: str, reason: str = "") -> None:
        tail = f" Reason={reason} [root@2026-12-04T10:00:00]" if reason else ""
        self.file("node", f"NodeName=w1 Arch=x86_64 CPUs=32 State={state} ThreadsPerCore=1{tail}\n")

    def run(self) -> tuple[int, str, list[str]]:
        updates = self.bin / "updates"
        updates.unlink(missing_ok=True)
        env = {"PATH": f"{self.bin}:/usr/bin:/bin"}
        proc = subprocess.run([str(self.program)], env=env, capture_output=True, text=True, timeout=60)
        asked = updates.read_text().splitlines() if updates.exists() else []
        return proc.returncode, proc.stdout + proc.stderr, asked


@pytest.fixture
def node(tmp_path: Path) -> Node:
    return Node(tmp_path)


def drained_for(asked: list[str]) -> str:
    assert len(asked) == 1 and "state=drain" in asked[0], asked
    return asked[0].split("reason=", 1)[1]


def test_a_healthy_node_is_left_alone(node):
    rc, out, asked = node.run()
    assert (rc, asked) == (0, []), out
    assert list(node.shared.joinpath(".hpc-health").iterdir()) == []  # the probe file is removed


def test_a_missing_gpu_drains_with_the_count_and_the_bus_ids(node):
    node.gpus(HEALTHY[:1])
    rc, _, asked = node.run()
    assert rc == 1
    assert drained_for(asked) == "hpc-health: GPU count: the profile says 2, nvidia-smi shows 1 (00000000:17:00.0)"


def test_the_wrong_gpu_model_drains(node):
    node.gpus([HEALTHY[0], "1, 00000000:18:00.0, NVIDIA L40S, 0, No"])
    assert "GPU 1 (00000000:18:00.0) is a NVIDIA L40S, the profile says a100" in drained_for(node.run()[2])


def test_uncorrectable_ecc_and_pending_retirement_drain(node):
    node.gpus([HEALTHY[0], f"1, 00000000:18:00.0, {A100}, 3, No"])
    assert drained_for(node.run()[2]).endswith(
        "GPU 1 (00000000:18:00.0): 3 uncorrectable ECC errors since the driver loaded"
    )
    node.gpus([f"0, 00000000:17:00.0, {A100}, [N/A], Yes", HEALTHY[1]])  # N/A: a GPU without ECC counters
    assert drained_for(node.run()[2]).endswith(
        "GPU 0 (00000000:17:00.0): retired pages pending (the GPU needs a reset)"
    )


def test_nvidia_smi_failing_drains_with_its_own_words(node):
    node.file("smi-fails", "Unable to determine the device handle for GPU0000:18:00.0: Unknown Error\n")
    reason = drained_for(node.run()[2])
    assert reason == (
        "hpc-health: GPU: nvidia-smi failed: Unable to determine the device handle for GPU0000:18:00.0: Unknown Error"
    )


def test_a_critical_xid_of_this_nodes_gpu_drains_and_others_do_not(node):
    line = "[ 9001.5] NVRM: Xid (PCI:0000:18:00): 79, pid='<unknown>', name=<unknown>, GPU has fallen off the bus."
    node.file("kmsg", "[ 9000.0] NVRM: Xid (PCI:0000:18:00): 13, pid=4242, Graphics Exception\n" + line + "\n")
    reason = drained_for(node.run()[2])
    assert reason.startswith("hpc-health: GPU XID 79 since boot on PCI:0000:18:00: Xid (PCI:0000:18:00): 79")
    node.file("kmsg", line.replace("0000:18:00", "0000:99:00") + "\n")  # another board's GPU
    assert node.run()[2] == []


def test_fabric_manager_is_checked_on_nvswitch_boards_only(tmp_path):
    hgx = Node(tmp_path, profile="ml-prod-v4", gpus=2)  # 8x H100 SXM5 NVLink: two shown, for brevity
    h100 = "NVIDIA H100 80GB HBM3"
    hgx.gpus([f"{i}, 00000000:{0x17 + i:02X}:00.0, {h100}, 0, No" for i in range(2)])
    fabric = "GPU 00000000:17:00.0\n    Fabric\n        State                : {}\n        Status               : {}\n"
    hgx.file("q.txt", fabric.format("Completed", "Success") + fabric.format("In Progress", "N/A"))
    reason = drained_for(hgx.run()[2])
    assert reason == ("hpc-health: Fabric Manager: GPU fabric In Progress/N/A "
                      "(is nvidia-fabricmanager running on the host?)")  # fmt: skip
    hgx.file("q.txt", fabric.format("Completed", "Success") * 2)
    assert hgx.run()[:1] == (0,)
    assert not rh.needs_fabric_manager(resolve("a100x2-80g"))  # PCIe boards have none


def test_an_unwritable_shared_volume_and_low_space_drain(node):
    node.shared.rmdir()
    node.shared.write_text("not a directory\n")  # the volume's place is wrong: writes fail even as root
    assert drained_for(node.run()[2]).startswith(f"hpc-health: shared volume: {node.shared} is not writable: ")
    node.shared.unlink()
    node.shared.mkdir()
    node.program.write_text(node.program.read_text().replace("min_free_mib=1\n", "min_free_mib=999999999\n"))
    assert "has" in drained_for(node.run()[2]) and "MiB free, below 999999999 MiB" in drained_for(node.run()[2])


def test_a_broken_munge_drains(node):
    node.file("unmunge", "#!/bin/bash\necho 'unmunge: Error: Invalid credential' >&2\nexit 1\n")
    assert drained_for(node.run()[2]) == "hpc-health: munge: unmunge: Error: Invalid credential"


def test_it_resumes_only_its_own_drain(node):
    node.controller("IDLE+DRAIN", "hpc-health: GPU count: the profile says 2, nvidia-smi shows 1 (00000000:17:00.0)")
    rc, out, asked = node.run()
    assert rc == 0 and asked == ["update nodename=w1 state=resume"], out
    node.controller("IDLE+DRAIN", "fan replacement, ticket 4711")  # an admin's drain
    assert node.run()[:3:2] == (0, [])
    node.gpus(HEALTHY[:1])  # and a failure on an admin-drained node keeps the admin's reason
    rc, out, asked = node.run()
    assert (rc, asked) == (1, []) and "already drained by someone else: fan replacement, ticket 4711" in out
    node.controller("IDLE+DRAIN", "hpc-cluster: replacing the slurmd container")
    assert node.run()[2] == []


def test_the_same_failure_is_not_drained_again_and_a_new_one_updates_the_reason(node):
    node.gpus(HEALTHY[:1])
    reason = drained_for(node.run()[2])
    node.controller("IDLE+DRAIN", reason)
    assert node.run()[2] == []
    node.gpus([HEALTHY[0], f"1, 00000000:18:00.0, {A100}, 1, No"])
    assert "uncorrectable ECC" in drained_for(node.run()[2])


def test_a_controller_that_cannot_be_reached_fails_loudly(node):
    node.file("scontrol", "#!/bin/bash\necho 'slurm_load_node error: Unable to contact slurm controller' >&2\nexit 1\n")
    rc, out, _ = node.run()
    assert rc == 1 and "cannot reach the controller: slurm_load_node error: Unable to contact slurm controller" in out


def test_slurm_conf_lines():
    assert rh.conf_lines(rh.Health()) == (
        f"HealthCheckProgram={rh.PROGRAM}\nHealthCheckInterval=300\nHealthCheckNodeState=ANY,CYCLE\n"
        f"Prolog={rh.HEALTH_DIR}/prolog-hpc-gpu\nEpilog={rh.HEALTH_DIR}/epilog-hpc-gpu\n"
        "PrologFlags=Alloc\nSchedulerParameters=nohold_on_prolog_fail\n"
    )
    assert "Prolog" not in rh.conf_lines(rh.Health(job_gpu_checks=False))
    assert rh.conf_lines(
        rh.Health(node_states=("idle", "mixed"), cycle=False, interval_s=60, job_gpu_checks=False)
    ).endswith("HealthCheckInterval=60\nHealthCheckNodeState=IDLE,MIXED\n")
    assert rh.conf_lines(rh.Health(enabled=False, job_gpu_checks=False)) == ""
    assert rh.conf_lines(rh.Health(enabled=False)).startswith("Prolog=")


@pytest.mark.parametrize(
    ("model", "key"),
    [("NVIDIA H100 SXM5 80GB", "h100"), ("NVIDIA A100 PCIe 80GB", "a100"), ("NVIDIA L40S 48GB", "l40s")],
)
def test_model_keys_match_what_nvidia_smi_names(model, key):
    assert rh.model_key(model) == key


def test_the_cpu_node_program_skips_the_gpu_checks(tmp_path):
    cpu = Node(tmp_path, profile="epyc-7502p-256g", gpus=0)
    os.remove(cpu.bin / "nvidia-smi")  # a CPU node has none
    assert cpu.run()[:3:2] == (0, [])
