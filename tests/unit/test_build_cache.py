"""tools/cache.sh: a per-user build cache is used only when sealed and intact."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
CACHE_SH = ROOT / "tools" / "cache.sh"
BUILD_SCRIPTS = sorted((ROOT / "tools").glob("*/build.sh"))


def sh(cmd: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["bash", "-c", f'set -euo pipefail; source "$0"; {cmd}', str(CACHE_SH), *args],
                          capture_output=True, text=True, timeout=60)  # fmt: skip


def filled(tmp_path: Path) -> Path:
    d = tmp_path / "cache"
    (d / "bin").mkdir(parents=True)
    (d / "bin" / "tool").write_bytes(b"\x7fELF" + b"x" * 4096)
    (d / "stages.yaml").write_text("kind: Stage\n")
    return d


def test_a_sealed_cache_is_ok_and_its_seal_lists_every_file(tmp_path):
    d = filled(tmp_path)
    assert sh('cache_ok "$1"', str(d)).returncode == 1  # never sealed
    assert sh('cache_seal "$1"', str(d)).returncode == 0
    assert sh('cache_ok "$1"', str(d)).returncode == 0
    listed = sorted(line.split()[1] for line in (d / ".complete").read_text().splitlines())
    assert listed == ["./bin/tool", "./stages.yaml"]
    assert not list(d.glob(".complete.*"))  # the temporary manifest was renamed into place


def test_a_truncated_or_missing_file_breaks_the_seal_and_reset_says_so(tmp_path):
    d = filled(tmp_path)
    sh('cache_seal "$1"', str(d))
    with open(d / "bin" / "tool", "r+b") as f:
        f.truncate(100)
    assert sh('cache_ok "$1"', str(d)).returncode == 1
    out = sh('cache_reset "$1"', str(d))
    assert out.returncode == 0 and "fails its seal" in out.stdout
    assert d.is_dir() and not any(d.iterdir())
    d2 = filled(tmp_path / "two")
    sh('cache_seal "$1"', str(d2))
    (d2 / "stages.yaml").unlink()
    assert sh('cache_ok "$1"', str(d2)).returncode == 1


def test_a_build_stopped_before_its_seal_is_rebuilt(tmp_path):
    d = filled(tmp_path)
    (d / ".complete.AbC123").write_text("half a manifest")  # killed while sealing
    assert sh('cache_ok "$1"', str(d)).returncode == 1
    out = sh('cache_reset "$1"', str(d))
    assert "left unsealed" in out.stdout and not any(d.iterdir())
    fresh = tmp_path / "new"
    out = sh('cache_reset "$1"', str(fresh))  # nothing there yet: silent
    assert out.returncode == 0 and out.stdout == "" and fresh.is_dir()


def test_every_build_script_trusts_only_sealed_caches():
    assert BUILD_SCRIPTS, "no tools/*/build.sh"
    for script in BUILD_SCRIPTS:
        text = script.read_text()
        assert 'source "$here/../cache.sh"' in text, script
        assert not re.search(r"\.complete\"?\s*\]|touch .*\.complete", text), f"{script}: a bare marker file"
        assert text.count("cache_ok") == text.count("cache_seal") >= 1, script
