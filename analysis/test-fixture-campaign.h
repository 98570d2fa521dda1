/* test-fixture-campaign.h: a small campaign directory written by hand, the
 * same shape the master writes, with numbers a test can check by head:
 * site A runs 8 tasks of exactly 10 s on two 2-slot proxies that start 5 s
 * and 15 s after the campaign; site B's only proxy is cancelled unstarted.
 * Scheduler calls (site_command): A 4 for submits and 3 polls, 7 in all,
 * 875 per 1,000 tasks; B 2 for its submit and 1 cancel, 3, no task.
 * Pull gives 35 s, ect 35 s, fluid 30 s; the trace says the same. */
#pragma once

#include <glib.h>

#define FIXTURE_T0 G_GINT64_CONSTANT (1700000000000000)

typedef enum {
  FIXTURE_CLEAN = 0,
  FIXTURE_GARBAGE = 1 << 0,   /* unreadable lines in both files */
  FIXTURE_TORN_TAIL = 1 << 1, /* a last results line still being written */
  FIXTURE_RUNNING = 1 << 2,   /* no campaign_finished yet */
} FixtureFlags;

/* Writes DIR/trace.jsonl and DIR/results.jsonl. */
void fixture_campaign_write (const char *dir, FixtureFlags flags);
/* A direct-mode campaign (`"mode":"direct"` in campaign_started, or only
 * in DIR/campaign.json with `mode_in_json`): site A runs 6 tasks of
 * exactly 10 s, one job each, at most 2 jobs at once; every job waits 4 s
 * from its submission and is seen ended 1 s after its task, and the next
 * two go out then: jobs submitted at 0, 15 and 30, tasks ending at 14, 29
 * and 44.  The direct model gives 44 s exactly; the same six jobs pulling
 * from where they started would have finished at 29 s. */
void fixture_direct_campaign_write (const char *dir, gboolean mode_in_json);
/* A fresh temporary directory holding the fixture. (transfer full) */
gchar *fixture_campaign_new (FixtureFlags flags);
/* Removes a directory tree made by a test. */
void fixture_remove_tree (const char *dir);
