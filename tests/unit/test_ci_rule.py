"""CI's rule: with HPC_REQUIRE_INTEGRATION=1 a skipped integration, engine or real-tool test fails the run."""

import pytest

pytest_plugins = ["pytester"]

SKIPPING = """
import pytest

@pytest.mark.integration
def test_needs_a_daemon():
    pytest.skip("glusterd is not installed")

@pytest.mark.engine
def test_needs_the_engine():
    pytest.skip("no engine: run make engine")

@pytest.mark.real_tool
@pytest.mark.skipif(True, reason="promtool is not installed")
def test_needs_a_tool():
    pass

def test_plain_skip():
    pytest.skip("not an integration test")
"""


# A skip in the setup phase (a skipif marker, a fixture) that becomes a failure is an error.
@pytest.mark.parametrize(("required", "failed", "errors", "skipped"), [("1", 2, 1, 1), ("0", 0, 0, 4)])
def test_skipped_real_test_fails_only_when_required(pytester, monkeypatch, required, failed, errors, skipped):
    from tests import conftest

    monkeypatch.setattr(conftest, "REQUIRE_INTEGRATION", required == "1")
    pytester.makeconftest("from tests.conftest import pytest_runtest_makereport  # noqa: F401\n")
    pytester.makeini(
        "[pytest]\nmarkers =\n    integration: real daemons\n    engine: the real CLI\n    real_tool: a real tool\n"
    )
    pytester.makepyfile(SKIPPING)
    result = pytester.runpytest_inprocess()
    result.assert_outcomes(failed=failed, errors=errors, skipped=skipped)


def test_every_test_under_a_real_directory_carries_its_marker():
    """A module under tests/integration, tests/engine, tests/k8s_api or tests/vm that forgets its
    ``pytestmark`` is still marked (so CI's rule above applies to it): deselecting the four
    markers leaves nothing of those directories."""
    import subprocess
    import sys

    from tests import conftest

    dirs = [f"tests/{d}" for d in conftest.DIRECTORY_MARKERS]
    every = subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider", *dirs],
                           cwd=conftest.ROOT, capture_output=True, text=True)  # fmt: skip
    assert "tests/integration/test_directory.py::" in every.stdout, every.stdout[-2000:]
    unmarked = subprocess.run(
        [sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider",
         "-m", " and ".join(f"not {m}" for m in conftest.DIRECTORY_MARKERS.values()), *dirs],
        cwd=conftest.ROOT, capture_output=True, text=True,
    )  # fmt: skip
    assert "::" not in unmarked.stdout, unmarked.stdout
