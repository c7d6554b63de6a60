#@ Part of directory.sh when the directory binds: the bind password from stdin.
password=$(cat)
[ -n "$password" ] || hpc_fail "no LDAP bind password on stdin"
case $password in *$'\n'*) hpc_fail "the LDAP bind password has a line break";; esac
shopt -u patsub_replacement 2>/dev/null || true  # bash 5.2: '&' in the password stays itself
