"""Pure renderer for the client mount on every host: fstab and the live mount agree with the stack.

The mount step compares what is mounted with what the stack says: a mount point that holds
another Gluster volume (or a volume served by hosts outside the pool) is unmounted and mounted
from the stack's volume; anything else on the mount point fails the step with both sources named.
The FUSE client's own error is quoted when a mount fails.
"""

from __future__ import annotations

from pathlib import Path

from components.accounts import SharedDir
from components.scripts import Raw, RemoteScript, fill, quoted, script
from components.storage.spec import fstab_line

SCRIPTS = Path(__file__).with_name("scripts")
FSTAB = "/etc/fstab"
MOUNT_TRIES = 10
MOUNT_RETRY_DELAY_S = 3
GLUSTER_FSTYPE = "fuse.glusterfs"
DOCKER_DROPIN = "/etc/systemd/system/docker.service.d/10-hpc-shared-volume.conf"


def client_mount(
    host: str,
    servers: list[str],
    volume: str,
    mount_point: str,
    layout: tuple[SharedDir, ...],
    root_owner: str = "0:0",
    address: str = "",
) -> RemoteScript:
    """Mount the volume through /etc/fstab (backup volfile servers), keep its root 0755 and
    owned by ``root_owner`` (root: no user may swap ``home/`` or the model cache) and create the
    shared dirs. Boot order: on a server (``address`` among ``servers``) the mount waits for its
    glusterd; where Docker is installed it starts only after the mount (``RequiresMountsFor``
    drop-in): a container must never start on the empty mount point and write beside the volume."""
    mount = {"mount_point": mount_point, "mount_text": Raw(mount_point), "fstab": FSTAB}
    dirs = "\n".join(f"hpc_dir {quoted(f'{mount_point}/{d.name}')} {d.mode_text} {d.uid}:{d.gid}" for d in layout)
    body = fill(
        SCRIPTS / "mount.sh",
        **mount,
        line=fstab_line(servers, volume, mount_point, local_server=address in servers),
        docker_dropin=DOCKER_DROPIN,
        servers=servers,
        volume=volume,
        fstype=GLUSTER_FSTYPE,
        want_src=Raw(f"{servers[0]}:/{volume}"),
        tries=MOUNT_TRIES,
        delay=MOUNT_RETRY_DELAY_S,
        client_log=Raw(mount_point.strip("/").replace("/", "-")),  # where the FUSE client logs
        dirs=Raw(dirs),
        root_owner=root_owner,
    )
    create = script(host, f"{host}-mount", body)
    undo = fill(SCRIPTS / "mount-delete.sh", **mount, docker_dropin=DOCKER_DROPIN)
    delete = script(host, f"{host}-mount-delete", undo)
    return RemoteScript(f"{host}-mount", host, create, delete)
