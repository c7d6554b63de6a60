"""The README's alert and threshold tables, rendered from the rules themselves
(``python -m components.monitoring.alert_table``; a unit test keeps the README equal to it)."""

from __future__ import annotations

from components.monitoring import rules
from components.monitoring.spec import THRESHOLDS


def _cell(text: str) -> str:
    """Text in a table cell: its pipes escaped (GitHub's tables split on them, even in code)."""
    return text.replace("|", "\\|")


def _code(text: str) -> str:
    return "`" + _cell(text) + "`"


def alerts_table() -> str:
    default = {a.name: a for a in rules.alerts("nvidia-smi")}
    dcgm = {a.name: a for a in rules.alerts("dcgm")}
    rows = ["| alert | severity | fires on | runbook |", "|---|---|---|---|"]
    for name, a in default.items():
        fires = f"{_code(a.expr)} for {a.for_}"
        if dcgm[name].expr != a.expr:
            fires = f"{_code(a.expr)} (`gpuMetrics: dcgm`: {_code(dcgm[name].expr)}) for {a.for_}"
        rows.append(f"| `{name}` | {a.severity} | {fires} | {_cell(a.runbook)} |")
    return "\n".join(rows) + "\n"


def thresholds_table() -> str:
    rows = ["| threshold | value | source |", "|---|---|---|"]
    rows += [f"| `{key}` | {t.value:g} {t.unit} | {t.source} |" for key, t in THRESHOLDS.items()]
    return "\n".join(rows) + "\n"


if __name__ == "__main__":
    print(alerts_table() + "\n" + thresholds_table(), end="")
