"""Storage renderers: exact ganesha.conf, fstab line, volume options, script contracts."""

from ipaddress import IPv4Network

from components.accounts import SharedDir
from components.storage import render_ganesha, render_gluster, render_mount
from components.storage import spec as storage_spec


def export(**kw):
    base = dict(
        volume="gv0",
        pseudo="/gv",
        nfs_versions=(4,),
        clients=(IPv4Network("192.168.0.0/24"),),
        squash="root_squash",
        grace=True,
    )
    return storage_spec.ExportSpec(**(base | kw))


GANESHA_V4 = """\
# Managed by hpc-cluster (Pulumi): local edits are overwritten.
NFS_CORE_PARAM {
    Protocols = 4;
    NFS_Port = 2049;
    # NFSv4 only: no rpcbind, mountd or NLM.
    Enable_NLM = false;
    Enable_RQUOTA = false;
    Enable_UDP = false;
}

NFSV4 {
    Graceless = false;
    Only_Numeric_Owners = true;
}

LOG {
    Default_Log_Level = EVENT;
}

EXPORT_DEFAULTS {
    Access_Type = None;
}

EXPORT {
    Export_Id = 1;
    Path = "/gv0";
    Pseudo = "/gv";
    Protocols = 4;
    Transports = TCP;
    SecType = sys;
    Squash = Root_Squash;
    # Only root on a client may mount: a user-space client cannot claim a uid from a host.
    PrivilegedPort = true;
    Access_Type = None;
    Disable_ACL = true;

    CLIENT {
        Clients = 192.168.0.0/24;
        Access_Type = RW;
        Protocols = 4;
    }

    FSAL {
        Name = GLUSTER;
        Hostname = "192.168.0.106";
        Volume = "gv0";
    }
}
"""


def test_ganesha_conf_nfsv4_root_squash_restricted():
    assert render_ganesha.ganesha_conf(export(), "192.168.0.106") == GANESHA_V4


def test_ganesha_conf_v3_adds_mountd_and_nlm():
    text = render_ganesha.ganesha_conf(export(nfs_versions=(3, 4), grace=False), "10.0.0.1")
    assert "    Protocols = 3, 4;\n" in text and "MNT_Port = 20048;" in text
    assert "Enable_NLM = true;" in text and "Graceless = true;" in text


def test_ganesha_conf_lists_every_client_network():
    text = render_ganesha.ganesha_conf(export(clients=(IPv4Network("10.0.0.0/24"), IPv4Network("10.1.0.0/16"))), "h")
    assert "Clients = 10.0.0.0/24, 10.1.0.0/16;" in text


def test_fstab_line_has_backup_volfile_servers():
    assert storage_spec.fstab_line(["10.0.0.1", "10.0.0.2", "10.0.0.3"], "gv0", "/gfsv") == (
        "10.0.0.1:/gv0 /gfsv glusterfs defaults,_netdev,backup-volfile-servers=10.0.0.2:10.0.0.3 0 0"
    )


def test_on_a_server_the_mount_waits_for_its_own_glusterd_at_boot():
    line = storage_spec.fstab_line(["10.0.0.1", "10.0.0.2"], "gv0", "/gfsv", local_server=True)
    assert line.split()[3] == "defaults,_netdev,backup-volfile-servers=10.0.0.2,x-systemd.requires=glusterd.service"
    on_server = render_mount.client_mount("s2", ["10.0.0.1", "10.0.0.2"], "gv0", "/gfsv", (), address="10.0.0.2")
    on_client = render_mount.client_mount("c1", ["10.0.0.1", "10.0.0.2"], "gv0", "/gfsv", (), address="10.0.0.9")
    assert "x-systemd.requires=glusterd.service" in on_server.create
    assert "x-systemd.requires" not in on_client.create


def test_volume_options_base_then_owner_then_extras_in_apply_order():
    extra = {"network.ping-timeout": "10", "cache-size": "64MB"}
    opts = storage_spec.volume_options(1000, 1001, ["10.0.0.1", "10.0.0.2"], extra)
    keys = [k for k, _ in opts]
    assert keys[:4] == ["cluster.quorum-type", "cluster.server-quorum-type", "nfs.disable", "network.ping-timeout"]
    assert dict(opts)["storage.owner-uid"] == "1000" and dict(opts)["storage.owner-gid"] == "1001"
    assert dict(opts)["auth.allow"] == "10.0.0.1,10.0.0.2"
    # the stack's extras come last, so the options script lets them win over the base
    assert opts[-2:] == (("cache-size", "64MB"), ("network.ping-timeout", "10"))


def test_storage_servers_are_ordered_by_address_not_by_the_stack_file():
    servers = storage_spec.storage_servers(["10.0.0.12", "10.0.0.9", "10.0.0.100"])
    assert servers == ["10.0.0.9", "10.0.0.12", "10.0.0.100"]


def _spec(allow_destroy=False, arbiter=False):
    bricks = tuple(storage_spec.Brick(f"s{i}", f"10.0.0.{i}", "/b") for i in (1, 2, 3))
    return storage_spec.VolumeSpec("gv0", 2 if arbiter else 3, arbiter, bricks, (), allow_destroy)


def test_volume_create_checks_peers_first_and_never_forces():
    s = render_gluster.volume("s1", _spec())
    assert "want=(10.0.0.1:/b 10.0.0.2:/b 10.0.0.3:/b)" in s.create
    assert s.create.index("hpc_gq peers") < s.create.index("volume create gv0 replica 3")
    assert "gluster_clear_stale_stamp" in s.create
    assert "refusing to change it" in s.create
    assert "force" not in s.create.split("volume create")[1].split("\n")[0]  # never force a volume into shape
    arb = render_gluster.volume("s1", _spec(arbiter=True))
    assert 'volume create gv0 replica 2 arbiter 1 "${want[@]}"' in arb.create


def test_volume_delete_keeps_data_unless_allowed():
    assert "volume delete" not in (render_gluster.volume("s1", _spec()).delete or "")
    assert "keeping volume gv0" in (render_gluster.volume("s1", _spec()).delete or "")
    assert 'gcall "gluster volume delete gv0"' in (render_gluster.volume("s1", _spec(allow_destroy=True)).delete or "")
    assert "rm -rf" not in (render_gluster.brick("s1", "/b", False).delete or "")
    assert "rm -rf --one-file-system /b" in (render_gluster.brick("s1", "/b", True).delete or "")


def test_glusterd_step_installs_the_glusterq_helper_from_stdin():
    s = render_gluster.glusterd("s1")
    assert s.file_path == render_gluster.GLUSTERQ
    assert s.file_content == render_gluster.glusterq_source() and "def cmd_same_bricks" in s.file_content


def test_client_mount_creates_the_shared_layout_and_checks_the_live_source():
    s = render_mount.client_mount("h", ["10.0.0.1", "10.0.0.2"], "gv0", "/gfsv", (SharedDir("munge", 0o700, 991, 991),))
    assert "hpc_dir /gfsv/munge 0700 991:991" in s.create
    assert "backup-volfile-servers=10.0.0.2" in s.create
    assert "findmnt -n -o SOURCE,FSTYPE --mountpoint /gfsv" in s.create
    assert "umount /gfsv" in (s.delete or "")


def test_ganesha_config_updates_exports_in_place_and_checks_serving():
    s = render_ganesha.ganesha_config("s1", "conf", "gv0", (4,))
    assert s.file_path == "/etc/ganesha/ganesha.conf" and s.file_content == "conf"
    assert "hpc_put_file /etc/ganesha/ganesha.conf 0644 0:0" in s.create
    assert "UpdateExport string:/etc/ganesha/ganesha.conf" in s.create
    assert "ExecStartPre=/usr/local/lib/hpc-cluster/ganesha-wait-volume gv0 300" in s.create
    assert "TimeoutStartSec=360" in s.create and "Restart=on-failure" in s.create  # the wait outlasts 90 s
    assert "After=glusterd.service" in s.create
    assert "grep -qF 'string \"/gv0\"'" in s.create  # serving = the export manager lists the export
