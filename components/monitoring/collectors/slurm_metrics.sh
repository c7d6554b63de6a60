#!/usr/bin/env bash
# Slurm node states, GPU allocation and whether slurmctld and slurmdbd answer, for node
# exporter's textfile collector (hpc-cluster).
# Usage: slurm_metrics.sh CONTAINER OUTPUT.prom  (runs sinfo/squeue inside the head container)
set -euo pipefail
container=$1 out=$2
nodes=$(docker exec "$container" sinfo -h -N -o '%N %t %G' 2>&1) || { echo "slurm_metrics: sinfo: $nodes" >&2; up=0; nodes=""; }
up=${up:-1}
# slurmdbd answers sacctmgr (through the controller host's munge); fair share and accounting need it
if dbd=$(docker exec "$container" sacctmgr -n -P list cluster format=cluster 2>&1); then
  dbd_up=1
else
  echo "slurm_metrics: sacctmgr: $dbd" >&2
  dbd_up=0
fi
tmp=$(mktemp "$(dirname "$out")/.slurm.XXXXXX")
{
  echo "# TYPE hpc_slurm_up gauge"
  echo "hpc_slurm_up $up"
  echo "# TYPE hpc_slurmdbd_up gauge"
  echo "hpc_slurmdbd_up $dbd_up"
  echo "# TYPE hpc_slurm_node_down gauge"
  echo "# TYPE hpc_slurm_node_drained gauge"
  echo "# TYPE hpc_slurm_node_gpus gauge"
  sort -u <<<"$nodes" | while read -r node state gres; do
    [ -n "$node" ] || continue
    base=$(tr -d '*~#!%$@^-' <<<"$state")  # sinfo's suffixes: not responding, powered down, ...
    down=0 drained=0
    case "$base" in down | fail | failg) down=1 ;; esac
    case "$base" in drain | drng) drained=1 ;; esac
    gpus=$(grep -o -m1 'gpu[^,(]*' <<<"$gres" | sed -n '1s/.*[^0-9]//p' || true)  # gpu:a100:2(S:0)
    echo "hpc_slurm_node_down{node=\"$node\",state=\"$base\"} $down"
    echo "hpc_slurm_node_drained{node=\"$node\"} $drained"
    echo "hpc_slurm_node_gpus{node=\"$node\"} ${gpus:-0}"
  done
  echo "# TYPE hpc_slurm_jobs gauge"
  for s in RUNNING PENDING; do
    n=$(docker exec "$container" squeue -h -t "$s" -o %i 2>/dev/null | grep -c . || true)
    echo "hpc_slurm_jobs{state=\"${s,,}\"} $n"
  done
  echo "# TYPE hpc_slurm_gpus_allocated gauge"
  alloc=$(docker exec "$container" squeue -h -t RUNNING -o '%b' 2>/dev/null | grep -o 'gpu[^,(]*' | grep -o '[0-9]*$' | awk '{ s += $1 } END { print s + 0 }' || true)
  echo "hpc_slurm_gpus_allocated ${alloc:-0}"
} > "$tmp"
chmod 0644 "$tmp"
mv -f "$tmp" "$out"
