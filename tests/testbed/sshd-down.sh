#!/usr/bin/env bash
# sshd-down.sh: stops the sshd that sshd-up.sh started in DIR, and every
# process it started (sessions and the commands they run), by PID.
#
#   sshd-down.sh [DIR]
#
# Idempotent: nothing running is not an error.  Keys, known_hosts, the log
# and sshd.env stay in DIR, so sshd-up.sh DIR restarts the same sshd.
# Processes that left the tree on purpose (setsid + reparenting, like the
# fork scheduler's proxies) are not found here: tests cancel those.
set -euo pipefail

dir=${1:-/var/lib/datc-testbed/sshd}
[[ $dir =~ ^/[A-Za-z0-9._/+-]+$ ]] || { echo "sshd-down: bad DIR: $dir" >&2; exit 1; }

alive() {
  local stat
  { read -r stat <"/proc/$1/stat"; } 2>/dev/null || return 1
  stat=${stat##*) }
  [ "${stat%% *}" != Z ]
}

is_our_sshd() {
  alive "$1" && tr '\0' ' ' <"/proc/$1/cmdline" 2>/dev/null | grep -qF -- "-f $dir/sshd_config "
}

# Prints the PIDs of every descendant of $1 (children first found, then theirs).
descendants() {
  local -A children=()
  local f stat pid ppid
  for f in /proc/[0-9]*/stat; do
    { read -r stat <"$f"; } 2>/dev/null || continue
    pid=${stat%% *}
    stat=${stat##*) } # "S PPID ..."
    stat=${stat#* }
    ppid=${stat%% *}
    children[$ppid]+="$pid "
  done
  local queue=("$1") p c
  while [ ${#queue[@]} -gt 0 ]; do
    p=${queue[0]}
    queue=("${queue[@]:1}")
    for c in ${children[$p]:-}; do
      echo "$c"
      queue+=("$c")
    done
  done
}

[ -s "$dir/sshd.pid" ] || exit 0
pid=$(cat "$dir/sshd.pid")
if [[ $pid =~ ^[0-9]+$ ]] && [ "$pid" -gt 1 ] && is_our_sshd "$pid"; then
  # Collected before the kill: once the listener is gone its sessions are
  # reparented and no longer look like ours.
  mapfile -t pids < <(echo "$pid"; descendants "$pid")
  kill -TERM "${pids[@]}" 2>/dev/null || true
  deadline=$((SECONDS + 5))
  for p in "${pids[@]}"; do
    while alive "$p" && [ $SECONDS -lt $deadline ]; do sleep 0.02; done
    if alive "$p"; then kill -KILL "$p" 2>/dev/null || true; fi
  done
  for p in "${pids[@]}"; do
    while alive "$p" && [ $SECONDS -lt $((deadline + 5)) ]; do sleep 0.02; done
    if alive "$p"; then echo "sshd-down: process $p survived SIGKILL" >&2; exit 1; fi
  done
fi
rm -f "$dir/sshd.pid"
