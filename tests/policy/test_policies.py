"""Every policy with a violating and a compliant resource; the stacks through make plan's path."""

import subprocess
import sys

import pytest
from pulumi_policy import (
    PolicyCustomTimeouts,
    PolicyResource,
    PolicyResourceOptions,
    ResourceValidationArgs,
    StackValidationArgs,
)

from components.scripts import script, wrap
from offline import plan, policies
from policy import rules

OPTS = PolicyResourceOptions(False, [], None, [], PolicyCustomTimeouts(0, 0, 0), [], None)
PROTECTED = PolicyResourceOptions(True, [], None, [], PolicyCustomTimeouts(0, 0, 0), [], None)


def check(fn, rtype, props, opts=OPTS, name="r"):
    found = []
    fn(
        ResourceValidationArgs(rtype, props, f"urn:{name}", name, opts, None),
        lambda m, urn=None: found.append(m),
    )
    return found


def stack_check(fn, resources, config=None):
    found = []
    res = [PolicyResource(t, p, f"urn:{n}", n, OPTS, None, None, [], {}) for t, n, p in resources]
    fn(StackValidationArgs(res, config or {}), lambda m, urn=None: found.append(m))
    return found


def step(body="true", file=None, stdin=None, logging=None, **headers):
    props = {
        "create": wrap(
            script("h", "s", body, file=file, extra_headers={k.replace("_", "-"): v for k, v in headers.items()})
        )
    }
    if stdin is not None:
        props["stdin"] = stdin
    if logging is not None:
        props["logging"] = logging
    return props


CMD, DEP = "command:remote:Command", "kubernetes:apps/v1:Deployment"


def deployment(
    image="vllm/vllm-openai:v1@sha256:" + "a" * 64,
    env=None,
    limits=None,
    requests=None,
    runtime="nvidia",
    args=None,
    annotations=None,
    node="gpu1",
    name="m",
):
    return {
        "metadata": {"name": name, "annotations": annotations or {}},
        "spec": {
            "template": {
                "spec": {
                    "runtimeClassName": runtime,
                    "nodeSelector": {"kubernetes.io/hostname": node},
                    "containers": [
                        {
                            "name": "c",
                            "image": image,
                            "command": ["vllm", "serve"],
                            "args": args or ["x/y"],
                            "env": env or [],
                            "resources": {
                                "limits": limits
                                if limits is not None
                                else {"nvidia.com/gpu": "1", "cpu": "1", "memory": "1Gi"},
                                "requests": requests if requests is not None else {"cpu": "1", "memory": "1Gi"},
                            },
                        }
                    ],
                }
            }
        },
    }


def test_gluster_replica_safe():
    v = check(rules.gluster_replica_safe, CMD, step(stateful="gluster-volume", replica="2", arbiter="0"))
    assert v and "replica 2 volume without an arbiter" in v[0]
    assert not check(rules.gluster_replica_safe, CMD, step(stateful="gluster-volume", replica="2", arbiter="1"))
    assert not check(rules.gluster_replica_safe, CMD, step(stateful="gluster-volume", replica="3", arbiter="0"))


GANESHA = "EXPORT {{ Squash = {squash}; CLIENT {{ Clients = {clients}; }} }}"


def test_nfs_export_restricted():
    f = "/etc/ganesha/ganesha.conf"
    ok = step(file=f, stdin=GANESHA.format(squash="Root_Squash", clients="10.0.0.0/24"), allow_no_root_squash="0")
    assert not check(rules.nfs_export_restricted, CMD, ok)
    world = step(file=f, stdin=GANESHA.format(squash="Root_Squash", clients="*"), allow_no_root_squash="0")
    assert "open to every address" in check(rules.nfs_export_restricted, CMD, world)[0]
    noroot = step(
        file=f, stdin=GANESHA.format(squash="No_Root_Squash", clients="10.0.0.0/24"), allow_no_root_squash="0"
    )
    assert "No_Root_Squash without" in check(rules.nfs_export_restricted, CMD, noroot)[0]
    allowed = step(
        file=f, stdin=GANESHA.format(squash="No_Root_Squash", clients="10.0.0.0/24"), allow_no_root_squash="1"
    )
    assert not check(rules.nfs_export_restricted, CMD, allowed)


def test_images_pinned():
    assert "mutable :latest" in check(rules.images_pinned, DEP, deployment(image="nginx:latest"))[0]
    assert "has no tag" in check(rules.images_pinned, DEP, deployment(image="nginx"))[0]
    assert not check(rules.images_pinned, DEP, deployment())
    assert check(rules.images_pinned, "docker:index/container:Container", {"image": "x/y:latest"})
    # a build whose base image is not pinned by digest
    base = check(
        rules.images_pinned,
        "docker:index/image:Image",
        {"imageName": "r/x:1", "build": {"dockerfile": "tests/policy/fixtures/Dockerfile.unpinned"}},
    )
    assert "pin the base image by tag and digest" in base[0]
    assert not check(
        rules.images_pinned,
        "docker:index/image:Image",
        {"imageName": "r/x:1", "build": {"dockerfile": "images/slurm/Dockerfile.head"}},
    )


def test_secrets_stay_secret():
    assert "logs its output" in check(rules.secrets_stay_secret, CMD, step(secret_stdin="k3s-token"))[0]
    assert not check(rules.secrets_stay_secret, CMD, step(secret_stdin="k3s-token", logging="none"))
    assert "environment" in check(rules.secrets_stay_secret, CMD, step() | {"environment": {"K": "v"}})[0]
    assert "command line" in check(rules.secrets_stay_secret, CMD, step("k3s agent --token=x K3S_TOKEN=abcdefgh12"))[0]
    literal = deployment(env=[{"name": "HF_TOKEN", "value": "hf_x"}])
    assert "secretKeyRef" in check(rules.secrets_stay_secret, DEP, literal)[0]
    ref = deployment(env=[{"name": "HF_TOKEN", "valueFrom": {"secretKeyRef": {"name": "s", "key": "k"}}}])
    assert not check(rules.secrets_stay_secret, DEP, ref)
    assert check(rules.secrets_stay_secret, DEP, deployment(args=["x/y", "--api-key=abc"]))


def test_no_default_credentials():
    assert check(
        rules.no_default_credentials,
        "docker:index/image:Image",
        {"build": {"dockerfile": "tests/policy/fixtures/Dockerfile.unpinned"}},
    )
    assert not check(
        rules.no_default_credentials,
        "docker:index/image:Image",
        {"build": {"dockerfile": "images/slurm/Dockerfile.worker"}},
    )
    assert check(rules.no_default_credentials, CMD, step("echo 'admin:admin' | chpasswd"))
    assert check(rules.no_default_credentials, DEP, deployment(env=[{"name": "DB_USER", "value": "admin"}]))
    assert not check(rules.no_default_credentials, CMD, step("echo hello"))


def test_gpu_workloads_pinned_and_resources():
    loose = check(rules.gpu_workloads_pinned, DEP, deployment(env=[{"name": "NVIDIA_VISIBLE_DEVICES", "value": "all"}]))
    assert "must pin container c to its GPUs with NVIDIA_VISIBLE_DEVICES (indexes, not 'all')" in loose[0]
    assert "not 'unset'" in check(rules.gpu_workloads_pinned, DEP, deployment())[0]
    pinned = deployment(env=[{"name": "NVIDIA_VISIBLE_DEVICES", "value": "0,1"}])
    assert not check(rules.gpu_workloads_pinned, DEP, pinned)
    assert "requests.cpu" in check(rules.workloads_set_resources, DEP, deployment(requests={}))[0]
    assert not check(rules.workloads_set_resources, DEP, deployment())


NODE = (
    "kubernetes:core/v1:NodePatch",
    "gpu1-labels",
    {
        "metadata": {
            "name": "gpu1",
            "labels": {"hpc-cluster.io/gpu-count": "2", "hpc-cluster.io/gpu-memory-gib": "80"},
        }
    },
)


def model(name, util, gpu="0", params="8.03"):
    return (
        DEP,
        name,
        deployment(
            name=name,
            annotations={
                "capacity.hpc-cluster.io/params-billion": params,
                "capacity.hpc-cluster.io/gpu-index": gpu,
            },
            args=[
                "meta-llama/Meta-Llama-3-8B-Instruct",
                "--dtype",
                "bfloat16",
                "--gpu-memory-utilization",
                util,
                "--enforce-eager",
            ],
        ),
    )


def test_gpu_memory_budget():
    assert not stack_check(rules.gpu_memory_budget, [NODE, model("a", "0.45"), model("b", "0.45")])
    over = stack_check(rules.gpu_memory_budget, [NODE, model("a", "0.6"), model("b", "0.6")])
    assert over and "GPU 0 is shared by a, b" in over[0]
    small = stack_check(rules.gpu_memory_budget, [NODE, model("a", "0.1")])
    assert "does not fit its GPU budget" in small[0]
    unlabelled = stack_check(rules.gpu_memory_budget, [model("a", "0.4")])
    assert "no GPU labels" in unlabelled[0]


def test_slurm_constrain_devices_and_driver_branch():
    f = "/etc/slurm/cgroup.conf"
    assert check(rules.slurm_constrain_devices, CMD, step(file=f, stdin="ConstrainDevices=no\n"))
    assert not check(rules.slurm_constrain_devices, CMD, step(file=f, stdin="ConstrainDevices=yes\n"))
    assert "R535" in check(rules.nvidia_driver_branch, CMD, step(min_driver_branch="535"))[0]
    assert not check(rules.nvidia_driver_branch, CMD, step(min_driver_branch="550"))


def test_rack_power_budget():
    hosts = [{"name": f"gpu0{i}", "rack": "r1", "peakPowerW": 5500} for i in range(1, 5)]
    over = stack_check(rules.rack_power_budget, [], {"racks": {"r1": 18000}, "hosts": hosts})
    assert "Rack r1 would draw 22000 W" in over[0] and "above its budget of 18000 W" in over[0]
    assert not stack_check(rules.rack_power_budget, [], {"racks": {"r1": 25000}, "hosts": hosts})


def test_stateful_protected():
    s = step(stateful="gluster-volume", allow_destroy="0")
    assert "must be protected" in check(rules.stateful_protected, CMD, s)[0]
    assert not check(rules.stateful_protected, CMD, s, opts=PROTECTED)
    assert not check(rules.stateful_protected, CMD, step(stateful="gluster-volume", allow_destroy="1"))


@pytest.mark.parametrize("stack", ["dev", "prod"])
def test_stacks_pass_every_mandatory_policy_through_the_plan_path(stack):
    result = plan.run(stack)
    violations = policies.run(result)
    assert policies.mandatory(violations) == []
    if stack == "prod":
        assert violations == []  # prod: not even advisories


def test_prod_levels_come_from_the_stack():
    conf = policies.policy_config(policies.stack_config(plan.run("prod")))
    assert conf["gluster-replica-safe"]["enforcementLevel"] == "mandatory"
    assert conf["rack-power-budget"]["enforcementLevel"] == "mandatory"
    assert conf["rack-power-budget"]["racks"]["r2"] == 18000


def test_make_plan_fails_on_a_mandatory_violation(tmp_path):
    import yaml

    racks = yaml.safe_load((plan.ROOT / "Pulumi.prod.yaml").read_text())["config"]["hpc:racks"]
    racks["r2"] = {"powerBudgetW": 12000}
    import json

    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "offline.plan",
            "--stack",
            "prod",
            "--out",
            str(tmp_path / "p"),
            "--quiet",
            "--set",
            f"hpc:racks={json.dumps(racks)}",
        ],
        cwd=plan.ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "[mandatory] rack-power-budget: Rack r2 would draw 16500 W" in proc.stdout


def test_the_pack_entry_point_assembles_the_same_policies():
    import runpy

    import pulumi_policy

    captured = {}
    original = pulumi_policy.PolicyPack.__init__

    def capture(self, name, policies, enforcement_level=None, **kw):
        captured.update(name=name, policies=policies)

    pulumi_policy.PolicyPack.__init__ = capture  # PolicyPack() would start a gRPC server and block
    try:
        runpy.run_path(str(plan.ROOT / "policy"), run_name="__main__")
    finally:
        pulumi_policy.PolicyPack.__init__ = original
    assert captured["name"] == "hpc-cluster"
    assert [p.name for p in captured["policies"]] == [p.name for p in rules.POLICIES]
    # every policy the pack ships, and how hard it stops a change: a new, dropped or softened
    # policy is a deliberate edit here (MANDATORY for security and data safety)
    assert {p.name: p.enforcement_level.value for p in rules.POLICIES} == {
        "gluster-replica-safe": "advisory",  # raised to mandatory per stack by its config (prod)
        "nfs-export-restricted": "mandatory",
        "images-pinned": "mandatory",
        "secrets-stay-secret": "mandatory",
        "no-default-credentials": "mandatory",
        "gpu-memory-budget": "mandatory",
        "gpu-workloads-pinned": "mandatory",
        "workloads-set-resources": "advisory",
        "slurm-constrain-devices": "advisory",
        "rack-power-budget": "advisory",
        "stateful-protected": "mandatory",
        "nvidia-driver-branch": "advisory",
        "slurm-gpu-share-capped": "advisory",  # mandatory in prod (its config)
        "ssh-host-keys-pinned": "mandatory",
        "no-secret-on-shared-volume": "mandatory",
        "nfs-clients-exclude-container-range": "mandatory",
        "privileged-containers-allowlist": "mandatory",
        "inference-pods-hardened": "mandatory",
        "trust-remote-code-listed": "advisory",
        "model-servers-hold-no-credentials": "mandatory",
    }


# ---- trust boundaries (policy/trust.py) ------------------------------------------------------------
def check_with(fn, rtype, props, config, name="r"):
    found = []
    fn(
        ResourceValidationArgs(rtype, props, f"urn:{name}", name, OPTS, None, config),
        lambda m, urn=None: found.append(m),
    )
    return found


KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIPp8MqQyhGhm/E82pkr0j3l3RJh2JvqfUqdU8cX3GOFs"


def test_ssh_host_keys_pinned():
    from policy import trust

    bare = step() | {"connection": {"host": "10.0.0.1", "user": "root"}}
    assert "without a pinned host key" in check(trust.ssh_host_keys_pinned, CMD, bare, name="s")[0]
    pinned = step() | {"connection": {"host": "10.0.0.1", "user": "root", "hostKey": KEY}}
    assert not check(trust.ssh_host_keys_pinned, CMD, pinned)
    provider = "pulumi:providers:docker"
    loose = {"host": "ssh://root@10.0.0.1:22", "sshOpts": '["-o", "StrictHostKeyChecking=yes"]'}
    assert "Docker provider d" in check(trust.ssh_host_keys_pinned, provider, loose, name="d")[0]
    strict = {"host": "ssh://root@10.0.0.1:22", "sshOpts": f'["-o", "KnownHostsCommand=/bin/echo 10.0.0.1 {KEY}"]'}
    assert not check(trust.ssh_host_keys_pinned, provider, strict)


def test_no_secret_on_shared_volume():
    from policy import trust

    mount = step("want='10.0.0.1:/gv0 /gfsv glusterfs defaults 0 0'")
    on_volume = step("hpc_put_file '/gfsv/munge/munge.key' 0400 991:991", secret_stdin="munge-key")
    on_host = step("hpc_put_file /etc/hpc-cluster/munge/munge.key 0400 991:991", secret_stdin="munge-key")
    ctr = "docker:index/container:Container"
    shared_key = {"volumes": [{"hostPath": "/gfsv/munge", "containerPath": "/etc/munge"}]}
    bad = stack_check(trust.no_secret_on_shared_volume,
                      [(CMD, "m", mount), (CMD, "k", on_volume), (ctr, "c", shared_key)])  # fmt: skip
    assert len(bad) == 2 and "writes a secret to /gfsv/munge/munge.key" in bad[0] and "container c" in bad[1]
    local_key = {"volumes": [{"hostPath": "/etc/hpc-cluster/munge", "containerPath": "/etc/munge"}]}
    assert not stack_check(trust.no_secret_on_shared_volume, [(CMD, "m", mount), (CMD, "k", on_host),
                                                             (ctr, "c", local_key)])  # fmt: skip


def test_nfs_clients_exclude_container_range():
    from policy import trust

    conf = {"containerRanges": ["10.0.0.192/26"]}
    wide = step(file="/etc/ganesha/ganesha.conf", stdin="CLIENT { Clients = 10.0.0.0/24; }")
    assert "overlaps the container range 10.0.0.192/26" in check_with(
        trust.nfs_clients_exclude_container_range, CMD, wide, conf)[0]  # fmt: skip
    hosts = step(file="/etc/ganesha/ganesha.conf", stdin="CLIENT { Clients = 10.0.0.11/32, 10.0.0.12/32; }")
    assert not check_with(trust.nfs_clients_exclude_container_range, CMD, hosts, conf)
    gluster = step("wanted 'auth.allow' '10.0.0.11,10.0.0.200'")
    assert "Gluster auth.allow" in check_with(trust.nfs_clients_exclude_container_range, CMD, gluster, conf)[0]
    assert not check_with(trust.nfs_clients_exclude_container_range, CMD, step("wanted 'auth.allow' '10.0.0.11'"),
                          conf)  # fmt: skip


def test_privileged_containers_allowlist():
    from policy import trust

    ctr = "docker:index/container:Container"
    worker = {"name": "slurm-worker", "capabilities": {"adds": ["SYS_ADMIN"]}, "cgroupnsMode": "host"}
    assert not check(trust.privileged_containers_allowlist, ctr, worker)
    head = {"name": "slurm-head", "capabilities": {"adds": ["SYS_ADMIN"]},
            "volumes": [{"hostPath": "/sys/fs/cgroup", "containerPath": "/sys/fs/cgroup"}]}  # fmt: skip
    msg = check(trust.privileged_containers_allowlist, ctr, head)[0]
    assert "slurm-head is given capabilities SYS_ADMIN, a writable host /sys/fs/cgroup" in msg
    assert "privileged" in check(trust.privileged_containers_allowlist, ctr, {"name": "x", "privileged": True})[0]


def test_inference_pods_hardened_and_remote_code_listed():
    from policy import trust

    loose = deployment(args=["x/y", "--trust-remote-code"])
    assert "may run as root" in check(trust.inference_pods_hardened, DEP, loose)[0]
    assert "--trust-remote-code" in check(trust.trust_remote_code_listed, DEP, loose, name="m")[0]
    tight = deployment()
    tight["spec"]["template"]["spec"]["containers"][0]["securityContext"] = {
        "runAsNonRoot": True, "allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}}  # fmt: skip
    assert not check(trust.inference_pods_hardened, DEP, tight)
    assert not check(trust.trust_remote_code_listed, DEP, tight)


def test_model_servers_hold_no_credentials():
    from policy import trust

    ref = {"name": "HF_TOKEN", "valueFrom": {"secretKeyRef": {"name": "hf-token", "key": "token"}}}
    holder = deployment(env=[ref])
    found = check(trust.model_servers_hold_no_credentials, DEP, holder, name="m")
    assert len(found) == 2 and "holds HF_TOKEN" in found[0] and "automountServiceAccountToken" in found[1]
    clean = deployment(env=[{"name": "HF_HUB_OFFLINE", "value": "1"}])
    clean["spec"]["template"]["spec"]["automountServiceAccountToken"] = False
    assert not check(trust.model_servers_hold_no_credentials, DEP, clean)
    other = deployment(env=[ref])  # not a model server: the rule is about code from model repositories
    other["spec"]["template"]["spec"]["containers"][0]["command"] = ["python3", "-m", "fastchat.serve.x"]
    assert not check(trust.model_servers_hold_no_credentials, DEP, other)


# ---- Slurm shares (policy/rules.py: slurm-gpu-share-capped) ------------------------------------------

def prod_with_accounts(accounts: list[dict], qos: list[dict] | None = None) -> dict:
    import yaml

    raw = yaml.safe_load((plan.ROOT / "Pulumi.prod.yaml").read_text())["config"]
    slurm = dict(raw["hpc:slurm"])
    slurm["scheduling"] = {"accounts": accounts, **({"qos": qos} if qos else {})}
    return {
        "hpc:slurm": slurm,
        "hpc:groups": [{"name": "physics", "gid": 30001}, {"name": "chem", "gid": 30002}],
        "hpc:users": [
            {"name": "alice", "uid": 20001, "group": "physics"},
            {"name": "bob", "uid": 20002, "group": "chem"},
        ],
    }


def share_violations(overrides: dict) -> list[policies.Violation]:
    result = plan.run("prod", overrides)
    config = policies.policy_config(policies.stack_config(result))
    return [v for v in policies.run(result, config) if v.policy == "slurm-gpu-share-capped"]


def test_an_account_that_may_hold_every_gpu_in_prod_is_refused_unless_allowed():
    found = share_violations(prod_with_accounts([{"name": "physics", "maxGpus": 16}, {"name": "chem"}]))
    assert [(v.level, v.message.split(" (")[0]) for v in found] == [("mandatory", "The Slurm account chem")]
    assert "may hold every GPU of the cluster's 64" in found[0].message
    whole = share_violations(prod_with_accounts([{"name": "physics", "maxGpus": 64}, {"name": "chem", "maxGpus": 8}]))
    assert [v.message for v in whole] and "may hold 64 GPUs of the cluster's 64" in whole[0].message
    allowed = [{"name": "physics", "maxGpus": 16}, {"name": "chem", "holdsAllGpus": True}]
    assert share_violations(prod_with_accounts(allowed)) == []


def test_a_per_account_qos_cap_counts_for_every_account_that_uses_it():
    qos = [
        {"name": "normal", "priority": 100, "maxGpusPerAccount": 24, "preempts": ["scavenger"]},
        {"name": "scavenger", "maxGpusPerAccount": 16, "usageFactor": 0},
    ]
    assert share_violations(prod_with_accounts([{"name": "physics"}, {"name": "chem"}], qos)) == []
    qos[1]["maxGpusPerAccount"] = 40  # 24 + 40 >= 64: the pair lets one account hold them all
    assert len(share_violations(prod_with_accounts([{"name": "physics"}, {"name": "chem"}], qos))) == 2
