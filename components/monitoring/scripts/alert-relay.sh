#@ The relay on the head that posts Alertmanager's notifications to the site's webhooks
#@ (programs/alert_relay.py, on 127.0.0.1 only): their URLs are secrets, arrive on stdin (JSON,
#@ receiver -> URL) and are kept in files only root reads, so no UI or config shows them.
hpc_install python3 curl jq prometheus-alertmanager
[ -s @token@ ] || hpc_fail "no receivers' token @token@ (the alert-drain step makes it first)"
urls=$(cat)
jq -e 'type == "object"' >/dev/null <<<"$urls" || hpc_fail "the webhook URLs on stdin are not a JSON object"
hpc_dir @url_dir@ 0700 0:0
for receiver in @receivers@; do
  url=$(jq -r --arg r "$receiver" '.[$r] // empty' <<<"$urls")
  if [ -n "$url" ]; then
    hpc_put_file "@url_dir@/$receiver.url" 0600 0:0 < <(printf '%s\n' "$url")
  elif [ -e "@url_dir@/$receiver.url" ]; then
    rm -f "@url_dir@/$receiver.url"
    hpc_changed "removed the $receiver webhook"
  fi
done
hpc_dir @libexec@ 0755 0:0
restart=0
hpc_put_file @libexec@/alert_relay.py 0755 0:0 <<'HPC_FILE_END'
@program@
HPC_FILE_END
if hpc_file_changed; then restart=1; fi
hpc_put_file @unit_dir@/hpc-alert-relay.service 0644 0:0 <<'HPC_FILE_END'
@unit@
HPC_FILE_END
if hpc_file_changed; then
  systemctl daemon-reload
  restart=1
fi
if [ "$restart" = 1 ] && systemctl is-active --quiet hpc-alert-relay; then
  systemctl restart hpc-alert-relay
  hpc_changed "restarted the alert relay"
fi
hpc_service_up hpc-alert-relay
hpc_wait @timeout@ "the alert relay on 127.0.0.1:@port@" curl -fsS -o /dev/null http://127.0.0.1:@port@/healthz
