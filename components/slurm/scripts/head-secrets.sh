#@ The accounting DB password (stdin) and slurmdbd.conf with the password substituted on the host.
password=$(cat)
[ -n "$password" ] || hpc_fail "no database password on stdin"
mkdir -p @config_dir@
chmod 0755 @config_dir@
hpc_put_file @password_file@ 0600 0:0 < <(printf '%s' "$password")
template=$(cat <<'SLURMDBD_CONF'
@template@
SLURMDBD_CONF
)
hpc_put_file @config_dir@/slurmdbd.conf 0600 @owner@ \
  < <(printf '%s\n' "${template//@placeholder@/$password}")
