#@ On the head: drain a node before its container is replaced and wait for its jobs. Rolling: at
#@ most @max_unavailable@ nodes drained by hpc-cluster at once (checked and drained under a lock on
#@ the head). Bounded: jobs that outlast the timeout resume the node and fail the step naming them.
poll=@poll@
sc() { docker exec @container@ scontrol "$@"; }
controller_up() {
  local out
  out=$(sc ping 2>&1) || true
  grep -q 'is UP' <<<"$out" || { printf '%s\n' "$out"; return 1; }
}
draining() { grep -q 'State=[A-Z+]*DRAIN' <<<"$(sc show node @node@)"; }
drained() { grep -Eq 'State=(IDLE|DOWN)\+DRAIN|State=[A-Z+]*DRAINED' <<<"$(sc show node @node@)"; }
ours() { grep -qF @ours@ <<<"$(sc show node @node@)"; }
others() {
  sc -o show nodes | awk -v me=NodeName=@node@ -v r=@ours@ 'index($0, r) && $1 != me { print substr($1, 10) }' \
    | paste -sd' '
}
# A controller that does not answer (restarting, its container being replaced) is waited for, then
# the step fails: deciding "nothing to drain" blind would delete a busy worker with its jobs.
hpc_wait @controller_timeout@ "the controller (slurmctld in @container@) to answer before draining @node@" \
  controller_up
known=yes
if ! out=$(sc show node @node@ 2>&1); then
  grep -q 'not found' <<<"$out" || hpc_fail "scontrol show node @node@: $out"
  known=no  # the controller answers and has never heard of it (a first deployment)
fi
if [ "$known" = no ]; then
  echo "hpc: @node@ is not in Slurm yet: nothing to drain"
else
  exec 9>>/run/lock/hpc-cluster-drain.lock
  waited=0
  until draining; do
    flock 9
    busy=$(others)
    if [ "$(wc -w <<<"$busy")" -lt @max_unavailable@ ]; then
      sc update nodename=@node@ state=drain reason=@reason@
      hpc_changed "drained @node@ (at most @max_unavailable@ node(s) drained at once; others: ${busy:-none})"
    fi
    flock -u 9
    draining && break
    [ "$waited" -lt @timeout@ ] || hpc_fail "waited @timeout@s to drain @node@: @max_unavailable@ node(s) \
already drained for replacement ($busy); see hpc:slurm.maxUnavailable"
    sleep "$poll"
    waited=$((waited + poll))
  done
  waited=0
  until drained; do
    if [ "$waited" -ge @timeout@ ]; then
      jobs=$(docker exec @container@ squeue -h -w @node@ -o '%i(%u:%j)' | paste -sd' ')
      if ours; then sc update nodename=@node@ state=resume; fi
      hpc_fail "@node@ still runs jobs after @timeout@s: $jobs; resumed it and left its container as it is. \
Run pulumi up again once they end, or raise hpc:slurm.drainTimeoutSeconds"
    fi
    sleep "$poll"
    waited=$((waited + poll))
  done
fi
