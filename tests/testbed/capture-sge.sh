#!/usr/bin/env bash
# capture-sge.sh [OUTDIR]: records what the real Grid Engine of sge-up.sh
# answers to the commands scheduler-sge.c runs, one file per answer, in
# OUTDIR (default site-drivers/tests/data/sge).  test-scheduler-sge.c
# parses every file there and checks the "# expect:" line this script
# wrote from the situation it set up.
#
# The commands here must stay the ones the driver builds: qsub -terse -wd W
# [args] SCRIPT; /bin/sh -c 'exec qstat -u "$(id -un)"' datc-sge-poll;
# qdel IDS; qstat -j NAME; qconf -sq QUEUE; for arrays qsub -terse -wd W -t
# 1-K SCRIPT, and qdel with task ids (JOB.TASK).
#
# Takes about a minute (sge_qmaster needs ~9 s to stop, twice).  Needs
# root and the packages of install-batch.sh; brings Grid Engine up and
# down (waiting up to 5 minutes for another user of the cell to finish).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
. "$here/batch-lib.sh"

out=$(realpath -m "${1:-$here/../../site-drivers/tests/data/sge}")
work=/tmp/datc-capture-sge
version=$(dpkg-query -W -f='${Version}' gridengine-master 2>/dev/null || echo unknown)
TB_SOURCE="Son of Grid Engine $version (Debian 12), test bed tests/testbed/sge-up.sh, recorded by tests/testbed/capture-sge.sh"

cleanup() { "$here/sge-down.sh" "$work/tb" >/dev/null 2>&1 || true; }
trap cleanup EXIT
cleanup
rm -rf "$work"
mkdir -p "$work/w" "$out"
chmod 755 "$work" "$work/w"
rm -f "$out"/*.txt

set -a
eval "$("$here/sge-up.sh" --wait 300 "$work/tb")"
set +a
W=$work/w

# proxy NAME BODY: a script shaped like the driver's, in W.
proxy() {
  printf '#!/bin/sh\n#$ -S /bin/sh\n#$ -N %s\n#$ -j y\n#$ -o %s.$JOB_ID.log\n#$ -notify\n%s\n' \
    "$1" "$1" "$2" >"$W/$1.sh"
  chmod 755 "$W/$1.sh"
}
submit() { qsub -terse -wd "$W" "$@"; }
poll() { /bin/sh -c 'exec qstat -u "$(id -un)"' datc-sge-poll; }
state_of() { qstat -u '*' | awk -v id="$1" '$1 == id { print $5 }'; }
is_state() { [ "$(state_of "$1")" = "$2" ]; }
await_state() {
  tb_await "${3:-30}" is_state "$1" "$2" || tb_die "job $1 never became '$2' (is '$(state_of "$1")')"
}

# ---- submit -------------------------------------------------------------
proxy datc-cap-p1 'exit 0'
tb_record "$out/submit-ok.txt" "kind: submit" "expect: 1" -- qsub -terse -wd "$W" "$W/datc-cap-p1.sh"
await_state 1 ""
proxy datc-cap-bad 'exit 0'
tb_record "$out/submit-invalid-option.txt" "kind: submit" "expect: error command" "message: invalid option" \
  -- qsub -terse -wd "$W" -bogus-option "$W/datc-cap-bad.sh"
tb_record "$out/submit-unknown-queue.txt" "kind: submit" "expect: error command" "message: unknown queue" \
  -- qsub -terse -wd "$W" -q nosuch.q "$W/datc-cap-bad.sh"
tb_record "$out/submit-unknown-pe.txt" "kind: submit" "expect: error command" \
  "message: parallel environment" -- qsub -terse -wd "$W" -pe nope 2 "$W/datc-cap-bad.sh"
tb_record "$out/submit-missing-script.txt" "kind: submit" "expect: error command" \
  -- qsub -terse -wd "$W" "$W/no-such-script.sh"

# A job whose working directory is gone when it starts: error state Eqw.
mkdir "$W/gone"
proxy datc-cap-eqw 'exit 0'
jerr=$(qsub -terse -wd "$W/gone" "$W/datc-cap-eqw.sh")
rmdir "$W/gone"
await_state "$jerr" Eqw

# ---- ours running, the competitor filling the rest, ours waiting ---------
# -notify: SIGUSR1 comes before a suspend and SIGUSR2 before a kill; this
# stand-in for an agent ignores both, so suspend and qdel act in full.
proxy datc-cap-p3 'trap "" USR1 USR2; sleep 600'
j3=$(submit "$W/datc-cap-p3.sh")
await_state "$j3" r
jc=$(runuser -u competitor -- qsub -terse -b y -o /dev/null -j y -pe smp 7 sleep 600)
await_state "$jc" r
proxy datc-cap-p5 'sleep 600'
j5=$(submit -pe smp 2 "$W/datc-cap-p5.sh")
proxy datc-cap-p6 'sleep 600'
j6=$(submit -h "$W/datc-cap-p6.sh")
proxy datc-cap-twin 'sleep 600'
jt1=$(submit "$W/datc-cap-twin.sh")
jt2=$(submit "$W/datc-cap-twin.sh")
await_state "$j5" qw
await_state "$j6" hqw
tb_record "$out/poll-mixed.txt" "kind: poll" "ids: 1 $jerr $j3 $jc $j5 $j6 999" \
  "expect: finished failed running finished pending pending finished" \
  "reasons: - | - | - | - | - | on hold (hqw) | -" \
  "note: $jc belongs to another user, so this user's qstat does not list it" -- /bin/sh -c 'exec qstat -u "$(id -un)"' datc-sge-poll
tb_record "$out/lookup-found.txt" "kind: lookup" "name: datc-cap-p5" "expect: $j5" -- qstat -j datc-cap-p5

# An array of 4 proxies, pending behind the competitor (shaped like the
# driver's array script: one log per task).
printf '#!/bin/sh\n#$ -S /bin/sh\n#$ -N %s\n#$ -j y\n#$ -o %s.$JOB_ID.$TASK_ID.log\n#$ -notify\n%s\n' \
  datc-cap-arr datc-cap-arr 'echo "task $SGE_TASK_ID"; sleep 600' >"$W/datc-cap-arr.sh"
chmod 755 "$W/datc-cap-arr.sh"
ja=$((jt2 + 1))
tb_record "$out/submit-array.txt" "kind: submit-array" "expect: $ja.1 $ja.2 $ja.3 $ja.4" \
  -- qsub -terse -wd "$W" -t 1-4 "$W/datc-cap-arr.sh"
await_state "$ja" qw
tb_record "$out/poll-array-pending.txt" "kind: poll" "ids: $ja.1 $ja.2 $ja.3 $ja.4 $ja.9 $j3" \
  "expect: pending pending pending pending finished running" \
  "note: pending tasks share one line, ja-task-ID 1-4:1" -- /bin/sh -c 'exec qstat -u "$(id -un)"' datc-sge-poll
tb_record "$out/lookup-array-found.txt" "kind: lookup-array" "name: datc-cap-arr" "expect: $ja" -- qstat -j datc-cap-arr
tb_record "$out/cancel-array-tasks.txt" "kind: cancel" "ids: $ja.2 $ja.3" "expect: ok" -- qdel "$ja.2" "$ja.3"
tb_record "$out/poll-array-after-cancel.txt" "kind: poll" "ids: $ja.1 $ja.2 $ja.3 $ja.4" \
  "expect: pending finished finished pending" "note: the pending tasks left: ja-task-ID 1,4" \
  -- /bin/sh -c 'exec qstat -u "$(id -un)"' datc-sge-poll
tb_record "$out/cancel-array-unknown-task.txt" "kind: cancel" "ids: $ja.9 $ja.2" "expect: ok" -- qdel "$ja.9" "$ja.2"
tb_record "$out/lookup-none.txt" "kind: lookup" "name: datc-cap-nobody" "expect: none" -- qstat -j datc-cap-nobody
tb_record "$out/lookup-two-of-a-name.txt" "kind: lookup" "name: datc-cap-twin" "expect: error parse" \
  "message: several jobs" -- qstat -j datc-cap-twin
qmod -sj "$j3" >/dev/null
await_state "$j3" s
tb_record "$out/poll-suspended.txt" "kind: poll" "ids: $j3" "expect: running" -- /bin/sh -c 'exec qstat -u "$(id -un)"' datc-sge-poll
qmod -usj "$j3" >/dev/null
await_state "$j3" r

tb_record "$out/cancel-not-allowed.txt" "kind: cancel" "ids: $j5" "expect: error" "message: privileges" \
  -- runuser -u competitor -- qdel "$j5"
tb_record "$out/cancel-pending.txt" "kind: cancel" "ids: $j6" "expect: ok" -- qdel "$j6"
tb_record "$out/cancel-running.txt" "kind: cancel" "ids: $j3" "expect: ok" -- qdel "$j3"
# -notify: SIGUSR2 now, SIGKILL after the queue's notify time; meanwhile "dr".
await_state "$j3" dr 10
tb_record "$out/poll-being-deleted.txt" "kind: poll" "ids: $j3" "expect: running" -- /bin/sh -c 'exec qstat -u "$(id -un)"' datc-sge-poll
tb_record "$out/cancel-unknown.txt" "kind: cancel" "ids: 999" "expect: ok" -- qdel 999
tb_record "$out/cancel-several.txt" "kind: cancel" "ids: $j5 $jt1 $jt2 998 $jerr" "expect: ok" \
  -- qdel "$j5" "$jt1" "$jt2" 998 "$jerr"
runuser -u competitor -- qdel "$jc" >/dev/null
await_state "$j3" ""
await_state "$jc" ""
task_state() { qstat -u '*' | awk -v id="$1" -v t="$2" '$1 == id && $NF == t { print $5 }'; }
is_task_state() { [ "$(task_state "$1" "$2")" = "$3" ]; }
tb_await 30 is_task_state "$ja" 1 r || tb_die "task $ja.1 never ran"
tb_await 30 is_task_state "$ja" 4 r || tb_die "task $ja.4 never ran"
tb_record "$out/poll-array-running.txt" "kind: poll" "ids: $ja.1 $ja.4 $ja.2" "expect: running running finished" \
  "note: a running task has a line of its own" -- /bin/sh -c 'exec qstat -u "$(id -un)"' datc-sge-poll
tb_record "$out/cancel-array-running.txt" "kind: cancel" "ids: $ja.1 $ja.4" "expect: ok" -- qdel "$ja.1" "$ja.4"
tb_wait_none() { [ -z "$(qstat -u '*')" ]; }
tb_await 30 tb_wait_none || tb_die "jobs left: $(qstat -u '*')"
tb_record "$out/poll-no-jobs.txt" "kind: poll" "ids: $j3 $j5" "expect: finished finished" -- /bin/sh -c 'exec qstat -u "$(id -un)"' datc-sge-poll

# ---- queues (the queue check of `datc sites check`) ----------------------
host=$(hostname)
tb_record "$out/queue-exists.txt" "kind: queue" "queue: all.q" "expect: exists" \
  "message: all.q: slots 8, hostlist @allhosts" -- qconf -sq all.q
tb_record "$out/queue-instance.txt" "kind: queue" "queue: all.q@$host" "expect: exists" \
  "message: all.q@$host: slots 8" -- qconf -sq "all.q@$host"
tb_record "$out/queue-as-another-user.txt" "kind: queue" "queue: all.q" "expect: exists" \
  "note: competitor is neither manager nor operator: showing a queue needs no privilege" \
  -- runuser -u competitor -- qconf -sq all.q
tb_record "$out/queue-unknown.txt" "kind: queue" "queue: nosuch.q" "expect: missing" \
  'message: No cluster queue or queue instance matches the phrase "nosuch.q"' -- qconf -sq nosuch.q
tb_record "$out/queue-list-one-unknown.txt" "kind: queue" "queue: all.q,nosuch.q" "expect: missing" \
  'message: matches the phrase "nosuch.q"' -- qconf -sq all.q,nosuch.q
tb_record "$out/queue-unknown-host.txt" "kind: queue" "queue: all.q@nosuchhost" "expect: missing" \
  -- qconf -sq all.q@nosuchhost

# ---- a per-user job limit (max_u_jobs) ----------------------------------
qconf -sconf global | sed -e 's/^max_u_jobs .*/max_u_jobs 1/' >"$work/global"
qconf -Mconf "$work/global" >/dev/null
proxy datc-cap-limit 'sleep 600'
submit "$W/datc-cap-limit.sh" >/dev/null
tb_record "$out/submit-job-limit.txt" "kind: submit" "expect: error command" "message: jobs are allowed per user" \
  -- qsub -terse -wd "$W" "$W/datc-cap-limit.sh"

# ---- sge_qmaster down ---------------------------------------------------
tb_stop "$(cat "$work/tb/run/qmaster.pid")" sge_qmaster 60
tb_record "$out/submit-qmaster-down.txt" "kind: submit" "expect: error command" "message: unable to" \
  -- qsub -terse -wd "$W" "$W/datc-cap-limit.sh"
tb_record "$out/poll-qmaster-down.txt" "kind: poll" "ids: 1" "expect: error command" "message: unable to" -- /bin/sh -c 'exec qstat -u "$(id -un)"' datc-sge-poll
tb_record "$out/cancel-qmaster-down.txt" "kind: cancel" "ids: 1" "expect: error" "message: unable to" -- qdel 1
tb_record "$out/lookup-qmaster-down.txt" "kind: lookup" "name: datc-cap-limit" "expect: error command" \
  "message: unable to" -- qstat -j datc-cap-limit
tb_record "$out/queue-qmaster-down.txt" "kind: queue" "queue: all.q" "expect: error command" \
  "message: unable to" -- qconf -sq all.q

tb_log "recorded $(ls "$out"/*.txt | wc -l) answers in $out"
