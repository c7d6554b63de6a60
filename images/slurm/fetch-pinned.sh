#!/bin/bash
# Usage: fetch-pinned.sh NAME OUT_DIR: download the pinned .deb NAME (pins.sh: NAME_VERSION,
# NAME_POOL, NAME_SHA256_<arch>) from the Debian mirror the image's apt uses (or DEBIAN_MIRROR),
# check its SHA-256 and leave it in OUT_DIR. Fails with one line naming the pin and the fix.
set -euo pipefail
name=$1 out=$2
# shellcheck source-path=SCRIPTDIR source=pins.sh
. "$(dirname "$0")/pins.sh"
key=${name^^}
arch=$(dpkg --print-architecture)
version_var=${key}_VERSION pool_var=${key}_POOL sha_var=${key}_SHA256_${arch}
version=${!version_var} pool=${!pool_var} sha=${!sha_var:-}
[ -n "$sha" ] || { echo "hpc: error: no SHA-256 pinned for $name on $arch: add $sha_var to images/slurm/pins.sh" >&2; exit 1; }
mirror=${DEBIAN_MIRROR:-$(awk '/^URIs:/ {print $2; exit}' /etc/apt/sources.list.d/debian.sources)}
deb="${name}_${version}_${arch}.deb"
url="$mirror/$pool/$deb"
if ! err=$(curl -fsS --retry 3 -o "$out/$deb" "$url" 2>&1); then
  echo "hpc: error: cannot fetch $name $version ($url: ${err##*curl: }): the pin in images/slurm/pins.sh" \
    "names a file the mirror no longer serves; move the pin, or build with --build-arg DEBIAN_MIRROR=<a mirror or snapshot.debian.org archive that has it>" >&2
  exit 1
fi
if ! echo "$sha  $out/$deb" | sha256sum --check --status; then
  echo "hpc: error: $url does not match its pin ($sha_var in images/slurm/pins.sh): got $(sha256sum "$out/$deb" | cut -d' ' -f1)" >&2
  exit 1
fi
