"""Shared test setup: the repo on sys.path, and CI's rule that a skipped real-daemon test fails."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

REQUIRE_INTEGRATION = os.environ.get("HPC_REQUIRE_INTEGRATION") == "1"


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]):  # type: ignore[no-untyped-def]
    outcome = yield
    report = outcome.get_result()
    real = item.get_closest_marker("integration") or item.get_closest_marker("engine")
    if REQUIRE_INTEGRATION and report.skipped and real:
        report.outcome = "failed"
        reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else report.longrepr
        report.longrepr = f"real-daemon/engine test skipped while HPC_REQUIRE_INTEGRATION=1: {reason}"
