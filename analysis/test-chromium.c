/* test-chromium.c: see test-chromium.h.  Chromium runs with a throwaway
 * profile and every background service off, under coreutils `timeout` so
 * a hung browser fails the test instead of stalling the suite. */
#include "test-chromium.h"

#include <gio/gio.h>
#include <stdio.h>
#include <string.h>

#include "test-fixture-campaign.h"

gchar *
chromium_dump_dom (const char *path)
{
  g_autofree gchar *chromium = g_find_program_in_path ("chromium");
  if (chromium == NULL)
    g_error ("chromium is not installed: the report test renders the report in headless Chromium; "
             "run scripts/install-deps --test");
  g_autofree gchar *profile = g_dir_make_tmp ("datc-chromium-XXXXXX", NULL);
  g_autofree gchar *abs = g_canonicalize_filename (path, NULL);
  g_autofree gchar *url = g_filename_to_uri (abs, NULL, NULL);
  g_autofree gchar *profile_arg = g_strdup_printf ("--user-data-dir=%s", profile);
  const char *argv[] = { "timeout",
                         "-k",
                         "5",
                         "90",
                         chromium,
                         "--headless",
                         "--no-sandbox",
                         "--disable-gpu",
                         "--disable-quic",
                         "--no-first-run",
                         "--disable-background-networking",
                         "--disable-component-update",
                         "--disable-sync",
                         "--disable-extensions",
                         profile_arg,
                         "--dump-dom",
                         url,
                         NULL };
  g_autoptr (GError) error = NULL;
  g_autoptr (GSubprocess) p = g_subprocess_newv (
      argv, G_SUBPROCESS_FLAGS_STDOUT_PIPE | G_SUBPROCESS_FLAGS_STDERR_PIPE, &error);
  if (p == NULL)
    g_error ("cannot start chromium: %s", error->message);
  g_autofree gchar *out = NULL, *err = NULL;
  if (!g_subprocess_communicate_utf8 (p, NULL, NULL, &out, &err, &error))
    g_error ("chromium: %s", error->message);
  fixture_remove_tree (profile);
  if (!g_subprocess_get_if_exited (p) || g_subprocess_get_exit_status (p) != 0)
    g_error ("chromium failed (exit %d) on %s:\n%s",
             g_subprocess_get_if_exited (p) ? g_subprocess_get_exit_status (p) : -1, path, err);
  if (out == NULL || strstr (out, "<body") == NULL)
    g_error ("chromium gave no DOM for %s:\n%s", path, err);
  /* Page-level trouble chromium reports on stderr. */
  if (err != NULL && (strstr (err, "Uncaught") != NULL || strstr (err, "ERR_") != NULL))
    g_error ("chromium reported errors loading %s:\n%s", path, err);
  return g_steal_pointer (&out);
}

void
chromium_assert_report_drawn (const char *dom, guint plots)
{
  if (strstr (dom, "data-errors=") != NULL)
    g_error ("the page recorded script errors: %s", strstr (dom, "data-errors="));
  g_autofree gchar *want_plots = g_strdup_printf ("data-plots=\"%u\"", plots);
  g_autofree gchar *want_drawn = g_strdup_printf ("data-plots-drawn=\"%u\"", plots);
  if (strstr (dom, want_plots) == NULL || strstr (dom, want_drawn) == NULL)
    g_error ("want %s and %s in the rendered page; got %.300s", want_plots, want_drawn,
             strstr (dom, "<body") ? strstr (dom, "<body") : dom);
  /* Each plot: a box of at least 1x1 around at least one mark. */
  guint seen = 0;
  for (const char *p = strstr (dom, "data-rendered=\""); p != NULL;
       p = strstr (p + 1, "data-rendered=\""))
    {
      guint w = 0, h = 0, n = 0;
      g_assert_cmpint (sscanf (p, "data-rendered=\"%ux%u %u\"", &w, &h, &n), ==, 3);
      g_assert_cmpuint (w, >, 0);
      g_assert_cmpuint (h, >, 0);
      g_assert_cmpuint (n, >, 0);
      seen++;
    }
  g_assert_cmpuint (seen, ==, plots);
}
