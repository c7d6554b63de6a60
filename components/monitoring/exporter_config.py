"""The exporters' own configuration (pure): what each must collect for every alert to be able to
fire, where Debian's defaults collect less.

- node exporter: Debian's collectors plus ``systemd`` (``HostSystemdUnitFailed`` reads
  ``node_systemd_unit_state``), the textfile directory the collectors write into.
- IPMI exporter: Debian's package starts it with ``ipmi_remote.yml``, an example for remote BMCs
  whose default module runs only ``bmc``, ``ipmi`` and ``chassis`` and excludes sensors by id;
  here a local (in-band) module with ``dcmi`` (the power reading ``RackPowerOverBudget`` sums)
  and ``sel``, every sensor kept. It runs as its own system user, which the udev rule lets open
  the BMC device: in-band IPMI has no read-only mode, so that user is the only one besides root.
- DCGM exporter (``hpc:monitoring.gpuMetrics: dcgm``, run by the site from NVIDIA's packages):
  a counters file naming every ``DCGM_FI_*`` field a rule or a dashboard reads (the stock file
  leaves the thermal-violation and double-bit ECC counters commented out).
"""

from __future__ import annotations

import re

import yaml

from components.monitoring.spec import IPMI_PORT, TEXTFILE_DIR

HEADER = "# Managed by hpc-cluster (Pulumi): components/monitoring/exporter_config.py\n"
IPMI_CONFIG = "/etc/prometheus/hpc-ipmi.yml"
IPMI_USER = "hpc-ipmi"
DCGM_COUNTERS = "/etc/hpc-cluster/dcgm-counters.csv"

NODE_ARGS = ("--collector.systemd", f"--collector.textfile.directory={TEXTFILE_DIR}")
IPMI_COLLECTORS = ("bmc", "ipmi", "chassis", "dcmi", "sel")

# field -> (Prometheus type, help): dcgm-exporter's counters-file format.
DCGM_FIELDS: dict[str, tuple[str, str]] = {
    "DCGM_FI_DEV_GPU_TEMP": ("gauge", "GPU temperature (in C)."),
    "DCGM_FI_DEV_POWER_USAGE": ("gauge", "Power draw (in W)."),
    "DCGM_FI_DEV_GPU_UTIL": ("gauge", "GPU utilization (in %)."),
    "DCGM_FI_DEV_FB_USED": ("gauge", "Framebuffer memory used (in MiB)."),
    "DCGM_FI_DEV_XID_ERRORS": ("gauge", "Value of the last XID error encountered."),
    "DCGM_FI_DEV_THERMAL_VIOLATION": ("counter", "Throttling duration due to thermal constraints (in us)."),
    "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL": ("counter", "Total number of double-bit volatile ECC errors."),
    "DCGM_FI_DEV_RETIRED_PENDING": ("gauge", "Number of pages pending retirement."),
}


def node_exporter_defaults() -> str:
    """/etc/default/prometheus-node-exporter (its unit passes ``$ARGS``)."""
    return HEADER + f'ARGS="{" ".join(NODE_ARGS)}"\n'


def ipmi_config() -> str:
    """The IPMI exporter's config: one local module, every collector an alert reads."""
    doc = {"modules": {"default": {"collectors": list(IPMI_COLLECTORS)}}}
    return HEADER + yaml.safe_dump(doc, sort_keys=False)


def ipmi_defaults() -> str:
    """/etc/default/prometheus-ipmi-exporter: our config instead of Debian's remote example."""
    return HEADER + f'ARGS="--config.file={IPMI_CONFIG} --web.listen-address=:{IPMI_PORT}"\n'


def ipmi_unit_dropin() -> str:
    """systemd drop-in: the exporter as its own user, nothing else of the host writable."""
    return HEADER + (
        f"[Service]\nUser={IPMI_USER}\nGroup={IPMI_USER}\nNoNewPrivileges=yes\nProtectSystem=strict\n"
        "ProtectHome=yes\nPrivateTmp=yes\n"
    )


def ipmi_udev_rule() -> str:
    """The BMC device (``/dev/ipmi0``, root-only by default) opened by the exporter's group."""
    return HEADER + f'KERNEL=="ipmi[0-9]*", GROUP="{IPMI_USER}", MODE="0660"\n'


def dcgm_counters() -> str:
    lines = ["# DCGM FIELD, Prometheus metric type, help message"]
    lines += [f"{name}, {kind}, {text}" for name, (kind, text) in DCGM_FIELDS.items()]
    return HEADER + "\n".join(lines) + "\n"


def dcgm_fields_used(exprs: list[str]) -> set[str]:
    """Every DCGM field named in these PromQL expressions."""
    return {m for e in exprs for m in re.findall(r"DCGM_FI_[A-Z_]+", e)}
