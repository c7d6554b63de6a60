#@ slurmdbd's share of the stack: QoS tiers, the account tree, the users' associations (see
#@ components/slurm/render_scheduling.py). Tables: QoS name|priority|maxwall|maxtrespu|maxtrespa|
#@ grptres|usagefactor|preempt; account name|parent|shares|qos|defaultqos|grptres; user|account.
sam() { docker exec @container@ sacctmgr -n -P "$@"; }
# apply DESCRIPTION ARGS...: a sacctmgr change; a refusal fails the step quoting sacctmgr.
apply() {
  local what=$1 out
  shift
  out=$(docker exec @container@ sacctmgr -i "$@" 2>&1) || hpc_fail "sacctmgr refused to $what: $out"
}
hpc_wait @timeout@ "slurmdbd to answer" sam show cluster format=cluster
if ! grep -qxF @cluster@ <<<"$(sam show cluster format=cluster)"; then
  apply "add cluster @cluster@" add cluster @cluster@
  hpc_changed "added cluster @cluster@"
fi

qos_rows=$(cat <<'HPC_QOS'
@qos@
HPC_QOS
)
qos_now() { sam show qos "$1" format=name,priority,maxwall,maxtrespu,maxtrespa,grptres,usagefactor,preempt; }
# every QoS exists before any is set: one may preempt another listed after it
while IFS='|' read -r q _; do
  if [ -n "$q" ] && [ -z "$(qos_now "$q")" ]; then
    apply "add QoS $q" add qos "$q" description=@managed@
    hpc_changed "added QoS $q"
  fi
done <<<"$qos_rows"
while IFS='|' read -r q prio wall peruser peraccount group factor preempt; do
  [ -n "$q" ] || continue
  before=$(qos_now "$q")
  apply "set QoS $q" modify qos where name="$q" set Priority="$prio" MaxWall="$wall" MaxTRESPerUser="$peruser" \
    MaxTRESPerAccount="$peraccount" GrpTRES="$group" UsageFactor="$factor" Preempt="$preempt"
  if [ "$(qos_now "$q")" != "$before" ]; then hpc_changed "set QoS $q: $(qos_now "$q")"; fi
done <<<"$qos_rows"

account_rows=$(cat <<'HPC_ACCOUNTS'
@accounts@
HPC_ACCOUNTS
)
account_now() {  # the account's own association (no user): parent|shares|qos|defaultqos|grptres
  sam show assoc where account="$1" format=user,parentname,fairshare,qos,defaultqos,grptres \
    | awk -F'|' '$1 == "" { print $2 "|" $3 "|" $4 "|" $5 "|" $6 }'
}
while IFS='|' read -r acct parent shares qos dqos group; do
  [ -n "$acct" ] || continue
  if ! grep -qxF "$acct" <<<"$(sam show account "$acct" format=account)"; then
    apply "add account $acct" add account "$acct" parent="$parent" description=@managed@ organization=@managed@
    hpc_changed "added account $acct"
  fi
  before=$(account_now "$acct")
  if [ "${before%%|*}" != "$parent" ]; then
    apply "move account $acct under $parent" modify account where name="$acct" set parent="$parent"
  fi
  apply "set account $acct" modify account where name="$acct" set fairshare="$shares" qos="$qos" \
    defaultqos="$dqos" GrpTRES="$group"
  if [ "$(account_now "$acct")" != "$before" ]; then hpc_changed "set account $acct: $(account_now "$acct")"; fi
done <<<"$account_rows"

wanted=$(cat <<'HPC_WANTED'
@users@
HPC_WANTED
)
while IFS='|' read -r user acct; do
  [ -n "$user" ] || continue
  if ! grep -qxF "$user" <<<"$(sam show assoc where user="$user" account="$acct" format=user)"; then
    apply "add $user to account $acct" add user "$user" account="$acct" defaultaccount="$acct"
    hpc_changed "added $user to account $acct"
  fi
  if [ "$(sam show user "$user" format=defaultaccount)" != "$acct" ]; then
    apply "set the default account of $user" modify user where name="$user" set defaultaccount="$acct"
    hpc_changed "set the default account of $user to $acct"
  fi
done <<<"$wanted"

# What this project made and the stack no longer lists: users' associations first, then the
# accounts (children before parents), then the QoS nobody uses any more.
managed=$(sam show account format=account,description | awk -F'|' '$2 == "@managed@" { print $1 }')
for acct in $managed; do
  for user in $(sam show assoc where account="$acct" format=user | grep -v '^$' || true); do
    if ! grep -qxF "$user|$acct" <<<"$wanted"; then
      apply "remove $user from account $acct" remove user "$user" where account="$acct"
      hpc_changed "removed $user from account $acct"
    fi
  done
done
stale=$(for acct in $managed; do grep -q "^$acct|" <<<"$account_rows" || echo "$acct"; done)
children() { sam show assoc format=account,parentname,user | awk -F'|' -v p="$1" '$2 == p && $3 == "" { print $1 }'; }
while [ -n "$stale" ]; do
  left="" removed=0
  for acct in $stale; do
    if [ -n "$(children "$acct")" ]; then left+="$acct "; continue; fi
    apply "remove account $acct" remove account "$acct"
    hpc_changed "removed account $acct (its jobs stay in the accounting history)"
    removed=1
  done
  [ "$removed" = 1 ] || [ -z "$left" ] || hpc_fail "accounts ${left% } still have child accounts the stack does not list"
  stale=$left
done
for q in $(sam show qos format=name,description | awk -F'|' '$2 == "@managed@" { print $1 }'); do
  if [ "$q" != @slurm_qos@ ] && ! grep -q "^$q|" <<<"$qos_rows"; then
    apply "remove QoS $q" remove qos "$q"
    hpc_changed "removed QoS $q"
  fi
done
