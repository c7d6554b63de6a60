#@ ganesha.conf from stdin: an export change applied in place (UpdateExport), a restart only for a
#@ change outside the EXPORT block; then proof that Ganesha itself serves the export, repairing a
#@ gateway that started before the volume.
@rpcbind@
@boot_order@

export_mgr() { local m=$1; shift; @export_mgr@ "org.ganesha.nfsd.exportmgr.$m" "$@"; }
# ganesha.conf without its EXPORT blocks: what an in-place export update cannot change.
strip_exports() {
  awk '/^EXPORT[[:space:]]*[{]/ { skip = 1; depth = 0 }
       skip { depth += gsub(/[{]/, "{"); depth -= gsub(/[}]/, "}"); if (depth == 0) skip = 0; next }
       { print }'
}
old_rest=$({ strip_exports <@conf@; } 2>/dev/null || true)
hpc_put_file @conf@ 0644 0:0
if hpc_file_changed && systemctl is-active --quiet nfs-ganesha; then
  if [ "$(strip_exports <@conf@)" != "$old_rest" ]; then
    reason="settings outside the EXPORT block changed"
  elif out=$(export_mgr UpdateExport string:@conf@ "string:EXPORT(Export_Id=@export_id@)" 2>&1); then
    reason=""
    hpc_changed "updated export @export_id@ in place (no restart, no grace period)"
  else
    reason="the in-place export update failed: $(tail -n1 <<<"$out")"
  fi
  if [ -n "$reason" ]; then
    systemctl restart nfs-ganesha
    hpc_changed "restarted nfs-ganesha: $reason"
  fi
fi
hpc_service_up nfs-ganesha
# Serving means: NFS-Ganesha itself holds port @nfs_port@ and its export manager lists the export.
state() {
  local users
  users=$(ss -Hltnp "sport = :@nfs_port@")
  if [ -z "$users" ]; then
    echo down
  elif ! grep -q 'users:' <<<"$users"; then
    echo unowned  # no process owns the socket yet (a daemon mid-start) or a kernel NFS server
  elif ! grep -q '"ganesha.nfsd"' <<<"$users"; then
    echo "held by $(grep -o -m1 'users:(([^)]*)' <<<"$users")"
  elif grep -qF 'string "/@volume@"' <<<"$(export_mgr DisplayExport uint16:@export_id@ 2>/dev/null)"; then
    echo serving
  else
    echo no-export
  fi
}
settle() {
  local i limit=@serving_timeout@
  for ((i = 0; i < limit; i++)); do
    now=$(state)
    case $now in serving | held*) return ;; esac
    sleep 1
  done
}
why() {
  grep -E ':(CRIT|MAJ|FATAL) :' @log@ 2>/dev/null | grep -vE 'DBUS|krb5|credentials|Cannot register' \
    | tail -n2 | cut -d: -f5- | tr '\n' ' '
}
settle
case $now in
  held* | unowned)
    hpc_fail "port @nfs_port@ on $(hostname) is ${now/unowned/held by the kernel}, not by NFS-Ganesha: stop that \
service (a kernel NFS server: systemctl disable --now nfs-server)" ;;
  no-export | down)
    if ! vol=$(gluster --mode=script volume status @volume@ 2>&1 >/dev/null); then
      hpc_fail "NFS-Ganesha on $(hostname) cannot serve /@volume@: $vol"
    fi
    systemctl restart nfs-ganesha
    hpc_changed "restarted nfs-ganesha: it was $now (not serving /@volume@)"
    settle
    [ "$now" = serving ] || hpc_fail "NFS-Ganesha on $(hostname) does not serve /@volume@ ($now): $(why)" ;;
esac
