/* multisite.c: the multi-site test bed (see multisite.h) driven through
 * the tests/testbed/ scripts, and readers for what a campaign leaves.
 * Every step is one script (testbed.c's tb_script, from $DATC_TESTBED)
 * run with a deadline-free g_spawn_sync: the scripts bound their own
 * waits. */
#include "multisite.h"

#include "testbed.h"

#include <errno.h>
#include <pwd.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define MS_ERROR (g_quark_from_static_string ("ms-testbed"))

/* The steps of the bring-up, in order; down undoes them in reverse. */
enum {
  STEP_NETNS,
  STEP_SLURM,
  STEP_SGE,
  STEP_PBS,
  STEP_LSF,
  STEP_SSHD0,
  N_STEPS = STEP_SSHD0 + MS_N_HOSTS
};
G_STATIC_ASSERT (N_STEPS <= G_N_ELEMENTS (((MsBed *) NULL)->up));

static const char *const host_names[MS_N_HOSTS] = { "slurm", "sge", "down", "pbs", "lsf" };

/* ---- running things ------------------------------------------------- */

/* Runs argv; a non-zero exit is an error with the last lines of stderr. */
static gboolean
run_argv (const char *const *argv, gchar **out, GError **error)
{
  g_autofree gchar *o = NULL, *e = NULL;
  gint status = 0;
  if (!g_spawn_sync (NULL, (gchar **) argv, NULL, G_SPAWN_SEARCH_PATH, NULL, NULL, &o, &e, &status,
                     error))
    return FALSE;
  if (!g_spawn_check_wait_status (status, NULL))
    {
      g_autofree gchar *cmd = g_strjoinv (" ", (gchar **) argv);
      gsize len = strlen (e);
      g_set_error (error, MS_ERROR, 1, "%s failed: %s", cmd, len > 2000 ? e + len - 2000 : e);
      return FALSE;
    }
  if (out != NULL)
    *out = g_steal_pointer (&o);
  return TRUE;
}

/* bash tests/testbed/NAME ARGS... (testbed.c, which prints the script's
 * stderr when it fails). */
static gboolean
script (const char *name, const char *const *args, GError **error)
{
  if (tb_script (name, args, NULL))
    return TRUE;
  g_set_error (error, MS_ERROR, 1, "%s failed (its stderr is above)", name);
  return FALSE;
}

GStrv
ms_in_netns (const char *ns, const char *const *argv)
{
  GPtrArray *all = g_ptr_array_new ();
  g_ptr_array_add (all, g_strdup ("nsenter"));
  g_ptr_array_add (all, g_strdup_printf ("--net=/run/netns/%s", ns));
  for (guint i = 0; argv[i] != NULL; i++)
    g_ptr_array_add (all, g_strdup (argv[i]));
  g_ptr_array_add (all, NULL);
  return (GStrv) g_ptr_array_free (all, FALSE);
}

static GHashTable *
read_env (const char *path, GError **error)
{
  GHashTable *env = tb_env_read (path);
  if (env == NULL)
    g_set_error (error, MS_ERROR, 1, "cannot read %s", path);
  return env;
}

static gboolean
env_get (GHashTable *env, const char *path, const char *key, gchar **value, GError **error)
{
  const char *v = g_hash_table_lookup (env, key);
  if (v == NULL || v[0] == '\0')
    {
      g_set_error (error, MS_ERROR, 1, "%s: no %s", path, key);
      return FALSE;
    }
  *value = g_strdup (v);
  return TRUE;
}

/* The PATH of a PBS or LSF client: their commands first (PBS's qsub,
 * qstat, qdel clash with Grid Engine's in /usr/bin), then what a user's
 * login has. */
static gchar *
client_path (const char *bindir)
{
  return g_strdup_printf ("PATH=%s:/usr/local/bin:/usr/bin:/bin", bindir);
}

/* A cluster's client environment as KEY=VALUE, from what its up script
 * wrote: Slurm's and Grid Engine's DIR/env as it is (SLURM_CONF; SGE_ROOT,
 * SGE_CELL and the ports when they are not the default); PBS_CONF_FILE
 * and PBS's bin (PBS_EXEC in its pbs.conf), not pbs-up.sh's PATH, whose
 * wrappers run `ip netns exec` and so need root; LSF's DIR/env (LSF_ENVDIR,
 * LSB_NTRIES) and LSF_BINDIR on PATH. */
static GStrv
cluster_env (MsHost h, const char *state_dir, GError **error)
{
  g_autofree gchar *path = g_build_filename (state_dir, "env", NULL);
  g_autoptr (GHashTable) env = read_env (path, error);
  if (env == NULL)
    return NULL;
  g_autoptr (GStrvBuilder) b = g_strv_builder_new ();
  if (h == MS_PBS)
    {
      g_autofree gchar *conf_path = NULL, *exec = NULL;
      if (!env_get (env, path, "PBS_CONF_FILE", &conf_path, error))
        return NULL;
      g_autoptr (GHashTable) conf = read_env (conf_path, error);
      if (conf == NULL || !env_get (conf, conf_path, "PBS_EXEC", &exec, error))
        return NULL;
      g_autofree gchar *bin = g_build_filename (exec, "bin", NULL);
      g_autofree gchar *conf_kv = g_strdup_printf ("PBS_CONF_FILE=%s", conf_path);
      g_autofree gchar *path_kv = client_path (bin);
      g_strv_builder_add (b, conf_kv);
      g_strv_builder_add (b, path_kv);
      return g_strv_builder_end (b);
    }
  if (h == MS_LSF)
    {
      g_autofree gchar *bin = NULL;
      if (!env_get (env, path, "LSF_BINDIR", &bin, error))
        return NULL;
      g_autofree gchar *path_kv = client_path (bin);
      g_strv_builder_add (b, path_kv);
    }
  GHashTableIter it;
  gpointer k, v;
  g_hash_table_iter_init (&it, env);
  while (g_hash_table_iter_next (&it, &k, &v))
    {
      g_autofree gchar *kv = g_strdup_printf ("%s=%s", (char *) k, (char *) v);
      g_strv_builder_add (b, kv);
    }
  return g_strv_builder_end (b);
}

/* In *hosts, the /etc/hosts `h`'s clients must see: pbs-up.sh maps this
 * host's name to the namespace's address there (recorded as hosts= in
 * DIR/run/info), as PBS ignores 127.x.  NULL for the other clusters. */
static gboolean
cluster_hosts (MsHost h, const char *state_dir, gchar **hosts, GError **error)
{
  *hosts = NULL;
  if (h != MS_PBS)
    return TRUE;
  g_autofree gchar *path = g_build_filename (state_dir, "run", "info", NULL);
  g_autoptr (GHashTable) info = read_env (path, error);
  return info != NULL && env_get (info, path, "hosts", hosts, error);
}

/* For the other beds built from the same scripts (tests/cluster.c). */
gboolean
ms_run (const char *const *argv, gchar **out, GError **error)
{
  return run_argv (argv, out, error);
}

gboolean
ms_script (const char *name, const char *const *args, GError **error)
{
  return script (name, args, error);
}

GHashTable *
ms_env_read (const char *path, GError **error)
{
  return read_env (path, error);
}

gboolean
ms_env_get (GHashTable *env, const char *path, const char *key, gchar **value, GError **error)
{
  return env_get (env, path, key, value, error);
}

/* ---- up and down ---------------------------------------------------- */

/* The steps, each one script; what they wrote is read by ms_bed_load. */
static gboolean
netns_up (MsBed *bed, GError **error)
{
  g_autofree gchar *netdir = g_build_filename (bed->dir, "net", NULL);
  /* In MsHost's order: host_addr() counts on it. */
  const char *args[]
      = { "--suffix", bed->suffix, netdir, "slurm", "sge", "down", "pbs", "lsf", NULL };
  G_STATIC_ASSERT (G_N_ELEMENTS (args) == 3 + MS_N_HOSTS + 1);
  if (!script ("netns-up.sh", args, error))
    return FALSE;
  bed->up[STEP_NETNS] = TRUE;
  return TRUE;
}

/* Namespace and address of each host, from DIR/net/netns.env. */
static gboolean
load_netns (MsBed *bed, GError **error)
{
  g_autofree gchar *path = g_build_filename (bed->dir, "net", "netns.env", NULL);
  g_autoptr (GHashTable) env = read_env (path, error);
  if (env == NULL || !env_get (env, path, "NETNS_SUFFIX", &bed->suffix, error)
      || !env_get (env, path, "NETNS_MASTER", &bed->ns_master, error)
      || !env_get (env, path, "NETNS_MASTER_ADDR", &bed->master_addr, error))
    return FALSE;
  for (guint h = 0; h < MS_N_HOSTS; h++)
    {
      g_autofree gchar *ns_key = g_strdup_printf ("NETNS_SITE_%s", host_names[h]);
      g_autofree gchar *addr_key = g_strdup_printf ("NETNS_ADDR_%s", host_names[h]);
      if (!env_get (env, path, ns_key, &bed->login[h].ns, error)
          || !env_get (env, path, addr_key, &bed->login[h].addr, error))
        return FALSE;
    }
  return TRUE;
}

static gchar *
host_ns (MsBed *bed, MsHost h)
{
  return g_strdup_printf ("tb-%s-%s", host_names[h], bed->suffix);
}

static gchar *
host_addr (MsHost h)
{
  return g_strdup_printf ("10.200.0.%u", 11 + (guint) h); /* netns-up.sh's order */
}

static gboolean
clusters_up (MsBed *bed, GError **error)
{
  g_autofree gchar *slurm = g_build_filename (bed->dir, "slurm", NULL);
  g_autofree gchar *sge = g_build_filename (bed->dir, "sge", NULL);
  g_autofree gchar *cluster = g_strdup_printf ("ms%s", bed->suffix);
  g_autofree gchar *slurm_ns = host_ns (bed, MS_SLURM), *slurm_addr = host_addr (MS_SLURM);
  g_autofree gchar *sge_ns = host_ns (bed, MS_SGE);
  const char *s_args[]
      = { "--netns", slurm_ns, "--addr", slurm_addr, "--cluster", cluster, slurm, NULL };
  if (!script ("slurm-up.sh", s_args, error))
    return FALSE;
  bed->up[STEP_SLURM] = TRUE;
  /* Another Grid Engine bed (another test program) may hold the one
   * cell: take turns. */
  const char *g_args[] = { "--netns", sge_ns, "--wait", "180", sge, NULL };
  if (!script ("sge-up.sh", g_args, error))
    return FALSE;
  bed->up[STEP_SGE] = TRUE;
  g_autofree gchar *pbs = g_build_filename (bed->dir, "pbs", NULL);
  g_autofree gchar *pbs_ns = host_ns (bed, MS_PBS), *pbs_addr = host_addr (MS_PBS);
  const char *p_args[] = { "--netns", pbs_ns, "--addr", pbs_addr, pbs, NULL };
  if (!script ("pbs-up.sh", p_args, error))
    return FALSE;
  bed->up[STEP_PBS] = TRUE;
  g_autofree gchar *lsf = g_build_filename (bed->dir, "lsf", NULL);
  g_autofree gchar *lsf_ns = host_ns (bed, MS_LSF);
  const char *l_args[] = { "--netns", lsf_ns, lsf, NULL };
  if (!script ("lsf-up.sh", l_args, error))
    return FALSE;
  bed->up[STEP_LSF] = TRUE;
  return TRUE;
}

static gchar *
cluster_dir (MsBed *bed, MsHost h)
{
  return h == MS_DOWN ? NULL : g_build_filename (bed->dir, host_names[h], NULL);
}

static gchar *
sshd_dir (MsBed *bed, MsHost h)
{
  return g_strdup_printf ("%s/ssh-%s", bed->dir, host_names[h]);
}

/* A login node whose sessions get its cluster's client environment. */
static gboolean
login_up (MsBed *bed, MsHost h, GError **error)
{
  g_autofree gchar *cdir = cluster_dir (bed, h);
  g_auto (GStrv) env = cdir ? cluster_env (h, cdir, error) : g_new0 (gchar *, 1);
  g_autofree gchar *hosts = NULL;
  if (env == NULL || (cdir != NULL && !cluster_hosts (h, cdir, &hosts, error)))
    return FALSE;
  g_autoptr (GPtrArray) args = g_ptr_array_new_with_free_func (g_free);
  g_ptr_array_add (args, g_strdup ("--netns"));
  g_ptr_array_add (args, host_ns (bed, h));
  g_ptr_array_add (args, g_strdup ("--addr"));
  g_ptr_array_add (args, host_addr (h));
  if (hosts != NULL)
    {
      g_ptr_array_add (args, g_strdup ("--hosts"));
      g_ptr_array_add (args, g_strdup (hosts));
    }
  for (guint i = 0; env[i] != NULL; i++)
    {
      g_ptr_array_add (args, g_strdup ("--setenv"));
      g_ptr_array_add (args, g_strdup (env[i]));
    }
  g_ptr_array_add (args, sshd_dir (bed, h));
  g_ptr_array_add (args, NULL);
  if (!script ("sshd-up.sh", (const char *const *) args->pdata, error))
    return FALSE;
  bed->up[STEP_SSHD0 + h] = TRUE;
  return TRUE;
}

static gboolean
load_login (MsBed *bed, MsHost h, GError **error)
{
  MsLogin *l = &bed->login[h];
  l->sshd_dir = sshd_dir (bed, h);
  g_autofree gchar *cdir = cluster_dir (bed, h);
  bed->cluster_env[h] = cdir ? cluster_env (h, cdir, error) : g_new0 (gchar *, 1);
  if (bed->cluster_env[h] == NULL
      || (cdir != NULL && !cluster_hosts (h, cdir, &bed->hosts[h], error)))
    return FALSE;
  return ms_login_load (l, error);
}

gboolean
ms_login_load (MsLogin *l, GError **error)
{
  g_autofree gchar *path = g_build_filename (l->sshd_dir, "sshd.env", NULL);
  g_autoptr (GHashTable) env = read_env (path, error);
  g_autofree gchar *port = NULL;
  if (env == NULL || !env_get (env, path, "SSHD_PORT", &port, error)
      || !env_get (env, path, "SSHD_USER", &l->user, error)
      || !env_get (env, path, "SSHD_IDENTITY", &l->identity, error)
      || !env_get (env, path, "SSHD_KNOWN_HOSTS", &l->known_hosts, error))
    return FALSE;
  l->port = (guint) g_ascii_strtoull (port, NULL, 10);
  return TRUE;
}

static MsBed *
bed_new (const char *dir)
{
  MsBed *bed = g_new0 (MsBed, 1);
  bed->dir = g_strdup (dir);
  return bed;
}

MsBed *
ms_bed_load (const char *dir, GError **error)
{
  g_return_val_if_fail (dir != NULL, NULL);
  g_autoptr (MsBed) bed = bed_new (dir);
  if (!load_netns (bed, error))
    return NULL;
  for (guint h = 0; h < MS_N_HOSTS; h++)
    if (!load_login (bed, (MsHost) h, error))
      return NULL;
  return g_steal_pointer (&bed);
}

MsBed *
ms_bed_up (const char *dir, GError **error)
{
  g_return_val_if_fail (dir != NULL && g_path_is_absolute (dir), NULL);
  g_autoptr (MsBed) bed = bed_new (dir);
  bed->suffix = g_strdup_printf ("ms%d", (int) getpid ());
  if (g_mkdir_with_parents (dir, 0755) != 0 || chmod (dir, 0755) != 0)
    {
      /* 0755: the login user reaches the sshd's files through it. */
      g_set_error (error, MS_ERROR, 1, "cannot create %s: %s", dir, g_strerror (errno));
      return NULL;
    }
  gboolean ok = netns_up (bed, error) && clusters_up (bed, error);
  for (guint h = 0; ok && h < MS_N_HOSTS; h++)
    ok = login_up (bed, (MsHost) h, error);
  g_autoptr (MsBed) loaded = ok ? ms_bed_load (dir, error) : NULL;
  if (loaded == NULL)
    {
      g_prefix_error (error, "the multi-site test bed did not come up: ");
      ms_bed_down (bed, NULL);
      return NULL;
    }
  memcpy (loaded->up, bed->up, sizeof bed->up);
  return g_steal_pointer (&loaded);
}

gboolean
ms_bed_down (MsBed *bed, GError **error)
{
  g_autoptr (GString) failed = g_string_new (NULL);
  for (int h = MS_N_HOSTS - 1; h >= 0; h--)
    if (bed->up[STEP_SSHD0 + h])
      {
        g_autoptr (GError) e = NULL;
        g_autofree gchar *sdir = sshd_dir (bed, (MsHost) h);
        const char *args[] = { sdir, NULL };
        if (!script ("sshd-down.sh", args, &e))
          g_string_append_printf (failed, "%s; ", e->message);
        bed->up[STEP_SSHD0 + h] = FALSE;
      }
  const struct {
    int step;
    const char *script, *sub;
  } steps[] = {
    { STEP_LSF, "lsf-down.sh", "lsf" },     { STEP_PBS, "pbs-down.sh", "pbs" },
    { STEP_SGE, "sge-down.sh", "sge" },     { STEP_SLURM, "slurm-down.sh", "slurm" },
    { STEP_NETNS, "netns-down.sh", "net" },
  };
  for (guint i = 0; i < G_N_ELEMENTS (steps); i++)
    if (bed->up[steps[i].step])
      {
        g_autoptr (GError) e = NULL;
        g_autofree gchar *sub = g_build_filename (bed->dir, steps[i].sub, NULL);
        const char *args[] = { sub, NULL };
        if (!script (steps[i].script, args, &e))
          g_string_append_printf (failed, "%s; ", e->message);
        bed->up[steps[i].step] = FALSE;
      }
  if (failed->len > 0)
    {
      g_set_error (error, MS_ERROR, 1, "bringing the test bed down: %s", failed->str);
      return FALSE;
    }
  return TRUE;
}

void
ms_bed_free (MsBed *bed)
{
  if (bed == NULL)
    return;
  for (guint h = 0; h < MS_N_HOSTS; h++)
    {
      MsLogin *l = &bed->login[h];
      g_free (l->ns);
      g_free (l->addr);
      g_free (l->sshd_dir);
      g_free (l->user);
      g_free (l->identity);
      g_free (l->known_hosts);
      g_strfreev (bed->cluster_env[h]);
      g_free (bed->hosts[h]);
    }
  g_free (bed->dir);
  g_free (bed->suffix);
  g_free (bed->ns_master);
  g_free (bed->master_addr);
  g_free (bed);
}

/* ---- using it ------------------------------------------------------- */

gchar *
ms_site_group (MsBed *bed, MsHost host, const char *name, const char *scheduler,
               const char *workdir, const char *extra)
{
  return ms_login_site_group (&bed->login[host], name, scheduler, workdir, extra);
}

gchar *
ms_login_site_group (const MsLogin *l, const char *name, const char *scheduler, const char *workdir,
                     const char *extra)
{
  const char *agent = g_getenv ("DATC_AGENT");
  return g_strdup_printf ("[site %s]\ntransport = ssh\nhost = %s\nport = %u\nuser = %s\n"
                          "identity = %s\nknown_hosts = %s\nscheduler = %s\n"
                          "agent = %s\nworkdir = %s/%s\n%s\n",
                          name, l->addr, l->port, l->user, l->identity, l->known_hosts, scheduler,
                          agent ? agent : "datc-agent", workdir, name, extra ? extra : "");
}

gchar *
ms_site_workdir_root (MsBed *bed, const char *parent, GError **error)
{
  return ms_user_workdir_root (bed->login[MS_SLURM].user, parent, error);
}

gchar *
ms_user_workdir_root (const char *user, const char *parent, GError **error)
{
  struct passwd *pw = getpwnam (user);
  if (pw == NULL)
    {
      g_set_error (error, MS_ERROR, 1, "no user %s", user);
      return NULL;
    }
  g_autofree gchar *root = g_build_filename (parent, "sites", NULL);
  if (chmod (parent, 0755) != 0 || g_mkdir_with_parents (root, 0700) != 0
      || chown (root, pw->pw_uid, pw->pw_gid) != 0)
    {
      g_set_error (error, MS_ERROR, 1, "cannot prepare %s for %s: %s", root, user,
                   g_strerror (errno));
      return NULL;
    }
  return g_steal_pointer (&root);
}

gboolean
ms_site_command (MsBed *bed, MsHost host, const char *user, const char *const *argv, gchar **out,
                 GError **error)
{
  g_autoptr (GPtrArray) cmd = g_ptr_array_new ();
  if (bed->hosts[host] != NULL)
    {
      /* As the login node's sshd does (sshd-up.sh --hosts): the cluster's
       * hosts file over /etc/hosts in a mount namespace of the command's
       * own. */
      const char *const bind[] = { "unshare",
                                   "--mount",
                                   "--propagation",
                                   "private",
                                   "sh",
                                   "-c",
                                   "mount --bind \"$1\" /etc/hosts && shift && exec \"$@\"",
                                   "sh",
                                   bed->hosts[host],
                                   NULL };
      for (guint i = 0; bind[i] != NULL; i++)
        g_ptr_array_add (cmd, (gpointer) bind[i]);
    }
  g_ptr_array_add (cmd, "env");
  for (guint i = 0; bed->cluster_env[host][i] != NULL; i++)
    g_ptr_array_add (cmd, bed->cluster_env[host][i]);
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
  g_auto (GStrv) full = ms_in_netns (bed->login[host].ns, (const char *const *) cmd->pdata);
  return run_argv ((const char *const *) full, out, error);
}

gboolean
ms_login_stop (MsBed *bed, MsHost host, GError **error)
{
  const char *args[] = { bed->login[host].sshd_dir, NULL };
  if (!script ("sshd-down.sh", args, error))
    return FALSE;
  bed->up[STEP_SSHD0 + host] = FALSE;
  return TRUE;
}

int
ms_login_pid (MsBed *bed, MsHost host, GError **error)
{
  g_autofree gchar *path = g_build_filename (bed->login[host].sshd_dir, "sshd.env", NULL);
  g_autoptr (GHashTable) env = read_env (path, error);
  g_autofree gchar *pid = NULL;
  if (env == NULL || !env_get (env, path, "SSHD_PID", &pid, error))
    return 0;
  return (int) g_ascii_strtoll (pid, NULL, 10);
}

gchar *
ms_slurm_job_state (MsBed *bed, const char *job_id, GError **error)
{
  const char *argv[] = { "squeue", "-h", "-t", "all", "-j", job_id, "-o", "%T", NULL };
  gchar *out = NULL;
  if (!ms_site_command (bed, MS_SLURM, NULL, argv, &out, error))
    return NULL;
  return g_strstrip (out);
}

gboolean
ms_competitor_fill_slurm (MsBed *bed, guint seconds, gchar **job_id, GError **error)
{
  const char *info_argv[] = { "sinfo", "-h", "-o", "%C", NULL }; /* alloc/idle/other/total */
  g_autofree gchar *cpus_text = NULL;
  if (!ms_site_command (bed, MS_SLURM, NULL, info_argv, &cpus_text, error))
    return FALSE;
  g_auto (GStrv) cpus = g_strsplit (g_strstrip (cpus_text), "/", -1);
  if (g_strv_length (cpus) != 4)
    {
      g_set_error (error, MS_ERROR, 1, "sinfo -o %%C said \"%s\"", cpus_text);
      return FALSE;
    }
  g_autofree gchar *n = g_strdup_printf ("--ntasks=%s", cpus[3]);
  g_autofree gchar *wrap = g_strdup_printf ("--wrap=exec sleep %u", seconds);
  const char *argv[]
      = { "sbatch", "--parsable", "--job-name=competitor", n, "--chdir=/tmp", "--output=/dev/null",
          wrap,     NULL };
  g_autofree gchar *out = NULL;
  if (!ms_site_command (bed, MS_SLURM, "competitor", argv, &out, error))
    return FALSE;
  g_autofree gchar *id = g_strdup (g_strstrip (out));
  gint64 deadline = g_get_monotonic_time () + 30 * G_USEC_PER_SEC;
  for (;;)
    {
      g_autofree gchar *state = ms_slurm_job_state (bed, id, error);
      if (state == NULL)
        return FALSE;
      if (g_str_equal (state, "RUNNING"))
        break;
      if (g_get_monotonic_time () > deadline)
        {
          g_set_error (error, MS_ERROR, 1, "the competitor's job %s is %s after 30 s", id, state);
          return FALSE;
        }
      g_usleep (50000);
    }
  *job_id = g_steal_pointer (&id);
  return TRUE;
}

gboolean
ms_competitor_cancel (MsBed *bed, const char *job_id, GError **error)
{
  const char *argv[] = { "scancel", job_id, NULL };
  return ms_site_command (bed, MS_SLURM, "competitor", argv, NULL, error);
}

/* ---- reading a campaign --------------------------------------------- */

static GPtrArray *
read_jsonl (const char *dir, const char *name, GError **error)
{
  g_autofree gchar *path = g_build_filename (dir, name, NULL);
  g_autofree gchar *text = NULL;
  if (!g_file_get_contents (path, &text, NULL, error))
    return NULL;
  g_autoptr (GPtrArray) rows = g_ptr_array_new_with_free_func ((GDestroyNotify) json_object_unref);
  g_auto (GStrv) lines = g_strsplit (text, "\n", -1);
  for (guint i = 0; lines[i] != NULL; i++)
    {
      if (lines[i][0] == '\0')
        continue;
      g_autoptr (JsonParser) p = json_parser_new ();
      if (!json_parser_load_from_data (p, lines[i], -1, error))
        {
          g_prefix_error (error, "%s:%u: ", path, i + 1);
          return NULL;
        }
      JsonNode *root = json_parser_get_root (p);
      if (!JSON_NODE_HOLDS_OBJECT (root))
        {
          g_set_error (error, MS_ERROR, 1, "%s:%u: not an object", path, i + 1);
          return NULL;
        }
      g_ptr_array_add (rows, json_object_ref (json_node_get_object (root)));
    }
  return g_steal_pointer (&rows);
}

GPtrArray *
ms_read_trace (const char *campaign_dir, GError **error)
{
  return read_jsonl (campaign_dir, "trace.jsonl", error);
}

GPtrArray *
ms_read_results (const char *campaign_dir, GError **error)
{
  return read_jsonl (campaign_dir, "results.jsonl", error);
}

const char *
ms_str (JsonObject *o, const char *name)
{
  JsonNode *n = json_object_get_member (o, name);
  return n != NULL && JSON_NODE_HOLDS_VALUE (n) && json_node_get_value_type (n) == G_TYPE_STRING
             ? json_node_get_string (n)
             : "";
}

gint64
ms_int (JsonObject *o, const char *name)
{
  JsonNode *n = json_object_get_member (o, name);
  return n != NULL && JSON_NODE_HOLDS_VALUE (n) ? json_node_get_int (n) : 0;
}

guint
ms_count_events (GPtrArray *trace, const char *event, const char *site)
{
  guint n = 0;
  for (guint i = 0; i < trace->len; i++)
    n += g_str_equal (ms_str (trace->pdata[i], "event"), event)
         && (site == NULL || g_str_equal (ms_str (trace->pdata[i], "site"), site));
  return n;
}
