/* test-fixture-campaign.c: see test-fixture-campaign.h. */
#include "test-fixture-campaign.h"

#include <glib/gstdio.h>

#define S(x) (FIXTURE_T0 + (gint64) ((x) * 1000000))

static void
result (GString *o, guint id, const char *proxy, double start, double end, int code)
{
  g_string_append_printf (
      o,
      "{\"id\":%u,\"line\":%u,\"attempt\":1,\"status\":\"exited\",\"exit_code\":%d,"
      "\"signal\":0,\"site\":\"A\",\"proxy\":\"%s\",\"host\":\"h\",\"agent\":\"g-%s\","
      "\"submitted\":%" G_GINT64_FORMAT ",\"started\":%" G_GINT64_FORMAT
      ",\"finished\":%" G_GINT64_FORMAT ",\"output\":\"outputs/g.out\",\"stdout_offset\":0,"
      "\"stdout_bytes\":0,\"stderr_offset\":0,\"stderr_bytes\":0,\"stdout_dropped\":0,"
      "\"stderr_dropped\":0}\n",
      id, id, code, proxy, proxy, S (0), S (start), S (end));
}

void
fixture_campaign_write (const char *dir, FixtureFlags flags)
{
  GString *t = g_string_new (NULL);
  g_string_append_printf (t,
                          "{\"time\":%" G_GINT64_FORMAT
                          ",\"event\":\"campaign_started\",\"tasks\":8,\"resumed\":false}\n",
                          S (0));
  g_string_append_printf (t,
                          "{\"time\":%" G_GINT64_FORMAT
                          ",\"event\":\"proxy_submitted\",\"site\":\"A\",\"proxy\":\"a1\",\"job\":"
                          "\"1\",\"slots\":2,\"walltime\":0}\n",
                          S (1));
  g_string_append_printf (t,
                          "{\"time\":%" G_GINT64_FORMAT
                          ",\"event\":\"proxy_submitted\",\"site\":\"B\",\"proxy\":\"b1\",\"job\":"
                          "\"7\",\"slots\":4,\"walltime\":3600}\n",
                          S (1));
  g_string_append_printf (t,
                          "{\"time\":%" G_GINT64_FORMAT
                          ",\"event\":\"proxy_submitted\",\"site\":\"A\",\"proxy\":\"a2\",\"job\":"
                          "\"2\",\"slots\":2,\"walltime\":0}\n",
                          S (2));
  if (flags & FIXTURE_GARBAGE)
    {
      g_string_append (t, "{\"time\": oops\n");
      g_string_append (t, "[1,2,3]\n");
      g_string_append_printf (t, "{\"time\":%" G_GINT64_FORMAT ",\"event\":\"proxy_submitted\"}\n",
                              S (3));
      g_string_append_printf (
          t, "{\"time\":%" G_GINT64_FORMAT ",\"event\":\"from_the_future\",\"x\":1}\n", S (3));
    }
  /* The scheduler calls of the run, here to leave the garbage lines where
   * they are: a submit takes 2 (itself and the lookup that may check it). */
  const struct {
    double t;
    const char *site, *kind;
    int calls;
  } calls[] = {
    { 0.9, "A", "submit", 2 }, { 0.9, "B", "submit", 2 }, { 1.9, "A", "submit", 2 },
    { 10, "A", "poll", 1 },    { 20, "A", "poll", 1 },    { 25.1, "B", "cancel", 1 },
    { 30, "A", "poll", 1 },
  };
  for (guint i = 0; i < G_N_ELEMENTS (calls); i++)
    g_string_append_printf (
        t,
        "{\"time\":%" G_GINT64_FORMAT
        ",\"event\":\"site_command\",\"site\":\"%s\",\"kind\":\"%s\",\"calls\":%d}\n",
        S (calls[i].t), calls[i].site, calls[i].kind, calls[i].calls);
  g_string_append_printf (t,
                          "{\"time\":%" G_GINT64_FORMAT
                          ",\"event\":\"agent_connected\",\"site\":\"A\",\"proxy\":\"a1\","
                          "\"agent\":\"g-a1\",\"host\":\"h\",\"slots\":2}\n",
                          S (5));
  g_string_append_printf (t,
                          "{\"time\":%" G_GINT64_FORMAT
                          ",\"event\":\"agent_connected\",\"site\":\"A\",\"proxy\":\"a2\","
                          "\"agent\":\"g-a2\",\"host\":\"h\",\"slots\":2}\n",
                          S (15));
  g_string_append_printf (
      t,
      "{\"time\":%" G_GINT64_FORMAT
      ",\"event\":\"agent_exited\",\"site\":\"A\",\"proxy\":\"a2\",\"agent\":\"g-a2\"}\n",
      S (25));
  g_string_append_printf (
      t,
      "{\"time\":%" G_GINT64_FORMAT
      ",\"event\":\"proxy_cancelled\",\"site\":\"B\",\"proxy\":\"b1\",\"job\":\"7\"}\n",
      S (25.2));
  g_string_append_printf (
      t,
      "{\"time\":%" G_GINT64_FORMAT
      ",\"event\":\"proxy_ended\",\"site\":\"A\",\"proxy\":\"a2\",\"job\":\"2\"}\n",
      S (25.5));
  if (!(flags & FIXTURE_RUNNING))
    {
      g_string_append_printf (
          t,
          "{\"time\":%" G_GINT64_FORMAT
          ",\"event\":\"agent_exited\",\"site\":\"A\",\"proxy\":\"a1\",\"agent\":\"g-a1\"}\n",
          S (35));
      g_string_append_printf (
          t,
          "{\"time\":%" G_GINT64_FORMAT
          ",\"event\":\"proxy_ended\",\"site\":\"A\",\"proxy\":\"a1\",\"job\":\"1\"}\n",
          S (35.5));
      g_string_append_printf (
          t,
          "{\"time\":%" G_GINT64_FORMAT
          ",\"event\":\"campaign_finished\",\"done\":8,\"failed\":0,\"cancelled\":0}\n",
          S (36));
    }

  GString *r = g_string_new (NULL);
  result (r, 1, "a1", 5, 15, 0);
  result (r, 2, "a1", 5, 15, 0);
  result (r, 3, "a1", 15, 25, 0);
  result (r, 5, "a2", 15, 25, 0);
  result (r, 4, "a1", 15, 25, 0);
  result (r, 6, "a2", 15, 25, 0);
  if (flags & FIXTURE_GARBAGE)
    g_string_append (r, "not json at all\n{\"id\":9,\"status\":\"exited\"}\n");
  result (r, 7, "a1", 25, 35, 0);
  if (!(flags & FIXTURE_RUNNING))
    result (r, 8, "a1", 25, 35, 0);
  if (flags & FIXTURE_TORN_TAIL)
    g_string_append (r, "{\"id\":8,\"line\":8,\"attempt\":1,\"status\":\"exi");

  g_autofree gchar *tp = g_build_filename (dir, "trace.jsonl", NULL);
  g_autofree gchar *rp = g_build_filename (dir, "results.jsonl", NULL);
  g_assert_true (g_file_set_contents (tp, t->str, (gssize) t->len, NULL));
  g_assert_true (g_file_set_contents (rp, r->str, (gssize) r->len, NULL));
  g_string_free (t, TRUE);
  g_string_free (r, TRUE);
}

void
fixture_direct_campaign_write (const char *dir, gboolean mode_in_json)
{
  GString *t = g_string_new (NULL), *r = g_string_new (NULL);
  g_string_append_printf (t,
                          "{\"time\":%" G_GINT64_FORMAT
                          ",\"event\":\"campaign_started\",\"tasks\":6,"
                          "\"resumed\":false%s}\n",
                          S (0), mode_in_json ? "" : ",\"mode\":\"direct\"");
  for (guint j = 0; j < 6; j++)
    {
      double sub = 15.0 * (j / 2);
      g_autofree gchar *proxy = g_strdup_printf ("a%u", j + 1);
      g_string_append_printf (
          t,
          "{\"time\":%" G_GINT64_FORMAT ",\"event\":\"proxy_submitted\",\"site\":\"A\","
          "\"proxy\":\"%s\",\"job\":\"%u\",\"slots\":1,\"walltime\":0,\"task\":%u}\n",
          S (sub), proxy, j + 1, j + 1);
      g_string_append_printf (t,
                              "{\"time\":%" G_GINT64_FORMAT
                              ",\"event\":\"agent_connected\",\"site\":\"A\","
                              "\"proxy\":\"%s\",\"agent\":\"g-%s\",\"host\":\"h\",\"slots\":1}\n",
                              S (sub + 4), proxy, proxy);
      g_string_append_printf (t,
                              "{\"time\":%" G_GINT64_FORMAT
                              ",\"event\":\"agent_exited\",\"site\":\"A\","
                              "\"proxy\":\"%s\",\"agent\":\"g-%s\"}\n",
                              S (sub + 14), proxy, proxy);
      g_string_append_printf (t,
                              "{\"time\":%" G_GINT64_FORMAT
                              ",\"event\":\"proxy_ended\",\"site\":\"A\","
                              "\"proxy\":\"%s\",\"job\":\"%u\"}\n",
                              S (sub + 15), proxy, j + 1);
      result (r, j + 1, proxy, sub + 4, sub + 14, 0);
    }
  g_string_append_printf (t,
                          "{\"time\":%" G_GINT64_FORMAT
                          ",\"event\":\"campaign_finished\",\"done\":6,"
                          "\"failed\":0,\"cancelled\":0}\n",
                          S (45));
  g_autofree gchar *tp = g_build_filename (dir, "trace.jsonl", NULL);
  g_autofree gchar *rp = g_build_filename (dir, "results.jsonl", NULL);
  g_assert_true (g_file_set_contents (tp, t->str, (gssize) t->len, NULL));
  g_assert_true (g_file_set_contents (rp, r->str, (gssize) r->len, NULL));
  if (mode_in_json)
    {
      g_autofree gchar *cp = g_build_filename (dir, "campaign.json", NULL);
      g_assert_true (
          g_file_set_contents (cp, "{\"version\": 1, \"mode\": \"direct\"}\n", -1, NULL));
    }
  g_string_free (t, TRUE);
  g_string_free (r, TRUE);
}

gchar *
fixture_campaign_new (FixtureFlags flags)
{
  gchar *dir = g_dir_make_tmp ("datc-campaign-XXXXXX", NULL);
  g_assert_nonnull (dir);
  fixture_campaign_write (dir, flags);
  return dir;
}

void
fixture_remove_tree (const char *dir)
{
  g_autoptr (GDir) d = g_dir_open (dir, 0, NULL);
  const char *name;
  while (d != NULL && (name = g_dir_read_name (d)) != NULL)
    {
      g_autofree gchar *p = g_build_filename (dir, name, NULL);
      if (g_file_test (p, G_FILE_TEST_IS_DIR) && !g_file_test (p, G_FILE_TEST_IS_SYMLINK))
        fixture_remove_tree (p);
      else
        g_unlink (p);
    }
  g_rmdir (dir);
}
