/* chaos.c: see chaos.h.  One thread drives everything: it starts the
 * master, sleeps between events in 20 ms steps, and at every step reads
 * what results.jsonl gained since the last one, so the moment a result
 * was first visible is known within ~50 ms.  Processes are GSubprocesses
 * (GLib's worker thread reaps them), signalled by PID only while they run;
 * namespaces come from tests/testbed/netns-up.sh and go with
 * netns-down.sh. */
#include "chaos.h"

#include "curve.h"
#include "harness.h"
#include "testbed.h"

#include <errno.h>
#include <gio/gio.h>
#include <json-glib/json-glib.h>
#include <signal.h>
#include <string.h>
#include <sys/stat.h>

#define CHAOS_ERROR (g_quark_from_static_string ("chaos"))

/* netns-up.sh plugs the first site's namespace into the bridge as p11. */
#define AGENT_PORT_ON_SWITCH "p11"

void
chaos_plan_init (ChaosPlan *plan)
{
  *plan = (ChaosPlan) {
    .tasks = 2000,
    .task_ms = 100,
    .master_kills = 5,
    .agent_kills = 3,
    .stop = TRUE,
    .link_down = TRUE,
    .outage_ms = 8000,
    .local_agents = 2,
    .local_slots = 4,
    .tcp_slots = 2,
    .heartbeat_ms = 500,
    .timeout_ms = 3000,
    .gap_min_ms = 300,
    .gap_max_ms = 1500,
    .deadline_s = 600,
    .seed = 1,
  };
}

typedef struct {
  ChaosCause kind; /* MASTER_KILL, AGENT_KILL, STOP or LINK_DOWN */
  int pid;         /* the agent it hit; 0 for the master */
  gint64 t0, t1;   /* real time, µs: when it began and ended (a master
                    * kill ends when the next master starts) */
} Event;

typedef struct {
  const ChaosPlan *plan;
  gchar *root, *dir, *log, *tasks;
  gchar *net; /* netns-up.sh state; NULL without link_down */
  gchar *ns_master, *ns_agent, *ns_switch, *master_addr;
  gchar *listen; /* --listen: port 0 first, then the bound one */
  GSubprocess *master, *tcp_agent;
  int stopped_pid; /* an agent under SIGSTOP, to continue whatever happens */
  gboolean link_is_down;
  guint serial, master_serial; /* of spawn()'s files: TAG-SERIAL.err */
  GRand *rand;
  GArray *events;   /* Event */
  GHashTable *seen; /* id -> gint64* µs the line was first read */
  guint64 results_inode, results_offset;
  gint64 last_watch, deadline; /* monotonic µs */
  gboolean past_deadline;
} Chaos;

/* ---- processes ------------------------------------------------------ */

static GSubprocess *
spawn (Chaos *c, const char *tag, const char *ns, const char *const *argv, GError **error)
{
  g_autoptr (GPtrArray) all = g_ptr_array_new_with_free_func (g_free);
  if (ns != NULL)
    {
      /* nsenter execs the program: the PID stays the program's. */
      g_ptr_array_add (all, g_strdup ("nsenter"));
      g_ptr_array_add (all, g_strdup_printf ("--net=/run/netns/%s", ns));
    }
  for (guint i = 0; argv[i] != NULL; i++)
    g_ptr_array_add (all, g_strdup (argv[i]));
  g_ptr_array_add (all, NULL);
  g_autoptr (GSubprocessLauncher) l = g_subprocess_launcher_new (G_SUBPROCESS_FLAGS_NONE);
  guint n = ++c->serial;
  g_autofree gchar *err = g_strdup_printf ("%s/%s-%u.err", c->root, tag, n);
  g_autofree gchar *out = g_strdup_printf ("%s/%s-%u.out", c->root, tag, n);
  g_subprocess_launcher_set_stderr_file_path (l, err);
  g_subprocess_launcher_set_stdout_file_path (l, out);
  GSubprocess *p = g_subprocess_launcher_spawnv (l, (const char *const *) all->pdata, error);
  if (p == NULL)
    g_prefix_error (error, "starting %s: ", argv[0]);
  return p;
}

static int
proc_pid (GSubprocess *p)
{
  const char *id = p ? g_subprocess_get_identifier (p) : NULL;
  return id ? atoi (id) : 0;
}

/* GLib's worker thread reaps the child and clears its identifier. */
static gboolean
proc_running (GSubprocess *p)
{
  return proc_pid (p) > 0;
}

/* Exit status of a process that has ended: 128+N for signal N. */
static int
proc_status (GSubprocess *p)
{
  g_subprocess_wait (p, NULL, NULL);
  if (g_subprocess_get_if_signaled (p))
    return 128 + g_subprocess_get_term_sig (p);
  return g_subprocess_get_exit_status (p);
}

/* The last 2,000 bytes of the stderr file of spawn()'s `n`th process. */
static gchar *
stderr_tail (Chaos *c, const char *tag, guint n)
{
  g_autofree gchar *path = g_strdup_printf ("%s/%s-%u.err", c->root, tag, n);
  g_autofree gchar *text = NULL;
  if (!g_file_get_contents (path, &text, NULL, NULL))
    return g_strdup ("");
  gsize len = strlen (text);
  return g_strdup (len > 2000 ? text + len - 2000 : text);
}

static gboolean
run_cmd (const char *const *argv, GError **error)
{
  g_autofree gchar *err = NULL;
  gint status = 0;
  if (!g_spawn_sync (NULL, (gchar **) argv, NULL, G_SPAWN_SEARCH_PATH, NULL, NULL, NULL, &err,
                     &status, error))
    return FALSE;
  if (!g_spawn_check_wait_status (status, NULL))
    {
      g_autofree gchar *cmd = g_strjoinv (" ", (gchar **) argv);
      g_set_error (error, CHAOS_ERROR, 1, "%s failed: %s", cmd, err);
      return FALSE;
    }
  return TRUE;
}

static gboolean
script (const char *name, const char *const *args, GError **error)
{
  if (tb_script (name, args, NULL))
    return TRUE;
  g_set_error (error, CHAOS_ERROR, 1, "tests/testbed/%s failed (its stderr is above)", name);
  return FALSE;
}

/* ---- watching results.jsonl ----------------------------------------- */

/* Reads what results.jsonl gained since the last call.  The master
 * rebuilds it at every start (a new file renamed over the old one): a new
 * inode reads from the top; ids already seen keep their first time. */
static void
watch_results (Chaos *c)
{
  g_autofree gchar *path = g_build_filename (c->dir, "results.jsonl", NULL);
  struct stat st;
  if (stat (path, &st) != 0)
    return;
  if ((guint64) st.st_ino != c->results_inode || (guint64) st.st_size < c->results_offset)
    {
      c->results_inode = st.st_ino;
      c->results_offset = 0;
    }
  if ((guint64) st.st_size == c->results_offset)
    return;
  g_autoptr (GFile) f = g_file_new_for_path (path);
  g_autoptr (GFileInputStream) in = g_file_read (f, NULL, NULL);
  if (in == NULL
      || !g_seekable_seek (G_SEEKABLE (in), (goffset) c->results_offset, G_SEEK_SET, NULL, NULL))
    return;
  gsize want = (gsize) st.st_size - c->results_offset, got = 0;
  g_autofree gchar *buf = g_malloc (want + 1);
  if (!g_input_stream_read_all (G_INPUT_STREAM (in), buf, want, &got, NULL, NULL))
    return;
  buf[got] = '\0';
  gint64 now = g_get_real_time ();
  const char *p = buf, *nl;
  /* Only whole lines: a line being written is read next time. */
  while ((nl = strchr (p, '\n')) != NULL)
    {
      if (g_str_has_prefix (p, "{\"id\":"))
        {
          gint64 id = g_ascii_strtoll (p + 6, NULL, 10);
          if (id > 0 && !g_hash_table_contains (c->seen, &id))
            {
              gint64 *k = g_new (gint64, 1), *v = g_new (gint64, 1);
              *k = id;
              *v = now;
              g_hash_table_insert (c->seen, k, v);
            }
        }
      p = nl + 1;
    }
  c->results_offset += (guint64) (p - buf);
}

/* Sleeps `ms`, watching results.jsonl every 50 ms.  FALSE once past the
 * campaign's deadline. */
static gboolean
pause_ms (Chaos *c, guint ms)
{
  gint64 end = g_get_monotonic_time () + (gint64) ms * 1000;
  for (;;)
    {
      gint64 now = g_get_monotonic_time ();
      if (now - c->last_watch >= 50000)
        {
          watch_results (c);
          c->last_watch = now;
        }
      if (now >= c->deadline)
        {
          c->past_deadline = TRUE;
          return FALSE;
        }
      if (now >= end)
        return TRUE;
      g_usleep (MIN (20000, end - now));
    }
}

/* Waits up to `ms` for `p` to end; TRUE if it did. */
static gboolean
await_exit (Chaos *c, GSubprocess *p, guint ms)
{
  gint64 end = g_get_monotonic_time () + (gint64) ms * 1000;
  while (proc_running (p))
    if (g_get_monotonic_time () >= end || !pause_ms (c, 10))
      return !proc_running (p);
  return TRUE;
}

/* ---- the campaign ---------------------------------------------------- */

static gboolean
write_tasks (Chaos *c, GError **error)
{
  g_autoptr (GString) s = g_string_new (NULL);
  g_autofree gchar *qlog = g_shell_quote (c->log);
  /* $PPID in the task's shell is the agent that started it (the runner
   * spawns `/bin/sh -c LINE` itself): it tells which agent each execution
   * ran on.  One echo, one write(2) of < PIPE_BUF on O_APPEND: lines from
   * concurrent tasks never interleave. */
  for (guint i = 1; i <= c->plan->tasks; i++)
    g_string_append_printf (s, "echo \"%u $(date +%%s%%N) $PPID\" >> %s; sleep %u.%03u\n", i, qlog,
                            c->plan->task_ms / 1000, c->plan->task_ms % 1000);
  return g_file_set_contents (c->tasks, s->str, (gssize) s->len, error);
}

static gboolean
start_master (Chaos *c, GError **error)
{
  g_autofree gchar *hb = g_strdup_printf ("%u", c->plan->heartbeat_ms);
  g_autofree gchar *to = g_strdup_printf ("%u", c->plan->timeout_ms);
  g_autofree gchar *agents = g_strdup_printf ("%u", c->plan->local_agents);
  g_autofree gchar *slots = g_strdup_printf ("%u", c->plan->local_slots);
  g_autoptr (GPtrArray) argv = g_ptr_array_new ();
  const char *base[]
      = { tb_datc (), "run", "--dir", c->dir, "--heartbeat-ms", hb, "--agent-timeout-ms", to };
  for (guint i = 0; i < G_N_ELEMENTS (base); i++)
    g_ptr_array_add (argv, (gpointer) base[i]);
  if (c->plan->local_agents > 0)
    {
      g_ptr_array_add (argv, "--local-agents");
      g_ptr_array_add (argv, agents);
      g_ptr_array_add (argv, "--local-slots");
      g_ptr_array_add (argv, slots);
    }
  else
    g_ptr_array_add (argv, "--no-local");
  if (c->listen != NULL)
    {
      g_ptr_array_add (argv, "--listen");
      g_ptr_array_add (argv, c->listen);
    }
  g_ptr_array_add (argv, c->tasks);
  g_ptr_array_add (argv, NULL);
  g_clear_object (&c->master);
  c->master = spawn (c, "master", c->ns_master, (const char *const *) argv->pdata, error);
  c->master_serial = c->serial;
  return c->master != NULL;
}

static gboolean
netns_up (Chaos *c, GError **error)
{
  c->net = g_build_filename (c->root, "net", NULL);
  const char *args[] = { c->net, "agent", NULL };
  if (!script ("netns-up.sh", args, error))
    return FALSE;
  g_autofree gchar *path = g_build_filename (c->net, "netns.env", NULL);
  g_autoptr (GHashTable) env = tb_env_read (path);
  const char *m = env ? g_hash_table_lookup (env, "NETNS_MASTER") : NULL;
  const char *a = env ? g_hash_table_lookup (env, "NETNS_SITE_agent") : NULL;
  const char *s = env ? g_hash_table_lookup (env, "NETNS_SWITCH") : NULL;
  const char *addr = env ? g_hash_table_lookup (env, "NETNS_MASTER_ADDR") : NULL;
  if (m == NULL || a == NULL || s == NULL || addr == NULL)
    {
      g_set_error (error, CHAOS_ERROR, 1,
                   "%s: NETNS_MASTER, NETNS_SITE_agent, NETNS_SWITCH "
                   "or NETNS_MASTER_ADDR missing",
                   path);
      return FALSE;
    }
  c->ns_master = g_strdup (m);
  c->ns_agent = g_strdup (a);
  c->ns_switch = g_strdup (s);
  c->master_addr = g_strdup (addr);
  c->listen = g_strdup_printf ("tcp://%s:0", addr);
  return TRUE;
}

typedef struct {
  const char *path;
} FileWait;

static gboolean
file_has_line (gpointer p)
{
  return tb_count_lines (((FileWait *) p)->path) > 0;
}

/* After the first start: the bound port becomes --listen for every
 * restart (the TCP agent only knows that one), and the TCP agent starts
 * in its namespace with the campaign's keys. */
static gboolean
start_tcp_agent (Chaos *c, GError **error)
{
  g_autofree gchar *ep_path = g_build_filename (c->dir, "endpoint", NULL);
  FileWait w = { ep_path };
  while (!file_has_line (&w))
    if (!proc_running (c->master) || !pause_ms (c, 20))
      {
        g_set_error (error, CHAOS_ERROR, 1, "the master never wrote %s", ep_path);
        return FALSE;
      }
  g_autofree gchar *endpoint = NULL;
  if (!g_file_get_contents (ep_path, &endpoint, NULL, error))
    return FALSE;
  g_strstrip (endpoint);
  g_free (c->listen);
  c->listen = g_strdup (endpoint);

  g_autofree gchar *pub_path = g_build_filename (c->dir, "keys", "master.key.pub", NULL);
  g_autofree gchar *key = g_build_filename (c->dir, "keys", "agents", "default.key", NULL);
  char server_pub[DATC_CURVE_Z85_LEN + 1];
  if (!datc_curve_public_load (server_pub, pub_path, error))
    return FALSE;
  g_autofree gchar *slots = g_strdup_printf ("%u", c->plan->tcp_slots);
  const char *argv[]
      = { tb_agent (), "--connect", endpoint, "--server-key", server_pub, "--key-file",
          key,         "--slots",   slots,    "--site",       "tcp",      "--reconnect-timeout",
          "600",       NULL };
  c->tcp_agent = spawn (c, "tcp-agent", c->ns_agent, argv, error);
  return c->tcp_agent != NULL;
}

static void
add_event (Chaos *c, ChaosCause kind, int pid, gint64 t0, gint64 t1)
{
  Event e = { kind, pid, t0, t1 };
  g_array_append_val (c->events, e);
}

/* A master that ended by itself: 0 is the campaign done; anything else
 * is the driver's business to report. */
static gboolean
master_ended (Chaos *c, GError **error)
{
  int status = proc_status (c->master);
  if (status == 0)
    return TRUE;
  g_autofree gchar *tail = stderr_tail (c, "master", c->master_serial);
  g_set_error (error, CHAOS_ERROR, 1, "datc run exited with %d on its own:\n%s", status, tail);
  return FALSE;
}

/* kill -9 of the master, then the same command again.  *done when the
 * campaign had finished before the kill. */
static gboolean
kill_master (Chaos *c, gboolean *done, GError **error)
{
  *done = FALSE;
  if (!proc_running (c->master))
    {
      *done = TRUE;
      return master_ended (c, error);
    }
  gint64 t = g_get_real_time ();
  g_subprocess_send_signal (c->master, SIGKILL);
  if (!await_exit (c, c->master, 30000))
    {
      g_set_error (error, CHAOS_ERROR, 1, "the master outlived kill -9 by 30 s");
      return FALSE;
    }
  if (proc_status (c->master) != 128 + SIGKILL)
    {
      *done = TRUE;
      return master_ended (c, error);
    }
  if (!start_master (c, error))
    return FALSE;
  add_event (c, CHAOS_CAUSE_MASTER_KILL, 0, t, g_get_real_time ());
  return TRUE;
}

/* A local agent of the campaign at random (not the TCP one, not one
 * stopped); 0 when there is none at the moment. */
static int
pick_local_agent (Chaos *c)
{
  g_autoptr (GArray) all = tb_find_agents (c->dir);
  g_autoptr (GArray) ok = g_array_new (FALSE, FALSE, sizeof (int));
  int tcp = proc_pid (c->tcp_agent);
  for (guint i = 0; i < all->len; i++)
    {
      int pid = g_array_index (all, int, i);
      if (pid > 0 && pid != tcp && pid != c->stopped_pid)
        g_array_append_val (ok, pid);
    }
  if (ok->len == 0)
    return 0;
  return g_array_index (ok, int, g_rand_int_range (c->rand, 0, (gint32) ok->len));
}

static void
kill_agent (Chaos *c)
{
  int pid = pick_local_agent (c);
  gint64 t = g_get_real_time ();
  if (pid > 0 && kill (pid, SIGKILL) == 0)
    add_event (c, CHAOS_CAUSE_AGENT_KILL, pid, t, t);
}

static gboolean
set_link (Chaos *c, gboolean up, GError **error)
{
  const char *argv[]
      = { "ip", "-n", c->ns_switch, "link", "set", AGENT_PORT_ON_SWITCH, up ? "up" : "down", NULL };
  if (!run_cmd (argv, error))
    return FALSE;
  c->link_is_down = !up;
  return TRUE;
}

/* A local agent stopped and the TCP agent's link down, together, for
 * outage_ms: both outlive the agent timeout. */
static gboolean
outage (Chaos *c, GError **error)
{
  gint64 t0 = g_get_real_time ();
  int stopped = 0;
  if (c->plan->stop)
    {
      /* Right after a kill (of the master or of an agent) there may be no
       * local agent for a moment: wait for one (up to 10 s), or the planned
       * stop would silently not happen. */
      gint64 deadline = g_get_monotonic_time () + 10 * G_USEC_PER_SEC;
      while ((stopped = pick_local_agent (c)) == 0 && g_get_monotonic_time () < deadline)
        g_usleep (20 * 1000);
      if (stopped > 0 && kill (stopped, SIGSTOP) == 0)
        c->stopped_pid = stopped;
      else
        stopped = 0;
      t0 = g_get_real_time ();
    }
  gboolean link = c->plan->link_down && proc_running (c->tcp_agent);
  if (link && !set_link (c, FALSE, error))
    return FALSE;
  gboolean in_time = pause_ms (c, c->plan->outage_ms);
  gint64 t1 = g_get_real_time ();
  if (stopped > 0)
    {
      kill (stopped, SIGCONT);
      c->stopped_pid = 0;
      add_event (c, CHAOS_CAUSE_STOP, stopped, t0, t1);
    }
  if (link)
    {
      if (!set_link (c, TRUE, error))
        return FALSE;
      add_event (c, CHAOS_CAUSE_LINK_DOWN, proc_pid (c->tcp_agent), t0, t1);
    }
  (void) in_time; /* past the deadline: drive() stops at its next pause */
  return TRUE;
}

static gboolean
first_result (gpointer p)
{
  Chaos *c = p;
  return g_hash_table_size (c->seen) > 0;
}

/* The schedule: K master kills, J agent kills and the outage in a random
 * order, each after a random pause, from the first recorded result on;
 * then the campaign's end.  Stops early when the campaign finishes. */
static gboolean
drive (Chaos *c, GError **error)
{
  const ChaosPlan *plan = c->plan;
  if (!start_master (c, error))
    return FALSE;
  if (plan->link_down && !start_tcp_agent (c, error))
    return FALSE;
  while (!first_result (c))
    {
      if (!proc_running (c->master))
        return master_ended (c, error);
      if (!pause_ms (c, 20))
        return TRUE;
    }

  g_autoptr (GArray) order = g_array_new (FALSE, FALSE, sizeof (ChaosCause));
  ChaosCause m = CHAOS_CAUSE_MASTER_KILL, a = CHAOS_CAUSE_AGENT_KILL, o = CHAOS_CAUSE_STOP;
  for (guint i = 0; i < plan->master_kills; i++)
    g_array_append_val (order, m);
  for (guint i = 0; i < plan->agent_kills; i++)
    g_array_append_val (order, a);
  if (plan->stop || plan->link_down)
    g_array_append_val (order, o); /* the outage: a stop, a link-down, or both */
  for (guint i = order->len; i > 1; i--)
    {
      guint j = (guint) g_rand_int_range (c->rand, 0, (gint32) i);
      ChaosCause t = g_array_index (order, ChaosCause, i - 1);
      g_array_index (order, ChaosCause, i - 1) = g_array_index (order, ChaosCause, j);
      g_array_index (order, ChaosCause, j) = t;
    }

  for (guint i = 0; i < order->len; i++)
    {
      /* The instant is the point: random, not awaited. */
      if (!pause_ms (c, (guint) g_rand_int_range (c->rand, (gint32) plan->gap_min_ms,
                                                  (gint32) plan->gap_max_ms + 1)))
        return TRUE;
      if (!proc_running (c->master))
        return master_ended (c, error);
      gboolean done = FALSE;
      switch (g_array_index (order, ChaosCause, i))
        {
        case CHAOS_CAUSE_MASTER_KILL:
          if (!kill_master (c, &done, error))
            return FALSE;
          break;
        case CHAOS_CAUSE_AGENT_KILL:
          kill_agent (c);
          break;
        default:
          if (!outage (c, error))
            return FALSE;
          break;
        }
      if (done)
        return TRUE;
    }
  if (!await_exit (c, c->master, G_MAXUINT))
    return TRUE; /* past the deadline: clean_up() kills it, status -1 */
  return master_ended (c, error);
}

/* Whatever happened: continue a stopped agent, restore the link, kill by
 * PID what still runs, take the namespaces down. */
static gboolean
clean_up (Chaos *c, ChaosOutcome *out, GError **error)
{
  gboolean ok = TRUE;
  if (c->stopped_pid > 0)
    kill (c->stopped_pid, SIGCONT);
  if (c->link_is_down)
    {
      g_autoptr (GError) e = NULL;
      set_link (c, TRUE, &e);
    }
  if (c->master != NULL)
    {
      if (proc_running (c->master))
        {
          out->status = -1;
          g_subprocess_send_signal (c->master, SIGKILL);
        }
      else
        out->status = proc_status (c->master);
      g_subprocess_wait (c->master, NULL, NULL);
    }
  if (c->tcp_agent != NULL)
    {
      /* It leaves on the master's BYE; give it the time to. */
      c->deadline = G_MAXINT64;
      if (!await_exit (c, c->tcp_agent, 10000))
        g_subprocess_send_signal (c->tcp_agent, SIGKILL);
      g_subprocess_wait (c->tcp_agent, NULL, NULL);
    }
  tb_kill_agents (c->dir);
  if (c->net != NULL)
    {
      const char *args[] = { c->net, NULL };
      ok = script ("netns-down.sh", args, error);
    }
  return ok;
}

/* WORKDIR/events, "KIND PID T0_US T1_US" per line, to read the log
 * against by hand. */
static void
write_events (Chaos *c)
{
  static const char *const names[] = { "master-kill", "agent-kill", "stop", "link-down", "other" };
  g_autoptr (GString) s = g_string_new (NULL);
  for (guint i = 0; i < c->events->len; i++)
    {
      const Event *e = &g_array_index (c->events, Event, i);
      g_string_append_printf (s, "%s %d %" G_GINT64_FORMAT " %" G_GINT64_FORMAT "\n",
                              names[e->kind], e->pid, e->t0, e->t1);
    }
  g_autofree gchar *path = g_build_filename (c->root, "events", NULL);
  g_file_set_contents (path, s->str, (gssize) s->len, NULL);
}

/* ---- measuring -------------------------------------------------------- */

typedef struct {
  gint64 start; /* µs, real time */
  int pid;      /* the agent */
} Exec;

static gint
exec_cmp (gconstpointer a, gconstpointer b)
{
  gint64 x = ((const Exec *) a)->start, y = ((const Exec *) b)->start;
  return x < y ? -1 : x > y;
}

/* The log as one sorted GArray of Exec per id (index id - 1). */
static GPtrArray *
read_executions (Chaos *c, guint *lines, GError **error)
{
  g_autofree gchar *text = NULL;
  GPtrArray *by_id = g_ptr_array_new_with_free_func ((GDestroyNotify) g_array_unref);
  for (guint i = 0; i < c->plan->tasks; i++)
    g_ptr_array_add (by_id, g_array_new (FALSE, FALSE, sizeof (Exec)));
  *lines = 0;
  if (!g_file_test (c->log, G_FILE_TEST_EXISTS))
    return by_id;
  if (!g_file_get_contents (c->log, &text, NULL, error))
    {
      g_ptr_array_unref (by_id);
      return NULL;
    }
  g_auto (GStrv) l = g_strsplit (text, "\n", -1);
  for (guint i = 0; l[i] != NULL; i++)
    {
      if (l[i][0] == '\0')
        continue;
      gchar *end;
      guint64 id = g_ascii_strtoull (l[i], &end, 10);
      gint64 ns = g_ascii_strtoll (end, &end, 10);
      gint64 pid = g_ascii_strtoll (end, &end, 10);
      if (id == 0 || id > c->plan->tasks || ns <= 0 || pid <= 0 || *end != '\0')
        {
          g_set_error (error, CHAOS_ERROR, 1, "%s:%u: not \"ID START_NS PID\": %s", c->log, i + 1,
                       l[i]);
          g_ptr_array_unref (by_id);
          return NULL;
        }
      Exec e = { ns / 1000, (int) pid };
      g_array_append_val (by_id->pdata[id - 1], e);
      (*lines)++;
    }
  for (guint i = 0; i < by_id->len; i++)
    g_array_sort (by_id->pdata[i], exec_cmp);
  return by_id;
}

static ChaosCause
cause_of (Chaos *c, const Exec *prev, const Exec *cur)
{
  static const ChaosCause order[] = { CHAOS_CAUSE_AGENT_KILL, CHAOS_CAUSE_STOP,
                                      CHAOS_CAUSE_LINK_DOWN, CHAOS_CAUSE_MASTER_KILL };
  /* An agent back from an outage may start a task it held before it,
   * which another agent took meanwhile: the outage's, within a second
   * of its end. */
  const gint64 back = G_USEC_PER_SEC;
  for (guint k = 0; k < G_N_ELEMENTS (order); k++)
    for (guint i = 0; i < c->events->len; i++)
      {
        const Event *e = &g_array_index (c->events, Event, i);
        if (e->kind != order[k] || e->t0 > cur->start)
          continue;
        switch (e->kind)
          {
          case CHAOS_CAUSE_AGENT_KILL:
            if (e->pid == prev->pid && e->t0 >= prev->start)
              return e->kind;
            break;
          case CHAOS_CAUSE_STOP:
          case CHAOS_CAUSE_LINK_DOWN:
            if ((e->pid == prev->pid || e->pid == cur->pid) && prev->start <= e->t1 + back)
              return e->kind;
            break;
          default:
            /* The execution before ran when the master died, or started
             * (prefetched) before its agent was back with the new one,
             * which takes up to a timeout after the restart. */
            if (prev->start <= e->t1 + (gint64) c->plan->timeout_ms * 1000)
              return e->kind;
            break;
          }
      }
  return CHAOS_CAUSE_OTHER;
}

static gboolean
measure (Chaos *c, ChaosOutcome *out, GError **error)
{
  out->tasks = c->plan->tasks;
  g_autoptr (GPtrArray) ex = read_executions (c, &out->executions, error);
  if (ex == NULL)
    return FALSE;

  /* Per id: lines in results.jsonl and the earliest `finished`. */
  g_autofree guint *lines = g_new0 (guint, c->plan->tasks);
  g_autofree gint64 *finished = g_new0 (gint64, c->plan->tasks);
  g_autofree gchar *path = g_build_filename (c->dir, "results.jsonl", NULL);
  g_autofree gchar *text = NULL;
  if (g_file_test (path, G_FILE_TEST_EXISTS) && !g_file_get_contents (path, &text, NULL, error))
    return FALSE;
  g_auto (GStrv) l = g_strsplit (text ? text : "", "\n", -1);
  g_autoptr (JsonParser) parser = json_parser_new ();
  for (guint i = 0; l[i] != NULL; i++)
    {
      if (l[i][0] == '\0')
        continue;
      JsonNode *root;
      if (!json_parser_load_from_data (parser, l[i], -1, error))
        {
          g_prefix_error (error, "%s:%u: ", path, i + 1);
          return FALSE;
        }
      root = json_parser_get_root (parser);
      JsonObject *o = JSON_NODE_HOLDS_OBJECT (root) ? json_node_get_object (root) : NULL;
      gint64 id = o ? json_object_get_int_member_with_default (o, "id", 0) : 0;
      if (id < 1 || id > (gint64) c->plan->tasks)
        {
          g_set_error (error, CHAOS_ERROR, 1, "%s:%u: no task id in 1..%u", path, i + 1,
                       c->plan->tasks);
          return FALSE;
        }
      gint64 fin = json_object_get_int_member_with_default (o, "finished", 0);
      if (lines[id - 1]++ == 0 || fin < finished[id - 1])
        finished[id - 1] = fin;
      if (g_strcmp0 (json_object_get_string_member_with_default (o, "status", ""), "exited") != 0
          || json_object_get_int_member_with_default (o, "exit_code", -1) != 0)
        out->not_ok++;
    }
  for (guint i = 0; i < c->plan->tasks; i++)
    out->duplicate_lines += lines[i] > 1 ? lines[i] - 1 : 0;

  for (guint i = 0; i < c->plan->tasks; i++)
    {
      GArray *e = ex->pdata[i];
      gint64 id = i + 1;
      if (lines[i] == 0)
        out->lost++;
      else if (e->len == 0)
        out->unlogged++;
      for (guint k = 1; k < e->len; k++)
        {
          const Exec *prev = &g_array_index (e, Exec, k - 1), *cur = &g_array_index (e, Exec, k);
          out->reruns++;
          out->reruns_by_cause[cause_of (c, prev, cur)]++;
        }
      if (lines[i] == 0)
        continue;
      const gint64 *seen = g_hash_table_lookup (c->seen, &id);
      for (guint k = 0; k < e->len; k++)
        {
          const Exec *x = &g_array_index (e, Exec, k);
          if (x->start <= finished[i])
            continue;
          out->reruns_after_result++;
          if (seen != NULL && x->start > *seen)
            out->reruns_after_recorded++;
          if (out->example == NULL)
            out->example = g_strdup_printf (
                "task %" G_GINT64_FORMAT ": its recorded result finished at %" G_GINT64_FORMAT
                " us (line seen %s%.3f s later), yet an execution started %.3f s after that, "
                "on agent pid %d",
                id, finished[i], seen ? "" : "never; ",
                seen ? (double) (*seen - finished[i]) / 1e6 : 0.0,
                (double) (x->start - finished[i]) / 1e6, x->pid);
        }
    }
  for (guint i = 0; i < c->events->len; i++)
    switch (g_array_index (c->events, Event, i).kind)
      {
      case CHAOS_CAUSE_MASTER_KILL:
        out->master_kills++;
        break;
      case CHAOS_CAUSE_AGENT_KILL:
        out->agent_kills++;
        break;
      case CHAOS_CAUSE_STOP:
        out->stops++;
        break;
      case CHAOS_CAUSE_LINK_DOWN:
        out->link_downs++;
        break;
      default:
        break;
      }
  return TRUE;
}

gboolean
chaos_measure (const char *workdir, guint tasks, ChaosOutcome *out, GError **error)
{
  memset (out, 0, sizeof *out);
  ChaosPlan plan;
  chaos_plan_init (&plan);
  plan.tasks = tasks;
  Chaos c = {
    .plan = &plan,
    .dir = g_build_filename (workdir, "c", NULL),
    .log = g_build_filename (workdir, "executions", NULL),
    .events = g_array_new (FALSE, FALSE, sizeof (Event)),
    .seen = g_hash_table_new_full (g_int64_hash, g_int64_equal, g_free, g_free),
  };
  gboolean ok = measure (&c, out, error);
  g_free (c.dir);
  g_free (c.log);
  g_array_unref (c.events);
  g_hash_table_unref (c.seen);
  return ok;
}

/* ---- the whole ---------------------------------------------------------- */

gboolean
chaos_run (const char *workdir, const ChaosPlan *plan, ChaosOutcome *out, GError **error)
{
  g_return_val_if_fail (plan->tasks > 0 && plan->gap_min_ms <= plan->gap_max_ms, FALSE);
  memset (out, 0, sizeof *out);
  Chaos c = {
    .plan = plan,
    .root = g_strdup (workdir),
    .dir = g_build_filename (workdir, "c", NULL),
    .log = g_build_filename (workdir, "executions", NULL),
    .tasks = g_build_filename (workdir, "tasks.txt", NULL),
    .rand = g_rand_new_with_seed (plan->seed),
    .events = g_array_new (FALSE, FALSE, sizeof (Event)),
    .seen = g_hash_table_new_full (g_int64_hash, g_int64_equal, g_free, g_free),
  };
  gint64 started = g_get_monotonic_time ();
  c.deadline = started + (gint64) plan->deadline_s * G_USEC_PER_SEC;

  g_autoptr (GError) drive_error = NULL, clean_error = NULL, measure_error = NULL;
  gboolean ok = write_tasks (&c, &drive_error) && (!plan->link_down || netns_up (&c, &drive_error))
                && drive (&c, &drive_error);
  out->seconds = (double) (g_get_monotonic_time () - started) / G_USEC_PER_SEC;
  gboolean cleaned = clean_up (&c, out, &clean_error);
  write_events (&c);
  if (c.past_deadline)
    out->status = -1;
  gboolean measured = measure (&c, out, &measure_error);

  g_free (c.root);
  g_free (c.dir);
  g_free (c.log);
  g_free (c.tasks);
  g_free (c.net);
  g_free (c.ns_master);
  g_free (c.ns_agent);
  g_free (c.ns_switch);
  g_free (c.master_addr);
  g_free (c.listen);
  g_clear_object (&c.master);
  g_clear_object (&c.tcp_agent);
  g_rand_free (c.rand);
  g_array_unref (c.events);
  g_hash_table_unref (c.seen);

  /* The first failure is the one to report. */
  if (!ok)
    g_propagate_error (error, g_steal_pointer (&drive_error));
  else if (!cleaned)
    g_propagate_error (error, g_steal_pointer (&clean_error));
  else if (!measured)
    g_propagate_error (error, g_steal_pointer (&measure_error));
  return ok && cleaned && measured;
}

void
chaos_outcome_clear (ChaosOutcome *out)
{
  g_clear_pointer (&out->example, g_free);
}

static void
print_rate (FILE *f, const char *name, guint reruns, guint kills)
{
  if (kills > 0)
    fprintf (f, "%-34s %.2f\n", name, (double) reruns / kills);
  else
    fprintf (f, "%-34s -\n", name);
}

void
chaos_outcome_print (const ChaosOutcome *o, FILE *f)
{
  fprintf (f, "%-34s %u\n", "tasks", o->tasks);
  fprintf (f, "%-34s %d\n", "exit_status", o->status);
  fprintf (f, "%-34s %.1f\n", "seconds", o->seconds);
  fprintf (f, "%-34s %u\n", "master_kills", o->master_kills);
  fprintf (f, "%-34s %u\n", "agent_kills", o->agent_kills);
  fprintf (f, "%-34s %u\n", "agent_stops", o->stops);
  fprintf (f, "%-34s %u\n", "link_downs", o->link_downs);
  fprintf (f, "%-34s %u\n", "lost_results", o->lost);
  fprintf (f, "%-34s %u\n", "duplicate_result_lines", o->duplicate_lines);
  fprintf (f, "%-34s %u\n", "reruns_after_result", o->reruns_after_result);
  fprintf (f, "%-34s %u\n", "reruns_after_result_seen", o->reruns_after_recorded);
  fprintf (f, "%-34s %u\n", "results_not_ok", o->not_ok);
  fprintf (f, "%-34s %u\n", "results_never_logged", o->unlogged);
  fprintf (f, "%-34s %u\n", "executions", o->executions);
  fprintf (f, "%-34s %u\n", "reruns", o->reruns);
  fprintf (f, "%-34s %u\n", "reruns_master_kill", o->reruns_by_cause[CHAOS_CAUSE_MASTER_KILL]);
  fprintf (f, "%-34s %u\n", "reruns_agent_kill", o->reruns_by_cause[CHAOS_CAUSE_AGENT_KILL]);
  fprintf (f, "%-34s %u\n", "reruns_stop", o->reruns_by_cause[CHAOS_CAUSE_STOP]);
  fprintf (f, "%-34s %u\n", "reruns_link_down", o->reruns_by_cause[CHAOS_CAUSE_LINK_DOWN]);
  fprintf (f, "%-34s %u\n", "reruns_other", o->reruns_by_cause[CHAOS_CAUSE_OTHER]);
  print_rate (f, "reruns_per_master_kill", o->reruns_by_cause[CHAOS_CAUSE_MASTER_KILL],
              o->master_kills);
  print_rate (f, "reruns_per_agent_kill", o->reruns_by_cause[CHAOS_CAUSE_AGENT_KILL],
              o->agent_kills);
  print_rate (f, "reruns_per_kill",
              o->reruns_by_cause[CHAOS_CAUSE_MASTER_KILL]
                  + o->reruns_by_cause[CHAOS_CAUSE_AGENT_KILL],
              o->master_kills + o->agent_kills);
  if (o->example != NULL)
    fprintf (f, "# %s\n", o->example);
}
