#@ The controller's state and the accounting database directories on the head host. The paths in
#@ use are recorded on the host; a changed path whose old directory holds data is refused (nothing
#@ changes), unless the stack says migrate: then the head container is stopped (slurmctld saves its
#@ state, MariaDB flushes), the data copied and compared, and the old directory kept.
record=@record@
migrate=@migrate@
declare -A old=()
if [ -f "$record" ]; then
  while IFS='=' read -r key value; do old[$key]=$value; done <"$record"
fi

holds_data() { [ -d "$1" ] && [ -n "$(ls -A "$1")" ]; }

# moves: KEY OLD NEW triples the stack asks for
moves=()
for pair in "statePath:"@state_path@ "dbPath:"@db_path@; do
  key=${pair%%:*}
  new=${pair#*:}
  from=${old[$key]:-}
  if [ -z "$from" ] || [ "$from" = "$new" ] || ! holds_data "$from"; then continue; fi
  if holds_data "$new"; then
    hpc_fail "hpc:slurm.$key moved from $from to $new, but $new already holds data: empty it or choose an empty directory (neither is changed)"
  fi
  if [ "$migrate" != 1 ]; then
    hpc_fail "hpc:slurm.$key moved from $from to $new: $from holds the cluster's history; set hpc:slurm.migrate: true to copy it with the daemons stopped, or set the path back (nothing changed)"
  fi
  moves+=("$key" "$from" "$new")
done

if [ ${#moves[@]} -gt 0 ]; then
  if [ "$(docker inspect -f '{{.State.Running}}' @container@ 2>/dev/null || true)" = true ]; then
    out=$(docker stop @container@ 2>&1) || hpc_fail "docker stop @container@ failed: $out"
    hpc_changed "stopped @container@ to move its data"
  fi
  for ((i = 0; i < ${#moves[@]}; i += 3)); do
    from=${moves[i + 1]}
    new=${moves[i + 2]}
    mkdir -p "$new"
    out=$(cp -a -- "$from/." "$new/" 2>&1) || hpc_fail "copying $from to $new failed: $out"
    out=$(diff -r --no-dereference -- "$from" "$new" 2>&1) || hpc_fail "the copy of $from in $new differs: $(head -n 3 <<<"$out")"
    hpc_changed "copied $from to $new ($(find "$new" | wc -l) entries, compared); $from is kept: remove it once the cluster is checked"
  done
fi

hpc_dir @state_path@ 0700 @owner@
hpc_mkdir @db_path@
printf 'statePath=%s\ndbPath=%s\n' @state_path@ @db_path@ | hpc_put_file "$record" 0644 0:0
