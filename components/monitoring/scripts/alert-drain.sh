#@ The alert receiver on the head that drains the Slurm node a hardware alert names
#@ (programs/alert_drain.py, on 127.0.0.1 only), and the token Alertmanager authenticates with:
#@ made here once, readable by root and Alertmanager's group, never in the plan or the state.
hpc_install python3 curl prometheus-alertmanager
hpc_dir @libexec@ 0755 0:0
restart=0
hpc_put_file @libexec@/alert_drain.py 0755 0:0 <<'HPC_FILE_END'
@program@
HPC_FILE_END
if hpc_file_changed; then restart=1; fi
gid=$(getent group prometheus | cut -d: -f3) || hpc_fail "no prometheus group: prometheus-alertmanager did not install"
if [ ! -s @token@ ]; then
  tmp=$(mktemp "@token@.XXXXXX")
  python3 -c 'import secrets; print(secrets.token_hex(32))' >"$tmp"
  mv -f "$tmp" @token@
  hpc_changed "made the alert receiver's token"
fi
hpc_fix_mode @token@ 0640 "0:$gid"
hpc_put_file @unit_dir@/hpc-alert-drain.service 0644 0:0 <<'HPC_FILE_END'
@unit@
HPC_FILE_END
if hpc_file_changed; then
  systemctl daemon-reload
  restart=1
fi
if [ "$restart" = 1 ] && systemctl is-active --quiet hpc-alert-drain; then
  systemctl restart hpc-alert-drain
  hpc_changed "restarted the alert receiver"
fi
hpc_service_up hpc-alert-drain
hpc_wait @timeout@ "the alert receiver on 127.0.0.1:@port@" curl -fsS -o /dev/null http://127.0.0.1:@port@/healthz
