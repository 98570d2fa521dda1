/* planner-fakes.c: see planner-fakes.h.  An inproc message is in the
 * peer's queue once zmq_send returns, so one turn of the loop sees all an
 * agent said before it, and an agent sees all a turn sent: nothing here
 * waits. */
#include "planner-fakes.h"

#include <string.h>
#include <zmq.h>

#include "datc-limits.h"

static gint64
fake_mono (gpointer data)
{
  return ((FakeClock *) data)->mono;
}

/* The system's real time plus every advance: the ledger stamps
 * dispatches with the system's clock, and a task must never seem to have
 * been dispatched after now. */
static gint64
fake_real (gpointer data)
{
  return g_get_real_time () + ((FakeClock *) data)->real;
}

static void
fake_agent_free (gpointer p)
{
  FakeAgent *a = p;
  zmq_close (a->sock);
  g_free (a->id);
  g_free (a->site);
  g_free (a->proxy);
  g_free (a->host);
  g_array_unref (a->tasks);
  g_array_unref (a->cancelled);
  g_free (a);
}

FakeCampaign *
fake_campaign_new (const char *tasks, guint max_replicas)
{
  static gint serial;
  g_autoptr (GError) error = NULL;
  FakeCampaign *c = g_new0 (FakeCampaign, 1);
  c->time.mono = 1000 * G_USEC_PER_SEC;
  c->time.real = 0;
  c->time.clock = (DatcClock) { fake_mono, fake_real, &c->time };
  c->dir = g_dir_make_tmp ("datc-planner-XXXXXX", &error);
  g_assert_no_error (error);
  c->bag = datc_bag_new ();
  g_assert_true (
      datc_bag_load_data (c->bag, "t.jsonl", tasks, strlen (tasks), DATC_TASKFILE_JSONL, &error));
  g_assert_no_error (error);
  DatcLedgerOptions lo = { .crash_limit = 3 };
  c->ledger = datc_ledger_open (c->dir, c->bag, "t.jsonl", "00", &lo, &error);
  g_assert_no_error (error);
  c->ctx = zmq_ctx_new ();
  /* Room for a thousand agents and more (bench-endgame), each a socket:
   * ZeroMQ's default is 1,023. */
  zmq_ctx_set (c->ctx, ZMQ_MAX_SOCKETS, 4096);
  c->endpoint = g_strdup_printf ("inproc://datc-planner-%d", g_atomic_int_add (&serial, 1));
  /* Agents never go silent here unless a test says so: the clock jumps
   * minutes at a time. */
  DatcDispatcherOptions o = {
    .endpoint = c->endpoint,
    .heartbeat_ms = 1000,
    .timeout_ms = 3600 * 1000,
    .max_replicas = max_replicas,
    .clock = &c->time.clock,
  };
  c->disp = datc_dispatcher_new (c->ctx, c->ledger, &o, &error);
  g_assert_no_error (error);
  c->agents = g_ptr_array_new_with_free_func (fake_agent_free);
  return c;
}

void
fake_campaign_free (FakeCampaign *c)
{
  if (c == NULL)
    return;
  g_ptr_array_unref (c->agents);
  datc_dispatcher_free (c->disp);
  datc_ledger_free (c->ledger);
  datc_bag_free (c->bag);
  zmq_ctx_term (c->ctx);
  g_autofree gchar *cmd = g_strdup_printf ("rm -rf '%s'", c->dir);
  g_assert_cmpint (system (cmd), ==, 0);
  g_free (c->dir);
  g_free (c->endpoint);
  g_free (c);
}

void
fake_campaign_advance (FakeCampaign *c, gint64 us)
{
  c->time.mono += us;
  c->time.real += us;
}

static void
agent_send (FakeAgent *a, const DatcMsg *m)
{
  g_autoptr (GByteArray) frame = g_byte_array_new ();
  datc_msg_encode (m, frame);
  g_assert_cmpint (zmq_send (a->sock, frame->data, frame->len, 0), ==, (int) frame->len);
}

/* What the master sent the agent, taken in. */
static void
agent_take (FakeAgent *a)
{
  for (;;)
    {
      zmq_msg_t msg;
      zmq_msg_init (&msg);
      if (zmq_msg_recv (&msg, a->sock, ZMQ_DONTWAIT) < 0)
        {
          zmq_msg_close (&msg);
          return;
        }
      g_autoptr (GError) error = NULL;
      g_autoptr (DatcMsg) m
          = datc_msg_decode (zmq_msg_data (&msg), zmq_msg_size (&msg), DATC_FRAME_MAX, &error);
      zmq_msg_close (&msg);
      g_assert_no_error (error);
      switch (m->type)
        {
        case DATC_MSG_WELCOME:
          a->welcomed = TRUE;
          break;
        case DATC_MSG_TASKS:
          for (guint i = 0; i < m->u.tasks.tasks->len; i++)
            {
              DatcTask *t = m->u.tasks.tasks->pdata[i];
              DatcTaskKey k = { t->id, t->attempt };
              g_array_append_val (a->tasks, k);
            }
          break;
        case DATC_MSG_CANCEL:
          g_array_append_vals (a->cancelled, m->u.keys->data, m->u.keys->len);
          break;
        case DATC_MSG_RETIRE:
          a->retired = TRUE;
          break;
        case DATC_MSG_BYE:
          a->told_bye = TRUE;
          break;
        case DATC_MSG_HEARTBEAT:
          a->heartbeats++;
          break;
        default:
          break;
        }
    }
}

void
fake_campaign_turn (FakeCampaign *c)
{
  g_autoptr (GError) error = NULL;
  g_assert_true (datc_dispatcher_receive (c->disp, &error));
  datc_dispatcher_release_idle (c->disp);
  g_assert_true (datc_dispatcher_flush (c->disp, TRUE, NULL, &error));
  g_assert_no_error (error);
  for (guint i = 0; i < c->agents->len; i++)
    agent_take (c->agents->pdata[i]);
}

void
fake_campaign_tick (FakeCampaign *c)
{
  g_autoptr (GError) error = NULL;
  g_assert_true (datc_dispatcher_receive (c->disp, &error));
  g_assert_no_error (error);
  datc_dispatcher_tick (c->disp);
}

FakeAgent *
fake_agent_hello (FakeCampaign *c, const char *id, const char *site, const char *proxy,
                  const char *host, guint32 slots, gint64 walltime_end_us)
{
  FakeAgent *a = g_new0 (FakeAgent, 1);
  int zero = 0;
  a->c = c;
  a->id = g_strdup (id);
  a->site = g_strdup (site);
  a->proxy = g_strdup (proxy);
  a->host = g_strdup (host);
  a->session = 1;
  a->tasks = g_array_new (FALSE, FALSE, sizeof (DatcTaskKey));
  a->cancelled = g_array_new (FALSE, FALSE, sizeof (DatcTaskKey));
  a->sock = zmq_socket (c->ctx, ZMQ_DEALER);
  zmq_setsockopt (a->sock, ZMQ_ROUTING_ID, id, strlen (id));
  zmq_setsockopt (a->sock, ZMQ_LINGER, &zero, sizeof zero);
  g_assert_cmpint (zmq_connect (a->sock, c->endpoint), ==, 0);
  g_ptr_array_add (c->agents, a);
  g_autoptr (DatcMsg) m = datc_msg_new (DATC_MSG_HELLO);
  m->u.hello.agent_id = g_strdup (id);
  m->u.hello.site = g_strdup (site);
  m->u.hello.proxy = g_strdup (proxy);
  m->u.hello.host = g_strdup (host);
  m->u.hello.pid = 4242;
  m->u.hello.slots = slots;
  m->u.hello.walltime_end_us = walltime_end_us;
  m->u.hello.session = a->session;
  agent_send (a, m);
  return a;
}

void
fake_agent_credit (FakeAgent *a, guint64 more)
{
  a->limit += more;
  DatcMsg m = { .type = DATC_MSG_CREDIT };
  m.u.credit.session = a->session;
  m.u.credit.limit = a->limit;
  agent_send (a, &m);
}

void
fake_agent_result (FakeAgent *a, guint64 id, guint32 attempt, gint32 exit_code, gint64 runtime_ms)
{
  g_autoptr (DatcMsg) m = datc_msg_new (DATC_MSG_RESULT);
  DatcResult *r = datc_result_new (id, attempt);
  r->status = DATC_STATUS_EXITED;
  r->exit_code = exit_code;
  r->finished_us = datc_clock_real (&a->c->time.clock);
  r->started_us = r->finished_us - runtime_ms * 1000;
  r->out = g_bytes_new (NULL, 0);
  r->err = g_bytes_new (NULL, 0);
  g_ptr_array_add (m->u.results.results, r);
  agent_send (a, m);
}

void
fake_agent_bye (FakeAgent *a)
{
  DatcMsg m = { .type = DATC_MSG_BYE };
  m.u.reason = (gchar *) "done";
  agent_send (a, &m);
}

guint
fake_agent_received (FakeAgent *a)
{
  return a->tasks->len;
}
