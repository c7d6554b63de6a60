"""Pure renderers for NFS-Ganesha: ganesha.conf and the gateway's scripts.

The gateway step tells the truth about serving: NFS-Ganesha's own process must hold the NFS port
and its export manager (D-Bus) must list the export; a gateway that runs without its export
(started before the volume, e.g. after a reboot) is restarted once the volume is up, and anything
else fails the step naming the cause. An export change is applied in place through the export
manager (``UpdateExport``): no restart, so clients keep their state and no grace period starts.
Only a change outside the EXPORT block (NFS_CORE_PARAM, NFSV4, LOG) restarts Ganesha, and the
step says so. A systemd drop-in orders Ganesha after glusterd and makes it wait for the volume, longer than
systemd's default start timeout, and restarts it after a failed start: a volume that comes up
late is still exported, with no step re-run (proven on a real host: tests/vm/test_boot_order.py).
"""

from __future__ import annotations

from pathlib import Path

from components.scripts import Raw, RemoteScript, fill, script
from components.storage.spec import MOUNTD_PORT, NFS_PORT, ExportSpec

SCRIPTS = Path(__file__).with_name("scripts")
GANESHA_CONF = "/etc/ganesha/ganesha.conf"
GANESHA_LOG = "/var/log/ganesha/ganesha.log"
DROP_IN = "/etc/systemd/system/nfs-ganesha.service.d/10-hpc-cluster.conf"
WAIT_FOR_VOLUME = "/usr/local/lib/hpc-cluster/ganesha-wait-volume"
EXPORT_ID = 1
BOOT_WAIT_S = 300  # how long Ganesha waits at boot for glusterd to serve the volume
START_TIMEOUT_S = BOOT_WAIT_S + 60  # systemd's limit on the start (the wait, then Ganesha's own start)
RESTART_S = 10  # after a failed start (the volume still down, or Ganesha died), systemd tries again
SERVING_TIMEOUT_S = 30
EXPORT_MGR = "dbus-send --system --print-reply --dest=org.ganesha.nfsd /org/ganesha/nfsd/ExportMgr"


def ganesha_conf(spec: ExportSpec, fsal_host: str) -> str:
    """ganesha.conf: one FSAL_GLUSTER export, restricted to the cluster's clients."""
    protocols = ", ".join(str(v) for v in sorted(spec.nfs_versions))
    squash = {"root_squash": "Root_Squash", "all_squash": "All_Squash", "no_root_squash": "No_Root_Squash"}[spec.squash]
    clients = ", ".join(str(c) for c in spec.clients)
    v3 = 3 in spec.nfs_versions
    return f"""\
# Managed by hpc-cluster (Pulumi): local edits are overwritten.
NFS_CORE_PARAM {{
    Protocols = {protocols};
    NFS_Port = {NFS_PORT};
{f"    MNT_Port = {MOUNTD_PORT};" if v3 else "    # NFSv4 only: no rpcbind, mountd or NLM."}
    Enable_NLM = {"true" if v3 else "false"};
    Enable_RQUOTA = false;
    Enable_UDP = false;
}}

NFSV4 {{
    Graceless = {"false" if spec.grace else "true"};
    Only_Numeric_Owners = true;
}}

LOG {{
    Default_Log_Level = EVENT;
}}

EXPORT_DEFAULTS {{
    Access_Type = None;
}}

EXPORT {{
    Export_Id = {EXPORT_ID};
    Path = "/{spec.volume}";
    Pseudo = "{spec.pseudo}";
    Protocols = {protocols};
    Transports = TCP;
    SecType = sys;
    Squash = {squash};
    # Only root on a client may mount: a user-space client cannot claim a uid from a host.
    PrivilegedPort = true;
    Access_Type = None;
    Disable_ACL = true;

    CLIENT {{
        Clients = {clients};
        Access_Type = RW;
        Protocols = {protocols};
    }}

    FSAL {{
        Name = GLUSTER;
        Hostname = "{fsal_host}";
        Volume = "{spec.volume}";
    }}
}}
"""



def ganesha_install(host: str, nfs_versions: tuple[int, ...]) -> RemoteScript:
    """Install NFS-Ganesha with the Gluster FSAL (and rpcbind for NFSv3), and the D-Bus tools its
    export manager answers on."""
    pkgs = "nfs-ganesha nfs-ganesha-gluster dbus" + (" rpcbind" if 3 in nfs_versions else "")
    create = script(host, f"{host}-ganesha-install", f"hpc_install {pkgs}\n")
    delete = script(host, f"{host}-ganesha-install-delete", 'echo "hpc: packages stay installed"\n')
    return RemoteScript(f"{host}-ganesha-install", host, create, delete)


def _boot_order(volume: str) -> str:
    """The drop-in and its wait script: after glusterd at boot, and only once the volume is up."""
    return fill(SCRIPTS / "ganesha-boot-order.sh", wait_script=WAIT_FOR_VOLUME, drop_in=DROP_IN, volume=volume,
                boot_wait=BOOT_WAIT_S, start_timeout=START_TIMEOUT_S, restart_s=RESTART_S)  # fmt: skip


def ganesha_config(
    host: str, conf: str, volume: str, nfs_versions: tuple[int, ...], allow_no_root_squash: bool = False
) -> RemoteScript:
    """Install ganesha.conf from stdin; apply an export change in place, restart only for a
    change outside the EXPORT block; then check that Ganesha really serves the export, repairing
    a gateway that started before the volume."""
    body = fill(
        SCRIPTS / "ganesha.sh",
        rpcbind=Raw("hpc_service_up rpcbind\n" if 3 in nfs_versions else ""),
        boot_order=Raw(_boot_order(volume)),
        export_mgr=Raw(EXPORT_MGR),
        conf=GANESHA_CONF,
        export_id=EXPORT_ID,
        nfs_port=NFS_PORT,
        volume=volume,
        serving_timeout=SERVING_TIMEOUT_S,
        log=GANESHA_LOG,
    )
    create = script(
        host,
        f"{host}-ganesha",
        body,
        file=GANESHA_CONF,
        extra_headers={"allow-no-root-squash": str(int(allow_no_root_squash))},
    )
    undo = fill(SCRIPTS / "ganesha-delete.sh", files=[GANESHA_CONF, DROP_IN, WAIT_FOR_VOLUME])
    delete = script(host, f"{host}-ganesha-delete", undo)
    return RemoteScript(f"{host}-ganesha", host, create, delete, GANESHA_CONF, conf)
