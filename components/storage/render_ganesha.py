"""Pure renderers for NFS-Ganesha: ganesha.conf and the gateway's scripts.

The gateway step tells the truth about serving: NFS-Ganesha's own process must hold the NFS port
and its export manager (D-Bus) must list the export; a gateway that runs without its export
(started before the volume, e.g. after a reboot) is restarted once the volume is up, and anything
else fails the step naming the cause. An export change is applied in place through the export
manager (``UpdateExport``): no restart, so clients keep their state and no grace period starts.
Only a change outside the EXPORT block (NFS_CORE_PARAM, NFSV4, LOG) restarts Ganesha, and the
step says so. A systemd drop-in orders Ganesha after glusterd and makes it wait for the volume.
"""

from __future__ import annotations

from components.scripts import RemoteScript, script
from components.storage.spec import MOUNTD_PORT, NFS_PORT, ExportSpec

GANESHA_CONF = "/etc/ganesha/ganesha.conf"
GANESHA_LOG = "/var/log/ganesha/ganesha.log"
DROP_IN = "/etc/systemd/system/nfs-ganesha.service.d/10-hpc-cluster.conf"
WAIT_FOR_VOLUME = "/usr/local/lib/hpc-cluster/ganesha-wait-volume"
EXPORT_ID = 1
BOOT_WAIT_S = 300  # how long Ganesha waits at boot for glusterd to serve the volume
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
    return f"""\
hpc_put_file {WAIT_FOR_VOLUME} 0755 0:0 <<'HPC_WAIT_END'
#!/bin/sh
# Managed by hpc-cluster (Pulumi): NFS-Ganesha's FSAL_GLUSTER exports only what glusterd serves
# when Ganesha starts, so Ganesha waits (ExecStartPre) until the volume is started.
volume=$1 limit=${{2:-{BOOT_WAIT_S}}} waited=0
until gluster --mode=script volume status "$volume" >/dev/null 2>&1; do
  if [ "$waited" -ge "$limit" ]; then
    echo "hpc-cluster: gluster volume $volume is not started after ${{limit}}s" >&2
    exit 1
  fi
  sleep 2
  waited=$((waited + 2))
done
HPC_WAIT_END
hpc_put_file {DROP_IN} 0644 0:0 <<'HPC_DROPIN_END'
# Managed by hpc-cluster (Pulumi): start NFS-Ganesha after glusterd, once the volume is up.
[Unit]
After=glusterd.service network-online.target
Wants=glusterd.service network-online.target

[Service]
ExecStartPre={WAIT_FOR_VOLUME} {volume} {BOOT_WAIT_S}
HPC_DROPIN_END
if hpc_file_changed; then
  systemctl daemon-reload
fi
"""


def ganesha_config(
    host: str, conf: str, volume: str, nfs_versions: tuple[int, ...], allow_no_root_squash: bool = False
) -> RemoteScript:
    """Install ganesha.conf from stdin; apply an export change in place, restart only for a
    change outside the EXPORT block; then check that Ganesha really serves the export, repairing
    a gateway that started before the volume."""
    rpcbind = "hpc_service_up rpcbind\n" if 3 in nfs_versions else ""
    create = script(
        host,
        f"{host}-ganesha",
        f"""\
{rpcbind}{_boot_order(volume)}
export_mgr() {{ local m=$1; shift; {EXPORT_MGR} "org.ganesha.nfsd.exportmgr.$m" "$@"; }}
# ganesha.conf without its EXPORT blocks: what an in-place export update cannot change.
strip_exports() {{
  awk '/^EXPORT[[:space:]]*[{{]/ {{ skip = 1; depth = 0 }}
       skip {{ depth += gsub(/[{{]/, "{{"); depth -= gsub(/[}}]/, "}}"); if (depth == 0) skip = 0; next }}
       {{ print }}'
}}
old_rest=$({{ strip_exports <{GANESHA_CONF}; }} 2>/dev/null || true)
hpc_put_file {GANESHA_CONF} 0644 0:0
if hpc_file_changed && systemctl is-active --quiet nfs-ganesha; then
  if [ "$(strip_exports <{GANESHA_CONF})" != "$old_rest" ]; then
    reason="settings outside the EXPORT block changed"
  elif out=$(export_mgr UpdateExport string:{GANESHA_CONF} "string:EXPORT(Export_Id={EXPORT_ID})" 2>&1); then
    reason=""
    hpc_changed "updated export {EXPORT_ID} in place (no restart, no grace period)"
  else
    reason="the in-place export update failed: $(tail -n1 <<<"$out")"
  fi
  if [ -n "$reason" ]; then
    systemctl restart nfs-ganesha
    hpc_changed "restarted nfs-ganesha: $reason"
  fi
fi
hpc_service_up nfs-ganesha
# Serving means: NFS-Ganesha itself holds port {NFS_PORT} and its export manager lists the export.
state() {{
  local users
  users=$(ss -Hltnp "sport = :{NFS_PORT}")
  if [ -z "$users" ]; then
    echo down
  elif ! grep -q 'users:' <<<"$users"; then
    echo unowned  # no process owns the socket yet (a daemon mid-start) or a kernel NFS server
  elif ! grep -q '"ganesha.nfsd"' <<<"$users"; then
    echo "held by $(grep -o -m1 'users:(([^)]*)' <<<"$users")"
  elif grep -qF 'string "/{volume}"' <<<"$(export_mgr DisplayExport uint16:{EXPORT_ID} 2>/dev/null)"; then
    echo serving
  else
    echo no-export
  fi
}}
settle() {{
  local i
  for ((i = 0; i < {SERVING_TIMEOUT_S}; i++)); do
    now=$(state)
    case $now in serving | held*) return ;; esac
    sleep 1
  done
}}
why() {{ grep -E ':(CRIT|MAJ|FATAL) :' {GANESHA_LOG} 2>/dev/null | grep -vE 'DBUS|krb5|credentials|Cannot register' \
  | tail -n2 | cut -d: -f5- | tr '\n' ' '; }}
settle
case $now in
  held* | unowned)
    hpc_fail "port {NFS_PORT} on $(hostname) is ${{now/unowned/held by the kernel}}, not by NFS-Ganesha: stop that \
service (a kernel NFS server: systemctl disable --now nfs-server)" ;;
  no-export | down)
    if ! vol=$(gluster --mode=script volume status {volume} 2>&1 >/dev/null); then
      hpc_fail "NFS-Ganesha on $(hostname) cannot serve /{volume}: $vol"
    fi
    systemctl restart nfs-ganesha
    hpc_changed "restarted nfs-ganesha: it was $now (not serving /{volume})"
    settle
    [ "$now" = serving ] || hpc_fail "NFS-Ganesha on $(hostname) does not serve /{volume} ($now): $(why)" ;;
esac
""",
        file=GANESHA_CONF,
        extra_headers={"allow-no-root-squash": str(int(allow_no_root_squash))},
    )
    delete = script(
        host,
        f"{host}-ganesha-delete",
        f"""\
hpc_service_down nfs-ganesha
for f in {GANESHA_CONF} {DROP_IN} {WAIT_FOR_VOLUME}; do
  if [ -f "$f" ]; then
    rm -f "$f"
    hpc_changed "removed $f"
  fi
done
systemctl daemon-reload
""",
    )
    return RemoteScript(f"{host}-ganesha", host, create, delete, GANESHA_CONF, conf)
