#!/usr/bin/env bash
# sshd-up.sh: a private sshd for tests, on a port the kernel picks.
#
#   sshd-up.sh [--user USER] [--netns NAME --addr ADDR] [--hosts FILE]
#              [--hostname NAME] [--setenv K=V]... [DIR]
#
# DIR (default /var/lib/datc-testbed/sshd) holds everything: config, host
# key, client key, authorized_keys/USER, known_hosts, log, pid file and
# sshd.env, the file tests read (also printed on stdout).  ~/.ssh and
# /etc/ssh are never touched.  Without --netns the sshd listens on
# 127.0.0.1; with --netns it is started inside /run/netns/NAME (nsenter,
# not `ip netns exec`, which remounts /sys) and listens on ADDR there.
#
# Idempotent: if this DIR's sshd is already running, prints its sshd.env.
# Keys are kept across restarts, and a restart tries the previous port
# first, so a known_hosts entry stays valid through sshd-down + sshd-up.
# USER (default datc-tb) is created if missing and unlocked (usermod -p
# '*'): with UsePAM no, sshd refuses even key logins to a locked account.
# --setenv K=V (repeatable) puts K=V in every session's environment (sshd's
# SetEnv): a "login node" points its users at its own cluster this way
# (SLURM_CONF=..., SGE_QMASTER_PORT=...).
# --hosts FILE starts sshd in a private mount namespace (unshare --mount
# --propagation private) where FILE is bind-mounted over /etc/hosts, so its
# sessions resolve names the way `ip netns exec` would make them (PBS needs
# the host name to mean the namespace's address, not 127.x: pbs-up.sh's
# /etc/netns/NS/hosts).  Only the mount namespace differs: /sys stays, the
# recorded PID is still sshd's (each step execs the next), and sshd-down.sh
# stops it as any other.
# --hostname NAME starts sshd in a UTS namespace of its own (unshare --uts)
# named NAME: a login node whose host name differs from its cluster's
# (Grid Engine tells hosts apart by name; cluster-up.sh).
set -euo pipefail

die() { echo "sshd-up: $*" >&2; exit 1; }

user=datc-tb netns="" addr="" hosts="" hostname="" dir=""
setenv=()
while [ $# -gt 0 ]; do
  case "$1" in
    --user) user=${2:?}; shift 2 ;;
    --netns) netns=${2:?}; shift 2 ;;
    --addr) addr=${2:?}; shift 2 ;;
    --setenv) setenv+=("${2:?}"); shift 2 ;;
    --hosts) hosts=${2:?}; shift 2 ;;
    --hostname) hostname=${2:?}; shift 2 ;;
    -*) die "unknown option $1" ;;
    *) [ -z "$dir" ] || die "one DIR only"; dir=$1; shift ;;
  esac
done
dir=${dir:-/var/lib/datc-testbed/sshd}
# Paths go into sshd_config and sshd.env unquoted.
[[ $dir =~ ^/[A-Za-z0-9._/+-]+$ ]] || die "DIR must be an absolute path of [A-Za-z0-9._/+-]: $dir"
[[ $user =~ ^[a-z_][a-z0-9_-]{0,30}$ ]] || die "bad user name: $user"
# Values go into sshd_config unquoted: no spaces, quotes or shell specials.
for kv in "${setenv[@]}"; do
  [[ $kv =~ ^[A-Za-z_][A-Za-z0-9_]*=[A-Za-z0-9._/:,+@%-]*$ ]] || die "bad --setenv $kv (NAME=VALUE, plain characters)"
done
[ "$(id -u)" -eq 0 ] || die "must run as root (it starts sshd and may create $user)"
if [ -n "$hosts" ]; then
  [[ $hosts =~ ^/ ]] || die "--hosts wants an absolute path: $hosts"
  [ -f "$hosts" ] && [ -r "$hosts" ] || die "--hosts $hosts: not a readable file"
fi
[ -z "$hostname" ] || [[ $hostname =~ ^[a-z0-9][a-z0-9-]{0,62}$ ]] || die "bad --hostname $hostname"
if [ -n "$netns" ]; then
  [ -e "/run/netns/$netns" ] || die "no network namespace $netns"
  [[ $addr =~ ^[0-9.]+$ ]] || die "--netns needs --addr IPV4"
else
  [ -z "$addr" ] || [ "$addr" = 127.0.0.1 ] || die "--addr other than 127.0.0.1 needs --netns"
  addr=127.0.0.1
fi

# Runs a command in the sshd's network namespace.
in_ns() {
  if [ -n "$netns" ]; then nsenter --net="/run/netns/$netns" "$@"; else "$@"; fi
}

# Alive and not a zombie (PID 1 here reaps only now and then).
alive() {
  local stat
  { read -r stat <"/proc/$1/stat"; } 2>/dev/null || return 1
  stat=${stat##*) }
  [ "${stat%% *}" != Z ]
}

is_our_sshd() {
  alive "$1" && tr '\0' ' ' <"/proc/$1/cmdline" 2>/dev/null | grep -qF -- "-f $dir/sshd_config "
}

mkdir -p "$dir"
chmod 0755 "$dir" # the user's session must reach $dir/remote

if [ -s "$dir/sshd.pid" ] && is_our_sshd "$(cat "$dir/sshd.pid")" && [ -s "$dir/sshd.env" ]; then
  cat "$dir/sshd.env"
  exit 0
fi

# ---- the login user ---------------------------------------------------
# Under a lock: tests start sshds in parallel, and two useradds at once
# once left the user with one uid and its home owned by another (uid 999,
# the user 995: every workdir check on that home then refused it as
# another user's).  The home is given back to the user if it is not its.
home="/var/lib/datc-testbed/home/$user"
mkdir -p /var/lib/datc-testbed/home
{
  flock 9
  if ! getent passwd "$user" >/dev/null; then
    useradd --system --create-home --home-dir "$home" --shell /bin/sh "$user" \
      || die "cannot create user $user"
  fi
  uid=$(id -u "$user") gid=$(id -g "$user")
  if [ -d "$home" ] && [ "$(stat -c %u:%g "$home")" != "$uid:$gid" ]; then
    chown -R "$uid:$gid" "$home"
  fi
  case "$(getent shadow "$user" | cut -d: -f2)" in
    '!'*) usermod -p '*' "$user" ;;
  esac
} 9>/var/lib/datc-testbed/home/.lock

# ---- keys (kept across restarts) ----------------------------------------
[ -s "$dir/ssh_host_ed25519_key" ] \
  || ssh-keygen -q -t ed25519 -N '' -C datc-testbed-host -f "$dir/ssh_host_ed25519_key"
[ -s "$dir/client_ed25519" ] \
  || ssh-keygen -q -t ed25519 -N '' -C datc-testbed-client -f "$dir/client_ed25519"
mkdir -p "$dir/authorized_keys"
cp "$dir/client_ed25519.pub" "$dir/authorized_keys/$user"
chmod 0644 "$dir/authorized_keys/$user"
# A directory on the "site" that the login user owns, for files tests put.
mkdir -p "$dir/remote"
chown "$user:" "$dir/remote"
chmod 0700 "$dir/remote"
# The privilege-separation directory (tmpfs, normally made by systemd).
mkdir -p /run/sshd
chmod 0755 /run/sshd

# ---- start, on a port the kernel picks ---------------------------------
pick_port() {
  in_ns python3 -c 'import socket,sys
s = socket.socket(); s.bind((sys.argv[1], 0)); print(s.getsockname()[1])' "$addr"
}

listening() {
  [ -n "$(in_ns ss -Hltn "( sport = :$1 )" 2>/dev/null)" ]
}

write_config() {
  cat >"$dir/sshd_config" <<CONF
# Written by tests/testbed/sshd-up.sh; rewritten on every start.
Port $1
ListenAddress $addr
HostKey $dir/ssh_host_ed25519_key
PidFile none
AuthorizedKeysFile $dir/authorized_keys/%u
PubkeyAuthentication yes
PasswordAuthentication no
KbdInteractiveAuthentication no
PermitRootLogin prohibit-password
UsePAM no
# The testbed dir may sit under a world-writable /tmp.
StrictModes no
Subsystem sftp /usr/lib/openssh/sftp-server
LogLevel VERBOSE
CONF
  [ ${#setenv[@]} -eq 0 ] || echo "SetEnv ${setenv[*]}" >>"$dir/sshd_config"
}

previous_port=""
[ -s "$dir/sshd.env" ] && previous_port=$(sed -n 's/^SSHD_PORT=//p' "$dir/sshd.env")
started=""
for attempt in 1 2 3 4 5; do
  if [ "$attempt" -eq 1 ] && [ -n "$previous_port" ]; then port=$previous_port; else port=$(pick_port); fi
  write_config "$port"
  : >"$dir/sshd.log"
  cmd=(/usr/sbin/sshd -D -f "$dir/sshd_config" -E "$dir/sshd.log")
  # sh -c execs sshd once the bind is made, unshare and nsenter exec too:
  # $! stays sshd's PID.
  [ -z "$hostname" ] || cmd=(unshare --uts \
                             sh -c 'echo "$1" >/proc/sys/kernel/hostname 2>>"$2" && shift 2 && exec "$@"' \
                             sh "$hostname" "$dir/sshd.log" "${cmd[@]}")
  [ -z "$hosts" ] || cmd=(unshare --mount --propagation private \
                          sh -c 'mount --bind "$1" /etc/hosts 2>>"$2" && shift 2 && exec "$@"' \
                          sh "$hosts" "$dir/sshd.log" "${cmd[@]}")
  [ -z "$netns" ] || cmd=(nsenter --net="/run/netns/$netns" "${cmd[@]}")
  # setsid: no terminal signals; stdio closed so whoever ran this script
  # (a test through pipes) sees EOF when the script ends.
  setsid "${cmd[@]}" </dev/null >/dev/null 2>&1 &
  pid=$!
  deadline=$((SECONDS + 10))
  while alive "$pid" && ! listening "$port" && [ $SECONDS -lt $deadline ]; do
    sleep 0.02
  done
  if alive "$pid" && listening "$port"; then started=1; break; fi
  if alive "$pid"; then kill -KILL "$pid" 2>/dev/null || true; fi
  wait "$pid" 2>/dev/null || true
  # Taken between the pick and the bind: pick again.  Anything else is fatal.
  grep -q "Address already in use" "$dir/sshd.log" || break
done
[ -n "$started" ] || die "sshd did not start; $dir/sshd.log says: $(tail -n 5 "$dir/sshd.log" 2>/dev/null)"
echo "$pid" >"$dir/sshd.pid"

# ---- what the client needs ----------------------------------------------
# known_hosts names a non-22 port as [addr]:port.
echo "[$addr]:$port $(cut -d' ' -f1,2 "$dir/ssh_host_ed25519_key.pub")" >"$dir/known_hosts"
fingerprint=$(ssh-keygen -l -E sha256 -f "$dir/ssh_host_ed25519_key.pub" | cut -d' ' -f2)
cat >"$dir/sshd.env.tmp" <<ENV
SSHD_PID=$pid
SSHD_NETNS=$netns
SSHD_ADDR=$addr
SSHD_PORT=$port
SSHD_USER=$user
SSHD_HOST_KEY=$dir/ssh_host_ed25519_key.pub
SSHD_HOST_FINGERPRINT=$fingerprint
SSHD_KNOWN_HOSTS=$dir/known_hosts
SSHD_IDENTITY=$dir/client_ed25519
SSHD_REMOTE_DIR=$dir/remote
SSHD_LOG=$dir/sshd.log
SSHD_CONFIG=$dir/sshd_config
ENV
mv "$dir/sshd.env.tmp" "$dir/sshd.env"
cat "$dir/sshd.env"
