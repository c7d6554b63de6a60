#@ After deployment, on the head: one job per partition, run by root in the head's container
#@ through the real scheduler (a GPU partition's job asks for one GPU and runs nvidia-smi -L and
#@ the image's CUDA device query). Prints a JSON verdict on stdout. A job that fails, or a
#@ partition with no node in service, fails the step with one line naming the partition and the
#@ node. A job still pending because the cluster is busy (Resources, Priority, a limit, a
#@ reservation) after @wait@ s is cancelled and reported "busy": a full cluster is not broken.
in_head() { docker exec @container@ "$@"; }
poll=@poll@ wait_s=@wait@
out_dir=$(mktemp -d)
trap 'rm -rf "$out_dir"' EXIT
verdict=() failures=()
# The job itself: the node it ran on, then on a GPU partition what the job sees of its GPUs.
# shellcheck disable=SC2016  # expanded by the job's own shell, on the node
job='echo "node=$SLURMD_NODENAME job=$SLURM_JOB_ID"
if [ "$1" = gpu ]; then
  listed=$(nvidia-smi -L) || { echo "nvidia-smi -L failed: $listed"; exit 1; }
  printf "%s\n" "$listed"
  echo "gpus=$(grep -c "^GPU " <<<"$listed")"
  cuda=$(hpc-cuda-query) || { echo "$cuda"; exit 1; }
  printf "%s\n" "$cuda"
  echo "cuda=$(sed -n "s/^cuda: driver .*, \([0-9]*\) device(s)$/\1/p" <<<"$cuda")"
fi'
record() {  # partition result node job [detail]
  verdict+=("$(printf '"%s": {"result": "%s", "node": "%s", "job": "%s"}' "$1" "$2" "$3" "$4")")
  [ "$2" != failed ] || failures+=("partition $1, node ${3:-none}: $5")
}
smoke() {  # partition kind (cpu|gpu)
  local part=$1 kind=$2 name="hpc-smoke-test-$1" gres=() states s in_service=no pid state reason rc=0 out node id
  local waited=0 said
  # In service: answering (no suffix such as * or ~) and taking jobs (not drained, down, maint).
  states=$(in_head sinfo -h -p "$part" -o '%t' | sort -u | paste -sd' ')
  for s in $states; do
    case $s in idle | mix | alloc | comp) in_service=yes ;; esac
  done
  if [ "$in_service" = no ]; then
    record "$part" failed "" "" "no node in service (sinfo states: ${states:-none})"
    return
  fi
  [ "$kind" != gpu ] || gres=(--gres=gpu:1)
  in_head srun --partition="$part" --nodes=1 --ntasks=1 --time=@minutes@ --job-name="$name" "${gres[@]}" \
    bash -c "$job" smoke "$kind" >"$out_dir/$part" 2>&1 &
  pid=$!
  while kill -0 "$pid" 2>/dev/null; do
    read -r state reason <<<"$(in_head squeue -h -n "$name" -o '%T %r' 2>/dev/null | awk 'NR == 1')" || true
    if [ "$state" = PENDING ]; then
      case $reason in
        None | Resources | Priority | QOS* | Assoc* | *Reserv* | BeginTime) ;;
        *) in_head scancel --name="$name" || true
           wait "$pid" || true
           record "$part" failed "" "" "the job cannot start: $reason"
           return ;;
      esac
      if [ "$waited" -ge "$wait_s" ]; then
        in_head scancel --name="$name" || true
        wait "$pid" || true
        record "$part" busy "" "" ""
        echo "hpc: partition $part is busy ($reason) after $wait_s s: not checked" >&2
        return
      fi
    fi
    sleep "$poll"
    waited=$((waited + poll))
  done
  wait "$pid" || rc=$?
  out=$(cat "$out_dir/$part")
  node=$(sed -n 's/^node=\([^ ]*\) job=.*/\1/p' <<<"$out")
  id=$(sed -n 's/^node=[^ ]* job=\([0-9]*\)$/\1/p' <<<"$out")
  if [ -z "$node" ]; then  # it never ran: the controller knows where it was sent
    read -r id node <<<"$(in_head sacct -n -X -P --name="$name" -S now-1hour -o JobID,NodeList 2>/dev/null \
      | tail -n1 | tr '|' ' ')" || true
  fi
  if [ "$rc" != 0 ]; then
    # the job's own last line (its program's error), else srun's (the job never ran)
    said=$(grep -v -e '^node=' -e '^srun: ' <<<"$out" | tail -n1) || said=$(tail -n1 <<<"$out")
    record "$part" failed "$node" "$id" "job ${id:-?} failed (srun exit $rc): $said"
  elif [ "$kind" = gpu ] && ! grep -qx 'gpus=1' <<<"$out"; then
    record "$part" failed "$node" "$id" "nvidia-smi -L in a one-GPU job listed $(sed -n 's/^gpus=//p' <<<"$out") GPUs"
  elif [ "$kind" = gpu ] && ! grep -qx 'cuda=1' <<<"$out"; then
    record "$part" failed "$node" "$id" "CUDA in a one-GPU job saw: $(grep -m1 '^cuda: ' <<<"$out")"
  else
    record "$part" ok "$node" "$id"
  fi
}
@checks@
(IFS=,; printf '{%s}\n' "${verdict[*]}")
if [ ${#failures[@]} -gt 0 ]; then
  hpc_fail "smoke test: $(IFS=';'; echo "${failures[*]}")"
fi
