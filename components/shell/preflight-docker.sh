#@ Part of preflight.sh on hosts that run containers.
out=$(as_root docker version --format '{{.Server.Version}}' 2>&1) \
  || hpc_fail "@host@: Docker is not installed or not running ($out): install docker.io and start it"
facts+=" docker $out"
