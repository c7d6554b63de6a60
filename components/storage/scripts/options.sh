#@ Converge the volume's options: names resolved to gluster's canonical ones (a later entry for the
#@ same option wins), values compared as gluster reports them, options set before but no longer
#@ listed reset (the set is recorded in the volume itself, @managed@).
declare -A want=()
order=()
get() { { g volume get @volume@ "$1" 2>&1 || true; } | awk 'NR == 3 { print $1, $2 }'; }
norm() {
  local v=${1,,}
  v=${v// /}
  case $v in on | yes | true | enable) echo on ;; off | no | false | disable) echo off ;; *) echo "$v" ;; esac
}
wanted() {
  local row
  row=$(get "$1")
  [ -n "$row" ] || hpc_fail "gluster does not know the volume option $1 (hpc:storage.options): \
$(g volume get @volume@ "$1" 2>&1 | tail -n1)"
  local canon=${row%% *}
  [ -n "${want[$canon]+x}" ] || order+=("$canon")
  want[$canon]=$2
}
@lines@
for key in "${order[@]}"; do
  have=$(get "$key")
  have=${have#* }
  if [ "$(norm "$have")" != "$(norm "${want[$key]}")" ]; then
    gcall "gluster volume set @volume@ $key" volume set @volume@ "$key" "${want[$key]}" >/dev/null
    hpc_changed "set $key=${want[$key]}"
  fi
done
recorded=$(g volume get @volume@ @managed@ 2>/dev/null | awk 'NR == 3 { print $2 }') || true
for key in ${recorded//,/ }; do
  if [ -z "${want[$key]+x}" ]; then
    gcall "gluster volume reset @volume@ $key" volume reset @volume@ "$key" >/dev/null
    hpc_changed "reset $key to its default (no longer in hpc:storage.options)"
  fi
done
managed=$(printf '%s\n' "${order[@]}" | sort | paste -sd,)
if [ "$recorded" != "$managed" ]; then
  gcall "gluster volume set @volume@ @managed@" volume set @volume@ @managed@ "$managed" >/dev/null
fi
