"""Pure renderers for k3s: install scripts for the server and agents, the kubeconfig read-back.

No ``curl | sh``: the script downloads the pinned release's binary and its published SHA-256
list, verifies the binary, and installs it with its own systemd unit. Same version installed:
nothing is downloaded; another version: the binary is replaced and the service restarted
(upgrade). The join token arrives on stdin and is kept in a 0600 file (``token-file``).
"""

from __future__ import annotations

from pathlib import Path

import yaml

from components.scripts import Raw, RemoteScript, fill, no_undo, script

SCRIPTS = Path(__file__).with_name("scripts")
RELEASES = "https://github.com/k3s-io/k3s/releases/download"
K3S_DIR = "/etc/rancher/k3s"
TOKEN_FILE = f"{K3S_DIR}/token"
CONFIG_FILE = f"{K3S_DIR}/config.yaml"
KUBECONFIG = f"{K3S_DIR}/k3s.yaml"
API_PORT = 6443
READY_TIMEOUT_S = 180
ARCH = {"x86_64": ("amd64", "k3s"), "aarch64": ("arm64", "k3s-arm64")}


def _config(settings: dict[str, object]) -> str:
    """A k3s config.yaml (k3s reads its flags' names as keys)."""
    return "# Managed by hpc-cluster (Pulumi).\n" + yaml.safe_dump(settings, sort_keys=False, default_flow_style=False)


def server_config(host: str, address: str) -> str:
    # k3s's bundled Traefik (and its CRDs, ServiceLB on ports 80/443) stays on: the web UI and
    # the model APIs are exposed through its Ingresses and Middlewares (inference/exposure.py)
    return _config(
        {
            "node-name": host,
            "node-ip": address,
            "token-file": TOKEN_FILE,
            "write-kubeconfig-mode": "0600",
            "tls-san": [address],
        }
    )


def agent_config(host: str, address: str, server_address: str) -> str:
    return _config(
        {
            "node-name": host,
            "node-ip": address,
            "server": f"https://{server_address}:{API_PORT}",
            "token-file": TOKEN_FILE,
        }
    )


def _unit(role: str) -> str:
    return f"""\
[Unit]
Description=k3s {role} (managed by hpc-cluster)
Wants=network-online.target
After=network-online.target

[Service]
Type={"notify" if role == "server" else "exec"}
ExecStartPre=-/sbin/modprobe br_netfilter
ExecStartPre=-/sbin/modprobe overlay
ExecStart=/usr/local/bin/k3s {role}
KillMode=process
Delegate=yes
LimitNOFILE=1048576
LimitNPROC=infinity
LimitCORE=infinity
TasksMax=infinity
TimeoutStartSec=0
Restart=always
RestartSec=5s

[Install]
WantedBy=multi-user.target
"""


def install(host: str, role: str, version: str, arch: str, config: str) -> RemoteScript:
    """Install or upgrade k3s ``version`` as ``role`` (server|agent); token on stdin."""
    unit_name = "k3s" if role == "server" else "k3s-agent"
    unit_file = f"/etc/systemd/system/{unit_name}.service"
    suffix_arch, binary = ARCH[arch]
    ready = f'hpc_wait {READY_TIMEOUT_S} "the k3s API" /usr/local/bin/k3s kubectl get --raw /readyz'
    body = fill(
        SCRIPTS / "k3s.sh",
        version=version,
        binary=binary,
        releases=RELEASES,
        url_version=version.replace("+", "%2B"),
        suffix_arch=suffix_arch,
        k3s_dir=K3S_DIR,
        token_file=TOKEN_FILE,
        config_file=CONFIG_FILE,
        config=Raw(config.rstrip()),
        unit_file=unit_file,
        unit=Raw(_unit(role).rstrip()),
        unit_name=unit_name,
        ready=Raw(ready if role == "server" else ""),
    )
    create = script(host, f"{host}-k3s", body, extra_headers={"secret-stdin": "k3s-token"})
    undo = fill(
        SCRIPTS / "k3s-delete.sh", unit_name=unit_name, files=[unit_file, CONFIG_FILE, TOKEN_FILE, "/usr/local/bin/k3s"]
    )
    return RemoteScript(f"{host}-k3s", host, create, script(host, f"{host}-k3s-delete", undo))


def read_kubeconfig(host: str, address: str) -> RemoteScript:
    """Print the server's kubeconfig with the API address rewritten to the server host."""
    create = script(
        host,
        f"{host}-kubeconfig",
        fill(SCRIPTS / "kubeconfig.sh", port=API_PORT, address=address, kubeconfig=KUBECONFIG),
        extra_headers={"mock-stdout": "kubeconfig"},
        stdout_is_output=True,
    )
    delete = no_undo(host, f"{host}-kubeconfig")
    return RemoteScript(f"{host}-kubeconfig", host, create, delete)
