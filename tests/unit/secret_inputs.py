"""A check the secret-bearing steps share: the secret reaches its host only on stdin."""

from __future__ import annotations

from offline.mocks import plain
from offline.plan import PlanRun


def only_on_stdin(result: PlanRun, step_name: str) -> None:
    """``step_name``'s stdin is marked secret, and its value is in no resource's script."""
    step = result.by_name(step_name)
    assert step.inputs["stdin"] != plain(step.inputs["stdin"])  # marked secret
    value = plain(step.inputs["stdin"])
    for r in result.resources:
        for key in ("create", "delete", "update"):
            assert value not in str(plain(r.inputs.get(key, ""))), r.name
