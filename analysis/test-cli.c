/* test-cli.c: the commands as a user runs them, exit status included:
 * this program re-executes itself as `datc analyze ...` / `datc report ...`
 * (the same entry points master/main.c calls) and checks what comes out. */
#include "cli.h"

#include <glib/gstdio.h>
#include <sys/wait.h>
#include <locale.h>
#include <string.h>

#include "test-fixture-campaign.h"

static const char *self;

typedef struct {
  int status;
  gchar *out, *err;
} Run;

static void
run_clear (Run *r)
{
  g_free (r->out);
  g_free (r->err);
}
G_DEFINE_AUTO_CLEANUP_CLEAR_FUNC (Run, run_clear)

/* Runs `datc ARGS...` through this very binary. */
static void
run_datc (Run *r, const char *const *args)
{
  g_autoptr (GPtrArray) argv = g_ptr_array_new ();
  g_ptr_array_add (argv, (gpointer) self);
  for (guint i = 0; args[i] != NULL; i++)
    g_ptr_array_add (argv, (gpointer) args[i]);
  g_ptr_array_add (argv, NULL);
  g_autoptr (GError) error = NULL;
  int wait_status = 0;
  g_assert_true (g_spawn_sync (NULL, (gchar **) argv->pdata, NULL, G_SPAWN_DEFAULT, NULL, NULL,
                               &r->out, &r->err, &wait_status, &error));
  g_assert_no_error (error);
  g_assert_true (WIFEXITED (wait_status));
  r->status = WEXITSTATUS (wait_status);
}

static gchar *
write_temp (const char *dir, const char *name, const char *text)
{
  gchar *p = g_build_filename (dir, name, NULL);
  g_assert_true (g_file_set_contents (p, text, -1, NULL));
  return p;
}

static const char scenario[]
    = "[campaign]\ntasks = 500\n"
      "[site A]\nslots_per_proxy = 16\nproxies = 2\ntask_time = 10m\ntask_cv = 0.2\n"
      "wait = exp 20m\n"
      "[site B]\nslots_per_proxy = 32\ntask_time = 15m\nwait = lognormal 30m 1\n";

static void
test_cli_predict_prints_every_policy (void)
{
  g_autofree gchar *dir = g_dir_make_tmp ("datc-cli-XXXXXX", NULL);
  g_autofree gchar *path = write_temp (dir, "s.ini", scenario);
  g_auto (Run) r = { 0 };
  run_datc (&r, (const char *[]) { "analyze", "predict", path, "--trials", "200", NULL });
  g_assert_cmpint (r.status, ==, 0);
  const char *names[] = { "fluid", "ect", "pull", "pull+rep", "static-cap", "static-proc",
                          "direct-common", "direct-cap", "\ndirect ", "worth submitting",
                          /* the limits of the direct models, where their numbers are */
                          "not what `datc run --mode direct` does", "walltime ignored" };
  for (guint i = 0; i < G_N_ELEMENTS (names); i++)
    g_assert_nonnull (strstr (r.out, names[i]));
  fixture_remove_tree (dir);
}

static void
test_cli_predict_json_is_reproducible (void)
{
  g_autofree gchar *dir = g_dir_make_tmp ("datc-cli-XXXXXX", NULL);
  g_autofree gchar *path = write_temp (dir, "s.ini", scenario);
  g_auto (Run) a = { 0 };
  g_auto (Run) b = { 0 };
  g_auto (Run) c = { 0 };
  const char *args[]
      = { "analyze", "predict", path, "--trials", "300", "--seed", "77", "--json", NULL };
  run_datc (&a, args);
  run_datc (&b, args);
  g_assert_cmpint (a.status, ==, 0);
  g_assert_cmpstr (a.out, ==, b.out);
  g_assert_true (g_str_has_prefix (a.out, "{\"tasks\":500,\"trials\":300,"));
  run_datc (&c, (const char *[]) { "analyze", "predict", path, "--trials", "300", "--seed", "78",
                                   "--json", "--policies", "pull,ect", NULL });
  g_assert_cmpint (c.status, ==, 0);
  g_assert_cmpstr (a.out, !=, c.out);
  g_assert_null (strstr (c.out, "\"fluid\""));
  fixture_remove_tree (dir);
}

static void
test_cli_predict_bad_input_exits_2_naming_the_line (void)
{
  g_autofree gchar *dir = g_dir_make_tmp ("datc-cli-XXXXXX", NULL);
  g_autofree gchar *path
      = write_temp (dir, "s.ini", "[campaign]\ntasks = 10\n[site A]\nslots_per_proxy = x\n");
  g_auto (Run) r = { 0 };
  run_datc (&r, (const char *[]) { "analyze", "predict", path, NULL });
  g_assert_cmpint (r.status, ==, 2);
  g_autofree gchar *want = g_strdup_printf ("%s:4: ", path);
  g_assert_nonnull (strstr (r.err, want));
  g_auto (Run) t = { 0 };
  run_datc (&t, (const char *[]) { "analyze", "predict", path, "--trials", "0", NULL });
  g_assert_cmpint (t.status, ==, 2);
  g_auto (Run) p = { 0 };
  run_datc (&p, (const char *[]) { "analyze", "predict", path, "--policies", "push", NULL });
  g_assert_cmpint (p.status, ==, 2);
  g_auto (Run) u = { 0 };
  run_datc (&u, (const char *[]) { "analyze", "forecast", NULL });
  g_assert_cmpint (u.status, ==, 2);
  g_auto (Run) n = { 0 };
  run_datc (&n, (const char *[]) { "analyze", NULL });
  g_assert_cmpint (n.status, ==, 2);
  fixture_remove_tree (dir);
}

static void
test_cli_waits_bounds_or_says_how_many_are_needed (void)
{
  g_autofree gchar *dir = g_dir_make_tmp ("datc-cli-XXXXXX", NULL);
  GString *w = g_string_new ("# waits in seconds\n");
  for (guint i = 1; i <= 58; i++)
    g_string_append_printf (w, "%u\n", i * 10);
  g_autofree gchar *few = write_temp (dir, "few.txt", w->str);
  g_auto (Run) r = { 0 };
  run_datc (&r, (const char *[]) { "analyze", "waits", few, NULL });
  g_assert_cmpint (r.status, ==, 0);
  g_assert_nonnull (strstr (r.out, "59 are needed"));
  g_string_append (w, "590\n");
  g_autofree gchar *enough = write_temp (dir, "enough.txt", w->str);
  g_auto (Run) s = { 0 };
  run_datc (&s, (const char *[]) { "analyze", "waits", enough, "--json", NULL });
  g_assert_cmpint (s.status, ==, 0);
  g_assert_nonnull (
      strstr (s.out, "\"observations\":59,\"needed\":59,\"index\":59,\"bound\":590.000"));
  g_auto (Run) m = { 0 };
  run_datc (&m, (const char *[]) { "analyze", "waits", enough, "--quantile", "0.5", "--confidence",
                                   "0.9", NULL });
  g_assert_cmpint (m.status, ==, 0);
  g_assert_nonnull (strstr (m.out, "0.5"));
  g_auto (Run) q = { 0 };
  run_datc (&q, (const char *[]) { "analyze", "waits", enough, "--quantile", "1.5", NULL });
  g_assert_cmpint (q.status, ==, 2);
  g_autofree gchar *bad = write_temp (dir, "bad.txt", "10\nsoon\n");
  g_auto (Run) b = { 0 };
  run_datc (&b, (const char *[]) { "analyze", "waits", bad, NULL });
  g_assert_cmpint (b.status, ==, 2);
  g_autofree gchar *want = g_strdup_printf ("%s:2: ", bad);
  g_assert_nonnull (strstr (b.err, want));
  g_string_free (w, TRUE);
  fixture_remove_tree (dir);
}

/* A campaign's trace as the master writes it: site A's proxies waited
 * 10 s, 20 s, ... 590 s; site B's b1 waited 5 s (its agent's HELLO; the
 * master saw it only at 9 s) and b2 7 s (its submit is not in the trace:
 * the wait_us of its proxy_started). */
static gchar *
trace_with_waits (const char *dir)
{
  const gint64 t0 = G_GINT64_CONSTANT (1700000000000000), s = G_USEC_PER_SEC;
  GString *t = g_string_new (NULL);
  g_string_append_printf (t, "{\"time\":%" G_GINT64_FORMAT ",\"event\":\"campaign_started\"}\n",
                          t0);
  for (gint64 i = 1; i <= 59; i++)
    {
      gint64 sub = t0 + i * 1000 * s, start = sub + i * 10 * s;
      g_string_append_printf (t,
                              "{\"time\":%" G_GINT64_FORMAT ",\"event\":\"proxy_submitted\","
                              "\"site\":\"A\",\"proxy\":\"a%" G_GINT64_FORMAT "\"}\n",
                              sub, i);
      g_string_append_printf (t,
                              "{\"time\":%" G_GINT64_FORMAT ",\"event\":\"proxy_started\","
                              "\"site\":\"A\",\"proxy\":\"a%" G_GINT64_FORMAT "\",\"seen_by\":"
                              "\"scheduler\",\"started\":%" G_GINT64_FORMAT
                              ",\"wait_us\":%" G_GINT64_FORMAT "}\n",
                              start + 1000, i, start, start - sub);
      if (i != 3)
        continue;
      g_string_append_printf (t,
                              "{\"time\":%" G_GINT64_FORMAT ",\"event\":\"proxy_submitted\","
                              "\"site\":\"B\",\"proxy\":\"b1\"}\n"
                              "{\"time\":%" G_GINT64_FORMAT ",\"event\":\"agent_connected\","
                              "\"site\":\"B\",\"proxy\":\"b1\"}\n"
                              "{\"time\":%" G_GINT64_FORMAT ",\"event\":\"proxy_started\","
                              "\"site\":\"B\",\"proxy\":\"b1\",\"started\":%" G_GINT64_FORMAT
                              ",\"wait_us\":9000000}\n",
                              t0, t0 + 5 * s, t0 + 9 * s, t0 + 9 * s);
      g_string_append (t, "{\"time\":1700000000000002,\"event\":\"proxy_started\",\"site\":\"B\","
                          "\"proxy\":\"b2\",\"wait_us\":7000000}\n"
                          /* Neither a submit time nor a wait: left out. */
                          "{\"time\":1700000000000002,\"event\":\"proxy_started\",\"site\":\"B\","
                          "\"proxy\":\"b3\",\"wait_us\":-1}\n"
                          "{\"time\":1700000000000003,\"event\":\"proxy_started\",\"site\":7,"
                          "\"wait_us\":\"soon\"}\n");
    }
  /* The master is writing its next line. */
  g_string_append (t,
                   "{\"time\":1700000000000005,\"event\":\"proxy_started\",\"site\":\"B\",\"pro");
  gchar *path = write_temp (dir, "trace.jsonl", t->str);
  g_string_free (t, TRUE);
  return path;
}

static void
test_cli_waits_reads_a_campaign (void)
{
  g_autofree gchar *dir = g_dir_make_tmp ("datc-cli-XXXXXX", NULL);
  g_autofree gchar *trace = trace_with_waits (dir);
  g_autofree gchar *want_a
      = g_strdup_printf ("%s, site A: with confidence 0.95, a fraction 0.95 of "
                         "waits end within 590.000 s",
                         trace);
  g_autofree gchar *want_b = g_strdup_printf ("%s, site B: 2 observed waits are too few", trace);
  /* The directory, or its trace.jsonl: the same waits, per site. */
  const char *inputs[] = { dir, trace };
  for (guint i = 0; i < G_N_ELEMENTS (inputs); i++)
    {
      g_auto (Run) r = { 0 };
      run_datc (&r, (const char *[]) { "analyze", "waits", inputs[i], NULL });
      g_assert_cmpint (r.status, ==, 0);
      g_assert_nonnull (strstr (r.out, want_a));
      g_assert_nonnull (strstr (r.out, want_b));
      g_assert_nonnull (strstr (r.err, "1 unreadable proxy_started line skipped"));
    }
  g_auto (Run) j = { 0 };
  run_datc (&j, (const char *[]) { "analyze", "waits", dir, "--site", "A", "--json", NULL });
  g_assert_cmpint (j.status, ==, 0);
  g_assert_true (g_str_has_prefix (j.out, "{\"sites\":[{\"site\":\"A\",\"quantile\":0.9500,"
                                          "\"confidence\":0.9500,\"observations\":59,\"needed\":59,"
                                          "\"index\":59,\"bound\":590.000"));
  g_assert_null (strstr (j.out, "\"B\""));
  g_auto (Run) b = { 0 };
  run_datc (&b, (const char *[]) { "analyze", "waits", dir, "--site", "B", "--json", NULL });
  g_assert_cmpint (b.status, ==, 0);
  g_assert_nonnull (strstr (b.out, "\"observations\":2,"));
  g_assert_nonnull (strstr (b.out, "\"median\":6.000,\"max\":7.000}"));
  g_auto (Run) n = { 0 };
  run_datc (&n, (const char *[]) { "analyze", "waits", dir, "--site", "C", NULL });
  g_assert_cmpint (n.status, ==, 2);
  g_assert_nonnull (strstr (n.err, "no queue waits of site C (sites with waits: A, B)"));

  /* Only the embedded local site: no proxy ever queued. */
  g_autofree gchar *local = g_build_filename (dir, "local", NULL);
  g_assert_cmpint (g_mkdir (local, 0700), ==, 0);
  g_autofree gchar *lt = write_temp (
      local, "trace.jsonl", "{\"time\":1700000000000000,\"event\":\"campaign_started\"}\n");
  g_auto (Run) l = { 0 };
  run_datc (&l, (const char *[]) { "analyze", "waits", local, NULL });
  g_assert_cmpint (l.status, ==, 2);
  g_assert_nonnull (strstr (l.err, "no proxy started on a site yet"));
  g_assert_cmpint (g_unlink (lt), ==, 0);
  g_auto (Run) e = { 0 };
  run_datc (&e, (const char *[]) { "analyze", "waits", local, NULL });
  g_assert_cmpint (e.status, ==, 2);
  g_assert_nonnull (strstr (e.err, "no trace.jsonl: not a campaign directory"));
  fixture_remove_tree (dir);
}

static void
test_cli_trace_and_report_read_a_campaign (void)
{
  g_autofree gchar *dir = fixture_campaign_new (FIXTURE_CLEAN);
  g_auto (Run) t = { 0 };
  run_datc (&t, (const char *[]) { "analyze", "trace", dir, NULL });
  g_assert_cmpint (t.status, ==, 0);
  g_assert_nonnull (strstr (t.out, "8 done"));
  g_auto (Run) j = { 0 };
  run_datc (&j, (const char *[]) { "analyze", "trace", dir, "--json", NULL });
  g_assert_cmpint (j.status, ==, 0);
  g_assert_nonnull (strstr (j.out, "\"turnaround\":35.000000"));
  g_autofree gchar *out = g_build_filename (dir, "r.html", NULL);
  g_auto (Run) r = { 0 };
  run_datc (&r, (const char *[]) { "report", dir, "-o", out, NULL });
  g_assert_cmpint (r.status, ==, 0);
  g_assert_true (g_file_test (out, G_FILE_TEST_IS_REGULAR));
  g_auto (Run) d = { 0 };
  run_datc (&d, (const char *[]) { "report", dir, NULL });
  g_assert_cmpint (d.status, ==, 0);
  g_autofree gchar *def = g_build_filename (dir, "report.html", NULL);
  g_assert_true (g_file_test (def, G_FILE_TEST_IS_REGULAR));
  g_auto (Run) n = { 0 };
  run_datc (&n, (const char *[]) { "analyze", "trace", "/nonexistent/dir", NULL });
  g_assert_cmpint (n.status, ==, 2);
  fixture_remove_tree (dir);
}

int
main (int argc, char **argv)
{
  /* Re-executed as the datc command. */
  if (argc > 1 && g_str_equal (argv[1], "analyze"))
    {
      setlocale (LC_ALL, "");
      return datc_analyze_main (argc - 1, argv + 1);
    }
  if (argc > 1 && g_str_equal (argv[1], "report"))
    {
      setlocale (LC_ALL, "");
      return datc_report_main (argc - 1, argv + 1);
    }
  self = argv[0];
  g_test_init (&argc, &argv, NULL);
  g_test_add_func ("/cli/predict/prints-every-policy", test_cli_predict_prints_every_policy);
  g_test_add_func ("/cli/predict/json-is-reproducible", test_cli_predict_json_is_reproducible);
  g_test_add_func ("/cli/predict/bad-input-exits-2-naming-the-line",
                   test_cli_predict_bad_input_exits_2_naming_the_line);
  g_test_add_func ("/cli/waits/bounds-or-says-how-many-are-needed",
                   test_cli_waits_bounds_or_says_how_many_are_needed);
  g_test_add_func ("/cli/waits/reads-a-campaign-dir-or-its-trace", test_cli_waits_reads_a_campaign);
  g_test_add_func ("/cli/trace-and-report/read-a-campaign",
                   test_cli_trace_and_report_read_a_campaign);
  return g_test_run ();
}
