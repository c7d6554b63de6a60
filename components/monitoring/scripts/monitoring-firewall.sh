#@ (part of exporters.sh) The monitoring ports' own nftables table (firewall.py), checked by nft
#@ before it replaces the loaded one; loaded again at boot by its unit.
staged=$(mktemp)
cat >"$staged" <<'HPC_FILE_END'
@rules@
HPC_FILE_END
out=$(nft -c -f "$staged" 2>&1) || { rm -f "$staged"; hpc_fail "nft refused the monitoring firewall: $out"; }
hpc_put_file @rules_file@ 0644 0:0 <"$staged"
rm -f "$staged"
load=$HPC_FILE_CHANGED
nft list table inet @table@ >/dev/null 2>&1 || load=1
if [ "$load" = 1 ]; then
  out=$(nft -f @rules_file@ 2>&1) || hpc_fail "nft could not load the monitoring firewall: $out"
  hpc_changed "loaded the monitoring firewall (nft table inet @table@)"
fi
hpc_put_file @unit_dir@/@unit@.service 0644 0:0 <<'HPC_FILE_END'
@unit_text@
HPC_FILE_END
if ! systemctl is-enabled --quiet @unit@ 2>/dev/null; then
  systemctl enable --quiet @unit@
  hpc_changed "enabled @unit@ (loads the table at boot)"
fi
