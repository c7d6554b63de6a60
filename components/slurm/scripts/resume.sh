#@ On the head: resume a node if this project drained it (never a node an admin drained). A
#@ controller that does not answer is waited for, then the step fails: the node would stay drained.
sc() { docker exec @container@ scontrol "$@"; }
controller_up() {
  local out
  out=$(sc ping 2>&1) || true
  grep -q 'is UP' <<<"$out" || { printf '%s\n' "$out"; return 1; }
}
hpc_wait @controller_timeout@ "the controller (slurmctld in @container@) to answer before resuming @node@" \
  controller_up
if grep -qF @ours@ <<<"$(sc show node @node@ 2>/dev/null)"; then
  sc update nodename=@node@ state=resume
  hpc_changed "resumed @node@"
fi
