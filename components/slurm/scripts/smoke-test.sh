#@ After deployment, on the head: one job per partition, run by root in the head's container
#@ through the real scheduler (a GPU partition's job asks for one GPU and runs nvidia-smi -L and
#@ the image's CUDA device query), and an MPI job across two nodes of one partition (srun
#@ --mpi=pmix, mpi4py: every rank must see the whole job). Prints a JSON verdict on stdout (the MPI
#@ job's under "mpi"). A job that fails, or a partition with no node in service, fails the step with
#@ one line naming the partition and the node; fewer than two nodes in service skips the MPI job.
#@ A job still pending because the cluster is busy (Resources, Priority, a limit, a reservation)
#@ after @wait@ s is cancelled and reported "busy": a full cluster is not broken.
in_head() { docker exec @container@ "$@"; }
poll=@poll@ wait_s=@wait@
out_dir=$(mktemp -d)
trap 'rm -rf "$out_dir"' EXIT
verdict=() failures=()
# The job itself: the node it ran on, then on a GPU partition what the job sees of its GPUs, in an
# MPI job what its rank sees of the job (size, and the sum of a 1 from every rank).
# shellcheck disable=SC2016  # expanded by the job's own shell, on the node
job='echo "node=$SLURMD_NODENAME job=$SLURM_JOB_ID"
if [ "$1" = gpu ]; then
  listed=$(nvidia-smi -L) || { echo "nvidia-smi -L failed: $listed"; exit 1; }
  printf "%s\n" "$listed"
  echo "gpus=$(grep -c "^GPU " <<<"$listed")"
  cuda=$(hpc-cuda-query) || { echo "$cuda"; exit 1; }
  printf "%s\n" "$cuda"
  echo "cuda=$(sed -n "s/^cuda: driver .*, \([0-9]*\) device(s)$/\1/p" <<<"$cuda")"
fi
if [ "$1" = mpi ]; then
  python3 -c "from mpi4py import MPI; c = MPI.COMM_WORLD; print(f\"mpi size={c.size} sum={c.allreduce(1)}\")"
fi'
record() {  # key partition result node job [detail]
  local extra=""
  [ "$1" = "$2" ] || extra=$(printf ', "partition": "%s"' "$2")
  verdict+=("$(printf '"%s": {"result": "%s", "node": "%s", "job": "%s"%s}' "$1" "$3" "$4" "$5" "$extra")")
  [ "$3" != failed ] || failures+=("partition $2${extra:+ (MPI job)}, node ${4:-none}: $6")
}
smoke() {  # partition kind (cpu|gpu|mpi)
  local part=$1 kind=$2 key=$1 name="hpc-smoke-test-$1" shape=(--nodes=1 --ntasks=1) nodes states serving pid state
  local reason rc=0 out node id waited=0 said failed_on
  if [ "$kind" = mpi ]; then
    key=mpi name="hpc-smoke-test-mpi-$1" shape=(--nodes=2 --ntasks=2 --ntasks-per-node=1 --mpi=pmix --kill-on-bad-exit=1)
  fi
  # In service: answering (no suffix such as * or ~) and taking jobs (not drained, down, maint).
  # plnd/mix- are idle/mixed nodes the backfill scheduler holds for a pending job; the flag stays
  # until its next cycle, after that job ran (seen right after one smoke run), so they serve.
  nodes=$(in_head sinfo -h -N -p "$part" -o '%N %t')
  states=$(awk '{print $2}' <<<"$nodes" | sort -u | paste -sd' ')
  serving=$(awk '$2 ~ /^(idle|plnd|resv|block|mix|mix-|alloc|comp)$/ {print $1}' <<<"$nodes" | sort -u | wc -l)
  if [ "$serving" -eq 0 ]; then
    record "$key" "$part" failed "" "" "no node in service (sinfo states: ${states:-none})"
    return
  fi
  if [ "$kind" = mpi ] && [ "$serving" -lt 2 ]; then
    record "$key" "$part" skipped "" ""
    echo "hpc: partition $part has $serving node in service: MPI across two nodes not checked" >&2
    return
  fi
  [ "$kind" != gpu ] || shape+=(--gres=gpu:1)
  in_head srun --partition="$part" "${shape[@]}" --time=@minutes@ --job-name="$name" \
    bash -c "$job" smoke "$kind" >"$out_dir/$key" 2>&1 &
  pid=$!
  while kill -0 "$pid" 2>/dev/null; do
    read -r state reason <<<"$(in_head squeue -h -n "$name" -o '%T %r' 2>/dev/null | awk 'NR == 1')" || true
    if [ "$state" = PENDING ]; then
      case $reason in
        None | Resources | Priority | QOS* | Assoc* | *Reserv* | BeginTime) ;;
        *) in_head scancel --name="$name" || true
           wait "$pid" || true
           record "$key" "$part" failed "" "" "the job cannot start: $reason"
           return ;;
      esac
      if [ "$waited" -ge "$wait_s" ]; then
        in_head scancel --name="$name" || true
        wait "$pid" || true
        record "$key" "$part" busy "" "" ""
        echo "hpc: partition $part is busy ($reason) after $wait_s s: not checked" >&2
        return
      fi
    fi
    sleep "$poll"
    waited=$((waited + poll))
  done
  wait "$pid" || rc=$?
  out=$(cat "$out_dir/$key")
  node=$(sed -n 's/^node=\([^ ]*\) job=.*/\1/p' <<<"$out" | sort -u | paste -sd,)
  id=$(sed -n 's/^node=[^ ]* job=\([0-9]*\)$/\1/p' <<<"$out" | sort -u | paste -sd,)
  if [ -z "$node" ]; then  # it never ran: the controller knows where it was sent
    read -r id node <<<"$(in_head sacct -n -X -P --name="$name" -S now-1hour -o JobID,NodeList 2>/dev/null \
      | tail -n1 | tr '|' ' ')" || true
  fi
  if [ "$rc" != 0 ]; then
    # the job's own last line (its program's error), else srun's (the job never ran); the node
    # whose task failed, where srun names it (the others of an MPI job were only stopped)
    said=$(grep -v -e '^node=' -e '^srun: ' -e '^slurmstepd' <<<"$out" | tail -n1) || said=$(tail -n1 <<<"$out")
    failed_on=$(sed -n 's/^srun: error: \([^:]*\): tasks\{0,1\} [0-9,-]*: Exited with exit code [1-9].*/\1/p' <<<"$out" \
      | sort -u | paste -sd,)
    record "$key" "$part" failed "${failed_on:-$node}" "$id" "job ${id:-?} failed (srun exit $rc): $said"
  elif [ "$kind" = gpu ] && ! grep -qx 'gpus=1' <<<"$out"; then
    record "$key" "$part" failed "$node" "$id" "nvidia-smi -L in a one-GPU job listed $(sed -n 's/^gpus=//p' <<<"$out") GPUs"
  elif [ "$kind" = gpu ] && ! grep -qx 'cuda=1' <<<"$out"; then
    record "$key" "$part" failed "$node" "$id" "CUDA in a one-GPU job saw: $(grep -m1 '^cuda: ' <<<"$out")"
  elif [ "$kind" = mpi ] && { [ "$(grep -cx 'mpi size=2 sum=2' <<<"$out")" != 2 ] || [[ $node != *,* ]]; }; then
    record "$key" "$part" failed "$node" "$id" "the MPI ranks did not see one job across two nodes: $(grep -m1 '^mpi ' <<<"$out" || echo 'no rank answered')"
  else
    record "$key" "$part" ok "$node" "$id"
  fi
}
@checks@
(IFS=,; printf '{%s}\n' "${verdict[*]}")
if [ ${#failures[@]} -gt 0 ]; then
  hpc_fail "smoke test: $(IFS=';'; echo "${failures[*]}")"
fi
