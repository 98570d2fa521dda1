/* cluster.h: a test bed shaped like a real cluster, for relay mode
 * (tests/testbed/cluster-up.sh):
 *
 *   tb-cm-S master   10.210.0.1 --link A-- 10.210.0.2  tb-cl-S login (sshd)
 *   tb-cl-S login    10.211.0.1 --link B-- 10.211.0.2  tb-cc-S compute
 *
 * The master reaches only the login node's sshd (a firewall on link A);
 * the compute namespace, where the scheduler's daemons run and so every
 * job, reaches only the login node (no route beyond link B, no
 * forwarding).  A relay on the login node listens on login_cluster_addr.
 * The login sshd's sessions run with the cluster's client environment, as
 * the login user (datc-tb), under host name tb-cl-S.
 *
 * Nothing here asserts (GError everywhere).  Grid Engine has one cell per
 * host: take cl_sge_lock () before bringing an "sge" bed up. */
#pragma once

#include "multisite.h"

G_BEGIN_DECLS

typedef struct {
  gchar *dir;       /* cluster-up.sh's state */
  gchar *scheduler; /* "slurm" or "sge" */
  gchar *ns_master, *master_addr;
  /* The login node: login.ns is its namespace, login.addr its address on
   * link A (the sshd's), plus the sshd's port, user, identity,
   * known_hosts and state dir (login.sshd_dir). */
  MsLogin login;
  gchar *login_cluster_addr; /* on link B: what compute nodes reach */
  gchar *login_hostname;     /* what its sessions' `hostname` says */
  gchar *login_remote_dir;   /* a directory the login user owns */
  gchar *ns_compute, *compute_addr;
  gchar *compute_hostname; /* what jobs' `hostname` says */
  GStrv cluster_env;       /* KEY=VALUE a client of the scheduler needs */
  gboolean up;             /* this process brought it up: down takes it down */
} ClBed;

/* Brings the bed up under `dir` (absolute, created) with scheduler
 * "slurm" or "sge"; on failure nothing stays up.  Slurm ~1 s, Grid
 * Engine ~5 s. */
ClBed *cl_bed_up (const char *dir, const char *scheduler, GError **error);
/* The bed another process brought up under `dir`. */
ClBed *cl_bed_load (const char *dir, GError **error);
/* Stops everything by PID (cluster-down.sh): sshd and sessions, the
 * scheduler, whatever else runs in the three namespaces; then deletes
 * them.  Grid Engine ~10 s. */
gboolean cl_bed_down (ClBed *bed, GError **error);
void cl_bed_free (ClBed *bed);
G_DEFINE_AUTOPTR_CLEANUP_FUNC (ClBed, cl_bed_free)

/* Run `datc run` in the master's namespace with ms_in_netns
 * (bed->ns_master, argv). */

/* A "[site NAME]" group of SITES.ini reaching the login node over SSH,
 * with `scheduler`, workdir `workdir`/NAME and `extra` ("key = value\n"
 * lines, may be NULL). */
gchar *cl_site_group (ClBed *bed, const char *name, const char *scheduler, const char *workdir,
                      const char *extra);
/* PARENT/sites, owned by the login user, for the sites' workdirs (the
 * namespaces share this filesystem). */
gchar *cl_site_workdir_root (ClBed *bed, const char *parent, GError **error);

/* Runs argv on the login node as a session there would (its namespace,
 * host name, /etc/hosts and the cluster's client environment) as `user`
 * (NULL: root): `squeue`, `qstat`...  stdout in *out if not NULL; a
 * non-zero exit is an error carrying its stderr. */
gboolean cl_login_command (ClBed *bed, const char *user, const char *const *argv, gchar **out,
                           GError **error);

/* Cuts every SSH session to the login node: SIGKILLs, by PID, the sshd
 * processes that serve them (each child of the listener and the sshd
 * processes below it), not the listener, not the commands the sessions
 * run (they see their pipes close, as after a dropped connection).  Waits
 * until they are gone.  An error when there was no session. */
gboolean cl_cut_session (ClBed *bed, GError **error);

/* Link A (master - login node) down or up: a network blip.  Both ends
 * lose their carrier but keep addresses and routes, so what crosses it
 * goes nowhere: connections stall (no reset is sent) and new ones time
 * out, until it is up again. */
gboolean cl_link_set (ClBed *bed, gboolean up, GError **error);

/* Takes /tmp/datc-sge.lock (flock), waiting up to `timeout_s`: the one
 * Grid Engine cell of this host.  *fd is the descriptor to close when
 * done, or -1 when a process this one descends from holds the lock
 * already (the test run under `flock /tmp/datc-sge.lock ...`). */
gboolean cl_sge_lock (guint timeout_s, int *fd, GError **error);

G_END_DECLS
