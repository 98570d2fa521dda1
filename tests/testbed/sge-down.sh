#!/usr/bin/env bash
# sge-down.sh [DIR]: stops the Grid Engine instance sge-up.sh started for
# DIR (default /var/lib/datc-testbed/sge), by PID: first every process
# below sge_execd (shepherds and jobs: they outlive the execd otherwise),
# then sge_execd, then sge_qmaster, which takes about 9 s to exit after
# SIGTERM (awaited with a deadline).  Releases the cell
# (/var/lib/datc-testbed/sge.owner) if DIR owns it.  Keeps the spool and
# its messages files for a look.  Running it when nothing runs is fine.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
. "$here/batch-lib.sh"

dir=$(realpath -m "${1:-/var/lib/datc-testbed/sge}")
owner_file=/var/lib/datc-testbed/sge.owner
[ -d "$dir/run" ] || exit 0

execd=$(cat "$dir/run/execd.pid" 2>/dev/null || true)
qmaster=$(cat "$dir/run/qmaster.pid" 2>/dev/null || true)
if tb_is "$execd" sge_execd; then
  jobs=$(tb_descendants "$execd")
  for pid in $jobs; do kill -KILL "$pid" 2>/dev/null || true; done
  for pid in $jobs; do tb_await 10 tb_gone "$pid" || tb_log "pid $pid survived SIGKILL"; done
fi
tb_stop "$execd" sge_execd 30
tb_stop "$qmaster" sge_qmaster 30
if [ "$(cat "$owner_file" 2>/dev/null || true)" = "$dir" ]; then
  rm -f "$owner_file"
fi
rm -rf "$dir/run"
