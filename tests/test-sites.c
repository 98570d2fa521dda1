/* test-sites.c: campaigns described by a SITES.ini: several sites at once
 * (fork scheduler over the local transport, agents over TCP with CURVE),
 * a broken site that must not be hammered, and a bad file refused. */
#include <glib/gstdio.h>
#include <signal.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "harness.h"
#include "qbets.h"

static gchar *
tasks_file (TbDir *d, guint n)
{
  g_autoptr (GString) s = g_string_new (NULL);
  for (guint i = 0; i < n; i++)
    g_string_append (s, "sleep 0.05\n");
  return tb_write (d, "t.txt", s->str);
}

static guint
count_events (const char *dir, const char *event, const char *site)
{
  g_autofree gchar *path = g_build_filename (dir, "trace.jsonl", NULL);
  g_autofree gchar *text = NULL;
  guint n = 0;
  if (!g_file_get_contents (path, &text, NULL, NULL))
    return 0;
  g_autofree gchar *ev = g_strdup_printf ("\"event\":\"%s\"", event);
  g_autofree gchar *st = g_strdup_printf ("\"site\":\"%s\"", site);
  g_auto (GStrv) lines = g_strsplit (text, "\n", -1);
  for (guint i = 0; lines[i]; i++)
    n += strstr (lines[i], ev) && strstr (lines[i], st);
  return n;
}

static void
test_two_sites (void)
{
  g_autoptr (TbDir) d = tb_dir_new ();
  g_autofree gchar *file = tasks_file (d, 80);
  g_autofree gchar *sites = tb_write (d, "sites.ini",
                                      "[master]\nlisten = tcp://127.0.0.1:0\n\n"
                                      "[site alpha]\nscheduler = fork\nslots_per_proxy = 2\n"
                                      "max_proxies = 2\n\n"
                                      "[site beta]\nscheduler = fork\nslots_per_proxy = 3\n");
  g_autofree gchar *dir = g_build_filename (d->path, "c", NULL);
  const char *argv[] = { tb_datc (), "run", "--dir", dir, "--sites", sites, file, NULL };
  g_autofree gchar *err = NULL;
  int status = tb_run (d, argv, 120, &err);
  if (status != 0)
    g_printerr ("%s", err);
  g_assert_cmpint (status, ==, 0);

  g_autoptr (GHashTable) res = tb_results (dir);
  g_assert_cmpuint (g_hash_table_size (res), ==, 80);
  guint per_site[2] = { 0, 0 };
  GHashTableIter it;
  gpointer v;
  g_hash_table_iter_init (&it, res);
  while (g_hash_table_iter_next (&it, NULL, &v))
    {
      const char *site = json_object_get_string_member (v, "site");
      g_assert_true (g_str_equal (site, "alpha") || g_str_equal (site, "beta"));
      per_site[g_str_equal (site, "beta")]++;
    }
  /* Both sites pulled work. */
  g_assert_cmpuint (per_site[0], >, 0);
  g_assert_cmpuint (per_site[1], >, 0);
  /* Agents came over TCP (the endpoint is tcp) and nothing is left. */
  g_autofree gchar *ep_file = g_build_filename (dir, "endpoint", NULL);
  g_autofree gchar *ep = NULL;
  g_assert_true (g_file_get_contents (ep_file, &ep, NULL, NULL));
  g_assert_true (g_str_has_prefix (ep, "tcp://127.0.0.1:"));
  g_assert_cmpuint (count_events (dir, "proxy_submitted", "alpha"), <=, 2);
  g_assert_cmpuint (count_events (dir, "proxy_submitted", "beta"), <=, 1);
  g_autoptr (GArray) left = tb_find_agents (dir);
  g_assert_cmpuint (left->len, ==, 0);
}

static void
test_broken_site_backs_off (void)
{
  g_autoptr (TbDir) d = tb_dir_new ();
  g_autofree gchar *file = tasks_file (d, 60);
  g_autofree gchar *sites = tb_write (d, "sites.ini",
                                      "[master]\nlisten = tcp://127.0.0.1:0\n\n"
                                      "[site good]\nscheduler = fork\nslots_per_proxy = 2\n\n"
                                      "[site broken]\nscheduler = fork\nslots_per_proxy = 2\n"
                                      "agent = /bin/false\n\n"
                                      "[site missing]\nscheduler = fork\n"
                                      "agent = /nonexistent/datc-agent\n");
  g_autofree gchar *dir = g_build_filename (d->path, "c", NULL);
  const char *argv[] = { tb_datc (), "run", "--dir", dir, "--sites", sites, file, NULL };
  g_autofree gchar *err = NULL;
  int status = tb_run (d, argv, 120, &err);
  if (status != 0)
    g_printerr ("%s", err);
  g_assert_cmpint (status, ==, 0);
  g_autoptr (GHashTable) res = tb_results (dir);
  g_assert_cmpuint (g_hash_table_size (res), ==, 60);
  /* Its proxies died before connecting: reported, and resubmitted only
   * with backoff (1 s, 2 s, 4 s, ...), not in a loop. */
  g_assert_nonnull (strstr (err, "site broken: proxy"));
  g_assert_nonnull (strstr (err, "ended before its agent connected"));
  guint broken = count_events (dir, "proxy_submitted", "broken");
  g_assert_cmpuint (broken, >=, 1);
  g_assert_cmpuint (broken, <=, 5);
  /* An agent path that is not on the site is named, and no proxy is
   * submitted only to die there. */
  g_assert_nonnull (strstr (err, "agent /nonexistent/datc-agent not found on site missing"));
  g_assert_cmpuint (count_events (dir, "proxy_submitted", "missing"), ==, 0);
}

static gboolean
site_degraded (gpointer dir)
{
  return count_events (dir, "site_degraded", "broken") > 0;
}

/* With no master running, `datc status` still says which site was degraded
 * and why, from the trace (it used to show no site at all). */
static void
test_offline_status_keeps_site_errors (void)
{
  g_autoptr (TbDir) d = tb_dir_new ();
  /* More than the good site's one agent takes (1 slot and its prefetch),
   * so work keeps waiting and the broken site is tried again. */
  g_autoptr (GString) t = g_string_new (NULL);
  for (guint i = 0; i < 12; i++)
    g_string_append (t, "sleep 60\n");
  g_autofree gchar *file = tb_write (d, "t.txt", t->str);
  g_autofree gchar *sites = tb_write (d, "sites.ini",
                                      "[master]\nlisten = tcp://127.0.0.1:0\n\n"
                                      "[site good]\nscheduler = fork\nslots_per_proxy = 1\n\n"
                                      "[site broken]\nscheduler = fork\nslots_per_proxy = 1\n"
                                      "agent = /bin/false\n");
  g_autofree gchar *dir = g_build_filename (d->path, "c", NULL);
  const char *argv[] = { tb_datc (), "run", "--dir", dir, "--sites", sites, file, NULL };
  g_autoptr (TbProc) master = tb_spawn (d, "master", argv);
  g_assert_true (tb_await (site_degraded, dir, 90));
  g_assert_true (tb_proc_signal (master, SIGTERM));
  tb_wait (master, 60);

  const char *text_argv[] = { tb_datc (), "status", dir, NULL };
  g_autoptr (TbProc) text = tb_spawn (d, "status", text_argv);
  g_assert_cmpint (tb_wait (text, 60), ==, 0);
  g_autofree gchar *out = tb_proc_stdout (text);
  g_assert_nonnull (strstr (out, "no master running"));
  g_assert_nonnull (strstr (out, "site broken was degraded when the master stopped: proxy "));
  g_assert_nonnull (strstr (out, "ended before its agent connected"));
  g_assert_null (strstr (out, "site good "));

  g_autoptr (JsonObject) st = tb_status (dir);
  g_assert_nonnull (st);
  JsonArray *list = json_object_get_array_member (st, "sites");
  g_assert_cmpuint (json_array_get_length (list), ==, 1);
  JsonObject *s = json_array_get_object_element (list, 0);
  g_assert_cmpstr (json_object_get_string_member (s, "name"), ==, "broken");
  g_assert_cmpstr (json_object_get_string_member (s, "state"), ==, "degraded");
  g_assert_nonnull (
      strstr (json_object_get_string_member (s, "last_error"), "ended before its agent connected"));
}

/* Site `name` in the live status of the campaign in `dir` (transfer
 * full), or NULL: no master answers, or no such site. */
static JsonObject *
live_site (const char *dir, const char *name)
{
  g_autoptr (JsonObject) st = tb_status (dir);
  JsonArray *sites = st ? json_object_get_array_member (st, "sites") : NULL;
  for (guint i = 0; sites && i < json_array_get_length (sites); i++)
    {
      JsonObject *s = json_array_get_object_element (sites, i);
      if (g_str_equal (json_object_get_string_member (s, "name"), name))
        return json_object_ref (s);
    }
  return NULL;
}

typedef struct {
  const char *dir;
  JsonObject *site; /* its last live status of site "tight" */
} BudgetWatch;

static gboolean
waits_for_calls (gpointer data)
{
  BudgetWatch *w = data;
  g_autoptr (JsonObject) s = live_site (w->dir, "tight");
  if (s == NULL || !json_object_get_boolean_member (s, "waiting_for_calls"))
    return FALSE;
  w->site = g_steal_pointer (&s);
  return TRUE;
}

/* A site whose budget (4 calls a minute, 2 kept for the end) allows one
 * submit: status shows the calls of the last minute against it, and says
 * that a submit waits for it. */
static void
test_status_shows_the_call_budget (void)
{
  g_autoptr (TbDir) d = tb_dir_new ();
  g_autoptr (GString) t = g_string_new (NULL);
  for (guint i = 0; i < 6; i++)
    g_string_append (t, "sleep 60\n");
  g_autofree gchar *file = tb_write (d, "t.txt", t->str);
  g_autofree gchar *sites = tb_write (d, "sites.ini",
                                      "[master]\nlisten = tcp://127.0.0.1:0\n\n"
                                      "[site tight]\nscheduler = fork\nslots_per_proxy = 1\n"
                                      "max_proxies = 3\nmax_calls_per_minute = 4\n");
  g_autofree gchar *dir = g_build_filename (d->path, "c", NULL);
  const char *argv[] = { tb_datc (), "run", "--dir", dir, "--sites", sites, file, NULL };
  g_autoptr (TbProc) master = tb_spawn (d, "master", argv);
  BudgetWatch w = { dir, NULL };
  g_assert_true (tb_await (waits_for_calls, &w, 60));
  g_assert_cmpint (json_object_get_int_member (w.site, "max_calls_per_minute"), ==, 4);
  g_assert_cmpint (json_object_get_int_member (w.site, "calls_last_minute"), ==, 2);
  g_assert_cmpint (json_object_get_int_member (
                       json_object_get_object_member (w.site, "commands_by_kind"), "submit"),
                   ==, 1);
  json_object_unref (w.site);

  const char *text_argv[] = { tb_datc (), "status", dir, NULL };
  g_autoptr (TbProc) text = tb_spawn (d, "status", text_argv);
  g_assert_cmpint (tb_wait (text, 60), ==, 0);
  g_autofree gchar *out = tb_proc_stdout (text);
  g_assert_nonnull (strstr (out, "  BUDGET/MINUTE\ntight "));
  g_assert_nonnull (strstr (out, "  2/4\n"));
  g_assert_nonnull (strstr (out, "site tight: a submit waits for its budget (2 calls taken in the "
                                 "last minute, max_calls_per_minute = 4)\n"));
  g_assert_true (tb_proc_signal (master, SIGTERM));
  tb_wait (master, 60);
}

typedef struct {
  const char *dir;
  guint want;        /* observations the bound should rest on */
  JsonObject *bound; /* site "here"'s queue_wait_bound once it does */
} BoundWatch;

static gboolean
bound_rests_on (gpointer data)
{
  BoundWatch *w = data;
  g_autoptr (JsonObject) s = live_site (w->dir, "here");
  JsonObject *b = s != NULL ? json_object_get_object_member (s, "queue_wait_bound") : NULL;
  if (b == NULL || json_object_get_int_member (b, "observations") != (gint64) w->want)
    return FALSE;
  w->bound = json_object_ref (b);
  return TRUE;
}

/* Queue waits outlive the campaign: a per-user cache ($XDG_CACHE_HOME/
 * datc/waits.jsonl) holds 80 earlier waits of site "here" (1..80 s) and
 * one of another queue; the campaign's status bounds the site's wait
 * (QBETS, 0.95 quantile at 0.95 confidence) on those and its own proxy's,
 * and its own wait is in the cache afterwards. */
static void
test_status_bounds_the_queue_wait_from_earlier_campaigns (void)
{
  g_autoptr (TbDir) d = tb_dir_new ();
  g_autofree gchar *cache = g_build_filename (d->path, "xdg-cache", NULL);
  g_autofree gchar *cache_dir = g_build_filename (cache, "datc", NULL);
  g_autofree gchar *cache_file = g_build_filename (cache_dir, "waits.jsonl", NULL);
  g_assert_cmpint (g_mkdir_with_parents (cache_dir, 0700), ==, 0);
  g_autoptr (GString) earlier = g_string_new (NULL);
  for (guint i = 1; i <= 80; i++)
    g_string_append_printf (earlier, "{\"site\":\"here|fork|\",\"wait_s\":%u,\"time\":%u}\n", i,
                            1000 + i);
  g_string_append (earlier, "{\"site\":\"here|fork|other\",\"wait_s\":9999,\"time\":999}\n");
  g_assert_true (g_file_set_contents (cache_file, earlier->str, -1, NULL));

  g_autofree gchar *file = tb_write (d, "t.txt", "sleep 60\n");
  g_autofree gchar *sites = tb_write (d, "sites.ini",
                                      "[master]\nlisten = tcp://127.0.0.1:0\n\n"
                                      "[site here]\nscheduler = fork\nslots_per_proxy = 1\n"
                                      "max_proxies = 1\n");
  g_autofree gchar *dir = g_build_filename (d->path, "c", NULL);
  g_autofree gchar *xdg = g_strdup_printf ("XDG_CACHE_HOME=%s", cache);
  const char *argv[]
      = { "env", xdg, tb_datc (), "run", "--dir", dir, "--sites", sites, file, NULL };
  g_autoptr (TbProc) master = tb_spawn (d, "master", argv);
  BoundWatch w = { dir, 81, NULL };
  g_assert_true (tb_await (bound_rests_on, &w, 60));
  /* Of the 81 sorted waits (its own, well under a second, first), the
   * order statistic QBETS picks, which is the wait of k - 1 s. */
  guint64 k = datc_qbets_index (81, 0.95, 0.95);
  g_assert_cmpuint (k, >, 1);
  g_assert_cmpfloat (json_object_get_double_member (w.bound, "bound_s"), ==, (double) (k - 1));
  g_assert_cmpint (json_object_get_int_member (w.bound, "needed"), ==, 59);
  json_object_unref (w.bound);
  const char *text_argv[] = { tb_datc (), "status", dir, NULL };
  g_autoptr (TbProc) text = tb_spawn (d, "status", text_argv);
  g_assert_cmpint (tb_wait (text, 60), ==, 0);
  g_autofree gchar *out = tb_proc_stdout (text);
  g_autofree gchar *line = g_strdup_printf ("site here: 95 %% of queue waits end within %u s "
                                            "(QBETS, 95 %% confidence, 81 waits of this and "
                                            "earlier campaigns)\n",
                                            (guint) (k - 1));
  g_assert_nonnull (strstr (out, line));
  g_assert_true (tb_proc_signal (master, SIGTERM));
  tb_wait (master, 60);

  /* Its own wait went to the cache, after the earlier ones. */
  g_autofree gchar *cached = NULL;
  g_assert_true (g_file_get_contents (cache_file, &cached, NULL, NULL));
  g_auto (GStrv) lines = g_strsplit (g_strstrip (cached), "\n", -1);
  g_assert_cmpuint (g_strv_length (lines), ==, 82);
  g_assert_nonnull (strstr (lines[81], "\"site\":\"here|fork|\""));
}

/* Proxies go where they are predicted to start soonest: the cache says
 * site "slow" (first in the sites file) kept proxies 100 s in its queue
 * 80 times, "fast" 1 s; the one proxy the campaign needs is submitted to
 * "fast".  (Without the earlier waits, the file's order: "slow".) */
static void
test_proxies_go_where_they_start_soonest (void)
{
  g_autoptr (TbDir) d = tb_dir_new ();
  g_autofree gchar *cache = g_build_filename (d->path, "xdg-cache", NULL);
  g_autofree gchar *cache_dir = g_build_filename (cache, "datc", NULL);
  g_autofree gchar *cache_file = g_build_filename (cache_dir, "waits.jsonl", NULL);
  g_assert_cmpint (g_mkdir_with_parents (cache_dir, 0700), ==, 0);
  g_autoptr (GString) earlier = g_string_new (NULL);
  for (guint i = 1; i <= 80; i++)
    g_string_append_printf (earlier,
                            "{\"site\":\"slow|fork|\",\"wait_s\":100,\"time\":%u}\n"
                            "{\"site\":\"fast|fork|\",\"wait_s\":1,\"time\":%u}\n",
                            1000 + i, 1000 + i);
  g_assert_true (g_file_set_contents (cache_file, earlier->str, -1, NULL));
  g_autofree gchar *file = tb_write (d, "t.txt", "true\ntrue\n");
  g_autofree gchar *sites = tb_write (d, "sites.ini",
                                      "[master]\nlisten = tcp://127.0.0.1:0\n\n"
                                      "[site slow]\nscheduler = fork\nslots_per_proxy = 2\n"
                                      "max_proxies = 1\n\n"
                                      "[site fast]\nscheduler = fork\nslots_per_proxy = 2\n"
                                      "max_proxies = 1\n");
  g_autofree gchar *dir = g_build_filename (d->path, "c", NULL);
  const char *argv[] = { tb_datc (), "run", "--dir", dir, "--sites", sites, file, NULL };
  g_autoptr (TbProc) master = tb_spawn (d, "master", argv);
  g_assert_cmpint (tb_wait (master, 60), ==, 0);
  g_autofree gchar *trace = g_build_filename (dir, "trace.jsonl", NULL);
  g_autofree gchar *text = NULL;
  g_assert_true (g_file_get_contents (trace, &text, NULL, NULL));
  const char *first = strstr (text, "\"event\":\"proxy_submitted\"");
  g_assert_nonnull (first);
  const char *eol = strchr (first, '\n');
  g_autofree gchar *line = g_strndup (first, eol != NULL ? (gsize) (eol - first) : strlen (first));
  g_assert_nonnull (strstr (line, "\"site\":\"fast\""));
  g_assert_cmpuint (count_events (dir, "proxy_submitted", "slow"), ==, 0);
}

static gboolean
two_unreachable_reads (gpointer dir)
{
  return count_events (dir, "agent_unreachable", "far") >= 2;
}

static gboolean
status_says_unreachable (gpointer data)
{
  BudgetWatch *w = data;
  g_autoptr (JsonObject) s = live_site (w->dir, "far");
  if (s == NULL
      || json_object_get_string_member_with_default (s, "agents_cannot_reach", NULL) == NULL)
    return FALSE;
  w->site = g_steal_pointer (&s);
  return TRUE;
}

/* Agents told an address where nothing listens (the master listens on
 * 127.0.0.1 only, they are told 127.0.0.2): the jobs run, no agent
 * connects.  After connect_wait the master reads the proxies' logs on the
 * site and names the problem in its stderr (once for the site, though
 * both proxies' logs say it) and in `datc status` (--json and text). */
static void
test_unreachable_master_is_reported (void)
{
  g_autoptr (TbDir) d = tb_dir_new ();
  g_autofree gchar *file = tasks_file (d, 4);
  g_autofree gchar *sites
      = tb_write (d, "sites.ini",
                  "[master]\nlisten = tcp://127.0.0.1:0\nadvertise = 127.0.0.2\n\n"
                  "[site far]\nscheduler = fork\nslots_per_proxy = 1\n"
                  "max_proxies = 2\nconnect_wait = 1s\n");
  g_autofree gchar *dir = g_build_filename (d->path, "c", NULL);
  const char *argv[] = { tb_datc (), "run", "--dir", dir, "--sites", sites, file, NULL };
  g_autoptr (TbProc) master = tb_spawn (d, "master", argv);
  BudgetWatch w = { dir, NULL };
  g_assert_true (tb_await (status_says_unreachable, &w, 30));
  const char *what = json_object_get_string_member (w.site, "agents_cannot_reach");
  g_assert_true (g_str_has_prefix (what, "tcp://127.0.0.2:"));
  g_assert_true (g_str_has_suffix (what, ": Connection refused"));
  g_assert_cmpstr (json_object_get_string_member (w.site, "state"), ==, "degraded");
  const char *error = json_object_get_string_member (w.site, "last_error");
  g_assert_nonnull (strstr (error, " but its agent cannot reach tcp://127.0.0.2:"));
  g_assert_nonnull (strstr (error, "set [master] advertise"));
  json_object_unref (w.site);

  const char *text_argv[] = { tb_datc (), "status", dir, NULL };
  g_autoptr (TbProc) text = tb_spawn (d, "status", text_argv);
  g_assert_cmpint (tb_wait (text, 60), ==, 0);
  g_autofree gchar *out = tb_proc_stdout (text);
  g_assert_nonnull (strstr (out, "site far is degraded: job "));

  /* Both proxies' logs were read; the master said it once. */
  g_assert_true (tb_await (two_unreachable_reads, dir, 60));
  g_autofree gchar *err = tb_proc_stderr (master);
  const char *said = strstr (err, "site far: job ");
  g_assert_nonnull (said);
  g_assert_nonnull (strstr (said, "cannot reach tcp://127.0.0.2:"));
  g_assert_null (strstr (said + 1, "site far: job "));
  g_assert_true (tb_proc_signal (master, SIGTERM));
  tb_wait (master, 60);
}

static void
test_bad_sites_file (void)
{
  g_autoptr (TbDir) d = tb_dir_new ();
  g_autofree gchar *file = tasks_file (d, 1);
  g_autofree gchar *sites = tb_write (d, "sites.ini", "[site x]\nscheduler = nope\n");
  g_autofree gchar *dir = g_build_filename (d->path, "c", NULL);
  const char *argv[] = { tb_datc (), "run", "--dir", dir, "--sites", sites, file, NULL };
  g_autofree gchar *err = NULL;
  g_assert_cmpint (tb_run (d, argv, 30, &err), ==, 2);
  g_autofree gchar *want = g_strdup_printf ("%s:2: unknown scheduler \"nope\"", sites);
  g_assert_nonnull (strstr (err, want));
  g_assert_false (g_file_test (dir, G_FILE_TEST_EXISTS));
}

static void
test_sites_check (void)
{
  g_autoptr (TbDir) d = tb_dir_new ();
  g_autofree gchar *good = tb_write (d, "good.ini",
                                     "[master]\nlisten = tcp://127.0.0.1:0\n"
                                     "[site alpha]\nscheduler = fork\nqueue = ignored\n");
  g_autofree gchar *bad = tb_write (d, "bad.ini",
                                    "[master]\nlisten = tcp://127.0.0.1:0\n"
                                    "[site beta]\nscheduler = fork\nagent = /nonexistent/agent\n"
                                    "[site pool]\nscheduler = condor\nqueue = vanilla\n");
  const char *a1[] = { tb_datc (), "sites", "check", good, "--probe", NULL };
  g_autoptr (TbProc) p1 = tb_spawn (d, "check", a1);
  g_assert_cmpint (tb_wait (p1, 120), ==, 0);
  g_autofree gchar *out1 = tb_proc_stdout (p1);
  g_assert_nonnull (strstr (out1, "a proxy ran one task and ended"));
  g_assert_nonnull (strstr (out1, "0 checks failed"));
  /* fork ignores a queue: nothing to ask. */
  g_assert_nonnull (strstr (out1, "alpha          queue exists           ok   not applicable: "
                                  "fork has no queues"));

  const char *a2[] = { tb_datc (), "sites", "check", bad, NULL };
  g_autoptr (TbProc) p2 = tb_spawn (d, "check", a2);
  g_assert_cmpint (tb_wait (p2, 60), ==, 1);
  g_autofree gchar *out2 = tb_proc_stdout (p2);
  g_assert_nonnull (strstr (out2, "agent deployable       FAIL agent /nonexistent/agent not "
                                  "found on site beta"));
  /* HTCondor refuses a queue: the check says so before any proxy would. */
  g_assert_nonnull (
      strstr (out2, "pool           queue exists           FAIL HTCondor has no queues"));
  /* Its commands go through `sh -c`, yet each program is looked for (this
   * machine has no HTCondor). */
  static const char *const condor[]
      = { "condor_submit", "condor_q", "condor_history", "condor_rm" };
  for (guint i = 0; i < G_N_ELEMENTS (condor); i++)
    {
      g_autofree gchar *what = g_strdup_printf ("%s found", condor[i]);
      g_autofree gchar *want
          = g_strdup_printf ("%-14s %-22s %-4s %s", "pool", what, "FAIL", "not on the PATH");
      g_assert_nonnull (strstr (out2, want));
    }
}

/* The line `datc sites check` prints for one check (transfer full). */
static gchar *
check_line (const char *site, const char *check, gboolean ok, const char *detail)
{
  return g_strdup_printf ("%-14s %-22s %-4s %s\n", site, check, ok ? "ok" : "FAIL", detail);
}

/* The workdir is where a campaign puts proxy scripts, logs, the agent and
 * its key: a place that cannot be made or written, or that is another's
 * or open to others, fails the check (it used to say "0 checks failed"
 * and let the campaign fail every submit), and no probe is run there. */
static void
test_sites_check_workdir (void)
{
  g_autoptr (TbDir) d = tb_dir_new ();
  g_autofree gchar *file = tb_write (d, "afile", "");
  g_autofree gchar *under_file = g_build_filename (file, "datc", NULL);
  g_autofree gchar *open_dir = g_build_filename (d->path, "open", NULL);
  g_autofree gchar *good = g_build_filename (d->path, "good", NULL);
  g_autofree gchar *fresh = g_build_filename (good, "new", "datc", NULL);
  g_assert_cmpint (g_mkdir (open_dir, 0755), ==, 0);
  g_assert_cmpint (chmod (open_dir, 0755), ==, 0);
  g_assert_cmpint (g_mkdir (good, 0700), ==, 0);
  g_autofree gchar *ini = g_strdup_printf ("[master]\nlisten = tcp://127.0.0.1:0\n"
                                           "[site file]\nscheduler = fork\nworkdir = %s\n"
                                           "[site open]\nscheduler = fork\nworkdir = %s\n"
                                           "[site good]\nscheduler = fork\nworkdir = %s\n"
                                           "[site fresh]\nscheduler = fork\nworkdir = %s\n"
                                           "[site rel]\nscheduler = fork\nworkdir = datc\n",
                                           under_file, open_dir, good, fresh);
  g_autofree gchar *sites = tb_write (d, "sites.ini", ini);
  const char *argv[] = { tb_datc (), "sites", "check", sites, "--probe", NULL };
  g_autoptr (TbProc) p = tb_spawn (d, "check", argv);
  g_assert_cmpint (tb_wait (p, 120), ==, 1);
  g_autofree gchar *out = tb_proc_stdout (p);
  g_autofree gchar *no_dir
      = g_strdup_printf ("cannot create %s: %s is not a directory", under_file, file);
  g_autofree gchar *is_open
      = g_strdup_printf ("%s is drwxr-xr-x, open to other users: chmod 700 it", open_dir);
  g_autofree gchar *is_good = g_strdup_printf ("%s: yours, 0700, writable", good);
  g_autofree gchar *can = g_strdup_printf ("%s: can be created (0700) in %s", fresh, good);
  struct {
    const char *site;
    gboolean ok;
    const char *detail;
  } want[] = {
    { "file", FALSE, no_dir },
    { "open", FALSE, is_open },
    { "good", TRUE, is_good },
    { "fresh", TRUE, can },
    { "rel", FALSE, "site rel: workdir 'datc': not an absolute path (nor ~/...)" },
  };
  for (guint i = 0; i < G_N_ELEMENTS (want); i++)
    {
      g_autofree gchar *l
          = check_line (want[i].site, "workdir writable", want[i].ok, want[i].detail);
      g_assert_nonnull (strstr (out, l));
    }
  g_autofree gchar *not_run
      = check_line ("file", "probe", FALSE, "not run: the checks above failed");
  g_assert_nonnull (strstr (out, not_run));
  g_assert_nonnull (strstr (out, "good           probe                  ok   "
                                 "a proxy ran one task and ended"));
  g_assert_nonnull (strstr (out, "6 checks failed"));

  /* A login user who cannot write where the workdir would go (a root-owned
   * directory, like /root/datc): as another user when we are root, else
   * a directory we made read-only. */
  g_autofree gchar *closed = g_build_filename (d->path, "closed", NULL);
  g_autofree gchar *inside = g_build_filename (closed, "datc", NULL);
  g_assert_cmpint (g_mkdir (closed, 0555), ==, 0);
  g_assert_cmpint (chmod (closed, 0555), ==, 0);
  g_autofree gchar *ini2
      = g_strdup_printf ("[site locked]\nscheduler = fork\nworkdir = %s\n", inside);
  g_autofree gchar *sites2 = tb_write (d, "locked.ini", ini2);
  g_autoptr (TbProc) p2 = NULL;
  if (geteuid () == 0)
    {
      g_assert_cmpint (chmod (d->path, 0755), ==, 0);
      g_assert_cmpint (chmod (sites2, 0644), ==, 0);
      const char *a2[] = { "setpriv",  "--reuid=65534", "--regid=65534", "--clear-groups", "--",
                           tb_datc (), "sites",         "check",         sites2,           NULL };
      p2 = tb_spawn (d, "locked", a2);
    }
  else
    {
      const char *a2[] = { tb_datc (), "sites", "check", sites2, NULL };
      p2 = tb_spawn (d, "locked", a2);
    }
  g_assert_cmpint (tb_wait (p2, 60), ==, 1);
  g_autofree gchar *out2 = tb_proc_stdout (p2);
  g_autofree gchar *locked = g_strdup_printf ("locked         workdir writable       FAIL "
                                              "cannot create %s: ",
                                              inside);
  g_assert_nonnull (strstr (out2, locked));
  g_assert_nonnull (strstr (out2, "Permission denied"));
  g_assert_nonnull (strstr (out2, "1 check failed"));
  g_assert_cmpint (chmod (closed, 0700), ==, 0);
}

/* Names of /tmp/datc-probe-* directories (transfer full). */
static GHashTable *
probe_dirs (void)
{
  GHashTable *out = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, NULL);
  g_autoptr (GDir) dir = g_dir_open (g_get_tmp_dir (), 0, NULL);
  const char *n;
  while (dir != NULL && (n = g_dir_read_name (dir)) != NULL)
    if (g_str_has_prefix (n, "datc-probe-"))
      g_hash_table_add (out, g_strdup (n));
  return out;
}

static gboolean
pid_file_gone (gpointer data)
{
  g_autofree gchar *text = NULL;
  gint64 pid = 0;
  if (!g_file_get_contents (data, &text, NULL, NULL)
      || (pid = g_ascii_strtoll (text, NULL, 10)) <= 1)
    return FALSE;
  return tb_pid_gone ((int) pid);
}

/* A site whose proxies start but whose agent never connects (its agent
 * command only sleeps): the probe stops at its deadline, says which step it
 * waited on, leaves neither the proxy nor its /tmp/datc-probe-* directory
 * (it used to wait for ever, silently). */
static void
test_probe_deadline (void)
{
  g_autoptr (TbDir) d = tb_dir_new ();
  g_autofree gchar *pid_file = g_build_filename (d->path, "sleeper.pid", NULL);
  g_autofree gchar *script
      = g_strdup_printf ("#!/bin/sh\necho $$ > '%s'\nexec sleep 600\n", pid_file);
  g_autofree gchar *sleeper = tb_write (d, "sleeper.sh", script);
  g_assert_cmpint (chmod (sleeper, 0755), ==, 0);
  g_autofree gchar *ini = g_strdup_printf ("[master]\nlisten = tcp://127.0.0.1:0\n"
                                           "[site slow]\nscheduler = fork\nagent = %s\n",
                                           sleeper);
  g_autofree gchar *sites = tb_write (d, "sites.ini", ini);
  g_autoptr (GHashTable) before = probe_dirs ();
  const char *argv[]
      = { tb_datc (), "sites", "check", sites, "--probe", "--probe-timeout", "3", NULL };
  g_autoptr (TbProc) p = tb_spawn (d, "check", argv);
  g_assert_cmpint (tb_wait (p, 90), ==, 1);
  g_autofree gchar *out = tb_proc_stdout (p);
  g_autofree gchar *err = tb_proc_stderr (p);
  g_assert_nonnull (strstr (out, "slow           probe                  FAIL no answer within 3 s: "
                                 "waiting for the agent of job "));
  g_assert_nonnull (strstr (out, " to connect back to the master"));
  /* Each step was said as it came. */
  g_assert_nonnull (strstr (err, "probe slow: waiting for the agent of job "));
  /* Its proxy is gone, and its directory. */
  g_assert_true (tb_await (pid_file_gone, pid_file, 60));
  g_autoptr (GHashTable) after = probe_dirs ();
  GHashTableIter it;
  gpointer name;
  g_hash_table_iter_init (&it, after);
  while (g_hash_table_iter_next (&it, &name, NULL))
    if (!g_hash_table_contains (before, name))
      g_error ("left behind: %s/%s", g_get_tmp_dir (), (char *) name);
}

/* ---- a campaign no site can run ------------------------------------ */

/* A Slurm site (local transport) whose sbatch refuses every submit the
 * way a partition that does not exist does: two lines on stderr. */
static gchar *
refusing_sbatch (TbDir *d)
{
  g_autofree gchar *bin = g_build_filename (d->path, "bin", NULL);
  g_assert_cmpint (g_mkdir_with_parents (bin, 0700), ==, 0);
  g_autofree gchar *sbatch = g_build_filename (bin, "sbatch", NULL);
  g_assert_true (g_file_set_contents (
      sbatch,
      "#!/bin/sh\n"
      "echo 'sbatch: error: invalid partition specified: nosuch' >&2\n"
      "echo 'sbatch: error: Batch job submission failed: Invalid partition name specified' >&2\n"
      "exit 1\n",
      -1, NULL));
  g_assert_cmpint (chmod (sbatch, 0755), ==, 0);
  return g_strdup_printf ("PATH=%s:%s", bin, g_getenv ("PATH"));
}

/* Some line of `text`, leading blanks aside, starts with `start`. */
static gboolean
has_line_starting (const char *text, const char *start)
{
  g_auto (GStrv) lines = g_strsplit (text, "\n", -1);
  for (guint i = 0; lines[i]; i++)
    if (g_str_has_prefix (g_strchug (lines[i]), start))
      return TRUE;
  return FALSE;
}

/* The only site refuses every submit: with give_up_after = 3s, `datc run`
 * exits 3 soon after the site is degraded (not backing off for ever),
 * naming the site and the scheduler's own words, its two lines as lines;
 * it never claims the campaign goes on elsewhere; the campaign is left
 * resumable. */
static void
test_campaign_no_site_can_run_stops (void)
{
  g_autoptr (TbDir) d = tb_dir_new ();
  g_autofree gchar *path = refusing_sbatch (d);
  g_autofree gchar *file = tasks_file (d, 4);
  g_autofree gchar *sites = tb_write (d, "sites.ini",
                                      "[master]\ngive_up_after = 3s\n\n"
                                      "[site nosuch]\nscheduler = slurm\nqueue = nosuch\n"
                                      "max_calls_per_minute = 0\n");
  g_autofree gchar *dir = g_build_filename (d->path, "c", NULL);
  const char *argv[]
      = { "/usr/bin/env", path, tb_datc (), "run", "--dir", dir, "--sites", sites, file, NULL };
  g_autofree gchar *err = NULL;
  gint64 t0 = g_get_monotonic_time ();
  int status = tb_run (d, argv, 120, &err);
  gint64 took = g_get_monotonic_time () - t0;
  g_test_message ("%s", err);
  g_assert_cmpint (status, ==, 3);
  /* Degraded after 3 failures (backoff 2 s, then 4 s), then 3 s. */
  g_assert_cmpint (took, <, 40 * G_USEC_PER_SEC);
  g_assert_nonnull (strstr (err, "datc: no site can run the campaign"));
  g_assert_true (has_line_starting (err, "site nosuch: submitting "));
  g_assert_true (has_line_starting (err, "sbatch: error: Batch job submission failed: Invalid "
                                         "partition name specified"));
  g_assert_null (strstr (err, "\\n"));
  g_assert_null (strstr (err, "goes on with the other sites"));
  g_assert_nonnull (strstr (err, "no site can run the campaign now: datc stops in 3 s"));
  g_assert_cmpuint (count_events (dir, "site_degraded", "nosuch"), ==, 1);

  /* Resumable: the same command opens the journal again (and stops
   * again, sooner with --give-up-after). */
  const char *again[] = { "/usr/bin/env", path,  tb_datc (),        "run", "--dir", dir,
                          "--sites",      sites, "--give-up-after", "1s",  file,    NULL };
  g_clear_pointer (&err, g_free);
  g_assert_cmpint (tb_run (d, again, 120, &err), ==, 3);
  g_assert_nonnull (strstr (err, "every site has been degraded for 1 s"));
  g_autoptr (GPtrArray) trace = tb_trace (dir);
  guint resumed = 0;
  for (guint i = 0; i < trace->len; i++)
    resumed += g_str_equal (json_object_get_string_member (trace->pdata[i], "event"),
                            "campaign_started")
               && json_object_get_boolean_member (trace->pdata[i], "resumed");
  g_assert_cmpuint (resumed, ==, 1);
  g_autoptr (JsonObject) st = tb_status (dir);
  g_assert_nonnull (st);
  JsonObject *tasks = json_object_get_object_member (st, "tasks");
  g_assert_cmpint (json_object_get_int_member (tasks, "total"), ==, 4);
  g_assert_cmpint (json_object_get_int_member (tasks, "queued"), ==, 4);
}

/* A workdir datc cannot trust (here a symbolic link: whoever may change
 * the link chooses where the agent, its key and the proxy scripts go) is
 * refused before anything is put there: `datc run` names the site and
 * the link, and the directory it points to stays empty. */
static void
test_run_refuses_a_workdir_that_is_a_symlink (void)
{
  g_autoptr (TbDir) d = tb_dir_new ();
  g_autofree gchar *file = tasks_file (d, 2);
  g_autofree gchar *real = g_build_filename (d->path, "real", NULL);
  g_autofree gchar *link = g_build_filename (d->path, "link", NULL);
  g_assert_cmpint (g_mkdir (real, 0700), ==, 0);
  g_assert_cmpint (symlink (real, link), ==, 0);
  g_autofree gchar *ini = g_strdup_printf ("[master]\nlisten = tcp://127.0.0.1:0\n\n"
                                           "[site linked]\nscheduler = fork\nworkdir = %s\n",
                                           link);
  g_autofree gchar *sites = tb_write (d, "sites.ini", ini);
  g_autofree gchar *dir = g_build_filename (d->path, "c", NULL);
  const char *argv[]
      = { tb_datc (), "run", "--dir", dir, "--sites", sites, "--give-up-after", "1s", file, NULL };
  g_autofree gchar *err = NULL;
  g_assert_cmpint (tb_run (d, argv, 120, &err), ==, 3);
  g_test_message ("%s", err);
  g_assert_nonnull (strstr (err, "datc: no site can run the campaign"));
  g_autofree gchar *said
      = g_strdup_printf ("site linked: workdir %s: %s is a symbolic link", link, link);
  g_assert_nonnull (strstr (err, said));
  g_autoptr (GDir) listing = g_dir_open (real, 0, NULL);
  g_assert_nonnull (listing);
  g_assert_null (g_dir_read_name (listing));
}

/* ---- status while the run ends ------------------------------------ */

/* A Slurm site (local transport) whose scheduler is slow to answer polls
 * (`squeue` takes SLOW_POLL_S) and keeps its one job pending until
 * scancel: at the end of the campaign the master cancels that job and
 * polls until it is gone, seconds in which `datc status` must still be
 * answered, live, at once (it used to wait its whole 30 s). */
#define SLOW_POLL_S 4

static void
test_status_answered_while_the_run_ends (void)
{
  g_autoptr (TbDir) d = tb_dir_new ();
  g_autofree gchar *bin = g_build_filename (d->path, "bin", NULL);
  g_assert_cmpint (g_mkdir_with_parents (bin, 0700), ==, 0);
  g_autofree gchar *gone = g_build_filename (d->path, "cancelled", NULL);
  g_autofree gchar *sbatch_text = g_strdup ("#!/bin/sh\necho 77\n");
  g_autofree gchar *squeue_text = g_strdup_printf (
      "#!/bin/sh\nsleep %d\n[ -e %s ] || echo '77 PENDING Resources'\n", SLOW_POLL_S, gone);
  g_autofree gchar *scancel_text = g_strdup_printf ("#!/bin/sh\ntouch %s\n", gone);
  const char *names[] = { "sbatch", "squeue", "scancel" };
  const char *texts[] = { sbatch_text, squeue_text, scancel_text };
  for (guint i = 0; i < G_N_ELEMENTS (names); i++)
    {
      g_autofree gchar *p = g_build_filename (bin, names[i], NULL);
      g_assert_true (g_file_set_contents (p, texts[i], -1, NULL));
      g_assert_cmpint (chmod (p, 0755), ==, 0);
    }
  g_autofree gchar *path = g_strdup_printf ("PATH=%s:%s", bin, g_getenv ("PATH"));
  g_autoptr (GString) t = g_string_new (NULL);
  for (guint i = 0; i < 4; i++)
    g_string_append (t, "sleep 0.3\n");
  g_autofree gchar *file = tb_write (d, "t.txt", t->str);
  g_autofree gchar *sites = tb_write (d, "sites.ini",
                                      "[master]\nlisten = tcp://127.0.0.1:0\n\n"
                                      "[site here]\nscheduler = fork\nslots_per_proxy = 2\n\n"
                                      "[site slow]\nscheduler = slurm\npoll_interval = 1s\n"
                                      "max_calls_per_minute = 0\n");
  g_autofree gchar *dir = g_build_filename (d->path, "c", NULL);
  const char *argv[]
      = { "/usr/bin/env", path, tb_datc (), "run", "--dir", dir, "--sites", sites, file, NULL };
  g_autoptr (TbProc) master = tb_spawn (d, "master", argv);
  g_autofree gchar *results = g_build_filename (dir, "results.jsonl", NULL);
  while (tb_count_lines (results) < 4)
    {
      g_assert_false (tb_pid_gone (tb_proc_pid (master)));
      g_usleep (20 * 1000);
    }
  /* Every result is in: the loop is over, the sites are being cleaned. */
  gint64 t0 = g_get_monotonic_time ();
  g_autoptr (JsonObject) st = tb_status (dir);
  gint64 took = g_get_monotonic_time () - t0;
  g_assert_nonnull (st);
  g_assert_false (tb_pid_gone (tb_proc_pid (master)));
  g_assert_true (
      json_object_get_boolean_member (json_object_get_object_member (st, "master"), "running"));
  g_assert_cmpint (json_object_get_int_member (json_object_get_object_member (st, "tasks"), "done"),
                   ==, 4);
  g_test_message ("answered in %.3f s while the run ended", took / 1e6);
  g_assert_cmpint (took, <, 2 * G_USEC_PER_SEC);
  /* Anything else is refused, said so. */
  const char *submit[] = { tb_datc (), "close", dir, NULL };
  g_autofree gchar *err = NULL;
  int rc = tb_run (d, submit, 30, &err);
  if (!tb_pid_gone (tb_proc_pid (master)))
    {
      g_assert_cmpint (rc, !=, 0);
      g_assert_nonnull (strstr (err, "the campaign is ending"));
    }
  g_assert_cmpint (tb_wait (master, 60), ==, 0);
}

/* The same refusing site beside a working one: degraded (after ~6 s) for
 * longer than give_up_after while the working site's agent runs the bag
 * (~12 s), and the campaign completes. */
static void
test_failing_site_beside_a_working_one_goes_on (void)
{
  g_autoptr (TbDir) d = tb_dir_new ();
  g_autofree gchar *path = refusing_sbatch (d);
  g_autoptr (GString) t = g_string_new (NULL);
  for (guint i = 0; i < 24; i++)
    g_string_append (t, "sleep 0.5\n");
  g_autofree gchar *file = tb_write (d, "t.txt", t->str);
  g_autofree gchar *sites = tb_write (d, "sites.ini",
                                      "[master]\nlisten = tcp://127.0.0.1:0\ngive_up_after = 1s\n\n"
                                      "[site nosuch]\nscheduler = slurm\nqueue = nosuch\n"
                                      "max_calls_per_minute = 0\n\n"
                                      "[site good]\nscheduler = fork\nslots_per_proxy = 1\n");
  g_autofree gchar *dir = g_build_filename (d->path, "c", NULL);
  const char *argv[]
      = { "/usr/bin/env", path, tb_datc (), "run", "--dir", dir, "--sites", sites, file, NULL };
  g_autofree gchar *err = NULL;
  int status = tb_run (d, argv, 120, &err);
  g_test_message ("%s", err);
  g_assert_cmpint (status, ==, 0);
  g_autoptr (GHashTable) res = tb_results (dir);
  g_assert_cmpuint (g_hash_table_size (res), ==, 24);
  /* It was degraded while the campaign ran on. */
  g_assert_cmpuint (count_events (dir, "site_degraded", "nosuch"), ==, 1);
  g_assert_nonnull (strstr (err, "the campaign goes on with the other sites"));
  g_assert_null (strstr (err, "no site can run the campaign"));
}

/* ---- a clean workdir ------------------------------------------------ */

/* A good fork site and one whose agent cannot start (it says so on
 * stderr, which goes to its proxy's log), run with `extra` options;
 * returns the campaign directory. */
static gchar *
run_good_and_dying (TbDir *d, const char *name, const char *extra)
{
  g_autofree gchar *bad
      = tb_write (d, "bad-agent", "#!/bin/sh\necho 'bad agent: cannot start' >&2\nexit 1\n");
  g_assert_cmpint (chmod (bad, 0755), ==, 0);
  g_autofree gchar *file = tasks_file (d, 60);
  g_autofree gchar *ini = g_strdup_printf ("[master]\nlisten = tcp://127.0.0.1:0\n\n"
                                           "[site dies]\nscheduler = fork\nagent = %s\n\n"
                                           "[site good]\nscheduler = fork\nslots_per_proxy = 1\n"
                                           "max_proxies = 3\n",
                                           bad);
  g_autofree gchar *sites = tb_write (d, "sites.ini", ini);
  gchar *dir = g_build_filename (d->path, name, NULL);
  const char *argv[] = { tb_datc (), "run", "--dir", dir, "--sites", sites, file, extra, NULL };
  g_autofree gchar *err = NULL;
  int status = tb_run (d, argv, 120, &err);
  if (status != 0)
    g_printerr ("%s", err);
  g_assert_cmpint (status, ==, 0);
  return dir;
}

/* For each proxy of `site` in the trace: are its script and log (fork:
 * ID.sh, ID.sh.log in DIR/proxies/SITE) there?  Counts those there and
 * those gone; fails on one half there. */
static void
count_proxy_files (const char *dir, const char *site, guint *there, guint *gone)
{
  g_autoptr (GPtrArray) trace = tb_trace (dir);
  *there = *gone = 0;
  for (guint i = 0; i < trace->len; i++)
    {
      JsonObject *o = trace->pdata[i];
      if (!g_str_equal (json_object_get_string_member (o, "event"), "proxy_submitted")
          || !g_str_equal (json_object_get_string_member (o, "site"), site))
        continue;
      const char *id = json_object_get_string_member (o, "proxy");
      g_autofree gchar *script_name = g_strdup_printf ("%s.sh", id);
      g_autofree gchar *script = g_build_filename (dir, "proxies", site, script_name, NULL);
      g_autofree gchar *log = g_strdup_printf ("%s.log", script);
      gboolean s = g_file_test (script, G_FILE_TEST_EXISTS);
      gboolean l = g_file_test (log, G_FILE_TEST_EXISTS);
      if (s != l)
        g_error ("%s: script %s, log %s", id, s ? "there" : "gone", l ? "there" : "gone");
      if (s && g_str_equal (site, "dies"))
        {
          g_autofree gchar *text = NULL;
          g_assert_true (g_file_get_contents (log, &text, NULL, NULL));
          g_assert_nonnull (strstr (text, "bad agent: cannot start"));
        }
      *there += s;
      *gone += !s;
    }
}

/* A finished campaign leaves in a site's workdir the script and log of
 * each proxy that died before its agent connected (what the user needs
 * to read), and nothing of those that ended well; --keep-site-files
 * keeps everything. */
static void
test_workdir_keeps_only_failed_proxies_files (void)
{
  g_autoptr (TbDir) d = tb_dir_new ();
  guint there, gone;

  g_autofree gchar *clean = run_good_and_dying (d, "clean", NULL);
  count_proxy_files (clean, "good", &there, &gone);
  g_assert_cmpuint (there, ==, 0);
  g_assert_cmpuint (gone, >=, 1);
  count_proxy_files (clean, "dies", &there, &gone);
  g_assert_cmpuint (there, >=, 1);
  g_assert_cmpuint (gone, ==, 0);
  /* Nothing else is left in the good site's workdir either. */
  g_autofree gchar *good_dir = g_build_filename (clean, "proxies", "good", NULL);
  g_autoptr (GDir) listing = g_dir_open (good_dir, 0, NULL);
  g_assert_nonnull (listing);
  g_assert_null (g_dir_read_name (listing));

  g_autofree gchar *kept = run_good_and_dying (d, "kept", "--keep-site-files");
  count_proxy_files (kept, "good", &there, &gone);
  g_assert_cmpuint (there, >=, 1);
  g_assert_cmpuint (gone, ==, 0);
  count_proxy_files (kept, "dies", &there, &gone);
  g_assert_cmpuint (there, >=, 1);
  g_assert_cmpuint (gone, ==, 0);
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  g_test_add_func ("/sites/two-sites-share-the-bag-over-tcp", test_two_sites);
  g_test_add_func ("/sites/a-broken-site-is-backed-off-not-hammered", test_broken_site_backs_off);
  g_test_add_func ("/sites/offline-status-keeps-each-site-s-degradation",
                   test_offline_status_keeps_site_errors);
  g_test_add_func ("/sites/status-shows-the-call-budget-and-a-submit-waiting-for-it",
                   test_status_shows_the_call_budget);
  g_test_add_func ("/sites/agents-that-cannot-reach-the-master-are-reported",
                   test_unreachable_master_is_reported);
  g_test_add_func ("/sites/a-bad-sites-file-starts-nothing", test_bad_sites_file);
  g_test_add_func ("/sites/check-reports-each-site-and-probes-it", test_sites_check);
  g_test_add_func ("/sites/check-fails-a-workdir-that-cannot-be-made-or-is-open",
                   test_sites_check_workdir);
  g_test_add_func ("/sites/probe-stops-at-its-deadline-naming-the-step-and-cleans-up",
                   test_probe_deadline);
  g_test_add_func ("/sites/a-campaign-no-site-can-run-stops-naming-each-site",
                   test_campaign_no_site_can_run_stops);
  g_test_add_func ("/sites/a-failing-site-beside-a-working-one-does-not-stop-the-campaign",
                   test_failing_site_beside_a_working_one_goes_on);
  g_test_add_func ("/sites/run-refuses-a-workdir-that-is-a-symlink",
                   test_run_refuses_a_workdir_that_is_a_symlink);
  g_test_add_func ("/sites/a-finished-campaign-leaves-only-failed-proxies-files",
                   test_workdir_keeps_only_failed_proxies_files);
  g_test_add_func ("/sites/status-bounds-the-queue-wait-from-earlier-campaigns",
                   test_status_bounds_the_queue_wait_from_earlier_campaigns);
  g_test_add_func ("/sites/proxies-go-where-they-are-predicted-to-start-soonest",
                   test_proxies_go_where_they_start_soonest);
  g_test_add_func ("/sites/status-is-answered-while-the-run-ends",
                   test_status_answered_while_the_run_ends);
  return g_test_run ();
}
