/* multisite.h: the multi-site test bed, for tests/test-multisite.c and
 * benchmarks/bench-sites.c.  On this one machine, from tests/testbed/:
 *
 *   tb-master-S  10.200.0.1   where `datc run` runs (and the fork site)
 *   tb-slurm-S   10.200.0.11  a Slurm cluster and its login node (sshd)
 *   tb-sge-S     10.200.0.12  Grid Engine and its login node (sshd)
 *   tb-down-S    10.200.0.13  a login node that the errors test stops
 *   tb-pbs-S     10.200.0.14  OpenPBS and its login node
 *   tb-lsf-S     10.200.0.15  LSF (volclava) and its login node
 *
 * Each login node's sshd puts its cluster's client environment
 * (SLURM_CONF, Grid Engine ports, PBS_CONF_FILE, LSF_ENVDIR, and for PBS
 * and LSF a PATH with their commands first: PBS's qsub/qstat/qdel must
 * win over Grid Engine's in /usr/bin) into every session, so a site
 * reached over SSH finds its own scheduler the way a user's login would.
 * PBS's login node also sees the namespace's own /etc/hosts (PBS refuses
 * the 127.x this host's name has elsewhere).  Jobs run as the login user
 * (datc-tb); user `competitor` fills queues.
 *
 * Nothing here asserts: every step returns FALSE/NULL with a GError that
 * names the script or command, so a benchmark can use it too.  Grid
 * Engine has one cell per host: callers hold /tmp/datc-sge.lock (run the
 * program under `flock`). */
#pragma once

#include <gio/gio.h>
#include <json-glib/json-glib.h>

G_BEGIN_DECLS

typedef enum {
  MS_SLURM = 0,
  MS_SGE,
  MS_DOWN,
  MS_PBS,
  MS_LSF,
  MS_N_HOSTS,
} MsHost;

typedef struct {
  gchar *ns;       /* network namespace name */
  gchar *addr;     /* its address on the test bed's bridge */
  gchar *sshd_dir; /* sshd-up.sh state */
  guint port;      /* sshd port */
  gchar *user, *identity, *known_hosts;
} MsLogin;

typedef struct {
  gchar *dir;    /* state of every script, one directory each below */
  gchar *suffix; /* of the namespaces' names */
  gchar *ns_master, *master_addr;
  MsLogin login[MS_N_HOSTS];
  GStrv cluster_env[MS_N_HOSTS]; /* KEY=VALUE a client of that cluster needs */
  gchar *hosts[MS_N_HOSTS];      /* its /etc/hosts, when not this host's (PBS) */
  gboolean up[16];               /* steps this process brought up: down undoes exactly those */
} MsBed;

/* Brings the whole bed up under `dir` (absolute, created) with the scripts
 * in $DATC_TESTBED (tests/testbed/); on failure brings down what did come
 * up and returns NULL.  Takes ~18 s (PBS ~12 s, Grid Engine 4-7 s). */
MsBed *ms_bed_up (const char *dir, GError **error);
/* The bed another process brought up under `dir` (a test's subprocess
 * reads what the parent started); bringing it down stays with that
 * process. */
MsBed *ms_bed_load (const char *dir, GError **error);
/* Stops everything by PID through the down scripts, in reverse order
 * (~15 s: sge_qmaster takes ~9 s to exit, PBS ~3 s).  FALSE if a script failed;
 * every step is still tried. */
gboolean ms_bed_down (MsBed *bed, GError **error);
void ms_bed_free (MsBed *bed);
G_DEFINE_AUTOPTR_CLEANUP_FUNC (MsBed, ms_bed_free)

/* argv run inside network namespace `ns` (nsenter --net, which execs, so
 * the pid is the program's).  NULL-terminated, transfer full. */
GStrv ms_in_netns (const char *ns, const char *const *argv);

/* A "[site NAME]" group of SITES.ini reaching `host`'s login node over SSH
 * (host, port, user, identity, known_hosts), with `scheduler`, `workdir`
 * and `extra` ("key = value\n" lines, may be NULL) added. */
gchar *ms_site_group (MsBed *bed, MsHost host, const char *name, const char *scheduler,
                      const char *workdir, const char *extra);

/* A directory under `parent` that the login user owns, for the sites'
 * workdirs (the sites share this filesystem).  `parent` is made
 * traversable (0755) so the login user can reach it.  Transfer full. */
gchar *ms_site_workdir_root (MsBed *bed, const char *parent, GError **error);

/* Runs argv on `host`'s cluster (in its namespace, with its client
 * environment and, for PBS, its /etc/hosts) as `user` (NULL: root);
 * stdout in *out if not NULL.  A non-zero exit is an error carrying its
 * stderr. */
gboolean ms_site_command (MsBed *bed, MsHost host, const char *user, const char *const *argv,
                          gchar **out, GError **error);

/* Stops `host`'s login node (its sshd): the site is then unreachable. */
gboolean ms_login_stop (MsBed *bed, MsHost host, GError **error);
/* The pid of `host`'s login sshd (to stop it with SIGSTOP: a login node
 * that hangs, accepting connections and never answering); 0 on error. */
int ms_login_pid (MsBed *bed, MsHost host, GError **error);

/* User `competitor` fills every CPU of the Slurm cluster with one job
 * (`sbatch -n CPUS`) that sleeps `seconds`; *job_id is its id.  Returns
 * once Slurm says it runs. */
gboolean ms_competitor_fill_slurm (MsBed *bed, guint seconds, gchar **job_id, GError **error);
gboolean ms_competitor_cancel (MsBed *bed, const char *job_id, GError **error);
/* Slurm's word for the job's state ("RUNNING", "CANCELLED", ...). */
gchar *ms_slurm_job_state (MsBed *bed, const char *job_id, GError **error);

/* ---- shared with the other beds built from tests/testbed/ (cluster.c) -- */

/* Runs argv (searched in PATH); a non-zero exit is an error carrying the
 * end of its stderr.  Its stdout in *out when not NULL. */
gboolean ms_run (const char *const *argv, gchar **out, GError **error);
/* bash $DATC_TESTBED/NAME ARGS...; its stderr is printed when it fails. */
gboolean ms_script (const char *name, const char *const *args, GError **error);
/* The KEY=VALUE lines of `path`; NULL with an error naming it. */
GHashTable *ms_env_read (const char *path, GError **error);
/* env[key] (read from `path`) in *value; an error naming both when absent
 * or empty. */
gboolean ms_env_get (GHashTable *env, const char *path, const char *key, gchar **value,
                     GError **error);
/* Port, user, identity and known_hosts of the sshd in l->sshd_dir, from
 * its sshd.env. */
gboolean ms_login_load (MsLogin *l, GError **error);
/* ms_site_group for any login node. */
gchar *ms_login_site_group (const MsLogin *l, const char *name, const char *scheduler,
                            const char *workdir, const char *extra);
/* ms_site_workdir_root for login user `user`. */
gchar *ms_user_workdir_root (const char *user, const char *parent, GError **error);

/* ---- reading a campaign ------------------------------------------------ */

/* DIR/trace.jsonl as JsonObject* (ref'd), in file order. */
GPtrArray *ms_read_trace (const char *campaign_dir, GError **error);
/* DIR/results.jsonl as JsonObject* (ref'd), in file order. */
GPtrArray *ms_read_results (const char *campaign_dir, GError **error);
/* o[name] as a string, "" when absent or not a string. */
const char *ms_str (JsonObject *o, const char *name);
/* o[name] as an integer, 0 when absent. */
gint64 ms_int (JsonObject *o, const char *name);
/* Events named `event` (about `site` unless NULL). */
guint ms_count_events (GPtrArray *trace, const char *event, const char *site);

G_END_DECLS
