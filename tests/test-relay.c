/* test-relay.c: relay mode on this host (real datc, real agents, a real
 * `datc-agent relay`), the site reached through the local transport so
 * no test bed is needed: the relay runs as the master's child with its
 * stdin and stdout as the stream an SSH session would carry.  What the
 * cluster-shaped bed proves over SSH (tests/test-cluster.c) rests on the
 * same code; here: the agents are told the relay's endpoint and reach
 * the master only through it, a relay killed mid-campaign is started
 * again and the campaign completes with one result per task, a relay
 * whose master dies exits and leaves nothing, a second relay takes the
 * port over from the first, and a relay fed garbage says so and exits. */
#include <signal.h>
#include <string.h>

#include "harness.h"
#include "relayframe.h"

static const char *const relay_site
    = "[site r]\nscheduler = fork\nslots_per_proxy = 2\nmax_proxies = 2\n"
      "reach = relay\nrelay_address = 127.0.0.1\n";

/* `n` tasks; each records its agent's command line in MARKS/ID, then
 * sleeps `secs` (a decimal). */
static gchar *
marked_tasks (TbDir *d, guint n, const char *secs)
{
  g_autoptr (GString) t = g_string_new (NULL);
  g_autofree gchar *marks = g_build_filename (d->path, "marks", NULL);
  g_assert_cmpint (g_mkdir_with_parents (marks, 0700), ==, 0);
  for (guint i = 1; i <= n; i++)
    /* Through a temporary file: a copy of the task (end-game
     * replication) killed mid-way must not leave the mark empty. */
    g_string_append_printf (t,
                            "tr '\\0' ' ' < /proc/$PPID/cmdline > %s/%u.$$ && mv %s/%u.$$ "
                            "%s/%u; sleep %s\n",
                            marks, i, marks, i, marks, i, secs);
  return tb_write (d, "t.txt", t->str);
}

/* The relay's endpoint, from the trace's relay_up events (the last). */
static gchar *
relay_endpoint (const char *dir)
{
  g_autoptr (GPtrArray) trace = tb_trace (dir);
  gchar *ep = NULL;
  for (guint i = 0; i < trace->len; i++)
    {
      JsonObject *o = trace->pdata[i];
      if (g_str_equal (json_object_get_string_member_with_default (o, "event", ""), "relay_up"))
        {
          g_free (ep);
          ep = g_strdup (json_object_get_string_member (o, "endpoint"));
        }
    }
  return ep;
}

/* The pid in the relay's pid file, 0 when there is none. */
static int
relay_pid (const char *pidfile)
{
  g_autofree gchar *text = NULL;
  if (!g_file_get_contents (pidfile, &text, NULL, NULL))
    return 0;
  return atoi (text);
}

static gboolean
pid_gone (gpointer p)
{
  return tb_pid_gone (GPOINTER_TO_INT (p));
}

static gboolean
file_gone (gpointer p)
{
  return !g_file_test (p, G_FILE_TEST_EXISTS);
}

static void
test_campaign_goes_through_the_relay (void)
{
  g_autoptr (TbDir) d = tb_dir_new ();
  g_autofree gchar *sites = tb_write (d, "SITES.ini", relay_site);
  g_autofree gchar *tasks = marked_tasks (d, 40, "0");
  g_autofree gchar *dir = g_build_filename (d->path, "c.datc", NULL);
  g_autofree gchar *err = NULL;
  const char *argv[] = { tb_datc (), "run", tasks, "--sites", sites, "--dir", dir, "--json", NULL };
  g_assert_cmpint (tb_run (d, argv, 60, &err), ==, 0);

  g_autoptr (GHashTable) results = tb_results (dir);
  g_assert_cmpuint (g_hash_table_size (results), ==, 40);
  g_autofree gchar *relay = relay_endpoint (dir);
  g_assert_nonnull (relay);
  g_autofree gchar *master = NULL;
  g_autofree gchar *ep_file = g_build_filename (dir, "endpoint", NULL);
  g_assert_true (g_file_get_contents (ep_file, &master, NULL, NULL));
  g_strstrip (master);
  /* The master listens on loopback (a relay site needs no listen), and
   * the agents were told the relay's port, not the master's. */
  g_assert_true (g_str_has_prefix (master, "tcp://127.0.0.1:"));
  g_assert_cmpstr (relay, !=, master);
  g_autofree gchar *connect = g_strdup_printf (" --connect %s ", relay);
  for (guint i = 1; i <= 40; i++)
    {
      g_autofree gchar *mark = g_strdup_printf ("%s/marks/%u", d->path, i);
      g_autofree gchar *cmd = NULL;
      g_assert_true (g_file_get_contents (mark, &cmd, NULL, NULL));
      g_assert_nonnull (strstr (cmd, connect));
    }
  /* It carried the agents' connections, was told BYE, and left nothing. */
  g_assert_nonnull (strstr (err, "exiting: the master said the campaign is over (carried "));
  g_assert_null (strstr (err, "carried 0 connections"));
  g_autofree gchar *pidfile = g_build_filename (dir, "proxies", "r", "relay.pid", NULL);
  g_assert_false (g_file_test (pidfile, G_FILE_TEST_EXISTS));
  g_autoptr (GArray) left = tb_find_agents (d->path);
  g_assert_cmpuint (left->len, ==, 0);
}

static void
test_relay_killed_mid_campaign (void)
{
  g_autoptr (TbDir) d = tb_dir_new ();
  g_autofree gchar *sites = tb_write (d, "SITES.ini", relay_site);
  g_autofree gchar *tasks = marked_tasks (d, 60, "0.1");
  g_autofree gchar *dir = g_build_filename (d->path, "c.datc", NULL);
  g_autofree gchar *pidfile = g_build_filename (dir, "proxies", "r", "relay.pid", NULL);
  g_autofree gchar *results_path = g_build_filename (dir, "results.jsonl", NULL);
  const char *argv[] = { tb_datc (), "run", tasks, "--sites", sites, "--dir", dir, NULL };
  g_autoptr (TbProc) run = tb_spawn (d, "run", argv);

  g_assert_true (tb_await_lines (results_path, 10, 60));
  int first = relay_pid (pidfile);
  g_assert_cmpint (first, >, 1);
  g_assert_cmpint (kill (first, SIGKILL), ==, 0);
  g_assert_cmpint (tb_wait (run, 120), ==, 0);

  /* Every task once, though agents lost their connections mid-way. */
  g_autoptr (GHashTable) results = tb_results (dir);
  g_assert_cmpuint (g_hash_table_size (results), ==, 60);
  g_assert_cmpuint (tb_count_lines (results_path), ==, 60);
  g_autofree gchar *err = tb_proc_stderr (run);
  g_assert_nonnull (strstr (err, "relay session lost"));
  g_assert_nonnull (strstr (err, "session re-established"));
  g_assert_nonnull (strstr (err, "exiting: the master said the campaign is over"));
  g_assert_false (g_file_test (pidfile, G_FILE_TEST_EXISTS));
  g_autoptr (GArray) left = tb_find_agents (d->path);
  g_assert_cmpuint (left->len, ==, 0);
}

static void
test_relay_exits_with_its_master (void)
{
  g_autoptr (TbDir) d = tb_dir_new ();
  g_autofree gchar *sites = tb_write (d, "SITES.ini", relay_site);
  g_autofree gchar *tasks = marked_tasks (d, 20, "30");
  g_autofree gchar *dir = g_build_filename (d->path, "c.datc", NULL);
  g_autofree gchar *pidfile = g_build_filename (dir, "proxies", "r", "relay.pid", NULL);
  g_autofree gchar *mark = g_build_filename (d->path, "marks", "1", NULL);
  const char *argv[] = { tb_datc (), "run", tasks, "--sites", sites, "--dir", dir, NULL };
  g_autoptr (TbProc) run = tb_spawn (d, "run", argv);
  g_assert_true (tb_await_file (mark, 60));
  int pid = relay_pid (pidfile);
  g_assert_cmpint (pid, >, 1);
  g_assert_false (tb_pid_gone (pid));
  /* `datc status` shows the relay carrying the agents' connections. */
  g_autoptr (JsonObject) st = tb_status (dir);
  g_assert_nonnull (st);
  JsonObject *site = json_array_get_object_element (json_object_get_array_member (st, "sites"), 0);
  JsonObject *relay = json_object_get_object_member (site, "relay");
  g_assert_cmpstr (json_object_get_string_member (relay, "state"), ==, "up");
  g_assert_true (
      g_str_has_prefix (json_object_get_string_member (relay, "endpoint"), "tcp://127.0.0.1:"));
  g_assert_cmpint (json_object_get_int_member (relay, "connections"), >=, 1);
  g_assert_cmpint (json_object_get_int_member (relay, "sessions"), ==, 1);

  /* No BYE: its session (here, its stdin) just ends. */
  tb_proc_signal (run, SIGKILL);
  tb_wait (run, 30);
  g_assert_true (tb_await (pid_gone, GINT_TO_POINTER (pid), 30));
  g_assert_true (tb_await (file_gone, pidfile, 30));
}

/* A master killed with -9 takes its relay along; its agents (fork
 * proxies: their own sessions) keep trying the relay's port.  The
 * resumed master's relay listens on that same port (DIR/relay-r.port),
 * so those agents come back through it and the campaign completes, every
 * task once. */
static void
test_resumed_master_keeps_the_relay_port (void)
{
  g_autoptr (TbDir) d = tb_dir_new ();
  g_autofree gchar *sites = tb_write (d, "SITES.ini", relay_site);
  g_autofree gchar *tasks = marked_tasks (d, 30, "1");
  g_autofree gchar *dir = g_build_filename (d->path, "c.datc", NULL);
  g_autofree gchar *results_path = g_build_filename (dir, "results.jsonl", NULL);
  const char *argv[] = { tb_datc (), "run", tasks, "--sites", sites, "--dir", dir, NULL };
  {
    g_autoptr (TbProc) first = tb_spawn (d, "run1", argv);
    g_assert_true (tb_await_lines (results_path, 4, 60));
    tb_proc_signal (first, SIGKILL);
    tb_wait (first, 30);
  }
  g_autoptr (GPtrArray) before = tb_trace (dir);
  g_autoptr (TbProc) second = tb_spawn (d, "run2", argv);
  g_assert_cmpint (tb_wait (second, 120), ==, 0);

  g_autoptr (GHashTable) results = tb_results (dir);
  g_assert_cmpuint (g_hash_table_size (results), ==, 30);
  g_assert_cmpuint (tb_count_lines (results_path), ==, 30);
  /* Both relays listened at the same endpoint... */
  g_autoptr (GPtrArray) trace = tb_trace (dir);
  g_autoptr (GPtrArray) endpoints = g_ptr_array_new ();
  for (guint i = 0; i < trace->len; i++)
    if (g_str_equal (json_object_get_string_member_with_default (trace->pdata[i], "event", ""),
                     "relay_up"))
      g_ptr_array_add (endpoints,
                       (gpointer) json_object_get_string_member (trace->pdata[i], "endpoint"));
  g_assert_cmpuint (endpoints->len, ==, 2);
  g_assert_cmpstr (endpoints->pdata[0], ==, endpoints->pdata[1]);
  /* ... and an agent of the first master's proxies came back through the
   * second's relay. */
  g_autoptr (GHashTable) first_proxies = g_hash_table_new (g_str_hash, g_str_equal);
  for (guint i = 0; i < before->len; i++)
    if (g_str_equal (json_object_get_string_member_with_default (before->pdata[i], "event", ""),
                     "proxy_submitted"))
      g_hash_table_add (first_proxies,
                        (gpointer) json_object_get_string_member (before->pdata[i], "proxy"));
  g_assert_cmpuint (g_hash_table_size (first_proxies), >, 0);
  guint came_back = 0;
  for (guint i = before->len; i < trace->len; i++)
    {
      JsonObject *o = trace->pdata[i];
      came_back
          += g_str_equal (json_object_get_string_member_with_default (o, "event", ""),
                          "agent_connected")
             && g_hash_table_contains (first_proxies, json_object_get_string_member (o, "proxy"));
    }
  g_assert_cmpuint (came_back, >, 0);
}

/* ---- the relay program alone ----------------------------------------- */

typedef struct {
  GSubprocess *proc;
  GInputStream *out;
  GOutputStream *in;
} Relay;

static void
relay_free (Relay *r)
{
  if (r->proc != NULL)
    {
      g_subprocess_force_exit (r->proc);
      g_subprocess_wait (r->proc, NULL, NULL);
    }
  g_clear_object (&r->proc);
  g_free (r);
}
G_DEFINE_AUTOPTR_CLEANUP_FUNC (Relay, relay_free)

static Relay *
relay_start (const char *pidfile, const char *port)
{
  Relay *r = g_new0 (Relay, 1);
  g_autoptr (GError) error = NULL;
  r->proc = g_subprocess_new (G_SUBPROCESS_FLAGS_STDIN_PIPE | G_SUBPROCESS_FLAGS_STDOUT_PIPE
                                  | G_SUBPROCESS_FLAGS_STDERR_SILENCE,
                              &error, tb_agent (), "relay", "--listen", "127.0.0.1", "--pidfile",
                              pidfile, "--port", port, NULL);
  g_assert_no_error (error);
  r->out = g_subprocess_get_stdout_pipe (r->proc);
  r->in = g_subprocess_get_stdin_pipe (r->proc);
  return r;
}

/* The next frame from the relay (after its first line, on the first
 * call), its payload in *payload. */
static DatcRelayType
relay_frame (Relay *r, gboolean first, gchar **payload)
{
  g_autoptr (GError) error = NULL;
  gsize got;
  if (first)
    {
      char magic[sizeof DATC_RELAY_MAGIC - 1];
      g_assert_true (g_input_stream_read_all (r->out, magic, sizeof magic, &got, NULL, &error));
      g_assert_cmpuint (got, ==, sizeof magic);
      g_assert_cmpmem (magic, sizeof magic, DATC_RELAY_MAGIC, sizeof magic);
    }
  guint8 header[DATC_RELAY_HEADER];
  g_assert_true (g_input_stream_read_all (r->out, header, sizeof header, &got, NULL, &error));
  g_assert_cmpuint (got, ==, sizeof header);
  guint32 len = (guint32) header[5] << 24 | (guint32) header[6] << 16 | header[7] << 8 | header[8];
  g_assert_cmpuint (len, <=, 1024);
  gchar *body = g_malloc0 (len + 1);
  g_assert_true (g_input_stream_read_all (r->out, body, len, &got, NULL, &error));
  *payload = body;
  return header[0];
}

static void
test_second_relay_takes_the_port_over (void)
{
  g_autoptr (TbDir) d = tb_dir_new ();
  g_autofree gchar *pidfile = g_build_filename (d->path, "w", "relay.pid", NULL);
  g_autoptr (Relay) a = relay_start (pidfile, "0");
  g_autofree gchar *hello_a = NULL;
  g_assert_cmpint (relay_frame (a, TRUE, &hello_a), ==, DATC_RELAY_HELLO);
  g_assert_true (g_str_has_prefix (hello_a, "tcp://127.0.0.1:"));
  const char *port = strrchr (hello_a, ':') + 1;
  g_autofree gchar *pid_a = g_strdup_printf ("%d", relay_pid (pidfile));
  g_assert_cmpstr (pid_a, ==, g_subprocess_get_identifier (a->proc));

  /* The master lost A's session and starts B on A's port. */
  g_autoptr (Relay) b = relay_start (pidfile, port);
  g_autofree gchar *hello_b = NULL;
  g_assert_cmpint (relay_frame (b, TRUE, &hello_b), ==, DATC_RELAY_HELLO);
  g_assert_cmpstr (hello_b, ==, hello_a);
  g_assert_true (g_subprocess_wait (a->proc, NULL, NULL));
  g_assert_cmpstr (g_subprocess_get_identifier (b->proc), !=, NULL);
  g_autofree gchar *pid_b = g_strdup_printf ("%d", relay_pid (pidfile));
  g_assert_cmpstr (pid_b, ==, g_subprocess_get_identifier (b->proc));

  /* BYE: B exits 0 and removes its pid file. */
  guint8 bye[DATC_RELAY_HEADER] = { DATC_RELAY_BYE };
  g_assert_true (g_output_stream_write_all (b->in, bye, sizeof bye, NULL, NULL, NULL));
  g_assert_true (g_subprocess_wait (b->proc, NULL, NULL));
  g_assert_cmpint (g_subprocess_get_exit_status (b->proc), ==, 0);
  g_assert_false (g_file_test (pidfile, G_FILE_TEST_EXISTS));
}

static void
test_relay_refuses_garbage (void)
{
  g_autoptr (TbDir) d = tb_dir_new ();
  g_autofree gchar *pidfile = g_build_filename (d->path, "relay.pid", NULL);
  g_autoptr (Relay) r = relay_start (pidfile, "0");
  g_autofree gchar *hello = NULL;
  g_assert_cmpint (relay_frame (r, TRUE, &hello), ==, DATC_RELAY_HELLO);
  /* An OPEN may only come from the relay. */
  guint8 open[DATC_RELAY_HEADER] = { DATC_RELAY_OPEN, 0, 0, 0, 7 };
  g_assert_true (g_output_stream_write_all (r->in, open, sizeof open, NULL, NULL, NULL));
  g_autofree gchar *why = NULL;
  g_assert_cmpint (relay_frame (r, FALSE, &why), ==, DATC_RELAY_ERROR);
  g_assert_nonnull (strstr (why, "OPEN cannot come from the master"));
  g_assert_true (g_subprocess_wait (r->proc, NULL, NULL));
  g_assert_cmpint (g_subprocess_get_exit_status (r->proc), ==, 1);
  g_assert_false (g_file_test (pidfile, G_FILE_TEST_EXISTS));
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  g_test_add_func ("/relay/campaign-goes-through-the-relay", test_campaign_goes_through_the_relay);
  g_test_add_func ("/relay/relay-killed-mid-campaign", test_relay_killed_mid_campaign);
  g_test_add_func ("/relay/relay-exits-with-its-master", test_relay_exits_with_its_master);
  g_test_add_func ("/relay/resumed-master-keeps-the-relay-port",
                   test_resumed_master_keeps_the_relay_port);
  g_test_add_func ("/relay/second-relay-takes-the-port-over",
                   test_second_relay_takes_the_port_over);
  g_test_add_func ("/relay/relay-refuses-garbage", test_relay_refuses_garbage);
  return g_test_run ();
}
