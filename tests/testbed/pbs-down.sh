#!/usr/bin/env bash
# pbs-down.sh [DIR]: stops the cluster pbs-up.sh started in DIR (default
# /var/lib/datc-testbed/pbs), each process by the PID its lock file names
# (PBS_HOME/{mom_priv/mom.lock,sched_priv/sched.lock,server_priv/
# server.lock,server_priv/comm.lock}, the database's postmaster.pid): first
# every process below pbs_mom (jobs and their shells), then pbs_mom,
# pbs_sched, pbs_server, PostgreSQL, pbs_comm, each awaited with a deadline.
# Then removes /etc/netns/NS/hosts and the namespace pbs-up.sh created, if
# it did (after killing, by PID, anything still inside it).  Copies PBS's
# logs to DIR/logs and removes PBS_HOME (it lives outside DIR, see
# pbs-up.sh).  Running it when nothing runs is fine.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
. "$here/batch-lib.sh"

dir=$(realpath -m "${1:-/var/lib/datc-testbed/pbs}")
[ -d "$dir/run" ] || exit 0
info() { sed -n "s/^$1=//p" "$dir/run/info" 2>/dev/null | tail -n 1; }
read_pid() { head -n 1 "$1" 2>/dev/null | tr -cd '0-9' || true; }
home=$(info home)
[ -n "$home" ] || home=/nonexistent

mom=$(read_pid "$home/mom_priv/mom.lock")
if tb_is "$mom" pbs_mom; then
  jobs=$(tb_descendants "$mom")
  for pid in $jobs; do kill -KILL "$pid" 2>/dev/null || true; done
  for pid in $jobs; do tb_await 10 tb_gone "$pid" || tb_log "pid $pid survived SIGKILL"; done
fi
tb_stop "$mom" pbs_mom 30
tb_stop "$(read_pid "$home/sched_priv/sched.lock")" pbs_sched 30
tb_stop "$(read_pid "$home/server_priv/server.lock")" pbs_server.bin 30
# postgres: SIGTERM is its "smart" shutdown, which waits for clients; the
# server that was its client is gone by now.  SIGINT ("fast") does not wait.
pg=$(read_pid "$home/datastore/postmaster.pid")
if tb_is "$pg" postgres; then
  kill -INT "$pg" 2>/dev/null || true
  tb_await 30 tb_gone "$pg" || { tb_log "postgres ($pg) still there after 30 s: SIGKILL"; kill -KILL "$pg" 2>/dev/null || true; }
fi
tb_stop "$(read_pid "$home/server_priv/comm.lock")" pbs_comm 30

netns=$(info netns)
own=$(info own_netns)
if [ -n "$netns" ]; then
  rm -f "/etc/netns/$netns/hosts"
  rmdir "/etc/netns/$netns" 2>/dev/null || true
fi
if [ -n "$own" ] && [ -e "/run/netns/$own" ]; then
  for pid in $(ip netns pids "$own" 2>/dev/null); do
    [ "$pid" != "$$" ] || continue
    tb_log "pid $pid still in $own: SIGKILL"
    kill -KILL "$pid" 2>/dev/null || true
    tb_await 5 tb_gone "$pid" || tb_log "pid $pid survived SIGKILL"
  done
  ip netns delete "$own" || tb_log "could not delete namespace $own"
fi
if [ -d "$home" ]; then
  mkdir -p "$dir/logs"
  for d in "$home"/*_logs; do
    [ -d "$d" ] && cp -r "$d" "$dir/logs/"
  done
  rm -rf "$home"
fi
[ "$home" = /nonexistent ] || rm -rf "$home.tmp"
rm -rf "$dir/run"
