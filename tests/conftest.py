"""Shared test setup: the repo on sys.path, and CI's rule that a skipped real-daemon test fails."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

REQUIRE_INTEGRATION = os.environ.get("HPC_REQUIRE_INTEGRATION") == "1"
# Tests that need something real (daemons, the engine, a tool such as promtool): CI installs it, so
# under HPC_REQUIRE_INTEGRATION=1 their skip is a failure, never a pass.
REAL_MARKERS = ("integration", "engine", "real_tool", "k8s_api", "vm")
# Every test in these directories carries the directory's marker, whether or not its module says
# so (a module that forgets ``pytestmark`` must not turn a skipped real test into a pass).
DIRECTORY_MARKERS = {"integration": "integration", "engine": "engine", "k8s_api": "k8s_api", "vm": "vm"}


@pytest.hookimpl(tryfirst=True)  # before -m deselects by marker
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    tests = ROOT / "tests"
    for item in items:
        path = Path(str(item.path))
        if not path.is_relative_to(tests) or len(path.relative_to(tests).parts) < 2:
            continue
        marker = DIRECTORY_MARKERS.get(path.relative_to(tests).parts[0])
        if marker and not item.get_closest_marker(marker):
            item.add_marker(marker)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]):  # type: ignore[no-untyped-def]
    outcome = yield
    report = outcome.get_result()
    real = any(item.get_closest_marker(m) for m in REAL_MARKERS)
    if REQUIRE_INTEGRATION and report.skipped and real:
        report.outcome = "failed"
        reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else report.longrepr
        report.longrepr = f"real-daemon/engine/tool test skipped while HPC_REQUIRE_INTEGRATION=1: {reason}"


# ---- wall time per suite: printed after every run and written to build/test-times.json --------
# A suite is a module of a real-daemon directory (integration/test_slurm: one lab each) or a
# whole pure directory (unit, stacks, ...). .ci/run prints these beside its own phases; a lane of
# tests/lanes.py writes its own file (HPC_TEST_TIMES), which the lane runner merges.
TIMES_FILE = Path(os.environ.get("HPC_TEST_TIMES") or ROOT / "build" / "test-times.json")
_suite_seconds: dict[str, float] = {}
_suite_tests: dict[str, int] = {}


def suite_of(nodeid: str) -> str:
    parts = nodeid.split("::", 1)[0].split("/")
    if len(parts) < 3 or parts[0] != "tests":
        return parts[0]
    if parts[1] in DIRECTORY_MARKERS:
        return f"{parts[1]}/{parts[2].removesuffix('.py')}"
    return parts[1]


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    suite = suite_of(report.nodeid)
    _suite_seconds[suite] = _suite_seconds.get(suite, 0.0) + report.duration
    if report.when == "call":
        _suite_tests[suite] = _suite_tests.get(suite, 0) + 1


def pytest_terminal_summary(terminalreporter) -> None:  # type: ignore[no-untyped-def]
    if not _suite_seconds or hasattr(terminalreporter.config, "workerinput"):
        return
    import json

    rows = sorted(_suite_seconds.items(), key=lambda kv: -kv[1])
    terminalreporter.section("wall time per suite")
    for suite, seconds in rows:
        terminalreporter.write_line(f"{seconds:8.1f} s  {_suite_tests.get(suite, 0):4d} tests  {suite}")
    if terminalreporter.config.rootpath == ROOT:
        TIMES_FILE.parent.mkdir(exist_ok=True)
        TIMES_FILE.write_text(json.dumps({s: round(t, 1) for s, t in rows}, indent=1) + "\n")
