#!/usr/bin/env bash
# lsf-up.sh: a private single-host volclava 2.2 cluster (LSF-compatible:
# bsub, bjobs, bkill, bqueues) on this host, with a fresh state directory
# every time.
#
#   lsf-up.sh [--netns NAME] [--slots N] [DIR]
#
# volclava is built once per machine by lsf-build.sh (a cache outside the
# clone); its build time, when it builds, and the bring-up time are printed
# on stderr.  DIR (default /var/lib/datc-testbed/lsf) holds everything:
# etc/ (lsf.conf and the cluster files: LSF_ENVDIR), work/ (LSB_SHAREDIR:
# mbatchd's event log), log/, run/pids (PID PROGRAM per daemon) and `env`,
# KEY=VALUE lines for clients, also printed on stdout: LSF_ENVDIR,
# LSF_BINDIR (put it on PATH), LSB_NTRIES=1 (without it every command hangs
# for ever while the daemons are down).  Running it again on the same DIR
# stops the running instance first (lsf-down.sh): job ids restart at 1.
#
# One host, queue `normal` (the default), N job slots on it (MXJ, 8 by
# default, on however few cores), mbatchd and sbatchd scheduling every
# second (the default 10 s delays the first job by ~9 s).  Cluster admin:
# the user `volclava` (install-lsf.sh); the daemons run as root and jobs
# as their submitter, root included (LSF_ROOT_REX=local: the scheduler
# tests submit through the local transport as root).  The four ports (lim, res, mbatchd, sbatchd) are
# picked free at run time, so clusters in several DIRs never collide;
# --netns NAME starts the daemons in /run/netns/NAME (nsenter), where this
# host's name must resolve to an address of that namespace (its loopback
# does: ../shared/TESTBED-NOTES.md section 5).
#
# The daemons daemonize (volclava's own init script stops them with
# killall, so it is not used); they are found afterwards by the marker
# DATC_LSF_BED=DIR in their environment, which lsf-down.sh uses again.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
. "$here/batch-lib.sh"

netns="" slots=8
while [ $# -gt 0 ]; do
  case $1 in
    --netns) netns=$2; shift 2 ;;
    --slots) slots=$2; shift 2 ;;
    -h|--help) sed -n '2,31p' "$0"; exit 0 ;;
    -*) tb_die "unknown option $1" ;;
    *) break ;;
  esac
done
dir=$(realpath -m "${1:-/var/lib/datc-testbed/lsf}")
[ "$(id -u)" -eq 0 ] || tb_die "must run as root (the daemons run as root)"
[[ $slots =~ ^[1-9][0-9]*$ ]] || tb_die "--slots wants a positive number"
id -u volclava >/dev/null 2>&1 || tb_die "no user volclava: run tests/testbed/install-lsf.sh"
ns=$(tb_ns "$netns")
prefix=$("$here/lsf-build.sh") || tb_die "volclava could not be built"
host=$(hostname)
cluster=$(basename "$dir" | tr -cd 'A-Za-z0-9' | cut -c1-24)
[[ $cluster =~ ^[A-Za-z] ]] || cluster="tb$cluster"

if [ -e "$dir/run" ]; then
  "$here/lsf-down.sh" "$dir" >/dev/null
fi
start=$(date +%s%N)
mkdir -p "$dir"
chmod 755 "$dir"
rm -rf "${dir:?}/etc" "${dir:?}/work" "${dir:?}/run" "${dir:?}/log"
mkdir -p "$dir/etc" "$dir/work/logdir" "$dir/log" "$dir/run"
chown -R volclava: "$dir/work" "$dir/log"

ports=()
for _ in 1 2 3 4; do
  ports+=("$(tb_free_port "$ns" "${ports[@]}")") || tb_die "no free port"
done

etc="$dir/etc"
cat >"$etc/lsf.conf" <<CONF
# Written by tests/testbed/lsf-up.sh.
LSF_SERVERDIR=$prefix/sbin
LSF_BINDIR=$prefix/bin
LSF_ENVDIR=$etc
LSF_CONFDIR=$etc
LSB_CONFDIR=$etc
LSB_SHAREDIR=$dir/work
LSF_LOGDIR=$dir/log
LSF_LOG_MASK=LOG_WARNING
LSF_LIM_PORT=${ports[0]}
LSF_RES_PORT=${ports[1]}
LSB_MBD_PORT=${ports[2]}
LSB_SBD_PORT=${ports[3]}
LSF_AUTH=eauth
LSB_MAILTO=!U
LSF_PIM_SLEEPTIME_UPDATE=y
LSB_MAX_PACK_JOBS=300
LSB_PACK_SKIP_ERROR=N
LSF_ROOT_REX=local
CONF
cat >"$etc/lsf.shared" <<CONF
Begin Cluster
ClusterName
$cluster
End Cluster
Begin HostType
TYPENAME
linux
End HostType
Begin HostModel
MODELNAME  CPUFACTOR   ARCHITECTURE
IntelI5      100        (x86_64)
End HostModel
Begin Resource
RESOURCENAME  TYPE    INTERVAL INCREASING  DESCRIPTION
   fs         Boolean ()       ()          (File server)
   cs         Boolean ()       ()          (Compute server)
End Resource
CONF
cat >"$etc/lsf.cluster.$cluster" <<CONF
Begin   ClusterAdmins
Administrators = volclava
End    ClusterAdmins
Begin	Host
HOSTNAME          model          type  server  r1m  RESOURCES
$host             IntelI5        linux   1      3.5  (cs)
End     Host
CONF
cp "$prefix/etc/lsf.task" "$etc/lsf.task"
cat >"$etc/lsb.params" <<CONF
Begin Parameters
DEFAULT_QUEUE  = normal
MBD_SLEEP_TIME = 1
SBD_SLEEP_TIME = 1
JOB_ACCEPT_INTERVAL = 0
DEFAULT_LIMIT_IGNORE_USER_GROUP = N
End Parameters
CONF
cat >"$etc/lsb.queues" <<CONF
Begin Queue
QUEUE_NAME   = normal
PRIORITY     = 30
DESCRIPTION  = datc test bed queue
End Queue
CONF
cat >"$etc/lsb.hosts" <<CONF
Begin Host
HOST_NAME     MXJ   JL/U   r1m    pg    ls     tmp  DISPATCH_WINDOW
$host         $slots    ()     ()     ()    ()     ()     ()
End Host
CONF
cat >"$etc/lsb.users" <<CONF
Begin UserGroup
GROUP_NAME       GROUP_MEMBER
End UserGroup
Begin User
USER_NAME	MAX_JOBS	JL/P
End User
CONF

client_env=(LSF_ENVDIR="$etc" LSB_NTRIES=1)
# A bring-up that fails half-way leaves nothing running.
trap '[ $? -eq 0 ] || "$here/lsf-down.sh" "$dir" >/dev/null 2>&1 || true' EXIT
daemon_env=(env -i PATH="$prefix/bin:/usr/sbin:/usr/bin:/sbin:/bin" LSF_ENVDIR="$etc"
            DATC_LSF_BED="$dir")
for d in lim res sbatchd; do
  # shellcheck disable=SC2086
  $ns "${daemon_env[@]}" "$prefix/sbin/$d" || tb_die "$d did not start: see $dir/log"
done

# Our daemons: this cluster's programs carrying this DIR's marker.
lsf_pids() {
  local p exe
  for p in /proc/[0-9]*; do
    exe=$(readlink "$p/exe" 2>/dev/null) || continue
    case $exe in "$prefix/sbin/"*) ;; *) continue ;; esac
    tr '\0' '\n' <"$p/environ" 2>/dev/null | grep -qxF "DATC_LSF_BED=$dir" || continue
    tb_alive "${p#/proc/}" && echo "${p#/proc/} $(basename "$exe")"
  done
}
# Up means: bhosts says the host is ok, so it takes jobs.
host_ok() {
  lsf_pids >"$dir/run/pids"
  $ns env "${client_env[@]}" timeout 10 "$prefix/bin/bhosts" "$host" 2>/dev/null \
    | awk -v h="$host" '$1 == h && $2 == "ok" { ok = 1 } END { exit !ok }'
}
if ! tb_await 60 host_ok; then
  tail -n 20 "$dir"/log/*.log* >&2 || true
  tb_die "host $host not ok in bhosts within 60 s"
fi
# mbatchd is started by sbatchd; it answered bhosts, so it is in the list.
grep -q ' mbatchd$' "$dir/run/pids" || lsf_pids >"$dir/run/pids"

{
  echo "LSF_ENVDIR=$etc"
  echo "LSF_BINDIR=$prefix/bin"
  echo "LSB_NTRIES=1"
} >"$dir/env"
{ echo "netns=$netns"; echo "prefix=$prefix"; echo "host=$host"; echo "cluster=$cluster"; } >"$dir/run/info"
end=$(date +%s%N)
tb_log "bring-up time: $(( (end - start) / 1000000 )) ms"
cat "$dir/env"
