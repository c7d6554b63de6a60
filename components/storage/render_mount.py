"""Pure renderer for the client mount on every host: fstab and the live mount agree with the stack.

The mount step compares what is mounted with what the stack says: a mount point that holds
another Gluster volume (or a volume served by hosts outside the pool) is unmounted and mounted
from the stack's volume; anything else on the mount point fails the step with both sources named.
The FUSE client's own error is quoted when a mount fails.
"""

from __future__ import annotations

from components.accounts import SharedDir
from components.scripts import RemoteScript, script, sh_quote
from components.storage.spec import fstab_line

FSTAB = "/etc/fstab"
MOUNT_TRIES = 10
MOUNT_RETRY_DELAY_S = 3
GLUSTER_FSTYPE = "fuse.glusterfs"


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
    want_src = f"{servers[0]}:/{volume}"
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
servers=({" ".join(sh_quote(s) for s in servers)})
current=$(findmnt -n -o SOURCE,FSTYPE --mountpoint {mp} || true)
if [ -n "$current" ]; then
  src=${{current%% *}} fstype=${{current##* }}
  if [ "$fstype" != {GLUSTER_FSTYPE} ]; then
    hpc_fail "{mount_point} on $(hostname) holds $src ($fstype), not the Gluster volume {want_src}: \\
unmount it or change hpc:storage.mountPoint"
  fi
  ours=0
  for s in "${{servers[@]}}"; do
    if [ "$src" = "$s:/{volume}" ]; then ours=1; fi
  done
  if [ "$ours" = 0 ]; then
    out=$(umount {mp} 2>&1) || hpc_fail "{mount_point} on $(hostname) is mounted from $src, but the stack wants \\
{want_src}, and it cannot be unmounted: $out"
    hpc_changed "unmounted $src from {mount_point} (the stack wants {want_src})"
    current=""
  fi
fi
if [ -z "$current" ]; then
  # Bricks can still be coming up right after the volume starts: retry, then quote the client.
  if ! hpc_retry {MOUNT_TRIES} {MOUNT_RETRY_DELAY_S} timeout 60 mount {mp}; then
    log=/var/log/glusterfs/{client_log}.log
    hpc_fail "mounting {mount_point} from {want_src} failed on $(hostname): $(hpc_last_error) \\
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
