#@ Install or upgrade the pinned k3s release (binary checked against its published SHA-256 list,
#@ no curl | sh) with its own systemd unit; the join token on stdin, kept in a 0600 file.
token=$(cat)
[ -n "$token" ] || hpc_fail "no k3s join token on stdin"
want=@version@
have=$(/usr/local/bin/k3s --version 2>/dev/null | awk 'NR == 1 { print $3 }' || true)
restart=0
if [ "$have" != "$want" ]; then
  tmp=$(mktemp -d)
  trap 'rm -rf "$tmp"' EXIT
  curl -fsSL --retry 3 -o "$tmp/@binary@" "@releases@/@url_version@/@binary@"
  curl -fsSL --retry 3 -o "$tmp/sums" "@releases@/@url_version@/sha256sum-@suffix_arch@.txt"
  (cd "$tmp" && grep -E ' @binary@$' sums | sha256sum -c -) || hpc_fail "k3s @version@ checksum mismatch"
  install -m 0755 "$tmp/@binary@" /usr/local/bin/k3s
  hpc_changed "installed k3s $want (was ${have:-none})"
  restart=1
fi
mkdir -p @k3s_dir@
hpc_put_file @token_file@ 0600 0:0 < <(printf '%s\n' "$token")
if hpc_file_changed; then restart=1; fi
hpc_put_file @config_file@ 0644 0:0 <<'K3S_CONFIG'
@config@
K3S_CONFIG
if hpc_file_changed; then restart=1; fi
hpc_put_file @unit_file@ 0644 0:0 <<'K3S_UNIT'
@unit@
K3S_UNIT
if hpc_file_changed; then
  systemctl daemon-reload
  restart=1
fi
if [ "$restart" = 1 ] && systemctl is-active --quiet @unit_name@; then
  systemctl restart @unit_name@
  hpc_changed "restarted @unit_name@"
fi
hpc_service_up @unit_name@
@ready@
