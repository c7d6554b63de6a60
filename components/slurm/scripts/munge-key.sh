#@ The munge key (base64 on stdin) on this host's own disk, never on the shared volume; a rotated
#@ key restarts the host's running Slurm containers (munged reads it only at start).
hpc_dir @dir@ 0700 @owner@
hpc_put_file @key@ 0400 @owner@ < <(base64 -d)
[ "$(stat -c %s @key@)" -ge @min_bytes@ ] \
  || hpc_fail "the munge key on stdin is shorter than @min_bytes@ bytes"
if hpc_file_changed; then  # a rotated key: munged reads it only at start
@restart@
fi
if [ -e @legacy@ ]; then
  rm -f @legacy@
  hpc_changed "removed the munge key from the shared volume (@legacy@)"
fi
