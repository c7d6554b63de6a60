"""The storage tier on real daemons: the plan's own scripts, over real SSH, on three hosts.

Three storage hosts (network + mount namespaces with sshd, glusterd, NFS-Ganesha) and two NFS
clients: one inside the allowed network, one outside it. Tests run in file order on one lab."""

from __future__ import annotations

import json
import shlex
import subprocess
import time

import pytest

from tests.integration import hostkeys
from tests.integration.lab import wait_until
from tests.integration.steps import Step, run_step
from tests.integration.storage_stack import NET, stack, storage_lab, storage_steps

pytestmark = pytest.mark.integration

@pytest.fixture(scope="module")
def lab():
    # cl: an allowed client host; out: outside allowedClients; ctr: an address in the container range
    yield from storage_lab({"cl": f"{NET}.2", "out": f"{NET}.200", "ctr": f"{NET}.242"})


@pytest.fixture(scope="module")
def planned():
    return storage_steps()


def run_all(lab, planned: dict[str, Step]) -> dict[str, str]:
    return {name: run_step(lab, s).stdout for name, s in planned.items()}


def ganesha_pid(lab) -> str:
    return lab.ssh("gl1", "cat /run/ganesha.pid").stdout.strip()


def test_plan_orders_the_storage_steps(planned):
    order = list(planned)
    assert order.index("gv0-peers") > max(order.index(f"gl{i}-glusterd") for i in (1, 2, 3))
    assert order.index("gv0-volume") > max(order.index(f"gl{i}-brick") for i in (1, 2, 3))
    assert order.index("gl1-nfs-config") > order.index("gv0-options")
    assert all(order.index(f"gl{i}-mount-fstab") > order.index("gv0-options") for i in (1, 2, 3))


def test_first_run_builds_a_started_replica_3_volume(lab, planned):
    outputs = run_all(lab, planned)
    assert "hpc: changed: created volume gv0 (replica 3)" in outputs["gv0-volume"]
    info = lab.ssh("gl2", "gluster volume info gv0").stdout
    assert "Status: Started" in info and "Type: Replicate" in info
    assert "Number of Bricks: 1 x 3 = 3" in info
    bricks = [line.split(": ", 1)[1] for line in info.splitlines() if line.startswith("Brick") and ": " in line]
    assert bricks == [f"{NET}.{11 + i}:/srv/bricks/gv0/brick" for i in range(3)]
    status = lab.ssh("gl3", "gluster volume status gv0 detail").stdout
    assert status.count("Online               : Y") == 3
    opts = lab.ssh("gl1", "gluster volume get gv0 all").stdout
    assert "cluster.server-quorum-type               server" in opts
    for h in ("gl1", "gl2", "gl3"):
        shared = lab.ssh(h, "mountpoint -q /srv/gfsv && stat -c '%a %u:%g' /srv/gfsv/home").stdout.strip()
        assert shared == "755 0:0"  # the shared layout: homes (root's, each home its user's)
        fstab = lab.ssh(h, "cat /etc/fstab").stdout
        assert "backup-volfile-servers=10.77.0.12:10.77.0.13" in fstab
        assert ",x-systemd.requires=glusterd.service 0 0" in fstab  # a server: its own glusterd first
        # Docker (installed on this machine, so in every lab host's view) starts after the mount
        dropin = "/etc/systemd/system/docker.service.d/10-hpc-shared-volume.conf"
        assert lab.ssh(h, f"cat {dropin}").stdout == "[Unit]\nRequiresMountsFor=/srv/gfsv\n"


def test_second_run_changes_nothing(lab, planned):
    pid = ganesha_pid(lab)
    for name, out in run_all(lab, planned).items():
        assert out.rstrip().endswith("hpc: result=unchanged"), f"{name}:\n{out}"
    assert ganesha_pid(lab) == pid
    assert lab.ssh("gl1", "grep -c /srv/gfsv /etc/fstab").stdout.strip() == "1"


def test_the_volume_root_is_roots_and_the_mount_step_puts_it_back(lab, planned):
    """Whoever owns the volume root can swap any home (issue 26): it is 0:0 0755 on every host,
    and a root made a user's (or world-writable) is put back by the next mount step."""
    for h in ("gl1", "gl2", "gl3"):
        assert lab.ssh(h, "stat -c '%a %u:%g' /srv/gfsv").stdout.strip() == "755 0:0", h
    lab.ssh("gl1", "chown 1000:1000 /srv/gfsv && chmod 0777 /srv/gfsv")
    try:
        # one volume: gl2's FUSE client sees it once its cached attributes expire (md-cache, ~1 s)
        wait_until(
            lambda: lab.ssh("gl2", "stat -c '%a %u:%g' /srv/gfsv").stdout.strip() == "777 1000:1000",
            "gl2 sees the root gl1 changed",
            timeout=30,
        )
        out = run_step(lab, planned["gl2-mount-fstab"]).stdout
    except BaseException:  # a failure here must not leave a world-writable root to the tests after it
        lab.ssh("gl1", "chown 0:0 /srv/gfsv && chmod 0755 /srv/gfsv")
        raise
    assert "hpc: changed: set mode 0755 owner 0:0 on /srv/gfsv" in out
    wait_until(
        lambda: lab.ssh("gl3", "stat -c '%a %u:%g' /srv/gfsv").stdout.strip() == "755 0:0",
        "gl3 sees the root put back",
        timeout=30,
    )
    assert run_step(lab, planned["gl1-mount-fstab"]).stdout.rstrip().endswith("hpc: result=unchanged")


# Every way a process can write a file or replace it, for strace's fault injection.
WRITES = "write,writev,pwrite64,pwritev,pwritev2,sendfile,copy_file_range,splice,rename,renameat,renameat2"


def test_a_mount_step_killed_while_it_rewrites_fstab_leaves_the_old_fstab(lab, planned):
    """fstab is read at boot: a crash mid-write must not leave it truncated (issue 28). strace
    kills the step at the first syscall that writes to /etc/fstab or renames a file over it: an
    in-place rewrite dies with fstab truncated, an atomic one with the old fstab whole."""
    site = "/dev/vdz9 /data ext4 defaults 0 2"
    lab.ssh("gl3", f"sed -i 's/,backup-volfile-servers=[^, ]*//' /etc/fstab && echo '{site}' >>/etc/fstab")
    before = lab.ssh("gl3", "cat /etc/fstab").stdout
    assert "backup-volfile-servers" not in before  # the drift the step will put right
    step = planned["gl3-mount-fstab"]
    trace = f"strace -f -qq -o /tmp/fstab-kill.log -P /etc/fstab -e trace={WRITES} -e inject={WRITES}:signal=KILL"
    killed = lab.ssh("gl3", f"{trace} bash -c {shlex.quote(step.create)}", check=False)
    assert killed.returncode != 0, killed.stdout
    log = lab.ssh("gl3", "cat /tmp/fstab-kill.log").stdout
    assert "rename" in log and "+++ killed by SIGKILL +++" in log, log  # killed as it replaced the file
    assert lab.ssh("gl3", "cat /etc/fstab").stdout == before
    assert lab.ssh("gl3", "mountpoint -q /srv/gfsv").returncode == 0  # the live mount untouched
    assert lab.ssh("gl3", "ls -A /etc | grep -c '^.fstab.hpc-new.'").stdout.strip() == "1"  # what it left
    # The next run puts the entry right, keeps the site's line, and removes what the killed one left.
    out = run_step(lab, step).stdout
    assert "hpc: changed: fstab entry for /srv/gfsv" in out
    after = lab.ssh("gl3", "cat /etc/fstab").stdout
    assert site in after and "backup-volfile-servers=10.77.0.12:10.77.0.13" in after
    assert lab.ssh("gl3", "ls -A /etc | grep -c '^.fstab.hpc-new.'", check=False).stdout.strip() == "0"
    lab.ssh("gl3", f"sed -i '\\|^{site}$|d' /etc/fstab")
    assert run_step(lab, step).stdout.rstrip().endswith("hpc: result=unchanged")


def test_nfs_write_from_allowed_client_is_readable_on_another_host(lab):
    lab.ssh("gl1", "install -d -o 1000 -g 1000 -m 0755 /srv/gfsv/lab")  # the root is root's: a user's dir
    url = f"nfs://{NET}.11/gv/lab/hello.txt?version=4&uid=1000&gid=1000"
    src = lab.dir / "hello.txt"
    src.write_text("written through NFS-Ganesha\n")
    proc = lab.in_client("cl", ["nfs-cp", str(src), url])
    assert proc.returncode == 0, proc.stderr
    assert lab.ssh("gl2", "cat /srv/gfsv/lab/hello.txt").stdout == "written through NFS-Ganesha\n"
    for h in ("gl1", "gl2", "gl3"):  # replicated to every brick, owned by the client's uid
        assert lab.ssh(h, "stat -c %u /srv/bricks/gv0/brick/lab/hello.txt").stdout.strip() == "1000"


def test_root_is_squashed(lab):
    src = lab.dir / "root.txt"
    src.write_text("root\n")
    proc = lab.in_client("cl", ["nfs-cp", str(src), f"nfs://{NET}.11/gv/root.txt?version=4"])
    assert proc.returncode != 0
    assert lab.ssh("gl1", "test ! -e /srv/gfsv/root.txt", check=False).returncode == 0


def test_client_outside_allowed_network_is_refused(lab):
    inside = lab.in_client("cl", ["nfs-ls", f"nfs://{NET}.11/gv/lab/?version=4"])
    assert inside.returncode == 0 and "hello.txt" in inside.stdout
    outside = lab.in_client("out", ["nfs-ls", f"nfs://{NET}.11/gv/lab/?version=4"])
    assert outside.returncode != 0
    assert "hello.txt" not in outside.stdout


def test_the_container_range_and_unprivileged_users_cannot_reach_the_volume(lab):
    """A job or a pod (container range) could claim any uid with a user-space client; so could an
    unprivileged user on a host. Neither may mount the volume, over NFS or natively."""
    url = f"nfs://{NET}.11/gv/lab/?version=4&uid=1000&gid=1000"
    assert lab.in_client("cl", ["nfs-ls", url]).returncode == 0  # root on an allowed host
    ctr = lab.in_client("ctr", ["nfs-ls", url])
    assert ctr.returncode != 0 and "hello.txt" not in ctr.stdout
    user = lab.in_client("cl", ["runuser", "-u", "nobody", "--", "nfs-ls", url])
    assert user.returncode != 0 and "hello.txt" not in user.stdout  # PrivilegedPort
    mnt = lab.dir / "ctr-mnt"
    mnt.mkdir()
    fuse = lab.in_client("ctr", ["unshare", "-m", "sh", "-c",
                                 f"mount -t glusterfs {NET}.11:/gv0 {mnt}; cat {mnt}/lab/hello.txt"])  # fmt: skip
    assert fuse.returncode != 0 and "written through" not in fuse.stdout, fuse.stdout
    opts = lab.ssh("gl1", "gluster volume get gv0 auth.allow").stdout
    assert f"{NET}.11,{NET}.12,{NET}.13" in opts


NATIVE_READ = """
m=$(mktemp -d); glusterfs -N --volfile-server={server} --volfile-id=gv0 {flags} "$m" & pid=$!
for _ in $(seq 100); do mountpoint -q "$m" && break; sleep 0.1; done
rc=0; timeout 30 cat "$m/lab/hello.txt" || rc=$?
umount "$m" 2>/dev/null || kill "$pid"; wait "$pid" || true; rmdir "$m"; exit "$rc"
"""


def native_read(lab, host: str, flags: str = ""):  # type: ignore[no-untyped-def]
    """Read hello.txt through a native (FUSE) client of its own, in a private mount namespace."""
    body = NATIVE_READ.format(server=f"{NET}.11", flags=flags)
    return lab.on(host, ["unshare", "-m", "bash", "-c", body], check=False)


def test_a_native_client_bound_to_an_unprivileged_port_is_refused(lab):
    """server.allow-insecure off: on an allowed host, root's native client (privileged source
    port) reads the volume; the same client bound to an unprivileged port, as any user's own
    client would be, is refused by every brick."""
    assert "off" in lab.ssh("gl1", "gluster volume get gv0 server.allow-insecure").stdout
    ok = native_read(lab, "gl2")
    assert ok.returncode == 0 and ok.stdout == "written through NFS-Ganesha\n", ok.stdout + ok.stderr
    refused = native_read(lab, "gl2", "--client-bind-insecure")
    assert refused.returncode != 0 and "written through" not in refused.stdout, refused.stdout
    logs = lab.ssh("gl1", "cat /var/log/glusterfs/bricks/*.log").stdout
    assert "not privileged" in logs, logs[-2000:]


def restart_sshd(lab, host: str, key) -> None:  # type: ignore[no-untyped-def]
    lab.on(host, ["bash", "-c", "kill $(cat /run/sshd-lab.pid); while [ -e /run/sshd-lab.pid ]; do sleep 0.1; done"])
    sshd = ["/usr/sbin/sshd", "-f", str(lab.dir / "sshd_config"), "-E", str(lab.dir / "sshd2.log")]
    lab.on(host, [*sshd, "-h", str(key)])


def docker_ssh_opts(**stack_changes) -> list[str]:  # type: ignore[no-untyped-def]
    """The ssh options the plan gives gl1's Docker provider (its inputs arrive JSON-encoded)."""
    from offline import plan as planmod

    cfg = stack() | stack_changes
    provider = next(r for r in planmod.run("dev", cfg).resources if r.name == "gl1-docker")
    return list(json.loads(provider.inputs["sshOpts"]))


def test_a_host_answering_with_another_key_is_refused(lab, planned):
    step = planned["gl2-glusterd"]
    assert step.host_key == hostkeys.public("gl2")  # pinned in the plan, from the stack's hostKey
    restart_sshd(lab, "gl2", hostkeys.key_file("gl2", "impostor"))
    try:
        proc = run_step(lab, step, check=False)
        assert proc.returncode != 0 and "Host key verification failed." in proc.stderr
    finally:
        restart_sshd(lab, "gl2", hostkeys.key_file("gl2"))
    assert run_step(lab, step).returncode == 0
    # The Docker provider's OpenSSH client, with exactly the options the plan records.
    ssh = ["ip", "netns", "exec", f"{lab.prefix}-cl", "ssh", "-i", str(lab.dir / "client_key")]
    good = subprocess.run([*ssh, *docker_ssh_opts(), f"root@{NET}.11", "true"], capture_output=True, text=True)
    assert good.returncode == 0, good.stderr
    hosts = json.loads(json.dumps(stack()["hpc:hosts"]))
    hosts[0]["hostKey"] = hostkeys.public("gl1", "impostor")
    bad = subprocess.run([*ssh, *docker_ssh_opts(**{"hpc:hosts": hosts}), f"root@{NET}.11", "true"],
                         capture_output=True, text=True)  # fmt: skip
    assert bad.returncode != 0 and "Host key verification failed." in bad.stderr


def test_an_export_change_is_applied_without_a_restart(lab, planned):
    pid = ganesha_pid(lab)
    changed = storage_steps(allowedClients=[f"{NET}.0/25", "10.78.0.0/24"])
    assert changed["gl1-nfs-config"].stdin != planned["gl1-nfs-config"].stdin
    out = run_step(lab, changed["gl1-nfs-config"]).stdout
    assert "hpc: changed: updated export 1 in place (no restart, no grace period)" in out
    assert ganesha_pid(lab) == pid
    assert "10.78.0.0/24" in lab.ssh("gl1", "cat /etc/ganesha/ganesha.conf").stdout
    again = run_step(lab, changed["gl1-nfs-config"]).stdout
    assert again.rstrip().endswith("hpc: result=unchanged")


def test_existing_volume_with_other_bricks_fails_loudly_and_is_untouched(lab):
    before = lab.ssh("gl1", "gluster volume info gv0").stdout
    other = storage_steps(brickPath="/srv/bricks/other/brick")
    proc = run_step(lab, other["gv0-volume"], check=False)
    assert proc.returncode != 0
    assert "refusing to change it" in proc.stderr
    assert f"{NET}.11:/srv/bricks/gv0/brick" in proc.stderr  # says what exists
    assert lab.ssh("gl1", "gluster volume info gv0").stdout == before


def test_stopped_storage_host_gives_a_clear_error_quickly(lab):
    steps_gv1 = storage_steps(volume="gv1", brickPath="/srv/bricks/gv1/brick")
    for i in (1, 2, 3):
        run_step(lab, steps_gv1[f"gl{i}-brick"])
    lab.ssh("gl3", "systemctl stop glusterd")
    try:
        started = time.monotonic()
        proc = run_step(lab, steps_gv1["gv1-volume"], check=False)
        elapsed = time.monotonic() - started
        assert proc.returncode != 0
        assert "cannot create volume gv1: not every brick host is connected to the trusted pool" in proc.stderr
        assert f"{NET}.13 is Disconnected" in proc.stderr  # names the peer, no guessed hint
        assert elapsed < 90, f"took {elapsed:.0f}s"
        assert lab.ssh("gl1", "gluster volume info gv1", check=False).returncode != 0
    finally:
        out = run_step(lab, storage_steps()["gl3-glusterd"]).stdout
        assert "hpc: changed: started glusterd" in out
        run_step(lab, storage_steps()["gv0-peers"])  # waits until the pool is connected again


def test_delete_scripts_undo_create_but_keep_the_data(lab, planned):
    for step in reversed(list(planned.values())):
        run_step(lab, step, delete=True)
    for h in ("gl1", "gl2", "gl3"):
        assert lab.ssh(h, "mountpoint -q /srv/gfsv", check=False).returncode != 0
        assert "/srv/gfsv" not in lab.ssh(h, "cat /etc/fstab").stdout
        assert lab.ssh(h, "systemctl is-active glusterd", check=False).returncode != 0
        assert lab.ssh(h, "cat /srv/bricks/gv0/brick/lab/hello.txt").stdout == "written through NFS-Ganesha\n"
    assert lab.ssh("gl1", "systemctl is-active nfs-ganesha", check=False).returncode != 0
    assert lab.ssh("gl1", "test -e /etc/ganesha/ganesha.conf", check=False).returncode != 0
    # The volume definition survives too: bring glusterd back and it is still there.
    for i in (1, 2, 3):
        run_step(lab, planned[f"gl{i}-glusterd"])
    assert "Volume Name: gv0" in lab.ssh("gl1", "gluster volume info gv0").stdout


def test_delete_with_destruction_allowed_removes_volume_and_bricks(lab):
    allowed = storage_steps(allowDestroy=True)
    run_step(lab, allowed["gv0-peers"])
    out = run_step(lab, allowed["gv0-volume"], delete=True).stdout
    assert "hpc: changed: deleted volume gv0" in out
    assert lab.ssh("gl1", "gluster volume info gv0", check=False).returncode != 0
    for i in (1, 2, 3):
        run_step(lab, allowed[f"gl{i}-brick"], delete=True)
        assert lab.ssh(f"gl{i}", "test -e /srv/bricks/gv0/brick", check=False).returncode != 0
