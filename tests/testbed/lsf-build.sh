#!/usr/bin/env bash
# lsf-build.sh: builds volclava 2.2 (an LSF-compatible scheduler) from the
# vendored tarball once per machine, into a cache outside the clone, and
# prints the install prefix.
#
#   lsf-build.sh
#
# Tarball: $DATC_VENDOR_DIR/volclava-*.tar.gz, DATC_VENDOR_DIR defaulting to
# ../shared/vendor relative to the repository root.  Prefix:
# $DATC_TESTBED_CACHE/lsf-HASH (default /var/cache/datc-testbed), HASH the
# first 16 hex digits of the tarball's sha256, so a new tarball gets a new
# build and a second `scripts/check` reuses the first one's.  A prefix
# counts only once its `.complete` marker exists (written last); builds
# are serialised by flock on DIR.lock, so two test beds started at once
# build it once.  Configure, make and make install run under `nice -n 19`
# (the machine is shared), with LSF_BUILD_JOBS jobs (default: the number
# of cores).  volcinstall.sh is not used: it refuses Debian and its init
# script stops daemons with killall (../shared/TESTBED-NOTES.md section 5).
# The build log is DIR.build.log; build time goes to stderr.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
. "$here/batch-lib.sh"

root=$(cd "$here/../.." && pwd)
vendor=${DATC_VENDOR_DIR:-$root/../shared/vendor}
cache=${DATC_TESTBED_CACHE:-/var/cache/datc-testbed}
jobs=${LSF_BUILD_JOBS:-$(nproc)}
[[ $jobs =~ ^[1-9][0-9]*$ ]] || tb_die "LSF_BUILD_JOBS wants a positive number"

shopt -s nullglob
tarballs=("$vendor"/volclava-*.tar.gz)
shopt -u nullglob
[ ${#tarballs[@]} -eq 1 ] \
  || tb_die "expected one volclava-*.tar.gz in $vendor (set DATC_VENDOR_DIR), found ${#tarballs[@]}"
tarball=${tarballs[0]}
hash=$(sha256sum "$tarball" | cut -c1-16)
prefix="$cache/lsf-$hash"

mkdir -p "$cache"
exec 9>"$prefix.lock"
flock 9
if [ -e "$prefix/.complete" ]; then
  tb_log "reusing $prefix"
  echo "$prefix"
  exit 0
fi

for tool in autoconf automake bison flex make gcc; do
  command -v "$tool" >/dev/null || tb_die "$tool is missing: run tests/testbed/install-lsf.sh"
done
start=$(date +%s%N)
rm -rf "$prefix" "$prefix.src"
mkdir -p "$prefix.src"
tar -xzf "$tarball" -C "$prefix.src" --strip-components=1
log="$prefix.build.log"
tb_log "building $(basename "$tarball") into $prefix (log $log)"
(
  cd "$prefix.src"
  nice -n 19 ./bootstrap.sh --prefix="$prefix"
  nice -n 19 make -j"$jobs"
  nice -n 19 make install
) >"$log" 2>&1 || { tail -n 30 "$log" >&2; tb_die "build failed: see $log"; }
rm -rf "$prefix.src"
touch "$prefix/.complete"
end=$(date +%s%N)
tb_log "build time: $(( (end - start) / 1000000 )) ms"
echo "$prefix"
