#@ Each user's API key into their home, 0600 and theirs; the keys come on stdin ("<name> <key>"
#@ a line). Written as the user (runuser), so a link the user planted cannot turn root's write
#@ elsewhere; a key already in place is left alone.
[ -d @home_root@ ] || hpc_fail "@home_text@ is missing: is the shared volume mounted?"
declare -A want=()
for u in @users@; do want[$u]=1; done
seen=0
while read -r name key; do
  [ -n "${want[$name]:-}" ] || hpc_fail "a key on stdin for $name, who is not a declared user"
  [ -n "$key" ] || hpc_fail "no key on stdin for $name"
  [ -d @home_root@/"$name" ] || hpc_fail "the home of $name is missing (the homes step comes first)"
  # shellcheck disable=SC2016 # the user's shell expands these, not this one
  out=$(runuser -u "$name" -- /bin/sh -c '
    set -eu
    f=$1/$2 key=$(cat)
    umask 077
    if [ -f "$f" ] && [ ! -L "$f" ] && [ "$(stat -c %a "$f")" = 600 ] && [ "$(cat "$f")" = "$key" ]; then
      echo same
      exit 0
    fi
    mkdir -p "${f%/*}"
    printf "%s\n" "$key" >"$f.new"
    mv -f "$f.new" "$f"
    echo written' sh @home_root@/"$name" @key_file@ 2>&1 <<<"$key") ||
    hpc_fail "writing the API key of $name: $out"
  [ "$out" = same ] || hpc_changed "the API key of $name in ~$name/@key_text@"
  seen=$((seen + 1))
done
[ "$seen" = "${#want[@]}" ] || hpc_fail "$seen keys on stdin for ${#want[@]} users"
