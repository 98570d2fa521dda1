#!/usr/bin/env bash
# slurm-down.sh [DIR]: stops the cluster slurm-up.sh started in DIR
# (default /var/lib/datc-testbed/slurm), each process by the PID it wrote:
# first every process left in the nodes' cgroups (jobs and their
# slurmstepd), then slurmd, slurmctld and munged, each awaited with a
# deadline.  Removes the nodes' cgroup directories and the
# /etc/slurm/slurm.conf link if it points here.  Keeps DIR/log.  Running it
# when nothing runs is fine.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
. "$here/batch-lib.sh"

dir=$(realpath -m "${1:-/var/lib/datc-testbed/slurm}")
[ -d "$dir/run" ] || exit 0

read_pid() { cat "$1" 2>/dev/null || true; }

nodes=$(cat "$dir/run/nodes" 2>/dev/null || true)
# Jobs first: slurmd leaves slurmstepd and its job running when it exits.
for node in $nodes; do
  for cg in /sys/fs/cgroup/*/"slurm_$node"; do
    [ -d "$cg" ] || continue
    [ ! -e "$cg/freezer.state" ] || find "$cg" -name freezer.state -exec sh -c 'echo THAWED >"$1"' _ {} \; 2>/dev/null || true
    for pid in $(find "$cg" -name cgroup.procs -exec cat {} + 2>/dev/null | sort -u); do
      kill -KILL "$pid" 2>/dev/null || true
    done
  done
done
for node in $nodes; do
  tb_stop "$(read_pid "$dir/run/slurmd-$node.pid")" slurmd 30
done
tb_stop "$(read_pid "$dir/run/slurmctld.pid")" slurmctld 30
tb_stop "$(read_pid "$dir/munge/munged.pid")" munged 10

# Cgroup directories, deepest first; a directory still holding a process
# refuses rmdir, which is worth saying.
for node in $nodes; do
  for cg in /sys/fs/cgroup/*/"slurm_$node"; do
    [ -d "$cg" ] || continue
    for pid in $(find "$cg" -name cgroup.procs -exec cat {} + 2>/dev/null | sort -u); do
      tb_await 10 tb_gone "$pid" || tb_log "pid $pid still in $cg"
    done
    find "$cg" -depth -type d -exec rmdir {} \; 2>/dev/null || tb_log "could not remove $cg"
  done
done
if [ -L /etc/slurm/slurm.conf ] && [ "$(readlink /etc/slurm/slurm.conf)" = "$dir/etc/slurm.conf" ]; then
  rm -f /etc/slurm/slurm.conf
fi
rm -rf "$dir/run"
