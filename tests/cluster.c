/* cluster.c: the cluster-shaped bed (see cluster.h) driven through
 * tests/testbed/cluster-up.sh and cluster-down.sh, with multisite.c's
 * helpers for running scripts and reading what they write.  Sessions are
 * cut and links flipped here, by PID and by interface, because those are
 * what a relay test does mid-campaign. */
#include "cluster.h"

#include "harness.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#define CL_ERROR (g_quark_from_static_string ("cl-testbed"))

#define SGE_LOCK "/tmp/datc-sge.lock"

static ClBed *
bed_new (const char *dir)
{
  ClBed *bed = g_new0 (ClBed, 1);
  bed->dir = g_strdup (dir);
  return bed;
}

void
cl_bed_free (ClBed *bed)
{
  if (bed == NULL)
    return;
  g_free (bed->dir);
  g_free (bed->scheduler);
  g_free (bed->ns_master);
  g_free (bed->master_addr);
  g_free (bed->login.ns);
  g_free (bed->login.addr);
  g_free (bed->login.sshd_dir);
  g_free (bed->login.user);
  g_free (bed->login.identity);
  g_free (bed->login.known_hosts);
  g_free (bed->login_cluster_addr);
  g_free (bed->login_hostname);
  g_free (bed->login_remote_dir);
  g_free (bed->ns_compute);
  g_free (bed->compute_addr);
  g_free (bed->compute_hostname);
  g_strfreev (bed->cluster_env);
  g_free (bed);
}

ClBed *
cl_bed_load (const char *dir, GError **error)
{
  g_return_val_if_fail (dir != NULL, NULL);
  g_autoptr (ClBed) bed = bed_new (dir);
  g_autofree gchar *path = g_build_filename (dir, "cluster.env", NULL);
  g_autoptr (GHashTable) env = ms_env_read (path, error);
  if (env == NULL)
    return NULL;
  const struct {
    const char *key;
    gchar **field;
  } keys[] = {
    { "CLUSTER_SCHEDULER", &bed->scheduler },
    { "CLUSTER_NS_MASTER", &bed->ns_master },
    { "CLUSTER_MASTER_ADDR", &bed->master_addr },
    { "CLUSTER_NS_LOGIN", &bed->login.ns },
    { "CLUSTER_LOGIN_ADDR", &bed->login.addr },
    { "CLUSTER_LOGIN_CLUSTER_ADDR", &bed->login_cluster_addr },
    { "CLUSTER_LOGIN_HOSTNAME", &bed->login_hostname },
    { "CLUSTER_NS_COMPUTE", &bed->ns_compute },
    { "CLUSTER_COMPUTE_ADDR", &bed->compute_addr },
    { "CLUSTER_COMPUTE_HOSTNAME", &bed->compute_hostname },
    { "CLUSTER_SSHD_DIR", &bed->login.sshd_dir },
  };
  for (guint i = 0; i < G_N_ELEMENTS (keys); i++)
    if (!ms_env_get (env, path, keys[i].key, keys[i].field, error))
      return NULL;
  /* Empty when the scheduler's clients need nothing: not required. */
  const char *client = g_hash_table_lookup (env, "CLUSTER_ENV");
  bed->cluster_env = g_strsplit_set (client ? client : "", " ", -1);
  if (bed->cluster_env[0] != NULL && bed->cluster_env[0][0] == '\0')
    {
      g_strfreev (bed->cluster_env);
      bed->cluster_env = g_new0 (gchar *, 1);
    }
  if (!ms_login_load (&bed->login, error))
    return NULL;
  g_autofree gchar *sshd_env = g_build_filename (bed->login.sshd_dir, "sshd.env", NULL);
  g_autoptr (GHashTable) s = ms_env_read (sshd_env, error);
  if (s == NULL || !ms_env_get (s, sshd_env, "SSHD_REMOTE_DIR", &bed->login_remote_dir, error))
    return NULL;
  return g_steal_pointer (&bed);
}

ClBed *
cl_bed_up (const char *dir, const char *scheduler, GError **error)
{
  g_return_val_if_fail (dir != NULL && g_path_is_absolute (dir), NULL);
  g_return_val_if_fail (scheduler != NULL, NULL);
  if (g_mkdir_with_parents (dir, 0755) != 0 || chmod (dir, 0755) != 0)
    {
      /* 0755: the login user reaches the sshd's files through it. */
      g_set_error (error, CL_ERROR, 1, "cannot create %s: %s", dir, g_strerror (errno));
      return NULL;
    }
  /* The script brings down what came up when it fails. */
  const char *args[] = { "--scheduler", scheduler, dir, NULL };
  if (!ms_script ("cluster-up.sh", args, error))
    {
      g_prefix_error (error, "the cluster bed did not come up: ");
      return NULL;
    }
  g_autoptr (ClBed) bed = cl_bed_load (dir, error);
  if (bed == NULL)
    {
      g_autoptr (ClBed) half = bed_new (dir);
      half->up = TRUE;
      cl_bed_down (half, NULL);
      return NULL;
    }
  bed->up = TRUE;
  return g_steal_pointer (&bed);
}

gboolean
cl_bed_down (ClBed *bed, GError **error)
{
  if (!bed->up)
    return TRUE;
  const char *args[] = { bed->dir, NULL };
  if (!ms_script ("cluster-down.sh", args, error))
    return FALSE;
  bed->up = FALSE;
  return TRUE;
}

gchar *
cl_site_group (ClBed *bed, const char *name, const char *scheduler, const char *workdir,
               const char *extra)
{
  return ms_login_site_group (&bed->login, name, scheduler, workdir, extra);
}

gchar *
cl_site_workdir_root (ClBed *bed, const char *parent, GError **error)
{
  return ms_user_workdir_root (bed->login.user, parent, error);
}

gboolean
cl_login_command (ClBed *bed, const char *user, const char *const *argv, gchar **out,
                  GError **error)
{
  g_autofree gchar *hosts = g_build_filename (bed->dir, "hosts-login", NULL);
  /* What sshd-up.sh --hosts --hostname does for the login node's
   * sessions, each step exec'ing the next. */
  g_autoptr (GPtrArray) cmd = g_ptr_array_new ();
  const char *const wrap[] = { "unshare",
                               "--mount",
                               "--uts",
                               "--propagation",
                               "private",
                               "sh",
                               "-c",
                               "mount --bind \"$1\" /etc/hosts && echo \"$2\" "
                               ">/proc/sys/kernel/hostname && shift 2 && exec \"$@\"",
                               "sh",
                               hosts,
                               bed->login_hostname,
                               "env",
                               NULL };
  for (guint i = 0; wrap[i] != NULL; i++)
    g_ptr_array_add (cmd, (gpointer) wrap[i]);
  for (guint i = 0; bed->cluster_env[i] != NULL; i++)
    g_ptr_array_add (cmd, bed->cluster_env[i]);
  if (user != NULL)
    {
      g_ptr_array_add (cmd, "runuser");
      g_ptr_array_add (cmd, "-u");
      g_ptr_array_add (cmd, (gpointer) user);
      g_ptr_array_add (cmd, "--");
    }
  for (guint i = 0; argv[i] != NULL; i++)
    g_ptr_array_add (cmd, (gpointer) argv[i]);
  g_ptr_array_add (cmd, NULL);
  g_auto (GStrv) full = ms_in_netns (bed->login.ns, (const char *const *) cmd->pdata);
  return ms_run ((const char *const *) full, out, error);
}

/* ---- faults ----------------------------------------------------------- */

/* The parent pid of `pid` from /proc, 0 when it is gone. */
static int
parent_of (int pid)
{
  g_autofree gchar *path = g_strdup_printf ("/proc/%d/stat", pid);
  g_autofree gchar *stat = NULL;
  if (!g_file_get_contents (path, &stat, NULL, NULL))
    return 0;
  const char *rp = strrchr (stat, ')');
  int ppid = 0;
  char state;
  if (rp == NULL || sscanf (rp + 1, " %c %d", &state, &ppid) != 2)
    return 0;
  return ppid;
}

static gboolean
is_sshd (int pid)
{
  g_autofree gchar *path = g_strdup_printf ("/proc/%d/exe", pid);
  g_autofree gchar *exe = g_file_read_link (path, NULL);
  return exe != NULL && g_str_equal (exe, "/usr/sbin/sshd");
}

/* Every live pid whose chain of parents reaches `root` (not root itself). */
static GArray *
descendants (int root)
{
  GArray *all = g_array_new (FALSE, FALSE, sizeof (int));
  g_autoptr (GDir) proc = g_dir_open ("/proc", 0, NULL);
  const char *name;
  while (proc != NULL && (name = g_dir_read_name (proc)) != NULL)
    {
      int pid = atoi (name);
      if (pid <= 1 || pid == root)
        continue;
      /* Bounded: a pid reused mid-walk must not make this loop for ever. */
      for (int p = parent_of (pid), hops = 0; p > 1 && hops < 64; p = parent_of (p), hops++)
        if (p == root)
          {
            g_array_append_val (all, pid);
            break;
          }
    }
  return all;
}

gboolean
cl_cut_session (ClBed *bed, GError **error)
{
  g_autofree gchar *path = g_build_filename (bed->login.sshd_dir, "sshd.env", NULL);
  g_autoptr (GHashTable) env = ms_env_read (path, error);
  g_autofree gchar *pid_text = NULL;
  if (env == NULL || !ms_env_get (env, path, "SSHD_PID", &pid_text, error))
    return FALSE;
  int listener = atoi (pid_text);
  if (listener <= 1 || !is_sshd (listener))
    {
      g_set_error (error, CL_ERROR, 1, "the login sshd (pid %s in %s) is not running", pid_text,
                   path);
      return FALSE;
    }
  /* Only sshd's own processes: the commands they run are left to find
   * their pipes closed, as after a connection dropped on the way. */
  g_autoptr (GArray) below = descendants (listener);
  g_autoptr (GArray) cut = g_array_new (FALSE, FALSE, sizeof (int));
  for (guint i = 0; i < below->len; i++)
    {
      int pid = g_array_index (below, int, i);
      if (is_sshd (pid) && !tb_pid_gone (pid))
        g_array_append_val (cut, pid);
    }
  if (cut->len == 0)
    {
      g_set_error (error, CL_ERROR, 1, "no SSH session to the login node to cut");
      return FALSE;
    }
  for (guint i = 0; i < cut->len; i++)
    kill (g_array_index (cut, int, i), SIGKILL);
  gint64 deadline = g_get_monotonic_time () + 10 * G_USEC_PER_SEC;
  for (guint i = 0; i < cut->len; i++)
    while (!tb_pid_gone (g_array_index (cut, int, i)))
      {
        if (g_get_monotonic_time () > deadline)
          {
            g_set_error (error, CL_ERROR, 1, "sshd session process %d survived SIGKILL for 10 s",
                         g_array_index (cut, int, i));
            return FALSE;
          }
        g_usleep (10000);
      }
  return TRUE;
}

gboolean
cl_link_set (ClBed *bed, gboolean up, GError **error)
{
  /* cluster-up.sh names link A's end in the login namespace a0; the peer
   * loses its carrier with it. */
  const char *argv[] = { "ip", "-n", bed->login.ns, "link", "set", "a0", up ? "up" : "down", NULL };
  return ms_run (argv, NULL, error);
}

/* ---- the Grid Engine cell -------------------------------------------- */

/* Whether a process this one descends from holds a flock on `st`'s file
 * (/proc/locks: "N: FLOCK ADVISORY WRITE PID MAJ:MIN:INODE 0 EOF", the
 * device numbers in hex). */
static gboolean
ancestor_holds (const struct stat *st)
{
  g_autofree gchar *locks = NULL;
  if (!g_file_get_contents ("/proc/locks", &locks, NULL, NULL))
    return FALSE;
  g_auto (GStrv) lines = g_strsplit (locks, "\n", -1);
  for (guint i = 0; lines[i] != NULL; i++)
    {
      char kind[16], type[16], mode[16];
      int pid;
      unsigned int maj, min;
      unsigned long long ino;
      const char *colon = strchr (lines[i], ':');
      if (colon == NULL || strstr (lines[i], "->") != NULL
          || sscanf (colon + 1, " %15s %15s %15s %d %x:%x:%llu", kind, type, mode, &pid, &maj, &min,
                     &ino)
                 != 7
          || !g_str_equal (kind, "FLOCK") || ino != (unsigned long long) st->st_ino
          || maj != major (st->st_dev) || min != minor (st->st_dev))
        continue;
      for (int p = getppid (), hops = 0; p > 1 && hops < 64; p = parent_of (p), hops++)
        if (p == pid)
          return TRUE;
    }
  return FALSE;
}

gboolean
cl_sge_lock (guint timeout_s, int *fd, GError **error)
{
  *fd = -1;
  int f = open (SGE_LOCK, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  struct stat st;
  if (f < 0 || fstat (f, &st) != 0)
    {
      g_set_error (error, CL_ERROR, 1, "cannot open %s: %s", SGE_LOCK, g_strerror (errno));
      if (f >= 0)
        close (f);
      return FALSE;
    }
  gint64 deadline = g_get_monotonic_time () + (gint64) timeout_s * G_USEC_PER_SEC;
  while (flock (f, LOCK_EX | LOCK_NB) != 0)
    {
      if (ancestor_holds (&st))
        {
          close (f);
          return TRUE;
        }
      if (g_get_monotonic_time () > deadline)
        {
          g_set_error (error, CL_ERROR, 1, "%s still held by another test after %u s", SGE_LOCK,
                       timeout_s);
          close (f);
          return FALSE;
        }
      g_usleep (100000);
    }
  *fd = f;
  return TRUE;
}
