#!/usr/bin/env bash
# pbs-build.sh: builds OpenPBS from its source tarball once per machine and
# prints PBS_EXEC=PREFIX (the install prefix).
#
#   pbs-build.sh [TARBALL]
#
# TARBALL defaults to $DATC_PBS_TARBALL, else
# ../shared/vendor/openpbs-*.tar.gz relative to the repository root.  The
# result is cached outside the clone, in
# $DATC_TESTBED_CACHE (default /var/cache/datc-testbed)/pbs-HASH/, HASH
# being the first 12 hex digits of the tarball's SHA-256: another clone, or
# a second scripts/check, finds it there and builds nothing.  A build that
# did not finish leaves no `complete` stamp and is redone from scratch.
# Two builds at once take turns (flock on the cache's pbs.lock).
#
# How (../shared/TESTBED-NOTES.md section 5): autogen, configure
# --with-python=/usr with /usr/bin first on PATH (a python from a version
# manager would otherwise be found), make, make install, then the suid bit
# on pbs_iff and pbs_rcp that make install clears.  pbs_postinstall is not
# run: pbs-up.sh writes its own pbs.conf and PBS_HOME, and never touches
# /etc/pbs.conf or /etc/init.d.  Every compile step runs under nice -n 19
# (the machine is shared); the build log is PREFIX/../build.log.  Prints
# the build time on stderr when it builds.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
. "$here/batch-lib.sh"

root=$(cd "$here/../.." && pwd)
tarball=${1:-${DATC_PBS_TARBALL:-}}
if [ -z "$tarball" ]; then
  for t in "$root"/../shared/vendor/openpbs-*.tar.gz; do
    [ -e "$t" ] && tarball=$t
  done
fi
[ -n "$tarball" ] && [ -f "$tarball" ] \
  || tb_die "no OpenPBS tarball: give one, or set DATC_PBS_TARBALL (looked in $root/../shared/vendor/)"
cache=${DATC_TESTBED_CACHE:-/var/cache/datc-testbed}
hash=$(sha256sum "$tarball" | cut -c1-12)
top="$cache/pbs-$hash"
prefix="$top/prefix"

mkdir -p "$cache"
exec 9>"$cache/pbs.lock"
flock 9
if [ -e "$top/complete" ] && [ -x "$prefix/sbin/pbs_server.bin" ]; then
  echo "PBS_EXEC=$prefix"
  exit 0
fi
command -v autoconf >/dev/null && command -v swig >/dev/null && [ -e /usr/include/libical/ical.h ] \
  || tb_die "build dependencies missing: run tests/testbed/install-pbs.sh (scripts/install-deps --test)"

start=$(date +%s)
rm -rf "$top"
mkdir -p "$top/src"
log="$top/build.log"
tb_log "building OpenPBS from $(basename "$tarball") into $prefix (log: $log)"
tar -xzf "$tarball" -C "$top/src" --strip-components=1
jobs=${DATC_PBS_BUILD_JOBS:-2}
(
  cd "$top/src"
  export PATH=/usr/local/sbin:/usr/sbin:/usr/bin:/sbin:/bin
  nice -n 19 ./autogen.sh
  nice -n 19 ./configure --prefix="$prefix" --with-python=/usr
  nice -n 19 make -j"$jobs"
  nice -n 19 make install
) >"$log" 2>&1 || { tail -n 30 "$log" >&2; tb_die "build failed: see $log"; }
chmod 4755 "$prefix/sbin/pbs_iff" "$prefix/sbin/pbs_rcp"
rm -rf "$top/src"
echo "$(basename "$tarball") $(date -u +%FT%TZ) $(( $(date +%s) - start ))s" >"$top/complete"
tb_log "OpenPBS built in $(( $(date +%s) - start )) s"
echo "PBS_EXEC=$prefix"
