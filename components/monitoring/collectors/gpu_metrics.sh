#!/usr/bin/env bash
# GPU health for node exporter's textfile collector (hpc-cluster), from nvidia-smi and the kernel
# log: what makes the GPU alerts fire on hosts without NVIDIA's DCGM exporter. Runs as root on the
# GPU host (systemd timer).
# Usage: gpu_metrics.sh EXPECTED_GPUS OUTPUT.prom
#   hpc_gpu_up{source="nvidia-smi"|"kernel-log"}   1 when the source answered
#   hpc_gpu_expected / hpc_gpu_count                 the profile's GPUs / the GPUs nvidia-smi lists
#   hpc_gpu_{temperature_celsius,power_watts,utilization_percent,memory_used_mib}{gpu,uuid,model}
#   hpc_gpu_ecc_uncorrected_volatile_total, hpc_gpu_retired_pages_pending, hpc_gpu_thermal_slowdown
#   hpc_gpu_xid_last{gpu}                            the last XID the kernel logged for it since boot (0: none)
set -euo pipefail
expected=$1 out=$2
fields=index,uuid,pci.bus_id,name,temperature.gpu,power.draw,utilization.gpu,memory.used
fields+=,ecc.errors.uncorrected.volatile.total,retired_pages.pending

query() {
  timeout 60 nvidia-smi --query-gpu="$fields,$1" --format=csv,noheader,nounits 2>&1
}

# Drivers since 535 name it clocks_event_reasons; older ones only clocks_throttle_reasons.
smi_up=1
if ! rows=$(query clocks_event_reasons.hw_thermal_slowdown); then
  if [[ $rows == *"not a valid field"* ]] && rows=$(query clocks_throttle_reasons.hw_thermal_slowdown); then
    :
  else
    echo "gpu_metrics: nvidia-smi failed: $(tail -n 1 <<<"$rows")" >&2
    smi_up=0 rows=""
  fi
fi

declare -A xid=()  # kernel PCI address (0000:17:00) -> last XID
log_up=1
if kmsg=$(timeout 30 dmesg 2>&1); then
  while IFS= read -r line; do
    [[ $line =~ NVRM:\ Xid\ \(PCI:([0-9a-fA-F:.]+)\):\ ([0-9]+), ]] || continue
    xid[${BASH_REMATCH[1],,}]=${BASH_REMATCH[2]}
  done <<<"$kmsg"
else
  echo "gpu_metrics: dmesg failed: $(tail -n 1 <<<"$kmsg")" >&2
  log_up=0
fi

number() {  # a reading, or nothing for [N/A] / [Not Supported]
  local v=${1// /}
  [[ $v =~ ^-?[0-9]+(\.[0-9]+)?$ ]] && printf '%s' "$v"
  return 0
}

per_gpu=$(
  while IFS=, read -r index uuid bus name temp power util mem ecc pending slowdown; do
    [ -n "$index" ] || continue
    index=${index// /} uuid=${uuid// /} bus=${bus// /} name=${name# } pending=${pending// /}
    labels="gpu=\"$index\",uuid=\"$uuid\",model=\"${name//\"/}\""
    for pair in "temperature_celsius:$temp" "power_watts:$power" "utilization_percent:$util" \
      "memory_used_mib:$mem" "ecc_uncorrected_volatile_total:$ecc"; do
      v=$(number "${pair#*:}")
      [ -z "$v" ] || echo "hpc_gpu_${pair%%:*}{$labels} $v"
    done
    case $pending in
      Yes) echo "hpc_gpu_retired_pages_pending{$labels} 1" ;;
      No) echo "hpc_gpu_retired_pages_pending{$labels} 0" ;;
    esac
    case ${slowdown# } in
      Active) echo "hpc_gpu_thermal_slowdown{$labels} 1" ;;
      "Not Active") echo "hpc_gpu_thermal_slowdown{$labels} 0" ;;
    esac
    if [ "$log_up" = 1 ]; then
      last=0
      for pci in "${!xid[@]}"; do  # nvidia-smi prints 00000000:17:00.0, the kernel 0000:17:00
        [[ ${bus,,} == *":${pci#0000:}."* ]] && last=${xid[$pci]}
      done
      echo "hpc_gpu_xid_last{$labels} $last"
    fi
  done <<<"$rows"
)
n=$(awk -F, 'NF > 3 { n++ } END { print n + 0 }' <<<"$rows")

tmp=$(mktemp "$(dirname "$out")/.gpu.XXXXXX")
trap 'rm -f "$tmp"' EXIT
{
  echo "# TYPE hpc_gpu_up gauge"
  echo "hpc_gpu_up{source=\"nvidia-smi\"} $smi_up"
  echo "hpc_gpu_up{source=\"kernel-log\"} $log_up"
  echo "# TYPE hpc_gpu_expected gauge"
  echo "hpc_gpu_expected $expected"
  [ -z "$per_gpu" ] || LC_ALL=C sort <<<"$per_gpu"
  if [ "$smi_up" = 1 ]; then
    echo "# TYPE hpc_gpu_count gauge"
    echo "hpc_gpu_count $n"
  fi
} >"$tmp"
chmod 0644 "$tmp"
mv -f "$tmp" "$out"
trap - EXIT
