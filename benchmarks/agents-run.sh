#!/bin/bash
# Issue 17 (benchmarks/README.md, "a thousand agents"): one datc run of
# N null tasks on K local agents.
# usage: benchmarks/agents-run.sh BUILD N_TASKS N_AGENTS [extra datc args]
# The master's own CPU (its threads: main loop, ZeroMQ I/O, the local
# site's worker that starts the agents) and peak RSS, read from /proc
# while it runs (its agents are its children: time(1) would count them
# too); the steady rate from results.jsonl's growth between 10% and 90%.
B=$(realpath "$1"); N=$2; K=$3; shift 3
T=${TMPDIR:-/tmp}/datc-agents-tasks-$N.txt
[ -f $T ] || seq 1 $N | sed 's/.*/true/' > $T
D=$(mktemp -d ${TMPDIR:-/tmp}/datc-agents-XXXXXX)
export DATC_AGENT=$B/worker-agent/datc-agent
t0=$(date +%s.%N)
$B/master/datc run --dir $D/c --local-exec none --local-agents $K --local-slots $((K*64)) "$@" $T > $D/out 2> $D/err &
pid=$!
declare -A cpu
hwm=0
while kill -0 $pid 2>/dev/null; do
  for f in /proc/$pid/task/*/stat; do
    s=$(cat $f 2>/dev/null) || continue
    tid=${f#/proc/$pid/task/}; tid=${tid%/stat}
    comm=$(echo "$s" | sed 's/^[0-9]* (\(.*\)) .*/\1/' | tr ' ' _)
    cpu[$tid]="$comm $(echo "$s" | sed 's/^.*) //' | awk '{print $12+$13}')"
  done
  h=$(awk '/VmHWM/{print $2}' /proc/$pid/status 2>/dev/null); [ -n "$h" ] && hwm=$h
  echo "$(date +%s.%N) $(stat -c %s $D/c/results.jsonl 2>/dev/null || echo 0)" >> $D/sizes
  sleep 0.1
done
wait $pid; rc=$?
t1=$(date +%s.%N)
for t in "${!cpu[@]}"; do echo "${cpu[$t]}"; done > $D/cpu
python3 - $D $N $K $rc $t0 $t1 $hwm <<'PY'
import sys
d, n, k, rc, t0, t1, hwm = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4], float(sys.argv[5]), float(sys.argv[6]), int(sys.argv[7])
tck = 100.0
by = {}
for line in open(d + '/cpu'):
    comm, ticks = line.split()
    key = comm if comm in ('datc', 'ZMQbg/IO/0', 'site-local') else 'other'
    by[key] = by.get(key, 0) + int(ticks) / tck
total = sum(by.values())
s = [tuple(map(float, l.split())) for l in open(d + '/sizes')]
final = s[-1][1]
lo = [p for p in s if p[1] >= 0.1 * final]; hi = [p for p in s if p[1] >= 0.9 * final]
steady = 0.8 * n / (hi[0][0] - lo[0][0]) if lo and hi and hi[0][0] > lo[0][0] else float('nan')
print('N=%d agents=%d rc=%s wall=%.1fs steady=%.0f tasks/s master_cpu=%.2fs (main %.2f, zmq-io %.2f, site-local %.2f) main_cpu/task=%.2fus hwm=%dKiB load=%s' % (
    n, k, rc, t1 - t0, steady, total, by.get('datc', 0), by.get('ZMQbg/IO/0', 0), by.get('site-local', 0),
    by.get('datc', 0) / n * 1e6, hwm, open('/proc/loadavg').read().split()[0]))
PY
[ $rc = 0 ] || tail -5 $D/err
rm -rf $D
