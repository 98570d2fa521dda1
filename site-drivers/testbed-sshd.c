/* testbed-sshd.c: drives tests/testbed/{sshd,netns}-{up,down}.sh for the
 * tests and reads what they write (KEY=VALUE files).  It only ever stops
 * what those scripts started, or what a test noted with
 * testbed_track_pid(), by pid; namespaces by the names netns-up.sh chose. */

#include "testbed-sshd.h"

#include <glib/gstdio.h>

#include <errno.h>
#include <signal.h>
#include <string.h>
#include <unistd.h>

static gboolean fail (const char *format, ...) G_GNUC_PRINTF (1, 2);

static gboolean
fail (const char *format, ...)
{
  va_list args;

  va_start (args, format);
  g_autofree gchar *message = g_strdup_vprintf (format, args);
  va_end (args);
  g_printerr ("testbed: %s\n", message);
  g_test_message ("testbed: %s", message);
  g_test_fail ();
  return FALSE;
}

gboolean
testbed_script (const char *script, const char *const *args, gchar **out)
{
  const char *dir = g_getenv ("DATC_TESTBED");

  if (dir == NULL || !g_file_test (dir, G_FILE_TEST_IS_DIR))
    return fail ("DATC_TESTBED (tests/testbed/) is not set or not a directory; run the "
                 "ssh tests through meson test");

  g_autoptr (GPtrArray) argv = g_ptr_array_new_with_free_func (g_free);
  g_autofree gchar *path = g_build_filename (dir, script, NULL);
  g_autofree gchar *stdout_text = NULL;
  g_autofree gchar *stderr_text = NULL;
  g_autoptr (GError) error = NULL;
  gint status = 0;

  g_ptr_array_add (argv, g_strdup ("bash"));
  g_ptr_array_add (argv, g_strdup (path));
  for (gsize i = 0; args != NULL && args[i] != NULL; i++)
    g_ptr_array_add (argv, g_strdup (args[i]));
  g_ptr_array_add (argv, NULL);

  if (!g_spawn_sync (NULL, (gchar **) argv->pdata, NULL, G_SPAWN_SEARCH_PATH, NULL, NULL,
                     &stdout_text, &stderr_text, &status, &error))
    return fail ("cannot run %s: %s", path, error->message);
  if (!g_spawn_check_wait_status (status, &error))
    return fail ("%s failed (%s): %s", path, error->message, stderr_text);
  if (out != NULL)
    *out = g_steal_pointer (&stdout_text);
  return TRUE;
}

GHashTable *
testbed_env_parse (const char *text)
{
  GHashTable *env = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, g_free);
  g_auto (GStrv) lines = g_strsplit (text, "\n", -1);

  for (gsize i = 0; lines[i] != NULL; i++)
    {
      char *eq = strchr (lines[i], '=');
      if (eq == NULL)
        continue;
      *eq = '\0';
      gchar *value = g_strdup (eq + 1);
      gsize len = strlen (value);
      if (len >= 2 && value[0] == '"' && value[len - 1] == '"')
        {
          memmove (value, value + 1, len - 2);
          value[len - 2] = '\0';
        }
      g_hash_table_replace (env, g_strdup (g_strstrip (lines[i])), value);
    }
  return env;
}

static gboolean
load_env (const char *path, GHashTable **env)
{
  g_autofree gchar *text = NULL;
  g_autoptr (GError) error = NULL;

  if (!g_file_get_contents (path, &text, NULL, &error))
    return fail ("%s", error->message);
  g_clear_pointer (env, g_hash_table_unref);
  *env = testbed_env_parse (text);
  return TRUE;
}

static gboolean
sshd_start (TestbedSshd *sshd)
{
  g_autoptr (GPtrArray) args = g_ptr_array_new ();

  if (sshd->netns != NULL)
    {
      g_ptr_array_add (args, "--netns");
      g_ptr_array_add (args, sshd->netns);
      g_ptr_array_add (args, "--addr");
      g_ptr_array_add (args, sshd->addr);
    }
  g_ptr_array_add (args, sshd->dir);
  g_ptr_array_add (args, NULL);
  if (!testbed_script ("sshd-up.sh", (const char *const *) args->pdata, NULL))
    return FALSE;

  g_autofree gchar *env_path = g_build_filename (sshd->dir, "sshd.env", NULL);
  return load_env (env_path, &sshd->env);
}

gboolean
testbed_sshd_up (TestbedSshd *sshd, const char *netns, const char *addr)
{
  g_autoptr (GError) error = NULL;

  memset (sshd, 0, sizeof *sshd);
  sshd->dir = g_dir_make_tmp ("datc-sshd-XXXXXX", &error);
  if (sshd->dir == NULL)
    return fail ("%s", error->message);
  sshd->owner = TRUE;
  sshd->netns = g_strdup (netns);
  sshd->addr = g_strdup (addr);
  return sshd_start (sshd);
}

gboolean
testbed_sshd_attach (TestbedSshd *sshd, const char *dir)
{
  memset (sshd, 0, sizeof *sshd);
  if (dir == NULL)
    return fail ("no sshd directory handed to the child");
  sshd->dir = g_strdup (dir);

  g_autofree gchar *env_path = g_build_filename (dir, "sshd.env", NULL);
  if (!load_env (env_path, &sshd->env))
    return FALSE;
  const char *netns = g_hash_table_lookup (sshd->env, "SSHD_NETNS");
  sshd->netns = netns != NULL && *netns != '\0' ? g_strdup (netns) : NULL;
  sshd->addr = g_strdup (g_hash_table_lookup (sshd->env, "SSHD_ADDR"));
  return TRUE;
}

gboolean
testbed_sshd_restart (TestbedSshd *sshd)
{
  return sshd_start (sshd);
}

gboolean
testbed_sshd_stop (TestbedSshd *sshd)
{
  const char *args[] = { sshd->dir, NULL };

  return sshd->dir == NULL || testbed_script ("sshd-down.sh", args, NULL);
}

void
testbed_remove_tree (const char *path)
{
  g_autoptr (GDir) dir = g_dir_open (path, 0, NULL);
  const char *name;

  while (dir != NULL && (name = g_dir_read_name (dir)) != NULL)
    {
      g_autofree gchar *child = g_build_filename (path, name, NULL);
      if (g_file_test (child, G_FILE_TEST_IS_DIR) && !g_file_test (child, G_FILE_TEST_IS_SYMLINK))
        testbed_remove_tree (child);
      else
        (void) g_unlink (child);
    }
  (void) g_rmdir (path);
}

void
testbed_track_pid (TestbedSshd *sshd, pid_t pid)
{
  g_autofree gchar *path = g_build_filename (sshd->dir, "tracked.pids", NULL);
  g_autofree gchar *line = g_strdup_printf ("%d\n", (int) pid);
  FILE *file = fopen (path, "a");

  if (file == NULL || fputs (line, file) == EOF || fclose (file) != 0)
    fail ("cannot note pid %d in %s", (int) pid, path);
}

/* Alive and not a zombie. */
static gboolean
process_is_alive (pid_t pid)
{
  g_autofree gchar *path = g_strdup_printf ("/proc/%d/stat", (int) pid);
  g_autofree gchar *stat = NULL;

  if (!g_file_get_contents (path, &stat, NULL, NULL))
    return FALSE;
  const char *p = strrchr (stat, ')');
  return p != NULL && strncmp (p, ") Z", 3) != 0;
}

static void
kill_tracked (TestbedSshd *sshd)
{
  g_autofree gchar *path = g_build_filename (sshd->dir, "tracked.pids", NULL);
  g_autofree gchar *text = NULL;

  if (!g_file_get_contents (path, &text, NULL, NULL))
    return;
  g_auto (GStrv) lines = g_strsplit (text, "\n", -1);
  for (gsize i = 0; lines[i] != NULL; i++)
    {
      gint64 pid = g_ascii_strtoll (lines[i], NULL, 10);
      if (pid > 1 && process_is_alive ((pid_t) pid))
        (void) kill ((pid_t) pid, SIGKILL);
    }
}

void
testbed_sshd_clear (TestbedSshd *sshd)
{
  if (sshd->dir != NULL && sshd->owner)
    {
      kill_tracked (sshd);
      if (testbed_sshd_stop (sshd) && !g_test_failed ())
        testbed_remove_tree (sshd->dir);
      else
        g_test_message ("kept the sshd's directory for a look: %s", sshd->dir);
    }
  g_clear_pointer (&sshd->dir, g_free);
  g_clear_pointer (&sshd->env, g_hash_table_unref);
  g_clear_pointer (&sshd->netns, g_free);
  g_clear_pointer (&sshd->addr, g_free);
}

const char *
testbed_sshd_get (TestbedSshd *sshd, const char *key)
{
  const char *value = sshd->env != NULL ? g_hash_table_lookup (sshd->env, key) : NULL;

  if (value == NULL)
    {
      fail ("sshd-up.sh wrote no %s", key);
      return "";
    }
  return value;
}

pid_t
testbed_sshd_pid (TestbedSshd *sshd)
{
  return (pid_t) g_ascii_strtoll (testbed_sshd_get (sshd, "SSHD_PID"), NULL, 10);
}

GKeyFile *
testbed_sshd_site (TestbedSshd *sshd, const char *group)
{
  GKeyFile *config = g_key_file_new ();

  g_key_file_set_string (config, group, "transport", "ssh");
  g_key_file_set_string (config, group, "host", testbed_sshd_get (sshd, "SSHD_ADDR"));
  g_key_file_set_string (config, group, "port", testbed_sshd_get (sshd, "SSHD_PORT"));
  g_key_file_set_string (config, group, "user", testbed_sshd_get (sshd, "SSHD_USER"));
  g_key_file_set_string (config, group, "identity", testbed_sshd_get (sshd, "SSHD_IDENTITY"));
  g_key_file_set_string (config, group, "known_hosts", testbed_sshd_get (sshd, "SSHD_KNOWN_HOSTS"));
  return config;
}

/* ppid of `pid` from /proc, or 0. */
static pid_t
parent_of (const char *pid)
{
  g_autofree gchar *path = g_strdup_printf ("/proc/%s/stat", pid);
  g_autofree gchar *stat = NULL;

  if (!g_file_get_contents (path, &stat, NULL, NULL))
    return 0;
  /* "pid (comm) S ppid ...": comm may hold anything, so from the last ')'. */
  const char *p = strrchr (stat, ')');
  if (p == NULL || strlen (p) < 5)
    return 0;
  return (pid_t) g_ascii_strtoll (p + 4, NULL, 10);
}

GArray *
testbed_sshd_sessions (TestbedSshd *sshd)
{
  g_autoptr (GHashTable) parents = g_hash_table_new (g_direct_hash, g_direct_equal);
  g_autoptr (GDir) proc = g_dir_open ("/proc", 0, NULL);
  GArray *found = g_array_new (FALSE, FALSE, sizeof (pid_t));
  const char *name;

  while (proc != NULL && (name = g_dir_read_name (proc)) != NULL)
    {
      if (!g_ascii_isdigit (name[0]))
        continue;
      pid_t pid = (pid_t) g_ascii_strtoll (name, NULL, 10);
      g_hash_table_insert (parents, GINT_TO_POINTER (pid), GINT_TO_POINTER (parent_of (name)));
    }

  /* Breadth first from the listener. */
  pid_t listener = testbed_sshd_pid (sshd);
  g_autoptr (GArray) queue = g_array_new (FALSE, FALSE, sizeof (pid_t));
  g_array_append_val (queue, listener);
  for (guint head = 0; head < queue->len; head++)
    {
      pid_t parent = g_array_index (queue, pid_t, head);
      GHashTableIter iter;
      gpointer key, value;

      g_hash_table_iter_init (&iter, parents);
      while (g_hash_table_iter_next (&iter, &key, &value))
        if (GPOINTER_TO_INT (value) == parent && process_is_alive (GPOINTER_TO_INT (key)))
          {
            pid_t child = GPOINTER_TO_INT (key);
            g_array_append_val (queue, child);
            g_array_append_val (found, child);
          }
    }
  return found;
}

guint64
testbed_sshd_unread_input (TestbedSshd *sshd)
{
  g_autofree gchar *path = g_strdup_printf ("/proc/%d/net/tcp", (int) testbed_sshd_pid (sshd));
  g_autofree gchar *table = NULL;
  guint64 port = g_ascii_strtoull (testbed_sshd_get (sshd, "SSHD_PORT"), NULL, 10);
  guint64 unread = 0;

  if (!g_file_get_contents (path, &table, NULL, NULL))
    return 0;

  /* "sl local rem st tx_queue:rx_queue ..."; addresses as HEXIP:HEXPORT. */
  g_auto (GStrv) lines = g_strsplit (table, "\n", -1);
  for (gsize i = 1; lines[i] != NULL; i++)
    {
      char local[64], remote[64], state[8], queues[40];

      if (sscanf (lines[i], " %*s %63s %63s %7s %39s", local, remote, state, queues) != 4)
        continue;
      const char *colon = strrchr (local, ':');
      const char *rx = strchr (queues, ':');
      if (colon != NULL && rx != NULL && g_ascii_strtoull (colon + 1, NULL, 16) == port
          && strcmp (state, "01") == 0)
        unread += g_ascii_strtoull (rx + 1, NULL, 16);
    }
  return unread;
}

gboolean
testbed_netns_up (TestbedNetns *netns, const char *site)
{
  g_autoptr (GError) error = NULL;
  g_autofree gchar *suffix = g_strdup_printf ("t%d", (int) getpid ());

  memset (netns, 0, sizeof *netns);
  netns->dir = g_dir_make_tmp ("datc-netns-XXXXXX", &error);
  if (netns->dir == NULL)
    return fail ("%s", error->message);
  netns->owner = TRUE;

  const char *args[] = { "--suffix", suffix, netns->dir, site, NULL };
  if (!testbed_script ("netns-up.sh", args, NULL))
    return FALSE;
  g_autofree gchar *env_path = g_build_filename (netns->dir, "netns.env", NULL);
  return load_env (env_path, &netns->env);
}

gboolean
testbed_netns_attach (TestbedNetns *netns, const char *dir)
{
  memset (netns, 0, sizeof *netns);
  if (dir == NULL)
    return fail ("no netns directory handed to the child");
  netns->dir = g_strdup (dir);
  g_autofree gchar *env_path = g_build_filename (dir, "netns.env", NULL);
  return load_env (env_path, &netns->env);
}

void
testbed_netns_clear (TestbedNetns *netns)
{
  const char *args[] = { netns->dir, NULL };

  if (netns->dir != NULL && netns->owner && testbed_script ("netns-down.sh", args, NULL))
    testbed_remove_tree (netns->dir);
  g_clear_pointer (&netns->dir, g_free);
  g_clear_pointer (&netns->env, g_hash_table_unref);
}

const char *
testbed_netns_get (TestbedNetns *netns, const char *key)
{
  const char *value = netns->env != NULL ? g_hash_table_lookup (netns->env, key) : NULL;

  if (value == NULL)
    {
      fail ("netns-up.sh wrote no %s", key);
      return "";
    }
  return value;
}
