#!/usr/bin/env bash
# capture-slurm.sh [OUTDIR]: records what the real Slurm of slurm-up.sh
# answers to the commands scheduler-slurm.c runs, one file per answer, in
# OUTDIR (default site-drivers/tests/data/slurm).  test-scheduler-slurm.c
# parses every file there and checks the "# expect:" line this script
# wrote from the situation it set up (a job it saw running is expected
# running, ...).
#
# The commands here must stay the ones the driver builds: sbatch --parsable
# --chdir=W [args] SCRIPT; squeue -h -t all -r -j IDS -o '%i %T %r'; scancel IDS;
# squeue -h -t all --name=NAME -o %i; scontrol -a -o show partition P (and
# the sh loop over it for a list P1,P2); for arrays sbatch --parsable
# --chdir=W --array=1-K SCRIPT and squeue -h -t all -r --name=NAME -o %F.
#
# Takes about two minutes: one job is left to run into its time limit,
# which slurmctld enforces up to 30 s late.  Needs root and the packages of
# install-batch.sh; brings its own clusters up and down.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
. "$here/batch-lib.sh"

out=$(realpath -m "${1:-$here/../../site-drivers/tests/data/slurm}")
work=/tmp/datc-capture-slurm
version=$(dpkg-query -W -f='${Version}' slurmctld 2>/dev/null || echo unknown)
TB_SOURCE="Slurm $version (Debian 12), test bed tests/testbed/slurm-up.sh, recorded by tests/testbed/capture-slurm.sh"

cleanup() {
  "$here/slurm-down.sh" "$work/tb" >/dev/null 2>&1 || true
  "$here/slurm-down.sh" "$work/full" >/dev/null 2>&1 || true
}
trap cleanup EXIT
cleanup
rm -rf "$work"
mkdir -p "$work/w" "$out"
chmod 755 "$work" "$work/w"
rm -f "$out"/*.txt

eval "$("$here/slurm-up.sh" --cluster capture \
  --conf EnforcePartLimits=ALL \
  --conf 'PartitionName=short Nodes=capture-n1 MaxTime=5 State=UP' \
  --conf 'PartitionName=secret Nodes=capture-n1 Hidden=YES State=UP' \
  --conf 'PartitionName=closed Nodes=capture-n1 State=DOWN' "$work/tb")"
export SLURM_CONF
W=$work/w

# proxy NAME BODY: a script shaped like the driver's, in W.
proxy() {
  printf '#!/bin/sh\n#SBATCH --job-name=%s\n#SBATCH --nodes=1\n#SBATCH --ntasks=1\n#SBATCH --cpus-per-task=1\n#SBATCH --output=%s.%%j.log\n%s\n' \
    "$1" "$1" "$2" >"$W/$1.sh"
  chmod 755 "$W/$1.sh"
}
submit() { sbatch --parsable --chdir="$W" "$@"; }
state_of() { squeue -h -t all -r -j "$1" -o %T 2>/dev/null || true; }
is_state() { [ "$(state_of "$1")" = "$2" ]; }
await_state() {
  tb_await "${3:-30}" is_state "$1" "$2" || tb_die "job $1 never became $2 (is $(state_of "$1"))"
}
# The scheduler gives a pending job its reason (%r) at its next pass.
reason_of() { squeue -h -t all -r -j "$1" -o %r 2>/dev/null || true; }
is_reason() { [ "$(reason_of "$1")" = "$2" ]; }
await_reason() {
  tb_await 30 is_reason "$1" "$2" || tb_die "job $1 never waited for $2 (says $(reason_of "$1"))"
}

# ---- sbatch --parsable --chdir="$W" -------------------------------------------------------------
proxy datc-cap-p1 'exit 0'
tb_record "$out/submit-ok.txt" "kind: submit" "expect: 1" -- sbatch --parsable --chdir="$W" "$W/datc-cap-p1.sh"
proxy datc-cap-p2 'exit 3'
j2=$(submit "$W/datc-cap-p2.sh")
await_state 1 COMPLETED
await_state "$j2" FAILED
proxy datc-cap-bad 'exit 0'
tb_record "$out/submit-invalid-option.txt" "kind: submit" "expect: error command" "message: unrecognized option" \
  -- sbatch --parsable --chdir="$W" --bogus-option "$W/datc-cap-bad.sh"
tb_record "$out/submit-invalid-partition.txt" "kind: submit" "expect: error command" "message: Invalid partition" \
  -- sbatch --parsable --chdir="$W" --partition=nosuch "$W/datc-cap-bad.sh"
tb_record "$out/submit-too-many-cpus.txt" "kind: submit" "expect: error command" "message: More processors requested than permitted" \
  -- sbatch --parsable --chdir="$W" --cpus-per-task=9 "$W/datc-cap-bad.sh"
tb_record "$out/submit-over-partition-time-limit.txt" "kind: submit" "expect: error command" "message: time limit" \
  -- sbatch --parsable --chdir="$W" --partition=short --time=10 "$W/datc-cap-bad.sh"
tb_record "$out/submit-missing-script.txt" "kind: submit" "expect: error command" "message: Unable to open file" \
  -- sbatch --parsable --chdir="$W" "$W/no-such-script.sh"

# ---- a full queue: the competitor holds all 8 CPUs ----------------------
jc=$(runuser -u competitor -- env SLURM_CONF="$SLURM_CONF" sbatch --parsable -n 8 -o /dev/null --wrap 'sleep 600')
await_state "$jc" RUNNING
proxy datc-cap-p5 'sleep 600'
j5=$(submit "$W/datc-cap-p5.sh")
proxy datc-cap-p6 'sleep 600'
j6=$(submit "$W/datc-cap-p6.sh")
proxy datc-cap-twin 'sleep 600'
jt1=$(submit "$W/datc-cap-twin.sh")
jt2=$(submit "$W/datc-cap-twin.sh")
await_state "$j6" PENDING
tb_record "$out/cancel-pending.txt" "kind: cancel" "ids: $j6" "expect: ok" -- scancel "$j6"
await_state "$j6" CANCELLED
# j5 is first in line for the CPUs the competitor holds.
await_reason "$j5" Resources
tb_record "$out/poll-mixed.txt" "kind: poll" "ids: 1 $j2 $jc $j5 $j6 999" \
  "expect: finished failed running pending finished finished" "reasons: - | - | - | Resources | - | -" \
  -- squeue -h -t all -r -j "1,$j2,$jc,$j5,$j6,999" -o '%i %T %r'
tb_record "$out/poll-one-forgotten-id.txt" "kind: poll" "ids: 999" "expect: finished" \
  -- squeue -h -t all -r -j 999 -o '%i %T %r'
tb_record "$out/poll-only-forgotten-ids.txt" "kind: poll" "ids: 998 999" "expect: finished finished" \
  -- squeue -h -t all -r -j 998,999 -o '%i %T %r'
tb_record "$out/lookup-found.txt" "kind: lookup" "name: datc-cap-p5" "expect: $j5" \
  -- squeue -h -t all --name=datc-cap-p5 -o %i
tb_record "$out/lookup-none.txt" "kind: lookup" "name: datc-cap-nobody" "expect: none" \
  -- squeue -h -t all --name=datc-cap-nobody -o %i
tb_record "$out/lookup-two-of-a-name.txt" "kind: lookup" "name: datc-cap-twin" "expect: error parse" \
  "message: several jobs" -- squeue -h -t all --name=datc-cap-twin -o %i
tb_record "$out/cancel-unknown.txt" "kind: cancel" "ids: 999" "expect: ok" -- scancel 999
tb_record "$out/cancel-not-allowed.txt" "kind: cancel" "ids: $j5" "expect: error" "message: Access/permission denied" \
  -- runuser -u competitor -- env SLURM_CONF="$SLURM_CONF" scancel "$j5"
tb_record "$out/cancel-several.txt" "kind: cancel" "ids: $j5 $jt1 $jt2 998" "expect: ok" \
  -- scancel "$j5" "$jt1" "$jt2" 998

# ---- an array of 4 proxies, pending behind the competitor -----------------
# array NAME BODY: a script shaped like the driver's array script, in W.
array() {
  printf '#!/bin/sh\n#SBATCH --job-name=%s\n#SBATCH --nodes=1\n#SBATCH --ntasks=1\n#SBATCH --cpus-per-task=1\n#SBATCH --output=%s.%%A_%%a.log\n%s\n' \
    "$1" "$1" "$2" >"$W/$1.sh"
  chmod 755 "$W/$1.sh"
}
array datc-cap-arr 'echo "element $SLURM_ARRAY_TASK_ID"; sleep 600'
ja=$((jt2 + 1))
tb_record "$out/submit-array.txt" "kind: submit-array" "expect: ${ja}_1 ${ja}_2 ${ja}_3 ${ja}_4" \
  -- sbatch --parsable --chdir="$W" --array=1-4 "$W/datc-cap-arr.sh"
await_state "${ja}_4" PENDING
tb_record "$out/poll-array-pending.txt" "kind: poll" "ids: ${ja}_1 ${ja}_2 ${ja}_3 ${ja}_4 ${ja}_9 $jc" \
  "expect: pending pending pending pending finished running" "reasons: - | - | - | - | - | -" \
  "note: ${ja}_9 was never an element: left out of the answer; just submitted, the elements wait for no reason yet (None)" \
  -- squeue -h -t all -r -j "${ja}_1,${ja}_2,${ja}_3,${ja}_4,${ja}_9,$jc" -o '%i %T %r'
tb_record "$out/poll-array-collapsed.txt" "kind: poll" "ids: ${ja}_1 ${ja}_2 ${ja}_3 ${ja}_4 ${ja}_5 $jc" \
  "expect: pending pending pending pending finished running" "reasons: - | - | - | - | - | -" \
  "note: without -r (the driver passes it) squeue collapses pending elements into one line" \
  -- squeue -h -t all -j "$ja,$jc" -o '%i %T %r'
tb_record "$out/lookup-array-found.txt" "kind: lookup-array" "name: datc-cap-arr" "expect: $ja" \
  -- squeue -h -t all -r --name=datc-cap-arr -o %F
tb_record "$out/lookup-array-none.txt" "kind: lookup-array" "name: datc-cap-nobody" "expect: none" \
  -- squeue -h -t all -r --name=datc-cap-nobody -o %F
tb_record "$out/lookup-array-by-plain-lookup.txt" "kind: lookup" "name: datc-cap-arr" "expect: error parse" \
  "note: the plain lookup (%i) finds elements, not a job: arrays have their own" \
  -- squeue -h -t all --name=datc-cap-arr -o %i
tb_record "$out/cancel-array-elements.txt" "kind: cancel" "ids: ${ja}_3 ${ja}_4" "expect: ok" \
  -- scancel "${ja}_3" "${ja}_4"
tb_record "$out/poll-array-after-cancel.txt" "kind: poll" "ids: ${ja}_1 ${ja}_2 ${ja}_3 ${ja}_4" \
  "expect: pending pending finished finished" "note: cancelled pending elements leave squeue at once" \
  -- squeue -h -t all -r -j "${ja}_1,${ja}_2,${ja}_3,${ja}_4" -o '%i %T %r'
tb_record "$out/cancel-array-unknown-elements.txt" "kind: cancel" "ids: ${ja}_9 999_1" "expect: ok" \
  -- scancel "${ja}_9" 999_1
tb_record "$out/cancel-competitor.txt" "kind: cancel" "ids: $jc" "expect: ok" -- scancel "$jc"
await_state "$jc" CANCELLED
await_state "${ja}_1" RUNNING
await_state "${ja}_2" RUNNING
tb_record "$out/poll-array-running.txt" "kind: poll" "ids: ${ja}_1 ${ja}_2 ${ja}_3" \
  "expect: running running finished" -- squeue -h -t all -r -j "${ja}_1,${ja}_2,${ja}_3" -o '%i %T %r'
tb_record "$out/cancel-array-running.txt" "kind: cancel" "ids: ${ja}_1 ${ja}_2" "expect: ok" \
  -- scancel "${ja}_1" "${ja}_2"
await_state "${ja}_1" CANCELLED

# ---- the time limit: TIMEOUT, after the USR1 warning --------------------
proxy datc-cap-limit 'trap "echo USR1 \$(date +%s)" USR1; trap "echo TERM \$(date +%s)" TERM; date +%s; while :; do sleep 1 & wait $!; done'
jl=$(submit --time=1 --signal=B:USR1@35 "$W/datc-cap-limit.sh")
await_state "$jl" RUNNING
tb_record "$out/poll-running.txt" "kind: poll" "ids: $jl" "expect: running" \
  -- squeue -h -t all -r -j "$jl" -o '%i %T %r'
await_state "$jl" TIMEOUT 150
tb_record "$out/poll-timeout.txt" "kind: poll" "ids: $jl 1" "expect: finished finished" \
  -- squeue -h -t all -r -j "$jl,1" -o '%i %T %r'

# ---- partitions (the queue check of `datc sites check`) -------------------
queue_loop='for p do scontrol -a -o show partition "$p" || exit; done'
tb_record "$out/queue-exists.txt" "kind: queue" "queue: short" "expect: exists" \
  "message: short: State=UP TotalCPUs=8 TotalNodes=1 MaxTime=00:05:00" -- scontrol -a -o show partition short
tb_record "$out/queue-hidden.txt" "kind: queue" "queue: secret" "expect: exists" "message: secret: State=UP" \
  "note: Hidden=YES: shown only with -a" -- scontrol -a -o show partition secret
tb_record "$out/queue-down.txt" "kind: queue" "queue: closed" "expect: exists" "message: closed: State=DOWN" \
  -- scontrol -a -o show partition closed
tb_record "$out/queue-unknown.txt" "kind: queue" "queue: nosuch" "expect: missing" \
  "message: Partition nosuch not found" -- scontrol -a -o show partition nosuch
tb_record "$out/queue-list.txt" "kind: queue" "queue: batch,short" "expect: exists" \
  "message: batch: State=UP TotalCPUs=8 TotalNodes=1 MaxTime=UNLIMITED; short: State=UP" \
  -- /bin/sh -c "$queue_loop" datc-slurm-queue batch short
tb_record "$out/queue-list-one-unknown.txt" "kind: queue" "queue: batch,nosuch" "expect: missing" \
  "message: Partition nosuch not found" -- /bin/sh -c "$queue_loop" datc-slurm-queue batch nosuch

# ---- MaxJobCount reached: sbatch sleeps and retries (cut here at 8 s) ---
eval "$("$here/slurm-up.sh" --cluster full --conf MaxJobCount=2 "$work/full")"
export SLURM_CONF
proxy datc-cap-full 'sleep 600'
submit "$W/datc-cap-full.sh" >/dev/null
tb_record "$out/submit-queue-full.txt" "kind: submit" "expect: error command" \
  "message: temporarily unable to accept job" "note: cut by timeout(1) after 8 s; sbatch keeps retrying for about 2 minutes" \
  -- timeout 8 sbatch --parsable --chdir="$W" "$W/datc-cap-full.sh"

# ---- slurmctld down -----------------------------------------------------
tb_stop "$(cat "$work/full/run/slurmctld.pid")" slurmctld 30
tb_record "$out/submit-controller-down.txt" "kind: submit" "expect: error command" \
  "message: Unable to contact slurm controller" -- sbatch --parsable --chdir="$W" "$W/datc-cap-full.sh"
tb_record "$out/poll-controller-down.txt" "kind: poll" "ids: 1" "expect: error command" \
  "message: Unable to contact slurm controller" -- squeue -h -t all -r -j 1 -o '%i %T %r'
tb_record "$out/cancel-controller-down.txt" "kind: cancel" "ids: 1" "expect: error" \
  "message: Unable to contact slurm controller" -- scancel 1
tb_record "$out/lookup-controller-down.txt" "kind: lookup" "name: datc-cap-full" "expect: error command" \
  "message: Unable to contact slurm controller" -- squeue -h -t all --name=datc-cap-full -o %i
tb_record "$out/queue-controller-down.txt" "kind: queue" "queue: batch" "expect: error command" \
  "message: Unable to contact slurm controller" -- scontrol -a -o show partition batch

tb_log "recorded $(ls "$out"/*.txt | wc -l) answers in $out"
