"""Bad stack input: one line naming the key, raised by the real program before any resource.

Every case runs the unchanged __main__.py under the mock engine with one change to the dev stack
and asserts the exact key in the error and that nothing was registered."""

import copy

import pytest
import yaml

from offline import plan
from stacks.config import ConfigError

DEV = yaml.safe_load((plan.ROOT / "Pulumi.dev.yaml").read_text())["config"]


def changed(key: str, edit):
    value = copy.deepcopy(DEV[key])
    edit(value)
    return {key: value}


def hosts(edit):
    return changed("hpc:hosts", edit)


def set_(path, value):
    def edit(obj):
        *head, last = path
        for p in head:
            obj = obj[p]
        obj[last] = value

    return edit


def both(*edits):
    def edit(obj):
        for e in edits:
            e(obj)

    return edit


CASES = [
    ("duplicate host name", hosts(set_([1, "name"], "rpi1")), "hpc:hosts[rpi1].name", "hosts[0] and hosts[1] are both"),
    ("duplicate address", hosts(set_([2, "address"], "192.168.0.106")), "hpc:hosts[rpi3].address", "duplicate"),
    (
        "address outside subnet",
        hosts(set_([0, "address"], "10.1.1.1")),
        "hpc:hosts[rpi1].address",
        "outside the subnet",
    ),
    (
        "address in container range",
        hosts(set_([1, "address"], "192.168.0.203")),
        "hpc:hosts[rpi2].address",
        "container range",
    ),
    (
        "container address outside range",
        hosts(set_([0, "containerAddress"], "192.168.0.50")),
        "hpc:hosts[rpi1].containerAddress",
        "outside the container range",
    ),
    (
        "missing container address",
        hosts(lambda h: h[1].pop("containerAddress")),
        "hpc:hosts[rpi2].containerAddress",
        "required",
    ),
    ("unknown profile", hosts(set_([2, "profile"], "cray-xc40")), "hpc:hosts[rpi3].profile", "unknown profile"),
    (
        "unknown role",
        hosts(set_([2, "roles"], ["storage", "logon"])),
        "hpc:hosts[rpi3].roles[1]",
        "Input should be",
    ),
    (
        "gpu worker without gpus",
        hosts(set_([1, "roles"], ["storage", "gpu-worker"])),
        "hpc:hosts[rpi2].profile",
        "has no GPUs",
    ),
    (
        "two slurm heads",
        hosts(set_([1, "roles"], ["storage", "slurm-head"])),
        "hpc:hosts",
        "exactly one slurm-head",
    ),
    (
        "two k3s servers",
        hosts(set_([2, "roles"], ["storage", "k3s-server"])),
        "hpc:hosts",
        "at most one k3s-server",
    ),
    (
        "replica above storage hosts",
        changed("hpc:storage", set_(["replica"], 4)),
        "hpc:storage.replica",
        "replica 4 needs at least 4 storage hosts, found 3",
    ),
    (
        "arbiter without replica 2",
        changed("hpc:storage", set_(["arbiter"], True)),
        "hpc:storage.arbiter",
        "needs replica 2",
    ),
    (
        "no_root_squash not allowed",
        changed("hpc:storage", set_(["squash"], "no_root_squash")),
        "hpc:storage.squash",
        "allowNoRootSquash",
    ),
    (
        "unknown storage key",
        changed("hpc:storage", set_(["replicas"], 3)),
        "hpc:storage.replicas",
        "unknown config key",
    ),
    (
        "model port collision",
        changed("hpc:inference", set_(["models", 1, "port"], 8001)),
        "hpc:inference.models[gemma-7b].port",
        "already used by llama3-8b",
    ),
    (
        "model on non-inference host",
        changed("hpc:inference", set_(["models", 0, "host"], "rpi2")),
        "hpc:inference.models[llama3-8b].host",
        "not an inference host",
    ),
    (
        "gateway outside subnet",
        changed("hpc:network", set_(["gateway"], "10.0.0.1")),
        "hpc:network.gateway",
        "outside the subnet",
    ),
    (
        "bad k3s version",
        changed("hpc:k3s", set_(["version"], "latest")),
        "hpc:k3s.version",
        "a k3s release is v1.MINOR.PATCH+k3sN",
    ),
    (
        "two default partitions",
        changed(
            "hpc:slurm",
            set_(["partitions"], [{"name": "a", "default": True}, {"name": "b", "default": True}]),
        ),
        "hpc:slurm.partitions",
        "exactly one partition",
    ),
    (
        "a partition named default",  # slurm.conf(5): PartitionName=DEFAULT sets every partition's defaults
        changed("hpc:slurm", set_(["partitions"], [{"name": "default", "default": True}])),
        "hpc:slurm.partitions[default].name",
        "Slurm's reserved partition name",
    ),
    (
        "login and cpu-worker on one host",  # two Slurm containers on one macvlan network and address
        hosts(set_([1, "roles"], ["storage", "k3s-agent", "cpu-worker", "login"])),
        "hpc:hosts[rpi2].roles",
        "login needs a host of its own",
    ),
    (
        "public host inside the container range",  # a macvlan container's address: Traefik is not there
        changed("hpc:inference", set_(["publicHost"], "192.168.0.202")),
        "hpc:inference.publicHost",
        "inside the container range 192.168.0.200/29",
    ),
    (
        "registry on loopback",  # every worker would pull from its own 127.0.0.1
        changed("hpc:slurm", set_(["registry"], "localhost:5000/hpc")),
        "hpc:slurm.registry",
        "every worker would pull from itself",
    ),
    (
        "an integer beyond 64 bits",  # bash: $(( 2**64 )) is 0
        changed("hpc:inference", set_(["modelCacheGib"], 2**64)),
        "hpc:inference.modelCacheGib",
        "beyond a 64-bit integer",
    ),
    ("missing slurm section", {"hpc:slurm": None}, "hpc:slurm", "required config key is missing"),
    ("unknown top-level key", {"hpc:storge": {"replica": 3}}, "hpc:storge", "unknown config key"),
    (
        "brick path is a system directory",
        changed("hpc:storage", set_(["brickPath"], "/var")),
        "hpc:storage.brickPath",
        "/var is a system directory",
    ),
    (
        "mount point inside /etc",
        changed("hpc:storage", set_(["mountPoint"], "/etc/gfsv")),
        "hpc:storage.mountPoint",
        "inside /etc, which the operating system manages",
    ),
    (
        "brick inside the mount point",
        changed("hpc:storage", set_(["brickPath"], "/gfsv/bricks/gv0")),
        "hpc:storage.brickPath",
        "inside (or equal to) hpc:storage.mountPoint /gfsv",
    ),
    (
        "dot-dot in a path",
        changed("hpc:storage", set_(["brickPath"], "/mnt/../gv0")),
        "hpc:storage.brickPath",
        "contains '.' or '..'",
    ),
    (
        "Slurm database inside a brick",
        changed("hpc:slurm", set_(["dbPath"], "/mnt/gv0/brick/db")),
        "hpc:slurm.dbPath",
        "inside (or equal to) hpc:storage.brickPath",
    ),
    (
        "a GPU for both schedulers: no inferenceGpus",
        hosts(both(set_([3, "roles"], ["gpu-worker", "inference", "k3s-agent"]),
                   set_([3, "containerAddress"], "192.168.0.202"))),
        "hpc:hosts[gpu1].inferenceGpus",
        "gpu1 is gpu-worker and inference: say which GPUs serve models",
    ),
    (
        "a model on a GPU Slurm owns",
        hosts(both(set_([3, "roles"], ["gpu-worker", "inference", "k3s-agent"]),
                   set_([3, "containerAddress"], "192.168.0.202"), set_([3, "inferenceGpus"], [0]))),
        "hpc:inference.models[decilm-7b].gpuIndex",
        "model decilm-7b would use GPU 1 of gpu1, which Slurm owns (hpc:hosts[gpu1].inferenceGpus lists [0])",
    ),
    (
        "every GPU to inference on a gpu-worker",
        hosts(both(set_([3, "roles"], ["gpu-worker", "inference", "k3s-agent"]),
                   set_([3, "containerAddress"], "192.168.0.202"), set_([3, "inferenceGpus"], [0, 1]))),
        "hpc:hosts[gpu1].inferenceGpus",
        "drop its gpu-worker role",
    ),
    (
        "a user in an unknown group",
        {"hpc:users": [{"name": "alice", "uid": 20001, "group": "ml"}], "hpc:groups": []},
        "hpc:users[alice].group",
        "group 'ml' is not in hpc:groups",
    ),
    (
        "a uid taken by a service account",
        {"hpc:users": [{"name": "alice", "uid": 10001, "group": "ml"}], "hpc:groups": [{"name": "ml", "gid": 20000}]},
        "hpc:users[alice].uid",
        "uid 10001 is taken",
    ),
    (
        "a user named as a host's deploy account",
        {
            **hosts(set_([0, "sshUser"], "ops")),
            "hpc:users": [{"name": "ops", "uid": 20001, "group": "ml"}],
            "hpc:groups": [{"name": "ml", "gid": 20000}],
        },
        "hpc:users[ops].name",
        "'ops' is the SSH user of host rpi1; choose another name",
    ),
    (
        "a private key given as an SSH key",
        {
            "hpc:users": [{"name": "alice", "uid": 20001, "group": "ml", "sshKeys": ["-----BEGIN OPENSSH PRIVATE"]}],
            "hpc:groups": [{"name": "ml", "gid": 20000}],
        },
        "hpc:users[alice].sshKeys[0]",
        "not an SSH public key",
    ),
    (
        "gateway is the subnet's network address",
        changed("hpc:network", set_(["gateway"], "192.168.0.0")),
        "hpc:network.gateway",
        "network or broadcast address",
    ),
    (
        "container range is the whole subnet",
        changed("hpc:network", set_(["containerRange"], "192.168.0.0/24")),
        "hpc:network.containerRange",
        "whole subnet",
    ),
    (
        "a loopback subnet",
        changed("hpc:network", both(set_(["subnet"], "127.0.0.0/24"), set_(["gateway"], "127.0.0.1"),
                                   set_(["containerRange"], "127.0.0.200/29"))),
        "hpc:network.subnet",
        "loopback",
    ),
    (
        "container address is the broadcast address",
        hosts(set_([0, "containerAddress"], "192.168.0.255")),
        "hpc:hosts[rpi1].containerAddress",
        "not a usable host address",
    ),
    (
        "a context longer than the model's",
        changed("hpc:inference", set_(["models", 0, "maxModelLen"], 100000)),
        "hpc:inference.models[llama3-8b].maxModelLen",
        "native context of 8192 tokens",
    ),
    (
        "a model cache too small for the models' weights",
        changed("hpc:inference", set_(["modelCacheGib"], 100)),
        "hpc:inference.modelCacheGib",
        "need 109 GiB in the model cache",
    ),
    (
        "a tensor split that does not divide the heads",
        changed("hpc:inference", set_(["models", 1, "tensorParallelSize"], 3)),
        "hpc:inference.models[gemma-7b].tensorParallelSize",
        "does not divide google/gemma-1.1-7b-it's 16 attention heads",
    ),
]


@pytest.mark.parametrize(("case", "overrides", "key", "fragment"), CASES, ids=[c[0] for c in CASES])
def test_bad_config_names_the_key_and_registers_nothing(case, overrides, key, fragment):
    with pytest.raises(ConfigError) as err:
        plan.run("dev", overrides)
    assert key in [k for k, _ in err.value.problems], str(err.value)
    assert any(fragment in m for k, m in err.value.problems if k == key), str(err.value)
    assert all(k.startswith("hpc:") and "\n" not in m for k, m in err.value.problems)
    assert str(err.value).splitlines() == [f"{k}: {m}" for k, m in err.value.problems]
    assert err.value.registered == []


@pytest.mark.parametrize("value", ["changeme", "admin", "  Admin "])
def test_placeholder_secret_is_refused(monkeypatch, value):
    from offline import mocks, record

    monkeypatch.setattr(
        record,
        "stand_in_secret",
        lambda key: value if key == "hpc:sshPrivateKey" else mocks.stand_in_secret(key),
    )
    with pytest.raises(ConfigError) as err:
        plan.run("dev")
    assert err.value.key == "hpc:sshPrivateKey"
    assert "placeholder" in err.value.message
    assert value.strip() not in str(err.value)
    assert err.value.registered == []


def test_secret_given_in_plain_text_is_refused():
    with pytest.raises(ConfigError) as err:
        plan.run("dev", {"hpc:sshPrivateKey": "-----BEGIN OPENSSH PRIVATE KEY-----"})
    assert err.value.key == "hpc:sshPrivateKey"
    assert "must be set as a secret" in err.value.message
    assert "BEGIN" not in str(err.value)


def test_missing_ssh_key_is_refused():
    with pytest.raises(ConfigError) as err:
        plan.run("dev", {"hpc:sshPrivateKey": None})
    assert err.value.key == "hpc:sshPrivateKey"


def test_cli_exits_non_zero_with_one_line(tmp_path):
    import subprocess
    import sys

    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "offline.plan",
            "--stack",
            "dev",
            "--out",
            str(tmp_path / "p"),
            "--set",
            'hpc:storage={"replica": 4}',
        ],
        cwd=plan.ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines() == [
        "error: hpc:storage.replica: replica 4 needs at least 4 storage hosts, found 3"
    ]
    assert not (tmp_path / "p").exists()


def test_pulumi_yaml_declares_every_config_key():
    project = yaml.safe_load((plan.ROOT / "Pulumi.yaml").read_text())
    declared = project["template"]["config"]
    from stacks.config import config_keys

    assert sorted(k.removeprefix("hpc:") for k in declared) == config_keys()
    for key, decl in declared.items():
        assert decl["description"].strip(), key
    assert all(declared[f"hpc:{k}"].get("secret") for k in ("sshPrivateKey", "hfToken"))


def test_readme_config_reference_covers_every_key():
    readme = (plan.ROOT / "README.md").read_text()
    from stacks.config import config_keys

    for key in config_keys():
        assert f"`{key}" in readme, key


def test_readme_config_reference_names_every_nested_key():
    """Every key any model reads, at any depth (overrides' sub-keys, partitions' kind, ...), is in
    the README's reference as `key`, `parent.key` or `parent[].key`."""
    import re
    import typing

    from pydantic import BaseModel

    from stacks.config import ClusterConfig

    readme = (plan.ROOT / "README.md").read_text()
    section = readme[readme.index("## Configuration reference") : readme.index("### Hardware profiles")]
    keys: dict[str, str] = {}

    def walk(t, path: str, depth: int = 0) -> None:
        if depth > 14:
            return
        if typing.get_origin(t) is not None:
            for a in typing.get_args(t):
                walk(a, path, depth + 1)
        elif isinstance(t, type) and issubclass(t, BaseModel):
            for name, f in t.model_fields.items():
                key = f.alias or name
                keys.setdefault(key, f"{path}.{key}".lstrip("."))
                walk(f.annotation, f"{path}.{key}", depth + 1)

    walk(ClusterConfig, "")
    assert len(keys) > 80  # the walk reaches the nested models
    missing = {k: p for k, p in keys.items() if not re.search(r"[`./{]" + re.escape(k) + r"(\[\])?[`\s.:]", section)}
    assert not missing, f"keys the README's configuration reference does not name: {missing}"


def test_trailing_and_doubled_slashes_are_normalised():
    from stacks import config

    raw = {k.split(":", 1)[1]: v for k, v in DEV.items()}
    raw["storage"] = {**raw["storage"], "brickPath": "//mnt//gv0/brick/", "mountPoint": "/gfsv/"}
    cfg = config.parse(raw)
    assert (cfg.storage.brick_path, cfg.storage.mount_point) == ("/mnt/gv0/brick", "/gfsv")
