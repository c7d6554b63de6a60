#!/usr/bin/env bash
# need-stack.sh STACK: the stack must already exist in the backend (PULUMI_BACKEND_URL). make up,
# preview and secret never create one: a new stack would generate a new munge key, k3s token and
# database password, and the running cluster would stop trusting its own hosts.
set -euo pipefail
stack=${1:?usage: need-stack.sh STACK}
if ! out=$(pulumi stack ls --json 2>&1); then
  echo "hpc: error: cannot list the stacks in ${PULUMI_BACKEND_URL:-the backend}: $(tail -n1 <<<"$out")" >&2
  exit 1
fi
if ! python3 -c 'import json, sys; sys.exit(0 if any(s["name"].split("/")[-1] == sys.argv[1] for s in json.load(sys.stdin)) else 1)' \
  "$stack" <<<"$out"; then
  echo "hpc: error: stack $stack does not exist in ${PULUMI_BACKEND_URL:-the backend}: create it once with" \
    "'pulumi stack init $stack' and set its secrets (README, Running it for real); make never creates a stack," \
    "since a new one would generate new cluster secrets" >&2
  exit 1
fi
