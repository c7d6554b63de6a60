#@ Create the volume only when missing (every brick host connected, stale stamps on this host's
#@ bricks cleared); when present, verify its bricks by peer UUID and path; start it; wait for a
#@ write quorum of bricks online.
want=(@bricks@)
info=$(hpc_gq volume @volume@ 2>&1) || hpc_fail "gluster volume info @volume@ failed on $(hostname): $info"
if [ "$info" = absent ]; then
  states=$(hpc_gq peers @addresses@ 2>&1) || hpc_fail "gluster pool list failed on $(hostname): $states"
  bad=$(gluster_not_connected "$states")
  [ -z "$bad" ] || hpc_fail "cannot create volume @volume@: not every brick host is connected to the trusted pool \
(gluster pool list on $(hostname)): $bad"
  for b in "${want[@]}"; do
    if awk -v a="${b%%:*}" '$1 == a && $3 == "local" { found = 1 } END { exit !found }' <<<"$states"; then
      gluster_clear_stale_stamp "${b#*:}"
    fi
  done
  gcall "gluster volume create @volume@" volume create @volume@ replica @replica@@arbiter@ "${want[@]}" >/dev/null
  hpc_changed "created volume @volume@ (@layout@)"
else
  have_type=$(awk '$1 == "type" { print $2 }' <<<"$info")
  if [ "$have_type" != @expected_type@ ] \
    || ! hpc_gq same-bricks @volume@ @bricks_per_set@ "${want[@]}"; then
    have=$(g volume info @volume@ | awk '/^Brick[0-9]+:/ { print $2 }' | paste -sd' ')
    hpc_fail "volume @volume@ exists as $have_type with bricks [$have], but the stack wants \
@expected_type@ (@layout@) with bricks [${want[*]}]; refusing to change it. \
Move bricks by hand (gluster volume replace-brick/add-brick) or fix hpc:storage."
  fi
fi
if ! grep -qx "status Started" <<<"$(hpc_gq volume @volume@)"; then
  gcall "gluster volume start @volume@" volume start @volume@ >/dev/null
  hpc_changed "started volume @volume@"
fi
# Serving means a quorum of bricks online (client quorum refuses writes below it).
online() { [ "$(g volume status @volume@ detail | grep -cE '^Online +: Y')" -ge @quorum@ ]; }
hpc_wait @timeout@ "@quorum@ of @brick_count@ bricks of @volume@ to be online" online
