"""An external LDAP directory (hpc:identity.ldap) on real daemons: Debian's slapd on a lab host
(StartTLS with a test CA, reads only for the bound service account), the plan's directory steps on
the Slurm hosts, SSSD in the real head, worker and login containers.

A user who exists only in the directory logs in to the login node with the key the directory
holds, gets a private home on the shared volume, and runs a job on the worker as herself. The
directory cannot hand out root's, a service account's or a stack user's id, cannot shadow a stack
user, lets in only members of the allowed groups, and a wrong bind password resolves nobody
until the right one is back.
"""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import pytest

from offline.mocks import stand_in_secret
from tests.integration import docker_lab, hostkeys
from tests.integration import lab as labmod
from tests.integration.steps import run_step
from tests.integration.test_slurm import AFTER_THE_HEAD, Cluster, Planned, run_head_steps, running
from tests.integration.test_slurm import ssh_login as login

pytestmark = pytest.mark.integration
NET = "10.81.0"
HOSTS = ["head", "c1", "login", "ldap"]  # ldap: the site's directory server, not a stack host
SLURM_HOSTS = ["head", "c1", "login"]
SSH_ADDR = {h: f"{NET}.{11 + i}" for i, h in enumerate(HOSTS)}
CTR_ADDR = {h: f"{NET}.{41 + i}" for i, h in enumerate(SLURM_HOSTS)}
BASE = "dc=example,dc=org"
BIND_DN = f"cn=sssd,ou=services,{BASE}"
PASSWORD = stand_in_secret("hpc:ldapBindPassword")  # what the plan's step gets on stdin
MIN_ID, MAX_ID = 20100, 29999  # the directory's range (identity.ldap.minId/maxId)
CAROL, PHYSICS = 20101, 20201  # only in the directory
DAVE, CHEM = 20102, 20202  # in the directory, but chem may not log in (allowGroups: physics)
ALICE = 20001  # in the stack (hpc:users); the directory also has an "alice", with another uid
TOOLS = ("dockerd", "debootstrap", "/usr/sbin/sshd", "nsenter", "slapd", "slapadd", "ldapsearch", "openssl")


def stack(ca: str) -> dict[str, Any]:
    def host(name: str, roles: list[str]) -> dict[str, Any]:
        return {"name": name, "address": SSH_ADDR[name], "sshUser": "root", "hostKey": hostkeys.public(name),
                "profile": "epyc-7502p-256g", "roles": roles, "containerAddress": CTR_ADDR[name]}  # fmt: skip

    return {
        "hpc:environment": "dev",
        "hpc:network": labmod.stack_network(NET),
        "hpc:hosts": [
            host("head", ["storage", "slurm-head"]),
            host("c1", ["storage", "cpu-worker"]),
            host("login", ["login"]),
        ],
        "hpc:storage": {"replica": 2, "mountPoint": "/srv/gfsv"},
        "hpc:slurm": {
            "clusterName": "ldaptest",
            "statePath": "/srv/hpc/state",
            "dbPath": "/srv/hpc/mariadb",
            "partitions": [{"name": "cpu", "kind": "cpu", "default": True}],
        },
        "hpc:k3s": {"version": "v1.31.4+k3s1"},
        "hpc:inference": {"models": []},
        "hpc:racks": None,
        "hpc:hfToken": None,
        "hpc:groups": [{"name": "ml", "gid": 30001}],
        "hpc:users": [{"name": "alice", "uid": ALICE, "group": "ml", "sshKeys": [hostkeys.public("user-alice")]}],
        "hpc:identity": {
            "ldap": {
                "uri": [f"ldap://{SSH_ADDR['ldap']}"],
                "baseDn": BASE,
                "bindDn": BIND_DN,
                "tlsCa": ca,
                "minId": MIN_ID,
                "maxId": MAX_ID,
                "allowGroups": ["physics"],
            }
        },
        "hpc:ldapBindPassword": {"secure": "stand-in"},
    }


SLAPD_CONF = """\
include /etc/ldap/schema/core.schema
include /etc/ldap/schema/cosine.schema
include /etc/ldap/schema/nis.schema
include /etc/ldap/schema/inetorgperson.schema
# openssh-lpk, as sites that keep SSH keys in LDAP load it
attributetype ( 1.3.6.1.4.1.24552.500.1.1.1.13 NAME 'sshPublicKey' DESC 'OpenSSH public key'
  EQUALITY octetStringMatch SYNTAX 1.3.6.1.4.1.1466.115.121.1.40 )
objectclass ( 1.3.6.1.4.1.24552.500.1.1.2.0 NAME 'ldapPublicKey' SUP top AUXILIARY
  DESC 'OpenSSH LPK objectclass' MAY ( sshPublicKey $ uid ) )
pidfile {d}/slapd.pid
modulepath /usr/lib/ldap
moduleload back_mdb
TLSCACertificateFile {d}/ca.pem
TLSCertificateFile {d}/server.pem
TLSCertificateKeyFile {d}/server.key
security tls=1
database mdb
suffix "{base}"
rootdn "cn=admin,{base}"
directory {d}/db
access to attrs=userPassword by anonymous auth by * none
access to * by dn.exact="{bind}" read by * none
"""


def entry(dn: str, *attrs: tuple[str, str | int]) -> str:
    return f"dn: {dn}\n" + "".join(f"{k}: {v}\n" for k, v in attrs) + "\n"


def person(uid: str, number: int, gid: int) -> str:
    return entry(f"uid={uid},ou=people,{BASE}", ("objectClass", "inetOrgPerson"), ("objectClass", "posixAccount"),
                 ("objectClass", "ldapPublicKey"), ("uid", uid), ("cn", uid), ("sn", uid), ("uidNumber", number),
                 ("gidNumber", gid), ("homeDirectory", f"/nfs/users/{uid}"), ("loginShell", "/bin/zsh"),
                 ("sshPublicKey", hostkeys.public(f"user-{uid}")))  # fmt: skip


def directory_ldif() -> str:
    return "".join([
        entry(BASE, ("objectClass", "dcObject"), ("objectClass", "organization"), ("o", "Example"), ("dc", "example")),
        *(entry(f"ou={ou},{BASE}", ("objectClass", "organizationalUnit"), ("ou", ou))
          for ou in ("people", "groups", "services")),
        entry(BIND_DN, ("objectClass", "organizationalRole"), ("objectClass", "simpleSecurityObject"), ("cn", "sssd"),
              ("userPassword", PASSWORD)),
        person("carol", CAROL, PHYSICS),
        person("alice", 20999, PHYSICS),  # the stack's alice has uid 20001: the stack wins
        person("mallory", 0, 0),  # root's id: out of the directory's range
        person("eve", 64030, 64030),  # the slurm service account's id
        person("trudy", ALICE, PHYSICS),  # the stack's alice's uid: outside the directory's range
        person("dave", DAVE, CHEM),
        entry(f"cn=physics,ou=groups,{BASE}", ("objectClass", "posixGroup"), ("cn", "physics"), ("gidNumber", PHYSICS),
              ("memberUid", "carol")),
        entry(f"cn=chem,ou=groups,{BASE}", ("objectClass", "posixGroup"), ("cn", "chem"), ("gidNumber", CHEM),
              ("memberUid", "dave")),
    ])  # fmt: skip


def make_ca(d: Path, address: str) -> str:
    def ssl(*args: str) -> None:
        subprocess.run(["openssl", *args], check=True, capture_output=True)

    ssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2", "-subj", "/CN=hpc test CA",
        "-keyout", str(d / "ca.key"), "-out", str(d / "ca.pem"))  # fmt: skip
    ssl("req", "-newkey", "rsa:2048", "-nodes", "-subj", f"/CN={address}", "-keyout", str(d / "server.key"),
        "-out", str(d / "server.csr"))  # fmt: skip
    (d / "san.ext").write_text(f"subjectAltName=IP:{address}\n")
    ssl("x509", "-req", "-in", str(d / "server.csr"), "-CA", str(d / "ca.pem"), "-CAkey", str(d / "ca.key"),
        "-CAcreateserial", "-days", "2", "-extfile", str(d / "san.ext"), "-out", str(d / "server.pem"))  # fmt: skip
    return (d / "ca.pem").read_text()


def start_slapd(lab: labmod.Lab) -> None:
    d = lab.dir / "ldap-server"
    (d / "db").mkdir(parents=True)
    conf = d / "slapd.conf"
    conf.write_text(SLAPD_CONF.format(d=d, base=BASE, bind=BIND_DN))
    (d / "directory.ldif").write_text(directory_ldif())
    lab.on("ldap", ["slapadd", "-f", str(conf), "-l", str(d / "directory.ldif")])
    lab.on("ldap", ["slapd", "-h", f"ldap://{SSH_ADDR['ldap']}/", "-f", str(conf)])
    search = ["ldapsearch", "-LLL", "-ZZ", "-H", f"ldap://{SSH_ADDR['ldap']}", "-D", BIND_DN, "-w", PASSWORD,
              "-b", BASE, "uid=carol", "uidNumber"]  # fmt: skip
    env = f"LDAPTLS_CACERT={d / 'ca.pem'}"
    labmod.wait_until(lambda: "20101" in lab.on("ldap", ["env", env, *search], check=False).stdout, "slapd", 30)
    anonymous = lab.on("ldap", ["env", env, *search[:6], *search[10:]], check=False).stdout
    assert "uidNumber" not in anonymous  # the directory answers only the bound service account


@pytest.fixture(scope="module")
def directory_cluster(tmp_path_factory):
    labmod.require(*TOOLS)
    builder = docker_lab.Builder(tmp_path_factory.mktemp("builder"))
    lab = labmod.Lab(HOSTS, net=NET)
    c = Cluster(lab, builder, SLURM_HOSTS, CTR_ADDR["login"])
    with running(c, builder):
        (lab.dir / "ldap-server").mkdir()
        ca = make_ca(lab.dir / "ldap-server", SSH_ADDR["ldap"])
        start_slapd(lab)
        planned = Planned(0, config=stack(ca))
        c.prepare()
        for host in SLURM_HOSTS:
            run_step(lab, planned.steps[f"{host}-accounts"])
        run_head_steps(lab, planned)  # slurm.conf with config_overrides: the lab is not the profile
        c1 = ("c1-munge-key-file", "c1-directory", "c1-health-check", "c1-gpu-prolog", "c1-gpu-epilog")
        for name in (*c1, "login-munge-key-file", "login-directory"):
            run_step(lab, planned.steps[name])
        c.deploy(planned, "head")
        labmod.wait_until(lambda: c.in_head("scontrol ping")[1].count("is UP") == 1, "slurmctld", 120)
        c.deploy(planned, "c1")
        labmod.wait_until(lambda: c.idle() == {"c1"}, "c1 idle", 120)
        for name in ("head-homes", *AFTER_THE_HEAD):
            run_step(lab, planned.steps[name])
        c.deploy(planned, "login")
        labmod.wait_until(lambda: c.daemons["login"].health("slurm-login") == "healthy", "the login node", 150)
        yield c, planned


def test_a_directory_only_user_logs_in_with_the_directory_key_and_runs_a_job(directory_cluster):
    c, _ = directory_cluster
    who = login(c, "carol", "id -un; id -u; id -gn; pwd; echo $SHELL")
    assert who.returncode == 0, who.stderr
    assert who.stdout.split() == ["carol", str(CAROL), "physics", "/home/carol", "/bin/bash"]
    home = c.shared / "home" / "carol"  # made at first login on the shared volume, private
    assert (home.stat().st_uid, oct(home.stat().st_mode & 0o777)) == (CAROL, "0o700")
    sub = login(c, "carol", "sbatch --parsable -o job-%j.out --wrap 'id -un; id -u; hostname'")
    assert sub.returncode == 0, sub.stderr
    out = home / f"job-{sub.stdout.strip()}.out"
    labmod.wait_until(lambda: out.exists() and out.read_text().count("\n") >= 3, "carol's job output", 90)
    assert out.read_text().split() == ["carol", str(CAROL), "c1"]  # the worker resolved her too
    assert out.stat().st_uid == CAROL
    labmod.wait_until(
        lambda: c.in_head(f"sacct -a -n -X -P -j {sub.stdout.strip()} -o User,State")[1].strip() == "carol|COMPLETED",
        "sacct to show carol's job",
        60,
    )


def test_the_stack_wins_over_the_directory_and_keys_stay_per_user(directory_cluster):
    c, _ = directory_cluster
    who = login(c, "alice", "id -u")
    assert who.returncode == 0 and who.stdout.strip() == str(ALICE), who.stderr  # hpc:users, not the directory
    code, out = c.daemons["c1"].exec("slurm-worker", "id -u alice")
    assert (code, out.strip()) == (0, str(ALICE))


def test_the_directory_cannot_hand_out_root_or_a_service_accounts_or_a_stack_users_id(directory_cluster):
    c, _ = directory_cluster
    for user in ("mallory", "eve", "trudy"):
        assert login(c, user, "id").returncode == 255, user  # no such user here, whatever its key
        for host, container in (("login", "slurm-login"), ("c1", "slurm-worker"), ("head", "slurm-head")):
            code, out = c.daemons[host].exec(container, f"getent passwd {user}")
            assert code != 0 and out.strip() == "", (host, user, out)
    code, out = c.daemons["c1"].exec("slurm-worker", f"getent passwd 0 64030 {ALICE}")
    assert [line.split(":")[0] for line in out.splitlines()] == ["root", "slurm", "alice"]


def test_only_the_allowed_groups_log_in(directory_cluster):
    """dave is a directory user (resolved everywhere, in range) whose group may not log in: his
    own key is accepted, then SSSD's access provider refuses the account (PAM) and sshd closes
    the connection; carol, in physics, gets in."""
    c, _ = directory_cluster
    code, out = c.daemons["login"].exec("slurm-login", "getent passwd dave")
    assert code == 0 and out.split(":")[2] == str(DAVE), out
    denied = login(c, "dave", "id -un")
    assert denied.returncode == 255 and "Connection closed" in denied.stderr, denied  # key accepted, account refused
    log = c.daemons["login"].api.logs("slurm-login").decode()
    assert "Access denied for user dave by PAM account configuration" in log, log[-2000:]
    assert "dave" not in denied.stdout
    assert login(c, "carol", "id -un").stdout.strip() == "carol"


def test_a_wrong_bind_password_resolves_nobody_until_the_right_one_is_back(directory_cluster):
    c, planned = directory_cluster
    step = planned.steps["login-directory"]
    assert run_step(c.lab, step).stdout.rstrip().endswith("hpc: result=unchanged")  # idempotent
    wrong = c.lab.ssh("login", step.create, stdin="not-the-password", host_key=step.host_key).stdout
    assert "restarted slurm-login" in wrong
    labmod.wait_until(lambda: c.daemons["login"].health("slurm-login") == "healthy", "the login node", 150)
    code, out = c.daemons["login"].exec("slurm-login", "getent passwd carol")
    assert code != 0 and out.strip() == ""
    assert login(c, "carol", "true").returncode == 255
    assert login(c, "alice", "true").returncode == 0  # the stack's users do not depend on the directory
    right = run_step(c.lab, step).stdout
    assert "restarted slurm-login" in right
    labmod.wait_until(lambda: c.daemons["login"].health("slurm-login") == "healthy", "the login node", 150)
    labmod.wait_until(lambda: login(c, "carol", "true").returncode == 0, "carol back", 60)
