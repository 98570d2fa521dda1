/* test-dispatcher-agents.c: the dispatcher against a DEALER playing an agent, in
 * this process (ipc socket, real ledger on a temporary journal): what the
 * dispatcher says of an agent (its free slots) is the ledger's count, every
 * departure leaves through the ledger (a BYE gives the tasks back without a
 * crash, silence loses them, and either way the ledger no longer keeps the
 * agent), and a direct-mode agent gets the task the ledger bound to its
 * proxy; the agents' list of `datc status`, written as text, is JSON that
 * says what the ledger says. */
#include <glib.h>
#include <json-glib/json-glib.h>
#include <string.h>
#include <zmq.h>

#include "datc-limits.h"
#include "dispatcher.h"
#include "ledger.h"
#include "message.h"
#include "status.h"

typedef struct {
  gchar *dir;
  DatcBag *bag;
  DatcLedger *ledger;
  void *ctx;
  DatcDispatcher *disp;
  void *agent;      /* DEALER, routing id "agent-1" */
  guint64 got;      /* tasks it received */
  guint64 first_id; /* the id of the first of them */
} Fixture;

/* crash_limit 1: a task lost once fails at once, so a departure that
 * counted a crash shows as a failed task. */
static void
setup (Fixture *f, guint n, guint timeout_ms)
{
  g_autoptr (GError) error = NULL;
  memset (f, 0, sizeof *f);
  f->dir = g_dir_make_tmp ("datc-dispatcher-XXXXXX", &error);
  g_assert_no_error (error);
  g_autoptr (GString) text = g_string_new (NULL);
  for (guint i = 0; i < n; i++)
    g_string_append (text, "true\n");
  f->bag = datc_bag_new ();
  g_assert_true (
      datc_bag_load_data (f->bag, "t.txt", text->str, text->len, DATC_TASKFILE_LINES, &error));
  DatcLedgerOptions lo = { .crash_limit = 1 };
  f->ledger = datc_ledger_open (f->dir, f->bag, "t.txt", "00", &lo, &error);
  g_assert_no_error (error);
  f->ctx = zmq_ctx_new ();
  g_autofree gchar *endpoint = g_strdup_printf ("ipc://%s/d.sock", f->dir);
  DatcDispatcherOptions o = { .endpoint = endpoint, .timeout_ms = timeout_ms };
  f->disp = datc_dispatcher_new (f->ctx, f->ledger, &o, &error);
  g_assert_no_error (error);
  f->agent = zmq_socket (f->ctx, ZMQ_DEALER);
  int zero = 0;
  zmq_setsockopt (f->agent, ZMQ_LINGER, &zero, sizeof zero);
  zmq_setsockopt (f->agent, ZMQ_ROUTING_ID, "agent-1", 7);
  g_assert_cmpint (zmq_connect (f->agent, endpoint), ==, 0);
}

static void
teardown (Fixture *f)
{
  zmq_close (f->agent);
  datc_dispatcher_free (f->disp);
  zmq_ctx_term (f->ctx);
  datc_ledger_free (f->ledger);
  datc_bag_free (f->bag);
  g_autofree gchar *cmd = g_strdup_printf ("rm -rf '%s'", f->dir);
  g_assert_cmpint (system (cmd), ==, 0);
  g_free (f->dir);
}

static void
send_msg (Fixture *f, const DatcMsg *m)
{
  g_autoptr (GByteArray) frame = g_byte_array_new ();
  datc_msg_encode (m, frame);
  g_assert_cmpint (zmq_send (f->agent, frame->data, frame->len, 0), ==, (int) frame->len);
}

/* HELLO from agent `id` on `s` (proxy `proxy`), then a credit of `credit`. */
static void
say_hello (void *s, const char *id, const char *proxy, guint32 slots, guint64 credit)
{
  g_autoptr (DatcMsg) h = datc_msg_new (DATC_MSG_HELLO);
  h->u.hello.agent_id = g_strdup (id);
  h->u.hello.site = g_strdup ("here");
  h->u.hello.proxy = g_strdup (proxy);
  h->u.hello.host = g_strdup ("host");
  h->u.hello.slots = slots;
  h->u.hello.session = 1;
  g_autoptr (DatcMsg) c = datc_msg_new (DATC_MSG_CREDIT);
  c->u.credit.session = 1;
  c->u.credit.limit = credit;
  const DatcMsg *msgs[] = { h, c };
  for (guint i = 0; i < G_N_ELEMENTS (msgs); i++)
    {
      g_autoptr (GByteArray) frame = g_byte_array_new ();
      datc_msg_encode (msgs[i], frame);
      g_assert_cmpint (zmq_send (s, frame->data, frame->len, 0), ==, (int) frame->len);
    }
}

static void
hello (Fixture *f, const char *proxy, guint32 slots, guint64 credit)
{
  say_hello (f->agent, "agent-1", proxy, slots, credit);
}

/* One turn of the master's loop, then what reached the agent: TASKS are
 * counted, the rest dropped. */
static void
turn (Fixture *f)
{
  g_autoptr (GError) error = NULL;
  g_assert_true (datc_dispatcher_receive (f->disp, &error));
  datc_dispatcher_tick (f->disp);
  g_assert_true (datc_dispatcher_flush (f->disp, TRUE, NULL, &error));
  g_assert_no_error (error);
  zmq_pollitem_t it = { f->agent, 0, ZMQ_POLLIN, 0 };
  while (zmq_poll (&it, 1, 10) > 0)
    {
      zmq_msg_t body;
      zmq_msg_init (&body);
      g_assert_cmpint (zmq_msg_recv (&body, f->agent, 0), >=, 0);
      g_autoptr (DatcMsg) m
          = datc_msg_decode (zmq_msg_data (&body), zmq_msg_size (&body), DATC_FRAME_MAX, &error);
      g_assert_no_error (error);
      zmq_msg_close (&body);
      if (m->type == DATC_MSG_TASKS)
        for (guint i = 0; i < m->u.tasks.tasks->len; i++)
          {
            DatcTask *t = m->u.tasks.tasks->pdata[i];
            if (f->got++ == 0)
              f->first_id = t->id;
          }
    }
}

/* Turns until `n` tasks reached the agent, or fails after 10 s. */
static void
await_tasks (Fixture *f, guint64 n)
{
  gint64 deadline = g_get_monotonic_time () + 10 * G_USEC_PER_SEC;
  while (f->got < n && g_get_monotonic_time () < deadline)
    turn (f);
  g_assert_cmpuint (f->got, ==, n);
}

/* Turns until no agent is left, or fails after 10 s. */
static void
await_no_agent (Fixture *f)
{
  gint64 deadline = g_get_monotonic_time () + 10 * G_USEC_PER_SEC;
  while (datc_dispatcher_agents (f->disp) > 0 && g_get_monotonic_time () < deadline)
    turn (f);
  g_assert_cmpuint (datc_dispatcher_agents (f->disp), ==, 0);
}

/* Turns until task `id` is done, or fails after 10 s. */
static void
await_done (Fixture *f, guint64 id)
{
  gint64 deadline = g_get_monotonic_time () + 10 * G_USEC_PER_SEC;
  while (datc_ledger_task_state (f->ledger, id) != DATC_TASK_DONE
         && g_get_monotonic_time () < deadline)
    turn (f);
  g_assert_cmpint (datc_ledger_task_state (f->ledger, id), ==, DATC_TASK_DONE);
}

static void
report_success (Fixture *f, guint64 id)
{
  g_autoptr (DatcMsg) r = datc_msg_new (DATC_MSG_RESULT);
  DatcResult *res = g_new0 (DatcResult, 1);
  gint64 now = g_get_real_time ();
  res->id = id;
  res->attempt = 1;
  res->status = DATC_STATUS_EXITED;
  res->started_us = now - 1000;
  res->finished_us = now;
  res->out = g_bytes_new (NULL, 0);
  res->err = g_bytes_new (NULL, 0);
  g_ptr_array_add (r->u.results.results, res);
  send_msg (f, r);
}

/* 4 slots, 3 tasks taken: one slot free; a result frees another (the
 * dispatcher's count is the ledger's).  Then BYE with 2 tasks held: they
 * go back to the queue without a crash (crash_limit 1 would fail them),
 * and the ledger keeps no entry and no live attempt for the agent. */
static void
test_bye_gives_tasks_back (void)
{
  Fixture f;
  setup (&f, 4, 10000);
  hello (&f, "p1", 4, 3);
  await_tasks (&f, 3);
  DatcLedgerCounts c;
  datc_ledger_counts (f.ledger, &c);
  g_assert_cmpuint (c.running, ==, 3);
  g_assert_cmpuint (datc_dispatcher_free_slots (f.disp), ==, 1);

  report_success (&f, f.first_id);
  await_done (&f, f.first_id);
  g_assert_cmpuint (datc_dispatcher_free_slots (f.disp), ==, 2);
  g_assert_cmpuint (datc_ledger_agent_attempts (f.ledger, 0), ==, 2);

  g_autoptr (DatcMsg) bye = datc_msg_new (DATC_MSG_BYE);
  bye->u.reason = g_strdup ("done");
  send_msg (&f, bye);
  await_no_agent (&f);
  datc_ledger_counts (f.ledger, &c);
  g_assert_cmpuint (c.running, ==, 0);
  g_assert_cmpuint (c.failed, ==, 0);
  g_assert_cmpuint (c.queued, ==, 3);
  g_assert_cmpuint (c.done, ==, 1);
  g_assert_cmpuint (datc_ledger_agent_attempts (f.ledger, 0), ==, 0);
  g_assert_cmpuint (datc_ledger_live_agents (f.ledger), ==, 0);
  g_assert_null (datc_ledger_agent_site (f.ledger, "agent-1"));
  teardown (&f);
}

/* An agent that goes silent is lost: its tasks cost a crash (failing at
 * crash_limit 1), and the ledger no longer keeps it. */
static void
test_silent_agent_is_lost (void)
{
  Fixture f;
  setup (&f, 3, 300);
  hello (&f, "p1", 2, 2);
  await_tasks (&f, 2);
  await_no_agent (&f);
  DatcLedgerCounts c;
  datc_ledger_counts (f.ledger, &c);
  g_assert_cmpuint (c.running, ==, 0);
  g_assert_cmpuint (c.failed, ==, 2);
  g_assert_cmpuint (c.queued, ==, 1);
  g_assert_cmpuint (datc_ledger_agent_attempts (f.ledger, 0), ==, 0);
  g_assert_cmpuint (datc_ledger_live_agents (f.ledger), ==, 0);
  teardown (&f);
}

/* Direct mode: the agent of proxy p2 gets the task the ledger bound to
 * p2, not the first queued one (bound to p1), and is released once it is
 * done. */
static void
test_direct_agent_gets_its_proxy_s_task (void)
{
  Fixture f;
  setup (&f, 3, 10000);
  datc_dispatcher_one_task (f.disp);
  guint64 t1, t2;
  g_assert_true (datc_ledger_bind (f.ledger, "here", "p1", &t1));
  g_assert_true (datc_ledger_bind (f.ledger, "here", "p2", &t2));
  hello (&f, "p2", 1, 2);
  await_tasks (&f, 1);
  g_assert_cmpuint (f.first_id, ==, t2);
  g_assert_cmpuint (datc_ledger_proxy_task (f.ledger, "here", "p2"), ==, t2);
  g_assert_cmpint (datc_ledger_task_state (f.ledger, t1), ==, DATC_TASK_QUEUED);
  report_success (&f, t2);
  gint64 deadline = g_get_monotonic_time () + 10 * G_USEC_PER_SEC;
  while (datc_dispatcher_agents (f.disp) > 0 && g_get_monotonic_time () < deadline)
    {
      turn (&f);
      datc_dispatcher_release_idle (f.disp);
    }
  g_assert_cmpuint (datc_dispatcher_agents (f.disp), ==, 0);
  g_assert_cmpuint (f.got, ==, 1);
  g_assert_cmpint (datc_ledger_task_state (f.ledger, t2), ==, DATC_TASK_DONE);
  teardown (&f);
}

/* The agents' list is written by hand: it must parse, escape what it
 * quotes (the proxy id comes from the agent), and count what the ledger
 * counts. */
static void
test_described_as_json (void)
{
  Fixture f;
  setup (&f, 4, 10000);
  hello (&f, "p\"1\\ \n", 4, 3);
  await_tasks (&f, 3);
  report_success (&f, f.first_id);
  await_done (&f, f.first_id);

  g_autoptr (GString) text = g_string_new (NULL);
  datc_dispatcher_describe_agents (f.disp, 0, text);
  g_assert_cmpstr (text->str, ==, "[]");
  g_string_truncate (text, 0);
  datc_dispatcher_describe_agents (f.disp, G_MAXUINT, text);
  g_autoptr (GError) error = NULL;
  g_autoptr (JsonNode) root = json_from_string (text->str, &error);
  g_assert_no_error (error);
  JsonArray *agents = json_node_get_array (root);
  g_assert_cmpuint (json_array_get_length (agents), ==, 1);
  JsonObject *a = json_array_get_object_element (agents, 0);
  g_assert_cmpstr (json_object_get_string_member (a, "id"), ==, "agent-1");
  g_assert_cmpstr (json_object_get_string_member (a, "site"), ==, "here");
  g_assert_cmpstr (json_object_get_string_member (a, "proxy"), ==, "p\"1\\ \n");
  g_assert_cmpstr (json_object_get_string_member (a, "host"), ==, "host");
  g_assert_cmpint (json_object_get_int_member (a, "slots"), ==, 4);
  g_assert_cmpint (json_object_get_int_member (a, "running")
                       + json_object_get_int_member (a, "prefetched"),
                   ==, 2);
  g_assert_cmpint (json_object_get_int_member (a, "done"), ==, 1);
  double seen = json_object_get_double_member (a, "last_seen_s");
  g_assert_cmpfloat (seen, >=, 0.0);
  g_assert_cmpfloat (seen, <, 10.0);
  teardown (&f);
}

static void
count_interlude (gpointer data)
{
  (*(guint *) data)++;
}

/* The interlude (where run.c answers `datc status`) comes round in the
 * middle of a turn: while many messages are read, and in the flush
 * around its commit. */
static void
test_interlude_in_the_turn (void)
{
  Fixture f;
  setup (&f, 4, 10000);
  guint calls = 0;
  datc_dispatcher_set_interlude (f.disp, count_interlude, &calls);
  hello (&f, "p1", 4, 0);
  for (guint i = 0; i < 62; i++)
    {
      g_autoptr (DatcMsg) c = datc_msg_new (DATC_MSG_CREDIT);
      c->u.credit.session = 1;
      c->u.credit.limit = 0;
      send_msg (&f, c);
    }
  /* 64 messages once they are all there: every 16th read calls it. */
  g_autoptr (GArray) items = g_array_new (FALSE, FALSE, sizeof (zmq_pollitem_t));
  datc_dispatcher_poll_items (f.disp, items);
  zmq_pollitem_t it = g_array_index (items, zmq_pollitem_t, 0);
  g_assert_cmpint (zmq_poll (&it, 1, 10000), ==, 1);
  g_autoptr (GError) error = NULL;
  gint64 deadline = g_get_monotonic_time () + 10 * G_USEC_PER_SEC;
  while (calls < 3 && g_get_monotonic_time () < deadline)
    {
      g_assert_true (datc_dispatcher_receive (f.disp, &error));
      g_assert_no_error (error);
      zmq_poll (&it, 1, 100); /* the rest of the 64 */
    }
  g_assert_cmpuint (calls, >=, 3);
  calls = 0;
  gboolean synced = FALSE;
  g_assert_true (datc_dispatcher_flush (f.disp, TRUE, &synced, &error));
  g_assert_true (synced);
  g_assert_cmpuint (calls, ==, 1); /* after the commit */
  datc_dispatcher_set_interlude (f.disp, NULL, NULL);
  teardown (&f);
}

/* Another agent on its own DEALER: its HELLO (proxy and id `name`) and a
 * credit of `credit`. */
static void *
other_agent (Fixture *f, const char *name, guint32 slots, guint64 credit)
{
  void *s = zmq_socket (f->ctx, ZMQ_DEALER);
  int zero = 0;
  zmq_setsockopt (s, ZMQ_LINGER, &zero, sizeof zero);
  zmq_setsockopt (s, ZMQ_ROUTING_ID, name, strlen (name));
  g_autofree gchar *endpoint = g_strdup_printf ("ipc://%s/d.sock", f->dir);
  g_assert_cmpint (zmq_connect (s, endpoint), ==, 0);
  say_hello (s, name, name, slots, credit);
  return s;
}

typedef struct {
  Fixture *f;
  DatcRate *rate;
  guint slots;         /* of every agent */
  guint before, after; /* calls before the hand-out's commit, after it */
} StatusCheck;

/* What `datc status` would say now adds up to what is committed, and the
 * committed task of the agent with one slot, which runs it, is running. */
static void
status_adds_up (gpointer data)
{
  StatusCheck *sc = data;
  DatcLedgerCounts c;
  datc_ledger_counts_committed (sc->f->ledger, &c);
  if (c.running == 1)
    sc->before++;
  else
    sc->after++;
  g_autoptr (JsonNode) st
      = datc_status_build (sc->f->dir, sc->f->ledger, sc->f->disp, NULL, sc->rate, TRUE, FALSE, 0);
  JsonObject *t = json_object_get_object_member (json_node_get_object (st), "tasks");
  gint64 running = json_object_get_int_member (t, "running");
  g_assert_cmpint (running, >=, 1);
  g_assert_cmpint (running, <=, sc->slots);
  g_assert_cmpint (running + json_object_get_int_member (t, "prefetched"), ==, c.running);
  g_assert_cmpint (json_object_get_int_member (t, "queued"), ==, c.queued);
}

/* The interlude comes round in the hand-out too (every 16 agents served),
 * between the hand-out and its commit: a status built there counts what
 * is committed, the running ones as the agents run them, and does not
 * take the tasks just handed out for prefetched ones (with each agent's
 * prefetched tasks counted from what it holds, the one committed task
 * showed as prefetched and nothing as running). */
static void
test_status_in_the_hand_out (void)
{
  Fixture f;
  setup (&f, 1000, 10000);
  hello (&f, "p1", 1, 1);
  await_tasks (&f, 1);
  enum { N = 24 };
  void *others[N];
  for (guint i = 0; i < N; i++)
    {
      g_autofree gchar *name = g_strdup_printf ("agent-%u", i + 2);
      others[i] = other_agent (&f, name, 2, 4);
    }
  /* Every HELLO and credit read, nothing handed out yet. */
  g_autoptr (GError) error = NULL;
  g_autoptr (GArray) items = g_array_new (FALSE, FALSE, sizeof (zmq_pollitem_t));
  datc_dispatcher_poll_items (f.disp, items);
  zmq_pollitem_t it = g_array_index (items, zmq_pollitem_t, 0);
  gint64 deadline = g_get_monotonic_time () + 10 * G_USEC_PER_SEC;
  while (datc_dispatcher_agents (f.disp) < N + 1 && g_get_monotonic_time () < deadline)
    {
      zmq_poll (&it, 1, 100);
      g_assert_true (datc_dispatcher_receive (f.disp, &error));
    }
  g_assert_cmpuint (datc_dispatcher_agents (f.disp), ==, N + 1);
  while (zmq_poll (&it, 1, 50) > 0)
    g_assert_true (datc_dispatcher_receive (f.disp, &error));

  StatusCheck sc = { &f, datc_rate_new (), 1 + 2 * N, 0, 0 };
  datc_dispatcher_set_interlude (f.disp, status_adds_up, &sc);
  gboolean synced = FALSE;
  g_assert_true (datc_dispatcher_flush (f.disp, TRUE, &synced, &error));
  g_assert_no_error (error);
  g_assert_true (synced);
  datc_dispatcher_set_interlude (f.disp, NULL, NULL);
  g_assert_cmpuint (sc.before, >=, 1); /* in the hand-out */
  g_assert_cmpuint (sc.after, ==, 1);  /* after the commit */
  DatcLedgerCounts c;
  datc_ledger_counts_committed (f.ledger, &c);
  g_assert_cmpuint (c.running, ==, 1 + 4 * N);

  datc_rate_free (sc.rate);
  for (guint i = 0; i < N; i++)
    zmq_close (others[i]);
  teardown (&f);
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  g_test_add_func ("/dispatcher/agents/bye-gives-held-tasks-back-and-leaves-the-ledger",
                   test_bye_gives_tasks_back);
  g_test_add_func ("/dispatcher/agents/a-silent-agent-is-lost-with-its-tasks",
                   test_silent_agent_is_lost);
  g_test_add_func ("/dispatcher/agents/described-as-json", test_described_as_json);
  g_test_add_func ("/dispatcher/agents/interlude-in-the-middle-of-a-turn",
                   test_interlude_in_the_turn);
  g_test_add_func ("/dispatcher/agents/status-in-the-hand-out-counts-what-is-committed",
                   test_status_in_the_hand_out);
  g_test_add_func ("/dispatcher/agents/direct-agent-gets-the-task-bound-to-its-proxy",
                   test_direct_agent_gets_its_proxy_s_task);
  return g_test_run ();
}
