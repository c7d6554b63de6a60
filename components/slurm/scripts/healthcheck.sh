#!/bin/bash
#@ hpc-cluster's node health check: Slurm's HealthCheckProgram on @node@ (slurmd runs it at start
#@ and every HealthCheckInterval, as root, with an empty environment). The first failed check
#@ drains the node with a reason naming the check and its evidence; a passing run resumes the
#@ node only when this check drained it (a drain by anyone else, an admin or a container
#@ replacement, is left alone). Exit 0 when healthy, 1 when a check failed.
set -euo pipefail
export PATH="${PATH:-/usr/sbin:/usr/bin:/sbin:/bin}"

node=@node@
gpus=@gpus@
model=@model@             # what each GPU's name must contain (lower case, letters and digits only)
fabric=@fabric@           # 1: NVSwitch board, Fabric Manager must have registered every GPU
shared=@shared@           # the shared volume as the container sees it
min_free_mib=@min_free_mib@
dirs=(@dirs@)             # the job and state directories that need free space
prefix=@prefix@           # every reason this check sets starts with it
critical_xids=(@xids@)  # XIDs that mean the node needs a reset or repair (NVIDIA's XID catalogue)
tool_timeout=@tool_timeout@

problem=""
fail() {
  [ -n "$problem" ] || problem=$1
}

# last_line TEXT: the tool's own last line, for evidence.
last_line() {
  local line
  line=$(tail -n 1 <<<"$1")
  printf '%s' "${line:-no output}"
}

check_gpus() {
  local out n=0 index bus name ecc pending key bus_ids=""
  if ! out=$(timeout "$tool_timeout" nvidia-smi \
    --query-gpu=index,pci.bus_id,name,ecc.errors.uncorrected.volatile.total,retired_pages.pending \
    --format=csv,noheader 2>&1); then
    fail "GPU: nvidia-smi failed: $(last_line "$out")"
    return
  fi
  while IFS=, read -r index bus name ecc pending; do
    [ -n "$index" ] || continue
    n=$((n + 1))
    bus=${bus// /} name=${name# } ecc=${ecc// /} pending=${pending// /}
    bus_ids+=" $bus"
    key=$(tr -cd '[:alnum:]' <<<"$name" | tr '[:upper:]' '[:lower:]')
    case "$key" in
      *"$model"*) ;;
      *) fail "GPU $index ($bus) is a $name, the profile says $model" ;;
    esac
    if [[ "$ecc" =~ ^[0-9]+$ ]] && [ "$ecc" -gt 0 ]; then
      fail "GPU $index ($bus): $ecc uncorrectable ECC errors since the driver loaded"
    fi
    if [ "$pending" = Yes ]; then
      fail "GPU $index ($bus): retired pages pending (the GPU needs a reset)"
    fi
  done <<<"$out"
  if [ "$n" -ne "$gpus" ]; then
    fail "GPU count: the profile says $gpus, nvidia-smi shows $n (${bus_ids# })"
  fi
  GPU_BUS_IDS=$bus_ids
}

# XIDs since boot, from the kernel log, for this node's own GPUs (the log names the PCI address).
check_xids() {
  local out line xid pci
  if ! out=$(timeout "$tool_timeout" dmesg 2>&1); then
    fail "kernel log: dmesg failed: $(last_line "$out")"
    return
  fi
  while IFS= read -r line; do
    [[ "$line" =~ NVRM:\ Xid\ \(PCI:([0-9a-fA-F:.]+)\):\ ([0-9]+), ]] || continue
    pci=${BASH_REMATCH[1]} xid=${BASH_REMATCH[2]}
    [[ " ${critical_xids[*]} " == *" $xid "* ]] || continue
    # nvidia-smi prints 00000000:17:00.0, the kernel 0000:17:00
    if [ -n "${GPU_BUS_IDS:-}" ] && ! grep -qi -- "${pci#0000:}" <<<"$GPU_BUS_IDS"; then
      continue
    fi
    fail "GPU XID $xid since boot on PCI:$pci: ${line#*NVRM: }"
    return
  done <<<"$out"
}

check_fabric() {
  local out states
  if ! out=$(timeout "$tool_timeout" nvidia-smi -q 2>&1); then
    fail "Fabric Manager: nvidia-smi -q failed: $(last_line "$out")"
    return
  fi
  states=$(awk '/^ *Fabric *$/ {f = 1; next}
                f && /^ *State *:/ {sub(/^[^:]*: */, ""); s = $0; next}
                f && /^ *Status *:/ {sub(/^[^:]*: */, ""); print s "/" $0; f = 0}' <<<"$out")
  if [ -z "$states" ]; then
    fail "Fabric Manager: nvidia-smi -q shows no fabric state (driver too old for an NVSwitch board?)"
  elif grep -qv '^Completed/Success$' <<<"$states"; then
    fail "Fabric Manager: GPU fabric $(awk '$0 != "Completed/Success" {print; exit}' <<<"$states") \
(is nvidia-fabricmanager running on the host?)"
  fi
}

check_shared() {
  local probe="$shared/.hpc-health/$node" out
  # shellcheck disable=SC2016  # $1 is the inner shell's argument
  if ! out=$(timeout "$tool_timeout" mkdir -p "$shared/.hpc-health" 2>&1) \
    || ! out=$(timeout "$tool_timeout" sh -c 'date +%s >"$1" && rm -f "$1"' sh "$probe" 2>&1); then
    fail "shared volume: $shared is not writable: $(last_line "$out")"
  fi
}

check_munge() {
  local out
  if ! out=$(timeout "$tool_timeout" sh -c 'munge -n | unmunge' 2>&1); then
    fail "munge: $(last_line "$out")"
  fi
}

check_space() {
  local d free
  for d in "${dirs[@]}"; do
    [ -d "$d" ] || { fail "free space: $d is missing"; return; }
    free=$(df -Pm "$d" | awk 'NR == 2 {print $4}')
    if [ "$free" -lt "$min_free_mib" ]; then
      fail "free space: $d has $free MiB free, below $min_free_mib MiB"
      return
    fi
  done
}

if [ "$gpus" -gt 0 ]; then
  check_gpus
  check_xids
  [ "$fabric" != 1 ] || check_fabric
fi
check_shared
check_munge
check_space

# What the controller says about this node now.
if ! view=$(timeout "$tool_timeout" scontrol -o show node "$node" 2>&1); then
  echo "hpc-health: $node: ${problem:-healthy}; cannot reach the controller: $(last_line "$view")" >&2
  exit 1
fi
state="" reason=""
[[ "$view" =~ \ State=([^ ]+) ]] && state=${BASH_REMATCH[1]}
[[ "$view" =~ \ Reason=(.*)\ \[[^]]*\] ]] && reason=${BASH_REMATCH[1]}
ours=0
[[ "$reason" == "$prefix"* ]] && ours=1
drained=0
[[ "$state" == *DRAIN* ]] && drained=1

if [ -n "$problem" ]; then
  want="$prefix $problem"
  if [ "$drained" = 1 ] && [ "$ours" = 0 ] && [ -n "$reason" ] && [ "$reason" != none ]; then
    echo "hpc-health: $node: $problem (already drained by someone else: $reason)" >&2
  elif [ "$reason" != "$want" ]; then
    out=$(scontrol update nodename="$node" state=drain reason="$want" 2>&1) \
      || { echo "hpc-health: $node: $problem; scontrol refused the drain: $(last_line "$out")" >&2; exit 1; }
    echo "hpc-health: $node: drained: $problem" >&2
  else
    echo "hpc-health: $node: still failing, drained: $problem" >&2
  fi
  exit 1
fi
if [ "$drained" = 1 ] && [ "$ours" = 1 ]; then
  out=$(scontrol update nodename="$node" state=resume 2>&1) \
    || { echo "hpc-health: $node: healthy; scontrol refused the resume: $(last_line "$out")" >&2; exit 1; }
  echo "hpc-health: $node: healthy again, resumed (was: $reason)"
fi
exit 0
