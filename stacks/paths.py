"""Host paths from the stack file: normalised, and refused where a script would do harm.

Every path a script creates, mounts or chowns (brick, mount point, Slurm state and database)
goes through ``host_path``: trailing and doubled slashes are normalised away (a trailing slash
once made the volume step fail on every run after the first), ``.``/``..`` are refused, and so is
a system directory, an ancestor of one, or anything inside a tree the OS manages. ``nesting``
finds two such paths inside each other (a brick inside the mount of its own volume, a database
inside a brick).
"""

from __future__ import annotations

import posixpath
from itertools import combinations

# Directories a script must never create over, mount over or chown, nor any of their ancestors.
SYSTEM_DIRS = frozenset(
    {"/", "/bin", "/boot", "/dev", "/etc", "/home", "/lib", "/lib32", "/lib64", "/media", "/mnt", "/opt",
     "/proc", "/root", "/run", "/sbin", "/srv", "/sys", "/tmp", "/usr", "/var", "/var/lib", "/var/log"}
)  # fmt: skip
# Trees the OS (or the package manager, or the kernel) owns: nothing of ours goes inside them.
SYSTEM_TREES = ("/boot", "/dev", "/etc", "/proc", "/run", "/sys", "/usr")


def _inside(path: str, parent: str) -> bool:
    return parent == "/" or path == parent or path.startswith(parent + "/")


def host_path(value: str) -> str:
    """The normalised path, or ValueError saying what is wrong with it."""
    if not value.startswith("/"):
        raise ValueError(f"{value!r} is not an absolute path")
    parts = [p for p in value.split("/") if p]
    if any(p in (".", "..") for p in parts):
        raise ValueError(f"{value!r} contains '.' or '..'; write the path it means")
    path = "/" + "/".join(parts)
    if path in SYSTEM_DIRS or any(_inside(d, path) for d in SYSTEM_DIRS if d != "/" and path != "/"):
        raise ValueError(f"{path} is a system directory or holds one; name a directory of its own, e.g. /srv/hpc")
    for tree in SYSTEM_TREES:
        if _inside(path, tree):
            raise ValueError(f"{path} is inside {tree}, which the operating system manages")
    return posixpath.normpath(path)


def nesting(paths: dict[str, str]) -> tuple[str, str] | None:
    """The first pair of keys whose paths are equal or inside each other, inner one first."""
    for (ka, a), (kb, b) in combinations(paths.items(), 2):
        if _inside(a, b):
            return ka, kb
        if _inside(b, a):
            return kb, ka
    return None
