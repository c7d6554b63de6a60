"""The PR comment stays under GitHub's limit by design: whole blocks only, every stack named."""

import re

import yaml

from offline import plan
from offline.diff_model import Change, HostSection, StackDiff
from offline.pr_comment import GITHUB_LIMIT, compose, from_dict


def big_diff(stack: str, hosts: int, files_per_host: int, lines_per_file: int) -> StackDiff:
    sections = []
    for h in range(hosts):
        body = "\n".join(f"+line {i} of a long rendered file on host {h}" for i in range(lines_per_file))
        files = [
            (f"hosts/n{h}/steps/s{k}.sh", f"<details><summary>s{k}</summary>\n\n```diff\n{body}\n```\n\n</details>")
            for k in range(files_per_host)
        ]
        change = Change("add", {"name": f"n{h}-step", "type": "command:remote:Command"})
        sections.append(HostSection(f"n{h}", "new", [change], files))
    stateful = ["- **replace** `gv0-volume` holds **gluster-volume** (changed: create)"]
    counts = {"add": hosts, "update": 0, "replace": 1, "remove": 0}
    return StackDiff(stack, "origin/main", counts, 500, stateful, sections, ["- **mandatory** `p`: m"])


def balanced(text: str) -> bool:
    fences = re.findall(r"^(`{3,})", text, re.M)
    return len(fences) % 2 == 0 and text.count("<details>") == text.count("</details>")


def test_a_huge_change_fits_and_keeps_every_stack_and_every_warning():
    dev, prod = big_diff("dev", 40, 6, 60), big_diff("prod", 40, 6, 60)
    assert len(dev.markdown()) + len(prod.markdown()) > 3 * GITHUB_LIMIT  # the old slice would cut it
    text = compose([dev, prod], "https://example.invalid/artifact/1")
    assert len(text) <= 60_000
    assert balanced(text)
    for stack in ("dev", "prod"):
        assert f"## Plan diff for `{stack}` against `origin/main`" in text
    assert text.count("STATEFUL RESOURCES AFFECTED") == 2
    assert text.count("### Policies") == 2
    assert re.search(r"_\d+ more changed files for `prod`: see \[the `plan` artifact\]\(https://example.invalid/", text)


def test_a_small_change_is_shown_whole():
    small = big_diff("dev", 2, 2, 5)
    text = compose([small])
    assert all(block in text for s in small.sections for _, block in s.files)
    assert "more changed files" not in text and balanced(text)


def test_the_json_the_diff_writes_round_trips():
    import dataclasses

    d = big_diff("dev", 2, 1, 3)
    assert from_dict(dataclasses.asdict(d)) == d


def test_the_workflow_posts_the_composed_comment_without_cutting_it():
    wf = yaml.safe_load((plan.ROOT / ".github/workflows/preview.yml").read_text())
    steps = wf["jobs"]["plan"]["steps"]
    runs = "\n".join(str(s.get("run", "")) + str((s.get("with") or {}).get("script", "")) for s in steps)
    assert "offline.pr_comment" in runs and "plan-diff-comment.md" in runs
    assert ".slice(" not in runs
