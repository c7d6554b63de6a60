"""Config problems as people read them: every one at once, each naming its key.

pydantic reports a location such as ``('hosts', 4, 'sshUsr')`` and a misspelt key twice (the
unknown one, and the right one "missing"). ``problems`` turns a ``ValidationError`` into
``(key, message)`` pairs: list items named by their ``name`` (``hpc:hosts[gpu01].sshUser``), an
unknown key with a "did you mean", the missing twin of a misspelt key dropped, and the cross-field
problems a model validator found (several, joined by ``encode``) split again. ``namespace_typos``
flags keys the program would silently never read (``hcp:hosts``, a bare ``hosts``).
"""

from __future__ import annotations

import difflib
import re
import types
from collections.abc import Iterable, Mapping
from typing import Annotated, Any, Union, get_args, get_origin

from pydantic import BaseModel, ValidationError

from stacks.config_base import NAMESPACE
from stacks.config_words import pattern_words

# Namespaces a stack file may legitimately hold besides ours: the engine's and the providers'.
OTHER_NAMESPACES = frozenset({"pulumi", "command", "docker", "kubernetes", "random", "tls"})
_TOKEN = re.compile(r"([^.\[\]]+)|\[(\d+)\]|(\[[^\]]+\])")
Problem = tuple[str, str]


def encode(found: Iterable[tuple[str, str]]) -> ValueError:
    """Several cross-field problems (relative path, message) as one validator error."""
    return ValueError("\n".join(f"@{path}: {message}" for path, message in found))


def _tokens(rel: str) -> list[str | int]:
    return [name or (int(index) if index else named) for name, index, named in _TOKEN.findall(rel)]


def _key(tokens: list[str | int], raw: Any) -> str:
    """'hpc:a.b[gpu01].c': list items by their name where they have one."""
    out = ""
    node = raw
    for tok in tokens:
        if isinstance(tok, int):
            item = node[tok] if isinstance(node, list) and 0 <= tok < len(node) else None
            name = item.get("name") if isinstance(item, dict) else None
            out += f"[{name}]" if isinstance(name, str) and name else f"[{tok}]"
            node = item
        elif tok.startswith("["):  # already named: [alice]
            out += tok
            node = None
        else:
            out += f".{tok}" if out else tok
            node = node.get(tok) if isinstance(node, dict) else None
    return f"{NAMESPACE}:{out}"


def _strip(t: Any) -> Any:
    while True:
        origin = get_origin(t)
        if origin is Annotated:
            t = get_args(t)[0]
        elif origin in (Union, types.UnionType):
            t = next((a for a in get_args(t) if a is not type(None)), t)
            if get_origin(t) in (Union, types.UnionType):
                return t
        else:
            return t


def model_at(root: type[BaseModel], tokens: list[str | int]) -> type[BaseModel] | None:
    """The model class a location points into (None where the schema has no model)."""
    t: Any = root
    for tok in tokens:
        t = _strip(t)
        if isinstance(t, type) and issubclass(t, BaseModel) and isinstance(tok, str):
            field = next((f for n, f in t.model_fields.items() if tok in (n, f.alias)), None)
            if field is None:
                return None
            t = field.annotation
        elif get_origin(t) is list and isinstance(tok, int):
            t = get_args(t)[0]
        elif get_origin(t) is dict:
            t = get_args(t)[1]
        else:
            return None
    t = _strip(t)
    return t if isinstance(t, type) and issubclass(t, BaseModel) else None


def keys_of(model: type[BaseModel]) -> list[str]:
    return sorted(f.alias or n for n, f in model.model_fields.items())


def _split(loc: tuple[Any, ...], message: str) -> list[tuple[list[str | int], str]]:
    """pydantic's location (+ '@rel: ' prefixes of our validators) as token paths."""
    base: list[str | int] = []
    for p in loc:
        if isinstance(p, int):
            base.append(p)
        elif p.startswith(("function-", "literal[", "list[")) or ("[" in p and p.endswith("]")):
            continue  # pydantic's union / tagged-union branch names are not config keys
        else:
            base.append(p)
    message = message.removeprefix("Value error, ")
    if not message.startswith("@"):
        return [(base, message)]
    out = []
    for chunk in ("\n" + message).split("\n@")[1:]:
        rel, _, text = chunk.partition(": ")
        out.append(([*base, *_tokens(rel)], text))
    return out


def problems(e: ValidationError, raw: Mapping[str, Any], root: type[BaseModel]) -> list[Problem]:
    """Every problem of a failed validation, in document order, each as (key, message)."""
    items: list[tuple[str, list[str | int], str]] = []
    for err in e.errors(include_url=False):
        msg = str(err["msg"])
        if err["type"] == "string_pattern_mismatch":
            msg = pattern_words(str((err.get("ctx") or {}).get("pattern", "")))
        for tokens, message in _split(tuple(err["loc"]), msg):
            items.append((str(err["type"]), tokens, message))
    missing = {(tuple(t[:-1]), t[-1]) for kind, t, _ in items if kind == "missing" and t}
    answered: set[tuple[tuple[str | int, ...], str | int]] = set()
    out: list[Problem] = []
    for kind, tokens, message in items:
        if kind == "extra_forbidden" and tokens:
            parent, bad = tuple(tokens[:-1]), str(tokens[-1])
            twins = [str(m) for p, m in missing if p == parent]
            model = model_at(root, list(parent))
            known = keys_of(model) if model else []
            # a misspelt key's twin is reported "missing" too: prefer it, and drop that report
            close = difflib.get_close_matches(bad, twins, n=1, cutoff=0.6)
            if close:
                answered.add((parent, close[0]))
            else:
                close = difflib.get_close_matches(bad, known, n=1, cutoff=0.6)
            if close:
                message = f"unknown config key; did you mean {close[0]!r}?"
            else:
                message = "unknown config key" + (f"; known keys: {', '.join(known)}" if known else "")
        elif kind == "missing":
            message = "required config key is missing"
        out.append((_key(tokens, raw), message))
    dropped = {_key([*p, m], raw) for p, m in answered}
    seen: set[Problem] = set()
    result = []
    for key, message in out:
        if (key in dropped and message == "required config key is missing") or (key, message) in seen:
            continue
        seen.add((key, message))
        result.append((key, message))
    return result


def _near(a: str, b: str) -> bool:
    """At most one edit (insert, delete, substitute, swap of neighbours), or an anagram."""
    if sorted(a) == sorted(b):
        return True
    if abs(len(a) - len(b)) > 1:
        return False
    if len(a) == len(b):
        diff = [i for i in range(len(a)) if a[i] != b[i]]
        return len(diff) <= 1 or (len(diff) == 2 and diff[1] == diff[0] + 1 and a[diff[0]] == b[diff[1]])
    short, long_ = sorted((a, b), key=len)
    return any(long_[:i] + long_[i + 1 :] == short for i in range(len(long_)))


def namespace_typos(full_keys: Iterable[str], project: str, known_keys: Iterable[str]) -> list[Problem]:
    """Keys the program would never read: a namespace that looks like a typo of ``hpc``, or one
    of our keys in the project's own namespace (a key written without ``hpc:``)."""
    known = set(known_keys)
    found: list[Problem] = []
    for full in sorted(full_keys):
        ns, sep, key = full.partition(":")
        if not sep or ns == NAMESPACE or ns in OTHER_NAMESPACES:
            continue
        top = key.split(".")[0].split("[")[0]
        if ns == project and top in known:
            found.append((full, f"the program reads {NAMESPACE}:{key}, not {project}:{key}; write {NAMESPACE}:{key}"))
        elif ns != project and _near(ns.lower(), NAMESPACE):
            found.append((full, f"namespace {ns!r} is not read by this program; did you mean {NAMESPACE}:{key}?"))
    return found
