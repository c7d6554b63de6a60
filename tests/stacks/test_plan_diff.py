"""make plan-diff on two committed revisions (a throwaway clone): the three reviewer scenarios."""

import subprocess
import sys

import pytest
import yaml

from components import scripts
from offline import plan


@pytest.fixture(scope="module")
def clone(tmp_path_factory):
    repo = tmp_path_factory.mktemp("repo") / "hpc"
    subprocess.run(["git", "clone", "-q", str(plan.ROOT), str(repo)], check=True)
    return repo


def revise(repo, edit, message):
    """Commit a change to Pulumi.dev.yaml on top of HEAD and diff against HEAD~1."""
    path = repo / "Pulumi.dev.yaml"
    doc = yaml.safe_load(path.read_text())
    edit(doc["config"])
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@example.invalid"]
    subprocess.run([*git, "commit", "-qam", message], cwd=repo, check=True)
    proc = subprocess.run(
        [sys.executable, "-m", "offline.plan_diff", "--base", "HEAD~1", "--stack", "dev"],
        cwd=repo,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr
    stages = [line for line in proc.stderr.splitlines() if line.startswith("plan-diff: ")]
    assert stages[0].startswith("plan-diff: planning dev at HEAD~1 (") and "comparing" in stages[-1], proc.stderr
    return proc.stdout


def test_adding_a_gpu_worker(clone):
    def add(c):
        c["hpc:hosts"].append(
            {
                "name": "gpu2",
                "address": "192.168.0.112",
                "sshUser": "pi",
                "profile": "a100x2-80g",
                "roles": ["gpu-worker"],
                "containerAddress": "192.168.0.206",
            }
        )

    md = revise(clone, add, "add gpu2")
    assert "STATEFUL" not in md
    assert "| `gpu2-container` | `docker:index/container:Container` |" in md
    assert "| `rpi1-slurm-conf` | `command:remote:Command` | stdin |" in md
    assert "### rpi2" not in md and "### rpi3" not in md  # the sibling workers are untouched
    assert "+NodeName=gpu2 NodeAddr=192.168.0.206 CPUs=32" in md
    assert "### Policies" in md
    # Shared text is not repeated: the library is one file, a new host's files that match a
    # sibling's are one line each, and the new machine's section comes first.
    assert scripts.shell_library().splitlines()[-2] not in md
    assert "new, same as <code>hosts/rpi1/steps/rpi2-drain.sh</code> with rpi2 → gpu2" in md
    assert md.index("### gpu2 (new)") < md.index("### rpi1")
    print(f"\nadd-one-worker plan diff: {len(md.splitlines())} lines, {len(md)} characters")
    assert len(md.splitlines()) < 400


def test_a_stack_new_in_the_change_is_all_added(clone):
    (clone / "Pulumi.lab.yaml").write_text((clone / "Pulumi.dev.yaml").read_text())
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@example.invalid"]
    subprocess.run([*git, "add", "Pulumi.lab.yaml"], cwd=clone, check=True)
    subprocess.run([*git, "commit", "-qm", "a lab stack"], cwd=clone, check=True)
    proc = subprocess.run(
        [sys.executable, "-m", "offline.plan_diff", "--base", "HEAD~1", "--stack", "lab"],
        cwd=clone, capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    added = int(proc.stdout.split("**", 2)[1].split(" to add")[0])
    assert added > 100 and "0 to update, 0 to replace, 0 to remove" in proc.stdout


def test_changing_a_models_flags(clone):
    def flags(c):
        c["hpc:inference"]["models"][3]["maxModelLen"] = 16000

    md = revise(clone, flags, "phi3 context")
    assert "**0 to add, 1 to update, 0 to replace, 0 to remove**" in md
    assert "| `gpu1-inference-phi3-mini-128k` | `kubernetes:apps/v1:Deployment` | spec |" in md
    assert "-        - '18000'" in md and "+        - '16000'" in md


def test_changing_the_volume_bricks_is_flagged_as_destructive(clone):
    def bricks(c):
        c["hpc:storage"]["brickPath"] = "/mnt/gv1/brick"

    md = revise(clone, bricks, "move bricks")
    assert "STATEFUL RESOURCES AFFECTED" in md
    assert "`gv0-volume` holds **gluster-volume**" in md
    assert "`rpi2-brick` holds **gluster-brick**" in md
    assert md.index("STATEFUL") < md.index("to add")  # loud, at the top
