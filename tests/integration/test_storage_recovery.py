"""The storage tier in the situations of a site's first month, on real glusterd and NFS-Ganesha.

Each test is a scenario an admin meets: a create that failed with a peer down, a pool probed by
host name, a reordered host list, Ganesha started before glusterd (a reboot), another process on
the NFS port, an export changed while a client writes, another volume on the mount point, option
aliases and removed options. The plan's own scripts run over real SSH on three lab hosts; tests
run in file order on one lab.
"""

from __future__ import annotations

import json
import subprocess
import time

import pytest

from components.storage import render_gluster
from tests.integration import lab as labmod
from tests.integration.steps import Step, run_step
from tests.integration.storage_stack import NET, storage_lab, storage_steps

pytestmark = pytest.mark.integration

HOSTS = ("gl1", "gl2", "gl3")
BRICK = "/srv/bricks/gv0/brick"


@pytest.fixture(scope="module")
def lab():
    yield from storage_lab({"cl": f"{NET}.2"})


@pytest.fixture(scope="module")
def planned() -> dict[str, Step]:
    return storage_steps()


def run(lab, steps: dict[str, Step], *names: str) -> dict[str, str]:
    return {n: run_step(lab, steps[n]).stdout for n in names}


def unchanged(out: str) -> bool:
    return out.rstrip().endswith("hpc: result=unchanged")


def stamp(lab, host: str, path: str = BRICK) -> str:
    cmd = f"getfattr --absolute-names -n trusted.glusterfs.volume-id -e hex {path} 2>/dev/null || true"
    return lab.ssh(host, cmd).stdout.strip()


# ---- 1. a failed create never blocks a retry -------------------------------------------------------
def test_a_create_with_a_peer_down_fails_naming_it_and_the_retry_succeeds(lab, planned):
    run(lab, planned, *(f"{h}-glusterd" for h in HOSTS))
    # An existing site: the pool was probed by host name, not by the addresses the stack uses.
    lab.ssh("gl1", "gluster --mode=script peer probe gl2 && gluster --mode=script peer probe gl3")
    started = time.monotonic()
    assert unchanged(run(lab, planned, "gv0-peers")["gv0-peers"])  # recognised by UUID: nothing to probe
    assert time.monotonic() - started < 30
    run(lab, planned, *(f"{h}-brick" for h in HOSTS))
    lab.ssh("gl3", "systemctl stop glusterd")
    # What an earlier attempt (or an admin) did: gluster stamps the local brick and fails.
    raw = lab.ssh("gl1", f"gluster --mode=script volume create gv0 replica 3 {NET}.11:{BRICK} {NET}.12:{BRICK} "
                         f"{NET}.13:{BRICK}", check=False)  # fmt: skip
    assert raw.returncode != 0 and "not connected" in raw.stdout + raw.stderr
    assert "volume-id=0x" in stamp(lab, "gl1")
    failed = run_step(lab, planned["gv0-volume"], check=False)
    assert failed.returncode != 0
    assert "cannot create volume gv0: not every brick host is connected to the trusted pool" in failed.stderr
    assert f"{NET}.13 is Disconnected" in failed.stderr
    run(lab, planned, "gl3-glusterd")
    run(lab, planned, "gv0-peers")
    out = run(lab, planned, "gv0-volume")["gv0-volume"]
    assert "hpc: changed: cleared volume id 0x" in out and "created volume gv0 (replica 3)" in out
    assert "Status: Started" in lab.ssh("gl2", "gluster volume info gv0").stdout
    for step in planned.values():  # the rest of the tier on top
        run_step(lab, step)


def test_a_stale_stamp_on_a_brick_with_data_is_never_cleared(lab):
    path = "/srv/bricks/orphan"
    lab.ssh("gl1", f"mkdir -p {path} && echo keep >{path}/data.txt && "
                   f"setfattr -n trusted.glusterfs.volume-id -v 0x00112233445566778899aabbccddeeff {path}")  # fmt: skip
    proc = run_step(lab, Step("orphan", f"{NET}.11", render_gluster.brick("gl1", path, False).create, None, None, ()),
                    check=False)  # fmt: skip
    assert proc.returncode != 0 and "which no volume of this pool has, and holds data" in proc.stderr
    assert lab.ssh("gl1", f"cat {path}/data.txt").stdout == "keep\n"
    assert "0x00112233445566778899aabbccddeeff" in stamp(lab, "gl1", path)


# ---- 3. brownfield pools, host order ---------------------------------------------------------------
def test_a_reordered_host_list_plans_and_runs_unchanged(lab, planned):
    reordered = storage_steps(["gl3", "gl1", "gl2"])
    for name, step in planned.items():
        again = reordered[name]
        assert (step.host, step.create, step.stdin) == (again.host, again.create, again.stdin), name
    for name, out in {n: run_step(lab, s).stdout for n, s in reordered.items()}.items():
        assert unchanged(out), f"{name}:\n{out}"


def test_the_pool_steps_work_from_any_storage_host(lab):
    others = [f"{NET}.11", f"{NET}.13"]
    step = render_gluster.peers("gl2", "gv0", others)
    out = run_step(lab, Step("gl2-peers", f"{NET}.12", step.create, None, None, ())).stdout
    assert unchanged(out)


# ---- 2. health means serving -------------------------------------------------------------------------
def nfs_ls(lab) -> subprocess.CompletedProcess[str]:
    return lab.in_client("cl", ["nfs-ls", f"nfs://{NET}.11/gv/?version=4"])


def test_ganesha_started_before_glusterd_is_repaired(lab, planned):
    """A reboot in which Ganesha comes up before glusterd: it runs, holds the port, exports nothing."""
    lab.ssh("gl1", "systemctl stop nfs-ganesha; systemctl stop glusterd")
    lab.ssh("gl1", "systemctl start nfs-ganesha")  # before glusterd: FSAL_GLUSTER cannot reach the volume
    lab.ssh("gl1", "systemctl start glusterd")
    labmod.wait_until(lambda: "Status: Started" in lab.ssh("gl1", "gluster volume info gv0", check=False).stdout,
                      "glusterd", 60)  # fmt: skip
    assert lab.ssh("gl1", "ss -Hltn 'sport = :2049'").stdout.strip()  # something listens ...
    assert nfs_ls(lab).returncode != 0  # ... but nothing is served
    out = run_step(lab, planned["gl1-nfs-config"]).stdout
    assert "hpc: changed: restarted nfs-ganesha: it was no-export (not serving /gv0)" in out
    labmod.wait_until(lambda: nfs_ls(lab).returncode == 0, "the export", 30)
    assert unchanged(run_step(lab, planned["gl1-nfs-config"]).stdout)


def test_another_process_on_the_nfs_port_fails_the_step_naming_it(lab, planned):
    lab.ssh("gl1", "systemctl stop nfs-ganesha")
    squatter = subprocess.Popen(
        ["nsenter", "-t", str(lab.hosts["gl1"].holder), "-n", "-m", "--", "python3", "-c",
         "import socket,time; s=socket.socket(socket.AF_INET6); s.bind(('::', 2049)); s.listen(); time.sleep(600)"],
    )  # fmt: skip
    try:
        labmod.wait_until(lambda: "python3" in lab.ssh("gl1", "ss -Hltnp 'sport = :2049'").stdout, "the squatter")
        proc = run_step(lab, planned["gl1-nfs-config"], check=False)
        assert proc.returncode != 0
        assert "port 2049 on gl1 is held by users:((\"python3\"" in proc.stderr
    finally:
        squatter.kill()
        squatter.wait(10)
    # Ganesha either retried the port itself or is started again by the step: serving either way.
    run_step(lab, planned["gl1-nfs-config"])
    labmod.wait_until(lambda: nfs_ls(lab).returncode == 0, "the export", 30)


# ---- 4. exports without outages -----------------------------------------------------------------------
WRITER = r"""
import json, os, subprocess, sys, time
url, src, stop = sys.argv[1], sys.argv[2], sys.argv[3]
ok, i, start = [], 0, time.monotonic()
while not os.path.exists(stop):
    i += 1
    r = subprocess.run(["nfs-cp", src, f"{url}/w{i}.txt?version=4&uid=1000&gid=1000"], capture_output=True)
    if r.returncode == 0:
        ok.append(time.monotonic())
    time.sleep(0.1)
marks = [start, *ok, time.monotonic()]
gaps = [b - a for a, b in zip(marks, marks[1:])]
print(json.dumps({"writes": i, "ok": len(ok), "max_gap_s": round(max(gaps), 2)}))
"""


def write_through(lab, change) -> dict[str, float]:  # type: ignore[no-untyped-def]
    """Run ``change`` while a client writes a small file every 0.1 s, until the export serves
    again and 3 s more; the longest stretch without a successful write."""
    src, stop = lab.dir / "w.txt", lab.dir / "stop-writer"
    src.write_text("written during an export change\n")
    stop.unlink(missing_ok=True)
    lab.ssh("gl1", "mkdir -p /srv/gfsv/writes && chown 1000:1000 /srv/gfsv/writes")
    writer = subprocess.Popen(["ip", "netns", "exec", f"{lab.prefix}-cl", "python3", "-c", WRITER,
                               f"nfs://{NET}.11/gv/writes", str(src), str(stop)],
                              stdout=subprocess.PIPE, text=True)  # fmt: skip
    try:
        time.sleep(3)
        change()
        labmod.wait_until(lambda: nfs_ls(lab).returncode == 0, "the export", 120)
        time.sleep(3)
    finally:
        stop.touch()
        out, _ = writer.communicate(timeout=120)
    return dict(json.loads(out))


def test_an_export_change_keeps_clients_writing(lab):
    pid = lab.ssh("gl1", "cat /run/ganesha.pid").stdout.strip()
    wider = storage_steps(allowedClients=[f"{NET}.0/25", "10.78.0.0/24"])
    outs: list[str] = []
    result = write_through(lab, lambda: outs.append(run_step(lab, wider["gl1-nfs-config"]).stdout))
    assert "hpc: changed: updated export 1 in place (no restart, no grace period)" in outs[0]
    assert lab.ssh("gl1", "cat /run/ganesha.pid").stdout.strip() == pid
    print(f"export change in place: {result}")
    assert result["ok"] >= 10 and result["ok"] == result["writes"], result  # not one write failed
    assert result["max_gap_s"] < 2.0, result
    assert "10.78.0.0/24" in lab.ssh("gl1", "cat /etc/ganesha/ganesha.conf").stdout


def test_a_change_outside_the_export_restarts_and_says_why(lab):
    v3 = storage_steps(allowedClients=[f"{NET}.0/25", "10.78.0.0/24"], nfsVersions=[3, 4])
    v4 = storage_steps(allowedClients=[f"{NET}.0/25", "10.78.0.0/24"])
    outs: list[str] = []
    result = write_through(lab, lambda: outs.append(run_step(lab, v3["gl1-nfs-config"]).stdout))
    assert "hpc: changed: restarted nfs-ganesha: settings outside the EXPORT block changed" in outs[0]
    print(f"restart (graceless): {result}")
    assert result["max_gap_s"] > 1.0, result  # a restart is an outage: the step says so
    out = run_step(lab, v4["gl1-nfs-config"]).stdout
    assert "restarted nfs-ganesha: settings outside the EXPORT block changed" in out
    labmod.wait_until(lambda: nfs_ls(lab).returncode == 0, "the export", 30)


# ---- 5. mounts that match the stack ------------------------------------------------------------------
def test_another_volume_on_the_mount_point_is_replaced_by_the_stacks(lab, planned):
    gv1 = "/srv/bricks/gv1/brick"
    for h in HOSTS:
        lab.ssh(h, f"mkdir -p {gv1}")
    bricks = " ".join(f"{NET}.{11 + i}:{gv1}" for i in range(3))
    lab.ssh("gl1", f"gluster --mode=script volume create gv1 replica 3 {bricks}")
    lab.ssh("gl1", "gluster --mode=script volume start gv1")
    lab.ssh("gl2", f"umount /srv/gfsv && mount -t glusterfs {NET}.11:/gv1 /srv/gfsv")
    out = run_step(lab, planned["gl2-mount-fstab"]).stdout
    assert f"hpc: changed: unmounted {NET}.11:/gv1 from /srv/gfsv (the stack wants {NET}.11:/gv0)" in out
    live = lab.ssh("gl2", "findmnt -n -o SOURCE --mountpoint /srv/gfsv").stdout.strip()
    fstab = lab.ssh("gl2", "awk '$2 == \"/srv/gfsv\" { print $1 }' /etc/fstab").stdout.strip()
    assert live == fstab == f"{NET}.11:/gv0"
    assert unchanged(run_step(lab, planned["gl2-mount-fstab"]).stdout)


def test_a_foreign_filesystem_on_the_mount_point_fails_naming_both(lab, planned):
    lab.ssh("gl3", "umount /srv/gfsv && mount -t tmpfs scratch /srv/gfsv")
    try:
        proc = run_step(lab, planned["gl3-mount-fstab"], check=False)
        assert proc.returncode != 0
        assert f"/srv/gfsv on gl3 holds scratch (tmpfs), not the Gluster volume {NET}.11:/gv0" in proc.stderr
    finally:
        lab.ssh("gl3", "umount /srv/gfsv")
    assert "hpc: changed: mounted /srv/gfsv" in run_step(lab, planned["gl3-mount-fstab"]).stdout


# ---- 6. options that converge ---------------------------------------------------------------------------
def option(lab, key: str) -> str:
    return lab.ssh("gl1", f"gluster volume get gv0 {key} | awk 'NR == 3 {{ print $2 }}'").stdout.strip()


def test_options_by_alias_converge_and_removed_ones_are_reset(lab):
    extra = storage_steps(options={"cache-size": "64MB", "ping-timeout": "30"})["gv0-options"]
    first = run_step(lab, extra).stdout
    assert "hpc: changed: set performance.cache-size=64MB" in first
    assert "hpc: changed: set network.ping-timeout=30" in first  # the stack's value wins over the base's 20
    assert option(lab, "performance.cache-size") == "64MB" and option(lab, "network.ping-timeout") == "30"
    assert unchanged(run_step(lab, extra).stdout)  # no fight between the alias and the full name
    base = storage_steps()["gv0-options"]
    out = run_step(lab, base).stdout
    assert "hpc: changed: reset performance.cache-size to its default (no longer in hpc:storage.options)" in out
    assert "hpc: changed: set network.ping-timeout=20" in out
    row = lab.ssh("gl1", "gluster volume get gv0 performance.cache-size | awk 'NR == 3'").stdout
    assert "64MB" not in row and "(DEFAULT)" in row  # back to gluster's own default
    assert unchanged(run_step(lab, base).stdout)


def test_an_unknown_option_quotes_gluster(lab):
    proc = run_step(lab, storage_steps(options={"performance.no-such-option": "1"})["gv0-options"], check=False)
    assert proc.returncode != 0
    assert "gluster does not know the volume option performance.no-such-option (hpc:storage.options)" in proc.stderr


# ---- every step for a non-root user with sudo; a preflight that stops the rest -----------------------
def add_user(lab, host: str, name: str, sudo: bool) -> None:  # type: ignore[no-untyped-def]
    """A login user in the host's own /etc (home on the host's private /srv), key login only."""
    grant = f"echo '{name} ALL=(ALL) NOPASSWD:ALL' >/etc/sudoers.d/{name} && chmod 0440 /etc/sudoers.d/{name}"
    lab.on(host, ["bash", "-c", f"id {name} >/dev/null 2>&1 || useradd -m -d /srv/home-{name} -s /bin/bash {name}; "
                                f"usermod -p '*' {name}; {grant if sudo else 'true'}"])  # fmt: skip


def preflight(lab, host: str, ssh_user: str):  # type: ignore[no-untyped-def]
    from offline import plan as planmod
    from tests.integration.steps import steps
    from tests.integration.storage_stack import stack

    checks = {s.host: s for s in steps(planmod.run("dev", stack(None, ssh_user)), ("hpc:host:HostPreflight",))}
    return run_step(lab, checks[lab.hosts[host].address], check=False)


def test_every_step_runs_for_a_sudo_user_and_a_user_without_sudo_is_stopped_first(lab):
    for h in HOSTS:
        add_user(lab, h, "ops", sudo=True)
        add_user(lab, h, "nosudo", sudo=False)
    ready = preflight(lab, "gl2", "ops")
    assert ready.returncode == 0 and "hpc: gl2 is ready: Debian GNU/Linux 12 (bookworm), user ops" in ready.stdout
    as_ops = storage_steps(ssh_user="ops")
    assert all(s.user == "ops" and "sudo -n bash" in s.create for s in as_ops.values())
    for step in as_ops.values():  # every step through sudo (earlier tests left the export wider)
        run_step(lab, step)
    for name, step in as_ops.items():
        assert unchanged(run_step(lab, step).stdout), name  # and a second run through sudo changes nothing
    stopped = preflight(lab, "gl2", "nosudo")
    assert stopped.returncode != 0
    assert stopped.stderr.strip().splitlines()[-1] == (
        "hpc: error: gl2: user nosudo cannot run sudo without a password (sudo: a password is required): "
        "give it passwordless sudo or log in as root"
    )
    docker = preflight(lab, "gl1", "ops")  # gl1 runs the Slurm head's container: Docker must be there
    assert docker.returncode != 0 and "gl1: Docker is not installed or not running" in docker.stderr
