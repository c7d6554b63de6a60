"""Slurm host steps and images: values derived from the profiles, secrets only on stdin."""

import shutil

import pytest

from components import hardware
from components.slurm import render, steps
from components.slurm.images import SLURM_CONTEXT, image_hash
from offline.mocks import plain
from tests.stacks.test_operator_errors import DEV


def test_kernel_tuning_from_ml_prod_v4_memory():
    t = steps.KernelTuning.for_profile(hardware.CATALOGUE["ml-prod-v4"])
    ram = 2048 * 1024**3
    assert t.shmmax == ram * 3 // 4 and t.shmall == t.shmmax // 4096
    assert t.file_max == 2048 * 1024 * 32
    assert "kernel.shmmax = 1649267441664\n" in t.text


def test_kernel_tuning_has_a_file_max_floor_on_small_nodes():
    assert steps.KernelTuning.for_profile(hardware.CATALOGUE["rpi4-8g"]).file_max == 2**20


def test_secret_steps_read_stdin_and_embed_no_secret():
    key = steps.munge_key("h", "/gfsv")
    assert "hpc_put_file /etc/hpc-cluster/munge/munge.key 0400 0:0 < <(base64 -d)" in key.create
    assert "rm -f /gfsv/munge/munge.key" in key.create  # none left on the shared volume
    sec = steps.head_secrets("h")
    assert "password=$(cat)" in sec.create
    assert render.DB_PASSWORD_PLACEHOLDER in sec.create  # substituted on the host, not in the plan
    assert "hpc_put_file /etc/slurm/slurmdbd.conf 0600 64030:64030" in sec.create


def test_a_changed_config_file_reconfigures_and_never_restarts_the_controller():
    for name in ("slurm.conf", "gres.conf", "cgroup.conf"):
        create = steps.config_file("h", name, "x").create
        assert "docker exec slurm-head scontrol reconfigure" in create
        assert "docker restart" not in create  # Slurm 24.11 adds nodes on reconfigure (Slurm suite)


def run_preflight(tmp_path, versions: list[str]):  # type: ignore[no-untyped-def]
    """The rendered GPU preflight, run by bash with an nvidia-smi stand-in printing ``versions``."""
    import subprocess

    (tmp_path / "nvidia-smi").write_text("#!/bin/sh\nprintf '%s\\n' " + " ".join(versions) + "\n")
    (tmp_path / "nvidia-smi").chmod(0o755)
    script = steps.gpu_preflight("gpu01", 8).create
    env = {"PATH": f"{tmp_path}:/usr/bin:/bin"}
    return subprocess.run(["bash", "-c", script], capture_output=True, text=True, env=env, timeout=30)


def test_preflight_refuses_a_wrong_gpu_count_an_old_driver_and_missing_devices(tmp_path):
    fewer = run_preflight(tmp_path, ["550.54.15"] * 4)
    assert fewer.returncode == 1 and "gpu01: the profile says 8 GPUs, nvidia-smi shows 4" in fewer.stderr
    old = run_preflight(tmp_path, ["535.104.05"] * 8)
    assert old.returncode == 1 and "branch R535 is older than R550" in old.stderr
    ok = run_preflight(tmp_path, ["550.54.15"] * 8)  # this machine has no /dev/nvidia0
    assert ok.returncode == 1 and "gpu01: /dev/nvidia0 is missing" in ok.stderr, ok.stderr


def test_state_delete_keeps_data_unless_allowed():
    assert "rm -rf" not in (steps.state_dirs("h", "/s", "/db", False).delete or "")
    assert "rm -rf --one-file-system /s /db" in (steps.state_dirs("h", "/s", "/db", True).delete or "")


def edited_context(tmp_path, name: str, line: str):
    context = tmp_path / "slurm"
    tmp_path.mkdir(exist_ok=True)
    shutil.copytree(SLURM_CONTEXT, context)
    with (context / name).open("a") as f:
        f.write(line)
    return context


@pytest.mark.parametrize(
    ("edited", "changed"),
    [
        ("Dockerfile.login", {"login"}),  # even a comment: the login containers only
        ("sshd-login.conf", {"login"}),  # copied by the login image only
        ("Dockerfile.worker", {"worker"}),
        ("entrypoint.sh", {"head", "worker", "login"}),  # copied by every image
    ],
)
def test_each_image_tag_hashes_exactly_the_files_its_dockerfile_copies(tmp_path, edited, changed):
    before = {r: image_hash(r) for r in ("head", "worker", "login")}
    assert all(len(t) == 16 for t in before.values()) and len(set(before.values())) == 3
    context = edited_context(tmp_path, edited, "\n# an edit\n")
    after = {r: image_hash(r, context) for r in before}
    assert {r for r in before if after[r] != before[r]} == changed


def test_a_copy_source_that_is_missing_is_an_error(tmp_path):
    context = edited_context(tmp_path, "Dockerfile.login", "\nCOPY no-such-file /x\n")
    with pytest.raises(FileNotFoundError, match="no-such-file"):
        image_hash("login", context)


def test_a_login_image_change_replaces_only_the_login_container(tmp_path, monkeypatch):
    """The plan: with Dockerfile.login edited, only the login host's image and container change;
    the head and every worker (and their running jobs) are untouched."""
    from components.slurm import images
    from offline import plan

    def containers(result):
        return {r.name: plain(r.inputs)["image"] for r in result.of_type("docker:index/container:Container")}

    def image_names(result):
        return {r.name: plain(r.inputs)["imageName"] for r in result.of_type("docker:index/image:Image")}

    assert any(h["roles"] == ["login"] for h in DEV["hpc:hosts"])  # dev has its login node, login1
    before = plan.run("dev")
    context = edited_context(tmp_path / "images", "Dockerfile.login", "\n# a comment\n")  # .../images/slurm
    monkeypatch.setattr(images, "IMAGES_DIR", context.parent)
    monkeypatch.setattr(images, "SLURM_CONTEXT", context)
    images.image_hash.cache_clear()
    try:
        after = plan.run("dev")
    finally:
        images.image_hash.cache_clear()
    changed = {n for n, v in image_names(after).items() if image_names(before).get(n) != v}
    assert changed == {"login1-image"}, changed
    moved = {n for n, v in containers(after).items() if containers(before).get(n) != v}
    assert moved == {"login1-container"}, moved


def test_slurm_images_have_no_login_credentials_and_a_group_signalling_init():
    files = sorted(SLURM_CONTEXT.glob("Dockerfile.*"))
    assert [f.name for f in files] == ["Dockerfile.head", "Dockerfile.login", "Dockerfile.worker"]
    for f in files:  # hadolint and the base-image pin: tests/unit/test_images.py
        text = f.read_text()
        instructions = "\n".join(line for line in text.splitlines() if not line.lstrip().startswith("#"))
        # only the login node runs sshd; no image has a password or sudo
        sshd = () if f.name == "Dockerfile.login" else ("openssh-server",)
        for forbidden in ("chpasswd", "NOPASSWD", "sudo", *sshd):
            assert forbidden not in instructions, (f.name, forbidden)
        assert 'ENTRYPOINT ["/usr/bin/tini", "--"' in text and "HEALTHCHECK" in text


def test_login_sshd_takes_keys_only_and_no_root():
    conf = (SLURM_CONTEXT / "sshd-login.conf").read_text()
    for line in ("PasswordAuthentication no", "KbdInteractiveAuthentication no", "PermitRootLogin no",
                 "AuthorizedKeysFile /var/lib/extrausers/keys/%u"):  # fmt: skip
        assert f"\n{line}\n" in conf


def test_preflight_keeps_gpu_device_files_roots_and_its_delete_removes_the_driver_setting():
    step = steps.gpu_preflight("gpu01", 8)
    assert f"hpc_put_file {steps.NVIDIA_MODPROBE_FILE} 0644 0:0" in step.create
    assert "NVreg_DeviceFileMode=0660" in step.create and 'hpc_fix_mode "$dev" 0660 0:0' in step.create
    assert f"rm -f {steps.NVIDIA_MODPROBE_FILE}" in (step.delete or "")
