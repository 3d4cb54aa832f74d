#!/usr/bin/env bash
# Build flux-core from the offline mirror's source archive into build/flux/ ('make flux').
#   - the archive: <mirror>/flux/flux-core-<version>.tar.gz, the offline mirror being
#     $TOPOBIND_OFFLINE_MIRROR, else $TOPOBIND_SHARED, else ../shared (a git tree: autogen first);
#     without it, one line saying where to get it, and exit 0 (the Flux tests then skip), or
#     exit 1 where TOPOBIND_REQUIRE_MIRROR=1 (CI)
#   - Debian packages from scripts/flux-apt-packages.txt (as root: scripts/apt-install.sh)
#   - cached outside the clone, keyed by the archive's sha256 and this script's configure line:
#     $TOPOBIND_CACHE (default /var/cache/topobind when writable, else ~/.cache/topobind)
#     /flux-<key>/ is the install prefix; build/flux is a link to it. A fresh clone with the
#     cache in place costs a link, not a build (CI runs 'make test' in a fresh clone).
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
cd "$here"
say() { printf 'flux: %s\n' "$*"; }
version=0.88.0
shared=${TOPOBIND_OFFLINE_MIRROR:-${TOPOBIND_SHARED:-$here/../shared}}
archive=$shared/flux/flux-core-$version.tar.gz
if [ ! -f "$archive" ]; then
  if [ "${TOPOBIND_REQUIRE_MIRROR:-}" = 1 ]; then
    say "error: $archive not found and TOPOBIND_REQUIRE_MIRROR=1; get flux-core-$version (https://github.com/flux-framework/flux-core/releases) into the offline mirror's flux/" >&2
    exit 1
  fi
  say "skipped: $archive not found; get flux-core-$version (https://github.com/flux-framework/flux-core/releases) into the offline mirror's flux/ (\$TOPOBIND_OFFLINE_MIRROR)"
  exit 0
fi
configure_line="LUA=/usr/bin/lua5.1 PYTHON=/usr/bin/python3 ./configure --disable-docs"
key=$( { sha256sum <"$archive" | cut -c1-64; echo "$configure_line"; } | sha256sum | cut -c1-16)
if [ -n "${TOPOBIND_CACHE:-}" ]; then
  cache=$TOPOBIND_CACHE
elif mkdir -p /var/cache/topobind 2>/dev/null && [ -w /var/cache/topobind ]; then
  cache=/var/cache/topobind
else
  cache=$HOME/.cache/topobind
fi
prefix=$cache/flux-$version-$key
mkdir -p build
if [ -f "$prefix/.topobind-complete" ]; then
  ln -sfn "$prefix" build/flux
  say "cached: build/flux -> $prefix"
  exit 0
fi

bash scripts/apt-install.sh flux scripts/flux-apt-packages.txt

# One builder at a time per cache (two clones building at once would race on the prefix).
mkdir -p "$cache"
exec 9>"$cache/.flux-$key.lock"
flock 9
if [ ! -f "$prefix/.topobind-complete" ]; then
  src=$(mktemp -d "${TMPDIR:-/tmp}/tb-flux-src.XXXXXX")
  trap 'rm -rf "$src"' EXIT
  rm -rf "$prefix"
  say "building flux-core $version into $prefix (2-3 minutes on 2 cores; log: $src/build.log)"
  tar -xzf "$archive" -C "$src"
  cd "$src"/flux-core-*
  {
    FLUX_VERSION=$version ./autogen.sh
    LUA=/usr/bin/lua5.1 PYTHON=/usr/bin/python3 ./configure --prefix="$prefix" --disable-docs
    make -j"$(nproc)"
    make install
  } >"$src/build.log" 2>&1 || { tail -n 30 "$src/build.log" >&2; say "error: build failed (above: the end of its log)" >&2; exit 1; }
  cd "$here"
  touch "$prefix/.topobind-complete"
fi
ln -sfn "$prefix" build/flux
say "built: build/flux -> $prefix ($("$prefix/bin/flux" version | head -1))"
