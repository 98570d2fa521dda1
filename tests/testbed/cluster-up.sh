#!/usr/bin/env bash
# cluster-up.sh: a bed shaped like a real cluster, for relay mode: the
# workstation reaches only the login node's sshd, compute nodes reach only
# the login node.
#
#   cluster-up.sh [--suffix S] --scheduler slurm|sge DIR
#
#   tb-cm-S master   10.210.0.1 --link A-- 10.210.0.2 (a0)  tb-cl-S login
#   tb-cl-S login    10.211.0.1 (b0) --link B-- 10.211.0.2  tb-cc-S compute
#
# Two veth pairs, no bridge, no route beyond each link: the compute
# namespace has no route to 10.210.0.0/24, the master none to
# 10.211.0.0/24, and the login namespace does not forward
# (net.ipv4.ip_forward=0, checked).  In the login namespace an nftables
# table `datc_cluster` drops every new connection that comes in on link A
# except to the sshd's port (drop, not reject: a site's firewall is silent,
# so a blocked connect times out).
#
# The scheduler's daemons run in the compute namespace (a real cluster's
# slurmctld or qmaster sits inside the cluster network, which the login
# node reaches): Slurm through slurm-up.sh --netns tb-cc-S --addr
# 10.211.0.2 (DIR/slurm); Grid Engine through sge-up.sh --netns tb-cc-S
# with host name tb-cc-S and DIR/hosts-compute over /etc/hosts (DIR/sge;
# --wait 180 for the one cell: callers hold /tmp/datc-sge.lock).  The
# login sshd (sshd-up.sh, DIR/ssh) listens on 10.210.0.2 in tb-cl-S, in a
# UTS namespace named tb-cl-S with DIR/hosts-login over /etc/hosts, and
# gives its sessions the cluster's client environment (SLURM_CONF; SGE_ROOT,
# SGE_CELL, ports).  Grid Engine tells hosts apart by name: its clients on
# the login node resolve the qmaster's name tb-cc-S to 10.211.0.2, the
# qmaster resolves 10.211.0.1 to tb-cl-S, a submit host.
#
# Writes DIR/cluster.env (shell-sourceable, also printed): CLUSTER_SUFFIX,
# CLUSTER_SCHEDULER, CLUSTER_NS_MASTER, CLUSTER_MASTER_ADDR,
# CLUSTER_NS_LOGIN, CLUSTER_LOGIN_ADDR (link A: the sshd),
# CLUSTER_LOGIN_CLUSTER_ADDR (link B: where a relay listens),
# CLUSTER_LOGIN_HOSTNAME, CLUSTER_LINK_A (link A's interface in the login
# namespace), CLUSTER_NS_COMPUTE, CLUSTER_COMPUTE_ADDR,
# CLUSTER_COMPUTE_HOSTNAME (what jobs see), CLUSTER_HOSTS_LOGIN,
# CLUSTER_HOSTS_COMPUTE, CLUSTER_SSHD_DIR, CLUSTER_SSHD_ENV,
# CLUSTER_SCHEDULER_DIR, CLUSTER_ENV (the client environment, "K=V K=V").
#
# Idempotent: on a bed that runs, reprints DIR/cluster.env; a bed that is
# partly there is brought down (cluster-down.sh) and up again.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
. "$here/batch-lib.sh"

suffix="" scheduler="" dir=""
while [ $# -gt 0 ]; do
  case $1 in
    --suffix) suffix=${2:?}; shift 2 ;;
    --scheduler) scheduler=${2:?}; shift 2 ;;
    -h|--help) sed -n '2,45p' "$0"; exit 0 ;;
    -*) tb_die "unknown option $1" ;;
    *) [ -z "$dir" ] || tb_die "one DIR only"; dir=$1; shift ;;
  esac
done
usage="usage: cluster-up.sh [--suffix S] --scheduler slurm|sge DIR"
[ -n "$dir" ] || tb_die "$usage"
[[ $dir =~ ^/[A-Za-z0-9._/+-]+$ ]] || tb_die "DIR must be an absolute path of [A-Za-z0-9._/+-]: $dir"
case $scheduler in slurm|sge) ;; *) tb_die "--scheduler slurm or sge ($usage)" ;; esac
[ "$(id -u)" -eq 0 ] || tb_die "must run as root"
command -v nft >/dev/null || tb_die "nft is missing: run tests/testbed/install-sshd.sh"
mkdir -p "$dir"
chmod 0755 "$dir" # the login user reaches the sshd's files through it

# The suffix: given, else the one DIR records, else random.  Host names
# are made of it: lower-case letters and digits.
recorded=$(sed -n 's/^suffix=//p' "$dir/run/info" 2>/dev/null || true)
recorded_sched=$(sed -n 's/^scheduler=//p' "$dir/run/info" 2>/dev/null || true)
[ -n "$suffix" ] || suffix=$recorded
[ -n "$suffix" ] || suffix=$(od -An -N4 -tx4 /dev/urandom | tr -d ' ')
[[ $suffix =~ ^[a-z0-9]{1,12}$ ]] || tb_die "bad suffix $suffix (1-12 of a-z0-9)"

master=tb-cm-$suffix login=tb-cl-$suffix compute=tb-cc-$suffix
master_addr=10.210.0.1 login_addr=10.210.0.2
login_cluster_addr=10.211.0.1 compute_addr=10.211.0.2
in_ns() { local n=$1; shift; nsenter --net="/run/netns/$n" "$@"; }

# ---- already up? -------------------------------------------------------
running() {
  [ -s "$dir/cluster.env" ] && [ "$recorded" = "$suffix" ] && [ "$recorded_sched" = "$scheduler" ] || return 1
  local n
  for n in "$master" "$login" "$compute"; do [ -e "/run/netns/$n" ] || return 1; done
  tb_is "$(cat "$dir/ssh/sshd.pid" 2>/dev/null || true)" sshd || return 1
  if [ "$scheduler" = slurm ]; then
    tb_is "$(cat "$dir/slurm/run/slurmctld.pid" 2>/dev/null || true)" slurmctld
  else
    tb_is "$(cat "$dir/sge/run/qmaster.pid" 2>/dev/null || true)" sge_qmaster
  fi
}
if running; then
  cat "$dir/cluster.env"
  exit 0
fi
[ ! -e "$dir/run/info" ] || "$here/cluster-down.sh" "$dir" >/dev/null
mkdir -p "$dir/run"
# Recorded first, so cluster-down.sh finds whatever a failure leaves.
{ echo "suffix=$suffix"; echo "scheduler=$scheduler"; } >"$dir/run/info"
rm -f "$dir/cluster.env"
trap '[ $? -eq 0 ] || { tb_log "failed: bringing down what came up"; "$here/cluster-down.sh" "$dir" >&2 || true; }' EXIT

# ---- namespaces and links ----------------------------------------------
for n in "$master" "$login" "$compute"; do
  [ -e "/run/netns/$n" ] || ip netns add "$n"
  ip -n "$n" link set lo up
done
# Each pair is created inside the login namespace, its peer moved at
# once: nothing ever appears in the root namespace.
ip -n "$login" link add a0 type veth peer name eth0 netns "$master"
ip -n "$login" link add b0 type veth peer name eth0 netns "$compute"
ip -n "$master" addr add "$master_addr/24" dev eth0
ip -n "$login" addr add "$login_addr/24" dev a0
ip -n "$login" addr add "$login_cluster_addr/24" dev b0
ip -n "$compute" addr add "$compute_addr/24" dev eth0
for l in "$master:eth0" "$login:a0" "$login:b0" "$compute:eth0"; do
  ip -n "${l%%:*}" link set "${l#*:}" up
done
in_ns "$login" sysctl -qw net.ipv4.ip_forward=0
[ "$(in_ns "$login" cat /proc/sys/net/ipv4/ip_forward)" = 0 ] \
  || tb_die "$login still forwards (net.ipv4.ip_forward is not 0)"

# ---- names: what Grid Engine resolves on each side -----------------------
cat >"$dir/hosts-login" <<HOSTS
127.0.0.1 localhost
$login_cluster_addr $login
$compute_addr $compute
HOSTS
cat >"$dir/hosts-compute" <<HOSTS
127.0.0.1 localhost
$compute_addr $compute
$login_cluster_addr $login
HOSTS
chmod 0644 "$dir/hosts-login" "$dir/hosts-compute"

# ---- the scheduler, in the compute namespace ----------------------------
if [ "$scheduler" = slurm ]; then
  sched_dir=$dir/slurm
  "$here/slurm-up.sh" --netns "$compute" --addr "$compute_addr" --cluster "cl$suffix" \
    "$sched_dir" >/dev/null
  compute_hostname=$(hostname) # slurmd runs under this host's own name
else
  sched_dir=$dir/sge
  "$here/sge-up.sh" --netns "$compute" --hosts "$dir/hosts-compute" --hostname "$compute" \
    --submit-host "$login" --wait 180 "$sched_dir" >/dev/null
  compute_hostname=$compute
fi
client_env=()
while IFS= read -r kv; do
  [ -z "$kv" ] || client_env+=("$kv")
done <"$sched_dir/env"

# ---- the login node: sshd on link A, the cluster's client environment -----
setenv=()
for kv in "${client_env[@]}"; do setenv+=(--setenv "$kv"); done
"$here/sshd-up.sh" --netns "$login" --addr "$login_addr" --hosts "$dir/hosts-login" \
  --hostname "$login" "${setenv[@]}" "$dir/ssh" >/dev/null
sshd_port=$(sed -n 's/^SSHD_PORT=//p' "$dir/ssh/sshd.env")
[[ $sshd_port =~ ^[0-9]+$ ]] || tb_die "no SSHD_PORT in $dir/ssh/sshd.env"

# ---- the login node's firewall: from link A, only the sshd -----------------
# Rewritten whole (add, delete, define), so a second run cannot stack rules.
in_ns "$login" nft -f - <<NFT
table inet datc_cluster
delete table inet datc_cluster
table inet datc_cluster {
  chain input {
    type filter hook input priority filter; policy accept;
    iifname "a0" ct state established,related accept
    iifname "a0" tcp dport $sshd_port ct state new accept
    iifname "a0" drop
  }
}
NFT

cat >"$dir/cluster.env.tmp" <<ENV
CLUSTER_SUFFIX=$suffix
CLUSTER_SCHEDULER=$scheduler
CLUSTER_NS_MASTER=$master
CLUSTER_MASTER_ADDR=$master_addr
CLUSTER_NS_LOGIN=$login
CLUSTER_LOGIN_ADDR=$login_addr
CLUSTER_LOGIN_CLUSTER_ADDR=$login_cluster_addr
CLUSTER_LOGIN_HOSTNAME=$login
CLUSTER_LINK_A=a0
CLUSTER_NS_COMPUTE=$compute
CLUSTER_COMPUTE_ADDR=$compute_addr
CLUSTER_COMPUTE_HOSTNAME=$compute_hostname
CLUSTER_HOSTS_LOGIN=$dir/hosts-login
CLUSTER_HOSTS_COMPUTE=$dir/hosts-compute
CLUSTER_SSHD_DIR=$dir/ssh
CLUSTER_SSHD_ENV=$dir/ssh/sshd.env
CLUSTER_SCHEDULER_DIR=$sched_dir
CLUSTER_ENV="${client_env[*]}"
ENV
mv "$dir/cluster.env.tmp" "$dir/cluster.env"
cat "$dir/cluster.env"
