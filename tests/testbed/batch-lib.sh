# batch-lib.sh: what the test-bed scripts share (slurm-*.sh, sge-*.sh,
# capture-*.sh, install-*.sh, ...).  Sourced, never run.  Every wait here
# polls a condition against a deadline; every process is stopped by its PID, after checking that the PID still names
# the program we started (a recycled PID is left alone).

tb_die() { echo "$(basename "$0"): $*" >&2; exit 1; }
tb_log() { echo "$(basename "$0"): $*" >&2; }

# tb_alive PID: the process exists and is not a zombie (no init reaps here,
# so a dead daemon can linger as Z and still answer kill -0).
tb_alive() {
  local pid=$1 stat
  [ -n "$pid" ] && [ "$pid" -gt 1 ] 2>/dev/null || return 1
  stat=$(cat "/proc/$pid/stat" 2>/dev/null) || return 1
  stat=${stat##*) }
  case $stat in Z*|X*) return 1 ;; esac
  return 0
}

# tb_is PID PROGRAM: PID is alive and runs PROGRAM (basename of argv[0]
# or of the executable).
tb_is() {
  local pid=$1 prog=$2 exe arg0
  tb_alive "$pid" || return 1
  exe=$(readlink "/proc/$pid/exe" 2>/dev/null) || exe=""
  arg0=$(tr '\0' '\n' <"/proc/$pid/cmdline" 2>/dev/null | head -n 1) || arg0=""
  case "$(basename -- "${exe% (deleted)}")" in "$prog"|"$prog-wlm") return 0 ;; esac
  case "$(basename -- "$arg0")" in "$prog"|"$prog-wlm") return 0 ;; esac
  return 1
}

# tb_await SECONDS COMMAND...: runs COMMAND until it succeeds; fails after
# SECONDS.
tb_await() {
  local secs=$1 end
  shift
  end=$(( $(date +%s%N) / 1000000 + secs * 1000 ))
  until "$@"; do
    [ $(( $(date +%s%N) / 1000000 )) -lt "$end" ] || return 1
    sleep 0.05
  done
}

tb_gone() { ! tb_alive "$1"; }

# tb_stop PID PROGRAM SECONDS: TERM, await its end by PID, KILL at the
# deadline.  Nothing happens when PID is not PROGRAM any more.
tb_stop() {
  local pid=$1 prog=$2 secs=$3
  tb_is "$pid" "$prog" || return 0
  kill -TERM "$pid" 2>/dev/null || return 0
  if ! tb_await "$secs" tb_gone "$pid"; then
    tb_log "$prog ($pid) still there after ${secs}s: SIGKILL"
    kill -KILL "$pid" 2>/dev/null || true
    tb_await 5 tb_gone "$pid" || tb_log "$prog ($pid) survived SIGKILL"
  fi
}

# tb_descendants PID: every live descendant of PID, children first.
tb_descendants() {
  local root=$1 p ppid stat
  for p in /proc/[0-9]*; do
    p=${p#/proc/}
    stat=$(cat "/proc/$p/stat" 2>/dev/null) || continue
    stat=${stat##*) }
    ppid=$(echo "$stat" | cut -d' ' -f2)
    if [ "$ppid" = "$root" ]; then
      tb_descendants "$p"
      echo "$p"
    fi
  done
}

# tb_ns NETNS: the command prefix that runs something in that network
# namespace (nsenter, not `ip netns exec`, which remounts /sys and hides
# the cgroup tree), or nothing for the root namespace.
tb_ns() {
  if [ -n "$1" ]; then
    [ -e "/run/netns/$1" ] || tb_die "no network namespace /run/netns/$1"
    echo "nsenter --net=/run/netns/$1"
  fi
}

# tb_port_free NS_PREFIX PORT: nothing in that namespace uses PORT over TCP.
tb_port_free() {
  local prefix=$1 port=$2
  ! $prefix ss -Htan 2>/dev/null | awk '{print $4}' | grep -q ":$port\$"
}

# tb_free_port NS_PREFIX [AVOID...]: a TCP port nobody uses there, picked at
# random in 20000-59999 so two test beds started at once rarely try the
# same one.
tb_free_port() {
  local prefix=$1 port tries=0
  shift
  while [ $tries -lt 200 ]; do
    port=$(( 20000 + (RANDOM * 32768 + RANDOM) % 40000 ))
    tries=$((tries + 1))
    case " $* " in *" $port "*) continue ;; esac
    tb_port_free "$prefix" "$port" && { echo "$port"; return 0; }
  done
  return 1
}

# ---- recording answers (capture-*.sh) ----------------------------------
#
# tb_quote ARG...: the arguments as one shell-quoted line, quotes only
# where needed.
tb_quote() {
  local a s="" q="'"
  for a in "$@"; do
    if [[ $a =~ ^[A-Za-z0-9_./=:,+@%-]+$ ]]; then s+="$a "; else s+="'${a//$q/$q\\$q$q}' "; fi
  done
  echo "${s% }"
}

# tb_record FILE 'KEY: VALUE'... -- COMMAND...: runs COMMAND and writes
# FILE in the format site-drivers/tests/recorded.h reads: header lines
# "# source:" ($TB_SOURCE), "# command:", "# exit:", then the given ones
# (kind, ids, name, expect, message), then "--- stdout", the bytes, "---
# stderr", the bytes.  A section that did not end in a newline gets one,
# and a "# no-final-newline:" line says which.
tb_record() {
  local file=$1 out err st nofinal=""
  shift
  local headers=()
  while [ "$1" != "--" ]; do headers+=("$1"); shift; done
  shift
  out=$(mktemp) err=$(mktemp)
  set +e
  "$@" >"$out" 2>"$err"
  st=$?
  set -e
  [ ! -s "$out" ] || [ -z "$(tail -c1 "$out")" ] || nofinal="stdout"
  [ ! -s "$err" ] || [ -z "$(tail -c1 "$err")" ] || nofinal="${nofinal:+$nofinal }stderr"
  {
    echo "# source: $TB_SOURCE"
    echo "# command: $(tb_quote "$@")"
    echo "# exit: $st"
    [ ${#headers[@]} -eq 0 ] || printf '# %s\n' "${headers[@]}"
    [ -z "$nofinal" ] || echo "# no-final-newline: $nofinal"
    echo "--- stdout"
    cat "$out"
    [ ! -s "$out" ] || [ -z "$(tail -c1 "$out")" ] || echo
    echo "--- stderr"
    cat "$err"
    [ ! -s "$err" ] || [ -z "$(tail -c1 "$err")" ] || echo
  } >"$file"
  rm -f "$out" "$err"
  tb_log "recorded $(basename "$file") (exit $st)"
}

# tb_apt_missing PKG...: prints, one a line, those not installed.
tb_apt_missing() {
  local p
  for p in "$@"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || echo "$p"
  done
}

# tb_apt_install PKG...: installs them from Debian, never starting a daemon
# (a policy-rc.d that says "no" is put in place first when the image has
# none), waiting up to 600 s for another apt or dpkg to let go of the lock.
tb_apt_install() {
  local sudo=""
  [ "$(id -u)" -eq 0 ] || sudo="sudo"
  [ "$#" -gt 0 ] || return 0
  if [ ! -e /usr/sbin/policy-rc.d ]; then
    printf '#!/bin/sh\nexit 101\n' | $sudo tee /usr/sbin/policy-rc.d >/dev/null
    $sudo chmod 755 /usr/sbin/policy-rc.d
  fi
  $sudo apt-get -o DPkg::Lock::Timeout=600 update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get -o DPkg::Lock::Timeout=600 install -y -qq \
    --no-install-recommends "$@" >/dev/null
}
