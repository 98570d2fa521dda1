#!/usr/bin/env bash
# sge-up.sh: Son of Grid Engine 8.1.9 on this host, freshly initialised:
# sge_qmaster and one sge_execd, queue all.q with SLOTS slots (8 by
# default, on however few cores), parallel environment smp
# ($pe_slots), jobs from root allowed, scheduling every second.
#
#   sge-up.sh [--netns NAME] [--hosts FILE] [--hostname NAME]
#             [--submit-host NAME]... [--slots N] [--wait SECONDS] [DIR]
#
# Grid Engine has one cell per host (SGE_ROOT=/var/lib/gridengine, cell
# default, spool /var/spool/gridengine), so only one instance runs at a
# time.  DIR (default /var/lib/datc-testbed/sge) is that instance's own
# directory: config files written for qconf, `env` (the variables clients
# need; also printed on stdout) and run/ (pids).  The instance that owns the
# cell is named in /var/lib/datc-testbed/sge.owner; when another DIR owns it
# and is running, sge-up waits up to --wait seconds (default 0) for it to go
# down, then fails loudly.  On the same DIR it restarts from scratch: the
# spool is wiped and init_cluster run again, so job ids start at 1 and no
# job survives.
#
# Fixes from ../shared/TESTBED-NOTES.md section 2: host_aliases maps this
# host's name onto "localhost" (the first name of 127.0.0.1), this host is
# a submit and execution host in @allhosts, global min_uid/min_gid 0,
# schedule_interval 1 s with flush_submit/finish_sec 1, load_thresholds and
# job_load_adjustments NONE, daemons started under `env -i` (they hand
# their environment to every job).  The queue's notify time (between the
# -notify warning and the kill) is 5 s.
#
# Ports: 6444/6445 (/etc/services) when free in the namespace; otherwise
# two free ports, passed to the daemons and written to DIR/env as
# SGE_QMASTER_PORT and SGE_EXECD_PORT, which clients then need too.
# --netns NAME runs both daemons in /run/netns/NAME (nsenter); "vm"
# still resolves to 127.0.0.1, that namespace's own loopback.
# --hosts FILE and --hostname NAME run the daemons and this script's qconf
# in a mount and UTS namespace of their own (unshare), with FILE over
# /etc/hosts and NAME as the host name, so Grid Engine, which tells hosts
# apart by name, sees a cluster host distinct from the login node that
# submits across a network (cluster-up.sh); jobs inherit both.
# --submit-host NAME (repeatable) also makes NAME a submit host (FILE must
# resolve it).  Without these options nothing changes.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
. "$here/batch-lib.sh"

netns="" slots=8 wait_s=0 hosts="" hostname=""
submit_hosts=()
while [ $# -gt 0 ]; do
  case $1 in
    --netns) netns=$2; shift 2 ;;
    --slots) slots=$2; shift 2 ;;
    --wait) wait_s=$2; shift 2 ;;
    --hosts) hosts=$2; shift 2 ;;
    --hostname) hostname=$2; shift 2 ;;
    --submit-host) submit_hosts+=("$2"); shift 2 ;;
    -h|--help) sed -n '2,43p' "$0"; exit 0 ;;
    -*) tb_die "unknown option $1" ;;
    *) break ;;
  esac
done
dir=$(realpath -m "${1:-/var/lib/datc-testbed/sge}")
[ "$(id -u)" -eq 0 ] || tb_die "must run as root"
[ -x /usr/sbin/sge_qmaster ] || tb_die "Grid Engine is not installed: run tests/testbed/install-batch.sh"
[[ $slots =~ ^[1-9][0-9]*$ ]] || tb_die "--slots wants a positive number"
[[ $wait_s =~ ^[0-9]+$ ]] || tb_die "--wait wants seconds"
if [ -n "$hosts" ]; then
  [[ $hosts =~ ^/ ]] && [ -f "$hosts" ] && [ -r "$hosts" ] || tb_die "--hosts $hosts: not a readable file (absolute path)"
fi
for h in "$hostname" "${submit_hosts[@]}"; do
  [ -z "$h" ] || [[ $h =~ ^[a-z0-9][a-z0-9-]{0,62}$ ]] || tb_die "bad host name $h"
done
ns=$(tb_ns "$netns")
# What puts a command in that mount/UTS namespace (each step execs the
# next, so a daemon's PID is its own); empty without --hosts/--hostname.
wrap=()
if [ -n "$hosts" ] || [ -n "$hostname" ]; then
  wrap=(unshare --mount --uts --propagation private sh -c '
    if [ -n "$1" ]; then mount --bind "$1" /etc/hosts || exit 1; fi
    if [ -n "$2" ]; then echo "$2" >/proc/sys/kernel/hostname || exit 1; fi
    shift 2; exec "$@"' sh "$hosts" "$hostname")
fi

export SGE_ROOT=/var/lib/gridengine SGE_CELL=default
spool=/var/spool/gridengine
host=${hostname:-$(hostname)}
owner_file=/var/lib/datc-testbed/sge.owner
mkdir -p /var/lib/datc-testbed "$dir"
chmod 755 "$dir"

# Who owns the cell: only one sge-up at a time gets to look and claim.
exec 9>/var/lib/datc-testbed/sge.lock
flock 9
owner_running() {
  local owner
  owner=$(cat "$owner_file" 2>/dev/null) || return 1
  [ -n "$owner" ] && [ "$owner" != "$dir" ] || return 1
  tb_alive "$(cat "$spool/qmaster/qmaster.pid" 2>/dev/null || true)" \
    || tb_alive "$(cat "$owner/run/execd.pid" 2>/dev/null || true)"
}
if owner_running; then
  flock -u 9
  tb_await "$wait_s" eval '! owner_running' \
    || tb_die "Grid Engine is running for $(cat "$owner_file"): stop it with sge-down.sh $(cat "$owner_file")"
  flock 9
fi
# Whatever ran for this DIR (or for an owner that is gone) goes first.
previous=$(cat "$owner_file" 2>/dev/null || true)
[ -z "$previous" ] || "$here/sge-down.sh" "$previous" >/dev/null
"$here/sge-down.sh" "$dir" >/dev/null
echo "$dir" >"$owner_file"

rm -rf "$dir/run" "$dir/conf"
mkdir -p "$dir/run" "$dir/conf"

# A new cluster: empty spool, init_cluster as the admin user.
rm -rf "${spool:?}/spooldb" "${spool:?}/qmaster" "${spool:?}/execd"
install -d -o sgeadmin -g sgeadmin "$spool/spooldb" "$spool/qmaster" "$spool/execd"
runuser -u sgeadmin -- /usr/share/gridengine/scripts/init_cluster \
  "$SGE_ROOT" "$SGE_CELL" "$spool/spooldb" sgeadmin >"$dir/run/init_cluster.log" 2>&1 \
  || { cat "$dir/run/init_cluster.log" >&2; tb_die "init_cluster failed"; }
echo "$host localhost" >"$SGE_ROOT/$SGE_CELL/common/host_aliases"
echo "$host" >"$SGE_ROOT/$SGE_CELL/common/act_qmaster"

qport=6444 eport=6445
if ! tb_port_free "$ns" $qport || ! tb_port_free "$ns" $eport; then
  qport=$(tb_free_port "$ns") || tb_die "no free port for sge_qmaster"
  eport=$(tb_free_port "$ns" "$qport") || tb_die "no free port for sge_execd"
fi
client_env=(SGE_ROOT="$SGE_ROOT" SGE_CELL="$SGE_CELL")
[ "$qport" = 6444 ] || client_env+=(SGE_QMASTER_PORT="$qport" SGE_EXECD_PORT="$eport")
printf '%s\n' "${client_env[@]}" >"$dir/env"
{ echo "netns=$netns"; echo "qmaster_port=$qport"; echo "execd_port=$eport"; } >"$dir/run/info"

# sge_execd writes its pid file as sgeadmin: where the notes put it.
install -d -o sgeadmin -g sgeadmin /run/gridengine
rm -f /run/gridengine/execd.pid
daemon_env=(env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin "${client_env[@]}"
            SGE_EXECD_PIDFILE=/run/gridengine/execd.pid)
in_ns() { $ns "${wrap[@]}" env "${client_env[@]}" "$@"; }

# shellcheck disable=SC2086
$ns "${wrap[@]}" "${daemon_env[@]}" /usr/sbin/sge_qmaster || tb_die "sge_qmaster did not start"
tb_await 30 test -s "$spool/qmaster/qmaster.pid" || tb_die "sge_qmaster wrote no pid file"
cp "$spool/qmaster/qmaster.pid" "$dir/run/qmaster.pid"
tb_await 30 in_ns qconf -sh >/dev/null 2>&1 \
  || { tail -n 20 "$spool/qmaster/messages" >&2 || true; tb_die "sge_qmaster does not answer"; }

conf() { cat >"$dir/conf/$1"; }
qconf_q() { in_ns qconf "$@" >>"$dir/run/qconf.log" 2>&1 || { cat "$dir/run/qconf.log" >&2; tb_die "qconf $* failed"; }; }

in_ns qconf -sconf global | sed -e 's/^\(min_uid\|min_gid\) .*/\1 0/' >"$dir/conf/global"
qconf_q -Mconf "$dir/conf/global"
in_ns qconf -ssconf | sed -e 's/^schedule_interval .*/schedule_interval 0:0:1/' \
  -e 's/^flush_submit_sec .*/flush_submit_sec 1/' -e 's/^flush_finish_sec .*/flush_finish_sec 1/' \
  -e 's/^job_load_adjustments .*/job_load_adjustments NONE/' \
  -e 's/^load_adjustment_decay_time .*/load_adjustment_decay_time 0:0:0/' >"$dir/conf/sched"
qconf_q -Msconf "$dir/conf/sched"
qconf_q -as "$host"
for h in "${submit_hosts[@]}"; do qconf_q -as "$h"; done
conf exechost <<CONF
hostname              $host
load_scaling          NONE
complex_values        NONE
user_lists            NONE
xuser_lists           NONE
projects              NONE
xprojects             NONE
usage_scaling         NONE
report_variables      NONE
CONF
qconf_q -Ae "$dir/conf/exechost"
conf allhosts <<CONF
group_name @allhosts
hostlist $host
CONF
qconf_q -Ahgrp "$dir/conf/allhosts"
conf smp <<'CONF'
pe_name            smp
slots              999
user_lists         NONE
xuser_lists        NONE
start_proc_args    NONE
stop_proc_args     NONE
allocation_rule    $pe_slots
control_slaves     FALSE
job_is_first_task  TRUE
urgency_slots      min
accounting_summary FALSE
qsort_args         NONE
CONF
qconf_q -Ap "$dir/conf/smp"
conf all.q <<CONF
qname                 all.q
hostlist              @allhosts
seq_no                0
load_thresholds       NONE
suspend_thresholds    NONE
nsuspend              1
suspend_interval      00:05:00
priority              0
min_cpu_interval      00:05:00
processors            UNDEFINED
qtype                 BATCH INTERACTIVE
ckpt_list             NONE
pe_list               smp
rerun                 FALSE
slots                 $slots
tmpdir                /tmp
shell                 /bin/sh
prolog                NONE
epilog                NONE
shell_start_mode      posix_compliant
starter_method        NONE
suspend_method        NONE
resume_method         NONE
terminate_method      NONE
notify                00:00:05
owner_list            NONE
user_lists            NONE
xuser_lists           NONE
subordinate_list      NONE
complex_values        NONE
projects              NONE
xprojects             NONE
calendar              NONE
initial_state         default
s_rt                  INFINITY
h_rt                  INFINITY
s_cpu                 INFINITY
h_cpu                 INFINITY
s_fsize               INFINITY
h_fsize               INFINITY
s_data                INFINITY
h_data                INFINITY
s_stack               INFINITY
h_stack               INFINITY
s_core                INFINITY
h_core                INFINITY
s_rss                 INFINITY
h_rss                 INFINITY
s_vmem                INFINITY
h_vmem                INFINITY
CONF
qconf_q -Aq "$dir/conf/all.q"

# shellcheck disable=SC2086
$ns "${wrap[@]}" "${daemon_env[@]}" /usr/sbin/sge_execd || tb_die "sge_execd did not start"
tb_await 30 test -s /run/gridengine/execd.pid || tb_die "sge_execd wrote no pid file"
cp /run/gridengine/execd.pid "$dir/run/execd.pid"

# Up means: the queue instance on this host is known and has no state
# flags (u = unknown, a = alarm, d = disabled, E = error...).
queue_ready() {
  local line
  line=$(in_ns qstat -f -q "all.q@$host" 2>/dev/null | grep "^all.q@") || return 1
  [ "$(echo "$line" | awk '{print NF}')" -eq 5 ]
}
if ! tb_await 30 queue_ready; then
  in_ns qstat -f >&2 || true
  tail -n 20 "$spool/execd/$host/messages" >&2 || true
  tb_die "queue all.q@$host did not become ready within 30 s"
fi
printf '%s\n' "${client_env[@]}"
