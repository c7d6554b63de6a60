#@ The stack is deleted: the reservations this project made go (they would keep nodes from jobs).
while read -r old; do
  [ -n "$old" ] || continue
  if docker exec @container@ scontrol show reservation "$old" -o >/dev/null 2>&1; then
    docker exec @container@ scontrol delete reservation "$old"
    hpc_changed "deleted reservation $old"
  fi
done < <(cat @managed_file@ 2>/dev/null || true)
rm -f @managed_file@
