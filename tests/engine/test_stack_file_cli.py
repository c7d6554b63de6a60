"""The real Pulumi CLI reads each stack file of the corpus as its record says: the value each key
reaches the program with (``pulumi config --json``), or its refusal in the recorded words. With
tests/stacks/test_stack_corpus.py (the offline reader against the same records) this proves the
offline plan reads a stack file exactly as the CLI does."""

from __future__ import annotations

import pytest

from tests.engine import cli
from tests.stacks.stack_corpus import CASES
from tests.stacks.test_stack_corpus import same_value

pytestmark = [
    pytest.mark.engine,
    pytest.mark.skipif(not (cli.ENGINE / "bin" / "pulumi").exists(), reason="no engine: run make engine"),
]


@pytest.fixture(scope="module")
def project(tmp_path_factory):
    p = cli.Project(tmp_path_factory.mktemp("corpus"))
    r = p.pulumi("stack", "init", "corpus")
    assert r.rc == 0, r.output
    return p


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_the_cli_reads_each_file_as_recorded(project, case):
    (project.dir / "Pulumi.corpus.yaml").write_bytes(case.text)
    r = project.pulumi("config", "--json", "--stack", "corpus")
    if case.values is None:
        assert r.rc != 0, r.output
        assert case.reason in r.stderr, r.stderr
        return
    assert r.rc == 0, r.output
    got = r.json()
    assert sorted(k for k, v in got.items() if v["secret"]) == sorted(case.secret)
    plain = {k: v["value"] for k, v in got.items() if not v["secret"]}
    assert set(plain) == set(case.values), (plain, case.values)
    for key, expected in case.values.items():
        assert same_value(plain[key], expected), (key, plain[key], expected)
