#!/usr/bin/env bash
# command-log.sh DIR PROG...: a command log on the scheduler's side.  For
# each PROG (sbatch, squeue, scancel, ...) writes DIR/bin/PROG, a wrapper
# that appends one line to DIR/commands.log and execs the real PROG (found
# on PATH now, outside DIR/bin).  Put DIR/bin first on the PATH of what
# should be watched (a master with the local transport): every scheduler
# command that reaches the cluster is then in the log, when it ran, whoever
# started it, independently of what the caller says it did.
#
# A line: TIME_US PROG ARG... (microseconds since the epoch, taken just
# before the exec; each argument shell-quoted with printf %q, so one line
# per command whatever the arguments hold).  Written with one append.
#
# Writes and prints DIR/command-log.env: COMMAND_LOG_BIN, COMMAND_LOG.
# Running it again rewrites the wrappers and keeps the log.
set -euo pipefail

[ $# -ge 2 ] || { echo "usage: command-log.sh DIR PROG..." >&2; exit 2; }
dir=$(realpath -m "$1")
shift
bin="$dir/bin"
log="$dir/commands.log"
mkdir -p "$bin"
touch "$log"

# The real programs, on a PATH without our own wrappers.
path_without=$(printf '%s' "$PATH" | tr ':' '\n' | grep -vxF "$bin" | paste -sd: -)
for prog in "$@"; do
  case "$prog" in
    */* | '') echo "command-log.sh: '$prog' is not a program name" >&2; exit 2 ;;
  esac
  real=$(PATH="$path_without" command -v "$prog" || true)
  if [ -z "$real" ] || [ "${real#/}" = "$real" ]; then
    echo "command-log.sh: $prog not found on PATH ($path_without)" >&2
    exit 1
  fi
  # EPOCHREALTIME (bash 5) needs no fork; its separator follows the
  # locale, so keep the digits only.
  cat >"$bin/$prog.tmp" <<EOF
#!/usr/bin/env bash
# Written by command-log.sh: log this call, then run the real $prog.
t=\${EPOCHREALTIME//[!0-9]/}
line=
[ \$# -eq 0 ] || line=\$(printf ' %q' "\$@")
printf '%s %s%s\n' "\$t" $(printf '%q' "$prog") "\$line" >>$(printf '%q' "$log")
exec $(printf '%q' "$real") "\$@"
EOF
  chmod 0755 "$bin/$prog.tmp"
  mv -f "$bin/$prog.tmp" "$bin/$prog"
done

cat >"$dir/command-log.env" <<EOF
COMMAND_LOG_BIN=$bin
COMMAND_LOG=$log
EOF
cat "$dir/command-log.env"
