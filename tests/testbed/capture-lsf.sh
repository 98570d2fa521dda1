#!/usr/bin/env bash
# capture-lsf.sh [OUTDIR]: records what the real volclava 2.2 of
# lsf-up.sh answers to the commands scheduler-lsf.c runs, one file per
# answer, in OUTDIR (default site-drivers/tests/data/lsf, where files
# named live-*.txt are this script's and are replaced; the others are
# transcribed from the documentation).  test-scheduler-lsf.c parses every
# file there and checks the "# expect:" line this script wrote from the
# situation it set up.
#
# The commands must stay the ones the driver builds (each run with
# LSB_NTRIES=1 exported): `cd W && bsub [args] < SCRIPT`; bjobs -a -l IDS;
# bkill IDS; bjobs -a -w -J NAME; bqueues -w Q; for arrays the same bsub
# with -J 'NAME[1-K]'.
#
# Takes about two minutes: one job runs into its one-minute run limit.
# Needs root and install-lsf.sh's packages; brings its own bed up (2 job
# slots) and down.  Jobs are submitted as root (the bed sets
# LSF_ROOT_REX=local), the competitor's as `competitor`.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
. "$here/batch-lib.sh"

out=$(realpath -m "${1:-$here/../../site-drivers/tests/data/lsf}")
work=/tmp/datc-capture-lsf
TB_SOURCE="volclava 2.2 (volclava-b361f5642a5c.tar.gz, LSF-compatible), test bed tests/testbed/lsf-up.sh, recorded by tests/testbed/capture-lsf.sh"

cleanup() { "$here/lsf-down.sh" "$work/tb" >/dev/null 2>&1 || true; }
trap cleanup EXIT
cleanup
rm -rf "$work"
mkdir -p "$work/w" "$out"
chmod 755 "$work"
chmod 777 "$work/w"
rm -f "$out"/live-*.txt

set -a
eval "$("$here/lsf-up.sh" --slots 2 "$work/tb")"
set +a
PATH="$LSF_BINDIR:$PATH"
W=$work/w

# proxy NAME BODY: a script shaped like the driver's, in W.
proxy() {
  printf '#!/bin/sh\n#BSUB -J %s\n#BSUB -n 1\n#BSUB -R "span[hosts=1]"\n#BSUB -o %s.%%J.log\n%s\n' \
    "$1" "$1" "$2" >"$W/$1.sh"
}
submit_sh='cd "$1" || exit 1; s=$2; shift 2; exec bsub "$@" <"$s"'
submit() { /bin/sh -c "$submit_sh" datc-lsf-submit "$W" "$@"; }
job_id() { sed -n 's/^Job <\([0-9]*\)> is submitted.*/\1/p'; }
state_of() { bjobs -a -w "$1" 2>/dev/null | awk 'NR == 2 { print $3 }'; }
is_state() { [ "$(state_of "$1")" = "$2" ]; }
await_state() {
  tb_await "${3:-30}" is_state "$1" "$2" || tb_die "job $1 never became $2 (is $(state_of "$1"))"
}

# ---- submit ----------------------------------------------------------------
proxy datc-cap-p1 'exit 0'
tb_record "$out/live-submit-ok.txt" "kind: submit" "expect: 1" \
  -- /bin/sh -c "$submit_sh" datc-lsf-submit "$W" "$W/datc-cap-p1.sh"
proxy datc-cap-p2 'sleep 2; exit 3'
j2=$(submit "$W/datc-cap-p2.sh" | job_id)
tb_record "$out/live-submit-bad-queue.txt" "kind: submit" "expect: error command" "message: nosuch" \
  -- /bin/sh -c "$submit_sh" datc-lsf-submit "$W" "$W/datc-cap-p1.sh" -q nosuch
# IBM LSF's advance warning before the run limit.  volclava's bsub has
# no -wa/-wt: it reads `-wa USR1` as `-w a`, a dependency on a job named
# "a".  With no other job of the user it refuses the job ("a: No matching
# job found"); with some, as here, it accepts it and the job pends for
# ever ("Job dependency condition not satisfied").
proxy datc-cap-warn $'#BSUB -W 2\n#BSUB -wa USR1\n#BSUB -wt 1\nexit 0'
jw=$(submit "$W/datc-cap-warn.sh" | job_id)
tb_await 10 test -n "$(bjobs -a -l "$jw" 2>/dev/null | grep 'Dependency Condition <a>')" \
  || tb_die "job $jw has no dependency condition a"
tb_record "$out/live-poll-warning-options-read-as-a-dependency.txt" "kind: poll" "ids: $jw" \
  "expect: pending" "note: '#BSUB -wa USR1' became 'Dependency Condition <a>': it never runs; the driver writes no -wa/-wt" \
  -- bjobs -a -l "$jw"
bkill "$jw" >/dev/null
await_state 1 DONE
await_state "$j2" RUN
tb_record "$out/live-poll-running.txt" "kind: poll" "ids: $j2" "expect: running" -- bjobs -a -l "$j2"
await_state "$j2" EXIT
tb_record "$out/live-poll-done-and-exit-code-3.txt" "kind: poll" "ids: 1 $j2" "expect: finished failed" \
  "note: exit 3 shows only in -l: 'Exited with exit code 3.'" -- bjobs -a -l 1 "$j2"

# ---- a full host: the competitor holds both slots ---------------------------
jc=$(runuser -u competitor -- env LSF_ENVDIR="$LSF_ENVDIR" LSB_NTRIES=1 "$LSF_BINDIR/bsub" \
  -n 2 -o /dev/null sleep 600 | job_id)
await_state "$jc" RUN
proxy datc-cap-p5 'sleep 600'
j5=$(submit "$W/datc-cap-p5.sh" | job_id)
proxy datc-cap-p6 'sleep 600'
j6=$(submit "$W/datc-cap-p6.sh" | job_id)
proxy datc-cap-twin 'sleep 600'
jt1=$(submit "$W/datc-cap-twin.sh" | job_id)
jt2=$(submit "$W/datc-cap-twin.sh" | job_id)
await_state "$j6" PEND
tb_record "$out/live-poll-pending.txt" "kind: poll" "ids: $j5 $jc" "expect: pending running" \
  -- bjobs -a -l "$j5" "$jc"
# Once mbatchd has tried it (MBD_SLEEP_TIME 1 s), its PENDING REASONS say why.
slot_limit() { bjobs -a -l "$1" 2>/dev/null | grep -q '^ Job slot limit reached: '; }
tb_await 30 slot_limit "$j5" || tb_die "job $j5 never said 'Job slot limit reached'"
tb_record "$out/live-poll-pending-slot-limit.txt" "kind: poll" "ids: $j5 $jc" \
  "expect: pending running" "reasons: Job slot limit reached | -" -- bjobs -a -l "$j5" "$jc"
tb_record "$out/live-cancel-pending.txt" "kind: cancel" "ids: $j6" "expect: ok" -- bkill "$j6"
await_state "$j6" EXIT
tb_record "$out/live-poll-killed-pending.txt" "kind: poll" "ids: $j6" "expect: finished" \
  "note: killed before it ran: 'Exited' with no code" -- bjobs -a -l "$j6"
tb_record "$out/live-poll-mixed.txt" "kind: poll" "ids: 1 $j2 $jc $j5 $j6 999" \
  "expect: finished failed running pending finished finished" \
  -- bjobs -a -l 1 "$j2" "$jc" "$j5" "$j6" 999
tb_record "$out/live-poll-only-unknown-ids.txt" "kind: poll" "ids: 998 999" "expect: finished finished" \
  -- bjobs -a -l 998 999
tb_record "$out/live-lookup-found.txt" "kind: lookup" "name: datc-cap-p5" "expect: $j5" \
  -- bjobs -a -w -J datc-cap-p5
tb_record "$out/live-lookup-none.txt" "kind: lookup" "name: datc-cap-nobody" "expect: none" \
  -- bjobs -a -w -J datc-cap-nobody
tb_record "$out/live-lookup-two-of-a-name.txt" "kind: lookup" "name: datc-cap-twin" "expect: error parse" \
  "message: several jobs" -- bjobs -a -w -J datc-cap-twin
tb_record "$out/live-cancel-finished-and-unknown.txt" "kind: cancel" "ids: 1 999" "expect: ok" -- bkill 1 999
tb_record "$out/live-cancel-not-allowed.txt" "kind: cancel" "ids: $j5" "expect: error" \
  -- runuser -u competitor -- env LSF_ENVDIR="$LSF_ENVDIR" LSB_NTRIES=1 "$LSF_BINDIR/bkill" "$j5"
tb_record "$out/live-cancel-several.txt" "kind: cancel" "ids: $j5 $jt1 $jt2 998" "expect: ok" \
  -- bkill "$j5" "$jt1" "$jt2" 998

# ---- an array of 3 proxies, pending behind the competitor -------------------
printf '#!/bin/sh\n#BSUB -J datc-cap-arr\n#BSUB -n 1\n#BSUB -R "span[hosts=1]"\n#BSUB -o datc-cap-arr.%%J_%%I.log\necho "element $LSB_JOBINDEX"; sleep 600\n' \
  >"$W/datc-cap-arr.sh"
ja=$((jt2 + 1))
tb_record "$out/live-submit-array.txt" "kind: submit-array" "expect: ${ja}[1] ${ja}[2] ${ja}[3]" \
  -- /bin/sh -c "$submit_sh" datc-lsf-submit "$W" "$W/datc-cap-arr.sh" -J 'datc-cap-arr[1-3]'
await_state "${ja}[3]" PEND
tb_record "$out/live-poll-array-pending.txt" "kind: poll" "ids: ${ja}[1] ${ja}[2] ${ja}[3] ${ja}[9] $jc" \
  "expect: pending pending pending finished running" \
  -- bjobs -a -l "${ja}[1]" "${ja}[2]" "${ja}[3]" "${ja}[9]" "$jc"
tb_record "$out/live-lookup-array-found.txt" "kind: lookup-array" "name: datc-cap-arr" "expect: $ja" \
  -- bjobs -a -w -J datc-cap-arr
tb_record "$out/live-cancel-array-element.txt" "kind: cancel" "ids: ${ja}[3] ${ja}[9]" "expect: ok" \
  -- bkill "${ja}[3]" "${ja}[9]"
tb_record "$out/live-cancel-competitor.txt" "kind: cancel" "ids: $jc" "expect: ok" -- bkill "$jc"
await_state "${ja}[1]" RUN
await_state "${ja}[2]" RUN
tb_record "$out/live-poll-array-running.txt" "kind: poll" "ids: ${ja}[1] ${ja}[2] ${ja}[3]" \
  "expect: running running finished" -- bjobs -a -l "${ja}[1]" "${ja}[2]" "${ja}[3]"
tb_record "$out/live-cancel-array-running.txt" "kind: cancel" "ids: ${ja}[1] ${ja}[2]" "expect: ok" \
  -- bkill "${ja}[1]" "${ja}[2]"
await_state "${ja}[1]" EXIT
await_state "${ja}[2]" EXIT
tb_record "$out/live-poll-killed-running.txt" "kind: poll" "ids: ${ja}[1] ${ja}[2] $jc" \
  "expect: finished finished finished" "note: bkill of a running job: 'Exited with exit code 130.'" \
  -- bjobs -a -l "${ja}[1]" "${ja}[2]" "$jc"

# ---- the run limit: exit code 140 after SIGUSR2 ------------------------------
proxy datc-cap-limit 'sleep 600'
jl=$(submit "$W/datc-cap-limit.sh" -W 1 | job_id)
await_state "$jl" RUN
await_state "$jl" EXIT 150
tb_record "$out/live-poll-run-limit.txt" "kind: poll" "ids: $jl" "expect: finished" \
  "note: killed at its run limit (-W 1): 'Exited with exit code 140.'" -- bjobs -a -l "$jl"

# ---- queues (the queue check of `datc sites check`) ---------------------------
tb_record "$out/live-queue-exists.txt" "kind: queue" "queue: normal" "expect: exists" \
  "message: normal: Open:Active, priority 30" -- bqueues -w normal
tb_record "$out/live-queue-unknown.txt" "kind: queue" "queue: nosuch" "expect: missing" \
  "message: No such queue" -- bqueues -w nosuch

# ---- daemons down: LSB_NTRIES=1 makes each command fail instead of hang --------
"$here/lsf-down.sh" "$work/tb"
tb_record "$out/live-submit-daemon-down.txt" "kind: submit" "expect: error command" \
  "message: LIM is down" -- timeout 60 /bin/sh -c "$submit_sh" datc-lsf-submit "$W" "$W/datc-cap-p1.sh"
tb_record "$out/live-poll-daemon-down.txt" "kind: poll" "ids: 1" "expect: error command" \
  "message: LIM is down" -- timeout 60 bjobs -a -l 1
tb_record "$out/live-cancel-daemon-down.txt" "kind: cancel" "ids: 1" "expect: error" \
  -- timeout 60 bkill 1
tb_record "$out/live-queue-daemon-down.txt" "kind: queue" "queue: normal" "expect: error command" \
  -- timeout 60 bqueues -w normal

tb_log "recorded $(ls "$out"/live-*.txt | wc -l) answers in $out"
