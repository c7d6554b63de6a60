"""Hardware profiles against the figures of the seed spec sheets."""

import pytest

from components import hardware
from components.hardware import GpuOverride, HardwareOverride


@pytest.mark.parametrize(
    ("name", "cores", "cpus", "memory_gib", "gpu_type", "gpus", "gpu_gib", "watts"),
    [
        ("ml-prod-v4", 128, 256, 2048, "h100", 8, 80, 5500),  # 001: 128c/256t, 2 TB, 8x H100, 5.5 kW
        ("ml-density-v2", 128, 256, 1024, "h100", 8, 80, 4200),  # 001: 8x H100 PCIe, 1 TB
        ("ml-cost-v3", 128, 256, 512, "a100", 4, 80, 2600),  # 001: 4x A100 PCIe, 512 GB
        ("epyc-9452p-python", 96, 192, 1536, "h100", 4, 80, 4500),  # 000: 96c/192t, 1.5 TB, ~4.5 kW
        ("config-a-xeon-8480", 112, 224, 1536, "h100", 2, 80, 2200),  # 000: config A, 112 cores
        ("config-b-tr-7995wx", 96, 192, 1024, "l40s", 8, 48, 3800),  # 000: config B, 8x L40S
        ("a100x2-80g", 16, 32, 256, "a100", 2, 80, 1300),  # 003: 2x A100 80 GB
    ],
)
def test_gpu_profiles_match_the_sheets(name, cores, cpus, memory_gib, gpu_type, gpus, gpu_gib, watts):
    p = hardware.CATALOGUE[name]
    assert (p.cores, p.cpus) == (cores, cpus)
    assert p.memory_mib == memory_gib * 1024
    assert p.gpus is not None
    assert (p.gpus.gres_type, p.gpus.count, p.gpus.memory_gib) == (gpu_type, gpus, gpu_gib)
    assert p.gpus.device_files == tuple(f"/dev/nvidia{i}" for i in range(gpus))
    assert p.peak_power_w == watts


def test_raspberry_pi_lab_node():
    p = hardware.CATALOGUE["rpi4-8g"]
    assert (p.arch, p.sockets, p.cores_per_socket, p.threads_per_core, p.cpus) == ("aarch64", 1, 4, 1, 4)
    assert p.memory_mib == 8192 and p.gpus is None


def test_every_profile_states_its_source_and_slurm_fields_are_consistent():
    for p in hardware.CATALOGUE.values():
        assert p.source.endswith(".txt")
        assert p.cpus == p.sockets * p.cores_per_socket * p.threads_per_core
        assert 0 < p.real_memory_mib < p.memory_mib


def test_os_reserve_is_documented_rule():
    # 3 % (kernel page metadata ~1.6 % + firmware) plus 1 GiB for the OS and daemons.
    assert hardware.os_reserve_mib(8192) == 246 + 1024
    assert hardware.CATALOGUE["ml-prod-v4"].real_memory_mib == 2097152 - (62915 + 1024)


def test_override_changes_only_named_fields():
    p = hardware.resolve("ml-prod-v4", HardwareOverride(memory_mib=1024 * 1024, gpus=GpuOverride(count=4)))
    assert p.memory_mib == 1024 * 1024 and p.gpus is not None and p.gpus.count == 4
    assert p.gpus.gres_type == "h100" and p.cpus == 256
    assert p.gpus.device_files == ("/dev/nvidia0", "/dev/nvidia1", "/dev/nvidia2", "/dev/nvidia3")


def test_empty_override_is_refused():
    with pytest.raises(ValueError, match="at least one field"):
        HardwareOverride()
