"""YAML values as the Pulumi CLI gets them: ruamel.yaml parses, yaml.v3's rules type the values.

The Pulumi CLI reads a stack file with Go's ``gopkg.in/yaml.v3`` (v3.0.1) into ``any`` and hands
each ``config:`` value to the program as text: a string as it is, a number or bool as JSON, an
object as JSON (``sdk/go/common/resource/config/object.go``). ruamel.yaml (a maintained YAML 1.2
parser) gives the node tree; this module types its scalars exactly as yaml.v3's ``resolve`` does,
which differs from ruamel's own YAML 1.2 resolver and from PyYAML's YAML 1.1 in ways a stack file
meets:

- ``on``/``yes``/``no`` are strings and ``1:00:00`` is a string (YAML 1.1 made them a bool and a
  base-60 integer); ``017`` is octal 15 and ``1_000`` is 1000 (Go's ``ParseInt`` with base 0);
- an unquoted date or time is a Go ``time.Time``, which Pulumi turns into its ``String()``:
  ``2026-12-24`` reaches the program as ``2026-12-24 00:00:00 +0000 UTC``;
- merge keys (``<<: *base``) merge, keys written in the mapping win; a key written twice is
  refused ("mapping key "a" already defined at line 1"), compared by its text as yaml.v3 does;
- a tab may separate tokens within a line (YAML 1.2, yaml.v3); ruamel's scanner refuses it, so
  such a tab, never one in indentation, is read as the space it stands for.

Tests prove the agreement against the real CLI that ``make engine`` builds
(tests/engine/test_stack_file_cli.py, on the corpus in tests/stacks/stack_corpus.py).
"""

from __future__ import annotations

import datetime as dt
import decimal
import math
import re
import time
from typing import Any

from ruamel.yaml import YAML
from ruamel.yaml.error import MarkedYAMLError, YAMLError
from ruamel.yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode
from ruamel.yaml.resolver import VersionedResolver

IMPLICIT = "tag:hpc-cluster,2026:implicit"  # a plain scalar without a tag: typed here, as yaml.v3 does
YAML_TAG = "tag:yaml.org,2002:"
QUOTED_STYLES = {"'", '"', "|", ">"}
MAX_TAB_MENDS = 10_000
_TAB_INDENTS = "found character that cannot start any token (a tab indents this line: indent with spaces)"


class YamlError(Exception):
    """A reason the CLI refuses the text; ``line``/``column`` are 1-based when known."""

    def __init__(self, message: str, line: int | None = None, column: int | None = None) -> None:
        self.message, self.line, self.column = message, line, column
        super().__init__(message)


class _Resolver(VersionedResolver):
    """ruamel's resolver for collections; plain scalars keep a marker so explicit tags stay known."""

    def resolve(self, kind: Any, value: Any, implicit: Any) -> Any:
        if kind is ScalarNode and implicit[0]:
            from ruamel.yaml.tag import Tag

            return Tag(suffix=IMPLICIT)
        return super().resolve(kind, value, implicit)


def compose(text: str) -> Node | None:
    """The node tree of ``text`` (None when empty); YamlError with the position otherwise."""
    for _ in range(MAX_TAB_MENDS):
        y = YAML(typ="safe", pure=True)
        y.Resolver = _Resolver
        try:
            node: Node | None = y.compose(text)
            return node
        except MarkedYAMLError as e:
            mark = e.problem_mark or e.context_mark
            mended = _separation_tab_as_space(text, mark, str(e.problem or ""))
            if mended is None:
                what = " ".join(str(x) for x in (e.context, e.problem) if x) or "not valid YAML"
                what = what.replace("found character '\\t' that cannot start any token", _TAB_INDENTS)
                raise YamlError(what, *((mark.line + 1, mark.column + 1) if mark else (None, None))) from None
            text = mended
        except YAMLError as e:
            if "special characters are not allowed" in str(e):  # ruamel's ReaderError
                raise YamlError(f"control characters are not allowed ({str(e).split()[-6]}): remove it") from None
            raise YamlError(str(e).splitlines()[0] if str(e) else "not valid YAML") from None
    raise YamlError("too many tabs")  # pragma: no cover - bounded by the text's tabs


def _separation_tab_as_space(text: str, mark: Any, problem: str) -> str | None:
    """``text`` with the tab ruamel stopped at turned into a space, when it separates tokens
    within a line (text before it on its line); None when it indents (refused by every reader)."""
    if mark is None or "'\\t'" not in problem:
        return None
    pos = mark.index
    if not (0 <= pos < len(text)) or text[pos] != "\t":
        return None
    line_start = text.rfind("\n", 0, pos) + 1
    if not text[line_start:pos].strip(" \t"):
        return None
    return text[:pos] + " " + text[pos + 1 :]


def value(node: Node | None) -> Any:
    """The value yaml.v3 decodes ``node`` to in an ``any``, with Pulumi's conversions: mapping keys
    as text, ``time.Time`` as its ``String()``."""
    if node is None:
        return None
    if isinstance(node, ScalarNode):
        return _scalar(node)
    if isinstance(node, SequenceNode):
        return [value(n) for n in node.value]
    if isinstance(node, MappingNode):
        return _mapping(node)
    raise YamlError(f"unexpected node {type(node).__name__}")  # pragma: no cover


def _mapping(node: MappingNode) -> dict[str, Any]:
    written: dict[str, int] = {}
    out: dict[str, Any] = {}
    merges: list[Node] = []
    for key_node, value_node in node.value:
        if isinstance(key_node, ScalarNode):
            if key_node.value in written:
                line = key_node.start_mark.line + 1
                raise YamlError(
                    f"mapping key {_go_quote(key_node.value)} already defined at line {written[key_node.value]}",
                    line, key_node.start_mark.column + 1,
                )  # fmt: skip
            written[key_node.value] = key_node.start_mark.line + 1
            if key_node.value == "<<" and _plain(key_node):
                merges.append(value_node)
                continue
        out[_key_text(value(key_node))] = value(value_node)
    for merge in merges:
        sources = merge.value if isinstance(merge, SequenceNode) else [merge]
        for source in sources:
            if not isinstance(source, MappingNode):
                line = source.start_mark.line + 1
                raise YamlError("map merge requires map or sequence of maps as the value", line)
            for k, v in _mapping(source).items():
                out.setdefault(k, v)  # keys written here win; among merges the first does
    return out


def _key_text(key: Any) -> str:
    """Pulumi's fmt.Sprintf("%v") of a non-string key."""
    if isinstance(key, str):
        return key
    if key is None:
        return "<nil>"
    if isinstance(key, bool):
        return "true" if key else "false"
    if isinstance(key, float):
        return go_float_text(key, json=False)
    if isinstance(key, (dict, list)):
        raise YamlError("a mapping key must be a scalar")
    return str(key)


def _plain(node: ScalarNode) -> bool:
    return str(node.tag) == IMPLICIT and node.style not in QUOTED_STYLES


def _scalar(node: ScalarNode) -> Any:
    tag, text = str(node.tag), node.value
    if node.style in QUOTED_STYLES and tag in (IMPLICIT, YAML_TAG + "str"):
        return text
    if tag == IMPLICIT:
        return resolve(text)
    if not tag.startswith(YAML_TAG):
        return text  # a local tag (!foo): yaml.v3 keeps the text
    short = tag.removeprefix(YAML_TAG)
    if short in ("str", "binary"):
        return text
    resolved = resolve(text)
    kinds = {"int": (int,), "float": (float, int), "bool": (bool,), "null": (type(None),)}
    if short in kinds and isinstance(resolved, kinds[short]) and not (short == "int" and isinstance(resolved, bool)):
        return float(resolved) if short == "float" and isinstance(resolved, int) else resolved
    if short == "timestamp" and isinstance(resolved, str) and resolved != text:
        return resolved
    line, column = node.start_mark.line + 1, node.start_mark.column + 1
    raise YamlError(f"cannot decode !!{_short_kind(resolved)} `{text}` as a !!{short}", line, column)


def _short_kind(v: Any) -> str:
    return {bool: "bool", int: "int", float: "float", str: "str", type(None): "null"}.get(type(v), "str")


# ---- yaml.v3's resolve (resolve.go) -------------------------------------------------------------
_MAP: dict[str, Any] = {
    **dict.fromkeys(["true", "True", "TRUE"], True),
    **dict.fromkeys(["false", "False", "FALSE"], False),
    **dict.fromkeys(["", "~", "null", "Null", "NULL"], None),
    **dict.fromkeys([".nan", ".NaN", ".NAN"], math.nan),
    **dict.fromkeys([".inf", ".Inf", ".INF", "+.inf", "+.Inf", "+.INF"], math.inf),
    **dict.fromkeys(["-.inf", "-.Inf", "-.INF"], -math.inf),
}
_YAML_STYLE_FLOAT = re.compile(r"^[-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?$")
_GO_FLOAT = re.compile(r"^[-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?$")
_GO_INT = re.compile(r"^[-+]?(0[xX][0-9a-fA-F]+|0[oO][0-7]+|0[bB][01]+|0[0-7]*|[1-9][0-9]*)$")
INT64 = (-(2**63), 2**63 - 1)
UINT64_MAX = 2**64 - 1


def resolve(text: str) -> Any:
    """A plain scalar's value in yaml.v3 (v3.0.1) decoded into ``any``."""
    if text in _MAP:
        return _MAP[text]
    hint = text[:1]
    if hint == ".":
        return float(text) if _GO_FLOAT.match(text) else text
    if hint in "0123456789+-" and hint:
        stamp = _timestamp(text)
        if stamp is not None:
            return stamp
        plain = text.replace("_", "")
        number = _go_int(plain)
        if number is not None:
            return number
        if _YAML_STYLE_FLOAT.match(plain):
            f = float(plain)
            return f
    return text


def _go_int(plain: str) -> int | None:
    """strconv.ParseInt(plain, 0, 64), then ParseUint: base prefixes, a leading 0 is octal."""
    if not _GO_INT.match(plain):
        return None
    sign = -1 if plain.startswith("-") else 1
    digits = plain.lstrip("+-")
    octal = len(digits) > 1 and digits[0] == "0" and digits[1].isdigit()  # Go: a leading 0 is octal
    n = sign * (int(digits, 8) if octal else int(digits, 0))
    if INT64[0] <= n <= INT64[1] or (0 <= n <= UINT64_MAX and not plain.startswith(("-", "+"))):
        return n
    return None


_STAMP = re.compile(
    r"^(\d{4})-(\d{1,2})-(\d{1,2})"
    r"(?:(?:[Tt](\d{1,2}):(\d{1,2}):(\d{1,2})(?:\.(\d{1,9}))?(Z|[+-]\d{2}:\d{2}))"
    r"|(?: (\d{1,2}):(\d{1,2}):(\d{1,2})(?:\.(\d{1,9}))?))?$"
)


def _timestamp(text: str) -> str | None:
    """A yaml.v3 timestamp (allowedTimestampFormats) as Go's time.Time.String() prints it."""
    m = _STAMP.match(text)
    if not m:
        return None
    y, mo, d = (int(g) for g in m.group(1, 2, 3))
    if m.group(4) is not None:
        h, mi, s, frac, zone = int(m.group(4)), int(m.group(5)), int(m.group(6)), m.group(7), m.group(8)
    elif m.group(9) is not None:
        h, mi, s, frac, zone = int(m.group(9)), int(m.group(10)), int(m.group(11)), m.group(12), "Z"
    else:
        h, mi, s, frac, zone = 0, 0, 0, None, "Z"
    try:
        dt.datetime(y, mo, d, h, mi, s)
    except ValueError:
        return None
    offset = 0 if zone == "Z" else (1 if zone[0] == "+" else -1) * (int(zone[1:3]) * 3600 + int(zone[4:6]) * 60)
    if zone != "Z" and (int(zone[1:3]) > 23 or int(zone[4:6]) > 59):
        return None
    fraction = ("." + frac.rstrip("0")) if frac and frac.rstrip("0") else ""
    sign = "-" if offset < 0 else "+"
    numeric = f"{sign}{abs(offset) // 3600:02d}{abs(offset) % 3600 // 60:02d}"
    return f"{y:04d}-{mo:02d}-{d:02d} {h:02d}:{mi:02d}:{s:02d}{fraction} {numeric} {_zone_name(zone, offset, numeric)}"


def _zone_name(zone: str, offset: int, numeric: str) -> str:
    """Go names UTC "UTC"; an offset the local zone uses gets the local name; others their number."""
    if zone == "Z":
        return "UTC"
    local = time.localtime()
    if local.tm_gmtoff == offset:
        return local.tm_zone or "UTC"
    return numeric


def go_float_text(f: float, json: bool = True) -> str:
    """A float64 as encoding/json writes it (strconv 'f', or 'e' outside [1e-6, 1e21), shortest
    digits); ``json=False``: as fmt's %v writes a map key (shortest, 'e' from 1e21)."""
    if math.isnan(f) or math.isinf(f):
        raise YamlError(f"json: unsupported value: {'NaN' if math.isnan(f) else ('+Inf' if f > 0 else '-Inf')}")
    a = abs(f)
    if a != 0 and (a < 1e-6 or a >= 1e21) if json else (a != 0 and (a < 1e-4 or a >= 1e21)):
        mant, _, exp = repr(f).partition("e")
        if not exp:  # repr chose fixed notation: ask for the exponent form
            mant, _, exp = f"{f:.17e}".partition("e")
            mant = repr(float(mant))
        e = int(exp)
        return f"{mant.removesuffix('.0')}e{'-' if e < 0 else '+'}{abs(e) if json else f'{abs(e):02d}'}"
    text = format(decimal.Decimal(repr(f)), "f")
    return text.rstrip("0").rstrip(".") if "." in text else text


def _go_quote(s: str) -> str:
    """Go's %#v of a string (strconv.Quote), for the duplicate-key message."""
    return '"' + s.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n").replace("\t", "\\t") + '"'
