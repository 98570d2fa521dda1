#!/usr/bin/env bash
# netns-up.sh: separate "hosts" on one machine: network namespaces joined by
# a bridge, addresses in 10.200.0.0/24 only.
#
#   netns-up.sh [--suffix S] DIR SITE...
#
# Creates tb-switch-S (holds bridge br0), tb-master-S (10.200.0.1) and one
# tb-SITE-S per SITE (10.200.0.11, .12, ... in the order given), each with
# lo up and an eth0 whose peer sits on the bridge.  The suffix S keeps
# parallel runs apart (namespaces, and so addresses, are private to a run);
# by default it is the one DIR already records, else a random one.
# Writes DIR/netns.env (also printed):
#   NETNS_SUFFIX, NETNS_SWITCH, NETNS_MASTER, NETNS_MASTER_ADDR,
#   NETNS_SITES="SITE ...", and per site NETNS_SITE_<SITE>, NETNS_ADDR_<SITE>.
#
# Nothing is added to the root namespace: no address, no route, no link.
# Never send traffic to 10.200.x from the root namespace (it would leave
# through the default gateway); enter a namespace first:
#   nsenter --net=/run/netns/tb-master-S COMMAND
# (not `ip netns exec`, which remounts /sys and hides /sys/fs/cgroup).
# Idempotent: what exists already is kept.  netns-down.sh DIR undoes it.
set -euo pipefail

die() { echo "netns-up: $*" >&2; exit 1; }

suffix="" dir="" sites=()
while [ $# -gt 0 ]; do
  case "$1" in
    --suffix) suffix=${2:?}; shift 2 ;;
    -*) die "unknown option $1" ;;
    *) if [ -z "$dir" ]; then dir=$1; else sites+=("$1"); fi; shift ;;
  esac
done
[ -n "$dir" ] || die "usage: netns-up.sh [--suffix S] DIR SITE..."
[[ $dir =~ ^/[A-Za-z0-9._/+-]+$ ]] || die "DIR must be an absolute path of [A-Za-z0-9._/+-]: $dir"
[ ${#sites[@]} -ge 1 ] && [ ${#sites[@]} -le 20 ] || die "give 1 to 20 site names"
[ "$(id -u)" -eq 0 ] || die "must run as root"
mkdir -p "$dir"
if [ -z "$suffix" ] && [ -s "$dir/netns.env" ]; then
  suffix=$(sed -n 's/^NETNS_SUFFIX=//p' "$dir/netns.env")
fi
[ -n "$suffix" ] || suffix=$(od -An -N4 -tx4 /dev/urandom | tr -d ' ')
[[ $suffix =~ ^[A-Za-z0-9]{1,16}$ ]] || die "bad suffix: $suffix"
declare -A seen=()
for s in "${sites[@]}"; do
  [[ $s =~ ^[A-Za-z0-9]{1,16}$ ]] || die "bad site name: $s"
  [[ $s != master && $s != switch ]] || die "site name $s is reserved"
  [ -z "${seen[$s]:-}" ] || die "site $s given twice"
  seen[$s]=1
done

switch=tb-switch-$suffix
master=tb-master-$suffix

add_ns() {
  [ -e "/run/netns/$1" ] || ip netns add "$1"
  ip -n "$1" link set lo up
}

# Namespace $1 gets eth0 with address $2, plugged into the bridge as $3.
plug() {
  local ns=$1 addr=$2 port=$3
  add_ns "$ns"
  if ! ip -n "$switch" link show "$port" >/dev/null 2>&1; then
    # Created inside the switch namespace, peer moved at once: no link
    # ever appears in the root namespace.
    ip -n "$switch" link add "$port" type veth peer name eth0 netns "$ns"
  fi
  ip -n "$switch" link set "$port" master br0 up
  ip -n "$ns" addr replace "$addr/24" dev eth0
  ip -n "$ns" link set eth0 up
}

add_ns "$switch"
ip -n "$switch" link show br0 >/dev/null 2>&1 || ip -n "$switch" link add br0 type bridge
ip -n "$switch" link set br0 up

plug "$master" 10.200.0.1 p1
{
  echo "NETNS_SUFFIX=$suffix"
  echo "NETNS_SWITCH=$switch"
  echo "NETNS_MASTER=$master"
  echo "NETNS_MASTER_ADDR=10.200.0.1"
  echo "NETNS_SITES=\"${sites[*]}\""
} >"$dir/netns.env.tmp"
i=0
for s in "${sites[@]}"; do
  addr=10.200.0.$((11 + i))
  plug "tb-$s-$suffix" "$addr" "p$((11 + i))"
  echo "NETNS_SITE_$s=tb-$s-$suffix" >>"$dir/netns.env.tmp"
  echo "NETNS_ADDR_$s=$addr" >>"$dir/netns.env.tmp"
  i=$((i + 1))
done
mv "$dir/netns.env.tmp" "$dir/netns.env"
cat "$dir/netns.env"
