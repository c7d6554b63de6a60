# Per-user build caches that stay honest (sourced by tools/*/build.sh).
#
# A cache directory is trusted only when it is sealed: cache_seal writes, last and atomically, a
# manifest of every file's SHA-256 (DIR/.complete); cache_ok checks the manifest against the
# files. A build killed midway leaves no seal, and a file truncated or changed since (a full disk,
# a hand edit) fails the check, so both are rebuilt instead of used.

# cache_seal DIR: record the SHA-256 of every file under DIR in DIR/.complete.
cache_seal() {
  local dir=$1 tmp
  tmp=$(mktemp "$dir/.complete.XXXXXX")
  (cd "$dir" && find . -type f ! -name '.complete*' -print0 | LC_ALL=C sort -z | xargs -0 -r sha256sum) >"$tmp"
  mv -f "$tmp" "$dir/.complete"
}

# cache_ok DIR: DIR is sealed and every file the seal lists is there with the same content.
cache_ok() {
  [ -s "$1/.complete" ] && (cd "$1" && sha256sum --check --quiet --status .complete)
}

# cache_reset DIR: an unsealed or damaged DIR, emptied for a rebuild (says why).
cache_reset() {
  if [ -e "$1/.complete" ]; then
    echo "cache: $1 fails its seal (a file changed or is missing): rebuilding it"
  elif [ -d "$1" ] && [ -n "$(ls -A "$1")" ]; then
    echo "cache: $1 was left unsealed (a build stopped midway): rebuilding it"
  fi
  rm -rf "$1"
  mkdir -p "$1"
}
