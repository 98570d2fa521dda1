#!/usr/bin/env bash
# netns-down.sh: undoes netns-up.sh DIR.  Stops every process still inside
# the run's namespaces, by PID (sshd-down.sh first is tidier, this is the
# net), then deletes the namespaces by name; deleting the switch namespace
# takes the bridge and the veth pairs with it.
#
#   netns-down.sh DIR
#
# Idempotent: missing namespaces are skipped.  Never touches a namespace
# that is not named in DIR/netns.env.
set -euo pipefail

die() { echo "netns-down: $*" >&2; exit 1; }
dir=${1:-}
[[ $dir =~ ^/[A-Za-z0-9._/+-]+$ ]] || die "usage: netns-down.sh DIR"
[ -s "$dir/netns.env" ] || exit 0

suffix=$(sed -n 's/^NETNS_SUFFIX=//p' "$dir/netns.env")
[[ $suffix =~ ^[A-Za-z0-9]{1,16}$ ]] || die "bad NETNS_SUFFIX in $dir/netns.env"
sites=$(sed -n 's/^NETNS_SITES="\(.*\)"$/\1/p' "$dir/netns.env")
names=()
for s in $sites; do
  [[ $s =~ ^[A-Za-z0-9]{1,16}$ ]] || die "bad site name in $dir/netns.env: $s"
  names+=("tb-$s-$suffix")
done
names+=("tb-master-$suffix" "tb-switch-$suffix")

alive() {
  local stat
  { read -r stat <"/proc/$1/stat"; } 2>/dev/null || return 1
  stat=${stat##*) }
  [ "${stat%% *}" != Z ]
}

# Never this script or whoever ran it, should it have entered one.
protected=" $$ $PPID "

status=0
for ns in "${names[@]}"; do
  [ -e "/run/netns/$ns" ] || continue
  pids=()
  for p in $(ip netns pids "$ns" 2>/dev/null); do
    [[ $protected == *" $p "* ]] || pids+=("$p")
  done
  if [ ${#pids[@]} -gt 0 ]; then
    kill -TERM "${pids[@]}" 2>/dev/null || true
    deadline=$((SECONDS + 5))
    for p in "${pids[@]}"; do
      while alive "$p" && [ $SECONDS -lt $deadline ]; do sleep 0.02; done
      if alive "$p"; then kill -KILL "$p" 2>/dev/null || true; fi
    done
  fi
  ip netns delete "$ns" || status=1
done
[ $status -ne 0 ] || rm -f "$dir/netns.env"
exit $status
