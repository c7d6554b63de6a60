"""Slurm's own documentation as a test oracle: the man pages shipped in the images.

``entries`` reads a man page (roff) into its ``.TP`` entries: the keys slurm.conf and friends
accept, each with its paragraph, so a test can check that every key the renderers write is one
the packaged Slurm documents and does not call deprecated."""

from __future__ import annotations

import re

DEPRECATED = re.compile(r"deprecat|obsolete|no longer (supported|used)", re.I)
_ENTRY = re.compile(r"^\.TP\n\\fB([A-Za-z_/]+)\\fR(.*?)(?=^\.TP|\Z)", re.M | re.S)
_PLUGIN = re.compile(r"^[a-z_]+/[a-z_]+$")


def entries(page: str) -> dict[str, str]:
    """Documented keys of a man page, each with its text (the first entry wins)."""
    out: dict[str, str] = {}
    for m in _ENTRY.finditer(page):
        out.setdefault(m.group(1), m.group(2))
    return out


def keys_and_plugins(conf: str) -> tuple[set[str], set[str]]:
    """The keys a config file sets (``Key=value``, several per node/partition line) and the
    plugin names among its values (``type/name``)."""
    keys: set[str] = set()
    plugins: set[str] = set()
    for line in conf.splitlines():
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        for item in line.split():
            key, _, value = item.partition("=")
            keys.add(key)
            plugins.update(v for v in value.split(",") if _PLUGIN.match(v))
    return keys, plugins


def problems(conf: str, page: str) -> list[str]:
    """What in ``conf`` the man page does not document, or documents as deprecated."""
    documented = entries(page)
    keys, plugins = keys_and_plugins(conf)
    out = []
    for key in sorted(keys):
        if key not in documented:
            out.append(f"{key} is not documented")
        elif DEPRECATED.search(documented[key].split("\n.IP", 1)[0][:600]):
            out.append(f"{key} is documented as deprecated")
    out.extend(f"plugin {p} is not documented" for p in sorted(plugins) if p not in page)
    return out
