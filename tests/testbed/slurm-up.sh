#!/usr/bin/env bash
# slurm-up.sh: a private Slurm 22.05 cluster on this host: its own munged,
# slurmctld and one slurmd offering CPUS cpus (8 by default, on however few
# cores; SlurmdParameters=config_overrides), with a fresh state directory
# every time, so job ids start at 1 and no job survives from a previous run.
#
#   slurm-up.sh [--netns NAME --addr ADDR] [--cluster NAME] [--cpus N]
#               [--conf 'Key=Value']... [--link-etc] [DIR]
#
# DIR (default /var/lib/datc-testbed/slurm) holds everything: etc/slurm.conf,
# state/, spool/, log/, run/*.pid, munge/ (socket, pid, log) and `env`, one
# line SLURM_CONF=DIR/etc/slurm.conf, which is also printed on stdout:
# clients choose this cluster with that variable.  Running it again on the
# same DIR stops the running instance first (slurm-down.sh) and starts a
# fresh one.  Ports (slurmctld, slurmd) are picked free at run time, so
# several clusters never collide; each has its own munged (AuthInfo socket=),
# so stopping one never breaks another.
#
# --netns NAME starts slurmctld and slurmd inside /run/netns/NAME (through
# nsenter, see ../shared/TESTBED-NOTES.md section 3) listening on ADDR, an
# address of that namespace; munged stays in the root namespace (its socket
# is a file, reachable from any namespace).  --conf adds or overrides a
# slurm.conf line (the capture script uses it for MaxJobCount).  --link-etc
# also points /etc/slurm/slurm.conf at this cluster (for clients that get no
# SLURM_CONF); slurm-down.sh removes the link if it still points here.
#
# Process tracking is proctrack/cgroup (v1, every Constrain* off): it kills
# a job's background and double-forked children too, which linuxproc
# does not.  Per-node cgroups are /sys/fs/cgroup/*/slurm_NODE; the node is
# named after the cluster, so clusters do not share them.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
. "$here/batch-lib.sh"

netns="" addr="127.0.0.1" cluster="" cpus=8 link_etc=0
extra=()
while [ $# -gt 0 ]; do
  case $1 in
    --netns) netns=$2; shift 2 ;;
    --addr) addr=$2; shift 2 ;;
    --cluster) cluster=$2; shift 2 ;;
    --cpus) cpus=$2; shift 2 ;;
    --conf) extra+=("$2"); shift 2 ;;
    --link-etc) link_etc=1; shift ;;
    -h|--help) sed -n '2,30p' "$0"; exit 0 ;;
    -*) tb_die "unknown option $1" ;;
    *) break ;;
  esac
done
dir=$(realpath -m "${1:-/var/lib/datc-testbed/slurm}")
[ "$(id -u)" -eq 0 ] || tb_die "must run as root (daemons run as root, munged as munge)"
command -v slurmctld >/dev/null || tb_die "Slurm is not installed: run tests/testbed/install-batch.sh"
[ -n "$netns" ] || [ "$addr" = "127.0.0.1" ] || tb_die "--addr needs --netns"
[[ $cpus =~ ^[1-9][0-9]*$ ]] || tb_die "--cpus wants a positive number"
if [ -z "$cluster" ]; then
  # ClusterName: lower case (Slurm lower-cases it anyway), letters and digits.
  cluster=$(basename "$dir" | tr 'A-Z' 'a-z' | tr -cd 'a-z0-9' | cut -c1-24)
  [ -n "$cluster" ] || cluster=testbed
fi
[[ $cluster =~ ^[a-z][a-z0-9]*$ ]] || tb_die "--cluster wants lower-case letters and digits"
ns=$(tb_ns "$netns")
node="$cluster-n1"
host=$(hostname)

# A fresh cluster: whatever ran here before goes first.
if [ -e "$dir/run" ]; then
  "$here/slurm-down.sh" "$dir" >/dev/null
fi
mkdir -p "$dir"
chmod 755 "$dir"
rm -rf "$dir/state" "$dir/spool" "$dir/run" "$dir/munge" "$dir/etc"
mkdir -p "$dir/etc" "$dir/state" "$dir/spool" "$dir/log" "$dir/run" "$dir/munge"
chmod 700 "$dir/state"
chown munge:munge "$dir/munge"
chmod 755 "$dir/munge"
: >"$dir/log/slurmctld.log"
echo "$node" >"$dir/run/nodes"

ctl_port=$(tb_free_port "$ns") || tb_die "no free port for slurmctld"
node_port=$(tb_free_port "$ns" "$ctl_port") || tb_die "no free port for slurmd"

cat >"$dir/etc/slurm.conf" <<CONF
# Written by tests/testbed/slurm-up.sh: a one-node test cluster.
ClusterName=$cluster
SlurmctldHost=$host($addr)
SlurmctldPort=$ctl_port
SlurmdPort=$node_port
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$dir/munge/munge.socket
StateSaveLocation=$dir/state
SlurmdSpoolDir=$dir/spool/%n
SlurmctldPidFile=$dir/run/slurmctld.pid
SlurmdPidFile=$dir/run/slurmd-%n.pid
SlurmctldLogFile=$dir/log/slurmctld.log
SlurmdLogFile=$dir/log/slurmd-%n.log
SlurmctldDebug=info
SlurmdDebug=info
ProctrackType=proctrack/cgroup
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
SlurmdParameters=config_overrides
SchedulerType=sched/backfill
AccountingStorageType=accounting_storage/none
JobAcctGatherType=jobacct_gather/none
JobCompType=jobcomp/none
MpiDefault=none
MailProg=/bin/true
MinJobAge=600
KillWait=5
ReturnToService=2
NodeName=$node NodeHostname=$host NodeAddr=$addr Port=$node_port CPUs=$cpus State=UNKNOWN
PartitionName=batch Nodes=$node Default=YES MaxTime=INFINITE State=UP
CONF
for line in "${extra[@]}"; do
  echo "$line" >>"$dir/etc/slurm.conf"
done
cat >"$dir/etc/cgroup.conf" <<CONF
CgroupPlugin=cgroup/v1
CgroupAutomount=no
ConstrainCores=no
ConstrainRAMSpace=no
ConstrainSwapSpace=no
ConstrainDevices=no
CONF
conf="$dir/etc/slurm.conf"

# munged: one per cluster, as munge, socket in DIR/munge.
runuser -u munge -- /usr/sbin/munged --socket="$dir/munge/munge.socket" \
  --pid-file="$dir/munge/munged.pid" --log-file="$dir/munge/munged.log" \
  --seed-file="$dir/munge/munged.seed" \
  || tb_die "munged did not start: see $dir/munge/munged.log"
tb_await 10 test -S "$dir/munge/munge.socket" || tb_die "munged made no socket"

daemon_env=(env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin SLURM_CONF="$conf")
# shellcheck disable=SC2086
$ns "${daemon_env[@]}" /usr/sbin/slurmctld -f "$conf" \
  || tb_die "slurmctld did not start: see $dir/log/slurmctld.log"
# shellcheck disable=SC2086
$ns "${daemon_env[@]}" /usr/sbin/slurmd -f "$conf" -N "$node" \
  || tb_die "slurmd did not start: see $dir/log/slurmd-$node.log"

# Up means: the node is idle and takes jobs.
node_idle() {
  local state
  state=$($ns env SLURM_CONF="$conf" sinfo -h -n "$node" -o %t 2>/dev/null) || return 1
  [ "$state" = "idle" ]
}
if ! tb_await 30 node_idle; then
  tail -n 20 "$dir/log/slurmctld.log" "$dir/log/slurmd-$node.log" >&2 || true
  tb_die "node $node did not become idle within 30 s"
fi

echo "SLURM_CONF=$conf" >"$dir/env"
{ echo "netns=$netns"; echo "addr=$addr"; echo "ctl_port=$ctl_port"; echo "node_port=$node_port"; } >"$dir/run/info"
if [ "$link_etc" -eq 1 ]; then
  mkdir -p /etc/slurm
  [ ! -e /etc/slurm/slurm.conf ] || [ -L /etc/slurm/slurm.conf ] \
    || tb_die "/etc/slurm/slurm.conf is a real file: not replacing it"
  ln -sfn "$conf" /etc/slurm/slurm.conf
fi
echo "SLURM_CONF=$conf"
