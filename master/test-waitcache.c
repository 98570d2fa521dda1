/* test-waitcache.c: the per-user cache of queue waits (waitcache.h). */
#include <string.h>

#include <glib/gstdio.h>

#include "waitcache.h"

/* Directories the tests made, removed at the end. */
static GPtrArray *made;

static gchar *
temp_path (void)
{
  g_autoptr (GError) error = NULL;
  gchar *dir = g_dir_make_tmp ("datc-waitcache-XXXXXX", &error);
  g_assert_no_error (error);
  gchar *path = g_build_filename (dir, "sub", "waits.jsonl", NULL);
  g_ptr_array_add (made, dir);
  return path;
}

static GArray *
waits_of (DatcWaitCache *c, const char *key)
{
  GArray *a = g_array_new (FALSE, FALSE, sizeof (double));
  datc_wait_cache_get (c, key, a);
  return a;
}

static guint
lines_in (const char *path)
{
  g_autofree gchar *text = NULL;
  g_assert_true (g_file_get_contents (path, &text, NULL, NULL));
  guint n = 0;
  for (const char *p = text; *p; p++)
    n += *p == '\n';
  return n;
}

/* What one campaign adds, the next one reads, per site; its directory is
 * made; the key tells sites and queues apart. */
static void
test_kept_across_opens (void)
{
  g_autofree gchar *path = temp_path ();
  g_autofree gchar *a = datc_wait_cache_key ("slurm", "slurm", NULL);
  g_autofree gchar *b = datc_wait_cache_key ("slurm", "slurm", "long");
  g_assert_cmpstr (a, !=, b);
  {
    g_autoptr (DatcWaitCache) c = datc_wait_cache_open (path);
    g_autoptr (GArray) none = waits_of (c, a);
    g_assert_cmpuint (none->len, ==, 0);
    datc_wait_cache_add (c, a, 12.5, 1000);
    datc_wait_cache_add (c, a, 3.25, 1001);
    datc_wait_cache_add (c, b, 600, 1002);
  }
  g_autoptr (DatcWaitCache) c = datc_wait_cache_open (path);
  g_autoptr (GArray) wa = waits_of (c, a);
  g_autoptr (GArray) wb = waits_of (c, b);
  g_assert_cmpuint (wa->len, ==, 2);
  g_assert_cmpfloat (g_array_index (wa, double, 0), ==, 12.5);
  g_assert_cmpfloat (g_array_index (wa, double, 1), ==, 3.25);
  g_assert_cmpuint (wb->len, ==, 1);
  g_assert_cmpfloat (g_array_index (wb, double, 0), ==, 600);
}

/* A site keeps its last DATC_WAIT_CACHE_PER_SITE waits, and the file stays
 * within twice that. */
static void
test_bounded (void)
{
  g_autofree gchar *path = temp_path ();
  g_autofree gchar *key = datc_wait_cache_key ("s", "sge", NULL);
  guint n = DATC_WAIT_CACHE_PER_SITE * 5 + 7;
  {
    g_autoptr (DatcWaitCache) c = datc_wait_cache_open (path);
    for (guint i = 0; i < n; i++)
      {
        datc_wait_cache_add (c, key, i, 1000 + i);
        g_assert_cmpuint (lines_in (path), <=, 2 * DATC_WAIT_CACHE_PER_SITE);
      }
  }
  g_autoptr (DatcWaitCache) c = datc_wait_cache_open (path);
  g_autoptr (GArray) w = waits_of (c, key);
  g_assert_cmpuint (w->len, ==, DATC_WAIT_CACHE_PER_SITE);
  g_assert_cmpfloat (g_array_index (w, double, 0), ==, n - DATC_WAIT_CACHE_PER_SITE);
  g_assert_cmpfloat (g_array_index (w, double, w->len - 1), ==, n - 1);
}

/* Bad lines are skipped (the rest is read), and so is a last line a crash
 * cut short; the cache still takes new waits. */
static void
test_bad_lines_skipped (void)
{
  g_autofree gchar *path = temp_path ();
  g_autofree gchar *dir = g_path_get_dirname (path);
  g_assert_cmpint (g_mkdir_with_parents (dir, 0700), ==, 0);
  const char *text = "{\"site\":\"k\",\"wait_s\":1,\"time\":5}\n"
                     "not json\n"
                     "{\"site\":7,\"wait_s\":1,\"time\":5}\n"
                     "{\"site\":\"k\",\"wait_s\":-4,\"time\":5}\n"
                     "{\"site\":\"k\",\"wait_s\":2.5,\"time\":6}\n"
                     "{\"site\":\"k\",\"wait_s\":9";
  g_assert_true (g_file_set_contents (path, text, -1, NULL));
  g_autoptr (DatcWaitCache) c = datc_wait_cache_open (path);
  g_autoptr (GArray) w = waits_of (c, "k");
  g_assert_cmpuint (w->len, ==, 2);
  g_assert_cmpfloat (g_array_index (w, double, 1), ==, 2.5);
  datc_wait_cache_add (c, "k", 4, 7);
  g_autoptr (GArray) w2 = waits_of (c, "k");
  g_assert_cmpuint (w2->len, ==, 3);
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  g_test_add_func ("/waitcache/kept-across-opens", test_kept_across_opens);
  g_test_add_func ("/waitcache/bounded", test_bounded);
  g_test_add_func ("/waitcache/bad-lines-skipped", test_bad_lines_skipped);
  made = g_ptr_array_new_with_free_func (g_free);
  int rc = g_test_run ();
  for (guint i = 0; i < made->len; i++)
    {
      const char *rm[] = { "rm", "-rf", "--", made->pdata[i], NULL };
      g_spawn_sync (NULL, (gchar **) rm, NULL, G_SPAWN_SEARCH_PATH, NULL, NULL, NULL, NULL, NULL,
                    NULL);
    }
  g_ptr_array_unref (made);
  return rc;
}
