#@ Part of preflight.sh on hosts that run containers. Pulumi's Docker provider connects as the
#@ login user (ssh://user@host, no sudo): Docker must answer that user too.
out=$(as_root docker version --format '{{.Server.Version}}' 2>&1) \
  || hpc_fail "@host@: Docker is not installed or not running ($out): install docker.io and start it"
me=$(id -un)
if [ "$(id -u)" -ne 0 ] && ! mine=$(docker version --format '{{.Server.Version}}' 2>&1); then
  hpc_fail "@host@: Docker answers root but not $me, the user Pulumi's Docker provider connects as \
($(tail -n1 <<<"$mine" | cut -c1-200)): add $me to the docker group (root-equivalent: whoever is in it \
controls the host) or set sshUser: root for this host"
fi
facts+=" docker $out"
