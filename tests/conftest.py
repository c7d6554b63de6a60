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
REAL_MARKERS = ("integration", "engine", "real_tool", "k8s_api")
# Every test in these directories carries the directory's marker, whether or not its module says
# so (a module that forgets ``pytestmark`` must not turn a skipped real test into a pass).
DIRECTORY_MARKERS = {"integration": "integration", "engine": "engine", "k8s_api": "k8s_api"}


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
