#@ Part of preflight.sh on Slurm GPU workers: their slurmd container runs with the NVIDIA runtime.
runtimes=$(as_root docker info --format '{{json .Runtimes}}' 2>&1) \
  || hpc_fail "@host@: docker info failed: $runtimes"
case "$runtimes" in
  *'"nvidia"'*) ;;
  *) hpc_fail "@host@: Docker has no nvidia runtime (runtimes: $runtimes): run \
'nvidia-ctk runtime configure --runtime=docker' and restart Docker" ;;
esac
facts+=" docker-runtime-nvidia"
