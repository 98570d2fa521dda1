#!/usr/bin/env bash
# lsf-down.sh [DIR]: stops the volclava cluster lsf-up.sh started in DIR
# (default /var/lib/datc-testbed/lsf), every process by PID: first the
# jobs (every process below sbatchd that is not a volclava daemon), then
# sbatchd, mbatchd, res and lim, each TERMed and awaited with a deadline,
# KILLed after it.  The PIDs are those in DIR/run/pids plus any daemon
# carrying this DIR's marker (DATC_LSF_BED=DIR in its environment: an
# mbatchd sbatchd restarted since bring-up), each checked to still run the
# program named.  Keeps DIR/log.  Running it when nothing runs is fine.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
. "$here/batch-lib.sh"

dir=$(realpath -m "${1:-/var/lib/datc-testbed/lsf}")
[ -d "$dir/run" ] || exit 0
prefix=$(sed -n 's/^prefix=//p' "$dir/run/info" 2>/dev/null || true)

declare -A prog=()
while read -r pid name; do
  [ -n "$pid" ] && prog[$pid]=$name
done <"$dir/run/pids" 2>/dev/null || true
if [ -n "$prefix" ]; then
  for p in /proc/[0-9]*; do
    exe=$(readlink "$p/exe" 2>/dev/null) || continue
    case $exe in "$prefix/sbin/"*) ;; *) continue ;; esac
    tr '\0' '\n' <"$p/environ" 2>/dev/null | grep -qxF "DATC_LSF_BED=$dir" || continue
    prog[${p#/proc/}]=$(basename "$exe")
  done
fi

# Jobs first: sbatchd forks a child per job, which runs the job's shell.
for pid in "${!prog[@]}"; do
  if [ "${prog[$pid]}" != sbatchd ] || ! tb_is "$pid" sbatchd; then continue; fi
  for child in $(tb_descendants "$pid"); do
    [ -z "${prog[$child]:-}" ] || continue
    exe=$(readlink "/proc/$child/exe" 2>/dev/null) || exe=""
    case $exe in "$prefix/sbin/mbatchd") continue ;; esac
    kill -KILL "$child" 2>/dev/null || true
  done
done
for name in sbatchd mbatchd res lim pim; do
  for pid in "${!prog[@]}"; do
    [ "${prog[$pid]}" = "$name" ] || continue
    tb_stop "$pid" "$name" 20
  done
done
# Whatever else of ours is left (a daemon's helper): by PID, by marker.
for pid in "${!prog[@]}"; do
  tb_stop "$pid" "${prog[$pid]}" 5
done
rm -rf "$dir/run"
