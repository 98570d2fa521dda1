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

typedef enum
{
  FIXTURE_CLEAN = 0,
  FIXTURE_GARBAGE = 1 << 0,   /* unreadable lines in both files */
  FIXTURE_TORN_TAIL = 1 << 1, /* a last results line still being written */
  FIXTURE_RUNNING = 1 << 2,   /* no campaign_finished yet */
} FixtureFlags;

/* Writes DIR/trace.jsonl and DIR/results.jsonl. */
void fixture_campaign_write (const char *dir, FixtureFlags flags);
/* A fresh temporary directory holding the fixture. (transfer full) */
gchar *fixture_campaign_new (FixtureFlags flags);
/* Removes a directory tree made by a test. */
void fixture_remove_tree (const char *dir);
