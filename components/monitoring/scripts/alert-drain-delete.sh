#@ Stop the alert receiver and remove it and its token; drains it made stay (an admin resumes).
hpc_service_down hpc-alert-drain
rm -f @unit_dir@/hpc-alert-drain.service @libexec@/alert_drain.py @token@
systemctl daemon-reload
hpc_changed "removed the alert receiver (nodes it drained stay drained)"
