"""Pure renderers for the storage tier: ganesha.conf and every storage script.

Nothing here touches Pulumi. Each function takes plain values and returns text or a
``RemoteScript``; the components in this package wire them to hosts. Scripts follow the contract
of ``components.scripts``: strict mode, idempotent, a matching delete, ``hpc: result=...``.

Gluster CLI calls are bounded (``timeout``), so an unreachable peer fails the step with a clear
message instead of hanging the deployment.
"""

from __future__ import annotations

from dataclasses import dataclass
from ipaddress import IPv4Network

from components.accounts import SharedDir
from components.scripts import RemoteScript, script, sh_quote

GLUSTER_CLI_TIMEOUT_S = 60
PEER_CONNECT_TIMEOUT_S = 60
GLUSTERD_READY_TIMEOUT_S = 60
BRICKS_ONLINE_TIMEOUT_S = 60
GANESHA_CONF = "/etc/ganesha/ganesha.conf"
FSTAB = "/etc/fstab"
NFS_PORT = 2049
MOUNT_TRIES = 10
MOUNT_RETRY_DELAY_S = 3
MOUNTD_PORT = 20048

# Options every volume gets: client quorum (a write needs a majority of the replica set),
# server quorum (a glusterd that loses the pool majority stops its bricks), and no built-in
# gNFS (NFS-Ganesha serves NFS).
BASE_VOLUME_OPTIONS: dict[str, str] = {
    "cluster.quorum-type": "auto",
    "cluster.server-quorum-type": "server",
    "nfs.disable": "on",
    "network.ping-timeout": "20",
}

_GLUSTER_FN = f"""\
g() {{ timeout {GLUSTER_CLI_TIMEOUT_S} gluster --mode=script "$@"; }}"""


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


def volume_options(owner_uid: int, owner_gid: int, extra: dict[str, str]) -> dict[str, str]:
    """The full option set: base quorum settings, volume-root owner, then the stack's extras."""
    opts = dict(BASE_VOLUME_OPTIONS)
    opts["storage.owner-uid"] = str(owner_uid)
    opts["storage.owner-gid"] = str(owner_gid)
    opts.update(extra)
    return dict(sorted(opts.items()))


# ---- per storage host -----------------------------------------------------------------------
def glusterd(host: str) -> RemoteScript:
    """Install glusterfs-server (skipped when present) and keep glusterd enabled and running."""
    create = script(
        host,
        f"{host}-glusterd",
        f"""\
hpc_install glusterfs-server
hpc_service_up glusterd
hpc_wait {GLUSTERD_READY_TIMEOUT_S} "glusterd to answer" gluster --mode=script pool list
""",
    )
    delete = script(host, f"{host}-glusterd-delete", "hpc_service_down glusterd\n")
    return RemoteScript(f"{host}-glusterd", host, create, delete)


def brick(host: str, path: str, allow_destroy: bool) -> RemoteScript:
    """Prepare the brick directory; its delete keeps the data unless destruction is allowed.

    Only creates the directory: once it is a brick, Gluster owns its mode and owner
    (``storage.owner-uid/gid``)."""
    q = sh_quote(path)
    create = script(
        host,
        f"{host}-brick",
        f"hpc_mkdir {q}\n",
        extra_headers={"stateful": "gluster-brick", "allow-destroy": str(int(allow_destroy))},
    )
    if allow_destroy:
        body = f"""\
if [ -d {q} ]; then
  rm -rf --one-file-system {q}
  hpc_changed "removed brick {path}"
fi
"""
    else:
        body = f'echo "hpc: keeping brick {path} and its data (hpc:storage.allowDestroy is false)"\n'
    return RemoteScript(f"{host}-brick", host, create, script(host, f"{host}-brick-delete", body))


# ---- volume (run on the first storage host) ----------------------------------------------------
def peers(host: str, volume: str, others: list[str]) -> RemoteScript:
    """Probe every other storage host that is not in the pool yet; wait until all are connected."""
    want = " ".join(others)
    create = script(
        host,
        f"{volume}-peers",
        f"""\
{_GLUSTER_FN}
for peer in {want}; do
  if ! g pool list | awk 'NR > 1 {{ print $2 }}' | grep -qxF "$peer"; then
    g peer probe "$peer" >/dev/null || hpc_fail "peer probe $peer failed: is glusterd running there?"
    hpc_changed "probed $peer"
  fi
done
connected() {{
  local peer
  for peer in {want}; do
    g pool list | awk -v p="$peer" '$2 == p && $3 == "Connected" {{ ok = 1 }} END {{ exit !ok }}' || return 1
  done
}}
hpc_wait {PEER_CONNECT_TIMEOUT_S} "peers {want} to be Connected" connected
""",
    )
    # Detaching peers would break a volume that still has bricks on them: deletion is manual.
    delete = script(host, f"{volume}-peers-delete", 'echo "hpc: leaving the trusted pool as it is"\n')
    return RemoteScript(f"{volume}-peers", host, create, delete)


def volume(host: str, spec: VolumeSpec) -> RemoteScript:
    """Create the volume only when missing; verify type and bricks when present; start it."""
    bricks = " ".join(b.spec for b in spec.bricks)
    arbiter = " arbiter 1" if spec.arbiter else ""
    replica = 2 if spec.arbiter else spec.replica
    v = spec.name
    create = script(
        host,
        f"{v}-volume",
        f"""\
{_GLUSTER_FN}
want_bricks="{bricks}"
want_type="{spec.expected_type}"
if info=$(g volume info {v} 2>/dev/null); then
  have_type=$(awk -F': ' '$1 == "Type" {{ print $2 }}' <<<"$info")
  have_bricks=$(awk '/^Brick[0-9]+:/ {{ print $2 }}' <<<"$info" | paste -sd' ')
  if [ "$have_type" != "$want_type" ] || [ "$have_bricks" != "$want_bricks" ]; then
    hpc_fail "volume {v} exists as $have_type with bricks [$have_bricks], but the stack wants \\
$want_type ({spec.layout}) with bricks [$want_bricks]; refusing to change it. \\
Move bricks by hand (gluster volume replace-brick/add-brick) or fix hpc:storage."
  fi
else
  # shellcheck disable=SC2086
  g volume create {v} replica {replica}{arbiter} $want_bricks >/dev/null \\
    || hpc_fail "gluster volume create {v} failed (are all storage peers connected?)"
  hpc_changed "created volume {v} ({spec.layout})"
fi
if [ "$(g volume info {v} | awk -F': ' '$1 == "Status" {{ print $2 }}')" != "Started" ]; then
  g volume start {v} >/dev/null || hpc_fail "gluster volume start {v} failed"
  hpc_changed "started volume {v}"
fi
# Serving means a quorum of bricks online (client quorum refuses writes below it).
online() {{ [ "$(g volume status {v} detail | grep -cE '^Online +: Y')" -ge {spec.quorum_bricks} ]; }}
hpc_wait {BRICKS_ONLINE_TIMEOUT_S} "{spec.quorum_bricks} of {len(spec.bricks)} bricks of {v} to be online" online
""",
        extra_headers={
            "stateful": "gluster-volume",
            "replica": str(replica),
            "arbiter": str(int(spec.arbiter)),
            "allow-destroy": str(int(spec.allow_destroy)),
        },
    )
    if spec.allow_destroy:
        body = f"""\
{_GLUSTER_FN}
if g volume info {v} >/dev/null 2>&1; then
  g volume stop {v} force >/dev/null || true
  g volume delete {v} >/dev/null
  hpc_changed "deleted volume {v}"
fi
"""
    else:
        body = f'echo "hpc: keeping volume {v} and its data (hpc:storage.allowDestroy is false)"\n'
    return RemoteScript(f"{v}-volume", host, create, script(host, f"{v}-volume-delete", body))


def options(host: str, volume: str, opts: dict[str, str]) -> RemoteScript:
    """Set volume options that differ from the wanted value."""
    lines = "\n".join(f"want {sh_quote(k)} {sh_quote(val)}" for k, val in opts.items())
    create = script(
        host,
        f"{volume}-options",
        f"""\
{_GLUSTER_FN}
want() {{
  local have
  have=$(g volume get {volume} "$1" | awk -v k="$1" '$1 == k {{ print $2 }}')
  if [ "$have" != "$2" ]; then
    g volume set {volume} "$1" "$2" >/dev/null || hpc_fail "gluster volume set {volume} $1 $2 failed"
    hpc_changed "set $1=$2"
  fi
}}
{lines}
""",
    )
    delete = script(host, f"{volume}-options-delete", 'echo "hpc: volume options stay with the volume"\n')
    return RemoteScript(f"{volume}-options", host, create, delete)


# ---- NFS-Ganesha ---------------------------------------------------------------------------------
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
    Export_Id = 1;
    Path = "/{spec.volume}";
    Pseudo = "{spec.pseudo}";
    Protocols = {protocols};
    Transports = TCP;
    SecType = sys;
    Squash = {squash};
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
    """Install NFS-Ganesha with the Gluster FSAL (and rpcbind for NFSv3)."""
    pkgs = "nfs-ganesha nfs-ganesha-gluster" + (" rpcbind" if 3 in nfs_versions else "")
    create = script(host, f"{host}-ganesha-install", f"hpc_install {pkgs}\n")
    delete = script(host, f"{host}-ganesha-install-delete", 'echo "hpc: packages stay installed"\n')
    return RemoteScript(f"{host}-ganesha-install", host, create, delete)


def ganesha_config(
    host: str, conf: str, nfs_versions: tuple[int, ...], allow_no_root_squash: bool = False
) -> RemoteScript:
    """Install ganesha.conf from stdin; restart NFS-Ganesha only when the file changed."""
    rpcbind = "hpc_service_up rpcbind\n" if 3 in nfs_versions else ""
    create = script(
        host,
        f"{host}-ganesha",
        f"""\
{rpcbind}hpc_put_file {GANESHA_CONF} 0644 0:0
if hpc_file_changed && systemctl is-active --quiet nfs-ganesha; then
  systemctl restart nfs-ganesha
  hpc_changed "restarted nfs-ganesha"
fi
hpc_service_up nfs-ganesha
hpc_wait 30 "NFS-Ganesha to listen on port {NFS_PORT}" bash -c "ss -Hltn 'sport = :{NFS_PORT}' | grep -q ."
""",
        file=GANESHA_CONF,
        extra_headers={"allow-no-root-squash": str(int(allow_no_root_squash))},
    )
    delete = script(
        host,
        f"{host}-ganesha-delete",
        f"""\
hpc_service_down nfs-ganesha
if [ -f {GANESHA_CONF} ]; then
  rm -f {GANESHA_CONF}
  hpc_changed "removed {GANESHA_CONF}"
fi
""",
    )
    return RemoteScript(f"{host}-ganesha", host, create, delete, GANESHA_CONF, conf)


# ---- client mounts (every cluster host) -------------------------------------------------------
def fstab_line(servers: list[str], volume: str, mount_point: str) -> str:
    backup = ":".join(servers[1:])
    opts = "defaults,_netdev" + (f",backup-volfile-servers={backup}" if backup else "")
    return f"{servers[0]}:/{volume} {mount_point} glusterfs {opts} 0 0"


def client_mount(
    host: str,
    servers: list[str],
    volume: str,
    mount_point: str,
    layout: tuple[SharedDir, ...],
) -> RemoteScript:
    """Mount the volume through /etc/fstab (backup volfile servers) and create the shared dirs."""
    line = fstab_line(servers, volume, mount_point)
    mp = sh_quote(mount_point)
    client_log = mount_point.strip("/").replace("/", "-")  # where the FUSE client logs
    dirs = "\n".join(f"hpc_dir {sh_quote(f'{mount_point}/{d.name}')} {d.mode_text} {d.uid}:{d.gid}" for d in layout)
    create = script(
        host,
        f"{host}-mount",
        f"""\
hpc_install glusterfs-client
want={sh_quote(line)}
have=$(awk -v mp={mp} '$2 == mp' {FSTAB})
if [ "$have" != "$want" ]; then
  tmp=$(mktemp)
  awk -v mp={mp} '$2 != mp' {FSTAB} >"$tmp"
  printf '%s\\n' "$want" >>"$tmp"
  cat "$tmp" >{FSTAB}
  rm -f "$tmp"
  hpc_changed "fstab entry for {mount_point}"
fi
hpc_mkdir {mp}
if ! mountpoint -q {mp}; then
  # Bricks can still be coming up right after the volume starts: retry, then quote the client.
  if ! hpc_retry {MOUNT_TRIES} {MOUNT_RETRY_DELAY_S} timeout 60 mount {mp}; then
    log=/var/log/glusterfs/{client_log}.log
    hpc_fail "mounting {mount_point} from {servers[0]}:/{volume} failed: $(hpc_last_error) \
$(grep -s '\\] E \\[' "$log" | tail -n 2 | cut -c1-300 | tr '\\n' ' ')"
  fi
  hpc_changed "mounted {mount_point}"
fi
{dirs}
""",
    )
    delete = script(
        host,
        f"{host}-mount-delete",
        f"""\
if mountpoint -q {mp}; then
  umount {mp}
  hpc_changed "unmounted {mount_point}"
fi
if awk -v mp={mp} '$2 == mp {{ found = 1 }} END {{ exit !found }}' {FSTAB}; then
  tmp=$(mktemp)
  awk -v mp={mp} '$2 != mp' {FSTAB} >"$tmp"
  cat "$tmp" >{FSTAB}
  rm -f "$tmp"
  hpc_changed "removed the fstab entry for {mount_point}"
fi
""",
    )
    return RemoteScript(f"{host}-mount", host, create, delete)
