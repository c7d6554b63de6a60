"""What a new user meets: every mistake gets one line per problem naming the key (or the file,
line and column), all problems of a run at once, never a traceback; nothing is registered."""

import copy
import json
import subprocess
import sys

import pytest
import yaml

from offline import plan, stack_file
from offline.stack_file import StackFileError
from stacks import config_checks
from stacks.config import ConfigError, parse

DEV = yaml.safe_load((plan.ROOT / "Pulumi.dev.yaml").read_text())["config"]


def cli(*args, cwd=plan.ROOT):
    return subprocess.run(
        [sys.executable, "-m", *args], cwd=cwd, capture_output=True, text=True, timeout=300
    )


def no_traceback(proc):
    assert "Traceback" not in proc.stderr + proc.stdout, proc.stderr
    return proc.stderr.strip().splitlines()


# ---- the stack file ---------------------------------------------------------------------------
def test_a_missing_stack_file_lists_the_stacks_that_exist(tmp_path):
    proc = cli("offline.plan", "--stack", "staging", "--out", str(tmp_path / "p"))
    assert proc.returncode == 2
    assert no_traceback(proc) == [
        "error: Pulumi.staging.yaml: no such stack file; stacks here: dev, prod (pulumi stack init staging makes one)"
    ]


def test_yaml_syntax_errors_give_file_line_and_column(tmp_path):
    (tmp_path / "Pulumi.x.yaml").write_text("config:\n  hpc:hosts:\n    - name: a\n     address: b\n")
    with pytest.raises(StackFileError) as err:
        stack_file.read(tmp_path, "x")
    assert err.value.where == "Pulumi.x.yaml:4:6"
    assert "\n" not in str(err.value)


@pytest.mark.parametrize(
    ("text", "where", "key"),
    [
        (
            "config:\n  hpc:environment: dev\n  hpc:environment: prod\n",
            "Pulumi.x.yaml:3:3",
            '"hpc:environment" already defined at line 2',
        ),
        (  # deep inside a host of the list, as the Pulumi CLI refuses it too
            "config:\n  hpc:hosts:\n    - name: a\n      roles: [storage]\n      name: b\n",
            "Pulumi.x.yaml:5:7",
            '"name" already defined at line 3',
        ),
    ],
)
def test_duplicate_keys_are_refused_at_any_depth(tmp_path, text, where, key):
    (tmp_path / "Pulumi.x.yaml").write_text(text)
    with pytest.raises(StackFileError) as err:
        stack_file.read(tmp_path, "x")
    assert err.value.where == where
    assert f"mapping key {key}" in err.value.message  # the CLI's (yaml.v3's) words


def test_a_stack_file_that_is_not_a_mapping(tmp_path):
    (tmp_path / "Pulumi.x.yaml").write_text("- just\n- a list\n")
    with pytest.raises(StackFileError, match="a stack file is a mapping"):
        stack_file.read(tmp_path, "x")


# ---- keys and messages ------------------------------------------------------------------------
def test_a_namespace_that_looks_like_hpc_and_a_key_without_namespace_are_flagged():
    with pytest.raises(ConfigError) as err:
        plan.run("dev", {"hcp:storage": {"replica": 2}, "hpc-cluster:racks": {}})
    typo = ("hcp:storage", "namespace 'hcp' is not read by this program; did you mean hpc:storage?")
    assert typo in err.value.problems
    assert any(k == "hpc-cluster:racks" and "write hpc:racks" in m for k, m in err.value.problems)
    assert err.value.registered == []


def test_provider_namespaces_are_not_typos():
    plan.run("dev", {"kubernetes:context": "lab", "docker:host": "unix:///run/docker.sock"})


def test_a_misspelt_key_gets_did_you_mean_and_is_not_also_missing():
    hosts = copy.deepcopy(DEV["hpc:hosts"])
    hosts[1]["sshUsr"] = hosts[1].pop("sshUser")
    hosts[2]["adress"] = hosts[2].pop("address")
    with pytest.raises(ConfigError) as err:
        plan.run("dev", {"hpc:hosts": hosts})
    assert err.value.problems == [
        ("hpc:hosts[rpi2].sshUsr", "unknown config key; did you mean 'sshUser'?"),
        ("hpc:hosts[rpi3].adress", "unknown config key; did you mean 'address'?"),
    ]


def test_an_unknown_key_far_from_any_lists_the_known_ones():
    with pytest.raises(ConfigError) as err:
        parse({**{k.split(":", 1)[1]: v for k, v in DEV.items()}, "zzz": 1})
    assert err.value.problems == [
        ("hpc:zzz", "unknown config key; known keys: backup, environment, groups, hosts, identity, inference, k3s, "
                    "monitoring, network, racks, slurm, storage, users")
    ]  # fmt: skip


def test_every_problem_of_a_run_is_reported_at_once(tmp_path):
    """Field errors are collected across the whole file; the rules between fields (addresses,
    layouts, capacity) run once every field is valid, and are collected as well."""
    hosts = copy.deepcopy(DEV["hpc:hosts"])
    hosts[1]["address"] = hosts[0]["address"]
    inference = copy.deepcopy(DEV["hpc:inference"])
    inference["models"][1]["port"] = inference["models"][0]["port"]
    proc = cli(
        "offline.plan", "--stack", "dev", "--out", str(tmp_path / "p"),
        "--set", f"hpc:hosts={json.dumps(hosts)}",
        "--set", f"hpc:inference={json.dumps(inference)}",
        "--set", 'hpc:storage={"replica": 4}',
        "--set", "hcp:k3s=1",
    )  # fmt: skip
    assert proc.returncode == 2
    lines = no_traceback(proc)
    assert lines[-1] == "4 problems; nothing was planned", lines
    assert "error: hcp:k3s: namespace 'hcp' is not read by this program; did you mean hpc:k3s?" in lines
    assert "error: hpc:hosts[rpi2].address: duplicate address 192.168.0.106 (also rpi1)" in lines
    assert "error: hpc:storage.replica: replica 4 needs at least 4 storage hosts, found 3" in lines
    assert any(line.startswith("error: hpc:inference.models[gemma-7b].port: model gemma-7b: port") for line in lines)
    assert not (tmp_path / "p").exists()


def test_field_errors_across_the_file_come_together():
    raw = {k.split(":", 1)[1]: copy.deepcopy(v) for k, v in DEV.items()}
    raw["storage"] = {**raw.get("storage", {}), "mountPoint": "/usr/share/gv0"}
    raw["hosts"][3]["sshPort"] = "twenty-two"
    raw["slurm"]["statePath"] = "/etc/slurm-state"
    with pytest.raises(ConfigError) as err:
        parse(raw)
    keys = sorted(k for k, _ in err.value.problems)
    assert keys == ["hpc:hosts[gpu1].sshPort", "hpc:slurm.statePath", "hpc:storage.mountPoint"]


def test_an_unknown_model_gets_a_warning_that_its_cache_was_not_checked():
    raw = {k.split(":", 1)[1]: copy.deepcopy(v) for k, v in DEV.items()}
    raw["inference"]["models"][0]["modelId"] = "someone/new-model"
    warnings = config_checks.warnings(parse(raw).inference.models)
    assert warnings == [
        "hpc:inference.models[llama3-8b].modelId: someone/new-model is not in the capacity table "
        "(components/inference/capacity.py): its KV cache, context length and tensor split were not checked; "
        "add its shape there"
    ]


# ---- plan-diff misuse -------------------------------------------------------------------------
def test_plan_diff_with_a_base_that_is_not_a_commit(tmp_path):
    proc = cli("offline.plan_diff", "--base", "no-such-branch", "--stack", "dev")
    assert proc.returncode == 2
    assert no_traceback(proc) == [
        "error: --base 'no-such-branch' is not a commit in this clone (git fetch origin, or name a branch or sha)"
    ]


def test_plan_diff_of_a_stack_that_does_not_exist():
    proc = cli("offline.plan_diff", "--base", "HEAD", "--stack", "staging")
    assert proc.returncode == 2
    assert no_traceback(proc) == ["error: --stack 'staging': no Pulumi.staging.yaml here; stacks: dev, prod"]


# ---- secure: values ---------------------------------------------------------------------------
SALT = "encryptionsalt: v1:cokIKhPZ8/U=:v1:PlRDhC+2MhtR0DKF:LN1fRDgR0LYkM0PoOmfMbKrTCHLIcA==\n"
# What `pulumi config set --secret hpc:pw` (CLI 3.276.0, passphrase "x") wrote for the text "s3cret".
REAL_CIPHERTEXT = "v1:67EAjtCWQeFuJFyJ:bYSyydbONQ6IdP+watol8T+q4zHq+Q=="


def test_ciphertext_the_cli_wrote_is_accepted():
    doc = stack_file.parse_text(f"{SALT}config:\n  hpc:pw:\n    secure: {REAL_CIPHERTEXT}\n", "Pulumi.x.yaml")
    assert doc["config"]["hpc:pw"] == {"secure": REAL_CIPHERTEXT}


@pytest.mark.parametrize(
    "value",
    ["my-password", "v1:AAAA:BBBB", "v1:67EAjtCWQeFuJFyJ:short", "12345", "{a: 1}"],
)
def test_a_hand_typed_secure_value_is_refused_before_any_host_sees_it(value):
    """The CLI cannot decrypt these ("bad value: nonce size is incorrect" at the first preview)."""
    with pytest.raises(StackFileError) as err:
        stack_file.parse_text(f"{SALT}config:\n  hpc:pw:\n    secure: {value}\n", "Pulumi.x.yaml")
    assert "pulumi config set --secret hpc:pw" in str(err.value)
    assert value not in str(err.value)  # the typed text may be the password itself
