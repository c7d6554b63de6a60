#!/bin/bash
#@ hpc-cluster's GPU check around every job on @node@, in Slurm's Prolog (before the job starts,
#@ PrologFlags=Alloc) and Epilog (after it ended), run by slurmd as root with the job's
#@ environment and no PATH. It looks only at the job's own GPUs (SLURM_JOB_GPUS: their device
#@ numbers, /dev/nvidia<n>, matched to nvidia-smi's "Minor Number"), never at GPUs other jobs
#@ hold on a shared node.
#@ prolog: a GPU of the job that runs a process or holds memory drains the node with the
#@   evidence and exits 1, so slurmd refuses the job and the controller requeues it elsewhere
#@   (SchedulerParameters=nohold_on_prolog_fail: requeued, not held).
#@ epilog: waits up to @wait_s@ s for the job's GPUs to be free (a process that ignores SIGKILL
#@   while the driver tears its context down), then drains the node with the evidence. It exits 0
#@   either way, so the reason stays this check's own, not Slurm's "Epilog error".
#@ Its drains start with @prefix@; nothing resumes them (an admin looks at the GPU first), and a
#@ node drained already (by anyone) keeps its reason.
set -euo pipefail
export PATH="${PATH:-/usr/sbin:/usr/bin:/sbin:/bin}"

node=@node@
gpus=@gpus@               # GPUs Slurm owns on this node: 0 on a CPU node (nothing to check)
phase=@phase@             # prolog or epilog
prefix=@prefix@
busy_mib=@busy_mib@       # memory in use above this on a GPU with no job yet: someone holds it
wait_s=@wait_s@
poll_s=@poll_s@
tool_timeout=@tool_timeout@

[ "$gpus" -gt 0 ] || exit 0
job=${SLURM_JOB_ID:-unknown}
wanted=${SLURM_JOB_GPUS:-}
[ -n "$wanted" ] || exit 0  # the job has no GPU on this node

say() {
  echo "hpc-gpu: $node: $phase of job $job: $*" >&2
}

# last_line TEXT: the tool's own last line, for evidence.
last_line() {
  local line
  line=$(tail -n 1 <<<"$1")
  printf '%s' "${line:-no output}"
}

# drain REASON: drain this node with REASON unless it is drained already (by an admin, or by
# this check for an earlier job: the first evidence stays).
drain() {
  local want="$prefix $1" view reason="" out
  if view=$(timeout "$tool_timeout" scontrol -o show node "$node" 2>&1); then
    [[ "$view" =~ \ Reason=(.*)\ \[[^]]*\] ]] && reason=${BASH_REMATCH[1]}
    if [[ "$view" =~ \ State=[^\ ]*DRAIN ]] && [ -n "$reason" ]; then
      say "$1 (already drained: $reason)"
      return 0
    fi
  fi
  if ! out=$(timeout "$tool_timeout" scontrol update nodename="$node" state=drain reason="$want" 2>&1); then
    say "$1; scontrol refused the drain: $(last_line "$out")"
    return 1
  fi
  say "drained: $1"
}

# busy: what holds the job's GPUs now, one line per GPU ("" when all are free); 2 when
# nvidia-smi cannot say.
busy() {
  local q apps mem minor bus used pid name app_bus app_mem found evidence="" n
  if ! q=$(timeout "$tool_timeout" nvidia-smi -q 2>&1) \
    || ! mem=$(timeout "$tool_timeout" nvidia-smi --query-gpu=pci.bus_id,memory.used \
      --format=csv,noheader,nounits 2>&1) \
    || ! apps=$(timeout "$tool_timeout" nvidia-smi \
      --query-compute-apps=gpu_bus_id,pid,process_name,used_gpu_memory --format=csv,noheader,nounits 2>&1); then
    echo "nvidia-smi failed: $(last_line "${apps:-${mem:-$q}}")"
    return 2
  fi
  for minor in ${wanted//,/ }; do
    # nvidia-smi -q: "GPU 00000000:17:00.0" opens a GPU's section, "Minor Number : 0" inside it.
    bus=$(awk -v m="$minor" '/^GPU [0-9A-Fa-f]+:/ {b = $2}
      /^ *Minor Number *:/ {v = $0; sub(/^[^:]*: */, "", v); if (v == m) {print b; exit}}' <<<"$q")
    if [ -z "$bus" ]; then
      evidence+="GPU $minor: not shown by nvidia-smi; "
      continue
    fi
    found=""
    n=0
    while IFS=, read -r app_bus pid name app_mem; do
      [ "${app_bus// /}" = "$bus" ] || continue
      n=$((n + 1))
      [ "$n" -le 3 ] && found+=" pid ${pid// /} ${name# } (${app_mem// /} MiB)"
    done <<<"$apps"
    [ "$n" -le 3 ] || found+=" and $((n - 3)) more"
    used=$(awk -F', *' -v b="$bus" '$1 == b {print $2; exit}' <<<"$mem")
    if [ -n "$found" ]; then
      evidence+="GPU $minor ($bus) runs$found; "
    elif [[ "$used" =~ ^[0-9]+$ ]] && [ "$used" -gt "$busy_mib" ]; then
      evidence+="GPU $minor ($bus) has $used MiB in use by a process this node cannot see; "
    fi
  done
  printf '%s' "${evidence%; }"
}

if [ "$phase" = prolog ]; then
  evidence=$(busy) || true  # a failed nvidia-smi is evidence too
  [ -n "$evidence" ] || exit 0
  drain "before job $job: $evidence" || true
  exit 1
fi

deadline=$((SECONDS + wait_s))
while :; do
  evidence=$(busy) || true  # a failed nvidia-smi is evidence too
  [ -n "$evidence" ] || exit 0
  [ "$SECONDS" -lt "$deadline" ] || break
  sleep "$poll_s"
done
drain "after job $job, for ${wait_s}s: $evidence" || true
exit 0
