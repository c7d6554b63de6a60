#@ Prometheus on the head: config and rules checked by promtool before they replace the running
#@ ones; a reload (SIGHUP), not a restart, when only they changed. TLS and the login come from
#@ the monitoring-web step; a run ends once Prometheus answers with them.
hpc_install prometheus
staged=$(mktemp -d)
trap 'rm -rf "$staged"' EXIT
cat > "$staged/prometheus.yml" <<'HPC_FILE_END'
@config@
HPC_FILE_END
cat > "$staged/hpc-rules.yml" <<'HPC_FILE_END'
@rules@
HPC_FILE_END
sed -i "s#/etc/prometheus/hpc-rules.yml#$staged/hpc-rules.yml#" "$staged/prometheus.yml"
out=$(promtool check config "$staged/prometheus.yml" 2>&1) \
  || hpc_fail "promtool refused the rendered config: $out"
sed -i "s#$staged/hpc-rules.yml#/etc/prometheus/hpc-rules.yml#" "$staged/prometheus.yml"
hpc_put_file /etc/prometheus/hpc-rules.yml 0644 0:0 < "$staged/hpc-rules.yml"
reload=$HPC_FILE_CHANGED
hpc_put_file /etc/prometheus/prometheus.yml 0644 0:0 < "$staged/prometheus.yml"
[ "$HPC_FILE_CHANGED" = 1 ] && reload=1
hpc_put_file /etc/default/prometheus 0644 0:0 <<'HPC_FILE_END'
# Managed by hpc-cluster (Pulumi)
ARGS="@args@"
HPC_FILE_END
if [ "$HPC_FILE_CHANGED" = 1 ] && systemctl is-active --quiet prometheus; then
  systemctl restart prometheus
  hpc_changed "restarted prometheus (its arguments changed)"
elif [ "$reload" = 1 ] && systemctl is-active --quiet prometheus; then
  systemctl reload prometheus
  hpc_changed "reloaded prometheus"
fi
hpc_service_up prometheus
ready() {  # the login goes to curl on a pipe, never on its command line
  local p
  p=$(cat @password_file@)
  p=${p//\\/\\\\}
  curl -fsS -o /dev/null --cacert @cert@ -K <(printf 'user = "%s:%s"\n' @user@ "${p//\"/\\\"}") "$1"
}
hpc_wait 60 "prometheus on https://127.0.0.1:@port@ with the login" ready https://127.0.0.1:@port@/-/ready
