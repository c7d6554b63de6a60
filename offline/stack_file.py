"""Reading ``Pulumi.<stack>.yaml`` the way the Pulumi CLI does, with errors a person can act on.

The CLI (``workspace.LoadProjectStack``) strips a UTF-8 byte-order mark, reads the rest as UTF-8
(or UTF-16 with its mark) with ``gopkg.in/yaml.v3``, refuses a key written twice at any depth and
hands each ``config:`` value to the program as text (``offline/yaml_v3.py`` has the typing
rules). ``read`` makes the offline plan agree with it: every problem becomes a ``StackFileError``
with one line naming the file, line and column (or the stacks that exist), in the CLI's words.
"""

from __future__ import annotations

import codecs
import json
import re
from pathlib import Path
from typing import Any

from offline import yaml_v3


class StackFileError(Exception):
    """A stack file that cannot be read: ``where`` is ``file[:line:column]``."""

    def __init__(self, where: str, message: str) -> None:
        self.where, self.message = where, message
        super().__init__(f"{where}: {message}")


def stacks_in(program_dir: Path) -> list[str]:
    return sorted(p.name.removeprefix("Pulumi.").removesuffix(".yaml") for p in program_dir.glob("Pulumi.*.yaml"))


def read(program_dir: Path, stack: str) -> dict[str, Any]:
    """The parsed stack file, or StackFileError (missing file, syntax, duplicate key, bad shape)."""
    path = program_dir / f"Pulumi.{stack}.yaml"
    if not path.is_file():
        known = ", ".join(stacks_in(program_dir)) or "none"
        raise StackFileError(
            path.name, f"no such stack file; stacks here: {known} (pulumi stack init {stack} makes one)"
        )
    return parse_bytes(path.read_bytes(), path.name)


def decode(data: bytes, name: str) -> str:
    """The file's text as yaml.v3 reads it: UTF-8 (its mark dropped) or UTF-16 with a mark."""
    if data.startswith(codecs.BOM_UTF8):
        data = data[len(codecs.BOM_UTF8) :]
    elif data.startswith((codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)):
        try:
            return data.decode("utf-16")
        except UnicodeDecodeError as e:
            raise StackFileError(name, f"yaml: invalid UTF-16 text at byte {e.start}: save the file as UTF-8") from None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        line = data[: e.start].count(b"\n") + 1
        problem = f"{utf8_problem(data, e.start)} (byte 0x{data[e.start]:02x})"
        raise StackFileError(f"{name}:{line}", f"yaml: {problem}: save the file as UTF-8") from None


def utf8_problem(data: bytes, at: int) -> str:
    """yaml.v3's words (readerc.go) for the invalid UTF-8 that starts at ``at``."""
    lead = data[at]
    width = 2 if 0xC0 <= lead <= 0xDF else 3 if 0xE0 <= lead <= 0xEF else 4 if 0xF0 <= lead <= 0xF7 else 0
    if width == 0:
        return "invalid leading UTF-8 octet"
    if len(data) - at < width:
        return "incomplete UTF-8 octet sequence"
    if any(b & 0xC0 != 0x80 for b in data[at + 1 : at + width]):
        return "invalid trailing UTF-8 octet"
    return "invalid Unicode character"


def parse_bytes(data: bytes, name: str) -> dict[str, Any]:
    return parse_text(decode(data, name), name)


def parse_text(text: str, name: str) -> dict[str, Any]:
    """The stack file's document as the CLI decodes it, or StackFileError."""
    try:
        data = yaml_v3.value(yaml_v3.compose(text))
    except yaml_v3.YamlError as e:
        where = name if e.line is None else f"{name}:{e.line}" + ("" if e.column is None else f":{e.column}")
        raise StackFileError(where, f"yaml: {e.message}") from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise StackFileError(name, f"a stack file is a mapping with a 'config:' key, not a {_kind(data)}")
    config = data.get("config")
    if config is not None and not isinstance(config, dict):
        raise StackFileError(name, "'config:' must be a mapping of 'namespace:key' to values")
    for key, v in (config or {}).items():
        if not key:
            raise StackFileError(name, f"config key {key!r} is not a 'namespace:key' string; quote it")
        if key.count(":") > 1:
            raise StackFileError(
                name,
                f"could not parse {key} as a configuration key (configuration keys should be of the form"
                " `<namespace>:<name>`, e.g. hpc:hosts)",
            )
        problem = _secure_problem(v, symmetric="encryptionsalt" in data or "encryptedkey" in data)
        if problem:
            raise StackFileError(name, f"{key}: {problem}; set it with: pulumi config set --secret {key}")
        try:
            config_text(v)
        except StackFileError as e:  # .inf/.nan: no JSON form, the CLI refuses the file
            raise StackFileError(name, f"could not unmarshal {key}: {e.message} (quote it to pass text)") from None
    return data


# The passphrase and cloud-KMS secrets managers write "v1:" + base64(12-byte nonce) + ":" +
# base64(AES-GCM ciphertext and its 16-byte tag) (sdk/go/common/resource/config/crypt.go); the
# CLI fails to decrypt anything else ("bad value: nonce size is incorrect").
V1_CIPHERTEXT = re.compile(r"^v1:[A-Za-z0-9+/]{16}:(?:[A-Za-z0-9+/]{4}){4,}(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?$")
ANY_CIPHERTEXT = re.compile(r"^[A-Za-z0-9+/=:]{8,}$")  # the service's, or a provider's own


def _secure_problem(v: Any, symmetric: bool) -> str | None:
    """Why a ``secure:`` value (at any depth) cannot be ciphertext, or None."""
    if isinstance(v, dict):
        if set(v) == {"secure"}:
            text = v["secure"]
            if not isinstance(text, str):
                return "a secure: value is the ciphertext text pulumi config set --secret writes"
            if not (V1_CIPHERTEXT if symmetric else ANY_CIPHERTEXT).match(text):
                return "this secure: value is not ciphertext the CLI can decrypt (typed by hand?)"
            return None
        return next(filter(None, (_secure_problem(x, symmetric) for x in v.values())), None)
    if isinstance(v, list):
        return next(filter(None, (_secure_problem(x, symmetric) for x in v)), None)
    return None


def _kind(v: Any) -> str:
    return {list: "list", str: "string", int: "number", float: "number", bool: "bool"}.get(type(v), type(v).__name__)


def config_text(v: Any) -> str:
    """A ``config:`` value as the CLI hands it to the program (object.MarshalString): a string as
    it is, anything else as Go's encoding/json writes it."""
    if isinstance(v, str):
        return v
    if v is None:
        return ""  # the CLI warns and passes "" (a future CLI: null)
    return go_json(v)


def go_json(v: Any) -> str:
    """encoding/json's compact text: map keys sorted, floats as Go writes them."""
    if isinstance(v, bool) or v is None or isinstance(v, str):
        return json.dumps(v, ensure_ascii=False)
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        try:
            return yaml_v3.go_float_text(v)
        except yaml_v3.YamlError as e:
            raise StackFileError("config", e.message) from None
    if isinstance(v, list):
        return "[" + ",".join(go_json(x) for x in v) + "]"
    if isinstance(v, dict):
        return "{" + ",".join(f"{json.dumps(k, ensure_ascii=False)}:{go_json(v[k])}" for k in sorted(v)) + "}"
    return json.dumps(str(v))
