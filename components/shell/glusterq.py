"""glusterq: what the local glusterd knows, as plain lines for the storage scripts.

Embedded in the storage scripts as the shell function ``hpc_gq`` (python3 is a dependency of
glusterfs-server, so every storage host has it); standard library only. It reads gluster's XML
output, which is stable, instead of scraping the human one, and matches hosts the way gluster
itself does: by peer UUID, whatever name or address a peer was probed by.

    hpc_gq peers ADDR...              ADDR UUID STATE per address; STATE: local, Connected,
                                      Disconnected or unknown (not in the pool)
    hpc_gq volume VOL                 absent, or: id, status, type, replica N arbiter M,
                                      brick UUID PATH..., option NAME VALUE...
    hpc_gq volume-ids                 the id of every volume this glusterd knows
    hpc_gq same-bricks VOL PER_SET ADDR:PATH...
                                      exit 0 when VOL has exactly these bricks in these replica sets
                                      (sets compared as sets: host order does not matter)

A gluster error exits 3 with gluster's own message on stderr.
"""

import os
import socket
import subprocess
import sys
import xml.etree.ElementTree as ET

CLI_TIMEOUT_S = 60
# (uuid, "local" or connected?, names and addresses it is known by)
Member = tuple[str, object, set[str]]


class GlusterError(Exception):
    pass


def cli(*args: str) -> ET.Element:
    cmd = ["timeout", str(CLI_TIMEOUT_S), "gluster", "--mode=script", "--xml", *args]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    text = proc.stdout.strip()
    root = ET.fromstring(text) if text.startswith("<?xml") else None
    if root is None or root.findtext("opRet") != "0":
        message = root.findtext("opErrstr") if root is not None else ""
        raise GlusterError(message or proc.stderr.strip() or text or f"gluster {' '.join(args)} failed")
    return root


def addresses_of(name: str) -> set[str]:
    try:
        return {str(info[4][0]) for info in socket.getaddrinfo(name, None, socket.AF_INET)}
    except OSError:
        return set()


def local_addresses() -> set[str]:
    out = subprocess.run(["hostname", "--all-ip-addresses"], capture_output=True, text=True).stdout
    return set(out.split()) | addresses_of(socket.gethostname())


def pool() -> list[Member]:
    """(uuid, connected, names) for every member of the trusted pool, this host included."""
    members: list[Member] = []
    for peer in cli("pool", "list").iter("peer"):
        names = {peer.findtext("hostname", "")} | {h.text or "" for h in peer.iterfind("hostnames/hostname")}
        local = "localhost" in names
        if local:
            names = local_addresses()
        members.append((peer.findtext("uuid", ""), "local" if local else peer.findtext("connected") == "1", names))
    return members


def peer_of(address: str, members: list[Member]) -> tuple[str | None, object]:
    """The pool member known by ``address``: by name, other name, or a name resolving to it."""
    for uuid, connected, names in members:
        if address in names or any(address in addresses_of(n) for n in names if n):
            return uuid, connected
    return None, None


def state_word(connected: object) -> str:
    if connected == "local":
        return "local"
    return "Connected" if connected else "Disconnected"


def cmd_peers(addrs: list[str]) -> None:
    members = pool()
    for addr in addrs:
        uuid, connected = peer_of(addr, members)
        print(addr, uuid or "-", "unknown" if uuid is None else state_word(connected))


def volume(name: str) -> ET.Element | None:
    try:
        root = cli("volume", "info", name)
    except GlusterError:
        return None
    return root.find("volInfo/volumes/volume")


def cmd_volume(name: str) -> None:
    vol = volume(name)
    if vol is None:
        print("absent")
        return
    print("id", vol.findtext("id"))
    print("status", vol.findtext("statusStr"))
    print("type", vol.findtext("typeStr"))
    print("replica", vol.findtext("replicaCount"), "arbiter", vol.findtext("arbiterCount"))
    for brick in vol.iterfind("bricks/brick"):
        print("brick", brick.findtext("hostUuid"), (brick.findtext("name") or "").split(":", 1)[1])
    for option in vol.iterfind("options/option"):
        print("option", option.findtext("name"), option.findtext("value"))


def cmd_volume_ids() -> None:
    for vol in cli("volume", "info", "all").iterfind("volInfo/volumes/volume"):
        print(vol.findtext("id"))


def cmd_same_bricks(name: str, per_set: int, wanted: list[str]) -> None:
    vol = volume(name)
    if vol is None:
        raise GlusterError(f"volume {name} does not exist")
    members = pool()
    want: list[tuple[str, str]] = []
    for spec in wanted:
        addr, path = spec.split(":", 1)
        uuid, _ = peer_of(addr, members)
        want.append((uuid or addr, os.path.normpath(path)))
    have = [(b.findtext("hostUuid", ""), os.path.normpath((b.findtext("name") or "").split(":", 1)[1]))
            for b in vol.iterfind("bricks/brick")]

    def sets(bricks: list[tuple[str, str]]) -> list[list[tuple[str, str]]]:
        return sorted(sorted(bricks[i:i + per_set]) for i in range(0, len(bricks), per_set))

    sys.exit(0 if len(have) == len(want) and sets(have) == sets(want) else 1)


def main(argv: list[str]) -> None:
    cmd, args = argv[0], argv[1:]
    try:
        if cmd == "peers":
            cmd_peers(args)
        elif cmd == "volume":
            cmd_volume(args[0])
        elif cmd == "volume-ids":
            cmd_volume_ids()
        elif cmd == "same-bricks":
            cmd_same_bricks(args[0], int(args[1]), args[2:])
        else:
            print(f"glusterq: unknown command {cmd}", file=sys.stderr)
            sys.exit(2)
    except GlusterError as e:
        print(str(e), file=sys.stderr)
        sys.exit(3)


if __name__ == "__main__":
    main(sys.argv[1:])
