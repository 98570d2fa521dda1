/* agent.c: one DEALER socket to the master, one runner, one signalfd, one
 * zmq_poll loop.
 *
 * The agent asks for work with a cumulative credit (tasks it may have been
 * sent this session), so a CREDIT crossing a TASKS frame never yields more
 * than was asked.  A session starts with each HELLO; frames of an older
 * session are dropped and the master re-queues what the new HELLO does not
 * hold.  Results stay until the master acknowledges them (it does so only
 * once they are journaled), and are sent again after a silence or a new
 * session, so a master that restarts loses nothing.
 *
 * A task the agent holds but has not started may have been given to
 * another agent while this one was cut off or stopped (SIGSTOP, a
 * partition, a master restart): so it starts a task only while its lease
 * holds (a word from this master within a quarter of its timeout, which
 * the master keeps alive only for agents it hears from), and once the
 * lease lapses, only after a new HELLO is answered: the master cancels
 * what is no longer ours before it says WELCOME.
 *
 * Leaving: SIGTERM, SIGINT, SIGUSR1/2 (batch systems' advance warnings) or
 * the walltime's end drain the agent: no new task, running groups killed,
 * everything reported DRAINED so the master re-queues it at once, then BYE. */
#include "agent.h"

#include <errno.h>
#include <netdb.h>
#include <poll.h>
#include <signal.h>
#include <stddef.h>
#include <string.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>
#include <zmq.h>

#include "curve.h"
#include "datc-limits.h"
#include "message.h"
#include "reach.h"
#include "runner.h"

#define DATC_AGENT_ERROR (datc_agent_error_quark ())
static G_DEFINE_QUARK (datc-agent-error-quark, datc_agent_error)

        typedef enum {
          DATC_AGENT_ERROR_USAGE,   /* options that do not go together, a bad key */
          DATC_AGENT_ERROR_ADDRESS, /* the master's host or ipc path cannot be used */
          DATC_AGENT_ERROR_UNSAFE,  /* the ipc socket or its directory is another user's */
          DATC_AGENT_ERROR_ZMQ,     /* a libzmq call failed */
        } DatcAgentError;

#define RESULT_FRAME_BUDGET (DATC_FRAME_MAX / 2)

typedef struct {
  DatcTaskKey key; /* the table's key points here */
  DatcResult *result;
  gint64 sent_us; /* 0: never sent */
} Unacked;

typedef struct {
  const DatcAgentOptions *o;
  void *ctx, *sock;
  int zfd;           /* the socket's ZMQ_FD: its mailbox has news */
  gboolean zmq_used; /* the socket was used since it was last asked */
  int sfd;
  DatcReach *reach; /* says why the socket does not connect */
  DatcRunner *runner;
  gchar *agent_id, *host;

  guint32 session;
  gboolean welcomed;
  guint64 epoch;
  guint heartbeat_ms, timeout_ms;
  guint64 received, limit_sent;

  GQueue queue;           /* DatcTask* received, not started */
  GHashTable *unacked;    /* DatcTaskKey* -> Unacked* */
  GPtrArray *outbox;      /* DatcResult* (owned by unacked) to send */
  gint64 outbox_since_us; /* when the oldest of them joined (0: empty) */
  gint64 task_us;         /* recent run time of a task (moving average; 0: none yet) */
  gint64 asked_us;        /* when a slot began waiting on a CREDIT (0: none does) */
  gint64 rtt_us;          /* recent wait from such a CREDIT to its TASKS (0: none yet) */

  gint64 last_master_us; /* last frame from the master */
  gint64 hello_sent_us;
  gint64 next_hello_us;
  guint hello_backoff_ms;
  gint64 master_lost_us; /* when it went silent; 0 while it talks */
  gint64 last_heartbeat_us;
  gboolean draining, leaving;
  gboolean dismissed; /* the master said BYE: it has forgotten us */
  gint64 leave_deadline_us;
  int status;
  GByteArray *buf;
} Agent;

/* When the agent stops working: its walltime end less the time draining
 * takes (the kill grace, and a second to report), so that neither the
 * master (told in HELLO) nor the agent starts a task it expects to be
 * drained from. */
static gint64
work_end_us (const DatcAgentOptions *o)
{
  if (o->walltime_end_us <= 0)
    return 0;
  return o->walltime_end_us - (gint64) (o->kill_grace_ms + 1000) * 1000;
}

static void
unacked_free (gpointer p)
{
  Unacked *u = p;
  datc_result_free (u->result);
  g_free (u);
}

/* FALSE when the frame did not leave: no connection (ZMQ_IMMEDIATE) or
 * a full pipe. */
static gboolean
send_msg (Agent *a, const DatcMsg *m)
{
  g_byte_array_set_size (a->buf, 0);
  datc_msg_encode (m, a->buf);
  a->zmq_used = TRUE;
  if (zmq_send (a->sock, a->buf->data, a->buf->len, ZMQ_DONTWAIT) >= 0)
    return TRUE;
  if (errno != EAGAIN)
    g_debug ("send %s: %s", datc_msg_type_name (m->type), zmq_strerror (errno));
  return FALSE;
}

/* How long a word from the master lets the agent start tasks it holds. */
static gint64
lease_us (const Agent *a)
{
  return (gint64) a->timeout_ms * 1000 / 4;
}

static gboolean
lease_holds (const Agent *a, gint64 now)
{
  return a->welcomed && now - a->last_master_us < lease_us (a);
}

/* ZMQ_FD turns readable when the socket's mailbox has news, not when a
 * message waits, and any call on the socket (a send) may take that news
 * without reading the message.  So before sleeping the socket itself is
 * asked, but only if it was used since: then one poll() over plain fds does
 * what zmq_poll() does with two polls and two questions per turn. */
static gboolean
zmq_has_input (Agent *a)
{
  if (!a->zmq_used)
    return FALSE;
  a->zmq_used = FALSE;
  int events = 0;
  size_t len = sizeof events;
  if (zmq_getsockopt (a->sock, ZMQ_EVENTS, &events, &len) != 0)
    return TRUE; /* let receive() find out */
  return (events & ZMQ_POLLIN) != 0;
}

/* ---- HELLO and credit ----------------------------------------------- */

/* Starts a new session; nothing held is started until its WELCOME.
 * FALSE when the HELLO could not leave (not connected). */
static gboolean
send_hello (Agent *a)
{
  g_autoptr (DatcMsg) m = datc_msg_new (DATC_MSG_HELLO);
  DatcHello *h = &m->u.hello;
  a->session++;
  a->welcomed = FALSE;
  a->asked_us = 0;
  a->received = a->limit_sent = 0;
  h->agent_id = g_strdup (a->agent_id);
  h->site = g_strdup (a->o->site);
  h->proxy = g_strdup (a->o->proxy);
  h->host = g_strdup (a->host);
  h->pid = (guint32) getpid ();
  h->slots = a->o->slots;
  h->walltime_end_us = work_end_us (a->o);
  h->session = a->session;
  datc_runner_list (a->runner, h->held);
  for (GList *l = a->queue.head; l; l = l->next)
    {
      DatcTask *t = l->data;
      DatcTaskKey k = { t->id, t->attempt };
      g_array_append_val (h->held, k);
    }
  GHashTableIter it;
  gpointer v;
  g_hash_table_iter_init (&it, a->unacked);
  while (g_hash_table_iter_next (&it, NULL, &v) && h->held->len < DATC_BATCH_MAX)
    {
      Unacked *u = v;
      DatcTaskKey k = { u->result->id, u->result->attempt };
      g_array_append_val (h->held, k);
    }
  a->hello_sent_us = g_get_monotonic_time ();
  return send_msg (a, m);
}

/* Without --prefetch: enough tasks queued to keep every slot busy for a
 * cover period at the recent task length, so that a master that answers
 * late (a round trip to a distant site, a journal sync) leaves no slot
 * idle, and a short task costs a small fraction of a message each way.
 * The cover is 20 ms, or twice the round trip measured here when that is
 * longer (a relay, a distant site).  Nothing is asked ahead until a task
 * has run (its length is unknown: the first request must not take a whole
 * bag of long tasks that another agent, starting a moment later, could
 * run), nor when the slots would finish under a tenth of a task in a cover
 * period: a round trip then costs a slot a few per cent of a task at
 * most, while a task queued here is one that no other agent can take (at
 * the campaign's end, a slow site would hold tasks that fast sites, idle,
 * would run sooner).  At most PREFETCH_AUTO_MAX. */
#define PREFETCH_COVER_US (20 * 1000)
#define PREFETCH_AUTO_MAX 256

static guint64
prefetch (Agent *a)
{
  if (!a->o->prefetch_auto)
    return a->o->prefetch;
  if (a->task_us <= 0)
    return 0;
  guint64 work = (guint64) a->o->slots * (guint64) MAX (PREFETCH_COVER_US, 2 * a->rtt_us);
  guint64 task = (guint64) a->task_us;
  if (10 * work < task)
    return 0; /* under a tenth of a task */
  return MIN ((work + task - 1) / task, PREFETCH_AUTO_MAX);
}

/* A wait longer than this is a master that had nothing to send for a
 * while, not a slow link: not a sample. */
#define RTT_SAMPLE_MAX_US (250 * 1000)

/* TASKS arrived: how long a slot waited for them, if one did. */
static void
learn_round_trip (Agent *a, gint64 now)
{
  if (a->asked_us == 0)
    return;
  gint64 us = now - a->asked_us;
  a->asked_us = 0;
  if (us < 0 || us > RTT_SAMPLE_MAX_US)
    return;
  a->rtt_us = a->rtt_us > 0 ? (7 * a->rtt_us + us) / 8 : us;
}

/* A task that ran tells how long tasks take here now. */
static void
learn_task_length (Agent *a, const DatcResult *r)
{
  if (r->status != DATC_STATUS_EXITED && r->status != DATC_STATUS_SIGNALED
      && r->status != DATC_STATUS_TIMEOUT)
    return;
  gint64 us = MAX (r->finished_us - r->started_us, 1);
  a->task_us = a->task_us > 0 ? (7 * a->task_us + us) / 8 : us;
}

/* How many tasks one CREDIT asks for, at least. */
static guint64
credit_batch (Agent *a)
{
  return MAX (1u, prefetch (a) / 2);
}

/* Results wait to go out with the next credit, at most this long. */
#define RESULT_LINGER_US (20 * 1000)

/* The cumulative credit that keeps every slot and the prefetch full. */
static guint64
credit_limit (Agent *a)
{
  guint64 busy = datc_runner_running (a->runner) + a->queue.length;
  guint64 capacity = (guint64) a->o->slots + prefetch (a);
  guint64 want = capacity > busy ? capacity - busy : 0;
  return a->received + want;
}

/* Nothing queued here and nothing asked for that has not come: a slot
 * that frees now would idle. */
static gboolean
starving (Agent *a)
{
  return a->queue.length == 0 && a->limit_sent <= a->received;
}

/* A CREDIT is due on its own account: half a prefetch can be asked for,
 * or a slot would otherwise idle. */
static gboolean
credit_due (Agent *a)
{
  if (!a->welcomed || a->draining)
    return FALSE;
  guint64 limit = credit_limit (a);
  return limit > a->limit_sent && (starving (a) || limit - a->limit_sent >= credit_batch (a));
}

/* `along`: results leave in this turn, so whatever can be asked for goes
 * with them, however little: the master hears from us once, not twice. */
static void
send_credit (Agent *a, gboolean along)
{
  if (!a->welcomed || a->draining)
    return;
  guint64 limit = credit_limit (a);
  gint64 now = g_get_monotonic_time ();
  if (limit <= a->limit_sent)
    {
      /* A CREDIT can be lost: ZeroMQ drops what is queued on a connection
       * that breaks (a relay restarted, a link cut) and the master, still
       * heard from, never learns that we asked; the credit is cumulative,
       * so asking again for the same is safe.  When a slot has waited a
       * heartbeat for what it asked, ask again. */
      if (a->asked_us != 0 && a->queue.length == 0 && a->limit_sent > a->received
          && now - a->asked_us >= (gint64) a->heartbeat_ms * 1000)
        {
          DatcMsg again = { .type = DATC_MSG_CREDIT };
          again.u.credit.session = a->session;
          again.u.credit.limit = a->limit_sent;
          send_msg (a, &again);
          a->asked_us = now;
        }
      return;
    }
  /* Ask in batches, at a low-water mark: one CREDIT (and one TASKS back)
   * per half a prefetch, not per finished task.  Ask at once when a slot
   * would otherwise idle. */
  gboolean starved = starving (a);
  if (!starved && !along && limit - a->limit_sent < credit_batch (a))
    return;
  DatcMsg m = { .type = DATC_MSG_CREDIT };
  m.u.credit.session = a->session;
  m.u.credit.limit = limit;
  send_msg (a, &m);
  a->limit_sent = limit;
  if (starved && a->asked_us == 0)
    a->asked_us = now;
}

static void
send_heartbeat (Agent *a)
{
  DatcMsg m = { .type = DATC_MSG_HEARTBEAT };
  m.u.heartbeat.session = a->session;
  m.u.heartbeat.received = a->received;
  m.u.heartbeat.running = datc_runner_executing (a->runner);
  send_msg (a, &m);
  a->last_heartbeat_us = g_get_monotonic_time ();
}

/* ---- results -------------------------------------------------------- */

/* The wire refuses a RESULT whose message is over DATC_REASON_MAX or not
 * UTF-8: make it fit rather than lose the whole batch. */
static void
fit_message (DatcResult *r)
{
  if (r->message == NULL)
    return;
  gchar *valid = g_utf8_make_valid (r->message, -1);
  if (strlen (valid) > DATC_REASON_MAX - 4)
    {
      const gchar *end = g_utf8_find_prev_char (valid, valid + DATC_REASON_MAX - 4);
      gchar *cut = g_strndup (valid, (gsize) (end - valid));
      g_free (valid);
      valid = g_strconcat (cut, "…", NULL);
      g_free (cut);
    }
  g_free (r->message);
  r->message = valid;
}

static void
add_result (Agent *a, DatcResult *r)
{
  fit_message (r);
  Unacked *u = g_new0 (Unacked, 1);
  u->result = r;
  u->key.id = r->id;
  u->key.attempt = r->attempt;
  g_hash_table_replace (a->unacked, &u->key, u);
  g_ptr_array_add (a->outbox, r);
}

static DatcResult *
result_unrun (const DatcTask *t, DatcTaskStatus status, const char *message)
{
  DatcResult *r = datc_result_new (t->id, t->attempt);
  r->status = status;
  r->exit_code = 0;
  r->message = message ? g_strdup (message) : NULL;
  return r;
}

/* `along`: a CREDIT leaves in this turn; the results go with it.  TRUE
 * when results went. */
static gboolean
send_results (Agent *a, gboolean along)
{
  if (!a->welcomed)
    return FALSE;
  gint64 now = g_get_monotonic_time ();
  if (a->outbox->len == 0)
    return FALSE;
  /* Grouped like credit: a batch, or when they have waited long enough,
   * or when nothing else is running (no reason to wait), or when leaving. */
  if (a->outbox_since_us == 0)
    a->outbox_since_us = now;
  gboolean busy = datc_runner_running (a->runner) > 0 || a->queue.length > 0;
  if (!a->leaving && !along && busy && a->outbox->len < credit_batch (a)
      && now - a->outbox_since_us < RESULT_LINGER_US)
    return FALSE;
  a->outbox_since_us = 0;
  guint i = 0;
  while (i < a->outbox->len)
    {
      g_autoptr (DatcMsg) m = datc_msg_new (DATC_MSG_RESULT);
      gsize bytes = 0;
      while (i < a->outbox->len && m->u.results.results->len < DATC_BATCH_MAX)
        {
          DatcResult *r = a->outbox->pdata[i];
          gsize sz = 128 + (r->out ? g_bytes_get_size (r->out) : 0)
                     + (r->err ? g_bytes_get_size (r->err) : 0)
                     + (r->message ? strlen (r->message) : 0);
          if (bytes > 0 && bytes + sz > RESULT_FRAME_BUDGET)
            break;
          bytes += sz;
          /* The message borrows the results: they stay owned by unacked. */
          g_ptr_array_add (m->u.results.results, r);
          DatcTaskKey k = { r->id, r->attempt };
          Unacked *u = g_hash_table_lookup (a->unacked, &k);
          if (u != NULL)
            u->sent_us = now;
          i++;
        }
      g_ptr_array_set_free_func (m->u.results.results, NULL);
      send_msg (a, m);
    }
  g_ptr_array_set_size (a->outbox, 0);
  return TRUE;
}

/* Results not acknowledged after a while go out again (the master
 * de-duplicates). */
static void
resend_stale (Agent *a, gint64 older_than_us)
{
  GHashTableIter it;
  gpointer v;
  g_hash_table_iter_init (&it, a->unacked);
  while (g_hash_table_iter_next (&it, NULL, &v))
    {
      Unacked *u = v;
      if (u->sent_us <= older_than_us)
        g_ptr_array_add (a->outbox, u->result);
    }
}

/* ---- tasks ---------------------------------------------------------- */

static void
start_tasks (Agent *a)
{
  /* The runner's slot threads start what it holds ready only while the
   * lease holds too. */
  datc_runner_set_start_until (a->runner, a->welcomed ? a->last_master_us + lease_us (a) : 0);
  /* The lease is asked with a fresh clock for each task: a stop between
   * two of them is a gap like any other. */
  while (!a->draining && a->queue.length > 0
         && (a->o->exec_none || datc_runner_has_room (a->runner, a->o->slots))
         && lease_holds (a, g_get_monotonic_time ()))
    {
      g_autoptr (DatcTask) t = g_queue_pop_head (&a->queue);
      gint64 now = g_get_real_time ();
      if (a->o->walltime_end_us > 0 && t->spec.est_runtime_ms > 0
          && now + (gint64) t->spec.est_runtime_ms * 1000 > work_end_us (a->o))
        {
          add_result (a, result_unrun (t, DATC_STATUS_REFUSED,
                                       "expected runtime does not fit the walltime left"));
          continue;
        }
      if (a->o->exec_none)
        {
          DatcResult *r = datc_result_new (t->id, t->attempt);
          r->status = DATC_STATUS_EXITED;
          r->started_us = r->finished_us = now;
          add_result (a, r);
          continue;
        }
      g_autoptr (GError) error = NULL;
      if (!datc_runner_start (a->runner, t, &error))
        {
          /* The same attempt twice (a resent frame): it already runs. */
          if (g_error_matches (error, G_FILE_ERROR, G_FILE_ERROR_EXIST))
            continue;
          /* Out of fds or the like: give the task back, try later. */
          g_warning ("cannot start task %" G_GUINT64_FORMAT ": %s", t->id, error->message);
          add_result (a, result_unrun (t, DATC_STATUS_DRAINED, error->message));
          break;
        }
    }
}

static void
drain (Agent *a, const char *why, gboolean told)
{
  if (a->draining)
    return;
  /* Leaving because the master said so is the normal end: no noise. */
  if (told)
    g_debug ("agent %s: leaving: %s", a->agent_id, why);
  else
    g_message ("agent %s: draining: %s", a->agent_id, why);
  a->draining = TRUE;
  a->leaving = TRUE;
  a->leave_deadline_us = g_get_monotonic_time () + 5 * G_USEC_PER_SEC;
  datc_runner_cancel_all (a->runner, DATC_STATUS_DRAINED);
  DatcTask *t;
  while ((t = g_queue_pop_head (&a->queue)) != NULL)
    {
      add_result (a, result_unrun (t, DATC_STATUS_DRAINED, why));
      datc_task_free (t);
    }
}

/* ---- frames from the master ----------------------------------------- */

static void
on_frame (Agent *a, const guint8 *data, gsize len)
{
  g_autoptr (GError) error = NULL;
  g_autoptr (DatcMsg) m = datc_msg_decode (data, len, DATC_FRAME_MAX, &error);
  if (m == NULL)
    {
      g_warning ("master sent a bad frame: %s", error->message);
      return;
    }
  a->last_master_us = g_get_monotonic_time ();
  if (a->master_lost_us != 0)
    {
      g_message ("agent %s: the master is back", a->agent_id);
      a->master_lost_us = 0;
    }

  switch (m->type)
    {
    case DATC_MSG_WELCOME:
      if (m->u.welcome.session != a->session)
        break;
      a->welcomed = TRUE;
      a->epoch = m->u.welcome.epoch;
      a->heartbeat_ms = MAX (m->u.welcome.heartbeat_ms, 10u);
      a->timeout_ms = MAX (m->u.welcome.timeout_ms, a->heartbeat_ms * 2);
      a->hello_backoff_ms = 5;
      resend_stale (a, G_MAXINT64);
      if (a->draining)
        send_results (a, FALSE);
      break;
    case DATC_MSG_TASKS:
      if (m->u.tasks.session != a->session || !a->welcomed)
        break;
      learn_round_trip (a, g_get_monotonic_time ());
      a->received += m->u.tasks.tasks->len;
      for (guint i = 0; i < m->u.tasks.tasks->len; i++)
        {
          DatcTask *t = m->u.tasks.tasks->pdata[i];
          m->u.tasks.tasks->pdata[i] = NULL;
          if (a->draining)
            {
              add_result (a, result_unrun (t, DATC_STATUS_DRAINED, "agent is draining"));
              datc_task_free (t);
            }
          else
            g_queue_push_tail (&a->queue, t);
        }
      break;
    case DATC_MSG_ACK:
      for (guint i = 0; i < m->u.keys->len; i++)
        {
          DatcTaskKey *k = &g_array_index (m->u.keys, DatcTaskKey, i);
          g_hash_table_remove (a->unacked, k);
        }
      break;
    case DATC_MSG_CANCEL:
      for (guint i = 0; i < m->u.keys->len; i++)
        {
          DatcTaskKey *k = &g_array_index (m->u.keys, DatcTaskKey, i);
          if (!datc_runner_cancel (a->runner, k->id, k->attempt, DATC_STATUS_CANCELLED))
            for (GList *l = a->queue.head; l; l = l->next)
              {
                DatcTask *t = l->data;
                if (t->id == k->id && t->attempt == k->attempt)
                  {
                    g_queue_delete_link (&a->queue, l);
                    datc_task_free (t);
                    break;
                  }
              }
        }
      break;
    case DATC_MSG_HEARTBEAT:
      if (!a->welcomed)
        {
          /* Waiting for a WELCOME, and the master is there: say HELLO again
           * soon if ours got lost, but not once per heartbeat that waited
           * in a buffer while we were stopped or cut off. */
          if (a->last_master_us - a->hello_sent_us >= (gint64) a->heartbeat_ms * 1000)
            a->next_hello_us = MIN (a->next_hello_us, a->last_master_us);
        }
      else if (!a->dismissed && (m->u.heartbeat.rehello || m->u.heartbeat.epoch != a->epoch))
        {
          /* (Not once dismissed: a frame of ours that crossed the master's
           * BYE makes it ask a peer it no longer knows to say HELLO, and
           * answering would make the master take the leaving agent for a
           * new one, only to see it leave again.) */
          /* A master we have not introduced ourselves to (it restarted),
           * or one that asks us to reconcile. */
          g_debug ("agent %s: saying HELLO again", a->agent_id);
          send_hello (a);
          a->hello_backoff_ms = 5;
          a->next_hello_us = a->last_master_us + a->hello_backoff_ms * 1000;
        }
      break;
    case DATC_MSG_RETIRE:
      /* The master sends no RETIRE today: kept so it can, without a new agent. */
      g_message ("agent %s: master asks it to retire: %s", a->agent_id, m->u.reason);
      a->draining = TRUE;
      a->leaving = TRUE;
      a->leave_deadline_us = G_MAXINT64;
      datc_runner_unstage (a->runner, DATC_STATUS_DRAINED);
      {
        DatcTask *t;
        while ((t = g_queue_pop_head (&a->queue)) != NULL)
          {
            add_result (a, result_unrun (t, DATC_STATUS_DRAINED, "drained"));
            datc_task_free (t);
          }
      }
      break;
    case DATC_MSG_BYE:
      g_debug ("agent %s: master says BYE: %s", a->agent_id, m->u.reason);
      /* A BYE before any master ever said WELCOME is the master refusing
       * this agent (the key it holds is another site's, or no longer
       * accepted): say why in the proxy's log, and fail. */
      if (a->epoch == 0)
        {
          g_printerr ("datc-agent on %s: the master refused this agent: %s\n", a->host,
                      m->u.reason);
          a->status = 3;
        }
      a->dismissed = TRUE;
      drain (a, m->u.reason, TRUE);
      /* The master has forgotten us: nothing to wait for. */
      a->leave_deadline_us = g_get_monotonic_time ();
      break;
    default:
      g_warning ("master sent %s, which only agents send", datc_msg_type_name (m->type));
    }
}

/* Reads until the socket says EAGAIN (which also empties its mailbox, so
 * ZMQ_FD will signal the next news), or a turn's worth of frames. */
static void
receive (Agent *a)
{
  for (guint n = 0; n < 1024; n++)
    {
      zmq_msg_t msg;
      zmq_msg_init (&msg);
      if (zmq_msg_recv (&msg, a->sock, ZMQ_DONTWAIT) < 0)
        {
          zmq_msg_close (&msg);
          return;
        }
      on_frame (a, zmq_msg_data (&msg), zmq_msg_size (&msg));
      zmq_msg_close (&msg);
    }
  /* Stopped early: more may wait behind a quiet fd. */
  a->zmq_used = TRUE;
}

/* ---- setup ---------------------------------------------------------- */

static gchar *
make_agent_id (const char *host)
{
  GString *s = g_string_new (NULL);
  for (const char *p = host; *p && s->len < 64; p++)
    g_string_append_c (s, g_ascii_isalnum (*p) || *p == '-' || *p == '.' ? *p : '_');
  if (s->len == 0 || s->str[0] == '.')
    g_string_prepend (s, "host");
  g_string_append_printf (s, "-%d-%08x", (int) getpid (), g_random_int ());
  return g_string_free (s, FALSE);
}

/* libzmq resolves a tcp:// host in its I/O thread and, when the name does
 * not exist, retries in silence: the agent would sit in its allocation
 * until the reconnect timeout.  A name that does not exist is refused
 * here, naming it; a lookup that fails only at the moment (no DNS answer)
 * is left to libzmq's retries. */
static gboolean
check_endpoint_host (const char *endpoint, GError **error)
{
  if (!g_str_has_prefix (endpoint, "tcp://"))
    return TRUE;
  const char *host = endpoint + strlen ("tcp://");
  const char *semi = strchr (host, ';'); /* tcp://SOURCE;HOST:PORT */
  if (semi != NULL)
    host = semi + 1;
  const char *colon = strrchr (host, ':');
  if (host[0] == '[' || colon == NULL || colon == host)
    return TRUE; /* an IPv6 literal, or zmq_connect will say what is wrong */
  g_autofree gchar *name = g_strndup (host, (gsize) (colon - host));
  struct addrinfo hints = { .ai_socktype = SOCK_STREAM };
  struct addrinfo *res = NULL;
  int rc = getaddrinfo (name, NULL, &hints, &res);
  if (res != NULL)
    freeaddrinfo (res);
  if (rc == EAI_NONAME || rc == EAI_NODATA)
    {
      g_set_error (
          error, DATC_AGENT_ERROR, DATC_AGENT_ERROR_ADDRESS,
          "%s: the master's host \"%s\" is not known here (%s); give the "
          "master's address instead (advertise = ADDRESS under [master] in the sites file)",
          endpoint, name, gai_strerror (rc));
      return FALSE;
    }
  if (rc != 0)
    g_message ("%s: looking up \"%s\": %s; retrying", endpoint, name, gai_strerror (rc));
  return TRUE;
}

/* An ipc:// master is a unix socket, which has no CURVE: whoever is bound
 * at that path gets our HELLO and hands us commands to run.  So before
 * ZeroMQ connects, a plain connect asks the kernel who listens there
 * (SO_PEERCRED): it must be our own user.  No one there yet is fine,
 * ZeroMQ retries; what keeps a later connect from reaching someone else
 * is the directory, which must be ours and writable by no one else (the
 * master checks the same before it binds). */
static gboolean
check_ipc_peer (const char *endpoint, GError **error)
{
  if (!g_str_has_prefix (endpoint, "ipc://"))
    return TRUE;
  const char *path = endpoint + strlen ("ipc://");
  struct sockaddr_un sun = { .sun_family = AF_UNIX };
  if (path[0] == '\0' || strlen (path) >= sizeof sun.sun_path)
    return TRUE; /* zmq_connect says what is wrong */
  memcpy (sun.sun_path, path, strlen (path) + 1);
  socklen_t len = sizeof sun;
  if (path[0] == '@')
    {
      /* Abstract: no directory, anyone may bind the name. */
      sun.sun_path[0] = '\0';
      len = (socklen_t) (offsetof (struct sockaddr_un, sun_path) + strlen (path));
    }
  else
    {
      g_autofree gchar *dir = g_path_get_dirname (path);
      struct stat st;
      if (lstat (dir, &st) != 0)
        {
          g_set_error (error, DATC_AGENT_ERROR, DATC_AGENT_ERROR_ADDRESS, "%s: %s: %s", endpoint,
                       dir, g_strerror (errno));
          return FALSE;
        }
      if (!S_ISDIR (st.st_mode) || st.st_uid != geteuid () || (st.st_mode & 022) != 0)
        {
          g_set_error (error, DATC_AGENT_ERROR, DATC_AGENT_ERROR_UNSAFE,
                       "%s: the directory %s (uid %u, mode %04o) is not this agent's own "
                       "(uid %u, writable by no one else), so another user could put a "
                       "socket there; refusing to connect",
                       endpoint, dir, (unsigned) st.st_uid, (unsigned) (st.st_mode & 07777),
                       (unsigned) geteuid ());
          return FALSE;
        }
    }
  int fd = socket (AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0)
    {
      g_set_error (error, DATC_AGENT_ERROR, DATC_AGENT_ERROR_ADDRESS, "%s: socket: %s", endpoint,
                   g_strerror (errno));
      return FALSE;
    }
  /* A full backlog makes connect wait: not for ever. */
  struct timeval tv = { .tv_sec = 10 };
  setsockopt (fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
  struct ucred cred;
  socklen_t cred_len = sizeof cred;
  gboolean ok = TRUE;
  if (connect (fd, (struct sockaddr *) &sun, len) != 0)
    {
      if (errno != ENOENT && errno != ECONNREFUSED)
        {
          g_set_error (error, DATC_AGENT_ERROR, DATC_AGENT_ERROR_ADDRESS, "%s: %s", endpoint,
                       g_strerror (errno));
          ok = FALSE;
        }
    }
  else if (getsockopt (fd, SOL_SOCKET, SO_PEERCRED, &cred, &cred_len) != 0)
    {
      g_set_error (error, DATC_AGENT_ERROR, DATC_AGENT_ERROR_UNSAFE, "%s: SO_PEERCRED: %s",
                   endpoint, g_strerror (errno));
      ok = FALSE;
    }
  else if (cred.uid != geteuid ())
    {
      g_set_error (error, DATC_AGENT_ERROR, DATC_AGENT_ERROR_UNSAFE,
                   "%s: the socket there is held by uid %u (pid %d), not by this agent's uid "
                   "%u: not our master; refusing to connect",
                   endpoint, (unsigned) cred.uid, (int) cred.pid, (unsigned) geteuid ());
      ok = FALSE;
    }
  close (fd);
  return ok;
}

static gboolean
open_socket (Agent *a, GError **error)
{
  int one = 1, zero = 0;
  int64_t maxmsg = DATC_FRAME_MAX;
  a->sock = zmq_socket (a->ctx, ZMQ_DEALER);
  zmq_setsockopt (a->sock, ZMQ_ROUTING_ID, a->agent_id, strlen (a->agent_id));
  zmq_setsockopt (a->sock, ZMQ_MAXMSGSIZE, &maxmsg, sizeof maxmsg);
  zmq_setsockopt (a->sock, ZMQ_IMMEDIATE, &one, sizeof one);
  zmq_setsockopt (a->sock, ZMQ_LINGER, &zero, sizeof zero);
  if (a->o->server_key != NULL)
    {
      DatcCurveKeypair kp;
      if (!datc_curve_z85_valid (a->o->server_key))
        {
          g_set_error (error, DATC_AGENT_ERROR, DATC_AGENT_ERROR_USAGE,
                       "--server-key: not a Z85 CURVE public key");
          return FALSE;
        }
      if (a->o->key_file == NULL)
        {
          g_set_error (error, DATC_AGENT_ERROR, DATC_AGENT_ERROR_USAGE,
                       "--server-key needs --key-file");
          return FALSE;
        }
      if (!datc_curve_keypair_load (&kp, a->o->key_file, error))
        return FALSE;
      zmq_setsockopt (a->sock, ZMQ_CURVE_SERVERKEY, a->o->server_key, DATC_CURVE_Z85_LEN);
      zmq_setsockopt (a->sock, ZMQ_CURVE_PUBLICKEY, kp.public_z85, DATC_CURVE_Z85_LEN);
      zmq_setsockopt (a->sock, ZMQ_CURVE_SECRETKEY, kp.secret_z85, DATC_CURVE_Z85_LEN);
      datc_curve_keypair_clear (&kp);
    }
  else if (g_str_has_prefix (a->o->connect, "tcp://"))
    {
      g_set_error (error, DATC_AGENT_ERROR, DATC_AGENT_ERROR_USAGE,
                   "%s: a tcp endpoint needs --server-key and --key-file", a->o->connect);
      return FALSE;
    }
  if (!check_endpoint_host (a->o->connect, error) || !check_ipc_peer (a->o->connect, error))
    return FALSE;
  /* Before the connect, so that its first failure is seen. */
  a->reach = datc_reach_new (a->ctx, a->sock, a->o->connect, a->host, error);
  if (a->reach == NULL)
    return FALSE;
  if (zmq_connect (a->sock, a->o->connect) != 0)
    {
      g_set_error (error, DATC_AGENT_ERROR, DATC_AGENT_ERROR_ZMQ, "cannot connect to %s: %s",
                   a->o->connect, zmq_strerror (errno));
      return FALSE;
    }
  (void) zero;
  return TRUE;
}

/* Signals to a fd; blocked before ZeroMQ starts its threads.  The
 * runner's children get an empty mask and default dispositions. */
static int
signals_fd (void)
{
  sigset_t mask;

  /* A proxy started from a background shell inherits SIGINT and SIGQUIT
   * ignored, and an ignored signal never reaches a signalfd. */
  signal (SIGINT, SIG_DFL);
  signal (SIGTERM, SIG_DFL);
  signal (SIGHUP, SIG_DFL);
  signal (SIGUSR1, SIG_DFL);
  signal (SIGUSR2, SIG_DFL);
  sigemptyset (&mask);
  sigaddset (&mask, SIGTERM);
  sigaddset (&mask, SIGINT);
  sigaddset (&mask, SIGUSR1);
  sigaddset (&mask, SIGUSR2);
  sigaddset (&mask, SIGHUP);
  sigprocmask (SIG_BLOCK, &mask, NULL);
  signal (SIGPIPE, SIG_IGN);
  return signalfd (-1, &mask, SFD_CLOEXEC | SFD_NONBLOCK);
}

/* Files the agent keeps open beside its tasks': ZeroMQ's sockets and
 * mailboxes, epoll, signalfd, /dev/null, the key files while reading. */
#define AGENT_OWN_FDS 64

/* The slots the open-file limit allows (it is raised as far as the hard
 * limit lets): a many-core node under a 1024-file soft limit would
 * otherwise fail spawns with EMFILE once ~200 tasks run. */
static guint
slots_that_fit (DatcRunner *runner, guint slots)
{
  guint fit = datc_runner_reserve_fds (runner, slots, AGENT_OWN_FDS);
  if (fit >= slots)
    return slots;
  g_printerr ("datc-agent: %u slots need %u open files, but the hard limit "
              "(ulimit -Hn) allows %u tasks at once: using %u slots\n",
              slots, slots * DATC_RUNNER_FDS_PER_TASK + AGENT_OWN_FDS, fit, MAX (fit, 1u));
  return MAX (fit, 1u);
}

/* With slot threads the runner holds up to DATC_RUNNER_STAGE_DEPTH tasks
 * per slot, the ready ones with their pipes open: as many as the fds
 * allow, at least one per slot. */
static guint
held_that_fit (DatcRunner *runner, guint slots)
{
  guint want = slots * DATC_RUNNER_STAGE_DEPTH;
  return CLAMP (datc_runner_reserve_fds (runner, want, AGENT_OWN_FDS), slots, want);
}

/* How long the loop may sleep: until the next HELLO or heartbeat, the
 * leave deadline, the results' linger, the walltime check (every second),
 * the reachability probe or the runner's next deadline. */
static long
poll_timeout_ms (Agent *a, gint64 now)
{
  gint64 wake = now + (gint64) a->heartbeat_ms * 1000;
  if (!a->welcomed)
    wake = MIN (wake, a->next_hello_us);
  else
    wake = MIN (wake, a->last_heartbeat_us + (gint64) a->heartbeat_ms * 1000);
  if (a->leaving)
    wake = MIN (wake, a->leave_deadline_us);
  if (a->outbox->len > 0)
    wake = MIN (wake, (a->outbox_since_us ? a->outbox_since_us : now) + RESULT_LINGER_US);
  if (a->o->walltime_end_us > 0 && !a->draining)
    wake = MIN (wake, now + 1000 * 1000);
  wake = MIN (wake, datc_reach_next_us (a->reach));
  int rt = datc_runner_next_timeout_ms (a->runner);
  /* Rounded up: rounded down, the last part of a millisecond before
   * each deadline would be spent polling with a zero timeout. */
  long timeout = (long) ((wake - now + 999) / 1000);
  if (rt >= 0 && rt < timeout)
    timeout = rt;
  return MAX (timeout, 0);
}

/* Not welcomed: a master silent too long is lost; say HELLO until it
 * answers, at least every half timeout, so that it re-attaches our tasks
 * within its window after a restart.  FALSE when it stayed away past
 * --reconnect-timeout: the agent gives up. */
static gboolean
seek_master (Agent *a, gint64 now)
{
  if (a->epoch != 0 && a->master_lost_us == 0
      && now - a->last_master_us > (gint64) a->timeout_ms * 1000)
    {
      g_message ("agent %s: no word from the master for %u ms; reconnecting", a->agent_id,
                 a->timeout_ms);
      a->master_lost_us = now;
    }
  if (now >= a->next_hello_us)
    {
      guint cap = a->master_lost_us ? MIN (30000u, MAX (a->timeout_ms / 2, 1000u)) : 1000u;
      /* Not connected (it did not leave): it goes out soon after the
       * connection is back. */
      guint next = send_hello (a) ? a->hello_backoff_ms : MIN (a->hello_backoff_ms, 100u);
      a->next_hello_us = now + (gint64) next * 1000;
      a->hello_backoff_ms = MIN (a->hello_backoff_ms * 2, cap);
    }
  if (now - a->last_master_us > (gint64) a->o->reconnect_timeout_s * G_USEC_PER_SEC)
    {
      g_printerr ("datc-agent %s: the master at %s did not answer for %u s; giving up\n",
                  a->agent_id, a->o->connect, a->o->reconnect_timeout_s);
      datc_runner_cancel_all (a->runner, DATC_STATUS_DRAINED);
      a->status = 3;
      return FALSE;
    }
  return TRUE;
}

/* Leaving: once nothing runs or waits and every result is acknowledged,
 * or at the leave deadline (what still runs is then given back DRAINED),
 * says BYE.  TRUE when the agent is done. */
static gboolean
leave_now (Agent *a, gint64 now)
{
  gboolean quiet = datc_runner_running (a->runner) == 0 && a->queue.length == 0;
  if (!(quiet && g_hash_table_size (a->unacked) == 0) && now < a->leave_deadline_us)
    return FALSE;
  if (!quiet)
    datc_runner_cancel_all (a->runner, DATC_STATUS_DRAINED);
  DatcMsg bye = { .type = DATC_MSG_BYE };
  bye.u.reason = (gchar *) "leaving";
  if (a->welcomed)
    send_msg (a, &bye);
  return TRUE;
}

/* Nothing of ours may outlive us: kill what still runs and reap it
 * (at most 200 rounds of 50 ms). */
static void
kill_and_reap_all (DatcRunner *runner, GPtrArray *finished)
{
  datc_runner_cancel_all (runner, DATC_STATUS_DRAINED);
  for (int i = 0; i < 200 && datc_runner_running (runner) > 0; i++)
    {
      struct pollfd pfd = { datc_runner_get_fd (runner), POLLIN, 0 };
      int rt = datc_runner_next_timeout_ms (runner);
      poll (&pfd, 1, rt < 0 || rt > 50 ? 50 : rt);
      datc_runner_dispatch (runner, finished);
      for (guint j = 0; j < finished->len; j++)
        datc_result_free (finished->pdata[j]);
      g_ptr_array_set_size (finished, 0);
    }
}

/* A scheduler's node name as the agent may report it: a plain host name
 * (letters, digits, '.', '-', '_'), at most 255 bytes. */
static gboolean
node_name_ok (const char *node)
{
  if (node == NULL || node[0] == '\0' || strlen (node) > 255)
    return FALSE;
  for (const char *c = node; *c; c++)
    if (!g_ascii_isalnum (*c) && *c != '.' && *c != '-' && *c != '_')
      return FALSE;
  return TRUE;
}

int
datc_agent_run (const DatcAgentOptions *o)
{
  g_autoptr (GError) error = NULL;
  Agent a = { 0 };
  DatcAgentOptions opts = *o; /* slots may shrink to the fds we can have */

  a.o = &opts;
  a.status = 0;
  a.heartbeat_ms = 1000;
  a.timeout_ms = 30000;
  a.hello_backoff_ms = 5;
  a.buf = g_byte_array_new ();
  a.unacked = g_hash_table_new_full (datc_task_key_hash, datc_task_key_equal, NULL, unacked_free);
  a.outbox = g_ptr_array_new ();
  g_queue_init (&a.queue);
  /* The node's name as its scheduler knows it where the job says so:
   * Slurm's node names (what --exclude takes) may differ from the host
   * name (a short name against a full one, NodeHostname). */
  const char *node = g_getenv ("SLURMD_NODENAME");
  a.host = g_strdup (node_name_ok (node) ? node : g_get_host_name ());
  a.agent_id = make_agent_id (a.host);

  a.sfd = signals_fd ();
  datc_runner_ask_short_slice ();

  a.runner = datc_runner_new (o->output_limit, o->kill_grace_ms, &error);
  if (a.runner == NULL)
    {
      g_printerr ("datc-agent: %s\n", error->message);
      return 3;
    }
  if (!opts.exec_none)
    opts.slots = slots_that_fit (a.runner, opts.slots);
  if (!opts.exec_none && g_getenv ("DATC_NO_SLOT_THREADS") == NULL
      && !datc_runner_use_slot_threads (a.runner, opts.slots, held_that_fit (a.runner, opts.slots),
                                        o->walltime_end_us > 0 ? work_end_us (o) : 0, &error))
    {
      g_printerr ("datc-agent: %s\n", error->message);
      return 3;
    }
  a.ctx = zmq_ctx_new ();
  size_t zfd_len = sizeof a.zfd;
  if (!open_socket (&a, &error) || zmq_getsockopt (a.sock, ZMQ_FD, &a.zfd, &zfd_len) != 0)
    {
      if (error == NULL)
        g_set_error (&error, DATC_AGENT_ERROR, DATC_AGENT_ERROR_ZMQ, "ZMQ_FD: %s",
                     zmq_strerror (errno));
      g_printerr ("datc-agent: %s\n", error->message);
      datc_reach_free (a.reach);
      if (a.sock)
        zmq_close (a.sock);
      zmq_ctx_term (a.ctx);
      return 3;
    }

  g_autoptr (GPtrArray) finished = g_ptr_array_new ();
  gint64 started = g_get_monotonic_time ();
  a.last_master_us = started;
  send_hello (&a);
  a.next_hello_us = started + a.hello_backoff_ms * 1000;

  for (;;)
    {
      gboolean input = zmq_has_input (&a);
      long timeout = input ? 0 : poll_timeout_ms (&a, g_get_monotonic_time ());
      struct pollfd fds[3 + DATC_REACH_FDS] = {
        { a.zfd, POLLIN, 0 },
        { datc_runner_get_fd (a.runner), POLLIN, 0 },
        { a.sfd, POLLIN, 0 },
      };
      guint nfds = 3 + datc_reach_pollfds (a.reach, fds + 3);
      if (poll (fds, nfds, (int) MIN (timeout, (long) G_MAXINT)) < 0 && errno != EINTR)
        {
          g_printerr ("datc-agent: poll: %s\n", g_strerror (errno));
          a.status = 3;
          break;
        }
      gint64 now = g_get_monotonic_time ();
      gboolean reach_news = now >= datc_reach_next_us (a.reach);
      for (guint i = 3; i < nfds; i++)
        reach_news = reach_news || fds[i].revents != 0;
      if (reach_news)
        datc_reach_dispatch (a.reach, now);

      /* Before reading: frames that waited in a buffer while we were
       * stopped or cut off must not renew a lease that lapsed. */
      if (a.welcomed && now - a.last_master_us >= lease_us (&a))
        {
          g_message ("agent %s: no word from the master for %" G_GINT64_FORMAT " ms: starting "
                     "nothing more until it confirms what we hold",
                     a.agent_id, (now - a.last_master_us) / 1000);
          a.hello_backoff_ms = 100;
          send_hello (&a);
          a.next_hello_us = now + a.hello_backoff_ms * 1000;
        }

      struct signalfd_siginfo si;
      if (fds[2].revents != 0)
        while (read (a.sfd, &si, sizeof si) == sizeof si)
          drain (&a, strsignal ((int) si.ssi_signo), FALSE);

      if (o->walltime_end_us > 0 && !a.draining && g_get_real_time () >= work_end_us (o))
        drain (&a, "walltime is ending", FALSE);

      if (input || fds[0].revents != 0)
        receive (&a);
      /* The runner has news when its fd says so, or a deadline of its is due. */
      if (fds[1].revents != 0 || datc_runner_next_timeout_ms (a.runner) == 0)
        datc_runner_dispatch (a.runner, finished);
      for (guint i = 0; i < finished->len; i++)
        {
          learn_task_length (&a, finished->pdata[i]);
          add_result (&a, finished->pdata[i]);
        }
      g_ptr_array_set_size (finished, 0);
      start_tasks (&a);

      if (!a.welcomed && !seek_master (&a, now))
        break;

      if (a.welcomed)
        {
          if (now - a.last_heartbeat_us >= (gint64) a.heartbeat_ms * 1000)
            {
              send_heartbeat (&a);
              resend_stale (&a, now - 2 * (gint64) a.heartbeat_ms * 1000 - 1000000);
            }
          /* Results and credit leave together when either is due: the
           * master then wakes once for both. */
          gboolean went = send_results (&a, credit_due (&a));
          send_credit (&a, went);
        }

      if (a.leaving && leave_now (&a, now))
        break;
    }

  kill_and_reap_all (a.runner, finished);

  datc_reach_free (a.reach);
  zmq_close (a.sock);
  zmq_ctx_term (a.ctx);
  datc_runner_free (a.runner);
  g_queue_clear_full (&a.queue, (GDestroyNotify) datc_task_free);
  g_hash_table_unref (a.unacked);
  g_ptr_array_unref (a.outbox);
  g_byte_array_unref (a.buf);
  g_free (a.agent_id);
  g_free (a.host);
  close (a.sfd);
  return a.status;
}
