#@ Alertmanager on the head, one instance (no cluster port), with TLS and the login; its config
#@ (no secrets: webhooks go through the relay) arrives on stdin and is checked by amtool before
#@ it replaces the running one.
hpc_install prometheus-alertmanager
staged=$(mktemp)
trap 'rm -f "$staged"' EXIT
cat > "$staged"
out=$(amtool check-config "$staged" 2>&1) || hpc_fail "amtool refused the rendered config: $out"
gid=$(getent group prometheus | cut -d: -f3) || hpc_fail "no prometheus group: the package did not install"
hpc_put_file /etc/prometheus/alertmanager.yml 0640 "0:$gid" < "$staged"
reload=$HPC_FILE_CHANGED
hpc_put_file /etc/default/prometheus-alertmanager 0644 0:0 <<'HPC_FILE_END'
# Managed by hpc-cluster (Pulumi)
ARGS="@args@"
HPC_FILE_END
if [ "$HPC_FILE_CHANGED" = 1 ] && systemctl is-active --quiet prometheus-alertmanager; then
  systemctl restart prometheus-alertmanager
  hpc_changed "restarted alertmanager (its arguments changed)"
elif [ "$reload" = 1 ] && systemctl is-active --quiet prometheus-alertmanager; then
  systemctl reload prometheus-alertmanager
  hpc_changed "reloaded alertmanager"
fi
hpc_service_up prometheus-alertmanager
ready() {  # the login goes to curl on a pipe, never on its command line
  local p
  p=$(cat @password_file@)
  p=${p//\\/\\\\}
  curl -fsS -o /dev/null --cacert @cert@ -K <(printf 'user = "%s:%s"\n' @user@ "${p//\"/\\\"}") "$1"
}
hpc_wait 60 "alertmanager on https://127.0.0.1:@port@ with the login" ready https://127.0.0.1:@port@/-/ready
