#@ The stack's reservations in slurmctld (see components/slurm/render_scheduling.py). Table:
#@ name|nodes|start|end|accounts|users|flags (times on the controller's clock).
sc() { docker exec @container@ scontrol "$@"; }
# field NAME LINE: a KEY=value field of scontrol's one-line output.
field() { grep -o "\b$1=[^ ]*" <<<"$2" | sed -n "1s/^$1=//p"; }
nodes_of() { sc show hostnames "$1" | sort | paste -sd,; }
flags_of() { tr ',' '\n' <<<"${1,,}" | grep -vxE 'spec_nodes|' | sort | paste -sd,; }
none() { [ "$1" = "(null)" ] && echo "" || echo "$1"; }
rows=$(cat <<'HPC_RESERVATIONS'
@rows@
HPC_RESERVATIONS
)
now=$(date -u +%s)
while IFS='|' read -r name nodes start end accounts users flags; do
  [ -n "$name" ] || continue
  if [ "$(date -u -d "$end" +%s)" -le "$now" ]; then
    echo "hpc: reservation $name ended at $end: nothing to do (Slurm purges ended reservations)"
    continue
  fi
  begin=$start
  [ "$(date -u -d "$start" +%s)" -gt "$now" ] || begin=now  # a window already open starts at once
  want_users=$users
  [ -n "$accounts$users" ] || want_users=root  # Slurm wants someone: root alone, by default
  who=()
  [ -z "$accounts" ] || who+=("Accounts=$accounts")
  [ -z "$want_users" ] || who+=("Users=$want_users")
  have=$(sc show reservation "$name" -o 2>/dev/null || true)
  if [ -n "$have" ] && [ "$(field ReservationName "$have")" = "$name" ]; then
    if [ "$(flags_of "$(field Flags "$have")")" != "$flags" ] || [ "$(none "$(field Accounts "$have")")" != "$accounts" ] \
      || [ "$(none "$(field Users "$have")")" != "$want_users" ]; then
      out=$(sc delete reservation "$name" 2>&1) || hpc_fail "scontrol refused to delete reservation $name: $out"
      hpc_changed "deleted reservation $name to change its flags or who may use it"
      have=""
    elif [ "$(nodes_of "$(field Nodes "$have")")" != "$nodes" ] || [ "$(field EndTime "$have")" != "$end" ] \
      || { [ "$begin" != now ] && [ "$(field StartTime "$have")" != "$start" ]; }; then
      out=$(sc update reservation ReservationName="$name" Nodes="$nodes" StartTime="$begin" EndTime="$end" 2>&1) \
        || hpc_fail "scontrol refused to change reservation $name: $out"
      hpc_changed "changed reservation $name: nodes $nodes, $start to $end"
    fi
  else
    have=""
  fi
  if [ -z "$have" ]; then
    out=$(sc create reservation ReservationName="$name" Nodes="$nodes" StartTime="$begin" EndTime="$end" \
      Flags="$flags" "${who[@]}" 2>&1) || hpc_fail "scontrol refused to create reservation $name: $out"
    hpc_changed "created reservation $name: nodes $nodes, $start to $end"
  fi
done <<<"$rows"
# Reservations this project made that the stack no longer lists.
while read -r old; do
  [ -n "$old" ] || continue
  if ! grep -q "^$old|" <<<"$rows" && [ -n "$(sc show reservation "$old" -o 2>/dev/null || true)" ]; then
    out=$(sc delete reservation "$old" 2>&1) || hpc_fail "scontrol refused to delete reservation $old: $out"
    hpc_changed "deleted reservation $old (no longer in hpc:slurm.scheduling.reservations)"
  fi
done < <(cat @managed_file@ 2>/dev/null || true)
hpc_put_file @managed_file@ 0644 0:0 < <(cut -d'|' -f1 <<<"$rows" | grep -v '^$' || true)
