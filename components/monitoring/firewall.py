"""The monitoring tier's host firewall (pure): an nftables table of its own on every host, so the
exporters answer only Prometheus and the head's Prometheus and Alertmanager only the admins.

* Exporter ports (node, IPMI, DCGM): from loopback, and from the head's own address (where
  Prometheus runs); anything else is refused with a TCP reset, so a Slurm job (its container has
  an address of its own on the hosts' network) or a k3s pod cannot read or probe them.
* On the head, Prometheus and Alertmanager: from loopback and the stack's
  ``hpc:monitoring.adminNetworks`` only (they also ask for TLS and a password; the firewall keeps
  the login page itself away from jobs).
* IPv6 to those ports is refused outright (the stack's addresses are IPv4).

The table is ``inet hpc_monitoring``: it is replaced as a whole and never touches the site's own
rules (a table of its own, its own chain at the filter priority; an accept there does not
override a drop of the site's). A systemd unit loads the file again at boot, after the site's
``nftables.service``.
"""

from __future__ import annotations

TABLE = "hpc_monitoring"
RULES_FILE = "/etc/hpc-cluster/monitoring-firewall.nft"
UNIT = "hpc-monitoring-firewall"


def _set(items: list[str] | tuple[str, ...]) -> str:
    return "{ " + ", ".join(items) + " }"


def rules(*, exporter_ports: tuple[int, ...], prometheus_address: str,
          ui_ports: tuple[int, ...] = (), admin_networks: tuple[str, ...] = ()) -> str:  # fmt: skip
    """The table for one host: ``ui_ports`` only on the head (``admin_networks`` may reach them)."""
    ports = _set([str(p) for p in sorted(set(exporter_ports))])
    lines = [
        "# Managed by hpc-cluster (Pulumi): components/monitoring/firewall.py",
        f"table inet {TABLE} {{}}",  # so the delete below also works on the first load
        f"delete table inet {TABLE}",
        f"table inet {TABLE} {{",
        "  chain input {",
        "    type filter hook input priority filter; policy accept;",
        '    iif "lo" accept',
        f"    meta nfproto ipv6 tcp dport {ports} reject with tcp reset",
        f"    tcp dport {ports} ip saddr != {prometheus_address} reject with tcp reset",
    ]
    if ui_ports:
        ui = _set([str(p) for p in sorted(set(ui_ports))])
        lines.append(f"    meta nfproto ipv6 tcp dport {ui} reject with tcp reset")
        if admin_networks:
            lines.append(f"    tcp dport {ui} ip saddr != {_set(list(admin_networks))} reject with tcp reset")
        else:
            lines.append(f"    tcp dport {ui} reject with tcp reset")
    lines += ["  }", "}"]
    return "\n".join(lines) + "\n"


def unit() -> str:
    """Loads the table at boot (after the site's own ruleset, which may flush everything)."""
    return (
        "[Unit]\nDescription=Firewall of the monitoring ports (hpc-cluster)\n"
        "After=nftables.service\nBefore=prometheus-node-exporter.service network-online.target\n\n"
        f"[Service]\nType=oneshot\nRemainAfterExit=yes\nExecStart=/usr/sbin/nft -f {RULES_FILE}\n"
        f"ExecStop=-/usr/sbin/nft delete table inet {TABLE}\n\n[Install]\nWantedBy=multi-user.target\n"
    )
