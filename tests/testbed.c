/* testbed.c: see testbed.h.  Plain g_spawn_sync: these run before and
 * after the test bodies, where no main loop or GSubprocess is needed. */
#include "testbed.h"

#include "testbed-sshd.h"

#include <sys/wait.h>

gboolean
tb_script (const char *name, const char *const *args, gchar **out)
{
  const char *testbed = g_getenv ("DATC_TESTBED");
  if (testbed == NULL || !g_file_test (testbed, G_FILE_TEST_IS_DIR))
    {
      g_printerr ("# DATC_TESTBED (tests/testbed/) is not set or not a directory: "
                  "run through meson test\n");
      return FALSE;
    }
  g_autoptr (GPtrArray) argv = g_ptr_array_new_with_free_func (g_free);
  g_ptr_array_add (argv, g_strdup ("bash"));
  g_ptr_array_add (argv, g_build_filename (testbed, name, NULL));
  for (guint i = 0; args != NULL && args[i] != NULL; i++)
    g_ptr_array_add (argv, g_strdup (args[i]));
  g_ptr_array_add (argv, NULL);

  gint status = -1;
  g_autofree gchar *stdout_text = NULL;
  g_autofree gchar *stderr_text = NULL;
  g_autoptr (GError) error = NULL;
  if (!g_spawn_sync (NULL, (gchar **) argv->pdata, NULL, G_SPAWN_SEARCH_PATH, NULL, NULL,
                     &stdout_text, &stderr_text, &status, &error)
      || !g_spawn_check_wait_status (status, &error))
    {
      g_printerr ("# %s failed: %s\n%s\n", name, error->message, stderr_text ? stderr_text : "");
      return FALSE;
    }
  if (out != NULL)
    *out = g_steal_pointer (&stdout_text);
  return TRUE;
}

GHashTable *
tb_env_read (const char *path)
{
  g_autofree gchar *text = NULL;
  if (!g_file_get_contents (path, &text, NULL, NULL))
    return NULL;
  return testbed_env_parse (text);
}

gboolean
tb_env_load (const char *dir)
{
  g_autofree gchar *path = g_build_filename (dir, "env", NULL);
  g_autoptr (GHashTable) env = tb_env_read (path);
  if (env == NULL)
    {
      g_printerr ("# cannot read %s\n", path);
      return FALSE;
    }
  GHashTableIter it;
  gpointer k, v;
  g_hash_table_iter_init (&it, env);
  while (g_hash_table_iter_next (&it, &k, &v))
    g_setenv (k, v, TRUE);
  return TRUE;
}

gchar *
tb_capture (const char *const *argv, int *status)
{
  gchar *out = NULL;
  gint wait_status = 0;
  if (status != NULL)
    *status = -1;
  if (!g_spawn_sync (NULL, (gchar **) argv, NULL, G_SPAWN_SEARCH_PATH | G_SPAWN_STDERR_TO_DEV_NULL,
                     NULL, NULL, &out, NULL, &wait_status, NULL))
    return g_strdup ("");
  if (status != NULL)
    *status = WIFEXITED (wait_status) ? WEXITSTATUS (wait_status) : 128 + WTERMSIG (wait_status);
  return out != NULL ? out : g_strdup ("");
}

gchar *
tb_capture_sh (const char *cmd)
{
  const char *argv[] = { "/bin/sh", "-c", cmd, NULL };
  return tb_capture (argv, NULL);
}
