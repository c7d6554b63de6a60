"""Pure renderers for the Gluster scripts: glusterd, bricks, the trusted pool, the volume, options.

Nothing here touches Pulumi: each function takes plain values and returns a ``RemoteScript``
(contract in ``components.scripts``: strict mode, idempotent, a matching delete).

What the scripts know about the pool comes from gluster itself: ``glusterq`` (installed by the
glusterd step) reads gluster's XML output and matches hosts by peer UUID, whatever name or
address a pool was probed by, so an existing pool is recognised as it is. Every failure quotes
gluster's own message and names the host; gluster calls are bounded by a timeout.
"""

from __future__ import annotations

from functools import cache
from pathlib import Path

from components.scripts import RemoteScript, script, sh_quote
from components.storage.spec import VolumeSpec

GLUSTER_CLI_TIMEOUT_S = 60
PEER_CONNECT_TIMEOUT_S = 60
GLUSTERD_READY_TIMEOUT_S = 60
BRICKS_ONLINE_TIMEOUT_S = 60
GLUSTERQ = "/usr/local/lib/hpc-cluster/glusterq.py"
MANAGED_OPTIONS = "user.hpc-managed-options"  # options this project set, kept in the volume itself
_SHELL = Path(__file__).resolve().parents[1] / "shell"


@cache
def glusterq_source() -> str:
    """The helper the glusterd step installs (``components/shell/glusterq.py``)."""
    return (_SHELL / "glusterq.py").read_text()


@cache
def _library() -> str:
    return (
        f"HPC_GLUSTER_TIMEOUT_S={GLUSTER_CLI_TIMEOUT_S}\n"
        f'hpc_gq() {{ python3 {GLUSTERQ} "$@"; }}\n' + (_SHELL / "gluster.sh").read_text()
    )


def _script(host: str, step: str, body: str, extra_headers: dict[str, str] | None = None) -> str:
    """A storage script: the shared library, then the Gluster library, then ``body``."""
    return script(host, step, _library() + "\n" + body, extra_headers=extra_headers)


def _not_connected(states: str) -> str:
    """awk over ``hpc_gq peers`` lines: 'ADDR is STATE, ...' for every member not connected."""
    return (
        "awk '$3 == \"unknown\" { $3 = \"not in the pool\" } $3 != \"Connected\" && $3 != \"local\" "
        f'{{ printf "%s%s is %s", sep, $1, $3; sep = ", " }}\' <<<"{states}"'
    )


# ---- per storage host -----------------------------------------------------------------------
def glusterd(host: str) -> RemoteScript:
    """Install glusterfs-server (skipped when present) and the glusterq helper (stdin); keep
    glusterd enabled and running."""
    create = script(
        host,
        f"{host}-glusterd",
        f"""\
hpc_install glusterfs-server attr python3
hpc_put_file {GLUSTERQ} 0755 0:0
hpc_service_up glusterd
hpc_wait {GLUSTERD_READY_TIMEOUT_S} "glusterd to answer" gluster --mode=script pool list
""",
        file=GLUSTERQ,
    )
    delete = script(host, f"{host}-glusterd-delete", f"hpc_service_down glusterd\nrm -f {GLUSTERQ}\n")
    return RemoteScript(f"{host}-glusterd", host, create, delete, GLUSTERQ, glusterq_source())


def brick(host: str, path: str, allow_destroy: bool) -> RemoteScript:
    """Prepare the brick directory (and clear a stale stamp of a failed create); its delete keeps
    the data unless destruction is allowed.

    Only creates the directory: once it is a brick, Gluster owns its mode and owner
    (``storage.owner-uid/gid``)."""
    q = sh_quote(path)
    create = _script(
        host,
        f"{host}-brick",
        f"hpc_mkdir {q}\ngluster_clear_stale_stamp {q}\n",
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


# ---- the pool and the volume (run on one storage host) --------------------------------------------
def peers(host: str, volume: str, others: list[str]) -> RemoteScript:
    """Probe every other storage host the pool does not know by any name; wait until all are
    connected (matched by peer UUID: a pool probed by host name is recognised)."""
    want = " ".join(sh_quote(o) for o in others)
    create = _script(
        host,
        f"{volume}-peers",
        f"""\
wanted=({want})
if [ ${{#wanted[@]}} -gt 0 ]; then
  states=$(hpc_gq peers "${{wanted[@]}}" 2>&1) || hpc_fail "gluster pool list failed on $(hostname): $states"
  while read -r addr _ state; do
    if [ "$state" = unknown ]; then
      gcall "gluster peer probe $addr" peer probe "$addr" >/dev/null
      hpc_changed "probed $addr"
    fi
  done <<<"$states"
  for ((i = 0; i < {PEER_CONNECT_TIMEOUT_S}; i++)); do
    states=$(hpc_gq peers "${{wanted[@]}}" 2>&1) || hpc_fail "gluster pool list failed on $(hostname): $states"
    bad=$({_not_connected("$states")})
    [ -z "$bad" ] && break
    sleep 1
  done
  [ -z "$bad" ] \\
    || hpc_fail "storage peers not connected after {PEER_CONNECT_TIMEOUT_S}s (gluster pool list on $(hostname)): $bad"
fi
""",
    )
    # Detaching peers would break a volume that still has bricks on them: deletion is manual.
    delete = script(host, f"{volume}-peers-delete", 'echo "hpc: leaving the trusted pool as it is"\n')
    return RemoteScript(f"{volume}-peers", host, create, delete)


def volume(host: str, spec: VolumeSpec) -> RemoteScript:
    """Create the volume only when missing, after checking every brick host is connected and
    clearing a stale stamp of an earlier failed create on this host's bricks; when present,
    verify its bricks (by peer UUID and path, replica sets in any order); start it and wait for
    a write quorum of bricks online."""
    v = spec.name
    wanted = " ".join(sh_quote(b.spec) for b in spec.bricks)
    addresses = " ".join(sh_quote(a) for a in dict.fromkeys(b.address for b in spec.bricks))
    arbiter = " arbiter 1" if spec.arbiter else ""
    replica = 2 if spec.arbiter else spec.replica
    create = _script(
        host,
        f"{v}-volume",
        f"""\
want=({wanted})
info=$(hpc_gq volume {v} 2>&1) || hpc_fail "gluster volume info {v} failed on $(hostname): $info"
if [ "$info" = absent ]; then
  states=$(hpc_gq peers {addresses} 2>&1) || hpc_fail "gluster pool list failed on $(hostname): $states"
  bad=$({_not_connected("$states")})
  [ -z "$bad" ] || hpc_fail "cannot create volume {v}: not every brick host is connected to the trusted pool \\
(gluster pool list on $(hostname)): $bad"
  for b in "${{want[@]}}"; do
    if awk -v a="${{b%%:*}}" '$1 == a && $3 == "local" {{ found = 1 }} END {{ exit !found }}' <<<"$states"; then
      gluster_clear_stale_stamp "${{b#*:}}"
    fi
  done
  gcall "gluster volume create {v}" volume create {v} replica {replica}{arbiter} "${{want[@]}}" >/dev/null
  hpc_changed "created volume {v} ({spec.layout})"
else
  have_type=$(awk '$1 == "type" {{ print $2 }}' <<<"$info")
  if [ "$have_type" != {sh_quote(spec.expected_type)} ] \\
    || ! hpc_gq same-bricks {v} {spec.bricks_per_set} "${{want[@]}}"; then
    have=$(g volume info {v} | awk '/^Brick[0-9]+:/ {{ print $2 }}' | paste -sd' ')
    hpc_fail "volume {v} exists as $have_type with bricks [$have], but the stack wants \\
{spec.expected_type} ({spec.layout}) with bricks [${{want[*]}}]; refusing to change it. \\
Move bricks by hand (gluster volume replace-brick/add-brick) or fix hpc:storage."
  fi
fi
if ! grep -qx "status Started" <<<"$(hpc_gq volume {v})"; then
  gcall "gluster volume start {v}" volume start {v} >/dev/null
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
if [ "$(hpc_gq volume {v})" != absent ]; then
  g volume stop {v} force >/dev/null || true
  gcall "gluster volume delete {v}" volume delete {v} >/dev/null
  hpc_changed "deleted volume {v}"
fi
"""
    else:
        body = f'echo "hpc: keeping volume {v} and its data (hpc:storage.allowDestroy is false)"\n'
    return RemoteScript(f"{v}-volume", host, create, _script(host, f"{v}-volume-delete", body))


def options(host: str, volume: str, opts: tuple[tuple[str, str], ...]) -> RemoteScript:
    """Converge the volume's options: names resolved to gluster's canonical ones (aliases such
    as ``cache-size``; a later entry for the same option wins), values compared as gluster
    reports them, and options this project set before but the stack no longer lists reset to
    their defaults (the set is recorded in the volume as ``user.hpc-managed-options``)."""
    lines = "\n".join(f"wanted {sh_quote(k)} {sh_quote(val)}" for k, val in opts)
    create = _script(
        host,
        f"{volume}-options",
        f"""\
declare -A want=()
order=()
get() {{ {{ g volume get {volume} "$1" 2>&1 || true; }} | awk 'NR == 3 {{ print $1, $2 }}'; }}
norm() {{
  local v=${{1,,}}
  v=${{v// /}}
  case $v in on | yes | true | enable) echo on ;; off | no | false | disable) echo off ;; *) echo "$v" ;; esac
}}
wanted() {{
  local row
  row=$(get "$1")
  [ -n "$row" ] || hpc_fail "gluster does not know the volume option $1 (hpc:storage.options): \\
$(g volume get {volume} "$1" 2>&1 | tail -n1)"
  local canon=${{row%% *}}
  [ -n "${{want[$canon]+x}}" ] || order+=("$canon")
  want[$canon]=$2
}}
{lines}
for key in "${{order[@]}}"; do
  have=$(get "$key")
  have=${{have#* }}
  if [ "$(norm "$have")" != "$(norm "${{want[$key]}}")" ]; then
    gcall "gluster volume set {volume} $key" volume set {volume} "$key" "${{want[$key]}}" >/dev/null
    hpc_changed "set $key=${{want[$key]}}"
  fi
done
recorded=$(g volume get {volume} {MANAGED_OPTIONS} 2>/dev/null | awk 'NR == 3 {{ print $2 }}') || true
for key in ${{recorded//,/ }}; do
  if [ -z "${{want[$key]+x}}" ]; then
    gcall "gluster volume reset {volume} $key" volume reset {volume} "$key" >/dev/null
    hpc_changed "reset $key to its default (no longer in hpc:storage.options)"
  fi
done
managed=$(printf '%s\\n' "${{order[@]}}" | sort | paste -sd,)
if [ "$recorded" != "$managed" ]; then
  gcall "gluster volume set {volume} {MANAGED_OPTIONS}" volume set {volume} {MANAGED_OPTIONS} "$managed" >/dev/null
fi
""",
    )
    delete = script(host, f"{volume}-options-delete", 'echo "hpc: volume options stay with the volume"\n')
    return RemoteScript(f"{volume}-options", host, create, delete)
