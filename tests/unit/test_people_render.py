"""The host accounts step's sshd drop-in: the cluster's users are denied, and no users means no rule."""

from components.people import render


def person(name: str, uid: int) -> render.Person:
    return render.Person(name, uid, 20000, (), (), "ml")


def test_the_drop_in_denies_exactly_the_cluster_users_and_the_step_checks_sshd_reads_it():
    people = (person("bob", 20002), person("alice", 20001))
    assert render.sshd_dropin(people).splitlines()[1:] == ["DenyUsers alice bob"]
    step = render.host_accounts("w1", people, (render.Group("ml", 20000),), "/gfsv/home")
    assert "-s /usr/sbin/nologin" in step.create and "usermod -s /usr/sbin/nologin" in step.create
    assert "[ \"$denied\" = 'alice bob' ]" in step.create
    assert f"rm -f {render.SSHD_DROPIN}" in step.delete


def test_no_users_no_deny_rule():
    assert "DenyUsers" not in render.sshd_dropin(())
