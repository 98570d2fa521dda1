#!/usr/bin/env bash
# pbs-up.sh: a private single-host OpenPBS 23.06 cluster (pbs_comm,
# pbs_server with its PostgreSQL, pbs_sched, pbs_mom) with a fresh PBS_HOME
# every time, so job ids start at 0 and no job survives a previous run.
#
#   pbs-up.sh [--netns NAME --addr ADDR] [--ncpus N] [DIR]
#
# DIR (default /var/lib/datc-testbed/pbs) holds pbs.conf, bin/ (the client
# wrappers, below), run/info, logs/ (PBS's logs, copied there by
# pbs-down.sh) and `env`, whose lines are also printed on stdout:
#   PBS_CONF_FILE=DIR/pbs.conf
#   PBS_NETNS=NS            the namespace every daemon and command runs in
#   PBS_SERVER=HOST         the server's (this host's short) name
#   PATH=DIR/bin:...        the wrappers first (the caller's PATH after)
# Running it again on the same DIR stops the running instance first
# (pbs-down.sh) and starts a fresh one.  Prints the build time (when
# pbs-build.sh had to build) and the bring-up time on stderr.
#
# Why a network namespace: PBS ignores every address in 127.0.0.0/8 ("Could
# not find any usable IP address for host", ../shared/TESTBED-NOTES.md
# section 5), and here the host name resolves only to 127.x.  So PBS runs in
# a namespace where the host name means ADDR: by default its own
# (tb-pbs-SUFFIX, a veth pair inside it holds 10.201.0.1, nothing is added
# to the root namespace), or NAME/ADDR from netns-up.sh.  The name is mapped
# in /etc/netns/NS/hosts, which `ip netns exec` binds over /etc/hosts in a
# mount namespace of its own; every daemon and command runs under
# `ip netns exec NS` for that (not nsenter, which keeps the root's hosts).
# The client wrappers DIR/bin/{qsub,qstat,qdel,qselect,qmgr,...} do it and
# set PBS_CONF_FILE: they need root, as `ip netns exec` does.
#
# The server is set up as a centre's would be for datc: job history on
# (job_history_enable, else a finished job is "Unknown Job Id" at once),
# root may submit (acl_roots, for the driver tests that run as root), and a
# 1 s scheduler_iteration.  The data service gets a free port, so its
# socket in /var/run/postgresql does not collide with another instance.
#
# PBS_HOME (spools, logs, the database) cannot be in DIR when DIR is under
# /tmp: the daemons refuse every path below a world-writable directory
# ("Security violation ... resolves to /tmp").  It is
# /var/lib/datc-testbed/pbs-home/HASH (HASH from DIR's path), wiped here
# and by pbs-down.sh, and HASH.tmp (PBS_TMPDIR: jobs' TMPDIR) beside it.
#
# Outside DIR: PBS_HOME, /etc/netns/NS/hosts (removed by pbs-down.sh), the namespace
# tb-pbs-SUFFIX when none is given (deleted by pbs-down.sh), and the build
# cache (pbs-build.sh).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
. "$here/batch-lib.sh"

netns="" addr="" ncpus=8
while [ $# -gt 0 ]; do
  case $1 in
    --netns) netns=$2; shift 2 ;;
    --addr) addr=$2; shift 2 ;;
    --ncpus) ncpus=$2; shift 2 ;;
    -h|--help) sed -n '2,40p' "$0"; exit 0 ;;
    -*) tb_die "unknown option $1" ;;
    *) break ;;
  esac
done
dir=$(realpath -m "${1:-/var/lib/datc-testbed/pbs}")
[ "$(id -u)" -eq 0 ] || tb_die "must run as root (daemons, ip netns exec)"
[ -n "$netns" ] || [ -z "$addr" ] || tb_die "--addr needs --netns"
[ -z "$netns" ] || [ -n "$addr" ] || tb_die "--netns needs --addr (the namespace's address)"
[[ $ncpus =~ ^[1-9][0-9]*$ ]] || tb_die "--ncpus wants a positive number"
[[ $dir =~ ^/[A-Za-z0-9._/+-]+$ ]] || tb_die "DIR must be an absolute path of [A-Za-z0-9._/+-]: $dir"

build_start=$(date +%s%N)
exec_line=$("$here/pbs-build.sh" | grep '^PBS_EXEC=') || tb_die "no OpenPBS build (see above)"
prefix=${exec_line#PBS_EXEC=}
build_ms=$(( ($(date +%s%N) - build_start) / 1000000 ))
start=$(date +%s%N)

if [ -e "$dir/run" ]; then
  "$here/pbs-down.sh" "$dir" >/dev/null
fi
mkdir -p "$dir"
chmod 755 "$dir"
rm -rf "$dir/bin" "$dir/run" "$dir/logs" "$dir/pbs.conf" "$dir/env"
mkdir -p "$dir/run" "$dir/bin"
mkdir -p /var/lib/datc-testbed/pbs-home
chmod 755 /var/lib/datc-testbed /var/lib/datc-testbed/pbs-home
home=/var/lib/datc-testbed/pbs-home/$(printf %s "$dir" | sha256sum | cut -c1-12)
# Jobs' TMPDIR (pbs.JOBID): beside PBS_HOME, not in /var/tmp, where a job
# killed by pbs-down.sh leaves it and the next bed's job of the same id
# (ids restart at 0) is held "due to possible security breach".
tmp="$home.tmp"
rm -rf "$home" "$tmp"
mkdir -m 1777 "$tmp"
echo "home=$home" >"$dir/run/info"
host=$(hostname -s)

own_ns=0
if [ -z "$netns" ]; then
  netns="tb-pbs-$(od -An -N4 -tx4 /dev/urandom | tr -d ' ')"
  addr=10.201.0.1
  own_ns=1
  ip netns add "$netns"
  echo "own_netns=$netns" >>"$dir/run/info"
  ip -n "$netns" link set lo up
  # Both ends inside: an address PBS accepts, no link in the root namespace.
  ip -n "$netns" link add pbs0 type veth peer name pbs1
  ip -n "$netns" addr add "$addr/24" dev pbs0
  ip -n "$netns" link set pbs0 up
  ip -n "$netns" link set pbs1 up
fi
[ -e "/run/netns/$netns" ] || tb_die "no network namespace /run/netns/$netns"
echo "netns=$netns" >>"$dir/run/info"
mkdir -p "/etc/netns/$netns"
{
  echo "127.0.0.1 localhost"
  echo "$addr $host"
} >"/etc/netns/$netns/hosts"
echo "hosts=/etc/netns/$netns/hosts" >>"$dir/run/info"

ns() { ip netns exec "$netns" env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin \
         PBS_CONF_FILE="$dir/pbs.conf" "$@"; }

ds_port=$(tb_free_port "ip netns exec $netns" 15001 15002 15003 15004 15007 17001) \
  || tb_die "no free port for the data service"
cat >"$dir/pbs.conf" <<CONF
PBS_EXEC=$prefix
PBS_HOME=$home
PBS_SERVER=$host
PBS_START_SERVER=1
PBS_START_SCHED=1
PBS_START_COMM=1
PBS_START_MOM=1
PBS_CORE_LIMIT=unlimited
PBS_SCP=/usr/bin/scp
PBS_DATA_SERVICE_PORT=$ds_port
PBS_TMPDIR=$tmp
CONF

for prog in qsub qstat qdel qselect qmgr pbsnodes qalter qhold qrls qsig qrun qterm tracejob; do
  cat >"$dir/bin/$prog" <<WRAP
#!/bin/sh
# Written by pbs-up.sh: $prog of the cluster in $dir.
PBS_CONF_FILE=$dir/pbs.conf exec ip netns exec $netns $prefix/bin/$prog "\$@"
WRAP
  chmod 755 "$dir/bin/$prog"
done

if ! ns "$prefix/libexec/pbs_init.d" start >"$dir/run/start.log" 2>&1; then
  cat "$dir/run/start.log" >&2
  tb_die "PBS did not start: see $dir/run/start.log and $home/*_logs"
fi
qmgr() { ns "$prefix/bin/qmgr" -c "$1"; }
server_up() { qmgr "list server" >/dev/null 2>&1; }
tb_await 60 server_up || tb_die "pbs_server does not answer: see $home/server_logs"
qmgr "set server job_history_enable = True"
qmgr "set server acl_roots = root"
qmgr "set server scheduler_iteration = 1"
# 23.x creates this host's node itself; ncpus as many as asked (on however
# few cores), like slurm-up.sh's CPUs.
qmgr "create node $host" >/dev/null 2>&1 || true
qmgr "set node $host resources_available.ncpus = $ncpus"
node_free() {
  ns "$prefix/bin/pbsnodes" "$host" 2>/dev/null | grep -q '^ *state = free$'
}
tb_await 60 node_free || tb_die "node $host did not become free within 60 s"

{
  echo "PBS_CONF_FILE=$dir/pbs.conf"
  echo "PBS_NETNS=$netns"
  echo "PBS_SERVER=$host"
  echo "PATH=$dir/bin:$PATH"
} >"$dir/env"
{ echo "addr=$addr"; echo "prefix=$prefix"; echo "ds_port=$ds_port"; echo "own=$own_ns"; } >>"$dir/run/info"
[ "$build_ms" -lt 2000 ] || tb_log "OpenPBS build took $((build_ms / 1000)) s"
tb_log "PBS up in $(( ($(date +%s%N) - start) / 1000000 )) ms"
cat "$dir/env"
