#@ Fail clearly unless the NVIDIA driver is new enough and the node shows the profile's GPUs.
gpus=@gpus@
command -v nvidia-smi >/dev/null \
  || hpc_fail "@host@: nvidia-smi not found: install the NVIDIA driver (R@min_branch@ or newer)"
versions=$(nvidia-smi --query-gpu=driver_version --format=csv,noheader) \
  || hpc_fail "@host@: nvidia-smi failed: is the NVIDIA driver loaded?"
count=$(grep -c . <<<"$versions" || true)
if [ "$count" -ne "$gpus" ]; then
  hpc_fail "@host@: the profile says @gpus@ GPUs, nvidia-smi shows $count"
fi
branch=$(head -n1 <<<"$versions" | cut -d. -f1)
if [ "$branch" -lt @min_branch@ ]; then
  hpc_fail "@host@: NVIDIA driver branch R$branch is older than R@min_branch@ (the spec sheets' minimum)"
fi
for ((i = 0; i < gpus; i++)); do
  [ -c "/dev/nvidia$i" ] || hpc_fail "@host@: /dev/nvidia$i is missing"
done
echo "hpc: @host@: @gpus@ GPUs, driver R$branch"
