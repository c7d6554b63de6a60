"""Storage components under pulumi.runtime.set_mocks: wiring, secrets and the contract."""

import pulumi
import pytest
from pulumi.runtime import rpc

from components.remote import Ssh
from components.storage import (
    GlusterVolume,
    GlusterVolumeArgs,
    NetworkStorage,
    StorageNode,
    StorageNodeArgs,
    render_gluster,
)
from components.storage import spec as storage_spec
from offline.mocks import PlanMocks


class Recorder(PlanMocks):
    def __init__(self):
        self.created = []

    def new_resource(self, args):
        self.created.append(args)
        return super().new_resource(args)


@pytest.fixture
def mocks():
    m = Recorder()
    pulumi.runtime.set_mocks(m, project="hpc-cluster", stack="unit", preview=False)
    return m


def ssh(name="s1", address="10.0.0.1"):
    return Ssh(name=name, address=address, user="root", port=22, private_key=pulumi.Output.secret("KEY-123"))


CONTRACT = NetworkStorage(
    servers=("10.0.0.1",),
    volume="gv0",
    local_mount="/gfsv",
    mount_options="defaults,_netdev",
    nfs_server="10.0.0.1",
    nfs_export="/gv",
    nfs_version="4.1",
)


@pulumi.runtime.test
def test_storage_node_children_and_secret_connection(mocks):
    node = StorageNode("s1", StorageNodeArgs(ssh=ssh(), brick_path="/b", allow_destroy=False, protect=True))

    def check(args):
        conn_secret, create, _ = args
        assert conn_secret
        assert "hpc_install glusterfs-server" in create
        cmds = [a for a in mocks.created if a.typ == "command:remote:Command"]
        assert sorted(a.name for a in cmds) == ["s1-brick", "s1-glusterd"]
        assert all(rpc.is_rpc_secret(a.inputs["connection"]) for a in cmds)
        assert all("KEY-123" not in str(a.inputs.get("create")) for a in cmds)

    return pulumi.Output.all(node.glusterd.connection.is_secret(), node.glusterd.create, node.brick.id).apply(check)  # type: ignore[attr-defined]


@pulumi.runtime.test
def test_volume_steps_chain_and_the_contract_waits_for_the_options(mocks):
    spec = storage_spec.VolumeSpec(
        "gv0",
        3,
        False,
        tuple(storage_spec.Brick(f"s{i}", f"10.0.0.{i}", "/b") for i in (1, 2, 3)),
        (("cluster.quorum-type", "auto"),),
        False,
    )
    vol = GlusterVolume(
        "gv0", GlusterVolumeArgs(ssh=ssh(), spec=spec, contract=CONTRACT, protect=True, daemons=[], bricks=[])
    )

    async def check() -> None:
        assert await vol.network_storage.future() == CONTRACT
        # consumers that mount through the contract wait for the options step, which waits for the volume
        assert await vol.network_storage.resources() == {vol.options}
        names = [a.name for a in mocks.created if a.typ == "command:remote:Command"]
        assert names == ["gv0-peers", "gv0-volume", "gv0-options"]

    return pulumi.Output.from_input(check())


def test_step_for_another_host_is_refused(mocks):
    from components import remote

    with pytest.raises(ValueError, match="is for host s2"):
        remote.run("x", ssh("s1"), render_gluster.glusterd("s2"), opts=pulumi.ResourceOptions())
