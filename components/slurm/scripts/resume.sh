#@ On the head: resume a node if this project drained it (never a node an admin drained).
sc() { docker exec @container@ scontrol "$@"; }
ours() { grep -qF @ours@ <<<"$(sc show node @node@ 2>/dev/null)"; }
if docker inspect @container@ >/dev/null 2>&1 && ours; then
  sc update nodename=@node@ state=resume
  hpc_changed "resumed @node@"
fi
