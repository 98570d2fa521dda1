/* dispatcher.c: agents, credit, heartbeats and authentication on the
 * master's ROUTER socket.
 *
 * Shape of one loop turn (driven by run.c): receive() decodes every frame
 * waiting and applies it to the ledger, queueing replies; flush() turns
 * credit into TASKS (journaled), commits the ledger once for everything,
 * and only then sends the queued frames.  So an ACK never precedes the
 * durable result it acknowledges, and a restarted master never forgets a
 * task it handed out. */
#include "dispatcher.h"

#include <errno.h>
#include <string.h>
#include <sys/stat.h>
#include <zmq.h>

#include "curve.h"
#include "datc-limits.h"
#include "driver.h"
#include "jsonout.h"
#include "message.h"

#define ZAP_ENDPOINT "inproc://zeromq.zap.01"

G_DEFINE_QUARK (datc-dispatcher-error-quark, datc_dispatcher_error)

typedef struct {
  GBytes *rid; /* routing id (== agent id bytes) */
  gchar *agent_id, *site, *proxy, *host;
  guint32 idx; /* ledger index */
  guint32 session;
  guint32 slots;
  guint64 limit, sent;      /* credit window of this session */
  guint32 executing;        /* of its tasks (held(), the ledger's count), started: its last
                             * HEARTBEAT's `running` */
  gboolean heard_executing; /* a HEARTBEAT of this session said so */
  guint64 done;             /* results recorded from it */
  gint64 walltime_end_us;
  gint64 connected_us; /* first HELLO (real time) */
  guint partition;     /* its site's share of a split bag (G_MAXUINT: none) */
  guint64 handed;      /* tasks handed to it, over its life (direct mode caps it) */
  gboolean starved;    /* at its last request nothing queued fitted its time left */
  gint64 last_seen_us, last_heartbeat_us, last_tasks_us;
  GArray *acks;    /* DatcTaskKey to acknowledge after commit */
  GArray *cancels; /* DatcTaskKey to cancel after commit */
  gboolean welcome, rehello, bye;
  gboolean retired; /* sent RETIRE: its node failed tasks fast; no more work */
  /* Where it is in the dispatcher's per-event lists (see `by_seen`), so
   * that no turn, tick or heartbeat walks every agent. */
  GList seen_link; /* in by_seen: every agent, least recently heard first */
  GList beat_link; /* in by_beat while `beating` */
  GList want_link; /* in wanting while `wanting` */
  gboolean beating, wanting, touched, leaving, to_check;
} Agent;

/* A node whose tasks fail this many times in a row, each within
 * FAST_FAILURE_US of its start, is taken for broken (a missing library, a
 * full disk, a bad GPU) rather than the tasks: its agents are retired and
 * the site's later proxies exclude it. */
#define FAST_FAILURES_MAX 3
#define FAST_FAILURE_US G_USEC_PER_SEC

typedef struct {
  GBytes *rid;
  GBytes *frame;
} Outgoing;

/* ACKs may only leave after the sync; a few hundred of them waiting is
 * reason enough to sync early. */
#define SYNC_BATCH 256
/* A turn reads agents' messages for at most this long (checked every
 * RECEIVE_CHECK messages, where the interlude runs too, as it does every
 * RECEIVE_CHECK agents served in the hand-out), so that the
 * ticks and the flush come round often: with 1,000 agents a turn that
 * read all 4,096 messages it may take held `datc status` for 300 ms and
 * more. */
#define RECEIVE_BUDGET_US (10 * 1000)
#define RECEIVE_CHECK 16

/* How long the end game's list of tasks worth a copy stands. */
#define REPLICA_RECOMPUTE_US (100 * 1000)

/* Peers dropped for a bad frame are remembered so they get nothing more;
 * a key holder that keeps making new routing ids must not grow this
 * without bound, so past this many it starts afresh (a forgotten peer
 * only gets to send one more bad frame). */
#define BANNED_MAX 4096

/* An issued agent key, as ZAP and the frame checks see it. */
typedef struct {
  gchar *site; /* NULL: agents started by hand */
  gboolean revoked;
} KeyEntry;

/* The ZAP user id of the key for agents started by hand: not a site name
 * (those are letters, digits, '-', '_' and '.'), so no site's agents can
 * be taken for hand-started ones or the other way round. */
#define HAND_USER_ID "*"

struct DatcDispatcher {
  void *router, *zap;
  DatcDispatcherInterlude interlude; /* datc_dispatcher_set_interlude */
  gpointer interlude_data;
  DatcLedger *ledger;
  gchar *endpoint;
  gboolean curve;
  gchar server_public[DATC_CURVE_Z85_LEN + 1];
  GHashTable *allowed;   /* 32-byte public keys (as GBytes) -> KeyEntry* */
  GHashTable *site_keys; /* site -> its KeyEntry* (in allowed) */
  guint heartbeat_ms, timeout_ms;
  guint64 epoch;
  GHashTable *agents;      /* rid -> Agent* */
  GHashTable *banned;      /* rid -> itself, at most BANNED_MAX */
  gint64 settle_until_us;  /* after a restart: fresh work waits for the last master's agents */
  GArray *out;             /* Outgoing, sent at the next flush */
  GArray *after_sync;      /* Outgoing, sent once the ledger is committed */
  gint64 pending_since_us; /* when uncommitted records first appeared (0: none) */
  GByteArray *scratch;
  GArray *picked;      /* DatcTaskKey: what the ledger handed out, to encode */
  GPtrArray *finished; /* reused */
  gchar *bye_reason;
  DatcTrace *trace;
  const DatcClock *clock;    /* NULL: the system's */
  GHashTable *site_done;     /* site -> tasks finished there (guint64 in a pointer) */
  GStrv split_sites;         /* static mode: partition k is split_sites[k]'s share */
  gboolean one_task;         /* direct mode: an agent runs one task, then leaves */
  GHashTable *keep_idle;     /* sites whose idle agents stay (datc_dispatcher_keep_idle) */
  gboolean holding_idle;     /* the end game keeps idle agents for copies (release_idle) */
  GHashTable *fast_failures; /* "site\thost" -> failures in a row under FAST_FAILURE_US */
  GHashTable *site_hosts;    /* site -> set of the hosts its agents said HELLO from */
  GHashTable *excluded;      /* site -> GPtrArray of hosts excluded (NULL-ended) */
  guint max_replicas;        /* live copies a task may have at the end game; 1: none */
  GArray *candidates;        /* DatcReplicaCandidate, as of candidates_us */
  GByteArray *taken;         /* one per candidate: copied since (replicate_end_game) */
  guint candidates_head;     /* every candidate before it is taken */
  guint candidates_left;     /* candidates not taken */
  gint64 candidates_us;      /* when they were computed (0: to do) */
  /* A thousand agents cost nothing per turn that they do not cause: the
   * lists below hold only the agents an event concerns, each kept in
   * order by the event itself, so receive, tick and flush touch those and
   * no others.  by_seen is ordered by last_seen_us (an agent heard from
   * moves to its tail): the lost are at its head.  by_beat is ordered by
   * last_heartbeat_us, after a prefix of agents already due (one heard
   * from again after a silence past its lease goes to the head). */
  GQueue by_seen, by_beat;
  GQueue wanting;       /* agents with credit left (limit > sent) */
  GPtrArray *touched;   /* agents with ACKs or CANCELs to send */
  GPtrArray *to_check;  /* agents touched, or that said HELLO, since the last release_idle:
                         * the only ones whose load can have dropped to nothing */
  guint64 queued_seen;  /* tasks queued at the last release_idle */
  gboolean rescan_idle; /* release_idle looks at every agent, not only those touched */
  GPtrArray *leaving;   /* agents sent BYE: forgotten at the end of the flush */
  GPtrArray *by_idx;    /* ledger index -> its Agent (or NULL) */
};

/* An agent may start a task it holds only while it has heard from this
 * master within a quarter of the timeout (its lease); the master stops
 * heartbeating an agent it has not heard from for that long, so an agent
 * cut off stops starting tasks well before the master declares it lost
 * and gives its tasks to others.  Heartbeats go out (both ways: WELCOME
 * tells the agent) at least eight times per timeout, so a lease never
 * lapses between two of them. */
static gint64
lease_us (const DatcDispatcher *d)
{
  return (gint64) d->timeout_ms * 1000 / 4;
}

static void
agent_free (gpointer p)
{
  Agent *a = p;
  g_bytes_unref (a->rid);
  g_free (a->agent_id);
  g_free (a->site);
  g_free (a->proxy);
  g_free (a->host);
  g_array_unref (a->acks);
  g_array_unref (a->cancels);
  g_free (a);
}

static void
key_entry_free (gpointer p)
{
  KeyEntry *k = p;
  g_free (k->site);
  g_free (k);
}

static void
ban (DatcDispatcher *d, GBytes *rid)
{
  if (g_hash_table_size (d->banned) >= BANNED_MAX)
    g_hash_table_remove_all (d->banned);
  g_hash_table_add (d->banned, g_bytes_ref (rid));
}

static gchar *
rid_describe (GBytes *rid)
{
  gsize n;
  const guint8 *p = g_bytes_get_data (rid, &n);
  GString *s = g_string_new (NULL);
  for (gsize i = 0; i < n && i < 64; i++)
    {
      if (g_ascii_isgraph (p[i]))
        g_string_append_c (s, (char) p[i]);
      else
        g_string_append_printf (s, "\\x%02x", p[i]);
    }
  return g_string_free (s, FALSE);
}

/* Tasks the ledger has running on the agent (prefetched or started,
 * copies included): the ledger's own count, never a copy kept here. */
static guint64
held (DatcDispatcher *d, const Agent *a)
{
  return datc_ledger_agent_attempts (d->ledger, a->idx);
}

/* An agent with ACKs or CANCELs waiting: flush sends them. */
static void
touch (DatcDispatcher *d, Agent *a)
{
  if (!a->touched)
    {
      a->touched = TRUE;
      g_ptr_array_add (d->touched, a);
    }
  if (!a->to_check)
    {
      a->to_check = TRUE;
      g_ptr_array_add (d->to_check, a);
    }
}

static void
want (DatcDispatcher *d, Agent *a)
{
  if (!a->wanting && a->limit > a->sent)
    {
      a->wanting = TRUE;
      g_queue_push_tail_link (&d->wanting, &a->want_link);
    }
}

static void
unwant (DatcDispatcher *d, Agent *a)
{
  if (a->wanting)
    {
      a->wanting = FALSE;
      g_queue_unlink (&d->wanting, &a->want_link);
    }
}

/* Heard from now: the tail of by_seen.  One that was no longer sent
 * heartbeats (silent past its lease) is due one at once. */
static void
seen (DatcDispatcher *d, Agent *a, gint64 now)
{
  a->last_seen_us = now;
  g_queue_unlink (&d->by_seen, &a->seen_link);
  g_queue_push_tail_link (&d->by_seen, &a->seen_link);
  if (!a->beating)
    {
      a->beating = TRUE;
      g_queue_push_head_link (&d->by_beat, &a->beat_link);
    }
}

static gboolean host_excluded (DatcDispatcher *d, const char *site, const char *host);
static void retire_agent (DatcDispatcher *d, Agent *a, const char *reason);

/* ---- sending (queued until flush) ---------------------------------- */

/* Encodes `msg` for `rid` onto `queue` (d->out, or d->after_sync). */
static void
queue_msg_on (DatcDispatcher *d, GArray *queue, GBytes *rid, const DatcMsg *msg)
{
  g_byte_array_set_size (d->scratch, 0);
  datc_msg_encode (msg, d->scratch);
  Outgoing o = { g_bytes_ref (rid), g_bytes_new (d->scratch->data, d->scratch->len) };
  g_array_append_val (queue, o);
}

static void
queue_msg (DatcDispatcher *d, GBytes *rid, const DatcMsg *msg)
{
  queue_msg_on (d, d->out, rid, msg);
}

static void
queue_frame (DatcDispatcher *d, GBytes *rid, GByteArray *frame)
{
  Outgoing o = { g_bytes_ref (rid), g_bytes_new (frame->data, frame->len) };
  g_array_append_val (d->out, o);
}

static void
queue_heartbeat (DatcDispatcher *d, GBytes *rid, guint32 session, gboolean rehello)
{
  DatcMsg m = { .type = DATC_MSG_HEARTBEAT };
  m.u.heartbeat.epoch = d->epoch;
  m.u.heartbeat.session = session;
  m.u.heartbeat.rehello = rehello;
  queue_msg (d, rid, &m);
}

static void
queue_bye (DatcDispatcher *d, Agent *a, const char *reason)
{
  DatcMsg m = { .type = DATC_MSG_BYE };
  m.u.reason = (gchar *) reason;
  queue_msg (d, a->rid, &m);
  a->bye = TRUE;
  if (!a->leaving)
    {
      a->leaving = TRUE;
      g_ptr_array_add (d->leaving, a);
    }
}

static void send_keys (DatcDispatcher *d, Agent *a, DatcMsgType type, GArray *keys);

/* ---- ZAP ----------------------------------------------------------- */

static gboolean
zap_handle (DatcDispatcher *d)
{
  /* Frames: version, request id, domain, address, identity, mechanism,
   * credentials...  Reply: version, request id, status, text, user id,
   * metadata. */
  zmq_msg_t parts[8];
  int n = 0, more = 1;
  while (more && n < 8)
    {
      zmq_msg_init (&parts[n]);
      if (zmq_msg_recv (&parts[n], d->zap, ZMQ_DONTWAIT) < 0)
        {
          zmq_msg_close (&parts[n]);
          break;
        }
      more = zmq_msg_more (&parts[n]);
      n++;
    }
  if (n == 0)
    return FALSE;
  while (more)
    {
      /* More frames than a ZAP request has: read and drop them. */
      zmq_msg_t extra;
      zmq_msg_init (&extra);
      zmq_msg_recv (&extra, d->zap, 0);
      more = zmq_msg_more (&extra);
      zmq_msg_close (&extra);
    }

  const char *status = "400", *text = "not a key of this campaign", *user = "";
  g_autofree gchar *revoked = NULL;
  if (n >= 7 && zmq_msg_size (&parts[5]) == 5 && memcmp (zmq_msg_data (&parts[5]), "CURVE", 5) == 0
      && zmq_msg_size (&parts[6]) == 32)
    {
      g_autoptr (GBytes) key = g_bytes_new (zmq_msg_data (&parts[6]), 32);
      KeyEntry *k = g_hash_table_lookup (d->allowed, key);
      if (k != NULL && k->revoked)
        text = revoked
            = g_strdup_printf ("the key of site %s, which this campaign is done with", k->site);
      else if (k != NULL)
        /* The user id travels with every message of the connection
         * (zmq_msg_gets "User-Id"): the site the agent's frames are
         * held to, which the agent cannot choose. */
        status = "200", text = "OK", user = k->site != NULL ? k->site : HAND_USER_ID;
    }
  if (status[0] != '2')
    {
      char addr[128] = "";
      if (n >= 4)
        g_snprintf (addr, sizeof addr, "%.*s", (int) MIN (zmq_msg_size (&parts[3]), 100),
                    (const char *) zmq_msg_data (&parts[3]));
      g_message ("refused a connection from %s: %s", addr, text);
      datc_trace_event (d->trace, "agent_refused", "address", 's', addr, "reason", 's', text, NULL);
    }

  zmq_send (d->zap, "1.0", 3, ZMQ_SNDMORE);
  if (n >= 2)
    zmq_send (d->zap, zmq_msg_data (&parts[1]), zmq_msg_size (&parts[1]), ZMQ_SNDMORE);
  else
    zmq_send (d->zap, "", 0, ZMQ_SNDMORE);
  zmq_send (d->zap, status, 3, ZMQ_SNDMORE);
  zmq_send (d->zap, text, strlen (text), ZMQ_SNDMORE);
  zmq_send (d->zap, user, strlen (user), ZMQ_SNDMORE);
  zmq_send (d->zap, "", 0, 0);
  for (int i = 0; i < n; i++)
    zmq_msg_close (&parts[i]);
  return TRUE;
}

/* ---- lifecycle ----------------------------------------------------- */

static gboolean
zmq_fail (GError **error, const char *what)
{
  g_set_error (error, DATC_DISPATCHER_ERROR, DATC_DISPATCHER_ERROR_ZMQ, "%s: %s", what,
               zmq_strerror (errno));
  return FALSE;
}

DatcDispatcher *
datc_dispatcher_new (void *ctx, DatcLedger *ledger, const DatcDispatcherOptions *o, GError **error)
{
  g_autoptr (DatcDispatcher) d = g_new0 (DatcDispatcher, 1);
  int one = 1, zero = 0;
  int64_t maxmsg = DATC_FRAME_MAX;
  char last[256];
  size_t last_len = sizeof last;

  d->ledger = ledger;
  d->trace = o->trace;
  d->clock = o->clock;
  d->heartbeat_ms = o->heartbeat_ms ? o->heartbeat_ms : 1000;
  d->timeout_ms = o->timeout_ms ? o->timeout_ms : 30000;
  d->heartbeat_ms = MIN (d->heartbeat_ms, MAX (d->timeout_ms / 8, 1u));
  d->max_replicas = o->max_replicas ? o->max_replicas : DATC_DISPATCHER_MAX_REPLICAS;
  d->candidates = g_array_new (FALSE, FALSE, sizeof (DatcReplicaCandidate));
  d->taken = g_byte_array_new ();
  d->touched = g_ptr_array_new ();
  d->to_check = g_ptr_array_new ();
  d->leaving = g_ptr_array_new ();
  d->by_idx = g_ptr_array_new ();
  d->queued_seen = G_MAXUINT64;
  /* Agents of the last master (if it died) say HELLO within about a
   * heartbeat of reconnecting; until they have (or this long), queued tasks
   * wait, because some may be running on them already (TASKS leave before
   * their dispatch record is synced). */
  if (datc_ledger_awaited (ledger) > 0)
    d->settle_until_us
        = datc_clock_monotonic (d->clock) + 2 * (gint64) d->heartbeat_ms * 1000 + 500 * 1000;
  d->epoch = ((guint64) g_random_int () << 32) | g_random_int ();
  if (d->epoch == 0)
    d->epoch = 1;
  d->agents = g_hash_table_new_full (g_bytes_hash, g_bytes_equal, NULL, agent_free);
  d->banned
      = g_hash_table_new_full (g_bytes_hash, g_bytes_equal, (GDestroyNotify) g_bytes_unref, NULL);
  d->allowed = g_hash_table_new_full (g_bytes_hash, g_bytes_equal, (GDestroyNotify) g_bytes_unref,
                                      key_entry_free);
  d->site_keys = g_hash_table_new (g_str_hash, g_str_equal);
  d->out = g_array_new (FALSE, FALSE, sizeof (Outgoing));
  d->after_sync = g_array_new (FALSE, FALSE, sizeof (Outgoing));
  d->scratch = g_byte_array_new ();
  d->picked = g_array_new (FALSE, FALSE, sizeof (DatcTaskKey));
  d->finished = g_ptr_array_new ();
  d->site_done = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, NULL);
  d->keep_idle = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, NULL);
  d->fast_failures = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, NULL);
  d->site_hosts = g_hash_table_new_full (g_str_hash, g_str_equal, g_free,
                                         (GDestroyNotify) g_hash_table_unref);
  d->excluded
      = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, (GDestroyNotify) g_ptr_array_unref);
  d->curve = g_str_has_prefix (o->endpoint, "tcp://");

  d->router = zmq_socket (ctx, ZMQ_ROUTER);
  if (d->router == NULL)
    {
      zmq_fail (error, "zmq_socket");
      return NULL;
    }
  zmq_setsockopt (d->router, ZMQ_MAXMSGSIZE, &maxmsg, sizeof maxmsg);
  zmq_setsockopt (d->router, ZMQ_ROUTER_HANDOVER, &one, sizeof one);
  zmq_setsockopt (d->router, ZMQ_ROUTER_MANDATORY, &one, sizeof one);
  zmq_setsockopt (d->router, ZMQ_LINGER, &zero, sizeof zero);

  if (d->curve)
    {
      DatcCurveKeypair kp;
      if (o->server_secret_file == NULL || o->agent_keys == NULL)
        {
          g_set_error (error, DATC_DISPATCHER_ERROR, DATC_DISPATCHER_ERROR_KEYS,
                       "%s: a tcp endpoint needs the campaign's keys", o->endpoint);
          return NULL;
        }
      if (!datc_curve_keypair_load (&kp, o->server_secret_file, error))
        return NULL;
      memcpy (d->server_public, kp.public_z85, sizeof d->server_public);
      zmq_setsockopt (d->router, ZMQ_CURVE_SERVER, &one, sizeof one);
      zmq_setsockopt (d->router, ZMQ_CURVE_SECRETKEY, kp.secret_z85, DATC_CURVE_Z85_LEN);
      datc_curve_keypair_clear (&kp);
      zmq_setsockopt (d->router, ZMQ_ZAP_DOMAIN, "datc", 4);
      for (guint i = 0; i < o->n_agent_keys; i++)
        {
          const DatcAgentKey *k = &o->agent_keys[i];
          guint8 raw[32];
          if (!datc_curve_z85_valid (k->public_z85) || zmq_z85_decode (raw, k->public_z85) == NULL)
            continue;
          g_autoptr (GBytes) key = g_bytes_new (raw, 32);
          if (g_hash_table_contains (d->allowed, key))
            continue;
          KeyEntry *e = g_new0 (KeyEntry, 1);
          e->site = g_strdup (k->site);
          e->revoked = k->revoked;
          g_hash_table_insert (d->allowed, g_steal_pointer (&key), e);
          if (e->site != NULL)
            g_hash_table_replace (d->site_keys, e->site, e);
        }
      d->zap = zmq_socket (ctx, ZMQ_REP);
      if (d->zap == NULL || zmq_bind (d->zap, ZAP_ENDPOINT) != 0)
        {
          zmq_fail (error, "ZAP handler");
          return NULL;
        }
      zmq_setsockopt (d->zap, ZMQ_LINGER, &zero, sizeof zero);
    }

  g_autofree gchar *ep = g_strdup (o->endpoint);
  if (d->curve && g_str_has_suffix (ep, ":0"))
    ep[strlen (ep) - 1] = '*';
  /* An ipc socket has no CURVE: like DIR/control, it is owner-only from
   * the start, then made sure of. */
  const char *ipc_path = g_str_has_prefix (ep, "ipc://") && ep[6] != '@' ? ep + 6 : NULL;
  mode_t old_umask = ipc_path != NULL ? umask (0077) : 0;
  int rc = zmq_bind (d->router, ep);
  if (ipc_path != NULL)
    umask (old_umask);
  if (rc != 0 || (ipc_path != NULL && chmod (ipc_path, 0600) != 0))
    {
      g_set_error (error, DATC_DISPATCHER_ERROR, DATC_DISPATCHER_ERROR_LISTEN,
                   "cannot listen on %s: %s", ep,
                   rc != 0 ? zmq_strerror (errno) : g_strerror (errno));
      return NULL;
    }
  zmq_getsockopt (d->router, ZMQ_LAST_ENDPOINT, last, &last_len);
  d->endpoint = g_strndup (last, last_len);
  if (d->endpoint[0] == '\0')
    d->endpoint = (g_free (d->endpoint), g_strdup (ep));
  return g_steal_pointer (&d);
}

void
datc_dispatcher_free (DatcDispatcher *d)
{
  if (d == NULL)
    return;
  GArray *queues[] = { d->out, d->after_sync };
  for (guint q = 0; q < G_N_ELEMENTS (queues); q++)
    {
      for (guint i = 0; i < queues[q]->len; i++)
        {
          Outgoing *o = &g_array_index (queues[q], Outgoing, i);
          g_bytes_unref (o->rid);
          g_bytes_unref (o->frame);
        }
      g_array_unref (queues[q]);
    }
  g_hash_table_unref (d->agents);
  g_ptr_array_unref (d->touched);
  g_ptr_array_unref (d->to_check);
  g_ptr_array_unref (d->leaving);
  g_ptr_array_unref (d->by_idx);
  g_hash_table_unref (d->banned);
  g_hash_table_unref (d->site_keys);
  g_hash_table_unref (d->allowed);
  g_byte_array_unref (d->scratch);
  g_array_unref (d->picked);
  g_ptr_array_unref (d->finished);
  g_hash_table_unref (d->site_done);
  g_hash_table_unref (d->keep_idle);
  g_hash_table_unref (d->fast_failures);
  g_hash_table_unref (d->site_hosts);
  g_hash_table_unref (d->excluded);
  if (d->candidates != NULL)
    g_array_unref (d->candidates);
  if (d->taken != NULL)
    g_byte_array_unref (d->taken);
  g_strfreev (d->split_sites);
  if (d->router)
    zmq_close (d->router);
  if (d->zap)
    zmq_close (d->zap);
  g_free (d->endpoint);
  g_free (d->bye_reason);
  g_free (d);
}

const char *
datc_dispatcher_endpoint (DatcDispatcher *d)
{
  return d->endpoint;
}

gboolean
datc_dispatcher_curve (DatcDispatcher *d)
{
  return d->curve;
}

const char *
datc_dispatcher_server_public (DatcDispatcher *d)
{
  return d->curve ? d->server_public : NULL;
}

void
datc_dispatcher_poll_items (DatcDispatcher *d, GArray *items)
{
  zmq_pollitem_t r = { d->router, 0, ZMQ_POLLIN, 0 };
  g_array_append_val (items, r);
  if (d->zap)
    {
      zmq_pollitem_t z = { d->zap, 0, ZMQ_POLLIN, 0 };
      g_array_append_val (items, z);
    }
}

/* ---- agents -------------------------------------------------------- */

/* Every way an agent leaves ends here: declared lost (silence, a bad
 * frame), its BYE, or ours once it is out.  The ledger takes its
 * departure in one call (its tasks back, with a crash counted when lost;
 * its entry released), and it is forgotten.  Not to be called while
 * iterating d->agents. */
static void
agent_forget (DatcDispatcher *d, Agent *a, gboolean lost)
{
  guint n = datc_ledger_agent_gone (d->ledger, a->idx, lost);
  if (lost)
    {
      datc_trace_event (d->trace, "agent_lost", "site", 's', a->site, "proxy", 's', a->proxy,
                        "agent", 's', a->agent_id, "requeued", 'i', (gint64) n, NULL);
      g_message ("agent %s (site %s, proxy %s) lost; %u task%s back in the queue", a->agent_id,
                 a->site, a->proxy, n, n == 1 ? "" : "s");
    }
  else
    /* It left on its own: what it still had went back without penalty. */
    datc_trace_event (d->trace, "agent_exited", "site", 's', a->site, "proxy", 's', a->proxy,
                      "agent", 's', a->agent_id, NULL);
  g_queue_unlink (&d->by_seen, &a->seen_link);
  if (a->beating)
    g_queue_unlink (&d->by_beat, &a->beat_link);
  unwant (d, a);
  if (a->touched)
    g_ptr_array_remove_fast (d->touched, a);
  if (a->to_check)
    g_ptr_array_remove_fast (d->to_check, a);
  if (a->leaving)
    g_ptr_array_remove_fast (d->leaving, a);
  if (a->idx < d->by_idx->len && d->by_idx->pdata[a->idx] == a)
    d->by_idx->pdata[a->idx] = NULL;
  g_hash_table_remove (d->agents, a->rid);
}

static Agent *
agent_by_index (DatcDispatcher *d, guint32 idx)
{
  return idx < d->by_idx->len ? d->by_idx->pdata[idx] : NULL;
}

static gboolean
agent_id_ok (const char *id)
{
  gsize n = strlen (id);
  if (n == 0 || n > 128 || id[0] == '.')
    return FALSE;
  for (const char *p = id; *p; p++)
    if (!g_ascii_isalnum (*p) && *p != '-' && *p != '_' && *p != '.')
      return FALSE;
  return TRUE;
}

/* Which part of the bag an agent of `site` may take from. */
static guint
agent_partition (DatcDispatcher *d, const char *site)
{
  if (d->split_sites == NULL)
    return 0;
  for (guint k = 0; d->split_sites[k] != NULL; k++)
    if (g_strcmp0 (d->split_sites[k], site) == 0)
      return k;
  return G_MAXUINT;
}

/* Whether the connection's key (its ZAP user id, `user`) may act for
 * `site`; otherwise *why (transfer full) says why not.  Over ipc there
 * are no keys: the socket is the user's own, and every agent is. */
static gboolean
key_allows (DatcDispatcher *d, const char *user, const char *site, gchar **why)
{
  if (!d->curve)
    return TRUE;
  if (user == NULL || user[0] == '\0')
    {
      *why = g_strdup ("the connection has no key of this campaign");
      return FALSE;
    }
  if (g_str_equal (user, HAND_USER_ID))
    {
      if (!g_hash_table_contains (d->site_keys, site))
        return TRUE;
      *why = g_strdup_printf ("the key for agents started by hand cannot act for site %s, "
                              "which has a key of its own",
                              site);
      return FALSE;
    }
  KeyEntry *k = g_hash_table_lookup (d->site_keys, user);
  if (k == NULL || k->revoked)
    *why = g_strdup_printf ("the key of site %s, which this campaign is done with", user);
  else if (!g_str_equal (user, site))
    *why = g_strdup_printf ("this agent holds the key of site %s, not of site %s", user, site);
  return *why == NULL;
}

/* A peer whose key does not allow what it says it is: told why (BYE:
 * an agent that was never welcomed says so and exits), logged and
 * traced.  Not banned and not forgotten: the routing id may be a real
 * agent's, taken over (ROUTER_HANDOVER) by the holder of another key,
 * and the real agent must be able to take it back. */
static void
refuse_peer (DatcDispatcher *d, GBytes *rid, const char *agent_id, const char *site,
             const char *proxy, const char *user, const char *why)
{
  g_autofree gchar *who = rid_describe (rid);
  g_autofree gchar *reason = g_strdup_printf ("refused: %s", why);
  g_message ("peer %s (site %s, proxy %s): %s", who, site, proxy, reason);
  datc_trace_event (d->trace, "agent_refused", "site", 's', site, "proxy", 's', proxy, "agent", 's',
                    agent_id, "key", 's', user != NULL ? user : "", "reason", 's', why, NULL);
  DatcMsg m = { .type = DATC_MSG_BYE };
  m.u.reason = reason;
  queue_msg (d, rid, &m);
}

/* An agent may hold, or report a result of, only what the journal gave
 * to an agent of its own site: the site of the task's last dispatch
 * (datc_ledger_task_site).  A held attempt beyond the journal's (its
 * dispatch record died with the last master) was given to no one the
 * journal knows of, and goes to the ledger as before: a queued task may
 * go to any agent. */
static gboolean
held_ours (DatcDispatcher *d, const Agent *a, const DatcTaskKey *k)
{
  if (!d->curve || datc_ledger_attempt_live (d->ledger, k->id, a->idx, k->attempt))
    return TRUE;
  const char *owner = datc_ledger_task_site (d->ledger, k->id);
  return owner == NULL || g_str_equal (owner, a->site)
         || k->attempt > datc_ledger_task_attempt (d->ledger, k->id);
}

static gboolean
result_ours (DatcDispatcher *d, const Agent *a, const DatcResult *r)
{
  /* A copy of a replicated task may run on another site than its newest. */
  if (!d->curve || datc_ledger_attempt_live (d->ledger, r->id, a->idx, r->attempt))
    return TRUE;
  const char *owner = datc_ledger_task_site (d->ledger, r->id);
  return owner != NULL && g_str_equal (owner, a->site);
}

static void
trace_tasks_refused (DatcDispatcher *d, const Agent *a, const char *what, guint n)
{
  if (n == 0)
    return;
  g_message ("agent %s (site %s, proxy %s): %u %s refused: not dispatched to site %s", a->agent_id,
             a->site, a->proxy, n, what, a->site);
  datc_trace_event (d->trace, "tasks_refused", "site", 's', a->site, "proxy", 's', a->proxy,
                    "agent", 's', a->agent_id, "what", 's', what, "count", 'i', (gint64) n, NULL);
}

static void
on_hello (DatcDispatcher *d, GBytes *rid, DatcHello *h, const char *user)
{
  g_autofree gchar *who = rid_describe (rid);
  gsize rid_len;
  const void *rid_data = g_bytes_get_data (rid, &rid_len);

  if (!agent_id_ok (h->agent_id) || rid_len != strlen (h->agent_id)
      || memcmp (rid_data, h->agent_id, rid_len) != 0)
    {
      g_message ("peer %s: HELLO refused: agent id must be its routing id, of [A-Za-z0-9._-]", who);
      ban (d, rid);
      return;
    }

  Agent *a = g_hash_table_lookup (d->agents, rid);
  g_autofree gchar *why = NULL;
  if (key_allows (d, user, h->site, &why) && d->curve)
    {
      /* An agent id stays with its site: another's would re-attach its
       * tasks (the ledger keeps them by agent id). */
      const char *known = a != NULL ? a->site : datc_ledger_agent_site (d->ledger, h->agent_id);
      if (known != NULL && !g_str_equal (known, h->site))
        why = g_strdup_printf ("agent %s is an agent of site %s", h->agent_id, known);
    }
  if (why != NULL)
    {
      refuse_peer (d, rid, h->agent_id, h->site, h->proxy, user, why);
      return;
    }
  if (a == NULL)
    {
      datc_trace_event (d->trace, "agent_connected", "site", 's', h->site, "proxy", 's', h->proxy,
                        "agent", 's', h->agent_id, "host", 's', h->host, "slots", 'i',
                        (gint64) h->slots, NULL);
      a = g_new0 (Agent, 1);
      a->rid = g_bytes_ref (rid);
      a->acks = g_array_new (FALSE, FALSE, sizeof (DatcTaskKey));
      a->cancels = g_array_new (FALSE, FALSE, sizeof (DatcTaskKey));
      a->seen_link.data = a->beat_link.data = a->want_link.data = a;
      g_queue_push_tail_link (&d->by_seen, &a->seen_link);
      g_hash_table_insert (d->agents, a->rid, a);
    }
  g_free (a->agent_id), a->agent_id = g_strdup (h->agent_id);
  g_free (a->site), a->site = g_strdup (h->site);
  g_free (a->proxy), a->proxy = g_strdup (h->proxy);
  g_free (a->host), a->host = g_strdup (h->host);
  a->slots = h->slots;
  a->walltime_end_us = h->walltime_end_us;
  if (a->connected_us == 0)
    a->connected_us = datc_clock_real (d->clock);
  a->partition = agent_partition (d, h->site);
  a->session = h->session;
  a->limit = a->sent = 0;
  a->welcome = TRUE;
  a->rehello = FALSE;
  a->bye = FALSE;
  if (a->idx < d->by_idx->len && d->by_idx->pdata[a->idx] == a)
    d->by_idx->pdata[a->idx] = NULL;
  a->idx = datc_ledger_agent_hello (d->ledger, h->agent_id, h->site, h->proxy, h->host);
  if (a->idx >= d->by_idx->len)
    g_ptr_array_set_size (d->by_idx, a->idx + 1);
  d->by_idx->pdata[a->idx] = a;
  datc_ledger_agent_walltime (d->ledger, a->idx, h->walltime_end_us);
  GHashTable *hosts = g_hash_table_lookup (d->site_hosts, a->site);
  if (hosts == NULL)
    {
      hosts = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, NULL);
      g_hash_table_insert (d->site_hosts, g_strdup (a->site), hosts);
    }
  g_hash_table_add (hosts, g_strdup (a->host));

  /* Reconcile: what the ledger says runs here versus what the agent holds. */
  g_autoptr (GHashTable) holds = g_hash_table_new (g_int64_hash, g_int64_equal);
  g_autoptr (GArray) refused = g_array_new (FALSE, FALSE, sizeof (DatcTaskKey));
  guint not_ours = 0;
  for (guint i = 0; i < h->held->len; i++)
    {
      DatcTaskKey *k = &g_array_index (h->held, DatcTaskKey, i);
      if (!held_ours (d, a, k))
        {
          not_ours++;
          g_array_append_val (refused, *k);
        }
      else if (datc_ledger_reattach (d->ledger, a->idx, k->id, k->attempt))
        g_hash_table_add (holds, &k->id);
      else
        g_array_append_val (refused, *k);
    }
  /* The CANCEL goes before the WELCOME, on the same pipe: an agent starts
   * nothing it holds until WELCOME, so a task that is no longer its own
   * (finished, or given to another while it was silent) never starts. */
  trace_tasks_refused (d, a, "held tasks", not_ours);
  send_keys (d, a, DATC_MSG_CANCEL, refused);
  g_autoptr (GArray) mine = g_array_new (FALSE, FALSE, sizeof (DatcTaskKey));
  datc_ledger_agent_tasks (d->ledger, a->idx, mine);
  for (guint i = 0; i < mine->len; i++)
    {
      DatcTaskKey *k = &g_array_index (mine, DatcTaskKey, i);
      if (!g_hash_table_contains (holds, &k->id))
        datc_ledger_requeue (d->ledger, a->idx, k->id, k->attempt);
    }
  /* Re-attached tasks were handed to it (by an earlier master, maybe): in
   * direct mode that was its one task. */
  a->handed = MAX (a->handed, held (d, a));
  a->heard_executing = FALSE;
  touch (d, a);

  DatcMsg w = { .type = DATC_MSG_WELCOME };
  w.u.welcome.epoch = d->epoch;
  w.u.welcome.session = a->session;
  w.u.welcome.heartbeat_ms = d->heartbeat_ms;
  w.u.welcome.timeout_ms = d->timeout_ms;
  queue_msg (d, rid, &w);
  /* A proxy submitted before its host was excluded, or an agent we
   * retired saying HELLO again: it gets no work. */
  if (a->retired || host_excluded (d, a->site, a->host))
    retire_agent (d, a, "its host is excluded: tasks failed fast there");
  a->last_heartbeat_us = datc_clock_monotonic (d->clock);
  seen (d, a, a->last_heartbeat_us);
  g_queue_unlink (&d->by_beat, &a->beat_link);
  g_queue_push_tail_link (&d->by_beat, &a->beat_link);
  g_debug ("agent %s (site %s, proxy %s, host %s, %u slots) said HELLO, session %u, holding %u",
           a->agent_id, a->site, a->proxy, a->host, a->slots, a->session, h->held->len);
}

/* ---- nodes where tasks fail fast ------------------------------------ */

static gboolean
host_excluded (DatcDispatcher *d, const char *site, const char *host)
{
  GPtrArray *hosts = g_hash_table_lookup (d->excluded, site);
  for (guint i = 0; hosts != NULL && i + 1 < hosts->len; i++)
    if (g_str_equal (hosts->pdata[i], host))
      return TRUE;
  return FALSE;
}

/* RETIRE: the agent gives back what it holds unstarted, finishes what it
 * runs and leaves (its BYE); it gets no credit meanwhile. */
static void
retire_agent (DatcDispatcher *d, Agent *a, const char *reason)
{
  DatcMsg m = { .type = DATC_MSG_RETIRE };
  m.u.reason = (gchar *) reason;
  queue_msg (d, a->rid, &m);
  a->retired = TRUE;
  a->limit = a->sent;
}

/* Every host the site has run on would be excluded: its later proxies
 * could then never start anywhere we know works, and the campaign would
 * wait on them for ever.  The last host is drained but kept. */
static gboolean
would_exclude_every_host (DatcDispatcher *d, const char *site, const char *host)
{
  GHashTable *seen = g_hash_table_lookup (d->site_hosts, site);
  GHashTableIter it;
  gpointer k;
  if (seen == NULL)
    return TRUE;
  g_hash_table_iter_init (&it, seen);
  while (g_hash_table_iter_next (&it, &k, NULL))
    if (!g_str_equal (k, host) && !host_excluded (d, site, k))
      return FALSE;
  return TRUE;
}

static void
exclude_host (DatcDispatcher *d, const char *site, const char *host)
{
  g_autofree gchar *why = g_strdup_printf ("%u tasks in a row failed within %u ms of their start",
                                           FAST_FAILURES_MAX, (guint) (FAST_FAILURE_US / 1000));
  guint retired = 0;
  GHashTableIter it;
  gpointer v;
  g_hash_table_iter_init (&it, d->agents);
  while (g_hash_table_iter_next (&it, NULL, &v))
    {
      Agent *a = v;
      if (!a->bye && !a->retired && g_strcmp0 (a->site, site) == 0
          && g_strcmp0 (a->host, host) == 0)
        {
          retire_agent (d, a, why);
          retired++;
        }
    }
  const char *kept = NULL;
  if (!datc_proxy_host_is_valid (host))
    kept = "not excluded: its name cannot go into a scheduler's request";
  else if (would_exclude_every_host (d, site, host))
    kept = "not excluded: every other host the site ran on is excluded or none is known";
  if (kept == NULL)
    {
      GPtrArray *hosts = g_hash_table_lookup (d->excluded, site);
      if (hosts == NULL)
        {
          hosts = g_ptr_array_new_with_free_func (g_free);
          g_ptr_array_add (hosts, NULL);
          g_hash_table_insert (d->excluded, g_strdup (site), hosts);
        }
      hosts->pdata[hosts->len - 1] = g_strdup (host);
      g_ptr_array_add (hosts, NULL);
      g_printerr ("datc: site %s: host %s excluded from later proxies: %s; %u agent%s drained\n",
                  site, host, why, retired, retired == 1 ? "" : "s");
    }
  else
    g_printerr ("datc: site %s: host %s: %s; %u agent%s drained, but %s\n", site, host, why,
                retired, retired == 1 ? "" : "s", kept);
  datc_trace_event (d->trace, "node_excluded", "site", 's', site, "host", 's', host, "why", 's',
                    why, "excluded", 'b', (gboolean) (kept == NULL), "agents", 'i',
                    (gint64) retired, kept != NULL ? "note" : NULL, 's', kept, NULL);
}

/* Counts failures in a row per (site, host) that ended within
 * FAST_FAILURE_US of their start; a success or a slower failure starts the
 * count again.  Timeouts, cancels and drains say nothing of the node. */
static void
note_node_outcome (DatcDispatcher *d, Agent *a, const DatcResult *res)
{
  gboolean ok = res->status == DATC_STATUS_EXITED && res->exit_code == 0;
  gboolean failed = (res->status == DATC_STATUS_EXITED && res->exit_code != 0)
                    || res->status == DATC_STATUS_SIGNALED
                    || res->status == DATC_STATUS_SPAWN_FAILED;
  if ((!ok && !failed) || a->retired)
    return;
  gboolean fast = failed && res->finished_us - res->started_us < FAST_FAILURE_US;
  /* Every result comes here: the usual one (no node counting failures,
   * this one not a fast failure) changes nothing and builds no key. */
  if (!fast && g_hash_table_size (d->fast_failures) == 0)
    return;
  g_autofree gchar *key = g_strdup_printf ("%s\t%s", a->site, a->host);
  if (!fast)
    {
      g_hash_table_remove (d->fast_failures, key);
      return;
    }
  guint n = GPOINTER_TO_UINT (g_hash_table_lookup (d->fast_failures, key)) + 1;
  if (n < FAST_FAILURES_MAX)
    {
      g_hash_table_replace (d->fast_failures, g_steal_pointer (&key), GUINT_TO_POINTER (n));
      return;
    }
  g_hash_table_remove (d->fast_failures, key);
  exclude_host (d, a->site, a->host);
}

const char *const *
datc_dispatcher_excluded_hosts (DatcDispatcher *d, const char *site)
{
  GPtrArray *hosts = g_hash_table_lookup (d->excluded, site);
  return hosts != NULL ? (const char *const *) hosts->pdata : NULL;
}

static gboolean
on_results (DatcDispatcher *d, Agent *a, DatcResults *r, GError **error)
{
  guint not_ours = 0;
  g_autoptr (GArray) cancel = g_array_new (FALSE, FALSE, sizeof (DatcLedgerRunning));
  for (guint i = 0; i < r->results->len; i++)
    {
      DatcResult *res = r->results->pdata[i];
      if (!result_ours (d, a, res))
        {
          /* Acknowledged unrecorded, so it is not sent again. */
          DatcTaskKey k = { res->id, res->attempt };
          g_array_append_val (a->acks, k);
          touch (d, a);
          not_ours++;
          continue;
        }
      g_autoptr (GError) local = NULL;

      g_array_set_size (cancel, 0);
      DatcResultOutcome oc = datc_ledger_take_result (d->ledger, a->idx, res, cancel, &local);
      if (oc == DATC_RESULT_FAILED)
        {
          g_propagate_error (error, g_steal_pointer (&local));
          return FALSE;
        }
      if (oc == DATC_RESULT_ACCEPTED)
        note_node_outcome (d, a, res);
      if (oc == DATC_RESULT_ACCEPTED)
        {
          a->done++;
          guint64 n = GPOINTER_TO_SIZE (g_hash_table_lookup (d->site_done, a->site));
          g_hash_table_replace (d->site_done, g_strdup (a->site), GSIZE_TO_POINTER (n + 1));
        }
      /* The first result wins: the other copies are stopped, and what
       * they send later is a duplicate. */
      for (guint c = 0; c < cancel->len; c++)
        {
          DatcLedgerRunning *lr = &g_array_index (cancel, DatcLedgerRunning, c);
          Agent *other = agent_by_index (d, lr->agent);
          if (other == NULL)
            continue;
          DatcTaskKey k = { res->id, lr->attempt };
          g_array_append_val (other->cancels, k);
          touch (d, other);
          datc_trace_event (d->trace, "task_replica_cancelled", "task", 'i', (gint64) res->id,
                            "attempt", 'i', (gint64) lr->attempt, "site", 's', other->site, "proxy",
                            's', other->proxy, "agent", 's', other->agent_id, "winner_attempt", 'i',
                            (gint64) res->attempt, NULL);
        }
      /* A task given back drained says the agent is leaving (or cannot
       * start more at the moment): the rest of its credit is stale, or
       * requeued tasks would go straight back to it.  It asks again if it
       * can. */
      if (res->status == DATC_STATUS_DRAINED)
        a->limit = a->sent;
      DatcTaskKey k = { res->id, res->attempt };
      g_array_append_val (a->acks, k);
      touch (d, a);
    }
  trace_tasks_refused (d, a, "results", not_ours);
  return TRUE;
}

/* `user`: the ZAP user id of the connection the frame came on (the
 * site of its key), or NULL (ipc). */
static gboolean
handle_frame (DatcDispatcher *d, GBytes *rid, const guint8 *data, gsize len, const char *user,
              GError **error)
{
  if (g_hash_table_contains (d->banned, rid))
    return TRUE;

  Agent *a = g_hash_table_lookup (d->agents, rid);
  g_autoptr (GError) derr = NULL;
  g_autoptr (DatcMsg) m
      = datc_msg_decode (data, len, a ? DATC_FRAME_MAX : DATC_HELLO_FRAME_MAX, &derr);
  if (m == NULL)
    {
      g_autofree gchar *who = rid_describe (rid);
      g_message ("peer %s%s%s: dropped after a bad frame: %s", who, a ? " site " : "",
                 a ? a->site : "", derr->message);
      ban (d, rid);
      if (a != NULL)
        agent_forget (d, a, TRUE);
      return TRUE;
    }

  if (m->type == DATC_MSG_HELLO)
    {
      on_hello (d, rid, &m->u.hello, user);
      return TRUE;
    }
  if (a == NULL)
    {
      /* A peer we do not know (we restarted, or it was declared lost):
       * ask it to introduce itself again. */
      if (m->type != DATC_MSG_BYE)
        queue_heartbeat (d, rid, 0, TRUE);
      return TRUE;
    }

  g_autofree gchar *why = NULL;
  if (!key_allows (d, user, a->site, &why))
    {
      refuse_peer (d, rid, a->agent_id, a->site, a->proxy, user, why);
      return TRUE;
    }
  seen (d, a, datc_clock_monotonic (d->clock));
  switch (m->type)
    {
    case DATC_MSG_CREDIT:
      if (m->u.credit.session == a->session && m->u.credit.limit > a->limit && !a->retired)
        a->limit = m->u.credit.limit;
      want (d, a);
      break;
    case DATC_MSG_RESULT:
      return on_results (d, a, &m->u.results, error);
    case DATC_MSG_HEARTBEAT:
      if (m->u.heartbeat.session == a->session)
        {
          a->executing = m->u.heartbeat.running;
          a->heard_executing = TRUE;
        }
      if (m->u.heartbeat.session == a->session && m->u.heartbeat.received < a->sent
          && a->last_seen_us - a->last_tasks_us > (gint64) d->timeout_ms * 1000 && !a->rehello)
        {
          /* Tasks we sent never arrived (the connection broke under them). */
          g_message ("agent %s: %" G_GUINT64_FORMAT " tasks sent, %" G_GUINT64_FORMAT
                     " received; asking it to reconcile",
                     a->agent_id, a->sent, m->u.heartbeat.received);
          queue_heartbeat (d, rid, a->session, TRUE);
          a->rehello = TRUE;
        }
      break;
    case DATC_MSG_BYE:
      g_debug ("agent %s said BYE: %s", a->agent_id, m->u.reason);
      agent_forget (d, a, FALSE);
      break;
    default:
      {
        g_autofree gchar *who = rid_describe (rid);
        g_message ("peer %s: dropped after sending %s, which only the master sends", who,
                   datc_msg_type_name (m->type));
        ban (d, rid);
        agent_forget (d, a, TRUE);
      }
    }
  return TRUE;
}

void
datc_dispatcher_set_interlude (DatcDispatcher *d, DatcDispatcherInterlude fn, gpointer data)
{
  d->interlude = fn;
  d->interlude_data = data;
}

static void
interlude (DatcDispatcher *d)
{
  if (d->interlude != NULL)
    d->interlude (d->interlude_data);
}

gboolean
datc_dispatcher_receive (DatcDispatcher *d, GError **error)
{
  if (d->zap)
    while (zap_handle (d))
      ;
  gint64 until = datc_clock_monotonic (d->clock) + RECEIVE_BUDGET_US;
  for (guint n = 0; n < 4096; n++)
    {
      if (n > 0 && n % RECEIVE_CHECK == 0)
        {
          interlude (d);
          if (datc_clock_monotonic (d->clock) >= until)
            break;
        }
      zmq_msg_t id, body;
      zmq_msg_init (&id);
      if (zmq_msg_recv (&id, d->router, ZMQ_DONTWAIT) < 0)
        {
          zmq_msg_close (&id);
          break;
        }
      g_autoptr (GBytes) rid = g_bytes_new (zmq_msg_data (&id), zmq_msg_size (&id));
      zmq_msg_close (&id);
      zmq_msg_init (&body);
      if (zmq_msg_recv (&body, d->router, 0) < 0)
        {
          zmq_msg_close (&body);
          break;
        }
      gboolean multipart = zmq_msg_more (&body);
      gboolean ok = TRUE;
      /* Set by ZAP on every message of a CURVE connection. */
      const char *user = d->curve ? zmq_msg_gets (&body, "User-Id") : NULL;
      if (multipart)
        {
          /* One frame per message is the protocol: read the rest, drop the peer. */
          while (multipart)
            {
              zmq_msg_t extra;
              zmq_msg_init (&extra);
              zmq_msg_recv (&extra, d->router, 0);
              multipart = zmq_msg_more (&extra);
              zmq_msg_close (&extra);
            }
          ok = handle_frame (d, rid, (const guint8 *) "", 0, user, error);
        }
      else
        ok = handle_frame (d, rid, zmq_msg_data (&body), zmq_msg_size (&body), user, error);
      zmq_msg_close (&body);
      if (!ok)
        return FALSE;
    }
  return TRUE;
}

void
datc_dispatcher_tick (DatcDispatcher *d)
{
  gint64 now = datc_clock_monotonic (d->clock);
  g_autoptr (GPtrArray) lost = g_ptr_array_new ();

  /* The silent are at the head of by_seen, the due at the head of
   * by_beat: each walk stops at the first agent that is not. */
  for (GList *l = d->by_seen.head; l != NULL; l = l->next)
    {
      Agent *a = l->data;
      if (now - a->last_seen_us <= (gint64) d->timeout_ms * 1000)
        break;
      g_ptr_array_add (lost, a);
    }
  for (guint i = 0; i < lost->len; i++)
    {
      Agent *a = lost->pdata[i];
      g_message ("agent %s (site %s, proxy %s) silent for more than %u ms", a->agent_id, a->site,
                 a->proxy, d->timeout_ms);
      agent_forget (d, a, TRUE);
    }
  GList *next;
  for (GList *l = d->by_beat.head; l != NULL; l = next)
    {
      Agent *a = l->data;
      next = l->next;
      if (now - a->last_heartbeat_us < (gint64) d->heartbeat_ms * 1000)
        break;
      g_queue_unlink (&d->by_beat, l);
      if (now - a->last_seen_us <= lease_us (d))
        {
          queue_heartbeat (d, a->rid, a->session, FALSE);
          a->last_heartbeat_us = now;
          g_queue_push_tail_link (&d->by_beat, l);
        }
      else
        a->beating = FALSE; /* until it is heard from again (seen) */
    }
  guint64 n = datc_ledger_expire_orphans (d->ledger, datc_clock_real (d->clock));
  if (n > 0)
    g_message ("%" G_GUINT64_FORMAT " task%s back in the queue: their agents did not return "
               "after the master restarted",
               n, n == 1 ? "" : "s");
}

int
datc_dispatcher_next_timeout_ms (DatcDispatcher *d)
{
  if (d->pending_since_us != 0)
    {
      gint64 due = d->pending_since_us + DATC_DISPATCHER_SYNC_DELAY_MS * 1000
                   - datc_clock_monotonic (d->clock);
      return due > 0 ? (int) ((due + 999) / 1000) : 0;
    }
  return (int) MIN (d->heartbeat_ms, 1000u);
}

static void
send_keys (DatcDispatcher *d, Agent *a, DatcMsgType type, GArray *keys)
{
  while (keys->len > 0)
    {
      guint n = MIN (keys->len, DATC_BATCH_MAX);
      DatcMsg m = { .type = type };
      m.u.keys = g_array_sized_new (FALSE, FALSE, sizeof (DatcTaskKey), n);
      g_array_append_vals (m.u.keys, keys->data, n);
      /* Acknowledge only what the sync made durable. */
      queue_msg_on (d, type == DATC_MSG_ACK ? d->after_sync : d->out, a->rid, &m);
      g_array_unref (m.u.keys);
      g_array_remove_range (keys, 0, n);
    }
}

static void
send_queue (DatcDispatcher *d, GArray *queue)
{
  for (guint i = 0; i < queue->len; i++)
    {
      Outgoing *o = &g_array_index (queue, Outgoing, i);
      gsize rl, fl;
      const void *rd = g_bytes_get_data (o->rid, &rl);
      const void *fd = g_bytes_get_data (o->frame, &fl);
      if (zmq_send (d->router, rd, rl, ZMQ_SNDMORE | ZMQ_DONTWAIT) < 0
          || zmq_send (d->router, fd, fl, ZMQ_DONTWAIT) < 0)
        {
          /* The peer is gone (EHOSTUNREACH) or not reading: what we sent
           * is reconciled at its next HELLO, or it is declared lost. */
          g_autofree gchar *who = rid_describe (o->rid);
          g_debug ("could not send to %s: %s", who, zmq_strerror (errno));
        }
      g_bytes_unref (o->rid);
      g_bytes_unref (o->frame);
    }
  g_array_set_size (queue, 0);
}

/* Time the agent has left before its walltime, in ms. */
static guint64
budget_ms (const Agent *a, gint64 now_real)
{
  if (a->walltime_end_us <= 0)
    return G_MAXUINT64;
  return a->walltime_end_us > now_real ? (guint64) (a->walltime_end_us - now_real) / 1000u : 0;
}

/* The TASKS frame of the tasks the ledger picked (d->picked) for `a`, in
 * d->scratch: each from the bag's stored spec, a plain line as `sh`. */
static void
encode_picked (DatcDispatcher *d, Agent *a)
{
  const DatcBag *bag = datc_ledger_bag (d->ledger);
  g_byte_array_set_size (d->scratch, 0);
  datc_tasks_encode_begin (d->scratch, a->session, d->picked->len);
  for (guint i = 0; i < d->picked->len; i++)
    {
      const DatcTaskKey *k = &g_array_index (d->picked, DatcTaskKey, i);
      const DatcBagTask *bt = datc_bag_get (bag, k->id);
      const guint8 *spec = datc_bag_spec (bag, bt);
      if (bt->kind == DATC_BAG_SPEC_LINE)
        datc_tasks_encode_add_line (d->scratch, k->id, k->attempt, (const char *) spec, bt->length);
      else
        datc_tasks_encode_add_spec (d->scratch, k->id, k->attempt, spec, bt->length);
    }
}

/* Turns the agent's credit into TASKS frames. */
static void
hand_out (DatcDispatcher *d, Agent *a, gint64 now_real, gint64 now)
{
  /* Not heard from for a lease: it may be cut off and would not start
   * what it got anyway.  Settling after a restart: see settle_until_us. */
  if (now - a->last_seen_us > lease_us (d))
    return;
  if (d->settle_until_us != 0)
    {
      if (now < d->settle_until_us && datc_ledger_awaited (d->ledger) > 0)
        return;
      d->settle_until_us = 0;
    }
  while (a->limit > a->sent)
    {
      guint want = (guint) MIN (a->limit - a->sent, 4096u);
      guint n;
      g_array_set_size (d->picked, 0);
      if (d->one_task)
        {
          if (a->handed > 0)
            break;
          /* The task its proxy was submitted for (the ledger's binding). */
          n = datc_ledger_dispatch_bound (d->ledger, a->idx, a->site, a->proxy, d->picked);
          if (n == 0)
            queue_bye (d, a, "the task of this job is no longer queued");
        }
      else
        {
          DatcDispatchRequest req = {
            .agent = a->idx,
            .partition = a->partition,
            .max = want,
            .budget_ms = budget_ms (a, now_real),
            .fresh = a->handed == 0,
          };
          n = datc_ledger_dispatch (d->ledger, &req, d->picked);
          /* Its free slots are no room for the work waiting: the site
           * manager must not count them as capacity. */
          a->starved = n == 0 && req.deferred > 0;
          /* Nothing left fits in the walltime it has left: the allocation
           * is better given back than held idle.  Only for an agent that
           * has worked: one that could not fit a single task from the
           * start would just be replaced by another such, in a loop. */
          if (n == 0 && req.deferred > 0 && held (d, a) == 0 && a->handed > 0)
            queue_bye (d, a, "no remaining task fits in this agent's walltime");
        }
      if (n == 0)
        break;
      encode_picked (d, a);
      queue_frame (d, a->rid, d->scratch);
      a->sent += n;
      a->handed += n;
      a->last_tasks_us = now;
    }
}

gboolean
datc_dispatcher_flush (DatcDispatcher *d, gboolean force, gboolean *synced, GError **error)
{
  gint64 now_real = datc_clock_real (d->clock);
  gint64 now = datc_clock_monotonic (d->clock);

  if (synced != NULL)
    *synced = FALSE;
  /* ACKs and CANCELs before any TASKS to the same agent, as they came. */
  for (guint i = 0; i < d->touched->len; i++)
    {
      Agent *a = d->touched->pdata[i];
      a->touched = FALSE;
      if (a->acks->len)
        send_keys (d, a, DATC_MSG_ACK, a->acks);
      if (a->cancels->len)
        send_keys (d, a, DATC_MSG_CANCEL, a->cancels);
    }
  g_ptr_array_set_size (d->touched, 0);
  if (d->settle_until_us != 0 && g_hash_table_size (d->agents) > 0
      && (now >= d->settle_until_us || datc_ledger_awaited (d->ledger) == 0))
    d->settle_until_us = 0;
  /* Only agents with credit left, and only while something is queued
   * (direct mode: an agent's bound task, or its BYE, may be due). */
  DatcLedgerCounts c;
  datc_ledger_counts (d->ledger, &c);
  GList *next;
  guint served = 0;
  for (GList *l = d->wanting.head; l != NULL && (c.queued > 0 || d->one_task); l = next)
    {
      Agent *a = l->data;
      next = l->next;
      if (++served % RECEIVE_CHECK == 0)
        interlude (d);
      if (!a->bye && !a->rehello)
        hand_out (d, a, now_real, now);
      if (a->bye || a->rehello || a->limit <= a->sent)
        unwant (d, a);
    }

  /* Work goes out at once; its journal records follow with the next sync. */
  send_queue (d, d->out);

  if (datc_ledger_pending (d->ledger) > 0 || d->after_sync->len > 0)
    {
      if (d->pending_since_us == 0)
        d->pending_since_us = now;
      if (force || d->after_sync->len >= SYNC_BATCH
          || now - d->pending_since_us >= DATC_DISPATCHER_SYNC_DELAY_MS * 1000)
        {
          if (!datc_ledger_commit (d->ledger, error))
            return FALSE;
          interlude (d);
          send_queue (d, d->after_sync);
          d->pending_since_us = 0;
          if (synced != NULL)
            *synced = TRUE;
        }
    }
  else if (synced != NULL)
    *synced = TRUE;

  /* Agents told to leave are forgotten once their BYE is out. */
  g_autoptr (GPtrArray) leaving = g_steal_pointer (&d->leaving);
  d->leaving = g_ptr_array_new ();
  for (guint i = 0; i < leaving->len; i++)
    {
      Agent *a = leaving->pdata[i];
      a->leaving = FALSE;
      if (a->bye)
        agent_forget (d, a, FALSE);
    }
  return TRUE;
}

guint
datc_dispatcher_agents (DatcDispatcher *d)
{
  return g_hash_table_size (d->agents);
}

guint64
datc_dispatcher_free_slots (DatcDispatcher *d)
{
  guint64 free_slots = 0;
  GHashTableIter it;
  gpointer v;
  g_hash_table_iter_init (&it, d->agents);
  while (g_hash_table_iter_next (&it, NULL, &v))
    {
      Agent *a = v;
      guint64 busy = held (d, a);
      if (!a->bye && a->slots > busy)
        free_slots += a->slots - busy;
    }
  return free_slots;
}

guint
datc_dispatcher_site_agents (DatcDispatcher *d, const char *site, GPtrArray *proxies)
{
  guint n = 0;
  GHashTableIter it;
  gpointer v;
  g_hash_table_iter_init (&it, d->agents);
  while (g_hash_table_iter_next (&it, NULL, &v))
    {
      Agent *a = v;
      if (g_strcmp0 (a->site, site) == 0)
        {
          n++;
          if (proxies != NULL)
            g_ptr_array_add (proxies, g_strdup (a->proxy));
        }
    }
  return n;
}

void
datc_dispatcher_release_all (DatcDispatcher *d, const char *reason)
{
  GHashTableIter it;
  gpointer v;
  g_hash_table_iter_init (&it, d->agents);
  while (g_hash_table_iter_next (&it, NULL, &v))
    if (!((Agent *) v)->bye)
      queue_bye (d, v, reason);
}

void
datc_dispatcher_send_uncommitted (DatcDispatcher *d)
{
  send_queue (d, d->out);
}

/* End-game replication (pull mode): once nothing is queued, an agent with
 * a free slot and credit left gets a copy of the running task expected to
 * end last, when a copy is expected to end sooner
 * (datc_ledger_replica_candidates), never one it runs already, never one
 * that would not fit its walltime, at most max_replicas live copies per
 * task.  The analysis model (analysis/simulate.c, try_copy) copies onto a
 * slot the moment it frees; here an agent is offered copies each loop
 * turn until release_idle sends it away.  The model knows each task's
 * distribution; here it is the campaign's observed run times (nothing
 * before DATC_RUNTIMES_MIN_SAMPLES of them), the copy's time is their mean, and
 * a task's elapsed time counts from its dispatch (a prefetched task's
 * wait counts too). */
static gboolean
replication_on (DatcDispatcher *d)
{
  return d->max_replicas >= 2 && !d->one_task && d->split_sites == NULL;
}

static void
replicate_end_game (DatcDispatcher *d)
{
  DatcLedgerCounts c;
  datc_ledger_counts (d->ledger, &c);
  if (!replication_on (d) || d->settle_until_us != 0 || datc_ledger_orphans (d->ledger) > 0
      || datc_ledger_awaited (d->ledger) > 0 || c.queued > 0 || c.running == 0)
    {
      /* A task requeued here may run again as a new attempt: the list
       * kept would name it. */
      d->candidates_us = 0;
      return;
    }
  gint64 now = datc_clock_monotonic (d->clock), now_real = datc_clock_real (d->clock);
  g_autoptr (GPtrArray) idle = g_ptr_array_new ();
  /* Idle means credit left: only agents in `wanting` can be. */
  for (GList *l = d->wanting.head; l != NULL; l = l->next)
    {
      Agent *a = l->data;
      if (!a->bye && !a->rehello && a->welcome && held (d, a) < a->slots && a->limit > a->sent
          && now - a->last_seen_us <= lease_us (d))
        g_ptr_array_add (idle, a);
    }
  if (idle->len == 0)
    return;
  /* The candidates cost a look at every running task: worked out at most
   * every REPLICA_RECOMPUTE_US, not every turn (a thousand agents make
   * many turns).  Meanwhile the list stands, less what was copied; a
   * task in it that ended since is refused by the ledger. */
  if (d->candidates_us == 0 || now - d->candidates_us >= REPLICA_RECOMPUTE_US)
    {
      g_array_set_size (d->candidates, 0);
      datc_ledger_replica_candidates (d->ledger, d->max_replicas, now_real, d->candidates);
      d->candidates_us = now;
      g_byte_array_set_size (d->taken, d->candidates->len);
      if (d->candidates->len > 0)
        memset (d->taken->data, 0, d->candidates->len);
      d->candidates_head = 0;
      d->candidates_left = d->candidates->len;
    }
  for (guint i = 0; i < idle->len && d->candidates_left > 0; i++)
    {
      Agent *a = idle->pdata[i];
      guint64 budget = budget_ms (a, now_real);
      while (held (d, a) < a->slots && a->limit > a->sent)
        {
          guint j = d->candidates_head;
          for (; j < d->candidates->len; j++)
            {
              if (d->taken->data[j])
                continue;
              DatcReplicaCandidate *rc = &g_array_index (d->candidates, DatcReplicaCandidate, j);
              if (rc->fit_ms <= budget && !datc_ledger_runs_on (d->ledger, rc->id, a->idx))
                break;
            }
          if (j == d->candidates->len)
            break;
          DatcReplicaCandidate rc = g_array_index (d->candidates, DatcReplicaCandidate, j);
          /* Once copied, its expected end is the copy's: copying it again
           * now would not end it sooner.  Marked, not removed: removing
           * from the front of tens of thousands moved megabytes for each
           * copy (0.5 s of the loop at the end of 10M x 1,000). */
          d->taken->data[j] = 1;
          d->candidates_left--;
          while (d->candidates_head < d->candidates->len && d->taken->data[d->candidates_head])
            d->candidates_head++;
          g_array_set_size (d->picked, 0);
          if (datc_ledger_replicate (d->ledger, a->idx, rc.id, d->picked) == 0)
            continue;
          encode_picked (d, a);
          queue_frame (d, a->rid, d->scratch);
          a->sent++;
          a->handed++;
          a->last_tasks_us = now;
          guint32 attempt = datc_ledger_task_attempt (d->ledger, rc.id);
          g_message ("task %" G_GUINT64_FORMAT ": copy %u (attempt %u) on agent %s: it has run "
                     "%" G_GUINT64_FORMAT " ms, a copy is expected to take %" G_GUINT64_FORMAT
                     " ms",
                     rc.id, rc.copies + 1, attempt, a->agent_id, rc.elapsed_ms, rc.copy_ms);
          datc_trace_event (d->trace, "task_replicated", "task", 'i', (gint64) rc.id, "attempt",
                            'i', (gint64) attempt, "site", 's', a->site, "proxy", 's', a->proxy,
                            "agent", 's', a->agent_id, "original_attempt", 'i', (gint64) rc.attempt,
                            "copies", 'i', (gint64) rc.copies + 1, "elapsed_ms", 'i',
                            (gint64) rc.elapsed_ms, "expected_remaining_ms", 'i',
                            rc.remaining_ms == G_MAXUINT64 ? (gint64) -1 : (gint64) rc.remaining_ms,
                            "copy_ms", 'i', (gint64) rc.copy_ms, NULL);
        }
    }
}

/* Whether `a` is idle for good: nothing held, no work it could take. */
static void
release_if_idle (DatcDispatcher *d, Agent *a, const DatcLedgerCounts *c)
{
  if (a->bye || !a->welcome || held (d, a) > 0)
    return;
  if (d->one_task)
    {
      if (a->handed > 0)
        queue_bye (d, a, "its one task is done (direct mode)");
      return;
    }
  if (g_hash_table_contains (d->keep_idle, a->site))
    return;
  if (c->queued == 0 || datc_ledger_queued_in (d->ledger, a->partition) == 0)
    queue_bye (d, a, "no work left");
}

void
datc_dispatcher_release_idle (DatcDispatcher *d)
{
  /* An idle agent that takes a copy is no longer idle. */
  if (!d->one_task)
    replicate_end_game (d);
  DatcLedgerCounts c;
  datc_ledger_counts (d->ledger, &c);
  /* An agent becomes idle by an event of its own (a result, a cancel, its
   * HELLO: `to_check`); every agent may at once when the queue
   * (or in a split bag, a share of it) empties or a site's idle agents
   * are no longer kept.  Only then are all looked at. */
  gboolean all = d->rescan_idle
                 || (!d->one_task && c.queued != d->queued_seen
                     && (c.queued == 0 || d->split_sites != NULL));
  d->queued_seen = c.queued;
  /* In a split bag an agent is idle for good once its own share is empty. */
  if (!d->one_task && c.queued > 0 && d->split_sites == NULL)
    return;
  /* With replication on, the end game's idle agents are where copies go:
   * they stay while a running task may yet be copied.  A task becomes
   * worth a copy only once it has run a while (past the runs observed, or
   * past the shorter ones when run times are mixed): sent away the moment
   * they idle, the agents would be gone by then (bench-sites' straggler:
   * the fast sites' agents left 0.9 s before the slow site's last tasks
   * became copies' worth, and pull+rep ran as plain pull).  Costs idle
   * slots for at most the end game, which the copies shorten; with
   * --max-replicas 1 they leave at once. */
  if (c.queued == 0 && replication_on (d) && datc_ledger_may_copy (d->ledger, d->max_replicas))
    {
      /* Those that idle meanwhile stay in to_check; all are looked at
       * once the hold ends. */
      d->holding_idle = TRUE;
      return;
    }
  if (d->holding_idle)
    {
      d->holding_idle = FALSE;
      all = TRUE;
    }
  d->rescan_idle = FALSE;
  g_autoptr (GPtrArray) check = g_steal_pointer (&d->to_check);
  d->to_check = g_ptr_array_new ();
  for (guint i = 0; i < check->len; i++)
    {
      Agent *a = check->pdata[i];
      a->to_check = FALSE;
      if (!all)
        release_if_idle (d, a, &c);
    }
  if (!all)
    return;
  GHashTableIter it;
  gpointer v;
  g_hash_table_iter_init (&it, d->agents);
  while (g_hash_table_iter_next (&it, NULL, &v))
    release_if_idle (d, v, &c);
}

void
datc_dispatcher_keep_idle (DatcDispatcher *d, const char *site, gboolean keep)
{
  /* Called for every site on every provisioner tick: no copy when nothing changes. */
  if (keep && !g_hash_table_contains (d->keep_idle, site))
    g_hash_table_add (d->keep_idle, g_strdup (site));
  else if (!keep && g_hash_table_remove (d->keep_idle, site))
    d->rescan_idle = TRUE; /* its idle agents may go now */
}

void
datc_dispatcher_revoke_site (DatcDispatcher *d, const char *site)
{
  KeyEntry *k = g_hash_table_lookup (d->site_keys, site);
  if (k == NULL || k->revoked)
    return;
  k->revoked = TRUE;
  g_debug ("site %s is done with: its agent key is no longer accepted", site);
  datc_trace_event (d->trace, "site_key_revoked", "site", 's', site, NULL);
  GHashTableIter it;
  gpointer v;
  g_hash_table_iter_init (&it, d->agents);
  while (g_hash_table_iter_next (&it, NULL, &v))
    {
      Agent *a = v;
      if (!a->bye && g_strcmp0 (a->site, site) == 0)
        queue_bye (d, a, "the campaign is done with this site");
    }
}

void
datc_dispatcher_split (DatcDispatcher *d, const char *const *sites)
{
  g_strfreev (d->split_sites);
  d->split_sites = g_strdupv ((gchar **) sites);
}

void
datc_dispatcher_one_task (DatcDispatcher *d)
{
  d->one_task = TRUE;
}

void
datc_dispatcher_proxy_agents (DatcDispatcher *d, const char *site, GArray *out)
{
  DatcLedgerCounts c;
  datc_ledger_counts (d->ledger, &c);
  guint64 queued = c.queued;
  GHashTableIter it;
  gpointer v;
  g_hash_table_iter_init (&it, d->agents);
  while (g_hash_table_iter_next (&it, NULL, &v))
    {
      Agent *a = v;
      if (a->bye || g_strcmp0 (a->site, site) != 0)
        continue;
      DatcAgentLoad l = {
        .proxy = a->proxy,
        .slots = a->slots,
        .running = held (d, a),
        .connected_us = a->connected_us,
        .walltime_end_us = a->walltime_end_us,
        /* Nothing queued: nothing it could be starved of (flush no longer
         * asks the ledger for it then). */
        .starved = a->starved && queued > 0,
      };
      g_array_append_val (out, l);
    }
}

/* Of the tasks an agent holds, those it runs: what it last said, never
 * more than it holds or has slots for (before its first heartbeat: as
 * many as fit its slots).  The rest wait on it, prefetched. */
static guint64
agent_running (DatcDispatcher *d, const Agent *a)
{
  guint64 holds = held (d, a);
  guint64 said = a->heard_executing ? a->executing : holds;
  return MIN (MIN (said, holds), (guint64) a->slots);
}

guint64
datc_dispatcher_executing (DatcDispatcher *d)
{
  guint64 n = 0;
  GHashTableIter it;
  gpointer v;
  g_hash_table_iter_init (&it, d->agents);
  while (g_hash_table_iter_next (&it, NULL, &v))
    n += agent_running (d, v);
  return n;
}

static gint
by_site_then_id (gconstpointer x, gconstpointer y)
{
  const Agent *a = *(Agent *const *) x, *b = *(Agent *const *) y;
  int c = g_strcmp0 (a->site, b->site);
  return c != 0 ? c : g_strcmp0 (a->agent_id, b->agent_id);
}

void
datc_dispatcher_describe_agents (DatcDispatcher *d, guint max, GString *out)
{
  if (max == 0) /* the progress line: only the count */
    {
      g_string_append (out, "[]");
      return;
    }
  gint64 now = datc_clock_monotonic (d->clock);
  g_autoptr (GPtrArray) sorted = g_ptr_array_sized_new (g_hash_table_size (d->agents));
  GHashTableIter it;
  gpointer v;
  g_hash_table_iter_init (&it, d->agents);
  while (g_hash_table_iter_next (&it, NULL, &v))
    g_ptr_array_add (sorted, v);
  g_ptr_array_sort (sorted, by_site_then_id);
  const char *sep = "";
  g_string_append_c (out, '[');
  for (guint i = 0; i < sorted->len && i < max; i++)
    {
      Agent *a = sorted->pdata[i];
      guint64 running = agent_running (d, a);
      g_string_append_printf (out, "%s{\"id\":", sep);
      datc_json_append_string (out, a->agent_id);
      g_string_append (out, ",\"site\":");
      datc_json_append_string (out, a->site);
      g_string_append (out, ",\"proxy\":");
      datc_json_append_string (out, a->proxy);
      g_string_append (out, ",\"host\":");
      datc_json_append_string (out, a->host);
      g_string_append_printf (out,
                              ",\"slots\":%u,\"running\":%" G_GUINT64_FORMAT
                              ",\"prefetched\":%" G_GUINT64_FORMAT ",\"done\":%" G_GUINT64_FORMAT
                              ",\"last_seen_s\":",
                              (guint) a->slots, running, held (d, a) - running, (guint64) a->done);
      datc_json_number (out, a->last_seen_us ? (now - a->last_seen_us) / 1e6 : 0.0, 3);
      g_string_append_c (out, '}');
      sep = ",";
    }
  g_string_append_c (out, ']');
}

guint64
datc_dispatcher_site_done (DatcDispatcher *d, const char *site)
{
  return GPOINTER_TO_SIZE (g_hash_table_lookup (d->site_done, site));
}

void
datc_dispatcher_cancel_running (DatcDispatcher *d, GArray *running)
{
  for (guint i = 0; i < running->len; i++)
    {
      DatcLedgerRunning *r = &g_array_index (running, DatcLedgerRunning, i);
      Agent *a = agent_by_index (d, r->agent);
      if (a == NULL)
        continue;
      DatcTaskKey k = { r->id, r->attempt };
      g_array_append_val (a->cancels, k);
      touch (d, a);
    }
}
