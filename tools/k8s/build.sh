#!/usr/bin/env bash
# make k8s-api: build kube-apiserver, kube-controller-manager and kube-scheduler (the k3s pin's
# Kubernetes release) from the wrapper module beside this script, and kwok from its published
# module; cache them per user keyed by every input, link them under .k8s/bin. Only `go build` /
# `go install` of published modules (GOPROXY honoured). Measured on 2 cores: apiserver ~8 min,
# controller-manager + scheduler ~2.5 min more, kwok ~3 min (cold); a warm run takes seconds.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
top=$(cd "$here/../.." && pwd)
# shellcheck source=tools/k8s/versions.env
source "$here/versions.env"
export GOFLAGS=-modcacherw GOTOOLCHAIN=local CGO_ENABLED=0
command -v go >/dev/null || { echo "make k8s-api: go is not installed (Go >= 1.26)" >&2; exit 1; }

key=$(cat "$here/versions.env" "$here/build.sh" "$here"/go.{mod,sum} "$here/tools.go" <(go version) \
      | sha256sum | cut -c1-16)
cache=${XDG_CACHE_HOME:-$HOME/.cache}/hpc-cluster/k8s/v$K8S_VERSION-$key
mkdir -p "$cache/bin"
if [ ! -e "$cache/bin/.complete" ]; then
  v=k8s.io/component-base/version
  minor=${K8S_VERSION#1.}; minor=${minor%%.*}
  ldf="-s -w -X $v.gitVersion=v$K8S_VERSION -X $v.gitMajor=1 -X $v.gitMinor=$minor -X $v.gitTreeState=clean"
  ldf+=" -X k8s.io/client-go/pkg/version.gitVersion=v$K8S_VERSION"  # else they report v0.0.0-master
  started=$(date +%s)
  echo "make k8s-api: building Kubernetes v$K8S_VERSION (cold: ~11 min on 2 cores)"
  (cd "$here" && go build -trimpath -ldflags "$ldf" -o "$cache/bin/" \
     k8s.io/kubernetes/cmd/kube-apiserver k8s.io/kubernetes/cmd/kube-controller-manager \
     k8s.io/kubernetes/cmd/kube-scheduler)
  echo "make k8s-api: building kwok v$KWOK_VERSION"
  GOBIN="$cache/bin" go install -trimpath "sigs.k8s.io/kwok/cmd/kwok@v$KWOK_VERSION"
  echo "$(( $(date +%s) - started ))" > "$cache/build-seconds"
  touch "$cache/bin/.complete"
fi
mkdir -p "$top/.k8s"
ln -sfn "$cache/bin" "$top/.k8s/bin"
"$top/.k8s/bin/kube-apiserver" --version
