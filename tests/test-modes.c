/* test-modes.c: the site manager on fork sites over TCP (real datc, real
 * agents; the batch-system versions of these are in the testbed suite):
 * pull, static and direct give the same results, each the way it claims;
 * proxies near their walltime are replaced ahead of time; failing sites
 * are shown degraded while the campaign completes elsewhere; proxies that
 * never start are cancelled once the work left fits in running slots. */
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "harness.h"

/* trace.jsonl as an array of objects (ref'd). */
static GPtrArray *
read_trace (const char *dir)
{
  g_autofree gchar *path = g_build_filename (dir, "trace.jsonl", NULL);
  g_autofree gchar *text = NULL;
  GPtrArray *events = g_ptr_array_new_with_free_func ((GDestroyNotify) json_object_unref);
  g_assert_true (g_file_get_contents (path, &text, NULL, NULL));
  g_auto (GStrv) lines = g_strsplit (text, "\n", -1);
  for (guint i = 0; lines[i]; i++)
    {
      if (lines[i][0] == '\0')
        continue;
      g_autoptr (JsonParser) p = json_parser_new ();
      g_assert_true (json_parser_load_from_data (p, lines[i], -1, NULL));
      g_ptr_array_add (events, json_object_ref (json_node_get_object (json_parser_get_root (p))));
    }
  return events;
}

static const char *
str_member (JsonObject *o, const char *name)
{
  return json_object_has_member (o, name) ? json_object_get_string_member (o, name) : "";
}

static guint
count_events (GPtrArray *trace, const char *event, const char *site)
{
  guint n = 0;
  for (guint i = 0; i < trace->len; i++)
    {
      JsonObject *o = trace->pdata[i];
      n += g_str_equal (str_member (o, "event"), event)
           && (site == NULL || g_str_equal (str_member (o, "site"), site));
    }
  return n;
}

static gint64
event_time (GPtrArray *trace, const char *event)
{
  for (guint i = 0; i < trace->len; i++)
    if (g_str_equal (str_member (trace->pdata[i], "event"), event))
      return json_object_get_int_member (trace->pdata[i], "time");
  return 0;
}

/* A task file of `n` copies of `line` (tasks are told apart by id). */
static gchar *
same_tasks (TbDir *d, guint n, const char *line)
{
  g_autoptr (GString) t = g_string_new (NULL);
  for (guint i = 0; i < n; i++)
    g_string_append_printf (t, "%s\n", line);
  return tb_write (d, "t.txt", t->str);
}

static gchar *
run_campaign_within (TbDir *d, const char *name, const char *sites, const char *tasks,
                     const char *mode, int want_status, guint timeout_s)
{
  gchar *dir = g_build_filename (d->path, name, NULL);
  const char *argv[]
      = { tb_datc (), "run", "--dir", dir, "--sites", sites, "--mode", mode, tasks, NULL };
  g_autofree gchar *err = NULL;
  int status = tb_run (d, argv, timeout_s, &err);
  if (status != want_status)
    g_printerr ("%s", err);
  g_assert_cmpint (status, ==, want_status);
  g_autoptr (GArray) left = tb_find_agents (dir);
  g_assert_cmpuint (left->len, ==, 0);
  return dir;
}

static gchar *
run_campaign (TbDir *d, const char *name, const char *sites, const char *tasks, const char *mode,
              int want_status)
{
  return run_campaign_within (d, name, sites, tasks, mode, want_status, 180);
}

static gchar *
output_of (TbDir *d, const char *dir, gint64 id)
{
  g_autofree gchar *ids = g_strdup_printf ("%" G_GINT64_FORMAT, id);
  const char *argv[] = { tb_datc (), "output", dir, ids, NULL };
  g_autoptr (TbProc) p = tb_spawn (d, "output", argv);
  g_assert_cmpint (tb_wait (p, 30), ==, 0);
  return tb_proc_stdout (p);
}

/* ---- modes ---------------------------------------------------------- */

#define MODE_TASKS 36

static const char *const mode_sites
    = "[master]\nlisten = tcp://127.0.0.1:0\n\n"
      "[site alpha]\nscheduler = fork\nslots_per_proxy = 2\nmax_proxies = 2\n\n"
      "[site beta]\nscheduler = fork\nslots_per_proxy = 1\nmax_proxies = 2\n";

/* Per site, how many results it produced. */
static guint
results_at (GHashTable *res, const char *site)
{
  guint n = 0;
  GHashTableIter it;
  gpointer v;
  g_hash_table_iter_init (&it, res);
  while (g_hash_table_iter_next (&it, NULL, &v))
    n += g_str_equal (json_object_get_string_member (v, "site"), site);
  return n;
}

/* The largest number of proxies of `site` alive at once, from the trace. */
static guint
max_alive (GPtrArray *trace, const char *site)
{
  guint alive = 0, most = 0;
  for (guint i = 0; i < trace->len; i++)
    {
      JsonObject *o = trace->pdata[i];
      if (!g_str_equal (str_member (o, "site"), site))
        continue;
      if (g_str_equal (str_member (o, "event"), "proxy_submitted"))
        {
          alive++;
          most = MAX (most, alive);
        }
      else if (g_str_equal (str_member (o, "event"), "proxy_ended") && alive > 0)
        alive--;
    }
  return most;
}

static void
test_same_results_in_every_mode (void)
{
  g_autoptr (TbDir) d = tb_dir_new ();
  g_autoptr (GString) t = g_string_new (NULL);
  for (guint i = 1; i <= MODE_TASKS; i++)
    g_string_append_printf (t, "sh -c 'sleep 0.05; echo task %u; exit %u'\n", i, i % 7 == 0);
  g_autofree gchar *tasks = tb_write (d, "t.txt", t->str);
  g_autofree gchar *sites = tb_write (d, "sites.ini", mode_sites);
  const char *modes[] = { "pull", "static", "direct" };
  g_autoptr (GHashTable) first = NULL;
  g_autofree gchar *first_dir = NULL;

  for (guint m = 0; m < G_N_ELEMENTS (modes); m++)
    {
      /* Every 7th task exits 1: the campaign's status is 1 in all modes. */
      g_autofree gchar *dir = run_campaign (d, modes[m], sites, tasks, modes[m], 1);
      g_autoptr (GHashTable) res = tb_results (dir);
      g_autoptr (GPtrArray) trace = read_trace (dir);
      g_assert_cmpuint (g_hash_table_size (res), ==, MODE_TASKS);
      /* The trace says the mode, so `analyze trace` models the one that ran. */
      for (guint i = 0; i < trace->len; i++)
        if (g_str_equal (str_member (trace->pdata[i], "event"), "campaign_started"))
          g_assert_cmpstr (str_member (trace->pdata[i], "mode"), ==, modes[m]);
      g_assert_cmpuint (count_events (trace, "campaign_started", NULL), ==, 1);

      if (g_str_equal (modes[m], "static"))
        {
          /* The split follows capacity (4 : 2) and each site ran exactly
           * its share. */
          guint split_alpha = 0, split_beta = 0;
          for (guint i = 0; i < trace->len; i++)
            if (g_str_equal (str_member (trace->pdata[i], "event"), "split"))
              {
                guint n = (guint) json_object_get_int_member (trace->pdata[i], "tasks");
                if (g_str_equal (str_member (trace->pdata[i], "site"), "alpha"))
                  split_alpha = n;
                else
                  split_beta = n;
              }
          g_assert_cmpuint (split_alpha, ==, MODE_TASKS * 2 / 3);
          g_assert_cmpuint (split_beta, ==, MODE_TASKS / 3);
          g_assert_cmpuint (results_at (res, "alpha"), ==, split_alpha);
          g_assert_cmpuint (results_at (res, "beta"), ==, split_beta);
        }
      if (g_str_equal (modes[m], "direct"))
        {
          /* One single-slot job per task, never more than max_proxies x
           * slots_per_proxy of them alive per site, each agent ran
           * exactly one task. */
          g_assert_cmpuint (count_events (trace, "proxy_submitted", NULL), ==, MODE_TASKS);
          g_assert_cmpuint (max_alive (trace, "alpha"), <=, 4);
          g_assert_cmpuint (max_alive (trace, "beta"), <=, 2);
          g_autoptr (GHashTable) per_proxy = g_hash_table_new (g_str_hash, g_str_equal);
          GHashTableIter it;
          gpointer v;
          g_hash_table_iter_init (&it, res);
          while (g_hash_table_iter_next (&it, NULL, &v))
            {
              const char *proxy = json_object_get_string_member (v, "proxy");
              g_assert_false (g_hash_table_contains (per_proxy, proxy));
              g_hash_table_add (per_proxy, (gpointer) proxy);
            }
          for (guint i = 0; i < trace->len; i++)
            if (g_str_equal (str_member (trace->pdata[i], "event"), "proxy_submitted"))
              g_assert_cmpint (json_object_get_int_member (trace->pdata[i], "slots"), ==, 1);
        }
      /* Nothing of the campaign is left: every proxy submitted ended. */
      g_assert_cmpuint (count_events (trace, "proxy_ended", NULL), ==,
                        count_events (trace, "proxy_submitted", NULL));

      if (first == NULL)
        {
          first = g_hash_table_ref (res);
          first_dir = g_strdup (dir);
          continue;
        }
      /* Identical result sets: same ids, exit codes and outputs. */
      GHashTableIter it;
      gpointer k, v;
      g_hash_table_iter_init (&it, res);
      while (g_hash_table_iter_next (&it, &k, &v))
        {
          JsonObject *a = g_hash_table_lookup (first, k);
          g_assert_nonnull (a);
          g_assert_cmpint (json_object_get_int_member (a, "exit_code"), ==,
                           json_object_get_int_member (v, "exit_code"));
          gint64 id = json_object_get_int_member (v, "id");
          g_autofree gchar *out_a = output_of (d, first_dir, id);
          g_autofree gchar *out_b = output_of (d, dir, id);
          g_assert_cmpstr (out_a, ==, out_b);
          g_autofree gchar *want = g_strdup_printf ("task %" G_GINT64_FORMAT "\n", id);
          g_assert_cmpstr (out_b, ==, want);
        }
    }
}

/* ---- walltime ------------------------------------------------------- */

/* Proxies of 8 s (their agents drain 3 s before the end) on a site that
 * allows one at a time, for about 12 s of work: several generations, each
 * replacement submitted before the proxy it replaces has ended, and no
 * task lost or run twice. */
static void
test_walltime_generations (void)
{
  g_autoptr (TbDir) d = tb_dir_new ();
  g_autofree gchar *tasks = same_tasks (d, 120, "sleep 0.2");
  g_autofree gchar *sites = tb_write (d, "sites.ini",
                                      "[master]\nlisten = tcp://127.0.0.1:0\n\n"
                                      "[site short]\nscheduler = fork\nslots_per_proxy = 2\n"
                                      "max_proxies = 1\nwalltime = 8s\n");
  g_autofree gchar *dir = run_campaign (d, "c", sites, tasks, "pull", 0);
  g_autoptr (GHashTable) res = tb_results (dir);
  g_assert_cmpuint (g_hash_table_size (res), ==, 120);
  g_autoptr (GPtrArray) trace = read_trace (dir);

  guint generations = count_events (trace, "proxy_submitted", "short");
  g_assert_cmpuint (generations, >=, 3);
  /* Ahead of time: at some point two proxies were alive although the
   * site's max_proxies is 1 (the old one expiring). */
  g_assert_cmpuint (max_alive (trace, "short"), ==, 2);
  /* No agent was lost: expiring agents drained and left. */
  g_assert_cmpuint (count_events (trace, "agent_lost", NULL), ==, 0);
}

/* The first event `event` about `proxy` (borrowed), NULL if none. */
static JsonObject *
proxy_event (GPtrArray *trace, const char *event, const char *proxy)
{
  for (guint i = 0; i < trace->len; i++)
    {
      JsonObject *o = trace->pdata[i];
      if (g_str_equal (str_member (o, "event"), event)
          && g_str_equal (str_member (o, "proxy"), proxy))
        return o;
    }
  return NULL;
}

/* Two tasks that outlive their proxy (slow on their first attempt only):
 * the proxy's replacement, submitted ahead of its walltime, finds the
 * bag empty (both tasks run on the old proxy) and is kept waiting, not
 * sent away, so the tasks that come back when the old agent drains run
 * there at once.  Sent away, its site would submit proxy after proxy
 * whose agents leave at once (and on a batch site spend its scheduler
 * calls on them) while the tasks waited. */
static void
test_replacement_waits_for_returning_tasks (void)
{
  g_autoptr (TbDir) d = tb_dir_new ();
  GString *t = g_string_new (NULL);
  for (guint i = 1; i <= 2; i++)
    {
      g_autofree gchar *mark = g_strdup_printf ("%s/started.%u", d->path, i);
      g_string_append_printf (t, "if [ -e %s ]; then echo again; else touch %s; sleep 600; fi\n",
                              mark, mark);
    }
  g_autofree gchar *text = g_string_free (t, FALSE);
  g_autofree gchar *tasks = tb_write (d, "t.txt", text);
  g_autofree gchar *sites = tb_write (d, "sites.ini",
                                      "[master]\nlisten = tcp://127.0.0.1:0\n\n"
                                      "[site short]\nscheduler = fork\nslots_per_proxy = 2\n"
                                      "max_proxies = 1\nwalltime = 8s\n");
  g_autofree gchar *dir = run_campaign (d, "c", sites, tasks, "pull", 0);
  g_autoptr (GHashTable) res = tb_results (dir);
  g_assert_cmpuint (g_hash_table_size (res), ==, 2);
  g_autoptr (GPtrArray) trace = read_trace (dir);

  /* One replacement, no more. */
  g_assert_cmpuint (count_events (trace, "proxy_submitted", "short"), ==, 2);
  JsonObject *first = NULL, *second = NULL;
  for (guint i = 0; i < trace->len; i++)
    if (g_str_equal (str_member (trace->pdata[i], "event"), "proxy_submitted"))
      {
        if (first == NULL)
          first = trace->pdata[i];
        else
          second = trace->pdata[i];
      }
  const char *old = str_member (first, "proxy"), *repl = str_member (second, "proxy");
  /* The replacement's agent was there before the old one drained, and
   * still there when the tasks came back: it ran both, on their second
   * attempt.  (The old agent may leave after it: it waits for the ACKs of
   * what it gave back, and the campaign can end first.) */
  JsonObject *old_exit = proxy_event (trace, "agent_exited", old);
  JsonObject *repl_connect = proxy_event (trace, "agent_connected", repl);
  g_assert_nonnull (old_exit);
  g_assert_nonnull (repl_connect);
  g_assert_cmpint (json_object_get_int_member (repl_connect, "time"), <,
                   json_object_get_int_member (old_exit, "time"));
  GHashTableIter it;
  gpointer v;
  g_hash_table_iter_init (&it, res);
  while (g_hash_table_iter_next (&it, NULL, &v))
    {
      g_assert_cmpstr (json_object_get_string_member (v, "proxy"), ==, repl);
      g_assert_cmpint (json_object_get_int_member (v, "attempt"), ==, 2);
    }
}

/* Real time of the n-th (from 1) proxy_submitted event of `site`, 0 if none. */
static gint64
nth_submit_time (GPtrArray *trace, const char *site, guint n)
{
  for (guint i = 0; i < trace->len; i++)
    {
      JsonObject *o = trace->pdata[i];
      if (g_str_equal (str_member (o, "event"), "proxy_submitted")
          && g_str_equal (str_member (o, "site"), site) && --n == 0)
        return json_object_get_int_member (o, "time");
    }
  return 0;
}

/* Two proxies that start together come near their walltime together: each
 * makes room for its own replacement, so both replacements are submitted
 * at once (within the second their walltime ends may differ by), not one
 * of them only once the first replacement itself nears its end (half its
 * life, over 2 s here) while the other's slots go missing. */
static void
test_every_expiring_proxy_replaced (void)
{
  g_autoptr (TbDir) d = tb_dir_new ();
  g_autofree gchar *tasks = same_tasks (d, 140, "sleep 0.2");
  g_autofree gchar *sites = tb_write (d, "sites.ini",
                                      "[master]\nlisten = tcp://127.0.0.1:0\n\n"
                                      "[site short]\nscheduler = fork\nslots_per_proxy = 2\n"
                                      "max_proxies = 2\nwalltime = 8s\n");
  g_autofree gchar *dir = run_campaign (d, "c", sites, tasks, "pull", 0);
  g_autoptr (GHashTable) res = tb_results (dir);
  g_assert_cmpuint (g_hash_table_size (res), ==, 140);
  g_autoptr (GPtrArray) trace = read_trace (dir);
  gint64 third = nth_submit_time (trace, "short", 3), fourth = nth_submit_time (trace, "short", 4);
  g_assert_cmpint (third, >, 0);
  g_assert_cmpint (fourth, >, 0);
  g_assert_cmpint (fourth - third, <, 3 * G_USEC_PER_SEC / 2);
  g_assert_cmpuint (max_alive (trace, "short"), >=, 4);
  g_assert_cmpuint (count_events (trace, "agent_lost", NULL), ==, 0);
}

/* In direct mode every proxy is bound to its one task: one near its
 * walltime makes no room for a replacement, and the site never has more
 * than max_proxies x slots_per_proxy one-slot jobs queued or running,
 * walltime or not: the slots pull would have (2 x 2 here), not
 * max_proxies jobs only. */
static void
test_direct_never_over_max_proxies (void)
{
  g_autoptr (TbDir) d = tb_dir_new ();
  g_autofree gchar *tasks = same_tasks (d, 8, "sleep 2");
  g_autofree gchar *sites = tb_write (d, "sites.ini",
                                      "[master]\nlisten = tcp://127.0.0.1:0\n\n"
                                      "[site short]\nscheduler = fork\nslots_per_proxy = 2\n"
                                      "max_proxies = 2\nwalltime = 6s\n");
  g_autofree gchar *dir = run_campaign (d, "c", sites, tasks, "direct", 0);
  g_autoptr (GHashTable) res = tb_results (dir);
  g_assert_cmpuint (g_hash_table_size (res), ==, 8);
  g_autoptr (GPtrArray) trace = read_trace (dir);
  g_assert_cmpuint (count_events (trace, "proxy_submitted", "short"), >=, 8);
  /* Tasks of 2 s, four at a time: the cap is reached, never exceeded. */
  g_assert_cmpuint (max_alive (trace, "short"), ==, 4);
  for (guint i = 0; i < trace->len; i++)
    if (g_str_equal (str_member (trace->pdata[i], "event"), "proxy_submitted"))
      g_assert_cmpint (json_object_get_int_member (trace->pdata[i], "slots"), ==, 1);
}

typedef struct {
  const char *dir;
  guint64 want;
} ResultLines;

static gboolean
has_results (gpointer p)
{
  ResultLines *r = p;
  g_autofree gchar *path = g_build_filename (r->dir, "results.jsonl", NULL);
  return tb_count_lines (path) >= r->want;
}

/* Files under `dir` that process `pid` holds open. */
static guint
open_files_under (int pid, const char *dir)
{
  g_autofree gchar *fds = g_strdup_printf ("/proc/%d/fd", pid);
  g_autoptr (GDir) d = g_dir_open (fds, 0, NULL);
  g_assert_nonnull (d);
  guint n = 0;
  const char *name;
  while ((name = g_dir_read_name (d)) != NULL)
    {
      g_autofree gchar *link = g_build_filename (fds, name, NULL);
      g_autofree gchar *target = g_file_read_link (link, NULL);
      n += target != NULL && g_str_has_prefix (target, dir);
    }
  return n;
}

/* In direct mode every agent is released by the master (BYE) once its one
 * task is done: each of the 300 leaves the way every agent leaves, and the
 * master keeps none of their output files open (it used to keep one per
 * agent released that way until the campaign ended). */
static void
test_direct_released_agents_hold_no_file (void)
{
  g_autoptr (TbDir) d = tb_dir_new ();
  const guint n = 300;
  g_autofree gchar *tasks = same_tasks (d, n, "echo out");
  g_autofree gchar *dir = g_build_filename (d->path, "c", NULL);
  g_autofree gchar *outputs = g_build_filename (dir, "outputs", NULL);
  const char *argv[] = { tb_datc (), "run",           "--dir", dir,   "--mode", "direct",
                         "--open",   "--local-slots", "4",     tasks, NULL };
  g_autoptr (TbProc) master = tb_spawn (d, "master", argv);
  ResultLines r = { dir, n };
  g_assert_true (tb_await (has_results, &r, 180));
  /* Every agent has been released once its BYE went out; the last few
   * files close with the commit after their departure. */
  g_autoptr (GPtrArray) trace = NULL;
  for (guint i = 0; i < 200; i++)
    {
      g_clear_pointer (&trace, g_ptr_array_unref);
      trace = read_trace (dir);
      if (count_events (trace, "agent_exited", NULL) >= n
          && open_files_under (tb_proc_pid (master), outputs) == 0)
        break;
      g_usleep (50 * 1000);
    }
  g_assert_cmpuint (count_events (trace, "agent_exited", NULL), >=, n);
  g_assert_cmpuint (open_files_under (tb_proc_pid (master), outputs), ==, 0);
  const char *close_argv[] = { tb_datc (), "close", dir, NULL };
  g_assert_cmpint (tb_run (d, close_argv, 30, NULL), ==, 0);
  g_assert_cmpint (tb_wait (master, 60), ==, 0);
}

/* ---- degraded ------------------------------------------------------- */

typedef struct {
  TbDir *d;
  const char *dir;
  const char *site;
  gboolean died_early; /* the site degrades by proxies ending before their agent connects */
  gboolean seen;
} StatusWatch;

/* `datc status DIR --json` says the site is degraded. */
static gboolean
site_shown_degraded (gpointer data)
{
  StatusWatch *w = data;
  const char *argv[] = { tb_datc (), "status", w->dir, "--json", NULL };
  g_autoptr (TbProc) p = tb_spawn (w->d, "status", argv);
  if (tb_wait (p, 30) != 0)
    return FALSE;
  g_autofree gchar *out = tb_proc_stdout (p);
  g_autoptr (JsonParser) parser = json_parser_new ();
  if (!json_parser_load_from_data (parser, out, -1, NULL))
    return FALSE;
  JsonObject *st = json_node_get_object (json_parser_get_root (parser));
  if (!json_object_has_member (st, "sites"))
    return FALSE;
  JsonArray *sites = json_object_get_array_member (st, "sites");
  for (guint i = 0; i < json_array_get_length (sites); i++)
    {
      JsonObject *s = json_array_get_object_element (sites, i);
      if (g_str_equal (str_member (s, "name"), w->site)
          && g_str_equal (str_member (s, "state"), "degraded")
          && !json_object_get_null_member (s, "last_error"))
        {
          /* Three in a row degrade it, and each is counted. */
          if (w->died_early)
            g_assert_cmpint (json_object_get_int_member (s, "proxies_died_early"), >=, 3);
          return w->seen = TRUE;
        }
    }
  return FALSE;
}

/* A site whose proxies die before connecting, one whose submits fail, and
 * one whose login node does not answer: the campaign completes on the
 * good site, and the bad ones are degraded (trace, and live status). */
static void
test_degraded_sites (void)
{
  g_autoptr (TbDir) d = tb_dir_new ();
  g_autofree gchar *tasks = same_tasks (d, 60, "sleep 0.25");
  g_autofree gchar *known = tb_write (d, "known_hosts", "");
  g_autofree gchar *ini = g_strdup_printf (
      "[master]\nlisten = tcp://127.0.0.1:0\n\n"
      "[site good]\nscheduler = fork\nslots_per_proxy = 1\n\n"
      "[site dies]\nscheduler = fork\nagent = /bin/false\n\n"
      "[site refuses]\nscheduler = fork\nworkdir = /proc/datc-cannot-be-here\n\n"
      "[site down]\ntransport = ssh\nhost = 127.0.0.1\nport = 9\nknown_hosts = %s\n"
      "scheduler = slurm\n",
      known);
  g_autofree gchar *sites = tb_write (d, "sites.ini", ini);
  g_autofree gchar *dir = g_build_filename (d->path, "c", NULL);
  const char *argv[] = { tb_datc (), "run", "--dir", dir, "--sites", sites, tasks, NULL };
  g_autoptr (TbProc) run = tb_spawn (d, "run", argv);

  StatusWatch w = { d, dir, "dies", TRUE, FALSE };
  g_assert_true (tb_await (site_shown_degraded, &w, 60));
  /* The text status says it too, with the count of proxies that ended
   * before their agent connected. */
  const char *st_argv[] = { tb_datc (), "status", dir, NULL };
  g_autoptr (TbProc) st = tb_spawn (d, "status", st_argv);
  g_assert_cmpint (tb_wait (st, 30), ==, 0);
  g_autofree gchar *text = tb_proc_stdout (st);
  g_assert_nonnull (strstr (text, "site dies is degraded: "));
  g_assert_nonnull (strstr (text, "NOAGENT: proxies that ended before their agent connected"));
  g_assert_cmpint (tb_wait (run, 120), ==, 0);

  g_autoptr (GHashTable) res = tb_results (dir);
  g_assert_cmpuint (g_hash_table_size (res), ==, 60);
  g_assert_cmpuint (results_at (res, "good"), ==, 60);
  g_autoptr (GPtrArray) trace = read_trace (dir);
  const char *bad[] = { "dies", "refuses", "down" };
  for (guint i = 0; i < G_N_ELEMENTS (bad); i++)
    {
      if (count_events (trace, "site_degraded", bad[i]) != 1)
        g_printerr ("%s", tb_proc_stderr (run));
      g_assert_cmpuint (count_events (trace, "site_degraded", bad[i]), ==, 1);
    }
  g_assert_cmpuint (count_events (trace, "site_degraded", "good"), ==, 0);
  /* The error names what went wrong, in the scheduler's or transport's
   * own words. */
  for (guint i = 0; i < trace->len; i++)
    {
      JsonObject *o = trace->pdata[i];
      if (!g_str_equal (str_member (o, "event"), "site_degraded"))
        continue;
      const char *e = str_member (o, "error");
      if (g_str_equal (str_member (o, "site"), "dies"))
        g_assert_nonnull (strstr (e, "ended before its agent connected"));
      else
        g_assert_cmpuint (strlen (e), >, 0);
    }
}

/* ---- cancel pending ------------------------------------------------- */

/* A site whose proxies start but never connect (an agent stuck in a queue
 * looks the same to the master): once the good site's running slots can
 * take all the work left, its proxies are cancelled, well before the last
 * task ends. */
static void
test_pending_cancelled_when_work_fits (void)
{
  g_autoptr (TbDir) d = tb_dir_new ();
  g_autofree gchar *stuck = tb_write (d, "stuck-agent", "#!/bin/sh\nexec sleep 600\n");
  g_assert_cmpint (chmod (stuck, 0755), ==, 0);
  g_autoptr (GString) t = g_string_new (NULL);
  for (guint i = 1; i <= 20; i++)
    g_string_append (t, "sleep 0.05\n");
  g_string_append (t, "sleep 4\n");
  g_autofree gchar *tasks = tb_write (d, "t.txt", t->str);
  g_autofree gchar *ini
      = g_strdup_printf ("[master]\nlisten = tcp://127.0.0.1:0\n\n"
                         "[site good]\nscheduler = fork\nslots_per_proxy = 2\n\n"
                         "[site stuck]\nscheduler = fork\nmax_proxies = 2\nagent = %s\n",
                         stuck);
  g_autofree gchar *sites = tb_write (d, "sites.ini", ini);
  g_autofree gchar *dir = run_campaign (d, "c", sites, tasks, "pull", 0);
  g_autoptr (GPtrArray) trace = read_trace (dir);

  g_assert_cmpuint (count_events (trace, "proxy_submitted", "stuck"), >=, 1);
  gint64 finished = event_time (trace, "campaign_finished");
  guint early = 0;
  for (guint i = 0; i < trace->len; i++)
    {
      JsonObject *o = trace->pdata[i];
      if (g_str_equal (str_member (o, "event"), "proxy_cancelled")
          && g_str_equal (str_member (o, "site"), "stuck"))
        {
          g_assert_cmpstr (str_member (o, "reason"), ==, "the work left fits in the running slots");
          early += json_object_get_int_member (o, "time") < finished - 2 * G_USEC_PER_SEC;
        }
    }
  g_assert_cmpuint (early, ==, count_events (trace, "proxy_submitted", "stuck"));
  /* Cancelled proxies are not failures of the site. */
  g_assert_cmpuint (count_events (trace, "site_degraded", "stuck"), ==, 0);
}

/* ---- agents nothing fits ------------------------------------------ */

/* The first site's agents end too soon for any task (est_runtime 120 s,
 * walltime 40 s); their free slots are no room for the work, so the
 * second site, without walltime, gets a proxy at once and runs it all,
 * instead of the first site's fresh agents idling to their walltime and
 * being replaced by more of the same. */
static void
test_slots_nothing_fits_are_not_capacity (void)
{
  g_autoptr (TbDir) d = tb_dir_new ();
  g_autofree gchar *tasks = tb_write (d, "t.jsonl",
                                      "{\"sh\": \"echo one\", \"est_runtime\": 120}\n"
                                      "{\"sh\": \"echo two\", \"est_runtime\": 120}\n");
  g_autofree gchar *sites = tb_write (d, "sites.ini",
                                      "[master]\nlisten = tcp://127.0.0.1:0\n\n"
                                      "[site short]\nscheduler = fork\nslots_per_proxy = 4\n"
                                      "max_proxies = 1\nwalltime = 40s\n\n"
                                      "[site long]\nscheduler = fork\nslots_per_proxy = 1\n"
                                      "max_proxies = 1\n");
  /* Well before the short site's first agent would reach its walltime. */
  g_autofree gchar *dir = run_campaign_within (d, "c", sites, tasks, "pull", 0, 25);
  g_autoptr (GHashTable) res = tb_results (dir);
  g_assert_cmpuint (g_hash_table_size (res), ==, 2);
  g_assert_cmpuint (results_at (res, "long"), ==, 2);
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  g_test_add_func ("/modes/same-results-in-pull-static-direct", test_same_results_in_every_mode);
  g_test_add_func ("/modes/walltime-generations", test_walltime_generations);
  g_test_add_func ("/modes/every-expiring-proxy-replaced", test_every_expiring_proxy_replaced);
  g_test_add_func ("/modes/replacement-waits-for-the-tasks-it-replaces",
                   test_replacement_waits_for_returning_tasks);
  g_test_add_func ("/modes/direct-never-over-max-proxies", test_direct_never_over_max_proxies);
  g_test_add_func ("/modes/direct-released-agents-hold-no-file",
                   test_direct_released_agents_hold_no_file);
  g_test_add_func ("/modes/degraded-sites", test_degraded_sites);
  g_test_add_func ("/modes/pending-cancelled-when-work-fits",
                   test_pending_cancelled_when_work_fits);
  g_test_add_func ("/modes/slots-nothing-fits-are-not-capacity",
                   test_slots_nothing_fits_are_not_capacity);
  return g_test_run ();
}
