/* sitesfile.h: SITES.ini, the description of the clusters a campaign uses.
 *
 *   [master]
 *   listen = tcp://0.0.0.0:0     # where agents connect (port 0: any free port)
 *   advertise = 10.1.2.3         # the address agents use to reach it: required with a
 *                                # wildcard listen (0.0.0.0, ::, *) when a site uses ssh
 *                                # (else agents get this host's name); an ssh site also
 *                                # needs a listen (else agents get an ipc:// socket here)
 *   give_up_after = 5m           # `datc run` stops (exit 3, naming each site and its
 *                                # last error) once every site has been degraded this
 *                                # long with work waiting and no agent connected;
 *                                # 0: never; default 5m; `--give-up-after` overrides
 *   max_replicas = 2             # end-game replication: once nothing is queued, a task
 *                                # expected to end later than a fresh copy would (judged
 *                                # from the observed run times) gets a copy on an idle
 *                                # slot of another agent, up to this many live copies;
 *                                # the first result wins, the others are cancelled.
 *                                # 1: never; default 2 (1 to 16); `--max-replicas`
 *                                # overrides; a task with "replicate": false is never copied
 *   compact_min_bytes = 67108864 # the journal is compacted (master/README.md, Compaction)
 *   compact_factor = 4           # once it holds at least compact_min_bytes and compact_factor
 *                                # times its last checkpoint; "never": not compacted;
 *                                # defaults 64 MiB and 4 (2 to 1000); `--compact-min-bytes`
 *                                # overrides
 *
 *   [site NAME]
 *   transport = ssh              # local (default) | ssh
 *   host = login.example         # ssh: required; goes through ~/.ssh/config
 *   port, user, identity, known_hosts   # ssh: override ~/.ssh/config
 *   scheduler = slurm            # required: fork | slurm | sge | pbs | condor | lsf
 *   queue = normal
 *   slots_per_proxy = 16         # default 1
 *   max_proxies = 8              # default 1; --mode direct: up to max_proxies x
 *                                # slots_per_proxy one-slot jobs (the same slots)
 *   walltime = 2h                # 90 | 90s | 30m | 2h | 1h30m | 1:30:00; default none
 *   poll_interval = 5s           # how often proxy states are asked for; default 5s
 *   command_timeout = 30s        # a site command (ssh, submit, poll, cancel) that takes
 *                                # longer fails, and the site shows degraded; default 30s
 *   max_calls_per_minute = 12    # scheduler commands (submit, poll, cancel, lookup) in any
 *                                # minute, honoured exactly; 0: no limit; default 12 (fork: 0)
 *   connect_wait = 60s           # a proxy the scheduler says runs and whose agent has not
 *                                # connected after this has its log read on the site: an
 *                                # agent that cannot reach the master is reported (datc run,
 *                                # datc status); default 60s
 *   migrate_after = 10m          # a proxy still queued after this is cancelled and
 *                                # submitted again on a site with room predicted to start
 *                                # it sooner (pull mode); 0: never; default: the site's
 *                                # QBETS bound on its queue waits (`datc status`) once
 *                                # known, 10m until then
 *   submit_args = --account=abc
 *   agent = upload               # or the agent's path on the site (default: datc-agent)
 *   workdir = /scratch/me/datc   # on the site: proxy scripts and logs, the uploaded agent,
 *                                # its key.  Absolute, or ~/... in the login user's home.
 *                                # Default: ssh ~/.datc/TAG/SITE (TAG: 16 hex digits, one
 *                                # per campaign); local DIR/proxies/SITE.  Before anything
 *                                # goes there, each missing directory is made 0700, and
 *                                # the workdir and its parents up to the home (or to the
 *                                # first of root's) must be real directories of the login
 *                                # user that no one else can write (nor read the workdir),
 *                                # else the site fails naming the directory
 *   reach = relay                # direct (default): agents connect to the master's
 *                                # advertised endpoint; relay: compute nodes cannot reach
 *                                # this machine, so the master runs `datc-agent relay` on
 *                                # the login node over its SSH session and agents connect
 *                                # there (no [master] listen/advertise needed for it)
 *   relay_address = 10.1.0.5     # relay: the login node's address its compute nodes
 *                                # reach (listened on and told to agents); default: every
 *                                # address, agents told the login node's host name (also
 *                                # what `sites check --probe` tries on a direct site)
 *
 * Every problem is reported as "FILE:LINE: ..." (unknown group or key, a
 * value out of range, a driver that does not exist, a required key
 * missing), all of them, not just the first. */
#pragma once

#include <glib.h>

G_BEGIN_DECLS

#define DATC_SITES_ERROR (datc_sites_error_quark ())
GQuark datc_sites_error_quark (void);

typedef enum {
  DATC_SITES_ERROR_IO,
  DATC_SITES_ERROR_INVALID,
} DatcSitesError;

typedef struct {
  gchar *name;
  gchar *group; /* "site NAME" in the key file */
  gchar *transport, *scheduler;
  gchar *host; /* ssh only */
  gchar *queue, *submit_args;
  guint slots_per_proxy, max_proxies, walltime_s;
  guint poll_s;            /* 0: the default (5 s) */
  guint command_timeout_s; /* 0: the default (30 s) */
  guint calls_per_minute;  /* max_calls_per_minute; 0: no limit */
  gboolean calls_set;      /* max_calls_per_minute was given */
  guint connect_wait_s;    /* 0: the default (60 s) */
  guint migrate_after_s;   /* migrate_after when migrate_set; 0: never */
  gboolean migrate_set;
  gchar *agent; /* "upload" or a path on the site */
  gchar *workdir;
  gboolean relay;       /* reach = relay */
  gchar *relay_address; /* or NULL: every address of the login node */
} DatcSiteConfig;

typedef struct {
  gchar *path;
  GKeyFile *keyfile;         /* the whole file, for the transports' own keys */
  gchar *listen;             /* or NULL */
  gchar *advertise;          /* or NULL */
  guint give_up_s;           /* give_up_after; 0: never */
  guint max_replicas;        /* live copies of a task at the end game; 1: no replication */
  guint64 compact_min_bytes; /* 0: not given; G_MAXUINT64: never */
  guint compact_factor;      /* 0: not given */
  GPtrArray *sites;          /* DatcSiteConfig* in file order */
} DatcSitesFile;

/* give_up_after when neither the file nor the command line says. */
#define DATC_GIVE_UP_DEFAULT_S 300u
/* max_replicas likewise, and its bound. */
#define DATC_MAX_REPLICAS_DEFAULT 2u
#define DATC_MAX_REPLICAS_MAX 16u

/* compact_min_bytes as the sites file and --compact-min-bytes take it:
 * a whole number of bytes from 1, or "never" (G_MAXUINT64). */
gboolean datc_parse_compact_min_bytes (const char *text, guint64 *bytes);

DatcSitesFile *datc_sites_file_load (const char *path, GError **error);
void datc_sites_file_free (DatcSitesFile *f);
G_DEFINE_AUTOPTR_CLEANUP_FUNC (DatcSitesFile, datc_sites_file_free)

/* "90", "90s", "30m", "2h", "1h30m", "1:30:00", "30:00" -> seconds. */
gboolean datc_parse_duration (const char *text, guint *seconds);

G_END_DECLS
