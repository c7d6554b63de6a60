#@ Remove the monitoring login and certificate (Prometheus and Alertmanager are removed first).
if [ -e @dir@ ]; then
  rm -rf @dir@
  hpc_changed "removed @dir@ (the monitoring certificate, key and login)"
fi
