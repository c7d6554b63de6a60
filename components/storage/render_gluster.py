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

from components.scripts import Raw, RemoteScript, fill, quoted, script
from components.storage.spec import VolumeSpec

GLUSTER_CLI_TIMEOUT_S = 60
PEER_CONNECT_TIMEOUT_S = 60
GLUSTERD_READY_TIMEOUT_S = 60
BRICKS_ONLINE_TIMEOUT_S = 60
GLUSTERQ = "/usr/local/lib/hpc-cluster/glusterq.py"
MANAGED_OPTIONS = "user.hpc-managed-options"  # options this project set, kept in the volume itself
_SHELL = Path(__file__).resolve().parents[1] / "shell"
SCRIPTS = Path(__file__).with_name("scripts")


@cache
def glusterq_source() -> str:
    """The helper the glusterd step installs (``components/shell/glusterq.py``)."""
    return (_SHELL / "glusterq.py").read_text()


@cache
def _library() -> str:
    return fill(_SHELL / "gluster.sh", timeout=GLUSTER_CLI_TIMEOUT_S, glusterq=GLUSTERQ)


def _script(host: str, step: str, body: str, extra_headers: dict[str, str] | None = None) -> str:
    """A storage script: the shared library, then the Gluster library, then ``body``."""
    return script(host, step, _library() + "\n" + body, extra_headers=extra_headers)


# ---- per storage host -----------------------------------------------------------------------
def glusterd(host: str) -> RemoteScript:
    """Install glusterfs-server (skipped when present) and the glusterq helper (stdin); keep
    glusterd enabled and running."""
    body = fill(SCRIPTS / "glusterd.sh", glusterq=GLUSTERQ, timeout=GLUSTERD_READY_TIMEOUT_S)
    create = script(host, f"{host}-glusterd", body, file=GLUSTERQ)
    delete = script(host, f"{host}-glusterd-delete", fill(SCRIPTS / "glusterd-delete.sh", glusterq=GLUSTERQ))
    return RemoteScript(f"{host}-glusterd", host, create, delete, GLUSTERQ, glusterq_source())


def brick(host: str, path: str, allow_destroy: bool) -> RemoteScript:
    """Prepare the brick directory (and clear a stale stamp of a failed create); its delete keeps
    the data unless destruction is allowed.

    Only creates the directory: once it is a brick, Gluster owns its mode and owner
    (``storage.owner-uid/gid``)."""
    create = _script(
        host,
        f"{host}-brick",
        fill(SCRIPTS / "brick.sh", path=path),
        extra_headers={"stateful": "gluster-brick", "allow-destroy": str(int(allow_destroy))},
    )
    if allow_destroy:
        body = fill(SCRIPTS / "brick-destroy.sh", path=path)
    else:
        body = f'echo "hpc: keeping brick {path} and its data (hpc:storage.allowDestroy is false)"\n'
    return RemoteScript(f"{host}-brick", host, create, script(host, f"{host}-brick-delete", body))


# ---- the pool and the volume (run on one storage host) --------------------------------------------
def peers(host: str, volume: str, others: list[str]) -> RemoteScript:
    """Probe every other storage host the pool does not know by any name; wait until all are
    connected (matched by peer UUID: a pool probed by host name is recognised)."""
    body = fill(SCRIPTS / "peers.sh", others=others, timeout=PEER_CONNECT_TIMEOUT_S)
    create = _script(host, f"{volume}-peers", body)
    # Detaching peers would break a volume that still has bricks on them: deletion is manual.
    delete = script(host, f"{volume}-peers-delete", 'echo "hpc: leaving the trusted pool as it is"\n')
    return RemoteScript(f"{volume}-peers", host, create, delete)


def volume(host: str, spec: VolumeSpec) -> RemoteScript:
    """Create the volume only when missing, after checking every brick host is connected and
    clearing a stale stamp of an earlier failed create on this host's bricks; when present,
    verify its bricks (by peer UUID and path, replica sets in any order); start it and wait for
    a write quorum of bricks online."""
    v = spec.name
    replica = 2 if spec.arbiter else spec.replica
    body = fill(
        SCRIPTS / "volume.sh",
        volume=v,
        bricks=[b.spec for b in spec.bricks],
        addresses=list(dict.fromkeys(b.address for b in spec.bricks)),
        replica=replica,
        arbiter=Raw(" arbiter 1" if spec.arbiter else ""),
        layout=Raw(spec.layout),
        expected_type=spec.expected_type,
        bricks_per_set=spec.bricks_per_set,
        quorum=spec.quorum_bricks,
        brick_count=len(spec.bricks),
        timeout=BRICKS_ONLINE_TIMEOUT_S,
    )
    create = _script(
        host,
        f"{v}-volume",
        body,
        extra_headers={
            "stateful": "gluster-volume",
            "replica": str(replica),
            "arbiter": str(int(spec.arbiter)),
            "allow-destroy": str(int(spec.allow_destroy)),
        },
    )
    if spec.allow_destroy:
        undo = fill(SCRIPTS / "volume-destroy.sh", volume=v)
    else:
        undo = f'echo "hpc: keeping volume {v} and its data (hpc:storage.allowDestroy is false)"\n'
    return RemoteScript(f"{v}-volume", host, create, _script(host, f"{v}-volume-delete", undo))


def options(host: str, volume: str, opts: tuple[tuple[str, str], ...]) -> RemoteScript:
    """Converge the volume's options: names resolved to gluster's canonical ones (aliases such
    as ``cache-size``; a later entry for the same option wins), values compared as gluster
    reports them, and options this project set before but the stack no longer lists reset to
    their defaults (the set is recorded in the volume as ``user.hpc-managed-options``)."""
    lines = Raw("\n".join(f"wanted {quoted(k)} {quoted(val)}" for k, val in opts))
    body = fill(SCRIPTS / "options.sh", volume=volume, managed=MANAGED_OPTIONS, lines=lines)
    create = _script(host, f"{volume}-options", body)
    delete = script(host, f"{volume}-options-delete", 'echo "hpc: volume options stay with the volume"\n')
    return RemoteScript(f"{volume}-options", host, create, delete)
