/* test-site-keys.c: one agent key per site (real datc, real agents, fork
 * sites over TCP+CURVE).  A key admits its holder as an agent of its own
 * site only: not as another site's proxy, not to hold or finish tasks the
 * master gave another site's agents; and a site the campaign is done with
 * (here: interrupted, then resumed without it) has its key refused at the
 * handshake.  The wire-level cases use a hand-made DEALER speaking the
 * protocol (protocol/message.h), as an agent holding the key could. */
#include <signal.h>
#include <string.h>
#include <zmq.h>

#include "curve.h"
#include "datc-limits.h"
#include "harness.h"
#include "message.h"

static const char *const two_sites
    = "[master]\nlisten = tcp://127.0.0.1:0\n\n"
      "[site a]\nscheduler = fork\nslots_per_proxy = 1\nmax_proxies = 1\n\n"
      "[site b]\nscheduler = fork\nslots_per_proxy = 1\nmax_proxies = 1\n";

/* `n` tasks; each writes, into MARKS/ID, its agent's pid and command line
 * (so the test knows which site runs it), then sleeps `secs`. */
static gchar *
marked_tasks (TbDir *d, guint n, guint secs)
{
  g_autoptr (GString) t = g_string_new (NULL);
  g_autofree gchar *marks = g_build_filename (d->path, "marks", NULL);
  g_assert_cmpint (g_mkdir_with_parents (marks, 0700), ==, 0);
  for (guint i = 1; i <= n; i++)
    g_string_append_printf (t,
                            "{ echo $PPID; tr '\\0' ' ' < /proc/$PPID/cmdline; } > %s/%u.tmp "
                            "&& mv %s/%u.tmp %s/%u; sleep %u\n",
                            marks, i, marks, i, marks, i, secs);
  return tb_write (d, "t.txt", t->str);
}

typedef struct {
  TbDir *d;
  const char *site; /* in: "--site NAME" to look for */
  guint n;
  guint64 id;    /* out: a task running there */
  int agent_pid; /* out: its agent */
  gchar *proxy;  /* out: its agent's proxy id */
} Running;

static gboolean
running_at (gpointer p)
{
  Running *r = p;
  g_autofree gchar *needle = g_strdup_printf (" --site %s ", r->site);
  for (guint i = 1; i <= r->n; i++)
    {
      g_autofree gchar *path = g_strdup_printf ("%s/marks/%u", r->d->path, i);
      g_autofree gchar *text = NULL;
      if (!g_file_get_contents (path, &text, NULL, NULL) || strstr (text, needle) == NULL)
        continue;
      const char *proxy = strstr (text, " --proxy ");
      g_assert_nonnull (proxy);
      proxy += strlen (" --proxy ");
      r->proxy = g_strndup (proxy, strcspn (proxy, " "));
      r->id = i;
      r->agent_pid = atoi (text);
      return TRUE;
    }
  return FALSE;
}

typedef struct {
  const char *dir;
  const char *event, *site, *member, *contains;
} TraceWait;

static gboolean
trace_has (gpointer p)
{
  TraceWait *w = p;
  g_autoptr (GPtrArray) trace = tb_trace (w->dir);
  for (guint i = 0; i < trace->len; i++)
    {
      JsonObject *o = trace->pdata[i];
      const char *ev = json_object_get_string_member_with_default (o, "event", "");
      const char *site = json_object_get_string_member_with_default (o, "site", "");
      const char *m
          = w->member ? json_object_get_string_member_with_default (o, w->member, "") : "";
      if (g_str_equal (ev, w->event) && (w->site == NULL || g_str_equal (site, w->site))
          && (w->contains == NULL || strstr (m, w->contains) != NULL))
        return TRUE;
    }
  return FALSE;
}

static guint
count_events (const char *dir, const char *event, const char *site, const char *proxy)
{
  g_autoptr (GPtrArray) trace = tb_trace (dir);
  guint n = 0;
  for (guint i = 0; i < trace->len; i++)
    {
      JsonObject *o = trace->pdata[i];
      n += g_str_equal (json_object_get_string_member_with_default (o, "event", ""), event)
           && g_str_equal (json_object_get_string_member_with_default (o, "site", ""), site)
           && (proxy == NULL
               || g_str_equal (json_object_get_string_member_with_default (o, "proxy", ""), proxy));
    }
  return n;
}

/* The campaign's endpoint and master key, once it listens. */
static void
await_master (const char *dir, gchar **endpoint, char server_pub[DATC_CURVE_Z85_LEN + 1])
{
  g_autofree gchar *ep_file = g_build_filename (dir, "endpoint", NULL);
  g_autofree gchar *pub = g_build_filename (dir, "keys", "master.key.pub", NULL);
  g_autoptr (GError) error = NULL;
  g_assert_true (tb_await_file (ep_file, 30));
  g_assert_true (g_file_get_contents (ep_file, endpoint, NULL, NULL));
  g_strstrip (*endpoint);
  g_assert_true (datc_curve_public_load (server_pub, pub, &error));
}

/* A static-mode campaign on the two sites of `two_sites` (more `datc run`
 * options in `extra`, may be NULL), once it listens: its directory,
 * endpoint and master key. */
typedef struct {
  TbProc *master;
  gchar *dir, *endpoint;
  char server_pub[DATC_CURVE_Z85_LEN + 1];
} Campaign;

static void
campaign_start (Campaign *c, TbDir *d, const char *tasks, const char *const *extra)
{
  g_autofree gchar *sites = tb_write (d, "sites.ini", two_sites);
  c->dir = g_build_filename (d->path, "c", NULL);
  g_autoptr (GStrvBuilder) b = g_strv_builder_new ();
  g_strv_builder_add_many (b, tb_datc (), "run", "--dir", c->dir, "--sites", sites, "--mode",
                           "static", NULL);
  if (extra != NULL)
    g_strv_builder_addv (b, (const char **) extra);
  g_strv_builder_add (b, tasks);
  g_auto (GStrv) argv = g_strv_builder_end (b);
  c->master = tb_spawn (d, "master", (const char *const *) argv);
  await_master (c->dir, &c->endpoint, c->server_pub);
}

static void
campaign_clear (Campaign *c)
{
  g_clear_pointer (&c->master, tb_proc_free);
  g_clear_pointer (&c->dir, g_free);
  g_clear_pointer (&c->endpoint, g_free);
}
G_DEFINE_AUTO_CLEANUP_CLEAR_FUNC (Campaign, campaign_clear)

/* ---- a hand-made agent ------------------------------------------------ */

typedef struct {
  void *ctx, *sock;
} Peer;

static void
peer_open (Peer *p, const char *endpoint, const char *server_pub, const char *key_file,
           const char *routing_id)
{
  DatcCurveKeypair kp;
  g_autoptr (GError) error = NULL;
  g_assert_true (datc_curve_keypair_load (&kp, key_file, &error));
  int zero = 0;
  p->ctx = zmq_ctx_new ();
  p->sock = zmq_socket (p->ctx, ZMQ_DEALER);
  zmq_setsockopt (p->sock, ZMQ_LINGER, &zero, sizeof zero);
  zmq_setsockopt (p->sock, ZMQ_ROUTING_ID, routing_id, strlen (routing_id));
  zmq_setsockopt (p->sock, ZMQ_CURVE_SERVERKEY, server_pub, DATC_CURVE_Z85_LEN);
  zmq_setsockopt (p->sock, ZMQ_CURVE_PUBLICKEY, kp.public_z85, DATC_CURVE_Z85_LEN);
  zmq_setsockopt (p->sock, ZMQ_CURVE_SECRETKEY, kp.secret_z85, DATC_CURVE_Z85_LEN);
  datc_curve_keypair_clear (&kp);
  g_assert_cmpint (zmq_connect (p->sock, endpoint), ==, 0);
}

static void
peer_close (Peer *p)
{
  zmq_close (p->sock);
  zmq_ctx_term (p->ctx);
}

static void
peer_send (Peer *p, const DatcMsg *m)
{
  g_autoptr (GByteArray) b = g_byte_array_new ();
  datc_msg_encode (m, b);
  g_assert_cmpint (zmq_send (p->sock, b->data, b->len, 0), ==, (int) b->len);
}

static void
peer_hello (Peer *p, const char *id, const char *site, guint64 held_id)
{
  g_autoptr (DatcMsg) m = datc_msg_new (DATC_MSG_HELLO);
  m->u.hello.agent_id = g_strdup (id);
  m->u.hello.site = g_strdup (site);
  m->u.hello.proxy = g_strdup ("by-hand");
  m->u.hello.host = g_strdup ("x");
  m->u.hello.slots = 1;
  m->u.hello.session = 1;
  if (held_id != 0)
    {
      DatcTaskKey k = { held_id, 1 };
      g_array_append_val (m->u.hello.held, k);
    }
  peer_send (p, m);
}

/* The next message from the master within `timeout_ms`, skipping
 * heartbeats; NULL when none comes. */
static DatcMsg *
peer_next (Peer *p, int timeout_ms)
{
  gint64 end = g_get_monotonic_time () + (gint64) timeout_ms * 1000;
  for (;;)
    {
      gint64 left = (end - g_get_monotonic_time ()) / 1000;
      zmq_pollitem_t it = { p->sock, 0, ZMQ_POLLIN, 0 };
      if (left <= 0 || zmq_poll (&it, 1, (long) left) <= 0)
        return NULL;
      zmq_msg_t msg;
      zmq_msg_init (&msg);
      g_assert_cmpint (zmq_msg_recv (&msg, p->sock, 0), >=, 0);
      g_autoptr (GError) error = NULL;
      DatcMsg *m
          = datc_msg_decode (zmq_msg_data (&msg), zmq_msg_size (&msg), DATC_FRAME_MAX, &error);
      zmq_msg_close (&msg);
      g_assert_no_error (error);
      if (m->type != DATC_MSG_HEARTBEAT)
        return m;
      datc_msg_free (m);
    }
}

static gboolean
keys_hold (const DatcMsg *m, guint64 id)
{
  for (guint i = 0; i < m->u.keys->len; i++)
    if (g_array_index (m->u.keys, DatcTaskKey, i).id == id)
      return TRUE;
  return FALSE;
}

static void
check_results (const char *dir, guint n)
{
  g_autoptr (GHashTable) res = tb_results (dir);
  g_assert_cmpuint (g_hash_table_size (res), ==, n);
  GHashTableIter it;
  gpointer v;
  g_hash_table_iter_init (&it, res);
  while (g_hash_table_iter_next (&it, NULL, &v))
    {
      g_assert_cmpint (json_object_get_int_member (v, "exit_code"), ==, 0);
      const char *site = json_object_get_string_member (v, "site");
      g_assert_true (g_str_equal (site, "a") || g_str_equal (site, "b"));
    }
}

static void
no_key_in_workdirs (const char *dir)
{
  const char *sites[] = { "a", "b" };
  for (guint i = 0; i < G_N_ELEMENTS (sites); i++)
    {
      g_autofree gchar *wd = g_build_filename (dir, "proxies", sites[i], NULL);
      g_autoptr (GDir) gd = g_dir_open (wd, 0, NULL);
      const char *name;
      while (gd != NULL && (name = g_dir_read_name (gd)) != NULL)
        g_assert_false (g_str_has_suffix (name, ".key"));
    }
}

/* ---- (a) another site's proxy ------------------------------------------ */

/* A real agent started as a proxy script starts it (--site, --proxy,
 * --key-file, --server-key), holding site a's key but naming itself b's
 * proxy, is refused (told why, exit 3), gets no task, and the master
 * traces the refusal; the campaign completes on the real agents. */
static void
test_other_sites_proxy (void)
{
  g_autoptr (TbDir) d = tb_dir_new ();
  g_autofree gchar *tasks = marked_tasks (d, 4, 3);
  g_auto (Campaign) c = { 0 };
  campaign_start (&c, d, tasks, NULL);
  TbProc *master = c.master;
  const char *dir = c.dir, *endpoint = c.endpoint, *server_pub = c.server_pub;

  Running on_b = { d, "b", 4, 0, 0, NULL };
  g_assert_true (tb_await (running_at, &on_b, 60));
  g_autofree gchar *key_a = g_build_filename (dir, "keys", "sites", "a.key", NULL);
  const char *impostor[]
      = { tb_agent (), "--connect", endpoint,       "--site",   "b",          "--proxy", on_b.proxy,
          "--slots",   "4",         "--server-key", server_pub, "--key-file", key_a,     NULL };
  g_autoptr (TbProc) agent = tb_spawn (d, "impostor", impostor);
  g_assert_cmpint (tb_wait (agent, 30), ==, 3);
  g_autofree gchar *said = tb_proc_stderr (agent);
  g_assert_nonnull (strstr (said, "the master refused this agent: refused: this agent holds "
                                  "the key of site a, not of site b"));
  TraceWait refused = { dir, "agent_refused", "b", "reason", "key of site a, not of site b" };
  g_assert_true (trace_has (&refused));

  g_assert_cmpint (tb_wait (master, 120), ==, 0);
  check_results (dir, 4);
  /* Only b's real agent connected as that proxy; the impostor got in as
   * nothing, so it ran nothing (its tasks would carry its proxy's name
   * from a second agent). */
  g_assert_cmpuint (count_events (dir, "agent_connected", "b", on_b.proxy), ==, 1);
  g_free (on_b.proxy);
}

/* ---- (b) another site's tasks ------------------------------------------ */

/* Task X runs on b's agent; that agent is stopped until the master
 * declares it lost, so X waits in the queue with its attempt 1, given to
 * site b.  A peer holding site a's key says HELLO as an agent of a,
 * holding (X, 1): the master cancels it before the WELCOME (without the
 * check the ledger re-attached it: a queued task with that attempt).  It
 * then reports X done: acknowledged, not recorded.  b's agent, continued,
 * finishes X, and results.jsonl has b's run. */
static void
test_other_sites_tasks (void)
{
  g_autoptr (TbDir) d = tb_dir_new ();
  g_autofree gchar *tasks = marked_tasks (d, 4, 2);
  const char *fast[] = { "--heartbeat-ms", "250", "--agent-timeout-ms", "2000", NULL };
  g_auto (Campaign) c = { 0 };
  campaign_start (&c, d, tasks, fast);
  TbProc *master = c.master;
  const char *dir = c.dir, *endpoint = c.endpoint, *server_pub = c.server_pub;

  Running on_b = { d, "b", 4, 0, 0, NULL };
  g_assert_true (tb_await (running_at, &on_b, 60));
  g_assert_cmpint (kill (on_b.agent_pid, SIGSTOP), ==, 0);
  TraceWait lost = { dir, "agent_lost", "b", NULL, NULL };
  gboolean was_lost = tb_await (trace_has, &lost, 30);

  g_autofree gchar *key_a = g_build_filename (dir, "keys", "sites", "a.key", NULL);
  Peer thief;
  peer_open (&thief, endpoint, server_pub, key_a, "thief-1");
  g_autoptr (DatcMsg) forged = datc_msg_new (DATC_MSG_RESULT);
  DatcResult *r = datc_result_new (on_b.id, 1);
  r->status = DATC_STATUS_EXITED;
  r->started_us = r->finished_us = g_get_real_time ();
  r->out = g_bytes_new_static ("forged\n", 7);
  r->err = g_bytes_new_static ("", 0);
  g_ptr_array_add (forged->u.results.results, r);
  /* HELLO and the result together: an agent of a with nothing to do is
   * told BYE (its share is empty), and a result that comes after that is
   * from no agent; so again, until the result is answered. */
  gboolean cancelled = FALSE, welcomed = FALSE, acked = FALSE;
  for (guint round = 0; round < 5 && !acked; round++)
    {
      peer_hello (&thief, "thief-1", "a", on_b.id);
      peer_send (&thief, forged);
      DatcMsg *m;
      while (!acked && (m = peer_next (&thief, 3000)) != NULL)
        {
          /* The CANCEL of what it may not hold comes before its WELCOME. */
          if (m->type == DATC_MSG_CANCEL && !welcomed)
            cancelled = cancelled || keys_hold (m, on_b.id);
          welcomed = welcomed || m->type == DATC_MSG_WELCOME;
          acked = m->type == DATC_MSG_ACK && keys_hold (m, on_b.id);
          datc_msg_free (m);
        }
    }
  kill (on_b.agent_pid, SIGCONT);
  g_assert_true (was_lost);
  g_assert_true (cancelled);
  g_assert_true (welcomed);
  g_assert_true (acked);
  TraceWait results = { dir, "tasks_refused", "a", "what", "results" };
  g_assert_true (tb_await (trace_has, &results, 10));
  TraceWait held = { dir, "tasks_refused", "a", "what", "held tasks" };
  g_assert_true (trace_has (&held));
  peer_close (&thief);

  g_assert_cmpint (tb_wait (master, 120), ==, 0);
  check_results (dir, 4);
  g_autoptr (GHashTable) res = tb_results (dir);
  JsonObject *x = g_hash_table_lookup (res, &on_b.id);
  g_assert_nonnull (x);
  g_assert_cmpstr (json_object_get_string_member (x, "site"), ==, "b");
  g_assert_cmpstr (json_object_get_string_member (x, "agent"), !=, "thief-1");
  g_free (on_b.proxy);
}

/* ---- (c) a site done with ------------------------------------------------ */

/* SIGTERM to the master: every proxy ends, no key is left in a site's
 * workdir, and the trace says both sites' keys were revoked.  Resumed
 * with site a only, the campaign refuses b's key at the handshake (the
 * ZAP handler names it) and a peer holding it gets nothing, while the key
 * for agents started by hand cannot pass for b either; the campaign
 * completes on a.  Then nothing is left on a's workdir either. */
static void
test_done_with_site (void)
{
  g_autoptr (TbDir) d = tb_dir_new ();
  g_autofree gchar *only_a = tb_write (d, "only-a.ini",
                                       "[master]\nlisten = tcp://127.0.0.1:0\n\n"
                                       "[site a]\nscheduler = fork\nslots_per_proxy = 1\n"
                                       "max_proxies = 1\n");
  g_autofree gchar *tasks = marked_tasks (d, 6, 2);
  g_auto (Campaign) c = { 0 };
  campaign_start (&c, d, tasks, NULL);
  TbProc *master = c.master;
  const char *dir = c.dir, *endpoint = c.endpoint, *server_pub = c.server_pub;
  Running on_b = { d, "b", 6, 0, 0, NULL };
  g_assert_true (tb_await (running_at, &on_b, 60));
  g_assert_true (tb_proc_signal (master, SIGTERM));
  g_assert_cmpint (tb_wait (master, 60), ==, 3);
  g_autoptr (GArray) left = tb_find_agents (dir);
  g_assert_cmpuint (left->len, ==, 0);
  no_key_in_workdirs (dir);
  TraceWait revoked_a = { dir, "site_key_revoked", "a", NULL, NULL };
  TraceWait revoked_b = { dir, "site_key_revoked", "b", NULL, NULL };
  g_assert_true (trace_has (&revoked_a));
  g_assert_true (trace_has (&revoked_b));

  const char *again[] = { tb_datc (), "run", "--dir", dir, "--sites", only_a, tasks, NULL };
  g_autoptr (TbProc) resumed = tb_spawn (d, "resumed", again);
  /* It listens on the port it had: the peers below reach it once it is
   * up (ZeroMQ retries the connection meanwhile). */
  g_autofree gchar *key_b = g_build_filename (dir, "keys", "sites", "b.key", NULL);
  Peer stale;
  peer_open (&stale, endpoint, server_pub, key_b, "stale-1");
  peer_hello (&stale, "stale-1", "b", 0);
  g_assert_true (
      tb_await_stderr (resumed, "the key of site b, which this campaign is done with", 30));
  g_autoptr (DatcMsg) nothing = peer_next (&stale, 500);
  g_assert_null (nothing);
  peer_close (&stale);
  TraceWait at_zap = { dir, "agent_refused", NULL, "reason", "key of site b" };
  g_assert_true (trace_has (&at_zap));

  g_autofree gchar *hand_key = g_build_filename (dir, "keys", "agents", "default.key", NULL);
  Peer hand;
  peer_open (&hand, endpoint, server_pub, hand_key, "hand-1");
  peer_hello (&hand, "hand-1", "b", 0);
  g_autoptr (DatcMsg) bye = peer_next (&hand, 10000);
  g_assert_nonnull (bye);
  g_assert_cmpint (bye->type, ==, DATC_MSG_BYE);
  g_assert_nonnull (strstr (bye->u.reason, "cannot act for site b"));
  peer_close (&hand);

  g_assert_cmpint (tb_wait (resumed, 120), ==, 0);
  check_results (dir, 6);
  no_key_in_workdirs (dir);
  g_free (on_b.proxy);
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  g_test_add_func ("/site-keys/a-key-cannot-pass-for-another-sites-proxy", test_other_sites_proxy);
  g_test_add_func ("/site-keys/a-key-cannot-hold-or-finish-another-sites-task",
                   test_other_sites_tasks);
  g_test_add_func ("/site-keys/a-site-done-with-has-its-key-refused", test_done_with_site);
  return g_test_run ();
}
