#!/usr/bin/env bash
# cluster-down.sh: undoes cluster-up.sh DIR.  The login sshd (and every
# session below it), then the scheduler (slurm-down.sh or sge-down.sh),
# each by the PIDs its up script recorded; then every process still inside
# the bed's three namespaces (a command a cut session left behind, a relay),
# by PID from `ip netns pids`, TERM then KILL at a deadline; then the
# namespaces, which takes the links and the firewall with them.
#
#   cluster-down.sh DIR
#
# Idempotent: nothing there is not an error.  Keeps keys, logs and the
# hosts files in DIR.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
. "$here/batch-lib.sh"

dir=${1:-}
[[ $dir =~ ^/[A-Za-z0-9._/+-]+$ ]] || tb_die "usage: cluster-down.sh DIR"
[ -s "$dir/run/info" ] || exit 0
suffix=$(sed -n 's/^suffix=//p' "$dir/run/info")
[[ $suffix =~ ^[a-z0-9]{1,12}$ ]] || tb_die "bad suffix in $dir/run/info: $suffix"

status=0
"$here/sshd-down.sh" "$dir/ssh" || status=1
[ ! -d "$dir/slurm/run" ] || "$here/slurm-down.sh" "$dir/slurm" || status=1
[ ! -d "$dir/sge/run" ] || "$here/sge-down.sh" "$dir/sge" || status=1

# Never this script or whoever ran it, should it have entered one.
protected=" $$ $PPID "
for ns in "tb-cm-$suffix" "tb-cl-$suffix" "tb-cc-$suffix"; do
  [ -e "/run/netns/$ns" ] || continue
  pids=()
  for p in $(ip netns pids "$ns" 2>/dev/null); do
    [[ $protected == *" $p "* ]] || pids+=("$p")
  done
  if [ ${#pids[@]} -gt 0 ]; then
    kill -TERM "${pids[@]}" 2>/dev/null || true
    for p in "${pids[@]}"; do
      if ! tb_await 5 tb_gone "$p"; then
        kill -KILL "$p" 2>/dev/null || true
        tb_await 5 tb_gone "$p" || { tb_log "pid $p in $ns survived SIGKILL"; status=1; }
      fi
    done
  fi
  ip netns delete "$ns" || status=1
done
if [ $status -eq 0 ]; then
  rm -f "$dir/cluster.env"
  rm -rf "$dir/run"
fi
exit $status
