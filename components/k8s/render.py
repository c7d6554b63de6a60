"""Pure renderers for k3s: install scripts for the server and agents, the kubeconfig read-back.

No ``curl | sh``: the script downloads the pinned release's binary and its published SHA-256
list, verifies the binary, and installs it with its own systemd unit. Same version installed:
nothing is downloaded; another version: the binary is replaced and the service restarted
(upgrade). The join token arrives on stdin and is kept in a 0600 file (``token-file``).
"""

from __future__ import annotations

from components.scripts import RemoteScript, no_undo, script

RELEASES = "https://github.com/k3s-io/k3s/releases/download"
K3S_DIR = "/etc/rancher/k3s"
TOKEN_FILE = f"{K3S_DIR}/token"
CONFIG_FILE = f"{K3S_DIR}/config.yaml"
KUBECONFIG = f"{K3S_DIR}/k3s.yaml"
API_PORT = 6443
READY_TIMEOUT_S = 180
ARCH = {"x86_64": ("amd64", "k3s"), "aarch64": ("arm64", "k3s-arm64")}


def server_config(host: str, address: str) -> str:
    return (
        "# Managed by hpc-cluster (Pulumi).\n"
        f"node-name: {host}\n"
        f"node-ip: {address}\n"
        f"token-file: {TOKEN_FILE}\n"
        'write-kubeconfig-mode: "0600"\n'
        f"tls-san:\n  - {address}\n"
        # k3s's bundled Traefik (and its CRDs, ServiceLB on ports 80/443) stays on: the web UI and
        # the model APIs are exposed through its Ingresses and Middlewares (inference/exposure.py)
    )


def agent_config(host: str, address: str, server_address: str) -> str:
    return (
        "# Managed by hpc-cluster (Pulumi).\n"
        f"node-name: {host}\n"
        f"node-ip: {address}\n"
        f"server: https://{server_address}:{API_PORT}\n"
        f"token-file: {TOKEN_FILE}\n"
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
    url_version = version.replace("+", "%2B")
    ready = (
        f'hpc_wait {READY_TIMEOUT_S} "the k3s API" /usr/local/bin/k3s kubectl get --raw /readyz\n'
        if role == "server"
        else ""
    )
    create = script(
        host,
        f"{host}-k3s",
        f"""\
token=$(cat)
[ -n "$token" ] || hpc_fail "no k3s join token on stdin"
want={version}
have=$(/usr/local/bin/k3s --version 2>/dev/null | awk 'NR == 1 {{ print $3 }}' || true)
restart=0
if [ "$have" != "$want" ]; then
  tmp=$(mktemp -d)
  trap 'rm -rf "$tmp"' EXIT
  curl -fsSL --retry 3 -o "$tmp/{binary}" "{RELEASES}/{url_version}/{binary}"
  curl -fsSL --retry 3 -o "$tmp/sums" "{RELEASES}/{url_version}/sha256sum-{suffix_arch}.txt"
  (cd "$tmp" && grep -E ' {binary}$' sums | sha256sum -c -) || hpc_fail "k3s {version} checksum mismatch"
  install -m 0755 "$tmp/{binary}" /usr/local/bin/k3s
  hpc_changed "installed k3s $want (was ${{have:-none}})"
  restart=1
fi
mkdir -p {K3S_DIR}
hpc_put_file {TOKEN_FILE} 0600 0:0 < <(printf '%s\\n' "$token")
if hpc_file_changed; then restart=1; fi
hpc_put_file {CONFIG_FILE} 0644 0:0 <<'K3S_CONFIG'
{config.rstrip()}
K3S_CONFIG
if hpc_file_changed; then restart=1; fi
hpc_put_file {unit_file} 0644 0:0 <<'K3S_UNIT'
{_unit(role).rstrip()}
K3S_UNIT
if hpc_file_changed; then
  systemctl daemon-reload
  restart=1
fi
if [ "$restart" = 1 ] && systemctl is-active --quiet {unit_name}; then
  systemctl restart {unit_name}
  hpc_changed "restarted {unit_name}"
fi
hpc_service_up {unit_name}
{ready}""",
        extra_headers={"secret-stdin": "k3s-token"},
    )
    delete = script(
        host,
        f"{host}-k3s-delete",
        f"""\
hpc_service_down {unit_name}
rm -f {unit_file} {CONFIG_FILE} {TOKEN_FILE} /usr/local/bin/k3s
systemctl daemon-reload
echo "hpc: keeping /var/lib/rancher/k3s (cluster data); remove it by hand to wipe the node"
""",
    )
    return RemoteScript(f"{host}-k3s", host, create, delete)


def read_kubeconfig(host: str, address: str) -> RemoteScript:
    """Print the server's kubeconfig with the API address rewritten to the server host."""
    create = script(
        host,
        f"{host}-kubeconfig",
        f"""\
sed 's#https://127.0.0.1:{API_PORT}#https://{address}:{API_PORT}#' {KUBECONFIG}
""",
        extra_headers={"mock-stdout": "kubeconfig"},
    )
    # stdout is the kubeconfig itself: the result line goes to stderr.
    create = create.replace("\nhpc_done\n", "\nhpc_done >&2\n")
    delete = no_undo(host, f"{host}-kubeconfig")
    return RemoteScript(f"{host}-kubeconfig", host, create, delete)
