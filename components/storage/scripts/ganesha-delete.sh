#@ Stop Ganesha and remove what ganesha.sh installed.
hpc_service_down nfs-ganesha
for f in @files@; do
  if [ -f "$f" ]; then
    rm -f "$f"
    hpc_changed "removed $f"
  fi
done
systemctl daemon-reload
