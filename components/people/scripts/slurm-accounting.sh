#@ Accounts and user associations in slurmdbd, from the stack: added when missing, removed when
#@ hpc-cluster made them (description @managed@) and the stack dropped them; nothing else touched.
sam() { docker exec @container@ sacctmgr -n -P "$@"; }
hpc_wait @timeout@ "slurmdbd to answer" sam show cluster format=cluster
if ! grep -qxF @cluster@ <<<"$(sam show cluster format=cluster)"; then
  sam -i add cluster @cluster@ >/dev/null
  hpc_changed "added cluster @cluster@"
fi
wanted=$(cat <<'HPC_WANTED'
@wanted@
HPC_WANTED
)
for acct in @accounts@; do
  if ! grep -qxF "$acct" <<<"$(sam show account "$acct" format=account)"; then
    sam -i add account "$acct" description=@managed@ organization=@managed@ >/dev/null
    hpc_changed "added account $acct"
  fi
done
while IFS='|' read -r user acct; do
  [ -n "$user" ] || continue
  if ! grep -qxF "$user" <<<"$(sam show assoc where user="$user" account="$acct" format=user)"; then
    sam -i add user "$user" account="$acct" defaultaccount="$acct" >/dev/null
    hpc_changed "added $user to account $acct"
  fi
done <<<"$wanted"
managed=$(sam show account format=account,description | awk -F'|' '$2 == "@managed@" { print $1 }')
for acct in $managed; do
  for user in $(sam show assoc where account="$acct" format=user | grep -v '^$' || true); do
    if ! grep -qxF "$user|$acct" <<<"$wanted"; then
      sam -i remove user "$user" where account="$acct" >/dev/null
      hpc_changed "removed $user from account $acct"
    fi
  done
  if ! grep -q "|$acct\$" <<<"$wanted"; then
    sam -i remove account "$acct" >/dev/null
    hpc_changed "removed account $acct"
  fi
done
