"""What the exporters collect, on the real binaries: the GPU collector
(components/monitoring/collectors/gpu_metrics.sh, run by bash) read by the real node exporter's
textfile collector, and the IPMI exporter started with the rendered config.

Stand-ins, for what cannot run here: ``nvidia-smi`` (no GPU: its ``--query-gpu`` CSV as NVIDIA
documents it, not recorded from a real GPU) and ``dmesg`` (a kernel log with XIDs). Everything
else is the collector itself and the exporters' own parsing, on loopback only.
"""

from __future__ import annotations

import shutil
import socket
import subprocess
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from components.monitoring import exporter_config
from components.monitoring.steps import COLLECTORS

pytestmark = pytest.mark.real_tool

FIELDS_OLD_DRIVER = "clocks_throttle_reasons"
H100 = "NVIDIA H100 80GB HBM3"
ROWS = [
    f"0, GPU-5f7c0000-0000-0000-0000-000000000000, 00000000:17:00.0, {H100}, 34, 71.20, 0, 1, 0, No, Not Active",
    f"1, GPU-5f7c0000-0000-0000-0000-000000000001, 00000000:2A:00.0, {H100}, 91, 690.05, 100, 80123, 2, Yes, Active",
]
NVIDIA_SMI = r"""#!/bin/bash
d=$(dirname "$0")
[ ! -e "$d/smi-fails" ] || { cat "$d/smi-fails"; exit 15; }
case "$1" in
  --query-gpu=*clocks_event_reasons*)
    if [ -e "$d/old-driver" ]; then
      echo 'Field "clocks_event_reasons.hw_thermal_slowdown" is not a valid field to query.'; exit 2
    fi
    cat "$d/gpus.csv" ;;
  --query-gpu=*clocks_throttle_reasons*) cat "$d/gpus.csv" ;;
  *) echo "stand-in: unexpected $*" >&2; exit 2 ;;
esac
"""
KMSG = (
    "[    2.1] nvidia: module license 'NVIDIA' taints kernel.\n"
    "[ 4811.2] NVRM: Xid (PCI:0000:2a:00): 13, pid=4242, name=python, Graphics Exception\n"
    "[ 5002.7] NVRM: Xid (PCI:0000:2a:00): 79, pid='<unknown>', name=<unknown>, GPU has fallen off the bus.\n"
    "[ 5003.0] NVRM: Xid (PCI:0000:b1:00): 48, pid=1, name=x, another node's GPU in this log\n"
)


class GpuHost:
    def __init__(self, tmp: Path):
        self.bin = tmp / "bin"
        self.bin.mkdir()
        self.out = tmp / "textfile"
        self.out.mkdir()
        for name, text in (("nvidia-smi", NVIDIA_SMI), ("dmesg", '#!/bin/bash\ncat "$(dirname "$0")/kmsg"\n')):
            (self.bin / name).write_text(text)
            (self.bin / name).chmod(0o755)
        (self.bin / "gpus.csv").write_text("".join(r + "\n" for r in ROWS))
        (self.bin / "kmsg").write_text(KMSG)

    def collect(self, expected: int = 2) -> tuple[subprocess.CompletedProcess[str], str]:
        proc = subprocess.run(
            ["bash", str(COLLECTORS / "gpu_metrics.sh"), str(expected), str(self.out / "gpu.prom")],
            env={"PATH": f"{self.bin}:/usr/bin:/bin"}, capture_output=True, text=True, timeout=60,
        )  # fmt: skip
        return proc, (self.out / "gpu.prom").read_text()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextmanager
def serving(argv: list[str], port: int) -> Iterator[str]:
    """Start an exporter on 127.0.0.1:port; yield its /metrics text once it answers."""
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=30) as r:
                    yield r.read().decode()
                    return
            except OSError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    out = proc.stdout.read() if proc.stdout else ""
                    raise AssertionError(f"{argv[0]} did not answer: {out[-2000:]}") from None
                time.sleep(0.2)
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def series(text: str, name: str) -> dict[str, float]:
    """{labels text: value} of one metric in exposition text."""
    out = {}
    for line in text.splitlines():
        if line.startswith(name + "{") or line.startswith(name + " "):
            key, _, value = line.rpartition(" ")
            out[key[len(name) :]] = float(value)
    return out


@pytest.fixture
def gpu_host(tmp_path: Path) -> GpuHost:
    return GpuHost(tmp_path)


def test_the_gpu_collector_reports_each_gpu_and_the_last_xid_of_its_own_gpus(gpu_host):
    proc, text = gpu_host.collect()
    assert proc.returncode == 0, proc.stderr
    assert series(text, "hpc_gpu_up") == {'{source="nvidia-smi"}': 1, '{source="kernel-log"}': 1}
    assert series(text, "hpc_gpu_count") == {"": 2} and series(text, "hpc_gpu_expected") == {"": 2}
    g0 = f'{{gpu="0",uuid="GPU-5f7c0000-0000-0000-0000-000000000000",model="{H100}"}}'
    g1 = f'{{gpu="1",uuid="GPU-5f7c0000-0000-0000-0000-000000000001",model="{H100}"}}'
    assert series(text, "hpc_gpu_temperature_celsius") == {g0: 34, g1: 91}
    assert series(text, "hpc_gpu_power_watts") == {g0: 71.2, g1: 690.05}
    assert series(text, "hpc_gpu_memory_used_mib") == {g0: 1, g1: 80123}
    assert series(text, "hpc_gpu_ecc_uncorrected_volatile_total") == {g0: 0, g1: 2}
    assert series(text, "hpc_gpu_retired_pages_pending") == {g0: 0, g1: 1}
    assert series(text, "hpc_gpu_thermal_slowdown") == {g0: 0, g1: 1}
    # the kernel's PCI:0000:2a:00 is nvidia-smi's 00000000:2A:00.0; b1 is not this host's GPU
    assert series(text, "hpc_gpu_xid_last") == {g0: 0, g1: 79}


def test_the_real_node_exporter_reads_what_the_collector_writes(gpu_host):
    exporter = shutil.which("prometheus-node-exporter")
    if exporter is None:
        pytest.skip("prometheus-node-exporter (Debian) is required")
    gpu_host.collect()
    port = free_port()
    argv = [exporter, f"--web.listen-address=127.0.0.1:{port}", "--collector.disable-defaults",
            "--collector.textfile", f"--collector.textfile.directory={gpu_host.out}"]  # fmt: skip
    with serving(argv, port) as text:
        assert series(text, "node_textfile_scrape_error") == {"": 0}, text
        assert len(series(text, "hpc_gpu_temperature_celsius")) == 2
        assert series(text, "hpc_gpu_up") == {'{source="kernel-log"}': 1, '{source="nvidia-smi"}': 1}
        assert any(k.startswith('{file="') for k in series(text, "node_textfile_mtime_seconds"))


def test_an_older_driver_is_asked_with_its_own_field_names(gpu_host):
    (gpu_host.bin / "old-driver").write_text("")
    proc, text = gpu_host.collect()
    assert proc.returncode == 0, proc.stderr
    assert len(series(text, "hpc_gpu_thermal_slowdown")) == 2 and FIELDS_OLD_DRIVER not in proc.stderr


def test_a_failing_nvidia_smi_reports_down_with_its_own_words_and_no_count(gpu_host):
    lost = "Unable to determine the device handle for GPU0000:2A:00.0: Unknown Error\n"
    (gpu_host.bin / "smi-fails").write_text(lost)
    proc, text = gpu_host.collect()
    assert proc.returncode == 0
    assert "nvidia-smi failed: Unable to determine the device handle for GPU0000:2A:00.0" in proc.stderr
    assert series(text, "hpc_gpu_up")['{source="nvidia-smi"}'] == 0
    assert "hpc_gpu_count" not in text and "hpc_gpu_temperature_celsius" not in text


def test_a_missing_gpu_shows_in_the_count_and_a_kernel_log_that_cannot_be_read_is_down(gpu_host):
    (gpu_host.bin / "gpus.csv").write_text(ROWS[0] + "\n")
    refused = "echo 'dmesg: read kernel buffer failed: Operation not permitted'; exit 1"
    (gpu_host.bin / "dmesg").write_text(f"#!/bin/bash\n{refused}\n")
    proc, text = gpu_host.collect(expected=2)
    assert series(text, "hpc_gpu_count") == {"": 1} and series(text, "hpc_gpu_expected") == {"": 2}
    assert series(text, "hpc_gpu_up")['{source="kernel-log"}'] == 0
    assert "dmesg failed: dmesg: read kernel buffer failed: Operation not permitted" in proc.stderr
    assert "hpc_gpu_xid_last" not in text


def test_the_ipmi_exporter_runs_every_collector_an_alert_reads(tmp_path):
    """Debian's IPMI exporter with the rendered config: the DCMI (power) and SEL collectors run
    (here without a BMC, so each reports ipmi_up 0 for itself, which BmcCollectorFailing reads)."""
    exporter = shutil.which("prometheus-ipmi-exporter")
    if exporter is None:
        pytest.skip("prometheus-ipmi-exporter (Debian) is required")
    config = tmp_path / "ipmi.yml"
    config.write_text(exporter_config.ipmi_config())
    port = free_port()
    with serving([exporter, f"--config.file={config}", f"--web.listen-address=127.0.0.1:{port}"], port) as text:
        collectors = {k.split('"')[1] for k in series(text, "ipmi_up")}
        assert collectors == set(exporter_config.IPMI_COLLECTORS), text[-3000:]
