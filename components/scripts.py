"""Remote scripts as plain data: the pure half of every remote step.

A ``RemoteScript`` is what one ``remote.Command`` runs on one host: a ``create`` script, its
matching ``delete`` script, and optionally the content of one file it installs (sent on stdin).
Scripts start with a header that the offline plan reads to file them per host::

    #!/usr/bin/env bash
    # hpc: step=rpi1-glusterd host=rpi1
    # hpc: file=/etc/ganesha/ganesha.conf

then ``set -euo pipefail``, the shared library (``shell/lib.sh``), the body, and ``hpc_done``,
which prints ``hpc: result=changed`` or ``hpc: result=unchanged``: a second run of any script
must print ``unchanged``. Renderers in the tiers build ``RemoteScript``s; ``components.remote``
turns them into resources.

Bodies are bash files next to their renderer (``components/<tier>/scripts/<step>.sh``), read as
written by shellcheck and by people, and filled by ``fill``: ``@name@`` takes a value, quoted for
bash (``shlex.quote``; numbers as they are, lists as quoted words, ``Raw`` fragments unchanged);
a placeholder alone on its line is a block: the fragment's lines replace that line (an empty one
removes it); lines starting with ``#@`` are notes for the reader and are not sent. A placeholder left without a
value, or a value no placeholder takes, is an error, so a template and its renderer cannot drift.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cache
from pathlib import Path

HEREDOC_MARK = "HPC_SCRIPT_END"
_SHELL = Path(__file__).with_name("shell")
_LIB = _SHELL / "lib.sh"


@cache
def shell_library() -> str:
    return _LIB.read_text()


class Raw(str):
    """A shell fragment rendered by the program (lines of data, a here-document): ``fill``
    inserts it unchanged. Anything else is a value and is quoted."""


PLACEHOLDER = re.compile(r"@([a-z][a-z0-9_]*)@")
BLOCK = re.compile(r"^@([a-z][a-z0-9_]*)@\n", re.M)  # a placeholder alone on its line: lines of shell
Value = str | int | Sequence[str | int]


@cache
def template(path: Path) -> str:
    """A script template as sent: its ``#@`` note lines removed."""
    return "".join(line for line in path.read_text().splitlines(keepends=True) if not line.startswith("#@"))


def quoted(value: Value) -> str:
    """``value`` as bash words: a string quoted only where it must be, a number as it is, a list
    as its quoted words separated by spaces, a ``Raw`` fragment unchanged."""
    if isinstance(value, Raw):
        return str(value)
    if isinstance(value, bool):
        raise TypeError("a bool is not a shell value: pass 0/1 or a word")
    if isinstance(value, int):
        return str(value)
    if isinstance(value, str):
        return shlex.quote(value)
    return " ".join(quoted(v) for v in value)


def fill(path: Path, /, **values: Value) -> str:
    """The template at ``path`` with every ``@name@`` replaced by ``quoted(values[name])``."""
    text = template(path)
    wanted = set(PLACEHOLDER.findall(text))
    if missing := sorted(wanted - set(values)):
        raise KeyError(f"{path.name}: no value for {', '.join(missing)}")
    if unused := sorted(set(values) - wanted):
        raise KeyError(f"{path.name}: no placeholder takes {', '.join(unused)}")

    def block(m: re.Match[str]) -> str:
        lines = quoted(values[m.group(1)])
        return lines if not lines or lines.endswith("\n") else lines + "\n"

    text = BLOCK.sub(block, text)
    return PLACEHOLDER.sub(lambda m: quoted(values[m.group(1)]), text)


def script(
    host: str,
    step: str,
    body: str,
    *,
    file: str | None = None,
    extra_headers: dict[str, str] | None = None,
    stdout_is_output: bool = False,
) -> str:
    """A complete bash script: header, strict mode, library, ``body``, result line (on stderr
    when ``stdout_is_output``: the step's stdout is then its output, e.g. a kubeconfig)."""
    head = ["#!/usr/bin/env bash", f"# hpc: step={step} host={host}"]
    if file:
        head.append(f"# hpc: file={file}")
    if extra_headers:
        head.append("# hpc: " + " ".join(f"{k}={v}" for k, v in sorted(extra_headers.items())))
    done = "hpc_done >&2" if stdout_is_output else "hpc_done"
    return "\n".join([*head, "set -euo pipefail", shell_library().rstrip(), "", body.strip("\n"), done, ""])


# What the plan's files show in place of the shared library (written once, as shell/lib.sh).
LIBRARY_LINE = "# hpc-lib: shell/lib.sh, the shared library, is inlined here (see files/shell/lib.sh)"


def outline(script_text: str) -> str:
    """A script for reviewers: the shared library replaced by one line (``inline`` undoes it)."""
    return script_text.replace(shell_library().rstrip(), LIBRARY_LINE, 1)


def inline(script_text: str) -> str:
    """The script as it runs, from its ``outline``."""
    return script_text.replace(LIBRARY_LINE, shell_library().rstrip(), 1)


def put_file(path: str, mode: str, text: str, owner: str = "0:0") -> str:
    """Script lines that install ``text`` at ``path`` (``hpc_put_file``: only when it differs)
    from a here-document."""
    if "\nHPC_FILE_END\n" in f"\n{text}":
        raise ValueError(f"{path}: content contains the here-document terminator")
    body = text if not text or text.endswith("\n") else text + "\n"
    return f"hpc_put_file {shlex.quote(path)} {mode} {owner} <<'HPC_FILE_END'\n{body}HPC_FILE_END\n"


def no_undo(host: str, step: str) -> str:
    """The delete script of a step that leaves nothing behind to remove."""
    return script(host, f"{step}-delete", 'echo "hpc: nothing to undo"\n')


@dataclass(frozen=True)
class RemoteScript:
    """One remote step: what to run on create, what undoes it, and the file it installs."""

    step: str
    host: str
    create: str
    delete: str | None = None
    file_path: str | None = None
    file_content: str | None = None


def wrap(script_text: str, sudo: bool = False) -> str:
    """The command line that runs ``script_text`` with bash whatever the login shell is.

    As root, the script travels as a here-document on file descriptor 3, so standard input stays
    free for the file or secret the step receives. For another login user it runs through
    ``sudo -n`` (passwordless sudo, checked by the host's preflight step): sudo closes every
    descriptor above 2, so the script goes to a private temporary file first; standard input
    still reaches it."""
    if HEREDOC_MARK in script_text:
        raise ValueError("script contains the here-document terminator")
    if not sudo:
        return f"bash /dev/fd/3 3<<'{HEREDOC_MARK}'\n{script_text}{HEREDOC_MARK}\n"
    return (
        f"f=$(mktemp) && cat >\"$f\" <<'{HEREDOC_MARK}'\n{script_text}{HEREDOC_MARK}\n"
        'sudo -n bash "$f"; rc=$?; rm -f "$f"; exit $rc\n'
    )


def unwrap(command: str) -> str:
    """The script inside a ``wrap``ped command (the plan files scripts this way)."""
    first, _, rest = command.partition("\n")
    if first.startswith("bash /dev/fd/3 3<<"):
        return rest.removesuffix(f"{HEREDOC_MARK}\n")
    if first.startswith("f=$(mktemp) && cat >"):
        return rest.split(f"{HEREDOC_MARK}\n", 1)[0]
    return command


def headers(script_text: str) -> dict[str, str]:
    """The ``# hpc: key=value`` header fields of a script."""
    out: dict[str, str] = {}
    for line in script_text.splitlines()[:8]:
        if line.startswith("# hpc: "):
            for item in line[len("# hpc: ") :].split():
                k, _, v = item.partition("=")
                out[k] = v
    return out


def restart_running(containers: tuple[str, ...], why: str) -> Raw:
    """Shell lines (indented for the body of an ``if``): restart those of ``containers`` that
    run, since they read what changed only at start."""
    return Raw(fill(_SHELL / "restart-running.sh", containers=list(containers), why=Raw(why)))
