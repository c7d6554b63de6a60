"""Property tests (hypothesis): no stack input, however mangled, ends in a traceback.

Two generators: structural mutations of the dev and prod config (keys deleted, renamed or
retyped; values replaced by wrong types, system paths, odd addresses; list items duplicated or
dropped) fed to ``config.parse``; and character-level edits of the stack files' text fed through
the same chain the offline plan uses (``stack_file.parse_text`` -> ``record.config_entries`` ->
the program's JSON decoding -> ``config.parse`` and the namespace check). Every refusal must be a
``StackFileError`` or a ``ConfigError`` whose every problem names a key, one line each.
The number of inputs tried is printed and checked (``-s`` shows it)."""

from __future__ import annotations

import copy
import json
from typing import Any

import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from offline import plan, record, stack_file
from offline.stack_file import StackFileError
from stacks import config_errors
from stacks.config import ConfigError, config_keys, parse

STACK_FILES = {name: yaml.safe_load((plan.ROOT / f"Pulumi.{name}.yaml").read_text()) for name in ("dev", "prod")}
STACKS = {name: {k.split(":", 1)[1]: v for k, v in doc["config"].items()} for name, doc in STACK_FILES.items()}
TEXTS = {name: (plan.ROOT / f"Pulumi.{name}.yaml").read_text() for name in ("dev", "prod")}
ODD_VALUES = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(2**40), 2**40),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=24),
    st.sampled_from(["/", "/etc", "/var/lib", "/home/x", "//srv//x/", "/srv/../etc", "0.0.0.0/0", "192.168.0.255",
                     "192.168.0.0", "127.0.0.1", "10.40.0.0/8", "::1", "gpu-worker", "inference", "a100x2-80g", "",
                     "hpc", "v1.31.4+k3s1", "ssh-ed25519 AAAA", "-----BEGIN OPENSSH PRIVATE KEY-----"]),
    st.lists(st.integers(-3, 300), max_size=4),
    st.just({}),
    st.just([]),
    st.dictionaries(st.text(max_size=8), st.integers(), max_size=2),
)  # fmt: skip
INSERTS = ["", " ", "  ", "\n", ":", "- ", "{", "]", "'", '"', "#", "hcp:", "\t", "&a", "*a", "!!binary",
           "2024-01-01", "~", "- name: x\n", ".inf", "<<: *a\n", "1:00:00", "0x", "!!int "]  # fmt: skip
# Byte-level edits: other encodings, invalid UTF-8, byte-order marks, NUL and control bytes.
BYTE_INSERTS = [b"\xe9", b"\xc3", b"\x80", b"\xff\xfe", b"\xfe\xff", b"\xef\xbb\xbf", b"\x00", b"\x1b", b"\r",
                b"\xf0\x9f\x98", b"\xed\xa0\x80", "caf\u00e9".encode("latin-1"), "\u00e9".encode("utf-16")]  # fmt: skip
BYTES = {name: text.encode() for name, text in TEXTS.items()}
COUNT = {"structure": 0, "text": 0, "bytes": 0}


def paths(node: Any, prefix: tuple = ()) -> list[tuple]:
    out = [prefix] if prefix else []
    if isinstance(node, dict):
        for k, v in node.items():
            out += paths(v, (*prefix, k))
    elif isinstance(node, list):
        for i, v in enumerate(node):
            out += paths(v, (*prefix, i))
    return out


def parent_of(root: Any, path: tuple) -> Any:
    for p in path[:-1]:
        root = root[p]
    return root


def check(err: ConfigError) -> None:
    assert err.problems
    for key, message in err.problems:
        ns, _, name = key.partition(":")
        assert ns and name, f"a problem that names no key: {key!r}: {message}"
        assert message and "\n" not in message and "Traceback" not in message
        assert "should match pattern" not in message, f"{key}: a raw regex: {message}"  # words instead


@settings(max_examples=1500, deadline=None, derandomize=True, database=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])  # fmt: skip
@given(stack=st.sampled_from(["dev", "prod"]), data=st.data())
def test_no_structural_mutation_gives_a_traceback(stack, data):
    raw = copy.deepcopy(STACKS[stack])
    for _ in range(data.draw(st.integers(1, 4), label="mutations")):
        where = paths(raw)
        path = data.draw(st.sampled_from(where), label="path")
        parent, last = parent_of(raw, path), path[-1]
        action = data.draw(st.sampled_from(["delete", "replace", "rename", "duplicate"]), label="action")
        if action == "delete":
            del parent[last]
        elif action == "replace":
            parent[last] = data.draw(ODD_VALUES, label="value")
        elif action == "rename" and isinstance(parent, dict):
            new = data.draw(st.sampled_from([f"{last}x", str(last)[:-1], str(last).upper(), f"{last}_", "name"]))
            parent[new] = parent.pop(last)
        elif action == "duplicate" and isinstance(parent, list):
            parent.append(copy.deepcopy(parent[last]))
    COUNT["structure"] += 1
    try:
        parse(raw)
    except ConfigError as e:
        check(e)


@settings(max_examples=500, deadline=None, derandomize=True, database=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])  # fmt: skip
@given(stack=st.sampled_from(["dev", "prod"]), data=st.data())
def test_no_edit_of_the_stack_file_text_gives_a_traceback(stack, data):
    text = TEXTS[stack]
    for _ in range(data.draw(st.integers(1, 3), label="edits")):
        at = data.draw(st.integers(0, len(text)), label="at")
        cut = data.draw(st.integers(0, 12), label="cut")
        insert = data.draw(st.sampled_from(INSERTS), label="insert")
        text = text[:at] + insert + text[at + cut :]
    COUNT["text"] += 1
    try:
        doc = stack_file.parse_text(text, f"Pulumi.{stack}.yaml")
        config, _ = record.config_entries(doc, "hpc-cluster")
    except StackFileError as e:
        assert e.where.startswith(f"Pulumi.{stack}.yaml") and "\n" not in str(e)
        return
    found = config_errors.namespace_typos(config, "hpc-cluster", config_keys())
    assert all(k in config for k, _ in found)
    values = {}
    for full, value in config.items():
        ns, _, key = full.partition(":")
        if ns == "hpc":
            try:
                values[key] = json.loads(value)
            except json.JSONDecodeError:
                values[key] = value
    try:
        parse(values)
    except ConfigError as e:
        check(e)


@settings(max_examples=500, deadline=None, derandomize=True, database=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])  # fmt: skip
@given(stack=st.sampled_from(["dev", "prod"]), data=st.data())
def test_no_edit_of_the_stack_file_bytes_gives_a_traceback(stack, data):
    raw = BYTES[stack]
    if data.draw(st.booleans(), label="whole file re-encoded"):
        raw = raw.decode().encode(data.draw(st.sampled_from(["utf-16", "utf-16-le", "latin-1", "utf-32"])))
    for _ in range(data.draw(st.integers(1, 3), label="edits")):
        at = data.draw(st.integers(0, len(raw)), label="at")
        insert = data.draw(st.one_of(st.sampled_from(BYTE_INSERTS), st.binary(max_size=4)), label="insert")
        raw = raw[:at] + insert + raw[at + data.draw(st.integers(0, 4), label="cut") :]
    COUNT["bytes"] += 1
    try:
        doc = stack_file.parse_bytes(raw, f"Pulumi.{stack}.yaml")
        record.config_entries(doc, "hpc-cluster")
    except StackFileError as e:
        assert e.where.startswith(f"Pulumi.{stack}.yaml") and "\n" not in str(e) and str(e).isprintable()


def test_the_property_tests_ran_their_inputs():
    """Runs after the two above (file order): the counts go in the closing note."""
    print(f"\nproperty tests: {COUNT['structure']} structural mutations, {COUNT['text']} text edits, "
          f"{COUNT['bytes']} byte edits")  # fmt: skip
    assert COUNT["structure"] >= 1500 and COUNT["text"] >= 500 and COUNT["bytes"] >= 500
