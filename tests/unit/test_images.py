"""Every Dockerfile in images/: hadolint clean, base pinned by tag and digest, entrypoints checked."""

import re
import shutil
import subprocess

import pytest

from offline import plan

DOCKERFILES = sorted((plan.ROOT / "images").rglob("Dockerfile*"))
FROM = re.compile(r"^FROM\s+(\S+)", re.M)


def tool(name: str) -> str:
    path = shutil.which(name, path=str(plan.ROOT / ".venv" / "bin")) or shutil.which(name)
    assert path, f"{name} is required (requirements.txt)"
    return path


def test_there_are_images_for_slurm_and_fastchat():
    assert {p.parent.name for p in DOCKERFILES} == {"slurm", "fastchat"}


@pytest.mark.parametrize("dockerfile", DOCKERFILES, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_hadolint_clean_and_base_pinned(dockerfile):
    proc = subprocess.run([tool("hadolint"), str(dockerfile)], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout
    bases = FROM.findall(dockerfile.read_text())
    assert bases
    for base in bases:
        assert re.fullmatch(r"[a-z0-9./-]+:[A-Za-z0-9._-]+@sha256:[0-9a-f]{64}", base), base


def test_image_scripts_pass_shellcheck():
    scripts = sorted((plan.ROOT / "images").rglob("*.sh"))
    assert {p.name for p in scripts} >= {"entrypoint.sh", "fetch-pinned.sh", "pins.sh", "apptainer-setup.sh"}
    proc = subprocess.run([tool("shellcheck"), "-x", *map(str, scripts)], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout


def test_fastchat_installs_only_from_its_hashed_lock():
    context = plan.ROOT / "images" / "fastchat"
    dockerfile = (context / "Dockerfile").read_text()
    pip_lines = [line for line in dockerfile.splitlines() if "pip install" in line]
    assert pip_lines and all("--require-hashes -r" in line and "--no-deps" in line for line in pip_lines)
    lock = (context / "requirements.txt").read_text()
    entries = re.split(r"\n(?=[A-Za-z0-9])", lock.split("\n", 2)[2])
    pins = {}
    for entry in entries:
        if not entry.strip() or entry.startswith("#"):
            continue
        name, _, version = entry.split(" ", 1)[0].partition("==")
        assert version, f"{name} is not pinned exactly"
        assert "--hash=sha256:" in entry, f"{name} has no hash"
        pins[name.lower()] = version
    wanted = [line.split("#")[0].strip() for line in (context / "requirements.in").read_text().splitlines()]
    for req in filter(None, wanted):
        name, _, version = req.partition("==")
        assert pins.get(name.split("[")[0].lower()) == version, req
