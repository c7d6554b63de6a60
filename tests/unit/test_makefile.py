"""`make help` lists every target and the README documents each one."""

import re
import subprocess

from offline import plan


def phony() -> list[str]:
    text = (plan.ROOT / "Makefile").read_text()
    return re.search(r"^\.PHONY:(.*)$", text, re.M).group(1).split()  # type: ignore[union-attr]


def test_make_help_lists_every_target():
    out = subprocess.run(["make", "-s", "help"], cwd=plan.ROOT, capture_output=True, text=True, check=True).stdout
    listed = [line.split()[0] for line in out.splitlines() if line.strip()]
    assert sorted(listed) == sorted(phony())
    assert all(len(line.split(None, 1)) == 2 for line in out.splitlines()), out  # each has a description


def test_the_readme_documents_every_target():
    readme = (plan.ROOT / "README.md").read_text()
    missing = [t for t in phony() if f"`make {t}" not in readme]
    assert not missing, missing
