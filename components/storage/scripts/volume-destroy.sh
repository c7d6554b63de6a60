#@ Delete of the volume when hpc:storage.allowDestroy is true.
if [ "$(hpc_gq volume @volume@)" != absent ]; then
  g volume stop @volume@ force >/dev/null || true
  gcall "gluster volume delete @volume@" volume delete @volume@ >/dev/null
  hpc_changed "deleted volume @volume@"
fi
