"""What the storage tier must build, as plain frozen values (no Pulumi, no scripts).

``VolumeSpec`` and ``ExportSpec`` are what the renderers (``render_gluster``, ``render_ganesha``,
``render_mount``) turn into scripts; ``stacks/cluster.py`` fills them from the validated config.
"""

from __future__ import annotations

from dataclasses import dataclass
from ipaddress import IPv4Address, IPv4Network

NFS_PORT = 2049
MOUNTD_PORT = 20048

# Options every volume gets: client quorum (a write needs a majority of the replica set),
# server quorum (a glusterd that loses the pool majority stops its bricks), and no built-in
# gNFS (NFS-Ganesha serves NFS). The stack's hpc:storage.options come after and win.
BASE_VOLUME_OPTIONS: dict[str, str] = {
    "cluster.quorum-type": "auto",
    "cluster.server-quorum-type": "server",
    "nfs.disable": "on",
    "network.ping-timeout": "20",
    # Bricks serve only clients bound to a privileged port (root's client, Ganesha's gfapi): an
    # unprivileged user on an allowed host cannot bring her own client and claim any uid.
    # Gluster 10 defaults both to on (its clients bind unprivileged ports: with only the server
    # side off, root's own mounts fail with "Transport endpoint is not connected").
    "client.bind-insecure": "off",
    "server.allow-insecure": "off",
}


@dataclass(frozen=True)
class Brick:
    """One brick: the storage host's address and the brick directory."""

    host: str
    address: str
    path: str

    @property
    def spec(self) -> str:
        return f"{self.address}:{self.path}"


@dataclass(frozen=True)
class VolumeSpec:
    """What the Gluster volume must look like."""

    name: str
    replica: int
    arbiter: bool
    bricks: tuple[Brick, ...]
    options: tuple[tuple[str, str], ...]
    allow_destroy: bool

    @property
    def layout(self) -> str:
        return "replica 2 arbiter 1" if self.arbiter else f"replica {self.replica}"

    @property
    def bricks_per_set(self) -> int:
        return 3 if self.arbiter else self.replica

    @property
    def quorum_bricks(self) -> int:
        """Bricks that must be online for every replica set to keep a write quorum."""
        sets = len(self.bricks) // self.bricks_per_set
        return sets * (self.bricks_per_set // 2 + 1)

    @property
    def expected_type(self) -> str:
        sets = len(self.bricks) // self.bricks_per_set
        return "Replicate" if sets == 1 else "Distributed-Replicate"


@dataclass(frozen=True)
class ExportSpec:
    """What NFS-Ganesha exports."""

    volume: str
    pseudo: str
    nfs_versions: tuple[int, ...]
    clients: tuple[IPv4Network, ...]
    squash: str
    grace: bool
    allow_no_root_squash: bool = False


def volume_options(
    owner_uid: int, owner_gid: int, clients: list[str], extra: dict[str, str]
) -> tuple[tuple[str, str], ...]:
    """The option set in the order it is applied: base quorum settings, the volume-root owner,
    the clients allowed to mount (the cluster's hosts: never the container range), then the
    stack's extras (which win over the base when they name the same option)."""
    opts = [
        *BASE_VOLUME_OPTIONS.items(),
        ("storage.owner-uid", str(owner_uid)),
        ("storage.owner-gid", str(owner_gid)),
        ("auth.allow", ",".join(clients)),
    ]
    return tuple([*opts, *sorted(extra.items())])


def storage_servers(addresses: list[str]) -> list[str]:
    """Storage addresses in a fixed order (numeric), so the host list's order in the stack file
    changes no fstab line and no mount source."""
    return sorted(addresses, key=IPv4Address)


# On a host that is itself a server, systemd mounts the volume only after its own glusterd runs
# (at boot the mount would otherwise race the daemon whose brick it may need).
LOCAL_SERVER_OPTION = "x-systemd.requires=glusterd.service"


def fstab_line(servers: list[str], volume: str, mount_point: str, local_server: bool = False) -> str:
    """The volume's fstab entry: a network mount (``_netdev``: after the network is online), the
    other servers as backup volfile servers, and on a server its glusterd first."""
    backup = ":".join(servers[1:])
    opts = "defaults,_netdev" + (f",backup-volfile-servers={backup}" if backup else "")
    opts += f",{LOCAL_SERVER_OPTION}" if local_server else ""
    return f"{servers[0]}:/{volume} {mount_point} glusterfs {opts} 0 0"
