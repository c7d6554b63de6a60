#@ Part of preflight.sh on GPU hosts.
as_root sh -c 'command -v nvidia-ctk' >/dev/null \
  || hpc_fail "@host@: the NVIDIA container toolkit is missing (no nvidia-ctk): install nvidia-container-toolkit"
facts+=" nvidia-container-toolkit"
