"""Hardware profiles: the machines this project knows, taken from the seed spec sheets.

A profile says what Slurm needs to describe a node (sockets, cores, threads, usable memory), what
GPUs it carries (model, count, memory, device files, the Slurm GRES type) and its peak power draw.
Hosts in the stack file name a profile and may override any field (``HardwareOverride``).

Sources (``shared/seeds/``):

* ``001_*``: ML-PROD-V4 (2x Xeon Platinum 8592+, 128 cores / 256 threads, 2 TB DDR5 as 32x64 GB,
  8x H100 SXM5 80 GB, up to 5.5 kW per node, 18-25 kW per rack) and its variants ML-DENSITY-V2
  (8x H100 PCIe, 1 TB) and ML-COST-V3 (4x A100 PCIe, 512 GB).
* ``000_*``: the 2P AMD EPYC 9452P "Python" server (96 cores / 192 threads, 1.5 TB as 24x64 GB,
  4x H100, ~4.5 kW peak, NVIDIA driver branch R550+), comparison config A (2x Xeon Platinum 8480+,
  112 cores, 1.5 TB, 2x H100 PCIe) and config B (Threadripper PRO 7995WX, 96 cores, 1 TB, 8x L40S).
* ``003_*``: the lab's Raspberry Pi 4 8 GB nodes (4 cores, aarch64) and its 2x A100 80 GB box.

Where a sheet is silent (a variant's CPU, a comparison config's power draw, the A100 box's CPU and
RAM) the profile states the figure it assumes in ``assumptions``; a host override replaces it.
"""

from __future__ import annotations

import math
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, computed_field, model_validator
from pydantic.alias_generators import to_camel

# XIDs that mean the node needs a GPU reset, a reboot or a repair, from NVIDIA's XID catalogue
# (docs.nvidia.com/deploy/xid-errors): 48 double-bit ECC, 62 internal micro-controller halt, 64
# row-remapping failure, 74 NVLink error, 79 fallen off the bus, 92 high single-bit ECC rate,
# 95 uncontained ECC, 119/120 GSP timeout/error, 140 unrecovered ECC. Errors a program causes
# (13, 31, 43) and contained ones the application recovers from (94) do not drain a node.
CRITICAL_XIDS = (48, 62, 64, 74, 79, 92, 95, 119, 120, 140)

MIB_PER_GIB = 1024
# Memory Slurm must not hand to jobs: the kernel's page metadata (struct page is 64 B per 4 KiB
# page, ~1.6 %) plus firmware reservations are covered by a 3 % share; 1 GiB more is left for the
# OS and the cluster's own daemons. A RealMemory above what slurmd reports marks the node INVAL.
OS_RESERVE_FRACTION = 0.03
OS_RESERVE_FIXED_MIB = 1 * MIB_PER_GIB
# The lowest NVIDIA data-center driver branch the spec sheets accept ("R550+").
MIN_NVIDIA_DRIVER_BRANCH = 550
# The container runtime handler k3s registers in containerd when it finds the NVIDIA container
# toolkit on a node; the RuntimeClass of the same name selects it for a pod.
NVIDIA_RUNTIME = "nvidia"


def os_reserve_mib(memory_mib: int) -> int:
    """Memory kept back from Slurm on a node with ``memory_mib`` installed."""
    return math.ceil(memory_mib * OS_RESERVE_FRACTION) + OS_RESERVE_FIXED_MIB


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid", alias_generator=to_camel, populate_by_name=True)


class GpuSpec(_Frozen):
    """The GPUs of one machine: all of one model."""

    model: str = Field(description="Marketing name, e.g. 'NVIDIA H100 SXM5 80GB'.")
    gres_type: str = Field(
        pattern=r"^[a-z0-9_]+$",
        description="Slurm GRES type (Gres=gpu:<type>:<count>), e.g. 'h100'.",
    )
    count: int = Field(ge=1, le=16, description="GPUs in the machine.")
    memory_mib: int = Field(ge=1024, description="Memory of one GPU in MiB.")
    interconnect: Literal["nvlink", "pcie"] = Field(description="How the GPUs talk to each other.")

    @computed_field(description="Device files, /dev/nvidia0 .. /dev/nvidia<count-1>.")  # type: ignore[prop-decorator]
    @property
    def device_files(self) -> tuple[str, ...]:
        return tuple(f"/dev/nvidia{i}" for i in range(self.count))

    @property
    def memory_gib(self) -> float:
        return self.memory_mib / MIB_PER_GIB


class HardwareProfile(_Frozen):
    """One machine model: CPU topology, memory, GPUs, power."""

    name: str = Field(description="Catalogue key used by hosts in the stack file.")
    description: str = Field(description="What the machine is, in the words of its sheet.")
    source: str = Field(description="Seed document the figures come from.")
    arch: Literal["x86_64", "aarch64"] = Field(description="CPU architecture.")
    cpu_model: str = Field(description="CPU model per socket.")
    sockets: int = Field(ge=1, le=8, description="CPU sockets (Slurm Sockets).")
    cores_per_socket: int = Field(ge=1, le=512, description="Physical cores per socket.")
    threads_per_core: int = Field(ge=1, le=4, description="Hardware threads per core (SMT).")
    memory_mib: int = Field(ge=512, description="Installed memory in MiB.")
    gpus: GpuSpec | None = Field(default=None, description="GPUs, or none for a CPU-only machine.")
    peak_power_w: int = Field(ge=1, description="Peak power draw of the whole machine in watts.")
    bmc: bool = Field(default=True, description="Has a BMC (IPMI sensors: inlet/exhaust, fans, PSU power).")
    assumptions: tuple[str, ...] = Field(
        default=(), description="Figures not given by the source sheet, and what was assumed."
    )

    @property
    def cpus(self) -> int:
        """Logical CPUs: Slurm's CPUs= on the node line."""
        return self.sockets * self.cores_per_socket * self.threads_per_core

    @property
    def cores(self) -> int:
        return self.sockets * self.cores_per_socket

    @property
    def real_memory_mib(self) -> int:
        """Slurm's RealMemory: installed memory less the documented OS reserve."""
        return self.memory_mib - os_reserve_mib(self.memory_mib)

    @property
    def gpu_count(self) -> int:
        return self.gpus.count if self.gpus else 0


class GpuOverride(_Frozen):
    """Per-host changes to a profile's GPUs."""

    model: str | None = Field(default=None, description="GPU model name.")
    gres_type: str | None = Field(default=None, pattern=r"^[a-z0-9_]+$", description="GRES type.")
    count: int | None = Field(default=None, ge=1, le=16, description="GPU count.")
    memory_mib: int | None = Field(default=None, ge=1024, description="Memory per GPU in MiB.")
    interconnect: Literal["nvlink", "pcie"] | None = Field(default=None, description="Interconnect.")


class HardwareOverride(_Frozen):
    """Per-host changes to a profile (a node with more memory, fewer GPUs, ...)."""

    cpu_model: str | None = Field(default=None, description="CPU model.")
    sockets: int | None = Field(default=None, ge=1, le=8, description="CPU sockets.")
    cores_per_socket: int | None = Field(default=None, ge=1, le=512, description="Cores per socket.")
    threads_per_core: int | None = Field(default=None, ge=1, le=4, description="Threads per core.")
    memory_mib: int | None = Field(default=None, ge=512, description="Installed memory in MiB.")
    gpus: GpuOverride | None = Field(default=None, description="GPU changes.")
    peak_power_w: int | None = Field(default=None, ge=1, description="Peak power in watts.")

    @model_validator(mode="after")
    def _not_empty(self) -> HardwareOverride:
        if not self.model_fields_set:
            raise ValueError("an override must change at least one field")
        return self


def apply_override(profile: HardwareProfile, override: HardwareOverride | None) -> HardwareProfile:
    """The profile with a host's overrides applied (a new frozen object)."""
    if override is None:
        return profile
    changes = {k: v for k, v in override.model_dump(exclude_none=True).items() if k != "gpus"}
    if override.gpus is not None:
        if profile.gpus is None:
            base = override.gpus.model_dump(exclude_none=True)
            gpus: GpuSpec | None = GpuSpec.model_validate(base)
        else:
            gpus = profile.gpus.model_copy(update=override.gpus.model_dump(exclude_none=True))
            gpus = GpuSpec.model_validate(gpus.model_dump(exclude={"device_files"}))
        changes["gpus"] = gpus
    merged = profile.model_dump(exclude={"gpus"}) | changes
    if "gpus" not in merged:
        merged["gpus"] = profile.gpus
    return HardwareProfile.model_validate(merged)


_GB_80 = 80 * MIB_PER_GIB
_GB_48 = 48 * MIB_PER_GIB

CATALOGUE: dict[str, HardwareProfile] = {
    p.name: p
    for p in (
        HardwareProfile(
            name="ml-prod-v4",
            description="ML-PROD-V4 4U training node: 8x H100 SXM5 with NVLink",
            source="001_7d743cd91e6fcb16.txt",
            arch="x86_64",
            cpu_model="Intel Xeon Platinum 8592+",
            sockets=2,
            cores_per_socket=64,
            threads_per_core=2,
            memory_mib=2048 * MIB_PER_GIB,  # 32 x 64 GB DDR5
            gpus=GpuSpec(
                model="NVIDIA H100 SXM5 80GB",
                gres_type="h100",
                count=8,
                memory_mib=_GB_80,
                interconnect="nvlink",
            ),
            peak_power_w=5500,
        ),
        HardwareProfile(
            name="ml-density-v2",
            description="ML-DENSITY-V2: 8x H100 PCIe, 1 TB DDR4",
            source="001_7d743cd91e6fcb16.txt",
            arch="x86_64",
            cpu_model="Intel Xeon Platinum 8592+",
            sockets=2,
            cores_per_socket=64,
            threads_per_core=2,
            memory_mib=1024 * MIB_PER_GIB,
            gpus=GpuSpec(
                model="NVIDIA H100 PCIe 80GB",
                gres_type="h100",
                count=8,
                memory_mib=_GB_80,
                interconnect="pcie",
            ),
            peak_power_w=4200,
            assumptions=(
                "CPU: the sheet names only GPUs and memory; the ML-PROD-V4 platform is assumed",
                "power: not on the sheet; 8x350 W GPUs + 2x350 W CPUs + 700 W platform",
            ),
        ),
        HardwareProfile(
            name="ml-cost-v3",
            description="ML-COST-V3: 4x A100 PCIe, 512 GB DDR4",
            source="001_7d743cd91e6fcb16.txt",
            arch="x86_64",
            cpu_model="Intel Xeon Platinum 8592+",
            sockets=2,
            cores_per_socket=64,
            threads_per_core=2,
            memory_mib=512 * MIB_PER_GIB,
            gpus=GpuSpec(
                model="NVIDIA A100 PCIe 80GB",
                gres_type="a100",
                count=4,
                memory_mib=_GB_80,
                interconnect="pcie",
            ),
            peak_power_w=2600,
            assumptions=(
                "CPU: the sheet names only GPUs and memory; the ML-PROD-V4 platform is assumed",
                "GPU memory: the sheet says 'A100 PCIe'; the 80 GB model is assumed",
                "power: not on the sheet; 4x300 W GPUs + 2x350 W CPUs + 700 W platform",
            ),
        ),
        HardwareProfile(
            name="epyc-9452p-python",
            description='2P AMD EPYC 9452P "Python Programming Optimized" server with 4x H100',
            source="000_f88d11bf60b86cb1.txt",
            arch="x86_64",
            cpu_model="AMD EPYC 9452P",
            sockets=2,
            cores_per_socket=48,
            threads_per_core=2,
            memory_mib=1536 * MIB_PER_GIB,  # 24 x 64 GB DDR5-4800
            gpus=GpuSpec(
                model="NVIDIA H100 80GB",
                gres_type="h100",
                count=4,
                memory_mib=_GB_80,
                interconnect="nvlink",
            ),
            peak_power_w=4500,
        ),
        HardwareProfile(
            name="config-a-xeon-8480",
            description="Comparison config A: 2x Xeon Platinum 8480+, 2x H100 PCIe",
            source="000_f88d11bf60b86cb1.txt",
            arch="x86_64",
            cpu_model="Intel Xeon Platinum 8480+",
            sockets=2,
            cores_per_socket=56,
            threads_per_core=2,
            memory_mib=1536 * MIB_PER_GIB,
            gpus=GpuSpec(
                model="NVIDIA H100 PCIe 80GB",
                gres_type="h100",
                count=2,
                memory_mib=_GB_80,
                interconnect="pcie",
            ),
            peak_power_w=2200,
            assumptions=("power: not on the sheet; 2x350 W GPUs + 2x350 W CPUs + 800 W platform",),
        ),
        HardwareProfile(
            name="config-b-tr-7995wx",
            description="Comparison config B: Threadripper PRO 7995WX workstation, 8x L40S",
            source="000_f88d11bf60b86cb1.txt",
            arch="x86_64",
            cpu_model="AMD Threadripper PRO 7995WX",
            sockets=1,
            cores_per_socket=96,
            threads_per_core=2,
            memory_mib=1024 * MIB_PER_GIB,
            gpus=GpuSpec(
                model="NVIDIA L40S 48GB",
                gres_type="l40s",
                count=8,
                memory_mib=_GB_48,
                interconnect="pcie",
            ),
            peak_power_w=3800,
            assumptions=("power: not on the sheet; 8x350 W GPUs + 350 W CPU + 650 W platform",),
        ),
        HardwareProfile(
            name="epyc-7502p-256g",
            description="EPYC 7502P server, 256 GB RAM, 2x2 TB NVMe (CPU only)",
            source="000_f88d11bf60b86cb1.txt",
            arch="x86_64",
            cpu_model="AMD EPYC 7502P",
            sockets=1,
            cores_per_socket=32,
            threads_per_core=2,
            memory_mib=256 * MIB_PER_GIB,
            gpus=None,
            peak_power_w=450,
            assumptions=(
                "topology: the sheet lists the model only; EPYC 7502P is 32 cores / 64 threads",
                "power: not on the sheet; 180 W CPU + 270 W platform and drives",
            ),
        ),
        HardwareProfile(
            name="rpi4-8g",
            description="Raspberry Pi 4 Model B 8 GB lab node",
            source="003_f45db887f078abf9.txt",
            arch="aarch64",
            cpu_model="Broadcom BCM2711 (Cortex-A72)",
            sockets=1,
            cores_per_socket=4,
            threads_per_core=1,
            memory_mib=8 * MIB_PER_GIB,
            gpus=None,
            peak_power_w=15,
            bmc=False,
            assumptions=("power: the official 15 W USB-C supply",),
        ),
        HardwareProfile(
            name="a100x2-80g",
            description="The lab's 2x A100 80 GB inference box",
            source="003_f45db887f078abf9.txt",
            arch="x86_64",
            cpu_model="AMD EPYC 7313P",
            sockets=1,
            cores_per_socket=16,
            threads_per_core=2,
            memory_mib=256 * MIB_PER_GIB,
            gpus=GpuSpec(
                model="NVIDIA A100 80GB",
                gres_type="a100",
                count=2,
                memory_mib=_GB_80,
                interconnect="pcie",
            ),
            peak_power_w=1300,
            assumptions=(
                "CPU and memory: the notes name only the GPUs; 1x 16-core EPYC and 256 GB assumed",
                "power: 2x300 W GPUs + 155 W CPU + 545 W platform",
            ),
        ),
    )
}


def profile_names() -> list[str]:
    return sorted(CATALOGUE)


def resolve(name: str, override: HardwareOverride | None = None) -> HardwareProfile:
    """The named profile with ``override`` applied; KeyError for an unknown name."""
    return apply_override(CATALOGUE[name], override)
