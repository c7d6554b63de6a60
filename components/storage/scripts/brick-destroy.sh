#@ Delete of a brick when hpc:storage.allowDestroy is true: its data goes too.
if [ -d @path@ ]; then
  rm -rf --one-file-system @path@
  hpc_changed "removed brick @path@"
fi
