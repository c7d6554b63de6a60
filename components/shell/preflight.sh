#@ Before anything runs on a host, as the login user: passwordless sudo for a non-root user, a
#@ supported OS, and the host's own checks (Docker, the NVIDIA toolkit) appended as @checks@.
user=$(id -un)
if [ "$(id -u)" -ne 0 ]; then
  out=$(sudo -n true 2>&1) || hpc_fail "@host@: user $user cannot run sudo without a password ($out): \
give it passwordless sudo or log in as root"
  as_root() { sudo -n "$@"; }
else
  as_root() { "$@"; }
fi
# shellcheck disable=SC1091
. /etc/os-release
case "${ID:-}:${VERSION_ID:-}" in
  @supported@) ;;
  *) hpc_fail "@host@: ${PRETTY_NAME:-an unknown OS} is not supported (Debian 12/13, Ubuntu 22.04/24.04)" ;;
esac
facts="$PRETTY_NAME, user $user"
@checks@
echo "hpc: @host@ is ready: $facts"
