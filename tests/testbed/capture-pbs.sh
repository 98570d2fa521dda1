#!/usr/bin/env bash
# capture-pbs.sh [OUTDIR]: records what the real OpenPBS 23.06 of pbs-up.sh
# answers to the commands scheduler-pbs.c runs, one file per answer, in
# OUTDIR (default site-drivers/tests/data/pbs), each named live-*.txt (the
# other files there are transcribed from the documentation and kept).
# test-scheduler-pbs.c parses every file there and checks the "# expect:"
# line this script wrote from the situation it set up.
#
# The commands here must stay the ones the driver builds: qsub [-J 1-K]
# SCRIPT run in the workdir; qstat -x -f -F dsv IDS; qdel IDS; qselect -x
# -N NAME; qstat -Q -f QUEUE.  They run as root through pbs-up.sh's
# wrappers (the bed allows root jobs); the competitor's job is submitted as
# `competitor`.
#
# Takes about a minute (one job runs into a 3 s walltime, which the MoM
# enforces ~10 s late).  Needs root and install-pbs.sh's packages; brings
# its own cluster up and down.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
. "$here/batch-lib.sh"

out=$(realpath -m "${1:-$here/../../site-drivers/tests/data/pbs}")
work=/var/tmp/datc-capture-pbs
cleanup() { "$here/pbs-down.sh" "$work/tb" >/dev/null 2>&1 || true; }
trap cleanup EXIT
cleanup
rm -rf "$work"
mkdir -p "$work/w" "$out"
chmod 755 "$work" "$work/w"
rm -f "$out"/live-*.txt

eval "$("$here/pbs-up.sh" --ncpus 8 "$work/tb" | sed 's/^/export /')"
version=$(qstat --version | sed 's/^.* = //')
TB_SOURCE="OpenPBS $version (openpbs-cd7ab5edaf03.tar.gz, Debian 12), test bed tests/testbed/pbs-up.sh, recorded by tests/testbed/capture-pbs.sh"
W=$work/w
H=$PBS_SERVER
cd "$W"

# proxy NAME BODY [DIRECTIVE...]: a script shaped like the driver's, in W.
proxy() {
  local name=$1 body=$2
  shift 2
  {
    printf '#!/bin/sh\n#PBS -N %s\n#PBS -l select=1:ncpus=1\n' "$name"
    for d in "$@"; do printf '#PBS %s\n' "$d"; done
    printf '#PBS -j oe\n%s\n' "$body"
  } >"$W/$name.sh"
  chmod 755 "$W/$name.sh"
}
state_of() { qstat -x -f -F dsv "$1" 2>/dev/null | tr '|' '\n' | sed -n 's/^job_state=//p'; }
is_state() { [ "$(state_of "$1")" = "$2" ]; }
await_state() {
  tb_await "${3:-30}" is_state "$1" "$2" || tb_die "job $1 never became $2 (is $(state_of "$1"))"
}
as_competitor() {
  ip netns exec "$PBS_NETNS" runuser -u competitor -- env PBS_CONF_FILE="$PBS_CONF_FILE" \
    "$(sed -n 's/^prefix=//p' "$work/tb/run/info")/bin/$1" "${@:2}"
}

# ---- qsub, in the workdir ------------------------------------------------
proxy datc-cap-p1 'exit 0'
tb_record "$out/live-submit-first-id-is-zero.txt" "kind: submit" "expect: 0.$H" \
  "note: ids start at 0 and end in the short server name" -- qsub "$W/datc-cap-p1.sh"
proxy datc-cap-p2 'exit 3'
j2=$(qsub "$W/datc-cap-p2.sh")
proxy datc-cap-bad 'exit 0'
tb_record "$out/live-submit-invalid-option.txt" "kind: submit" "expect: error command" "message: invalid option" \
  -- qsub --bogus-option "$W/datc-cap-bad.sh"
tb_record "$out/live-submit-unknown-queue.txt" "kind: submit" "expect: error command" "message: Unknown queue" \
  -- qsub -q nosuch "$W/datc-cap-bad.sh"
tb_record "$out/live-submit-bad-walltime.txt" "kind: submit" "expect: error command" \
  "message: Illegal attribute or resource value" -- qsub -l walltime=bogus "$W/datc-cap-bad.sh"
await_state "0.$H" F
await_state "$j2" F
tb_record "$out/live-poll-finished-ok-and-exit-3.txt" "kind: poll" "ids: 0.$H $j2" "expect: finished failed" \
  -- qstat -x -f -F dsv "0.$H" "$j2"

# ---- a full node: the competitor holds all 8 ncpus ----------------------
proxy datc-cap-comp 'sleep 600'
jc=$(as_competitor qsub -l select=1:ncpus=8 -o /dev/null "$W/datc-cap-comp.sh")
await_state "$jc" R
proxy datc-cap-p5 'sleep 600'
j5=$(qsub "$W/datc-cap-p5.sh")
proxy datc-cap-p6 'sleep 600'
j6=$(qsub "$W/datc-cap-p6.sh")
proxy datc-cap-twin 'sleep 600'
jt1=$(qsub "$W/datc-cap-twin.sh")
jt2=$(qsub "$W/datc-cap-twin.sh")
proxy datc-cap-note 'sleep 600'
jn=$(qsub -v 'DATC_NOTE=a|b' "$W/datc-cap-note.sh")
await_state "$j6" Q
tb_record "$out/live-poll-pending-running-and-a-bar-in-a-value.txt" "kind: poll" "ids: $jc $j5 $jn" \
  "expect: running pending pending" "note: $jn has DATC_NOTE=a|b in its Variable_List" \
  -- qstat -x -f -F dsv "$jc" "$j5" "$jn"
tb_record "$out/live-cancel-pending.txt" "kind: cancel" "ids: $j6" "expect: ok" -- qdel "$j6"
await_state "$j6" F
tb_record "$out/live-poll-mixed.txt" "kind: poll" "ids: 0.$H $j2 $jc $j5 $j6 9999.$H" \
  "expect: finished failed running pending finished finished" \
  "note: $j6 was deleted while queued: state F without Exit_status; 9999 never existed" \
  -- qstat -x -f -F dsv "0.$H" "$j2" "$jc" "$j5" "$j6" "9999.$H"
tb_record "$out/live-poll-only-unknown-ids.txt" "kind: poll" "ids: 9998.$H 9999.$H" "expect: finished finished" \
  -- qstat -x -f -F dsv "9998.$H" "9999.$H"
tb_record "$out/live-lookup-found.txt" "kind: lookup" "name: datc-cap-p5" "expect: $j5" \
  -- qselect -x -N datc-cap-p5
tb_record "$out/live-lookup-finished.txt" "kind: lookup" "name: datc-cap-p1" "expect: 0.$H" \
  "note: -x: a finished job is found too (history on)" -- qselect -x -N datc-cap-p1
tb_record "$out/live-lookup-none.txt" "kind: lookup" "name: datc-cap-nobody" "expect: none" \
  -- qselect -x -N datc-cap-nobody
tb_record "$out/live-lookup-two-of-a-name.txt" "kind: lookup" "name: datc-cap-twin" "expect: error parse" \
  "message: several jobs" -- qselect -x -N datc-cap-twin
tb_record "$out/live-cancel-unknown.txt" "kind: cancel" "ids: 9999.$H" "expect: ok" -- qdel "9999.$H"
tb_record "$out/live-cancel-finished.txt" "kind: cancel" "ids: $j2" "expect: ok" -- qdel "$j2"
tb_record "$out/live-cancel-not-allowed.txt" "kind: cancel" "ids: $j5" "expect: error" \
  "message: Unauthorized Request" -- as_competitor qdel "$j5"
# Not with an unknown id among them: in one run that crashed pbs_server
# right after qdel answered (its log names a garbage job id).
tb_record "$out/live-cancel-several.txt" "kind: cancel" "ids: $j5 $jt1 $jt2 $jn" "expect: ok" \
  -- qdel "$j5" "$jt1" "$jt2" "$jn"

# ---- an array of 4 proxies, pending behind the competitor -----------------
proxy datc-cap-arr 'echo "element $PBS_ARRAY_INDEX"; sleep 600'
ja=$(( ${jn%%.*} + 1 ))
tb_record "$out/live-submit-array.txt" "kind: submit-array" \
  "expect: ${ja}[1].$H ${ja}[2].$H ${ja}[3].$H ${ja}[4].$H" -- qsub -J 1-4 "$W/datc-cap-arr.sh"
await_state "${ja}[].$H" Q
tb_record "$out/live-poll-array-pending.txt" "kind: poll" \
  "ids: ${ja}[1].$H ${ja}[2].$H ${ja}[3].$H ${ja}[4].$H ${ja}[9].$H $jc" \
  "expect: pending pending pending pending finished running" \
  "note: ${ja}[9] was never a subjob" \
  -- qstat -x -f -F dsv "${ja}[1].$H" "${ja}[2].$H" "${ja}[3].$H" "${ja}[4].$H" "${ja}[9].$H" "$jc"
tb_record "$out/live-lookup-array-found.txt" "kind: lookup-array" "name: datc-cap-arr" "expect: ${ja}[].$H" \
  -- qselect -x -N datc-cap-arr
tb_record "$out/live-lookup-array-none.txt" "kind: lookup-array" "name: datc-cap-nobody" "expect: none" \
  -- qselect -x -N datc-cap-nobody
tb_record "$out/live-cancel-array-subjobs.txt" "kind: cancel" "ids: ${ja}[3].$H ${ja}[4].$H" "expect: ok" \
  -- qdel "${ja}[3].$H" "${ja}[4].$H"
tb_record "$out/live-poll-array-after-cancel.txt" "kind: poll" \
  "ids: ${ja}[1].$H ${ja}[2].$H ${ja}[3].$H ${ja}[4].$H" "expect: pending pending finished finished" \
  -- qstat -x -f -F dsv "${ja}[1].$H" "${ja}[2].$H" "${ja}[3].$H" "${ja}[4].$H"
tb_record "$out/live-cancel-competitor.txt" "kind: cancel" "ids: $jc" "expect: ok" -- qdel "$jc"
await_state "$jc" F
await_state "${ja}[1].$H" R
await_state "${ja}[2].$H" R
tb_record "$out/live-poll-array-running.txt" "kind: poll" "ids: ${ja}[1].$H ${ja}[2].$H ${ja}[3].$H $jc" \
  "expect: running running finished finished" "note: $jc was deleted while running (271 = 256 + SIGTERM)" \
  -- qstat -x -f -F dsv "${ja}[1].$H" "${ja}[2].$H" "${ja}[3].$H" "$jc"
tb_record "$out/live-cancel-array-running.txt" "kind: cancel" "ids: ${ja}[1].$H ${ja}[2].$H" "expect: ok" \
  -- qdel "${ja}[1].$H" "${ja}[2].$H"
await_state "${ja}[1].$H" F
await_state "${ja}[].$H" F
tb_record "$out/live-poll-array-finished.txt" "kind: poll" "ids: ${ja}[1].$H ${ja}[2].$H ${ja}[3].$H ${ja}[4].$H" \
  "expect: finished finished finished finished" -- qstat -x -f -F dsv "${ja}[1].$H" "${ja}[2].$H" "${ja}[3].$H" "${ja}[4].$H"

# ---- the walltime: the MoM kills the job, Exit_status -29 ---------------
proxy datc-cap-limit 'while :; do sleep 1; done' '-l walltime=00:00:03'
jl=$(qsub "$W/datc-cap-limit.sh")
await_state "$jl" R
tb_record "$out/live-poll-running.txt" "kind: poll" "ids: $jl" "expect: running" -- qstat -x -f -F dsv "$jl"
await_state "$jl" F 60
tb_record "$out/live-poll-walltime.txt" "kind: poll" "ids: $jl" "expect: finished" \
  "note: killed at its walltime: Exit_status -29" -- qstat -x -f -F dsv "$jl"

# ---- job history off: a finished job is forgotten at once --------------------
qmgr -c "set server job_history_enable = False"
proxy datc-cap-nohist 'exit 0'
jh=$(qsub "$W/datc-cap-nohist.sh")
gone() { ! qstat "$jh" >/dev/null 2>&1; }
tb_await 30 gone || tb_die "job $jh still known"
tb_record "$out/live-poll-history-off.txt" "kind: poll" "ids: $jh" "expect: finished" \
  "note: job_history_enable = False (the default): -x names no job and exits 0" -- qstat -x -f -F dsv "$jh"
tb_record "$out/live-poll-history-off-and-unknown.txt" "kind: poll" "ids: $jh 9999.$H" "expect: finished finished" \
  "note: history off: the finished job's line on stderr, and the unknown one's exit status" \
  -- qstat -x -f -F dsv "$jh" "9999.$H"
tb_record "$out/live-lookup-history-off.txt" "kind: lookup" "name: datc-cap-nohist" "expect: none" \
  -- qselect -x -N datc-cap-nohist
qmgr -c "set server job_history_enable = True"

# ---- queues (the queue check of `datc sites check`) -----------------------
tb_record "$out/live-queue-exists.txt" "kind: queue" "queue: workq" "expect: exists" \
  "message: workq: queue_type = Execution, enabled = True, started = True" -- qstat -Q -f workq
tb_record "$out/live-queue-unknown.txt" "kind: queue" "queue: nosuch" "expect: missing" \
  "message: Unknown queue" -- qstat -Q -f nosuch

# ---- pbs_server down ------------------------------------------------------
home=$(sed -n 's/^home=//p' "$work/tb/run/info")
tb_stop "$(head -n 1 "$home/server_priv/server.lock")" pbs_server.bin 30
tb_record "$out/live-submit-server-down.txt" "kind: submit" "expect: error command" \
  "message: cannot connect to server" -- qsub "$W/datc-cap-bad.sh"
tb_record "$out/live-poll-server-down.txt" "kind: poll" "ids: 0.$H" "expect: error command" \
  "message: cannot connect to server" -- qstat -x -f -F dsv "0.$H"
tb_record "$out/live-cancel-server-down.txt" "kind: cancel" "ids: 0.$H" "expect: error" \
  "message: Couldn't connect to cluster" -- qdel "0.$H"
tb_record "$out/live-lookup-server-down.txt" "kind: lookup" "name: datc-cap-p5" "expect: error command" \
  "message: cannot connect to server" -- qselect -x -N datc-cap-p5
tb_record "$out/live-queue-server-down.txt" "kind: queue" "queue: workq" "expect: error command" \
  "message: cannot connect to server" -- qstat -Q -f workq

cd /
tb_log "recorded $(ls "$out"/live-*.txt | wc -l) answers in $out"
