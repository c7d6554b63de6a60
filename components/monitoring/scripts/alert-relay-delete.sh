#@ Stop the alert relay and remove it and the webhook URLs it held.
hpc_service_down hpc-alert-relay
rm -rf @unit_dir@/hpc-alert-relay.service @libexec@/alert_relay.py @url_dir@
systemctl daemon-reload
hpc_changed "removed the alert relay and the webhook URLs"
