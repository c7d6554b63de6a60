"""An external LDAP directory (hpc:identity.ldap): config rules, sssd.conf, the per-host step."""

import datetime as dt

import pytest

from components.people import sssd
from offline import plan
from offline.mocks import plain
from stacks.config import ConfigError


def make_ca(days: int = 365) -> tuple[str, str]:
    """A real self-signed CA (PEM) and its private key (PEM), valid ``days`` from now (negative: expired)."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "lab directory CA")])
    now = dt.datetime.now(dt.UTC)
    cert = (
        x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(days=400)).not_valid_after(now + dt.timedelta(days=days))
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )  # fmt: skip
    pem = cert.public_bytes(serialization.Encoding.PEM).decode().strip()
    private = key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    ).decode().strip()  # fmt: skip
    return pem, private


CA, CA_KEY = make_ca()
EXPIRED, _ = make_ca(days=-1)
LDAP = {
    "uri": ["ldap://ldap1.example.org", "ldaps://ldap2.example.org:636"],
    "baseDn": "dc=example,dc=org",
    "bindDn": "cn=sssd,ou=services,dc=example,dc=org",
    "tlsCa": CA,
    "allowGroups": ["physics", "hpc-users"],
    "minId": 30000,  # apart from the dev stack's example users (20001, 20002) and group (20000)
    "maxId": 39999,
}
SLURM_HOSTS = ("rpi1", "rpi2", "rpi3", "login1")  # dev: the Slurm head, its two CPU workers, the login node


def with_ldap(ldap=None, password="s3cr3t-bind&pw"):
    over = {"hpc:identity": {"ldap": ldap or LDAP}}
    if password is not None:
        over["hpc:ldapBindPassword"] = {"secure": password}
    return over


def problems(overrides):
    with pytest.raises(ConfigError) as err:
        plan.run("dev", overrides)
    assert err.value.registered == []
    return dict(err.value.problems)


@pytest.mark.parametrize(
    ("ldap", "key", "fragment"),
    [
        ({**LDAP, "uri": ["http://ldap.example.org"]}, "hpc:identity.ldap.uri[0]", "an LDAP URI is ldap://host"),
        ({**LDAP, "uri": ["ldaps://ldap.example.org:99999"]}, "hpc:identity.ldap.uri[0]", "not a TCP port"),
        ({**LDAP, "uri": []}, "hpc:identity.ldap.uri", "at least 1"),
        ({k: v for k, v in LDAP.items() if k != "tlsCa"}, "hpc:identity.ldap.tlsCa", "missing"),
        ({**LDAP, "tlsCa": "not a cert"}, "hpc:identity.ldap.tlsCa", "not a PEM certificate"),
        ({**LDAP, "baseDn": "example.org"}, "hpc:identity.ldap.baseDn", "a distinguished name is"),
        ({**LDAP, "tlsCa": CA + "\n" + CA_KEY}, "hpc:identity.ldap.tlsCa", "block 2 is a PRIVATE KEY"),
        ({**LDAP, "tlsCa": EXPIRED}, "hpc:identity.ldap.tlsCa", "expired on"),
        ({**LDAP, "tlsCa": CA.replace(CA.splitlines()[3], CA.splitlines()[3][::-1])}, "hpc:identity.ldap.tlsCa",
         "damaged"),
        ({**LDAP, "bindUser": "x"}, "hpc:identity.ldap.bindUser", "unknown config key"),
        ({k: v for k, v in LDAP.items() if k != "allowGroups"}, "hpc:identity.ldap.allowGroups", "missing"),
        ({**LDAP, "allowGroups": []}, "hpc:identity.ldap.allowGroups", "at least 1"),
        ({**LDAP, "allowGroups": ["a,b"]}, "hpc:identity.ldap.allowGroups[0]", "a directory group name"),
        ({**LDAP, "minId": 30000, "maxId": 20000}, "hpc:identity.ldap.minId", "above maxId 20000"),
        ({**LDAP, "minId": 999}, "hpc:identity.ldap.minId", "1000"),
    ],
)
def test_bad_directory_settings_name_the_key(ldap, key, fragment):
    found = problems(with_ldap(ldap))
    assert key in found and fragment in found[key], found


def test_a_private_key_in_the_ca_bundle_is_never_echoed():
    found = problems(with_ldap({**LDAP, "tlsCa": CA + "\n" + CA_KEY}))
    body = CA_KEY.splitlines()[1]
    assert body[:20] not in " ".join(found.values())


def test_stack_ids_the_directory_range_and_the_volume_owner_are_disjoint():
    people = {
        "hpc:groups": [{"name": "ml", "gid": 30001}],
        "hpc:users": [{"name": "alice", "uid": 20001, "group": "ml"}],
    }
    default_range = {k: v for k, v in LDAP.items() if k not in ("minId", "maxId")}
    wide = problems({**with_ldap(default_range), **people})  # the default range: all of 1000-59999
    assert wide["hpc:users[alice].uid"] == (
        "uid 20001 is inside the directory's range identity.ldap.minId-maxId (1000-59999): move it or narrow the range"
    )
    assert "gid 30001 is inside" in wide["hpc:groups[ml].gid"]
    narrow = with_ldap({**LDAP, "minId": 40000, "maxId": 49999})
    plan.run("dev", {**narrow, **people})
    owned = problems({**narrow, **people, "hpc:storage": {"ownerUid": 20001}})
    assert owned == {"hpc:storage.ownerUid": "uid 20001 is user alice's: that user would own the volume root; "
                     "leave it 0 (root)"}  # fmt: skip
    in_range = problems({**narrow, "hpc:storage": {"ownerUid": 40001, "ownerGid": 40001}})
    assert set(in_range) == {"hpc:storage.ownerUid", "hpc:storage.ownerGid"}


def test_a_bind_dn_needs_its_password_and_a_password_needs_a_bind_dn():
    assert "required secret is missing" in problems(with_ldap(password=None))["hpc:ldapBindPassword"]
    anonymous = {k: v for k, v in LDAP.items() if k != "bindDn"}
    assert "only with hpc:identity.ldap.bindDn" in problems(with_ldap(anonymous))["hpc:ldapBindPassword"]
    plan.run("dev", with_ldap(anonymous, password=None))  # anonymous: no password, fine


def test_sssd_conf_keeps_the_directory_away_from_system_ids_and_requires_tls():
    d = sssd.Directory(
        ("ldap://a", "ldaps://b"), "dc=x", "cn=s,dc=x", CA + "\n", "sshPublicKey", (20100, 29999), ("physics", "ml")
    )
    conf = sssd.sssd_conf(d)
    lines = dict(line.split(" = ", 1) for line in conf.splitlines() if " = " in line)
    assert lines["min_id"] == "20100" and lines["max_id"] == "29999"
    assert lines["access_provider"] == "simple" and lines["simple_allow_groups"] == "physics, ml"
    assert lines["ldap_tls_reqcert"] == "demand" and lines["ldap_id_use_start_tls"] == "true"
    assert lines["ldap_default_authtok"] == sssd.PASSWORD_PLACEHOLDER
    assert lines["auth_provider"] == "none"  # no password is ever checked: logins stay key-only
    assert "root" in lines["filter_users"] and "slurm" in lines["filter_users"]
    assert lines["services"] == "nss, pam, ssh" and lines["ldap_user_ssh_public_key"] == "sshPublicKey"
    only_ldaps = sssd.sssd_conf(sssd.Directory(("ldaps://b",), "dc=x", None, CA, None, (1000, 59999), ("ml",)))
    assert "ldap_id_use_start_tls = false" in only_ldaps
    assert "authtok" not in only_ldaps and "ssh" not in only_ldaps.split("[nss]")[0]


def test_every_slurm_host_gets_the_directory_step_and_its_containers_the_settings():
    result = plan.run("dev", with_ldap())
    steps = {r.name: r for r in result.of_type("command:remote:Command") if r.name.endswith("-directory")}
    assert set(steps) == {f"{h}-directory" for h in SLURM_HOSTS}
    for r in steps.values():
        assert "stdin" in r.secret_inputs()  # the bind password, and only through stdin
        create = plain(r.inputs["create"])
        assert sssd.PASSWORD_PLACEHOLDER in create and "s3cr3t" not in create
    for c in result.of_type("docker:index/container:Container"):
        volumes = plain(c.inputs.get("volumes")) or []
        assert any(v["containerPath"] == sssd.SSSD_CONTAINER_DIR and v["readOnly"] for v in volumes), c.name
        assert any(d.endswith("-directory") for d in (result.records[u].name for u in c.dependencies)), c.name


def test_without_a_directory_nothing_changes():
    result = plan.run("dev")
    assert not [r for r in result.resources if r.name.endswith("-directory")]
    for c in result.of_type("docker:index/container:Container"):
        assert all(v["containerPath"] != sssd.SSSD_CONTAINER_DIR for v in plain(c.inputs.get("volumes")) or [])
