"""The offline reader gives each corpus file the value the real Pulumi CLI gave it (or refuses it
in the CLI's words, one line); tests/engine/test_stack_file_cli.py holds the CLI to the same
records."""

from __future__ import annotations

import json

import pytest

from offline import plan, record, stack_file
from offline.stack_file import StackFileError
from stacks.config import PLANNED_SECRET_KEYS
from tests.stacks.stack_corpus import CASES, Case

NAME = "Pulumi.corpus.yaml"


def offline_read(case: Case) -> tuple[dict[str, str], list[str]]:
    raw = stack_file.parse_bytes(case.text, NAME)
    config, secret = record.config_entries(raw, "hpc-cluster")
    planned = {f"hpc:{k}" for k in PLANNED_SECRET_KEYS}
    written = set(raw.get("config") or {})
    keep = {k for k in config if k not in planned or k in written}
    return {k: v for k, v in config.items() if k in keep}, [k for k in secret if k in keep]


def same_value(a: str, b: str) -> bool:
    """Equal texts, or equal JSON objects/lists (key order is the writer's)."""
    if a == b:
        return True
    try:
        ja, jb = json.loads(a), json.loads(b)
    except ValueError:
        return False
    return isinstance(ja, (dict, list)) and ja == jb


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_the_offline_reader_agrees_with_the_cli(case):
    if case.values is None:
        with pytest.raises(StackFileError) as err:
            offline_read(case)
        assert case.reason in str(err.value), str(err.value)
        assert "\n" not in str(err.value) and "Traceback" not in str(err.value)
        return
    config, secret = offline_read(case)
    assert sorted(secret) == sorted(case.secret)
    plain = {k: v for k, v in config.items() if k not in secret}
    assert set(plain) == set(case.values), (plain, case.values)
    for key, expected in case.values.items():
        assert same_value(plain[key], expected), (key, plain[key], expected)


def test_the_corpus_covers_the_classes_the_issue_names():
    names = {c.name for c in CASES}
    assert {"merge-key-with-override", "sexagesimal-and-yaml11-words", "tab-after-colon", "latin-1"} <= names
    assert len(CASES) >= 30
    assert sum(c.values is None for c in CASES) >= 10  # refusals as well as readings


def test_a_numeric_or_boolean_gluster_option_plans_as_gluster_takes_it():
    """network.ping-timeout: 10 reaches the program as the number 10 (the CLI types it)."""
    from stacks.config import parse

    text = stack_file.read(plan.ROOT, "dev")
    raw = {k.split(":", 1)[1]: v for k, v in text["config"].items()}
    raw["storage"] = {**raw["storage"], "options": {"network.ping-timeout": 10, "performance.readdir-ahead": False}}
    cfg = parse(json.loads(json.dumps(raw)))  # as the program decodes the CLI's JSON
    assert cfg.storage.options == {"network.ping-timeout": "10", "performance.readdir-ahead": "off"}
