#!/bin/bash
# Issue 17 (benchmarks/README.md, "Replay"): a real resume after kill -9,
# as bench-scale's resume point does it, without bench-scale's agents.
# usage: benchmarks/replay-run.sh BUILD N_TASKS [extra datc args]
# One datc run of N null tasks (bench-scale's ~44-byte commands, --exec
# none, one local agent of 64 slots) killed with SIGKILL once its journal
# holds half of what a whole run writes (56 bytes per task), then the same
# command again, stopped with SIGTERM once it has replayed (its second
# campaign_started in trace.jsonl).  Prints the journal's records and the
# time from the second start to its campaign_started, with and without the
# task file's load (the first run's start to its campaign_started).
B=$(realpath "$1"); N=$2; shift 2
T=${TMPDIR:-/tmp}/datc-replay-tasks-$N.txt
[ -f $T ] || seq -f '%08g' 1 $N | sed 's|^|/usr/bin/printf %s\\n parameter-set-|' > $T
D=$(mktemp -d ${TMPDIR:-/tmp}/datc-replay-XXXXXX)
export DATC_AGENT=$B/worker-agent/datc-agent
run() {
  $B/master/datc run --dir $D/c --local-exec none --local-agents 1 --local-slots 64 "$@" $T \
    >> $D/out 2>> $D/err &
  pid=$!
}
# Seconds from $1 (epoch, fractional) to the Nth campaign_started.
started() {
  python3 -c 'import json,sys
t=[json.loads(l)["time"] for l in open(sys.argv[1]) if "\"campaign_started\"" in l]
print("%.3f" % (t[int(sys.argv[2])-1]/1e6 - float(sys.argv[3])) if len(t) >= int(sys.argv[2]) else "nan")' \
    $D/c/trace.jsonl $1 $2
}

t0=$(date +%s.%N)
run "$@"
half=$((N * 56 / 2))
while kill -0 $pid 2>/dev/null && [ $(stat -c %s $D/c/journal 2>/dev/null || echo 0) -lt $half ]; do
  sleep 0.05
done
# Its agent (a child, or a child's child) goes with it, by PID.
kids() { for c in $(pgrep -P $1); do echo $c; kids $c; done; }
agents=$(kids $pid)
kill -9 $pid $agents 2>/dev/null; wait $pid 2>/dev/null
load=$(started 1 $t0)
records=$(python3 -c 'import struct,sys
d=open(sys.argv[1],"rb").read(); p=8; n=0
while p+8<=len(d):
    l=struct.unpack_from("<I",d,p)[0]
    if l==0 or p+8+l>len(d): break
    p+=8+l; n+=1
print(n)' $D/c/journal)
bytes=$(stat -c %s $D/c/journal)

t1=$(date +%s.%N)
run "$@"
while kill -0 $pid 2>/dev/null && [ "$(grep -c '"campaign_started"' $D/c/trace.jsonl)" -lt 2 ]; do
  sleep 0.01
done
ready=$(started 2 $t1)
kill -TERM $pid; wait $pid
python3 -c 'import sys
n,b,ready,load=int(sys.argv[1]),int(sys.argv[2]),float(sys.argv[3]),float(sys.argv[4])
print("records=%d journal=%.1fMiB resumed_in=%.2fs %.0f records/s; task file load %.2fs: %.0f records/s without it; loadavg %s" % (
  n, b/1048576, ready, n/ready, load, n/(ready-load), open("/proc/loadavg").read().split()[0]))' \
  $records $bytes $ready $load
rm -rf $D
