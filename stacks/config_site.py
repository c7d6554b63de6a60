"""Cross-field rules for values that plan cleanly and then break on the hosts.

Each rule names the key it blames and the host-side failure it prevents:
- login and cpu-worker on one host: both run a Slurm container on the host's macvlan network,
  so Docker is asked for two networks of one name and two containers at one address;
- ``inference.publicHost`` given as an address inside ``network.containerRange``: that address
  belongs to a Slurm container's macvlan interface, which Traefik on the k3s host never answers;
- ``slurm.registry`` on loopback (localhost, 127.0.0.0/8, ::1): every worker pulls from itself,
  where no registry runs (the head pushes to its own loopback);
- ``monitoring.adminNetworks`` that include the container range or k3s's pod network: the head's
  firewall would let every Slurm job or pod reach Prometheus's and Alertmanager's login.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from ipaddress import IPv4Address, IPv4Network, ip_address

from stacks.config_base import Role
from stacks.config_errors import Problem
from stacks.config_parts import HostConfig, InferenceConfig, MonitoringConfig, NetworkConfig

LOOPBACK_NAMES = ("localhost", "localhost.localdomain", "ip6-localhost")
K3S_POD_NETWORK = IPv4Network("10.42.0.0/16")  # k3s's default cluster CIDR (pods' own addresses)
K3S_SERVICE_NETWORK = IPv4Network("10.43.0.0/16")  # k3s's default service CIDR


def monitoring_problems(monitoring: MonitoringConfig, network: NetworkConfig) -> Iterator[Problem]:
    for i, n in enumerate(monitoring.admin_networks):
        for what, other in (("the container range", network.container_range), ("k3s's pod network", K3S_POD_NETWORK)):
            if n.overlaps(other):
                why = f"{n} includes {what} {other}: every job or pod there could reach the monitoring login"
                yield (f"monitoring.adminNetworks[{i}]", f"{why}; list the admins' networks only")


def problems(
    hosts: Sequence[HostConfig], network: NetworkConfig, inference: InferenceConfig | None, registry: str | None
) -> Iterator[Problem]:
    for i, h in enumerate(hosts):
        if h.has(Role.LOGIN) and h.has(Role.CPU_WORKER):
            yield (f"hosts[{i}].roles", f"login needs a host of its own ({h.name} is also a cpu-worker: "
                                        "two Slurm containers on one macvlan network and address)")  # fmt: skip
    public = inference.public_host if inference else None
    address = _address(public)
    if address is not None and address in network.container_range:
        yield ("inference.publicHost", f"{public} is inside the container range {network.container_range}: "
                                       "give a k3s host's address or a DNS name")  # fmt: skip
    if registry is not None and _loopback(registry.split("/", 1)[0].rsplit(":", 1)[0]):
        yield ("slurm.registry", f"{registry} is this host's loopback: every worker would pull from itself; "
                                 "give the registry's address on the cluster network")  # fmt: skip


def _address(text: str | None) -> IPv4Address | None:
    try:
        a = ip_address(text or "")
    except ValueError:
        return None
    return a if isinstance(a, IPv4Address) else None


def _loopback(host: str) -> bool:
    if host in LOOPBACK_NAMES:
        return True
    try:
        return ip_address(host).is_loopback
    except ValueError:
        return False
