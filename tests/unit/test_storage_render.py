"""Storage renderers: exact ganesha.conf, fstab line, volume options, script contracts."""

from ipaddress import IPv4Network

from components.accounts import SharedDir
from components.storage import render


def export(**kw):
    base = dict(
        volume="gv0",
        pseudo="/gv",
        nfs_versions=(4,),
        clients=(IPv4Network("192.168.0.0/24"),),
        squash="root_squash",
        grace=True,
    )
    return render.ExportSpec(**(base | kw))


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
    assert render.ganesha_conf(export(), "192.168.0.106") == GANESHA_V4


def test_ganesha_conf_v3_adds_mountd_and_nlm():
    text = render.ganesha_conf(export(nfs_versions=(3, 4), grace=False), "10.0.0.1")
    assert "    Protocols = 3, 4;\n" in text and "MNT_Port = 20048;" in text
    assert "Enable_NLM = true;" in text and "Graceless = true;" in text


def test_ganesha_conf_lists_every_client_network():
    text = render.ganesha_conf(export(clients=(IPv4Network("10.0.0.0/24"), IPv4Network("10.1.0.0/16"))), "h")
    assert "Clients = 10.0.0.0/24, 10.1.0.0/16;" in text


def test_fstab_line_has_backup_volfile_servers():
    assert render.fstab_line(["10.0.0.1", "10.0.0.2", "10.0.0.3"], "gv0", "/gfsv") == (
        "10.0.0.1:/gv0 /gfsv glusterfs defaults,_netdev,backup-volfile-servers=10.0.0.2:10.0.0.3 0 0"
    )


def test_volume_options_have_quorum_and_owner_and_extras_win():
    opts = render.volume_options(1000, 1001, {"network.ping-timeout": "10"})
    assert opts["cluster.quorum-type"] == "auto"
    assert opts["cluster.server-quorum-type"] == "server"
    assert (opts["storage.owner-uid"], opts["storage.owner-gid"]) == ("1000", "1001")
    assert opts["network.ping-timeout"] == "10"
    assert list(opts) == sorted(opts)


def _spec(allow_destroy=False, arbiter=False):
    bricks = tuple(render.Brick(f"s{i}", f"10.0.0.{i}", "/b") for i in (1, 2, 3))
    return render.VolumeSpec("gv0", 2 if arbiter else 3, arbiter, bricks, (), allow_destroy)


def test_volume_create_command_and_verification():
    s = render.volume("s1", _spec())
    assert "g volume create gv0 replica 3 $want_bricks" in s.create
    assert 'want_bricks="10.0.0.1:/b 10.0.0.2:/b 10.0.0.3:/b"' in s.create
    assert "refusing to change it" in s.create
    assert "force" not in s.create  # never force a volume into shape
    arb = render.volume("s1", _spec(arbiter=True))
    assert "replica 2 arbiter 1 $want_bricks" in arb.create


def test_volume_delete_keeps_data_unless_allowed():
    assert "volume delete" not in (render.volume("s1", _spec()).delete or "")
    assert "keeping volume gv0" in (render.volume("s1", _spec()).delete or "")
    assert "g volume delete gv0" in (render.volume("s1", _spec(allow_destroy=True)).delete or "")
    assert "rm -rf" not in (render.brick("s1", "/b", False).delete or "")
    assert "rm -rf --one-file-system '/b'" in (render.brick("s1", "/b", True).delete or "")


def test_client_mount_creates_the_shared_layout():
    s = render.client_mount("h", ["10.0.0.1", "10.0.0.2"], "gv0", "/gfsv", (SharedDir("munge", 0o700, 991, 991),))
    assert "hpc_dir '/gfsv/munge' 0700 991:991" in s.create
    assert "backup-volfile-servers=10.0.0.2" in s.create
    assert "umount '/gfsv'" in (s.delete or "")


def test_ganesha_config_installs_from_stdin_and_restarts_only_on_change():
    s = render.ganesha_config("s1", "conf", (4,))
    assert s.file_path == "/etc/ganesha/ganesha.conf" and s.file_content == "conf"
    assert "hpc_put_file /etc/ganesha/ganesha.conf 0644 0:0" in s.create
    assert "if hpc_file_changed && systemctl is-active --quiet nfs-ganesha; then" in s.create
