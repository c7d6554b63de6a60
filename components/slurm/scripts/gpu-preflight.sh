#@ Fail clearly unless the NVIDIA driver is new enough and the node shows the profile's GPUs; then
#@ the GPU device files are root's only on the host (0660, group root: no user opens a GPU outside
#@ Slurm), now and at the driver's next load (NVreg_DeviceFileMode in modprobe.d).
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
@modprobe@
for dev in /dev/nvidia*; do  # the GPUs, nvidiactl, nvidia-uvm*, nvidia-modeset: what the driver made
  [ -c "$dev" ] || continue
  hpc_fix_mode "$dev" 0660 0:0
done
echo "hpc: @host@: @gpus@ GPUs, driver R$branch, device files 0660 and root's"
