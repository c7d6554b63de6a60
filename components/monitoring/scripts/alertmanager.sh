#@ Alertmanager on the head; its config (the webhook URL is a secret) arrives on stdin and is
#@ checked by amtool before it replaces the running one.
hpc_install prometheus-alertmanager
staged=$(mktemp)
trap 'rm -f "$staged"' EXIT
cat > "$staged"
out=$(amtool check-config "$staged" 2>&1) || hpc_fail "amtool refused the rendered config: $out"
gid=$(getent group prometheus | cut -d: -f3) || hpc_fail "no prometheus group: the package did not install"
hpc_put_file /etc/prometheus/alertmanager.yml 0640 "0:$gid" < "$staged"
if [ "$HPC_FILE_CHANGED" = 1 ] && systemctl is-active --quiet prometheus-alertmanager; then
  systemctl reload prometheus-alertmanager
  hpc_changed "reloaded alertmanager"
fi
hpc_service_up prometheus-alertmanager
