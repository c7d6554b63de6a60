"""make plan-diff on two committed revisions (a throwaway clone): the three reviewer scenarios."""

import subprocess
import sys

import pytest
import yaml

from stacks import plan


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
        [sys.executable, "-m", "stacks.plan_diff", "--base", "HEAD~1", "--stack", "dev"],
        cwd=repo,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


def test_adding_a_gpu_worker(clone):
    def add(c):
        c["hpc:hosts"].append(
            {
                "name": "gpu2",
                "address": "192.168.0.111",
                "sshUser": "pi",
                "profile": "a100x2-80g",
                "roles": ["gpu-worker"],
                "containerAddress": "192.168.0.205",
            }
        )

    md = revise(clone, add, "add gpu2")
    assert "STATEFUL" not in md
    assert "| `gpu2-container` | `docker:index/container:Container` |" in md
    assert "| `rpi1-slurm-conf` | `command:remote:Command` | stdin |" in md
    updated = md.split("### Updated", 1)[1].split("###", 1)[0]
    assert "rpi2-container" not in updated and "rpi3-" not in updated  # the sibling workers are untouched
    assert "+NodeName=gpu2 NodeAddr=192.168.0.205 CPUs=32" in md
    assert "### Policies" in md


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
