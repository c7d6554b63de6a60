#@ Probe every other storage host the pool does not know by any name; wait until all are connected
#@ (hosts matched by peer UUID: a pool probed by host name is recognised).
wanted=(@others@)
if [ ${#wanted[@]} -gt 0 ]; then
  states=$(hpc_gq peers "${wanted[@]}" 2>&1) || hpc_fail "gluster pool list failed on $(hostname): $states"
  while read -r addr _ state; do
    if [ "$state" = unknown ]; then
      gcall "gluster peer probe $addr" peer probe "$addr" >/dev/null
      hpc_changed "probed $addr"
    fi
  done <<<"$states"
  limit=@timeout@
  for ((i = 0; i < limit; i++)); do
    states=$(hpc_gq peers "${wanted[@]}" 2>&1) || hpc_fail "gluster pool list failed on $(hostname): $states"
    bad=$(gluster_not_connected "$states")
    [ -z "$bad" ] && break
    sleep 1
  done
  [ -z "$bad" ] \
    || hpc_fail "storage peers not connected after @timeout@s (gluster pool list on $(hostname)): $bad"
fi
