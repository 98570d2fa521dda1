#!/bin/bash
# Issue 17 (benchmarks/README.md, "a thousand agents").
# usage: benchmarks/agents-idle.sh BUILD N_AGENTS [extra datc args]
# The master with N agents connected, each running one `sleep 600` (so
# none is released): its RSS once `datc status --json` lists them all,
# and the CPU its main thread spends over the next 20 s (heartbeats only).
B=$(realpath "$1"); K=$2; shift 2
D=$(mktemp -d ${TMPDIR:-/tmp}/datc-agents-XXXXXX)
yes 'sleep 600' | head -n $((K*8)) > $D/t.txt
export DATC_AGENT=$B/worker-agent/datc-agent
$B/master/datc run --dir $D/c --local-agents $K --local-slots $K "$@" $D/t.txt > $D/out 2> $D/err &
pid=$!
n=0; t0=$(date +%s)
while [ $(( $(date +%s) - t0 )) -lt 300 ]; do
  n=$($B/master/datc status --json $D/c 2>/dev/null | python3 -c 'import json,sys; print(len(json.load(sys.stdin).get("agents",[])))' 2>/dev/null)
  [ "${n:-0}" -ge $K ] && break
  sleep 1
done
sleep 2
rss=$(awk '/VmRSS/{print $2}' /proc/$pid/status)
c0=$(awk '{print $14+$15}' /proc/$pid/task/$pid/stat)
sleep 20
c1=$(awk '{print $14+$15}' /proc/$pid/task/$pid/stat)
echo "agents=$K connected=$n master_rss=${rss}KiB idle_main_cpu=$(( (c1-c0)*10 ))ms/20s load=$(cut -d' ' -f1 /proc/loadavg)"
kill -TERM $pid; wait $pid
rm -rf $D
