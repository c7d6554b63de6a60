"""An external LDAP directory (hpc:identity.ldap): config rules, sssd.conf, the per-host step."""

import pytest

from components.people import sssd
from offline import plan
from offline.mocks import plain
from stacks.config import ConfigError

CA = "-----BEGIN CERTIFICATE-----\nMIIBszCCAVmgAwIBAgIU\n-----END CERTIFICATE-----"
LDAP = {
    "uri": ["ldap://ldap1.example.org", "ldaps://ldap2.example.org:636"],
    "baseDn": "dc=example,dc=org",
    "bindDn": "cn=sssd,ou=services,dc=example,dc=org",
    "tlsCa": CA,
}
SLURM_HOSTS = ("rpi1", "rpi2", "rpi3")  # dev: the Slurm head and its two CPU workers


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
        ({**LDAP, "uri": ["http://ldap.example.org"]}, "hpc:identity.ldap.uri[0]", "should match pattern"),
        ({**LDAP, "uri": []}, "hpc:identity.ldap.uri", "at least 1"),
        ({k: v for k, v in LDAP.items() if k != "tlsCa"}, "hpc:identity.ldap.tlsCa", "missing"),
        ({**LDAP, "tlsCa": "not a cert"}, "hpc:identity.ldap.tlsCa", "not a PEM certificate"),
        ({**LDAP, "baseDn": "example.org"}, "hpc:identity.ldap.baseDn", "should match pattern"),
        ({**LDAP, "bindUser": "x"}, "hpc:identity.ldap.bindUser", "unknown config key"),
    ],
)
def test_bad_directory_settings_name_the_key(ldap, key, fragment):
    found = problems(with_ldap(ldap))
    assert key in found and fragment in found[key], found


def test_a_bind_dn_needs_its_password_and_a_password_needs_a_bind_dn():
    assert "required secret is missing" in problems(with_ldap(password=None))["hpc:ldapBindPassword"]
    anonymous = {k: v for k, v in LDAP.items() if k != "bindDn"}
    assert "only with hpc:identity.ldap.bindDn" in problems(with_ldap(anonymous))["hpc:ldapBindPassword"]
    plan.run("dev", with_ldap(anonymous, password=None))  # anonymous: no password, fine


def test_sssd_conf_keeps_the_directory_away_from_system_ids_and_requires_tls():
    d = sssd.Directory(("ldap://a", "ldaps://b"), "dc=x", "cn=s,dc=x", CA + "\n", "sshPublicKey")
    conf = sssd.sssd_conf(d)
    lines = dict(line.split(" = ", 1) for line in conf.splitlines() if " = " in line)
    assert lines["min_id"] == "1000" and lines["max_id"] == "59999"
    assert lines["ldap_tls_reqcert"] == "demand" and lines["ldap_id_use_start_tls"] == "true"
    assert lines["ldap_default_authtok"] == sssd.PASSWORD_PLACEHOLDER
    assert lines["auth_provider"] == "none"  # no password is ever checked: logins stay key-only
    assert "root" in lines["filter_users"] and "slurm" in lines["filter_users"]
    assert lines["services"] == "nss, pam, ssh" and lines["ldap_user_ssh_public_key"] == "sshPublicKey"
    only_ldaps = sssd.sssd_conf(sssd.Directory(("ldaps://b",), "dc=x", None, CA, None))
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
