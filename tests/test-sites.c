/* test-sites.c: campaigns described by a SITES.ini: several sites at once
 * (fork scheduler over the local transport, agents over TCP with CURVE),
 * a broken site that must not be hammered, and a bad file refused. */
#include <string.h>
#include <unistd.h>

#include "harness.h"

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
  g_assert_nonnull (strstr (out2, "pool           queue exists           FAIL HTCondor has no queues"));
  /* Its commands go through `sh -c`, yet each program is looked for (this
   * machine has no HTCondor). */
  static const char *const condor[] = { "condor_submit", "condor_q", "condor_history",
                                        "condor_rm" };
  for (guint i = 0; i < G_N_ELEMENTS (condor); i++)
    {
      g_autofree gchar *what = g_strdup_printf ("%s found", condor[i]);
      g_autofree gchar *want = g_strdup_printf ("%-14s %-22s %-4s %s", "pool", what, "FAIL",
                                                "not on the PATH");
      g_assert_nonnull (strstr (out2, want));
    }
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  g_test_add_func ("/sites/two-sites-share-the-bag-over-tcp", test_two_sites);
  g_test_add_func ("/sites/a-broken-site-is-backed-off-not-hammered", test_broken_site_backs_off);
  g_test_add_func ("/sites/a-bad-sites-file-starts-nothing", test_bad_sites_file);
  g_test_add_func ("/sites/check-reports-each-site-and-probes-it", test_sites_check);
  return g_test_run ();
}
