#!/usr/bin/env python3
"""Gluster health for node exporter's textfile collector (hpc-cluster).

Usage: gluster_metrics.py VOLUME OUTPUT.prom. Reads `gluster --xml volume status` and
`gluster --xml volume heal ... info summary`; writes atomically:
  hpc_gluster_up{volume}                      1 if glusterd answered and the volume exists
  hpc_gluster_brick_online{volume,brick}      1 online, 0 offline
  hpc_gluster_heal_pending_entries{volume,brick}  entries waiting for self-heal
  hpc_gluster_collector_timestamp_seconds     when this ran
"""

import os
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET


def gluster(*args: str) -> ET.Element:
    proc = subprocess.run(["gluster", "--xml", *args], capture_output=True, text=True, timeout=60)
    root = ET.fromstring(proc.stdout) if proc.stdout.strip().startswith("<") else None
    if root is None or root.findtext("opRet") not in ("0", None):
        raise RuntimeError((root.findtext("opErrstr") if root is not None else None) or proc.stderr.strip())
    return root


def esc(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"')


def main() -> None:
    volume, out = sys.argv[1], sys.argv[2]
    lines: list[str] = []
    status: ET.Element | None
    try:
        status = gluster("volume", "status", volume)
        up = 1
    except (RuntimeError, ET.ParseError, subprocess.TimeoutExpired) as e:
        print(f"gluster_metrics: {e}", file=sys.stderr)
        status, up = None, 0
    lines.append("# HELP hpc_gluster_up glusterd answered and the volume exists")
    lines.append("# TYPE hpc_gluster_up gauge")
    lines.append(f'hpc_gluster_up{{volume="{esc(volume)}"}} {up}')
    if status is not None:
        lines.append("# TYPE hpc_gluster_brick_online gauge")
        for node in status.iter("node"):
            host, path = node.findtext("hostname", ""), node.findtext("path", "")
            if not path.startswith("/"):
                continue  # self-heal daemons and NFS servers are listed as nodes too
            online = 1 if node.findtext("status") == "1" else 0
            lines.append(f'hpc_gluster_brick_online{{volume="{esc(volume)}",brick="{esc(host)}:{esc(path)}"}} {online}')
        try:
            heal = gluster("volume", "heal", volume, "info", "summary")
            lines.append("# TYPE hpc_gluster_heal_pending_entries gauge")
            for brick in heal.iter("brick"):
                name = brick.findtext("name", "")
                pending = brick.findtext("totalNumberOfEntries", "")
                if pending.isdigit():
                    lines.append(
                        f'hpc_gluster_heal_pending_entries{{volume="{esc(volume)}",brick="{esc(name)}"}} {pending}'
                    )
        except (RuntimeError, ET.ParseError, subprocess.TimeoutExpired) as e:
            print(f"gluster_metrics: heal info: {e}", file=sys.stderr)
    lines.append("# TYPE hpc_gluster_collector_timestamp_seconds gauge")
    lines.append(f"hpc_gluster_collector_timestamp_seconds {time.time():.0f}")
    fd, tmp = tempfile.mkstemp(dir=os.path.dirname(out), prefix=".gluster.")
    with os.fdopen(fd, "w") as f:
        f.write("\n".join(lines) + "\n")
    os.chmod(tmp, 0o644)
    os.replace(tmp, out)


if __name__ == "__main__":
    main()
