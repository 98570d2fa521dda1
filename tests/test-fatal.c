/* test-fatal.c: a master stopped by an error still cleans up, and a full
 * disk costs a resume, not the campaign.  The campaign directory sits on
 * a small tmpfs, mounted in a mount namespace of the test's own (so it
 * needs root), that the tasks' outputs overflow:
 *   - `datc run` exits 3 naming the path it could not write, and leaves
 *     no agent behind; once the tmpfs is grown, the same command
 *     completes with one results line per task and every output intact
 *     (read back with `datc output`);
 *   - with a sites file whose second site's proxies never connect (its
 *     "agent" only sleeps: a fork site's stand-in for a job waiting in a
 *     queue), the same error still cancels them before the master exits,
 *     and stderr says nothing is left;
 *   - a master killed outright (as an assertion's abort kills it) cleans
 *     nothing, but the next run of the same command adopts the proxies it
 *     left from the journal and cancels them. */
#include <errno.h>
#include <glib/gstdio.h>
#include <sched.h>
#include <signal.h>
#include <string.h>
#include <sys/mount.h>
#include <unistd.h>

#include "harness.h"

#define TASKS 24
#define TASK_BYTES 65536

/* Task i prints TASK_BYTES of one letter, then its id. */
static gchar *
tasks_file (TbDir *d)
{
  g_autoptr (GString) t = g_string_new (NULL);
  for (guint i = 1; i <= TASKS; i++)
    g_string_append_printf (t, "head -c %u /dev/zero | tr '\\0' %c; echo %u\n", TASK_BYTES,
                            'a' + i % 26, i);
  return tb_write (d, "tasks.txt", t->str);
}

static gchar *
expected_output (guint id)
{
  g_autoptr (GString) s = g_string_new (NULL);
  for (guint i = 0; i < TASK_BYTES; i++)
    g_string_append_c (s, (char) ('a' + id % 26));
  g_string_append_printf (s, "%u\n", id);
  return g_string_free (g_steal_pointer (&s), FALSE);
}

/* A tmpfs of `size` at D/disk (transfer full). */
static gchar *
mount_disk (TbDir *d, const char *size)
{
  g_autofree gchar *opts = g_strdup_printf ("size=%s", size);
  gchar *path = g_build_filename (d->path, "disk", NULL);
  g_assert_cmpint (g_mkdir (path, 0700), ==, 0);
  if (mount ("datc-test-disk", path, "tmpfs", 0, opts) != 0)
    g_error ("mount tmpfs on %s: %s", path, g_strerror (errno));
  return path;
}

static void
grow_disk (const char *path, const char *size)
{
  g_autofree gchar *opts = g_strdup_printf ("size=%s", size);
  if (mount (NULL, path, NULL, MS_REMOUNT, opts) != 0)
    g_error ("remount %s with %s: %s", path, opts, g_strerror (errno));
}

static void
unmount_disk (const char *path)
{
  g_assert_cmpint (umount (path), ==, 0);
}

/* Job ids (pids: fork sites) of the proxies submitted on `site`.  Read
 * line by line: on a full disk the trace's later lines may be torn, the
 * first ones are whole. */
static GArray *
proxies_of (const char *dir, const char *site)
{
  GArray *pids = g_array_new (FALSE, FALSE, sizeof (int));
  g_autofree gchar *path = g_build_filename (dir, "trace.jsonl", NULL);
  g_autofree gchar *text = NULL;
  if (!g_file_get_contents (path, &text, NULL, NULL))
    return pids;
  g_auto (GStrv) lines = g_strsplit (text, "\n", -1);
  g_autoptr (JsonParser) parser = json_parser_new ();
  for (guint i = 0; lines[i] != NULL; i++)
    {
      if (lines[i][0] == '\0' || !json_parser_load_from_data (parser, lines[i], -1, NULL)
          || json_parser_get_root (parser) == NULL
          || !JSON_NODE_HOLDS_OBJECT (json_parser_get_root (parser)))
        continue;
      JsonObject *o = json_node_get_object (json_parser_get_root (parser));
      if (g_strcmp0 (json_object_get_string_member_with_default (o, "event", ""), "proxy_submitted")
              == 0
          && g_strcmp0 (json_object_get_string_member_with_default (o, "site", ""), site) == 0)
        {
          int pid = atoi (json_object_get_string_member (o, "job"));
          g_assert_cmpint (pid, >, 1);
          g_array_append_val (pids, pid);
        }
    }
  return pids;
}

/* Kills what is left of the sleeping proxies (each leads its own process
 * group), by pid, and says so: none should be left. */
static guint
kill_sleepers (GArray *pids)
{
  guint left = 0;
  for (guint i = 0; i < pids->len; i++)
    {
      int pid = g_array_index (pids, int, i);
      if (!tb_pid_gone (pid))
        {
          kill (-pid, SIGKILL);
          left++;
        }
    }
  return left;
}

/* A fork site whose proxies never connect (its agent sleeps), after one
 * that works.  Agents connect over the campaign's ipc socket, which a
 * restarted master binds again: the agent a killed master left comes
 * back to the next one. */
static gchar *
sites_with_a_queue (TbDir *d)
{
  g_autofree gchar *sleeper = tb_write (d, "never-connects", "#!/bin/sh\nexec sleep 300\n");
  g_assert_cmpint (g_chmod (sleeper, 0755), ==, 0);
  g_autofree gchar *text = g_strdup_printf (
      "[site work]\nscheduler = fork\nslots_per_proxy = 2\nmax_proxies = 1\n\n"
      "[site queued]\nscheduler = fork\nslots_per_proxy = 1\nmax_proxies = 2\nagent = %s\n",
      sleeper);
  return tb_write (d, "sites.ini", text);
}

/* ---- a full disk ------------------------------------------------------ */

static void
test_disk_full_then_resume (void)
{
  g_autoptr (TbDir) d = tb_dir_new ();
  g_autofree gchar *file = tasks_file (d);
  g_autofree gchar *disk = mount_disk (d, "512k");
  g_autofree gchar *dir = g_build_filename (disk, "c", NULL);
  const char *argv[] = { tb_datc (), "run", "--dir", dir, "--local-slots", "2", file, NULL };

  g_autofree gchar *err = NULL;
  int status = tb_run (d, argv, 120, &err);
  g_printerr ("%s", err);
  g_assert_cmpint (status, ==, 3);
  g_autofree gchar *where = g_strdup_printf ("datc: %s/", dir);
  g_assert_nonnull (strstr (err, where));
  g_assert_nonnull (strstr (err, g_strerror (ENOSPC)));
  /* The error stopped the master; its agent went with it. */
  g_autoptr (GArray) left = tb_find_agents (dir);
  g_assert_cmpuint (left->len, ==, 0);
  g_assert_nonnull (strstr (err, "nothing left on the sites"));
  g_autofree gchar *results = g_build_filename (dir, "results.jsonl", NULL);
  g_assert_cmpuint (tb_count_lines (results), <, TASKS);

  grow_disk (disk, "32m");
  g_clear_pointer (&err, g_free);
  status = tb_run (d, argv, 120, &err);
  if (status != 0)
    g_printerr ("%s", err);
  g_assert_cmpint (status, ==, 0);
  g_assert_cmpuint (tb_count_lines (results), ==, TASKS);
  g_autoptr (GHashTable) res = tb_results (dir); /* fails on an id seen twice */
  g_assert_cmpuint (g_hash_table_size (res), ==, TASKS);
  for (guint id = 1; id <= TASKS; id++)
    {
      g_autofree gchar *ids = g_strdup_printf ("%u", id);
      const char *out_argv[] = { tb_datc (), "output", dir, ids, NULL };
      g_autoptr (TbProc) p = tb_spawn (d, "output", out_argv);
      g_assert_cmpint (tb_wait (p, 30), ==, 0);
      g_autofree gchar *out = tb_proc_stdout (p);
      g_autofree gchar *want = expected_output (id);
      g_assert_cmpstr (out, ==, want);
    }
  unmount_disk (disk);
}

/* ---- queued proxies when an error stops the master ---------------------- */

static void
test_error_cancels_queued_proxies (void)
{
  g_autoptr (TbDir) d = tb_dir_new ();
  g_autofree gchar *file = tasks_file (d);
  g_autofree gchar *sites = sites_with_a_queue (d);
  g_autofree gchar *disk = mount_disk (d, "512k");
  g_autofree gchar *dir = g_build_filename (disk, "c", NULL);
  const char *argv[] = { tb_datc (), "run", "--dir", dir, "--sites", sites, file, NULL };

  g_autofree gchar *err = NULL;
  int status = tb_run (d, argv, 120, &err);
  g_printerr ("%s", err);
  g_autoptr (GArray) queued = proxies_of (dir, "queued");
  guint left = kill_sleepers (queued);
  g_assert_cmpint (status, ==, 3);
  g_assert_nonnull (strstr (err, g_strerror (ENOSPC)));
  /* Both queued proxies were there when the error came, and are gone. */
  g_assert_cmpuint (queued->len, ==, 2);
  g_assert_cmpuint (left, ==, 0);
  g_assert_nonnull (strstr (err, "nothing left on the sites"));
  g_autoptr (GArray) agents = tb_find_agents (dir);
  g_assert_cmpuint (agents->len, ==, 0);
  unmount_disk (disk);
}

/* ---- a master that dies without cleaning up ---------------------------- */

typedef struct {
  const char *dir;
  const char *site;
  guint n;
} Submitted;

static gboolean
submitted (gpointer data)
{
  Submitted *s = data;
  g_autoptr (GArray) pids = proxies_of (s->dir, s->site);
  return pids->len >= s->n;
}

static void
test_next_run_cancels_what_a_dead_master_left (void)
{
  g_autoptr (TbDir) d = tb_dir_new ();
  /* Tasks wait for a file, so the first master is killed mid-campaign. */
  g_autofree gchar *go = g_build_filename (d->path, "go", NULL);
  g_autoptr (GString) t = g_string_new (NULL);
  for (guint i = 1; i <= TASKS; i++)
    g_string_append_printf (t, "while [ ! -e %s ]; do sleep 0.05; done; echo %u\n", go, i);
  g_autofree gchar *file = tb_write (d, "tasks.txt", t->str);
  g_autofree gchar *sites = sites_with_a_queue (d);
  g_autofree gchar *dir = g_build_filename (d->path, "c", NULL);
  const char *argv[] = { tb_datc (), "run", "--dir", dir, "--sites", sites, file, NULL };

  g_autoptr (TbProc) first = tb_spawn (d, "first", argv);
  Submitted s = { dir, "queued", 2 };
  g_assert_true (tb_await (submitted, &s, 60));
  g_assert_true (tb_proc_signal (first, SIGKILL));
  g_assert_cmpint (tb_wait (first, 30), ==, 128 + SIGKILL);
  g_autoptr (GArray) queued = proxies_of (dir, "queued");
  g_assert_cmpuint (queued->len, ==, 2);
  /* Nothing ran after the kill: its proxies are still there. */
  for (guint i = 0; i < queued->len; i++)
    g_assert_false (tb_pid_gone (g_array_index (queued, int, i)));

  g_assert_true (g_file_set_contents (go, "", 0, NULL));
  g_autofree gchar *err = NULL;
  int status = tb_run (d, argv, 120, &err);
  if (status != 0)
    g_printerr ("%s", err);
  guint left = kill_sleepers (queued);
  g_autoptr (GArray) all = proxies_of (dir, "queued");
  guint left_by_second = kill_sleepers (all);
  g_assert_cmpint (status, ==, 0);
  g_assert_cmpuint (left, ==, 0);
  g_assert_cmpuint (left_by_second, ==, 0);
  g_autoptr (GHashTable) res = tb_results (dir);
  g_assert_cmpuint (g_hash_table_size (res), ==, TASKS);
  /* The second master cancelled them: the trace says so, by job. */
  g_autoptr (GPtrArray) trace = tb_trace (dir);
  guint cancelled = 0;
  for (guint i = 0; i < trace->len; i++)
    {
      JsonObject *o = trace->pdata[i];
      if (!g_str_equal (json_object_get_string_member (o, "event"), "proxy_cancelled"))
        continue;
      int job = atoi (json_object_get_string_member (o, "job"));
      for (guint j = 0; j < queued->len; j++)
        cancelled += job == g_array_index (queued, int, j);
    }
  g_assert_cmpuint (cancelled, ==, 2);
}

/* The tmpfs is mounted where only this process (and what it starts) sees
 * it, and goes away with it. */
static void
enter_mount_namespace (void)
{
  if (unshare (CLONE_NEWNS) != 0)
    g_error ("unshare(CLONE_NEWNS): %s (this test mounts a tmpfs: run it as root)",
             g_strerror (errno));
  if (mount (NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) != 0)
    g_error ("making / private in the test's mount namespace: %s", g_strerror (errno));
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  enter_mount_namespace ();
  g_test_add_func ("/fatal/disk-full-exits-3-and-a-resume-completes", test_disk_full_then_resume);
  g_test_add_func ("/fatal/an-error-still-cancels-queued-proxies",
                   test_error_cancels_queued_proxies);
  g_test_add_func ("/fatal/the-next-run-cancels-what-a-killed-master-left",
                   test_next_run_cancels_what_a_dead_master_left);
  return g_test_run ();
}
