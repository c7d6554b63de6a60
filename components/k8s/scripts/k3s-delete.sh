#@ Stop and remove k3s; its cluster data stays.
hpc_service_down @unit_name@
rm -f @files@
systemctl daemon-reload
echo "hpc: keeping /var/lib/rancher/k3s (cluster data); remove it by hand to wipe the node"
