#@ TLS and a login for Prometheus and Alertmanager on the head (their --web.config.file): a
#@ self-signed certificate made here (its key never leaves the head; remade when it is due to
#@ expire or the head's names change), and the bcrypt hash of hpc:monitoringPassword, which
#@ arrives on stdin and is kept for Prometheus itself in a file only root and its group read.
hpc_install openssl python3 python3-bcrypt prometheus
gid=$(getent group prometheus | cut -d: -f3) || hpc_fail "no prometheus group: the prometheus package did not install"
password=$(cat)
[ -n "$password" ] || hpc_fail "no monitoring password on stdin (hpc:monitoringPassword)"
hpc_dir @dir@ 0750 "0:$gid"
remake=""
if [ ! -s @cert@ ] || [ ! -s @key@ ]; then
  remake="there was none"
elif ! openssl x509 -in @cert@ -noout -checkend @renew_s@ >/dev/null; then
  remake="the old one expires within @renew_days@ days"
elif [ "$(openssl x509 -in @cert@ -noout -ext subjectAltName 2>/dev/null | tail -n +2 | tr -d ' ')" != @san_shown@ ]; then
  remake="the head's names changed"
fi
if [ -n "$remake" ]; then
  out=$(openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days @days@ \
    -subj '/CN=@head@ monitoring (hpc-cluster)' -addext subjectAltName=@san@ \
    -keyout @key@.new -out @cert@.new 2>&1) || hpc_fail "openssl could not make the certificate: $out"
  chmod 0640 @key@.new && chown "0:$gid" @key@.new
  chmod 0644 @cert@.new
  mv -f @key@.new @key@
  mv -f @cert@.new @cert@
  hpc_changed "made the monitoring TLS certificate ($remake)"
fi
hpc_fix_mode @key@ 0640 "0:$gid"
hpc_fix_mode @cert@ 0644 0:0
hpc_put_file @password@ 0640 "0:$gid" < <(printf "%s" "$password")
# The hash in web.yml is checked against the password, so a run that stopped half-way, or a
# password changed by hand, is repaired on the next run.
current=""
[ ! -s @config@ ] || current=$(sed -n 's/^  @user@: //p' @config@)
if [ -z "$current" ] || ! printf '%s' "$password" | HASH="$current" /usr/bin/python3 -c \
    'import bcrypt, os, sys; sys.exit(not bcrypt.checkpw(sys.stdin.buffer.read(), os.environ["HASH"].encode()))' \
    2>/dev/null; then
  hash=$(printf '%s' "$password" | /usr/bin/python3 -c \
    'import bcrypt, sys; print(bcrypt.hashpw(sys.stdin.buffer.read(), bcrypt.gensalt(12)).decode())' 2>&1) \
    || hpc_fail "python3-bcrypt could not hash the monitoring password: $hash"
  hpc_put_file @config@ 0640 "0:$gid" <<HPC_FILE_END
# Managed by hpc-cluster (Pulumi): components/monitoring/scripts/monitoring-web.sh
tls_server_config:
  cert_file: @cert@
  key_file: @key@
  min_version: TLS12
basic_auth_users:
  @user@: $hash
HPC_FILE_END
fi
hpc_fix_mode @config@ 0640 "0:$gid"
fingerprint=$(openssl x509 -in @cert@ -noout -fingerprint -sha256) || hpc_fail "cannot read @cert@"
echo "hpc: monitoring certificate ${fingerprint#*=} (@cert@; pin it, or replace it with your CA's)"
