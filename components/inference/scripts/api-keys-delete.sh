#@ The users' API keys leave their homes (the homes and everything else in them stay).
for name in @users@; do
  [ -f @home_root@/"$name"/@key_file@ ] || continue
  out=$(runuser -u "$name" -- rm -f -- @home_root@/"$name"/@key_file@ 2>&1) ||
    hpc_fail "removing the API key of $name: $out"
  hpc_changed "removed the API key of $name"
done
