/* chaos.h: a campaign of short tasks run through crashes, for
 * tests/test-chaos.c (which asserts on the numbers) and
 * benchmarks/bench-chaos.c (which prints them).
 *
 * Each task appends one line per execution to a log ("ID START_NS
 * AGENT_PID", one O_APPEND write), so every execution is counted, not
 * inferred.  While `datc run` works through the bag, the driver, in a
 * random order: kill -9s the master (and runs the same command again,
 * which resumes), kill -9s local agents, and once stops a local agent
 * (SIGSTOP) and, with `link_down`, cuts the link of an agent that
 * connects over TCP from a network namespace of its own, both for longer
 * than the agent timeout.  It watches results.jsonl throughout, so it
 * knows when each result was first recorded.
 *
 * Nothing here asserts: every failure of the driver itself (a script, a
 * spawn, a master that dies on its own) is a GError; what the campaign
 * did, good or bad, is a ChaosOutcome. */
#pragma once

#include <glib.h>
#include <stdio.h>

G_BEGIN_DECLS

typedef struct {
  guint tasks;                    /* in the bag */
  guint task_ms;                  /* each task sleeps this long after logging its start */
  guint master_kills;             /* K: kill -9 of the master, then the same command again */
  guint agent_kills;              /* J: kill -9 of a local agent */
  gboolean stop;                  /* SIGSTOP one local agent for outage_ms, then SIGCONT */
  gboolean link_down;             /* an agent over TCP in its own network namespace; its link
                                   * goes down for outage_ms (needs root: ip netns) */
  guint outage_ms;                /* how long the stop and the link-down last */
  guint local_agents;             /* on the embedded local site (0: none, --no-local) */
  guint local_slots;              /* shared by those */
  guint tcp_slots;                /* of the TCP agent, with link_down */
  guint heartbeat_ms, timeout_ms; /* --heartbeat-ms, --agent-timeout-ms */
  guint gap_min_ms, gap_max_ms;   /* random pause before each event */
  guint deadline_s;               /* the whole campaign; past it the master is killed */
  guint32 seed;
} ChaosPlan;

/* The defaults of the issue: --heartbeat-ms 500 --agent-timeout-ms 3000,
 * an 8 s outage, 2 local agents sharing 4 slots, a 2-slot TCP agent. */
void chaos_plan_init (ChaosPlan *plan);

/* What brought a re-run about: the event that hit the agent of the
 * execution before it (or, for a stop or a link-down, of the re-run
 * itself: a prefetched task started once the agent is back), else a
 * master kill before the re-run started that the execution before it
 * overlapped: it ran then, or started before its agent could be back with
 * the new master (up to a timeout after the restart). */
typedef enum {
  CHAOS_CAUSE_MASTER_KILL,
  CHAOS_CAUSE_AGENT_KILL,
  CHAOS_CAUSE_STOP,
  CHAOS_CAUSE_LINK_DOWN,
  CHAOS_CAUSE_OTHER,
  CHAOS_N_CAUSES
} ChaosCause;

typedef struct {
  guint tasks;
  guint lost;            /* tasks with no line in results.jsonl */
  guint duplicate_lines; /* result lines beyond the first for an id */
  guint not_ok;          /* results other than exited 0 (e.g. status lost) */
  guint unlogged;        /* results whose task never logged an execution */
  guint executions;      /* lines in the execution log */
  guint reruns;          /* executions beyond the first, over all tasks */
  guint reruns_by_cause[CHAOS_N_CAUSES];
  /* Executions that started after the recorded result's `finished`
   * (the same machine's clock: no skew to allow for). */
  guint reruns_after_result;
  /* The stricter subset: started after the driver saw the line in
   * results.jsonl (polled every 50 ms), so surely after it was recorded. */
  guint reruns_after_recorded;
  guint master_kills, agent_kills, stops, link_downs; /* carried out */
  int status;     /* exit status of the last `datc run`; -1 past the deadline */
  double seconds; /* first start to last exit */
  gchar *example; /* one re-run after a result, described; NULL if none */
} ChaosOutcome;

void chaos_outcome_clear (ChaosOutcome *out);

/* Runs the plan in `workdir` (an existing, empty directory: tasks,
 * log, campaign in c/, namespaces' state in net/, every process's
 * stderr).  Every process it started and every namespace it made are
 * gone when it returns, whatever happened.  FALSE only when the driver
 * could not do its part; *out is filled either way as far as it got. */
gboolean chaos_run (const char *workdir, const ChaosPlan *plan, ChaosOutcome *out, GError **error);

/* The metrics of a campaign already run in `workdir` (c/results.jsonl,
 * executions) with ids 1..tasks, without its events (every re-run is
 * "other") or the times results were seen (none is "after seen"). */
gboolean chaos_measure (const char *workdir, guint tasks, ChaosOutcome *out, GError **error);

/* One "name value" line per metric, for people and for scripts. */
void chaos_outcome_print (const ChaosOutcome *out, FILE *f);

G_END_DECLS
