#!/usr/bin/env bash
# make engine: build the Pulumi CLI, the Python language host and the resource plugins from
# published Go modules (GOPROXY is honoured: point it at the site's module mirror), cache them per
# user keyed by every input, link them under .engine/bin and install the plugins into .engine/home
# (the project's PULUMI_HOME). Nothing is downloaded at run time: no plugin acquisition, no update
# check. Writes .engine/status.json: versions, plugins built or not buildable (with the reason),
# build seconds.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
top=$(cd "$here/../.." && pwd)
# shellcheck source=tools/engine/versions.env
source "$here/versions.env"
# shellcheck source=tools/cache.sh
source "$here/../cache.sh"

export GOFLAGS=-modcacherw GOTOOLCHAIN=local CGO_ENABLED=0
command -v go >/dev/null || { echo "make engine: go is not installed (Debian: apt-get install golang, or Go >= 1.26)" >&2; exit 1; }

key=$(cat "$here/versions.env" "$here/build.sh" "$here"/cli/go.{mod,sum} "$here"/langhost/go.{mod,sum} \
      <(go version) | sha256sum | cut -c1-16)
cache=${XDG_CACHE_HOME:-$HOME/.cache}/hpc-cluster/engine/$PULUMI_CLI_VERSION-$key
engine=$top/.engine
mkdir -p "$cache/bin" "$cache/plugins"

build_flags=(-trimpath -tags "osusergo,grpcnotrace")
started=$(date +%s)

build_core() {
  local ldf="-s -w -X github.com/pulumi/pulumi/sdk/v3/go/common/version.Version=v$PULUMI_CLI_VERSION"
  echo "make engine: building pulumi v$PULUMI_CLI_VERSION (cold: ~7 min on 2 cores)"
  (cd "$here/cli" && go build "${build_flags[@]}" -ldflags "$ldf" -o "$cache/bin/pulumi" \
     github.com/pulumi/pulumi/pkg/v3/cmd/pulumi)
  echo "make engine: building pulumi-language-python $PULUMI_LANGUAGE_PYTHON_VERSION"
  (cd "$here/langhost" && go build "${build_flags[@]}" \
     -ldflags "-s -w -X github.com/pulumi/pulumi/sdk/v3/go/common/version.Version=v$PULUMI_LANGUAGE_PYTHON_SDK" \
     -o "$cache/bin/pulumi-language-python" github.com/pulumi/pulumi/sdk/python/cmd/pulumi-language-python/v3)
  # The host runs the program through this script, looked up beside the host binary (not on PATH).
  local sdk
  sdk=$(cd "$here/cli" && go list -m -f '{{.Dir}}' github.com/pulumi/pulumi/sdk/v3)
  install -m 0755 "$sdk/python/cmd/pulumi-language-python-exec" "$cache/bin/"
  install -m 0755 "$sdk/python/dist/pulumi-resource-pulumi-python" "$cache/bin/"
}

# One plugin: build it, or record exactly why it cannot be built. Never fatal: the engine is
# still useful without a plugin, and tests report which tiers it could not cover.
build_plugin() {
  local name=$1 version=$2 pkg=$3 xver=$4 out="$cache/plugins/$1-$2"
  if cache_ok "$out"; then echo "built"; return; fi
  if [ -z "$pkg" ]; then
    local why="NOT_BUILDABLE_$name"; echo "not-buildable: ${!why}"; return
  fi
  local log; log=$(mktemp)
  cache_reset "$out" >&2
  if GOBIN="$out" go install "${build_flags[@]}" -ldflags "-s -w -X $xver" "$pkg" >"$log" 2>&1; then
    cache_seal "$out"
    echo "built"
  else
    # Quote the go command's own error (the module proxy's answer), one line.
    echo "build-failed: $(grep -m1 -E 'error|denied|not available|Forbidden|cannot' "$log" | tr -s ' ' || tail -n1 "$log")"
  fi
  rm -f "$log"
}

if cache_ok "$cache/bin"; then
  echo "make engine: pulumi v$PULUMI_CLI_VERSION from the cache ($cache)"
else
  cache_reset "$cache/bin"
  build_core
  cache_seal "$cache/bin"
fi

mkdir -p "$engine/bin" "$engine/home"
for f in "$cache"/bin/*; do ln -sfn "$f" "$engine/bin/$(basename "$f")"; done

export PULUMI_HOME=$engine/home PULUMI_SKIP_UPDATE_CHECK=true \
  PULUMI_DISABLE_AUTOMATIC_PLUGIN_ACQUISITION=true PULUMI_IGNORE_AMBIENT_PLUGINS=true
status_plugins=""
for spec in "${PLUGINS[@]}"; do
  IFS='|' read -r name version pkg xver <<<"$spec"
  result=$(build_plugin "$name" "$version" "$pkg" "$xver")
  if [ "$result" = built ]; then
    "$engine/bin/pulumi" plugin install resource "$name" "$version" \
      --file "$cache/plugins/$name-$version/pulumi-resource-$name" >/dev/null
  fi
  echo "make engine: plugin $name $version: $result"
  status_plugins+=$(printf '%s\t%s\t%s\n' "$name" "$version" "$result")$'\n'
done

STATUS_PLUGINS=$status_plugins CLI=$PULUMI_CLI_VERSION HOST=$PULUMI_LANGUAGE_PYTHON_VERSION \
SECONDS_TAKEN=$(( $(date +%s) - started )) CACHE=$cache python3 - "$engine/status.json" <<'PY'
import json, os, sys
plugins = {}
for line in os.environ["STATUS_PLUGINS"].splitlines():
    if line.strip():
        name, version, result = line.split("\t", 2)
        state, _, reason = result.partition(": ")
        plugins[name] = {"version": version, "state": state, "reason": reason}
status = {"cli": os.environ["CLI"], "languagePython": os.environ["HOST"], "cache": os.environ["CACHE"],
          "seconds": int(os.environ["SECONDS_TAKEN"]), "plugins": plugins}
with open(sys.argv[1], "w") as f:
    json.dump(status, f, indent=2, sort_keys=True)
    f.write("\n")
PY
"$engine/bin/pulumi" version
echo "make engine: done in $(( $(date +%s) - started )) s; PULUMI_HOME=$engine/home; status in .engine/status.json"
