/* trace.h: DIR/trace.jsonl, one JSON object per proxy or agent event, for
 * explaining a campaign afterwards (datc analyze trace, datc report).
 *
 * Every line has "time" (µs since the epoch) and "event", plus what the
 * event is about:
 *   campaign_started  tasks, resumed (bool)
 *   campaign_finished done, failed, cancelled
 *   proxy_submitted   site, proxy, job, slots, walltime (s, 0: none), task (direct mode; 0: none),
 *                     array (an element's: the array's job name)
 *   proxy_found       site, proxy, job (a submit an earlier master never saw come back,
 *                     found by name and adopted)
 *   proxy_started     site, proxy, job, seen_by ("scheduler" | "agent"), started (µs), wait_us
 *   proxy_ended       site, proxy, job
 *   proxy_cancelled   site, proxy, job, reason
 *   proxy_migrated    site, proxy, job, to (the site it moves to), waited_s, bound_s,
 *                     submitted_slots (there: 0 when its budget held the submit back),
 *                     reason (then proxy_cancelled for it, proxy_submitted there)
 *   relay_up          site, endpoint (its relay listens there; agents are told it)
 *   agent_connected   site, proxy, agent, host, slots
 *   agent_exited      site, proxy, agent
 *   agent_lost        site, proxy, agent, requeued
 *   split             site, tasks, weight (static mode: each site's share at start)
 *   site_degraded     site, error (the scheduler's or transport's own message)
 *   site_ok           site (working again)
 *   site_command      site, kind ("submit" | "poll" | "cancel" | "lookup"), calls (1: one
 *                     command), budget (drawn from its max_calls_per_minute: 2 for a
 *                     submit, itself and the lookup that may check it)
 *   site_commands     site, submit, poll, cancel, put, lookup (commands issued to it; at the end)
 *   task_replicated   task, attempt (the copy's), site, proxy, agent (where it runs),
 *                     original_attempt (the newest copy before it), copies (live, with it),
 *                     elapsed_ms, expected_remaining_ms (-1: unknown, a straggler), copy_ms
 *   task_replica_cancelled  task, attempt, site, proxy, agent (a copy stopped because
 *                     another attempt's result came first), winner_attempt
 * proxy_started is the first sign that a proxy runs: its scheduler said
 * so, or its first agent connected.  Lines are appended with one write
 * each (events are per proxy, agent, site and scheduler command, never
 * per task; only end-game copies, a few at the end, are). */
#pragma once

#include <glib.h>

G_BEGIN_DECLS

typedef struct DatcTrace DatcTrace;

/* Opens DIR/trace.jsonl for appending; NULL (with a warning) if it cannot,
 * in which case every call below is a no-op. */
DatcTrace *datc_trace_open (const char *dir);
void datc_trace_free (DatcTrace *t);
G_DEFINE_AUTOPTR_CLEANUP_FUNC (DatcTrace, datc_trace_free)

/* Appends one event.  `...` is a NULL-terminated list of (const char *key,
 * int kind, value) where kind is 's' (const char *), 'i' (gint64), 'd'
 * (double, 3 decimals; null when not finite) or 'b' (gboolean).  Accepts
 * t == NULL. */
void datc_trace_event (DatcTrace *t, const char *event, ...) G_GNUC_NULL_TERMINATED;

G_END_DECLS
