/* planner-fakes.h: what the planners' unit tests (test-dispatcher.c,
 * test-provisioner.c) drive them with, all in the test's own thread: a
 * clock that moves only when told, a campaign (task bag, ledger in a
 * temporary directory, dispatcher on an inproc endpoint, all on that
 * clock), and agents that are DEALER sockets saying what the test tells
 * them, as datc-agent would on the wire.  No process is started. */
#pragma once

#include <glib.h>

#include "clock.h"
#include "dispatcher.h"
#include "ledger.h"
#include "message.h"

G_BEGIN_DECLS

typedef struct {
  gint64 mono; /* the monotonic reading */
  gint64 real; /* added to the system's real time: every advance */
  DatcClock clock;
} FakeClock;

typedef struct FakeAgent FakeAgent;

typedef struct {
  gchar *dir;
  DatcBag *bag;
  DatcLedger *ledger;
  void *ctx;
  gchar *endpoint;
  DatcDispatcher *disp;
  FakeClock time;
  GPtrArray *agents; /* FakeAgent*, owned */
} FakeCampaign;

/* `tasks`: a task file in JSON Lines; `max_replicas` as the dispatcher's
 * option (0: its default). */
FakeCampaign *fake_campaign_new (const char *tasks, guint max_replicas);
void fake_campaign_free (FakeCampaign *c);
/* Moves the clock (both of its readings) on. */
void fake_campaign_advance (FakeCampaign *c, gint64 us);
/* One turn of datc run's loop for the agents: the dispatcher takes what
 * they sent, releases idle agents (and offers end-game copies), hands out
 * work for their credit and commits; then each agent takes what came. */
void fake_campaign_turn (FakeCampaign *c);
/* The dispatcher takes what the agents sent and ticks (heartbeats out,
 * silent agents lost), as datc run's loop does before its flush. */
void fake_campaign_tick (FakeCampaign *c);

struct FakeAgent {
  FakeCampaign *c;
  void *sock;
  gchar *id, *site, *proxy, *host;
  guint32 session;
  guint64 limit;     /* credit given (cumulative) */
  GArray *tasks;     /* DatcTaskKey: every task received, in order */
  GArray *cancelled; /* DatcTaskKey: CANCELs received */
  guint heartbeats;  /* HEARTBEATs received */
  gboolean welcomed, retired, told_bye;
};

/* A new agent (owned by the campaign) says HELLO: `walltime_end_us` 0 for
 * none. */
FakeAgent *fake_agent_hello (FakeCampaign *c, const char *id, const char *site, const char *proxy,
                             const char *host, guint32 slots, gint64 walltime_end_us);
/* Gives `more` credit (CREDIT carries the cumulative limit). */
void fake_agent_credit (FakeAgent *a, guint64 more);
/* Reports task (id, attempt) ended: exit code `exit_code` after
 * `runtime_ms`, finishing at the clock's now. */
void fake_agent_result (FakeAgent *a, guint64 id, guint32 attempt, gint32 exit_code,
                        gint64 runtime_ms);
void fake_agent_bye (FakeAgent *a);
/* Tasks received so far. */
guint fake_agent_received (FakeAgent *a);

G_END_DECLS
