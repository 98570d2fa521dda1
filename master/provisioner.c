/* provisioner.c: the site manager.  Proxies per site, submitted, polled
 * and cancelled through the site drivers; what to submit where is decided
 * by one plan function per mode (plan_pull, plan_static, plan_direct).
 *
 * Nothing here waits on a site: every command goes to the site's worker
 * thread (siteworker.c) as a job, and its outcome comes back as an event
 * on the master's loop (the *_done functions), where the state below is
 * changed and journaled, in order.  While a job is out the site's state
 * says so (a proxy being submitted already counts as capacity; one poll,
 * one cancel at a time), and a site whose command outlives its timeout is
 * degraded at once while the others go on. */
#include "provisioner.h"
#include "qbets.h"
#include "waitdist.h"

#include <string.h>
#include <zmq.h>

#include "siteworker.h"
#include "upload.h"
#include "workdir.h"

/* A site is shown degraded after this many failures in a row (submits,
 * polls, or proxies that died before their agent connected). */
#define DEGRADED_AFTER 3
#define MAX_BACKOFF_MS 60000u

/* Reading proxies' logs (a transport command, not a scheduler call, so
 * outside the budget): once per proxy, one at a time per site, at most
 * one every LOG_READ_SPACING_US, and only their last LOG_TAIL_BYTES. */
#define LOG_READ_SPACING_US (10 * G_USEC_PER_SEC)
/* Tasks a walltime would cut short are counted at most this often. */
#define OUTLIVING_US G_USEC_PER_SEC
/* A site's proxies are looked over for a log to read at most this often. */
#define LOG_SCAN_US (G_USEC_PER_SEC / 4)
#define LOG_TAIL_BYTES 4096
/* The line an agent that cannot reach the master prints (worker-agent/
 * reach.h; the two folders do not include each other, and
 * tests/test-sites.c runs the two together):
 * "datc-agent on HOST: cannot reach ENDPOINT: WHY (retrying)". */
#define DATC_REACH_FAILED ": cannot reach "
#define DATC_REACH_RETRYING " (retrying)"
/* What of an agent's line goes into a report, at most. */
#define REACH_TEXT_MAX 300

typedef struct Proxy {
  gchar *id;     /* our proxy id, unique in the campaign */
  gchar *job_id; /* the scheduler's; NULL while its submit is out */
  DatcProxyState state;
  gboolean queued; /* the last poll said pending (not merely submitted: fork's never are) */
  gchar *reason;   /* then why, in the scheduler's words; or NULL */
  guint slots;
  gint64 submitted_us;    /* real time; 0 when an earlier master submitted it */
  gint64 started_us;      /* its agent's first HELLO (real time); 0: not yet */
  gint64 walltime_end_us; /* when the batch system will end it; 0: unknown or never */
  gboolean connected;     /* ever_connected()'s memo, once TRUE: read only through it */
  gboolean online;        /* its agent is connected now */
  gboolean expiring;      /* near its walltime: its replacement may be submitted */
  /* Replacement links, both cleared when either ends: while the proxy a
   * replacement replaces is alive, the replacement is not replaced in
   * turn (at most two generations overlap). */
  struct Proxy *replaces, *replaced_by;
  gboolean cancelling;     /* cancelled by us, waiting to see it end */
  gboolean start_traced;   /* proxy_started is in the trace */
  guint32 free, running;   /* its agent's load, when online */
  gboolean starved;        /* its agent has free slots but no queued task fits its time left */
  gchar *log;              /* its log on the site, or NULL: not known */
  gint64 running_since_us; /* when a poll first said it runs (monotonic); 0: not yet */
  gboolean log_read;       /* its log was read for why its agent does not connect */
  gboolean migrating;      /* queued too long: cancelled here, submitted again elsewhere */
  gboolean ran;            /* the scheduler said it runs (its files may say why it failed) */
  gchar *submission;       /* the submit it came from (ID, or ID of ID-1..ID-k): its job name
                            * datc-ID and script ID.sh; NULL: not known */
} Proxy;

/* A submit whose proxies have not all ended: its script (an array's
 * elements share one) goes once they all ended well. */
typedef struct {
  guint left;    /* its proxies not seen ended */
  gboolean keep; /* one of them failed: its script stays for the user */
} Submission;

typedef enum {
  HEALTH_OK = 0,
  HEALTH_SUBMIT,      /* submits (or preparing the site) keep failing */
  HEALTH_EARLY_DEATH, /* proxies keep ending before their agent connects */
  HEALTH_POLL,        /* the scheduler cannot be asked */
  HEALTH_HUNG,        /* a command outlived its timeout: the login node does not answer */
  HEALTH_UNREACHABLE, /* proxies run, and their agents say they cannot reach the master */
} Health;

typedef struct {
  DatcSiteSpec *spec;
  const DatcSiteCalls *site_calls; /* the provisioner's, read by its worker too */
  guint index;                     /* its place in the sites file: the partition in static mode */
  GPtrArray *proxies;              /* Proxy*, not seen ended (and those being submitted) */
  DatcSiteWorker *worker;          /* runs every command of the site */
  guint timeout_ms;                /* its command timeout (command_timeout) */
  guint command_ms;                /* the timeout each command gets now (shorter at shutdown) */
  gboolean prepared;               /* agent and key are on the site */
  gboolean preparing, polling, cancelling, looking_up; /* such a job is with the worker */
  GPtrArray *lookups;    /* gchar* "ID\tK": submissions an earlier master did not see
                          * come back, to find by name */
  gint64 next_lookup_us; /* backoff after a failed lookup */
  guint submitting;      /* submits with the worker */
  gint64 poll_us;
  gint64 next_poll_us, next_submit_us;
  gint64 last_poll_us;    /* when it was last asked about its proxies */
  guint calls_per_minute; /* scheduler commands allowed in any minute; 0: no limit */
  GArray *calls;          /* gint64: when each call of the last minute was taken, oldest first */
  gboolean calls_short;   /* the plan wanted a submit (or a migration's cancel) the
                           * budget did not allow */
  guint failures;         /* submits that failed in a row */
  guint poll_failures;    /* polls that failed in a row */
  guint cancel_failures;  /* cancels that failed in a row */
  gint64 next_cancel_us;  /* backoff after a failed cancel */
  guint early_deaths;     /* proxies that ended before their agent connected, in a row */
  guint early_deaths_total, submitted_total, cancelled_total;
  guint64 n_submit, n_poll, n_cancel, n_put, n_lookup; /* commands issued to the site */
  Health health;
  gchar *last_error;
  gchar *endpoint;        /* where its agents connect when not the master's (its relay's) */
  gint64 connect_wait_us; /* running this long without its agent: its log is read */
  gboolean reading_log;   /* a log read is with the worker */
  gint64 next_log_us;     /* no look for a log to read before (LOG_SCAN_US apart) */
  /* What needs_poll learns from the proxies, asked every loop turn: kept
   * until a proxy is added, removed, submitted, cancelled or its agent
   * comes or goes (proxies_changed), so a turn does not walk them all. */
  gboolean poll_stale, poll_unsettled, poll_any;
  guint64 n_log;      /* logs read */
  gchar *unreachable; /* what an agent's log said of the master, until one connects */
  gint64 waits[4];    /* the last queue waits (submit to agent HELLO), us */
  guint n_waits;
  gchar *wait_key;          /* its key in the queue-wait cache */
  GArray *all_waits;        /* double, s: earlier campaigns' (the cache) and this one's */
  DatcWaitBound wait_bound; /* QBETS on all_waits (index 0: too few to bound) */
  guint serial;
  /* Filled by observe() for the plan. */
  guint64 free_running; /* free slots of agents not near their walltime, where a queued task fits */
  guint64 running_expiring; /* tasks running on agents near their walltime */
  guint64 outliving;        /* tasks on its agents expected to run past their agent's walltime
                             * end (datc_ledger_walltime_outliving) */
  gint64 outliving_us;      /* when outliving was counted (0: never) */
  guint64 coming;           /* slots of proxies whose agent has not connected yet */
  guint alive;              /* proxies counted against max_jobs */
  guint max_jobs;           /* proxies queued or running at once: max_proxies; in direct
                             * mode max_proxies x slots_per_proxy one-slot proxies, the
                             * slots pull would have */
  /* The workdir's files of proxies that ended well, to remove. */
  GHashTable *submissions; /* submission id -> Submission*, while any of its proxies is alive */
  GPtrArray *spent;        /* gchar*: file names in the workdir */
} SiteState;

struct DatcProvisioner {
  DatcLedger *ledger;
  DatcDispatcher *disp;
  GPtrArray *sites; /* SiteState* */
  gchar *endpoint, *server_public, *agent_args;
  guint poll_ms;
  DatcMode mode;
  guint32 tag; /* distinguishes proxy ids across master restarts */
  DatcTrace *trace;
  DatcWaitCache *waits; /* or NULL (transfer none) */
  gint64 next_plan_us;
  gboolean plan_due;      /* a tick came before next_plan_us: the loop wakes for it */
  GArray *loads;          /* scratch: DatcAgentLoad */
  GHashTable *load_index; /* scratch: proxy name -> index + 1 in loads (index_loads) */
  guint keys_out;         /* key removals with the workers */
  GArray *serve_items;    /* zmq_pollitem_t polled beside the workers while waiting */
  void (*serve) (gpointer data);
  gpointer serve_data;
  guint removals_out; /* removals of spent proxy files with the workers */
  gboolean keep_site_files;
  guint give_up_s;        /* 0: never */
  gint64 stuck_since_us;  /* since when no site can run the campaign; 0: one can */
  const DatcClock *clock; /* NULL: the system's */
  const DatcSiteCalls *site_calls;
  GQueue *done_here; /* a fake's site calls (a unit test): DoneHere* of jobs run at
                      * once, taken at the next collect; NULL: the workers run them */
};

/* driver.h's: what every site runs but a unit test's. */
static const DatcSiteCalls driver_calls = {
  .submit = datc_site_submit,
  .submit_array = datc_site_submit_array,
  .lookup = datc_site_lookup,
  .lookup_array = datc_site_lookup_array,
  .poll_reasons = datc_site_poll_reasons,
  .cancel = datc_site_cancel,
  .run = datc_site_run,
};

/* The time by the options' clock: every decision is taken by it. */
static gint64
clock_mono (const DatcProvisioner *p)
{
  return datc_clock_monotonic (p->clock);
}

static gint64
clock_real (const DatcProvisioner *p)
{
  return datc_clock_real (p->clock);
}

/* A job run here rather than on a worker: its outcome waits for the next
 * collect, as a worker's would. */
typedef struct {
  DatcSiteJobDone done;
  gpointer data;
} DoneHere;

/* Hands a job to the site's worker.  A unit test's fake site calls answer
 * at once: its jobs run here and now (no thread to wait for), and come
 * back at the next collect like a worker's. */
static void
post (DatcProvisioner *p, SiteState *s, DatcSiteJobRun run, DatcSiteJobDone done, gpointer data)
{
  if (p->done_here == NULL)
    {
      datc_site_worker_post (s->worker, run, done, data);
      return;
    }
  run (s->spec->site, data);
  DoneHere *d = g_new (DoneHere, 1);
  *d = (DoneHere) { done, data };
  g_queue_push_tail (p->done_here, d);
}

/* ---- modes ---------------------------------------------------------- */

static const char *const mode_names[] = { "pull", "static", "direct" };

gboolean
datc_mode_parse (const char *text, DatcMode *mode)
{
  for (guint i = 0; i < G_N_ELEMENTS (mode_names); i++)
    if (g_strcmp0 (text, mode_names[i]) == 0)
      {
        *mode = (DatcMode) i;
        return TRUE;
      }
  return FALSE;
}

const char *
datc_mode_name (DatcMode mode)
{
  return (guint) mode < G_N_ELEMENTS (mode_names) ? mode_names[mode] : "?";
}

/* ---- lifetime ------------------------------------------------------- */

void
datc_site_spec_free (DatcSiteSpec *s)
{
  if (s == NULL)
    return;
  /* The relay first: it says BYE while its agents' connections close. */
  g_clear_pointer (&s->relay, datc_relay_free);
  datc_site_free (s->site);
  g_free (s->name);
  g_free (s->queue);
  g_free (s->submit_args);
  g_free (s->workdir);
  g_free (s->agent_path);
  g_free (s->upload_from);
  g_free (s->key_file);
  g_clear_pointer (&s->key_data, g_bytes_unref);
  g_free (s);
}

static void
proxy_free (gpointer p)
{
  Proxy *x = p;
  if (x == NULL)
    return;
  g_free (x->id);
  g_free (x->job_id);
  g_free (x->log);
  g_free (x->submission);
  g_free (x->reason);
  g_free (x);
}

static void
site_state_free (gpointer p)
{
  SiteState *s = p;
  g_ptr_array_unref (s->proxies);
  g_ptr_array_unref (s->lookups);
  g_array_unref (s->calls);
  g_array_unref (s->all_waits);
  g_free (s->wait_key);
  g_hash_table_unref (s->submissions);
  g_ptr_array_unref (s->spent);
  if (s->worker != NULL && s->spec != NULL)
    s->spec->site = NULL; /* its worker still runs a command on it: left to the exit */
  datc_site_spec_free (s->spec);
  g_free (s->last_error);
  g_free (s->endpoint);
  g_free (s->unreachable);
  g_free (s);
}

/* One more proxy of `submission` is alive on the site. */
static void
submission_add (SiteState *s, const char *submission, guint n)
{
  Submission *sub = g_hash_table_lookup (s->submissions, submission);
  if (sub == NULL)
    {
      sub = g_new0 (Submission, 1);
      g_hash_table_insert (s->submissions, g_strdup (submission), sub);
    }
  sub->left += n;
}

/* The submission a journaled proxy id comes from: an array's element
 * SITE-TAG-aN-I (see submit_job) comes from SITE-TAG-aN, any other proxy
 * from itself. */
static gchar *
submission_of (const char *proxy_id)
{
  g_autoptr (GRegex) element = g_regex_new ("-[0-9a-f]{4}-a[0-9]+(-[0-9]+)$", 0, 0, NULL);
  g_autoptr (GMatchInfo) m = NULL;
  gint start = -1;
  if (g_regex_match (element, proxy_id, 0, &m) && g_match_info_fetch_pos (m, 1, &start, NULL))
    return g_strndup (proxy_id, (gsize) start);
  return g_strdup (proxy_id);
}

static SiteState *
site_named (DatcProvisioner *p, const char *name)
{
  for (guint i = 0; i < p->sites->len; i++)
    {
      SiteState *s = p->sites->pdata[i];
      if (g_str_equal (s->spec->name, name))
        return s;
    }
  return NULL;
}

/* Whether the proxy's agent ever said HELLO, to this master or an earlier
 * one: the ledger's answer (journaled with the agent, so replayed too),
 * the one place that knows.  Remembered once TRUE, which it stays. */
static gboolean
ever_connected (DatcProvisioner *p, SiteState *s, Proxy *x)
{
  if (!x->connected)
    x->connected = datc_ledger_proxy_connected (p->ledger, s->spec->name, x->id);
  return x->connected;
}

/* A proxy an earlier master submitted (journaled, or found by name): its
 * state unknown until the next poll. */
static void
proxies_changed (SiteState *s)
{
  s->poll_stale = TRUE;
}

static Proxy *
adopt_proxy (DatcProvisioner *p, SiteState *s, const char *id, const char *job_id,
             const char *submission)
{
  Proxy *x = g_new0 (Proxy, 1);
  x->id = g_strdup (id);
  x->job_id = g_strdup (job_id);
  x->state = DATC_PROXY_UNKNOWN;
  x->slots = s->spec->slots_per_proxy;
  x->submission = g_strdup (submission);
  submission_add (s, submission, 1);
  g_ptr_array_add (s->proxies, x);
  proxies_changed (s);
  return x;
}

/* Proxies an earlier master submitted and never saw end are still ours. */
static void
adopt_open_proxies (DatcProvisioner *p)
{
  g_autoptr (GPtrArray) open = datc_ledger_open_proxies (p->ledger);
  for (guint i = 0; i < open->len; i++)
    {
      g_auto (GStrv) f = g_strsplit (open->pdata[i], "\t", 3);
      SiteState *s = g_strv_length (f) == 3 ? site_named (p, f[0]) : NULL;
      if (s == NULL)
        continue;
      g_autofree gchar *submission = submission_of (f[1]);
      adopt_proxy (p, s, f[1], f[2], submission);
    }
}

/* Submits an earlier master sent and never saw come back: each may have
 * placed jobs on its site, to be found by name (lookup_submits). */
static void
adopt_open_submits (DatcProvisioner *p)
{
  g_autoptr (GPtrArray) open = datc_ledger_open_submits (p->ledger);
  for (guint i = 0; i < open->len; i++)
    {
      g_auto (GStrv) f = g_strsplit (open->pdata[i], "\t", 3);
      SiteState *s = g_strv_length (f) == 3 ? site_named (p, f[0]) : NULL;
      if (s != NULL)
        g_ptr_array_add (s->lookups, g_strdup_printf ("%s\t%s", f[1], f[2]));
    }
}

/* Static mode: each site's share is proportional to its capacity. */
static void
split_bag (DatcProvisioner *p)
{
  guint n = p->sites->len;
  g_autofree guint *weights = g_new (guint, n);
  g_autoptr (GPtrArray) names = g_ptr_array_new ();
  for (guint i = 0; i < n; i++)
    {
      SiteState *s = p->sites->pdata[i];
      guint64 cap = (guint64) s->spec->max_proxies * s->spec->slots_per_proxy;
      weights[i] = (guint) MIN (cap, (guint64) G_MAXUINT);
      g_ptr_array_add (names, s->spec->name);
    }
  g_ptr_array_add (names, NULL);
  datc_ledger_split (p->ledger, n, weights);
  datc_dispatcher_split (p->disp, (const char *const *) names->pdata);
  for (guint i = 0; i < n; i++)
    {
      SiteState *s = p->sites->pdata[i];
      datc_trace_event (p->trace, "split", "site", 's', s->spec->name, "tasks", 'i',
                        (gint64) datc_ledger_queued_in (p->ledger, i), "weight", 'i',
                        (gint64) weights[i], NULL);
    }
}

/* Asking a batch system is a command on its login node, and sites ask
 * users not to poll in a tight loop; asking for a few local processes is
 * cheap, so fork sites are polled every second. */
static guint
default_poll_ms (DatcProvisioner *p, const DatcSiteSpec *spec)
{
  return g_str_equal (datc_site_scheduler_name (spec->site), "fork") ? 1000u : p->poll_ms;
}

/* The QBETS upper bound on the site's queue wait (its 0.95 quantile, at
 * 0.95 confidence) from the waits of this campaign and of earlier ones
 * (the cache), as `datc analyze waits` computes it; again after each new
 * wait. */
#define WAIT_BOUND_Q 0.95
#define WAIT_BOUND_C 0.95

static void
update_wait_bound (SiteState *s)
{
  s->wait_bound = (DatcWaitBound) { 0 };
  if (s->all_waits->len == 0)
    return;
  /* Sorted as `datc analyze waits` sorts them. */
  g_autoptr (DatcWaitDist) d
      = datc_wait_dist_new_empirical ((const double *) s->all_waits->data, s->all_waits->len);
  gsize n;
  const double *sorted = datc_wait_dist_samples (d, &n);
  if (!datc_wait_bound_compute (sorted, n, WAIT_BOUND_Q, WAIT_BOUND_C, &s->wait_bound, NULL))
    s->wait_bound = (DatcWaitBound) { 0 };
}

DatcProvisioner *
datc_provisioner_new (DatcLedger *ledger, DatcDispatcher *disp, GPtrArray *specs,
                      const DatcProvisionerOptions *o)
{
  DatcProvisioner *p = g_new0 (DatcProvisioner, 1);
  p->ledger = ledger;
  p->disp = disp;
  p->sites = g_ptr_array_new_with_free_func (site_state_free);
  p->endpoint = g_strdup (o->endpoint);
  p->server_public = g_strdup (o->server_public);
  p->agent_args = g_strdup (o->agent_args);
  p->poll_ms = o->poll_ms ? o->poll_ms : 5000;
  p->mode = o->mode;
  p->trace = o->trace;
  p->waits = o->waits;
  p->tag = g_random_int_range (0x1000, 0xffff);
  p->loads = g_array_new (FALSE, FALSE, sizeof (DatcAgentLoad));
  p->load_index = g_hash_table_new (g_str_hash, g_str_equal);
  p->keep_site_files = o->keep_site_files;
  p->give_up_s = o->give_up_s;
  p->clock = o->clock;
  p->site_calls = o->site_calls != NULL ? o->site_calls : &driver_calls;
  if (o->site_calls != NULL)
    p->done_here = g_queue_new ();

  for (guint i = 0; i < specs->len; i++)
    {
      SiteState *s = g_new0 (SiteState, 1);
      s->spec = specs->pdata[i];
      s->site_calls = p->site_calls;
      s->index = i;
      /* Direct mode gets the slots of the same sites file as pull, one job
       * per slot, so that one file compares the modes on equal terms. */
      s->max_jobs = s->spec->max_proxies;
      if (p->mode == DATC_MODE_DIRECT)
        s->max_jobs = (guint) MIN ((guint64) s->spec->max_proxies * s->spec->slots_per_proxy,
                                   (guint64) G_MAXUINT);
      s->proxies = g_ptr_array_new_with_free_func (proxy_free);
      s->lookups = g_ptr_array_new_with_free_func (g_free);
      s->poll_us
          = (gint64) (s->spec->poll_s ? s->spec->poll_s * 1000u : default_poll_ms (p, s->spec))
            * 1000;
      s->timeout_ms = s->spec->command_timeout_s ? s->spec->command_timeout_s * 1000u
                                                 : DATC_SITE_COMMAND_TIMEOUT_MS;
      s->command_ms = s->timeout_ms;
      s->connect_wait_us
          = (gint64) (s->spec->connect_wait_s ? s->spec->connect_wait_s : DATC_CONNECT_WAIT_S)
            * G_USEC_PER_SEC;
      s->calls_per_minute = s->spec->calls_per_minute;
      if (s->calls_per_minute == DATC_SITE_CALLS_DEFAULT)
        s->calls_per_minute = g_str_equal (datc_site_scheduler_name (s->spec->site), "fork")
                                  ? 0
                                  : DATC_SITE_CALLS_PER_MINUTE;
      s->calls = g_array_new (FALSE, FALSE, sizeof (gint64));
      s->wait_key = datc_wait_cache_key (s->spec->name, datc_site_scheduler_name (s->spec->site),
                                         s->spec->queue);
      s->all_waits = g_array_new (FALSE, FALSE, sizeof (double));
      if (p->waits != NULL)
        datc_wait_cache_get (p->waits, s->wait_key, s->all_waits);
      update_wait_bound (s);
      /* Every command counted: none run again behind the budget's back. */
      datc_site_set_retry (s->spec->site, s->calls_per_minute == 0);
      s->submissions = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, g_free);
      s->spent = g_ptr_array_new_with_free_func (g_free);
      g_autoptr (GError) error = NULL;
      s->worker = datc_site_worker_new (s->spec->site, &error);
      if (s->worker == NULL)
        g_error ("%s", error->message);
      g_ptr_array_add (p->sites, s);
    }
  g_ptr_array_set_free_func (specs, NULL);
  g_ptr_array_unref (specs);

  adopt_open_proxies (p);
  adopt_open_submits (p);
  if (p->mode == DATC_MODE_STATIC && p->sites->len > 0)
    split_bag (p);
  else if (p->mode == DATC_MODE_DIRECT)
    datc_dispatcher_one_task (p->disp);
  return p;
}

static void wait_for_sites (DatcProvisioner *p, gint64 wait_us, gint64 deadline);
static guint collect (DatcProvisioner *p);

/* Some site's worker is in a command. */
static gboolean
workers_busy (DatcProvisioner *p)
{
  for (guint i = 0; i < p->sites->len; i++)
    if (datc_site_worker_busy_since (((SiteState *) p->sites->pdata[i])->worker) != 0)
      return TRUE;
  return FALSE;
}

void
datc_provisioner_free (DatcProvisioner *p)
{
  if (p == NULL)
    return;
  /* Workers first, while the state their jobs come back to is whole; one
   * stuck in a command that hangs is given 200 ms (`datc status` is still
   * answered meanwhile), then left to the exit, which ends it. */
  gint64 deadline = g_get_monotonic_time () + 200 * 1000;
  while (workers_busy (p) && g_get_monotonic_time () < deadline)
    wait_for_sites (p, 50 * 1000, deadline);
  while (p->done_here != NULL && !g_queue_is_empty (p->done_here))
    collect (p);
  for (guint i = 0; i < p->sites->len; i++)
    {
      SiteState *s = p->sites->pdata[i];
      guint grace = datc_site_worker_busy_since (s->worker) != 0 ? 0 : 200;
      if (datc_site_worker_free (s->worker, p, grace))
        s->worker = NULL;
    }
  g_ptr_array_unref (p->sites);
  if (p->done_here != NULL)
    g_queue_free (p->done_here);
  g_array_unref (p->loads);
  g_hash_table_unref (p->load_index);
  g_clear_pointer (&p->serve_items, g_array_unref);
  g_free (p->endpoint);
  g_free (p->server_public);
  g_free (p->agent_args);
  g_free (p);
}

/* ---- health --------------------------------------------------------- */

/* Backoff shared by everything that fails on a site: a site that cannot
 * take or run our proxies must not be hammered. */
static gint64
backoff_us (guint in_a_row)
{
  return (gint64) MIN (MAX_BACKOFF_MS, 1000u << MIN (in_a_row, 6u)) * 1000;
}

/* "5 min", "90 s": the give-up time as a user wrote it, near enough. */
static gchar *
human_duration (guint s)
{
  return s >= 60 && s % 60 == 0 ? g_strdup_printf ("%u min", s / 60) : g_strdup_printf ("%u s", s);
}

static void
site_failed (DatcProvisioner *p, SiteState *s, Health why, guint in_a_row, const char *error)
{
  g_free (s->last_error);
  s->last_error = g_strdup (error);
  if (in_a_row < DEGRADED_AFTER || s->health != HEALTH_OK)
    return;
  s->health = why;
  /* Only a site that is not degraded itself can take the work: with none,
   * saying the campaign goes on elsewhere would be a lie. */
  gboolean others = FALSE;
  for (guint i = 0; i < p->sites->len; i++)
    others = others || ((SiteState *) p->sites->pdata[i])->health == HEALTH_OK;
  g_autofree gchar *wait = human_duration (p->give_up_s);
  g_autofree gchar *how = why == HEALTH_HUNG
                              ? g_strdup ("degraded: it does not answer")
                              : g_strdup_printf ("degraded after %u failures in a row", in_a_row);
  if (others)
    g_warning ("site %s: %s; the campaign goes on with the other sites: %s", s->spec->name, how,
               error);
  else if (p->give_up_s > 0)
    g_warning ("site %s: %s: %s\n"
               "no site can run the campaign now: datc stops in %s unless one works again "
               "or an agent connects",
               s->spec->name, how, error, wait);
  else
    g_warning ("site %s: %s: %s\n"
               "no site can run the campaign now; it waits for one to work again "
               "(give_up_after = 0)",
               s->spec->name, how, error);
  datc_trace_event (p->trace, "site_degraded", "site", 's', s->spec->name, "error", 's', error,
                    NULL);
}

/* A command the site did not answer in time (the login node hangs: no
 * SSH banner, a scheduler command that never returns) degrades the site
 * at once, as one still out past its timeout does (check_hung): another
 * try would only wait as long again.  TRUE when that was the failure. */
static gboolean
no_answer (DatcProvisioner *p, SiteState *s, const GError *error)
{
  if (!g_error_matches (error, DATC_SITE_ERROR, DATC_SITE_ERROR_TIMEOUT))
    return FALSE;
  if (s->health != HEALTH_HUNG)
    {
      s->health = HEALTH_OK; /* so that site_failed marks it, whatever it was */
      site_failed (p, s, HEALTH_HUNG, DEGRADED_AFTER, error->message);
    }
  return TRUE;
}

/* What made the site degraded works again (or an agent connected, which
 * proves everything works). */
static void
site_recovered (DatcProvisioner *p, SiteState *s, Health what)
{
  if (s->health == HEALTH_OK || (what != HEALTH_OK && s->health != what))
    return;
  s->health = HEALTH_OK;
  g_message ("site %s: working again", s->spec->name);
  datc_trace_event (p->trace, "site_ok", "site", 's', s->spec->name, NULL);
}

/* ---- submit --------------------------------------------------------- */

/* The agent's command line in a proxy script.  An array's elements share
 * one script: each names its proxy `ID-INDEX` from the index its script
 * exports (DATC_ARRAY_INDEX_VAR), the proxy ids the provisioner gave them. */
static gchar *
agent_command (DatcProvisioner *p, SiteState *s, const char *proxy_id, gboolean array, guint slots)
{
  g_autofree gchar *agent = g_shell_quote (s->spec->agent_path);
  g_autofree gchar *ep = g_shell_quote (s->endpoint != NULL ? s->endpoint : p->endpoint);
  g_autofree gchar *site = g_shell_quote (s->spec->name);
  g_autofree gchar *quoted = g_shell_quote (proxy_id);
  g_autofree gchar *proxy = array ? g_strdup_printf ("%s-\"$%s\"", quoted, DATC_ARRAY_INDEX_VAR)
                                  : g_steal_pointer (&quoted);
  GString *cmd = g_string_new (NULL);
  g_string_printf (cmd, "%s --connect %s --site %s --proxy %s --slots \"${DATC_SLOTS:-%u}\"", agent,
                   ep, site, proxy, slots);
  if (p->server_public != NULL && s->spec->key_file != NULL)
    {
      /* Z85 uses shell characters (& ! { ...): quote it like the rest. */
      g_autofree gchar *server = g_shell_quote (p->server_public);
      g_autofree gchar *key = g_shell_quote (s->spec->key_file);
      g_string_append_printf (cmd, " --server-key %s --key-file %s", server, key);
    }
  if (p->agent_args != NULL && p->agent_args[0])
    g_string_append_printf (cmd, " %s", p->agent_args);
  return g_string_free (cmd, FALSE);
}

/* ---- the budget of scheduler commands -------------------------------- */

/* Admins limit how often a user may ask the scheduler (Slurm's per-user
 * RPC limit, "one squeue every 2 minutes"), and flooding a controller gets
 * accounts suspended.  Every scheduler command (submit, poll, cancel, and
 * the lookup a submit may need) draws on the site's budget: at most
 * calls_per_minute in ANY 60 s, kept exactly by the times of the calls of
 * the last minute (a sliding window, not a bucket that refills in
 * bursts).  The end of a campaign keeps BUDGET_RESERVE of them (a cancel
 * and a poll) for itself, so the plan cannot spend what shutdown needs;
 * while a submit waits for the budget, polls leave it room (the proxies
 * they ask about are not going anywhere). */
#define BUDGET_RESERVE 2
#define BUDGET_WINDOW_US (60 * G_USEC_PER_SEC)

/* Forgets the calls that left the window. */
static void
prune_calls (SiteState *s, gint64 now)
{
  guint old = 0;
  while (old < s->calls->len && now - g_array_index (s->calls, gint64, old) >= BUDGET_WINDOW_US)
    old++;
  g_array_remove_range (s->calls, 0, old);
}

/* Takes `n` calls of the budget for one command of `kind` (a submit takes
 * two: the submit and the lookup that checks one lost in transit),
 * leaving `reserve` untouched, or FALSE when they would exceed it. */
static gboolean
take_calls (DatcProvisioner *p, SiteState *s, guint n, guint reserve, const char *kind)
{
  gint64 now = clock_mono (p);
  prune_calls (s, now);
  if (s->calls_per_minute > 0 && s->calls->len + n + reserve > s->calls_per_minute)
    return FALSE;
  for (guint i = 0; i < n; i++)
    g_array_append_val (s->calls, now);
  /* One command; `budget`: what it took of the budget. */
  datc_trace_event (p->trace, "site_command", "site", 's', s->spec->name, "kind", 's', kind,
                    "calls", 'i', (gint64) 1, "budget", 'i', (gint64) n, NULL);
  return TRUE;
}

/* Calls taken in the last minute. */
static guint
calls_last_minute (DatcProvisioner *p, SiteState *s)
{
  prune_calls (s, clock_mono (p));
  return s->calls->len;
}

/* ---- jobs: what runs on a site's worker ----------------------------- */

/* Makes and checks the workdir, then puts the agent (agent = upload) and
 * the campaign's agent key there, once.  Done before the first submit
 * rather than at start, so a site that is unreachable at start only
 * delays itself.  The agent's hash is checked, and the key lands, only in
 * a workdir found to be the user's alone, where no one else can swap them
 * afterwards. */
typedef struct {
  SiteState *s;
  guint command_ms;
  gchar *upload_from, *workdir, *key_file;
  gboolean make_workdir;
  GBytes *key_data;
  gchar *check_agent; /* an agent path to look for on the site, or NULL */
  gchar *resolved;    /* out: the workdir's absolute path (make_workdir) */
  gchar *agent_path;  /* out: where the upload put it */
  DatcRelay *relay;   /* the site's, or NULL */
  gchar *relay_agent; /* the agent already there (no upload this time) */
  gchar *endpoint;    /* out: where the relay listens */
  GError *error;
} PrepareJob;

/* An agent path that is not on the site would only show as proxies that
 * end before they connect, the reason in a log on the site: name the path.
 * Only an absolute path is looked for: a bare name may be on the PATH of
 * a batch job (a module loaded there) and not on that of a login shell. */
static gboolean
agent_is_there (const DatcSiteCalls *calls, DatcSite *site, const char *path, GError **error)
{
  const char *argv[] = { "/bin/sh", "-c", "test -x \"$1\"", "datc-agent-check", path, NULL };
  DatcCommandResult res = { 0 };
  gboolean ran = calls->run (site, argv, &res, error);
  gboolean there = ran && res.exit_status == 0;
  datc_command_result_clear (&res);
  if (ran && !there)
    g_set_error (error, DATC_SITE_ERROR, DATC_SITE_ERROR_CONFIG,
                 "agent %s not found on site %s (or not executable there)", path,
                 datc_site_name (site));
  return there;
}

/* `path` with its leading `from` directory replaced by `to` (transfer
 * full); `path` itself when it is not under `from`. */
static gchar *
rebase_path (const char *path, const char *from, const char *to)
{
  gsize n = strlen (from);
  if (strncmp (path, from, n) == 0 && path[n] == '/')
    return g_strconcat (to, path + n, NULL);
  return g_strdup (path);
}

static void
prepare_run (DatcSite *site, gpointer data)
{
  PrepareJob *j = data;
  datc_site_set_command_timeout (site, j->command_ms);
  if (j->make_workdir)
    {
      if (!datc_site_make_workdir (site, j->workdir, &j->resolved, &j->error))
        return;
      if (j->key_file != NULL)
        {
          gchar *key_file = rebase_path (j->key_file, j->workdir, j->resolved);
          g_free (j->key_file);
          j->key_file = key_file;
        }
      g_free (j->workdir);
      j->workdir = g_strdup (j->resolved);
    }
  if (j->check_agent != NULL && !agent_is_there (j->s->site_calls, site, j->check_agent, &j->error))
    return;
  if (j->upload_from != NULL
      && !datc_site_upload_agent (site, j->upload_from, j->workdir, &j->agent_path, &j->error))
    return;
  if (j->key_data != NULL && !datc_site_put (site, j->key_data, j->key_file, 0600, &j->error))
    return;
  if (j->relay != NULL)
    datc_relay_start (j->relay, j->agent_path ? j->agent_path : j->relay_agent, j->workdir,
                      j->command_ms, &j->endpoint, &j->error);
}

static void
submit_failed (DatcProvisioner *p, SiteState *s, const GError *error)
{
  s->failures++;
  s->next_submit_us = clock_mono (p) + backoff_us (s->failures);
  g_warning ("site %s: could not submit a proxy (%u in a row): %s", s->spec->name, s->failures,
             error->message);
  if (!no_answer (p, s, error))
    site_failed (p, s, HEALTH_SUBMIT, s->failures, error->message);
}

static void
prepare_done (gpointer owner, gpointer data)
{
  DatcProvisioner *p = owner;
  PrepareJob *j = data;
  SiteState *s = j->s;
  s->preparing = FALSE;
  if (j->error != NULL)
    submit_failed (p, s, j->error);
  else
    {
      if (j->resolved != NULL)
        {
          g_free (s->spec->workdir);
          s->spec->workdir = g_steal_pointer (&j->resolved);
          if (j->key_file != NULL)
            {
              g_free (s->spec->key_file);
              s->spec->key_file = g_steal_pointer (&j->key_file);
            }
        }
      if (j->agent_path != NULL)
        {
          g_free (s->spec->agent_path);
          s->spec->agent_path = g_steal_pointer (&j->agent_path);
        }
      if (j->endpoint != NULL)
        {
          if (g_strcmp0 (s->endpoint, j->endpoint) != 0)
            datc_trace_event (p->trace, "relay_up", "site", 's', s->spec->name, "endpoint", 's',
                              j->endpoint, NULL);
          g_free (s->endpoint);
          s->endpoint = g_steal_pointer (&j->endpoint);
        }
      s->prepared = TRUE;
      site_recovered (p, s, HEALTH_HUNG);
    }
  g_clear_error (&j->error);
  g_free (j->upload_from);
  g_free (j->check_agent);
  g_free (j->workdir);
  g_free (j->key_file);
  g_clear_pointer (&j->key_data, g_bytes_unref);
  g_free (j->resolved);
  g_free (j->agent_path);
  g_free (j->relay_agent);
  g_free (j->endpoint);
  g_free (j);
}

/* FALSE while the site is not ready for a submit (the preparing job is
 * out, or was just posted). */
static gboolean
prepare_site (DatcProvisioner *p, SiteState *s)
{
  if (s->prepared)
    return TRUE;
  if (s->preparing)
    return FALSE;
  DatcSiteSpec *sp = s->spec;
  PrepareJob *j = g_new0 (PrepareJob, 1);
  j->s = s;
  j->command_ms = s->command_ms;
  if (sp->upload_from == NULL && sp->agent_path != NULL && sp->agent_path[0] == '/')
    j->check_agent = g_strdup (sp->agent_path);
  j->workdir = g_strdup (sp->workdir);
  j->make_workdir = sp->make_workdir;
  if (sp->upload_from != NULL && sp->agent_path == NULL)
    {
      s->n_put++;
      j->upload_from = g_strdup (sp->upload_from);
    }
  if (sp->key_data != NULL)
    {
      s->n_put++;
      j->key_data = g_bytes_ref (sp->key_data);
      j->key_file = g_strdup (sp->key_file);
    }
  if (sp->relay != NULL)
    {
      j->relay = sp->relay;
      j->relay_agent = g_strdup (sp->agent_path);
    }
  s->preparing = TRUE;
  post (p, s, prepare_run, prepare_done, j);
  return FALSE;
}

typedef struct {
  SiteState *s;
  GPtrArray *xs; /* its placeholders in s->proxies (Proxy*, element i+1 at [i]);
                  * the loop's: the worker only reads k */
  guint k;       /* proxies: 1 is a plain job, more an array */
  guint command_ms;
  gchar *id; /* the submission's (its proxies' ids are ID, or ID-1..ID-k) */
  gchar *name, *queue, *submit_args, *workdir, *command, *script;
  guint slots, walltime_s;
  GStrv job_ids;       /* out: k of them */
  GStrv exclude_hosts; /* the site's excluded hosts when it was made, or NULL */
  GError *error;
} SubmitJob;

static void
submit_run (DatcSite *site, gpointer data)
{
  SubmitJob *j = data;
  DatcProxyRequest req = {
    .name = j->name,
    .slots = j->slots,
    .walltime_s = j->walltime_s,
    .queue = j->queue,
    .submit_args = j->submit_args,
    .workdir = j->workdir,
    .agent_command = j->command,
    .exclude_hosts = (const char *const *) j->exclude_hosts,
  };
  datc_site_set_command_timeout (site, j->command_ms);
  if (j->k > 1)
    {
      j->s->site_calls->submit_array (site, &req, j->k, j->script, &j->job_ids, &j->error);
      return;
    }
  gchar *id = NULL;
  if (j->s->site_calls->submit (site, &req, j->script, &id, &j->error))
    {
      j->job_ids = g_new0 (gchar *, 2);
      j->job_ids[0] = id;
    }
}

static void
submit_done (gpointer owner, gpointer data)
{
  DatcProvisioner *p = owner;
  SubmitJob *j = data;
  SiteState *s = j->s;
  s->submitting--;
  if (j->error != NULL)
    {
      submit_failed (p, s, j->error);
      /* Its script, if it got there, stays: the user may want to submit
       * it by hand to see what the scheduler says. */
      g_hash_table_remove (s->submissions, j->id);
      for (guint i = 0; i < j->xs->len; i++)
        {
          Proxy *x = j->xs->pdata[i];
          datc_ledger_release (p->ledger, s->spec->name, x->id);
          g_ptr_array_remove (s->proxies, x);
        }
      proxies_changed (s);
    }
  else
    {
      s->failures = 0;
      s->submitted_total += j->k;
      site_recovered (p, s, HEALTH_SUBMIT);
      site_recovered (p, s, HEALTH_HUNG);
      /* Where each proxy's log is, as its scheduler names it (an array's
       * elements each have their own). */
      DatcProxyRequest req = { .name = j->name, .workdir = j->workdir };
      for (guint i = 0; i < j->xs->len; i++)
        {
          Proxy *x = j->xs->pdata[i];
          x->job_id = g_strdup (j->job_ids[i]);
          proxies_changed (s);
          x->log = datc_site_proxy_log (s->spec->site, &req, j->script, x->job_id);
          x->state = DATC_PROXY_PENDING;
          datc_ledger_proxy_event (p->ledger, s->spec->name, x->id, x->job_id, "submitted");
        }
      /* Durable now, not at the next group commit: a master that dies in
       * between would not know these jobs, submit others in their place,
       * and leave these on the site.  A submit costs more than the sync. */
      g_autoptr (GError) sync_error = NULL;
      if (!datc_ledger_commit (p->ledger, &sync_error))
        g_warning ("site %s: %u proxies (%s...) could not be journaled: %s", s->spec->name, j->k,
                   j->job_ids[0], sync_error->message);
      for (guint i = 0; i < j->xs->len; i++)
        {
          Proxy *x = j->xs->pdata[i];
          /* An array's elements also name the array (its job name). */
          datc_trace_event (p->trace, "proxy_submitted", "site", 's', s->spec->name, "proxy", 's',
                            x->id, "job", 's', x->job_id, "slots", 'i', (gint64) x->slots,
                            "walltime", 'i', (gint64) s->spec->walltime_s, "task", 'i',
                            (gint64) datc_ledger_proxy_task (p->ledger, s->spec->name, x->id),
                            j->k > 1 ? "array" : NULL, 's', j->name, NULL);
          g_debug ("site %s: proxy %s submitted as job %s", s->spec->name, x->id, x->job_id);
        }
    }
  if (datc_site_scheduler_can_lookup (s->spec->site))
    datc_ledger_proxy_event (p->ledger, s->spec->name, j->id, "", "settled");
  g_clear_error (&j->error);
  g_free (j->id);
  g_ptr_array_unref (j->xs);
  g_strfreev (j->job_ids);
  g_free (j->name);
  g_free (j->queue);
  g_free (j->submit_args);
  g_strfreev (j->exclude_hosts);
  g_free (j->workdir);
  g_free (j->command);
  g_free (j->script);
  g_free (j);
}

/* Hands the submit of k proxies (1..DATC_ARRAY_MAX) to the site's worker:
 * one command either way, a job array when k > 1.  The proxies exist at
 * once (pending, without a job id), so the plan counts them as coming
 * capacity and against max_proxies while the submit is out.  `bind`:
 * direct mode, each is bound to the next queued task in the ledger.
 * FALSE when the site is not ready (its agent and key are still being
 * put there) or the budget has no room. */
static gboolean
submit_job (DatcProvisioner *p, SiteState *s, guint slots, guint k, gboolean bind)
{
  if (!prepare_site (p, s))
    return FALSE;
  /* The submit, and the lookup that checks one lost in transit. */
  if (!take_calls (p, s, 2, BUDGET_RESERVE, "submit"))
    {
      s->calls_short = TRUE;
      return FALSE;
    }
  s->calls_short = FALSE;
  SubmitJob *j = g_new0 (SubmitJob, 1);
  /* An array's elements are ID-1..ID-k, as their agents name themselves. */
  gchar *id
      = g_strdup_printf ("%s-%04x-%s%u", s->spec->name, p->tag, k > 1 ? "a" : "", ++s->serial);
  j->s = s;
  j->k = k;
  j->xs = g_ptr_array_new ();
  j->command_ms = s->command_ms;
  j->name = g_strdup_printf ("datc-%s", id);
  j->script = g_strdup_printf ("%s.sh", id);
  j->command = agent_command (p, s, id, k > 1, slots);
  j->queue = g_strdup (s->spec->queue);
  j->submit_args = g_strdup (s->spec->submit_args);
  /* Copied: the submit runs on the site's worker thread. */
  j->exclude_hosts = g_strdupv ((gchar **) datc_dispatcher_excluded_hosts (p->disp, s->spec->name));
  j->workdir = g_strdup (s->spec->workdir);
  j->slots = slots;
  j->walltime_s = s->spec->walltime_s;
  for (guint i = 0; i < k; i++)
    {
      Proxy *x = g_new0 (Proxy, 1);
      x->id = k > 1 ? g_strdup_printf ("%s-%u", id, i + 1) : g_strdup (id);
      x->state = DATC_PROXY_PENDING;
      x->slots = slots;
      x->submitted_us = clock_real (p);
      x->submission = g_strdup (id);
      g_ptr_array_add (s->proxies, x);
      proxies_changed (s);
      g_ptr_array_add (j->xs, x);
      /* Bound now: a fork site's agent may say HELLO before the submit's
       * answer is back here.  The caller counted the tasks to bind; should
       * one be missing, the proxy's agent takes whatever is queued. */
      if (bind)
        (void) datc_ledger_bind (p->ledger, s->spec->name, x->id, NULL);
    }
  j->id = id;
  submission_add (s, id, k);
  /* Durable before the command goes out: a master killed while it is out
   * asks the scheduler for it by name when the campaign resumes (a fork
   * site's proxies are this process's own: nothing to find). */
  if (datc_site_scheduler_can_lookup (s->spec->site))
    {
      g_autofree gchar *count = g_strdup_printf ("%u", k);
      datc_ledger_proxy_event (p->ledger, s->spec->name, id, count, "submitting");
      g_autoptr (GError) sync_error = NULL;
      if (!datc_ledger_commit (p->ledger, &sync_error))
        g_warning ("site %s: submit %s could not be journaled: %s", s->spec->name, id,
                   sync_error->message);
    }
  s->n_submit++;
  s->submitting++;
  post (p, s, submit_run, submit_done, j);
  return TRUE;
}

/* Submits up to k proxies and says how many went out: all k as one array
 * where the scheduler has arrays (a thousand at most), else as plain jobs
 * one by one while the site and the budget allow. */
static guint
submit_proxies (DatcProvisioner *p, SiteState *s, guint slots, guint k, gboolean bind)
{
  if (k >= DATC_ARRAY_MIN && datc_site_scheduler_has_arrays (s->spec->site))
    {
      k = MIN (k, DATC_ARRAY_MAX);
      return submit_job (p, s, slots, k, bind) ? k : 0;
    }
  guint n = 0;
  while (n < k && submit_job (p, s, slots, 1, bind))
    n++;
  return n;
}

/* ---- poll ----------------------------------------------------------- */

/* The first sign that a proxy runs (the scheduler says so, or its agent
 * connected) goes to the trace once: when, and how long it waited. */
static void
trace_started (DatcProvisioner *p, SiteState *s, Proxy *x, const char *seen_by, gint64 when)
{
  if (x->start_traced)
    return;
  x->start_traced = TRUE;
  datc_trace_event (p->trace, "proxy_started", "site", 's', s->spec->name, "proxy", 's', x->id,
                    "job", 's', x->job_id, "seen_by", 's', seen_by, "started", 'i', when, "wait_us",
                    'i', x->submitted_us > 0 ? when - x->submitted_us : (gint64) -1, NULL);
}

static void remove_spent (DatcProvisioner *p, SiteState *s);

/* Past this many names a site's spent files are removed at once, not at
 * the end: a direct-mode campaign ends a proxy per task. */
#define SPENT_BATCH 1000

/* A proxy ended: a user has nothing to read in the files of one that
 * ended well (its agent connected, or we cancelled it while it waited in
 * the queue), so its log goes, and its script once every proxy of its
 * submit is gone (an array's elements share it).  One that failed keeps
 * its log and script, where the reason is: the scheduler says FAILED,
 * or its agent never connected though it ended on its own or ran (an
 * agent that cannot reach the master says so in the log, and we cancel
 * it at the end). */
static void
proxy_spent (DatcProvisioner *p, SiteState *s, Proxy *x)
{
  if (p->keep_site_files || x->submission == NULL)
    return;
  gboolean failed
      = x->state == DATC_PROXY_FAILED || (!ever_connected (p, s, x) && (!x->cancelling || x->ran));
  g_autofree gchar *name = g_strdup_printf ("datc-%s", x->submission);
  g_autofree gchar *script = g_strdup_printf ("%s.sh", x->submission);
  if (!failed && x->job_id != NULL)
    {
      g_auto (GStrv) logs = datc_site_proxy_logs (s->spec->site, name, x->job_id, script);
      for (guint i = 0; logs != NULL && logs[i] != NULL; i++)
        g_ptr_array_add (s->spent, g_steal_pointer (&logs[i]));
    }
  Submission *sub = g_hash_table_lookup (s->submissions, x->submission);
  if (sub == NULL)
    return;
  sub->keep = sub->keep || failed;
  if (sub->left > 0 && --sub->left == 0)
    {
      if (!sub->keep)
        g_ptr_array_add (s->spent, g_steal_pointer (&script));
      g_hash_table_remove (s->submissions, x->submission);
    }
  if (s->spent->len >= SPENT_BATCH)
    remove_spent (p, s);
}

/* A proxy is gone: its bound task (direct mode) goes back to the queue if
 * it never ran, and a proxy that never connected (and that we did not
 * cancel) counts against the site. */
static void
proxy_ended (DatcProvisioner *p, SiteState *s, Proxy *x)
{
  if (x->replaces != NULL)
    x->replaces->replaced_by = NULL;
  if (x->replaced_by != NULL)
    x->replaced_by->replaces = NULL;
  x->replaces = x->replaced_by = NULL;
  datc_ledger_release (p->ledger, s->spec->name, x->id);
  /* Asked before the ledger is told it ended (it then forgets the proxy). */
  gboolean connected = ever_connected (p, s, x);
  /* An adopted proxy (an earlier master's, submitted_us 0) may well die
   * without connecting: its agent was told the old master's endpoint. */
  if (!connected && !x->cancelling && x->submitted_us > 0)
    {
      s->early_deaths++;
      s->early_deaths_total++;
      s->next_submit_us = clock_mono (p) + backoff_us (s->early_deaths);
      g_autofree gchar *why = g_strdup_printf (
          "proxy %s (job %s) ended before its agent connected (%u in a row; its log is in %s "
          "on the site)",
          x->id, x->job_id, s->early_deaths, s->spec->workdir);
      g_warning ("site %s: %s", s->spec->name, why);
      site_failed (p, s, HEALTH_EARLY_DEATH, s->early_deaths, why);
    }
  else if (connected)
    s->early_deaths = 0;
  datc_ledger_proxy_event (p->ledger, s->spec->name, x->id, x->job_id, "ended");
  datc_trace_event (p->trace, "proxy_ended", "site", 's', s->spec->name, "proxy", 's', x->id, "job",
                    's', x->job_id, NULL);
  proxy_spent (p, s, x);
}

typedef struct {
  SiteState *s;
  guint command_ms;
  GStrv ids;              /* job ids, as posted */
  DatcProxyState *states; /* out, one per id */
  gchar **reasons;        /* out, one per id: why a pending one waits, or NULL */
  GError *error;
} PollJob;

static void
poll_run (DatcSite *site, gpointer data)
{
  PollJob *j = data;
  datc_site_set_command_timeout (site, j->command_ms);
  j->s->site_calls->poll_reasons (site, (const char *const *) j->ids, j->states, j->reasons,
                                  &j->error);
}

static Proxy *
find_job (SiteState *s, const char *job_id, guint *index)
{
  for (guint i = 0; i < s->proxies->len; i++)
    {
      Proxy *x = s->proxies->pdata[i];
      if (x->job_id != NULL && g_str_equal (x->job_id, job_id))
        {
          *index = i;
          return x;
        }
    }
  return NULL;
}

static void
poll_done (gpointer owner, gpointer data)
{
  DatcProvisioner *p = owner;
  PollJob *j = data;
  SiteState *s = j->s;
  s->polling = FALSE;
  if (j->error != NULL)
    {
      s->poll_failures++;
      s->next_poll_us = clock_mono (p) + MAX (s->poll_us, backoff_us (s->poll_failures));
      g_warning ("site %s: could not poll proxies (%u in a row): %s", s->spec->name,
                 s->poll_failures, j->error->message);
      if (!no_answer (p, s, j->error))
        site_failed (p, s, HEALTH_POLL, s->poll_failures, j->error->message);
    }
  else
    {
      s->poll_failures = 0;
      site_recovered (p, s, HEALTH_POLL);
      site_recovered (p, s, HEALTH_HUNG);
      /* Matched by job id: proxies may have come or gone while it was out. */
      for (guint k = 0; j->ids[k] != NULL; k++)
        {
          guint i;
          Proxy *x = find_job (s, j->ids[k], &i);
          if (x == NULL)
            continue;
          x->state = j->states[k];
          x->ran = x->ran || x->state == DATC_PROXY_RUNNING;
          /* The last reason the scheduler gave, for status and progress. */
          x->queued = x->state == DATC_PROXY_PENDING;
          g_free (x->reason);
          x->reason = x->queued ? g_steal_pointer (&j->reasons[k]) : NULL;
          if (x->state == DATC_PROXY_RUNNING)
            trace_started (p, s, x, "scheduler", clock_real (p));
          if (x->state == DATC_PROXY_RUNNING && x->running_since_us == 0)
            x->running_since_us = clock_mono (p);
          if (x->state == DATC_PROXY_FINISHED || x->state == DATC_PROXY_FAILED)
            {
              proxy_ended (p, s, x);
              g_ptr_array_remove_index (s->proxies, i);
              proxies_changed (s);
            }
        }
    }
  for (guint k = 0; j->ids[k] != NULL; k++)
    g_free (j->reasons[k]);
  g_clear_error (&j->error);
  g_strfreev (j->ids);
  g_free (j->states);
  g_free (j->reasons);
  g_free (j);
}

/* One command for all the site's proxies (those with a job id), one at a
 * time, within the budget (less `reserve`); FALSE when it was not sent. */
static gboolean
poll_site (DatcProvisioner *p, SiteState *s, guint reserve)
{
  if (s->polling)
    return FALSE;
  g_autoptr (GPtrArray) ids = g_ptr_array_new ();
  for (guint i = 0; i < s->proxies->len; i++)
    {
      Proxy *x = s->proxies->pdata[i];
      if (x->job_id != NULL)
        g_ptr_array_add (ids, g_strdup (x->job_id));
    }
  if (ids->len == 0 || !take_calls (p, s, 1, reserve, "poll"))
    return FALSE;
  PollJob *j = g_new0 (PollJob, 1);
  j->s = s;
  j->command_ms = s->command_ms;
  j->states = g_new0 (DatcProxyState, ids->len);
  j->reasons = g_new0 (gchar *, ids->len);
  g_ptr_array_add (ids, NULL);
  j->ids = (GStrv) g_ptr_array_steal (ids, NULL);
  s->n_poll++;
  s->polling = TRUE;
  post (p, s, poll_run, poll_done, j);
  return TRUE;
}

/* ---- lookups: submits an earlier master did not see come back ------- */

typedef struct {
  SiteState *s;
  guint command_ms;
  gchar *id; /* the submission's */
  guint k;
  GStrv job_ids; /* out: its k jobs, or NULL: the scheduler has none of that name */
  GError *error;
} LookupJob;

static void
lookup_run (DatcSite *site, gpointer data)
{
  LookupJob *j = data;
  g_autofree gchar *name = g_strdup_printf ("datc-%s", j->id);
  datc_site_set_command_timeout (site, j->command_ms);
  if (j->k > 1)
    {
      j->s->site_calls->lookup_array (site, name, j->k, &j->job_ids, &j->error);
      return;
    }
  gchar *id = NULL;
  if (j->s->site_calls->lookup (site, name, &id, &j->error) && id != NULL)
    {
      j->job_ids = g_new0 (gchar *, 2);
      j->job_ids[0] = id;
    }
}

static void
lookup_done (gpointer owner, gpointer data)
{
  DatcProvisioner *p = owner;
  LookupJob *j = data;
  SiteState *s = j->s;
  s->looking_up = FALSE;
  if (j->error != NULL)
    {
      s->next_lookup_us = clock_mono (p) + MAX (s->poll_us, backoff_us (++s->poll_failures));
      g_warning ("site %s: could not look up submit %s of an earlier run: %s", s->spec->name, j->id,
                 j->error->message);
      site_failed (p, s, HEALTH_POLL, s->poll_failures, j->error->message);
    }
  else
    {
      s->poll_failures = 0;
      site_recovered (p, s, HEALTH_POLL);
      site_recovered (p, s, HEALTH_HUNG);
      /* Its jobs are ours like any adopted proxy: ended at the latest
       * when the campaign ends. */
      for (guint i = 0; j->job_ids != NULL && j->job_ids[i] != NULL; i++)
        {
          g_autofree gchar *id
              = j->k > 1 ? g_strdup_printf ("%s-%u", j->id, i + 1) : g_strdup (j->id);
          Proxy *x = adopt_proxy (p, s, id, j->job_ids[i], j->id);
          datc_ledger_proxy_event (p->ledger, s->spec->name, x->id, x->job_id, "submitted");
          datc_trace_event (p->trace, "proxy_found", "site", 's', s->spec->name, "proxy", 's',
                            x->id, "job", 's', x->job_id, NULL);
        }
      g_message (
          "site %s: submit %s of an earlier run, never seen to come back, %s", s->spec->name, j->id,
          j->job_ids != NULL ? "went through: its proxies are adopted" : "did not go through");
      datc_ledger_proxy_event (p->ledger, s->spec->name, j->id, "", "settled");
      for (guint i = 0; i < s->lookups->len; i++)
        if (g_str_has_prefix (s->lookups->pdata[i], j->id)
            && ((char *) s->lookups->pdata[i])[strlen (j->id)] == '\t')
          {
            g_ptr_array_remove_index (s->lookups, i);
            break;
          }
      s->next_poll_us = 0;
    }
  g_clear_error (&j->error);
  g_strfreev (j->job_ids);
  g_free (j->id);
  g_free (j);
}

/* Looks for the site's first open submission of an earlier master, one
 * at a time, within the budget (less `reserve`). */
static void
lookup_submits (DatcProvisioner *p, SiteState *s, guint reserve)
{
  if (s->lookups->len == 0 || s->looking_up || clock_mono (p) < s->next_lookup_us)
    return;
  g_auto (GStrv) f = g_strsplit (s->lookups->pdata[0], "\t", 2);
  guint64 k = 0;
  if (g_strv_length (f) != 2 || !g_ascii_string_to_unsigned (f[1], 10, 1, DATC_ARRAY_MAX, &k, NULL))
    {
      g_warning ("site %s: journal: a submit record \"%s\" makes no sense: not looked up",
                 s->spec->name, (char *) s->lookups->pdata[0]);
      g_ptr_array_remove_index (s->lookups, 0);
      return;
    }
  if (!take_calls (p, s, 1, reserve, "lookup"))
    return;
  LookupJob *j = g_new0 (LookupJob, 1);
  j->s = s;
  j->command_ms = s->command_ms;
  j->id = g_strdup (f[0]);
  j->k = (guint) k;
  s->n_lookup++;
  s->looking_up = TRUE;
  post (p, s, lookup_run, lookup_done, j);
}

/* ---- cancel --------------------------------------------------------- */

typedef struct {
  SiteState *s;
  guint command_ms;
  GStrv ids; /* job ids */
  gchar *why;
  GError *error;
} CancelJob;

static void
cancel_run (DatcSite *site, gpointer data)
{
  CancelJob *j = data;
  datc_site_set_command_timeout (site, j->command_ms);
  j->s->site_calls->cancel (site, (const char *const *) j->ids, &j->error);
}

static void
cancel_done (gpointer owner, gpointer data)
{
  DatcProvisioner *p = owner;
  CancelJob *j = data;
  SiteState *s = j->s;
  s->cancelling = FALSE;
  if (j->error != NULL)
    {
      s->cancel_failures++;
      s->next_cancel_us = clock_mono (p) + backoff_us (s->cancel_failures);
      g_warning ("site %s: could not cancel proxies (%u in a row): %s", s->spec->name,
                 s->cancel_failures, j->error->message);
      no_answer (p, s, j->error);
    }
  else
    {
      s->cancel_failures = 0;
      site_recovered (p, s, HEALTH_HUNG);
      for (guint k = 0; j->ids[k] != NULL; k++)
        {
          guint i;
          Proxy *x = find_job (s, j->ids[k], &i);
          if (x == NULL || x->cancelling)
            continue; /* gone meanwhile, or asked again: it did not end the first time */
          x->cancelling = TRUE;
          proxies_changed (s);
          s->cancelled_total++;
          datc_ledger_proxy_event (p->ledger, s->spec->name, x->id, x->job_id, "cancelled");
          datc_trace_event (p->trace, "proxy_cancelled", "site", 's', s->spec->name, "proxy", 's',
                            x->id, "job", 's', x->job_id, "reason", 's', j->why, NULL);
        }
      /* See them end soon. */
      s->next_poll_us = MIN (s->next_poll_us, clock_mono (p) + G_USEC_PER_SEC);
    }
  g_clear_error (&j->error);
  g_strfreev (j->ids);
  g_free (j->why);
  g_free (j);
}

/* Cancels the given proxies of one site in one command, one such command
 * at a time.  A failed cancel backs the site's cancels off (1 s doubling
 * to 60 s) so an unreachable login node is not asked on every tick.
 * Proxies whose submit is still out have nothing to cancel yet. */
static gboolean
cancel_proxies (DatcProvisioner *p, SiteState *s, GPtrArray *which, const char *why, guint reserve)
{
  if (s->cancelling)
    return FALSE;
  g_autoptr (GPtrArray) ids = g_ptr_array_new ();
  for (guint i = 0; i < which->len; i++)
    {
      Proxy *x = which->pdata[i];
      if (x->job_id != NULL)
        g_ptr_array_add (ids, g_strdup (x->job_id));
    }
  if (ids->len == 0)
    return FALSE;
  /* Asked about first, the budget allowing (the worker runs commands in
   * order): a proxy that already ended on its own is seen so, not taken
   * for one we cancelled, and its files stay for the user (proxy_spent). */
  poll_site (p, s, reserve + 1);
  if (!take_calls (p, s, 1, reserve, "cancel"))
    return FALSE;
  g_ptr_array_add (ids, NULL);
  CancelJob *j = g_new0 (CancelJob, 1);
  j->s = s;
  j->command_ms = s->command_ms;
  j->ids = (GStrv) g_ptr_array_steal (ids, NULL);
  j->why = g_strdup (why);
  s->n_cancel++;
  s->cancelling = TRUE;
  post (p, s, cancel_run, cancel_done, j);
  return TRUE;
}

/* Proxies whose agent has not connected (queued, or starting): the work
 * left fits in the slots already running, so they would only hold a place
 * in the queue and then an allocation with nothing to do.  All but the
 * first `keep` of them (the oldest submits: nearest the queue's head). */
static void
cancel_pending (DatcProvisioner *p, SiteState *s, const char *why, guint reserve, guint keep)
{
  if (clock_mono (p) < s->next_cancel_us)
    return;
  g_autoptr (GPtrArray) which = g_ptr_array_new ();
  for (guint i = 0; i < s->proxies->len; i++)
    {
      Proxy *x = s->proxies->pdata[i];
      if (x->online || x->cancelling || ever_connected (p, s, x))
        continue;
      if (keep > 0 && !x->migrating)
        keep--;
      else
        g_ptr_array_add (which, x);
    }
  (void) cancel_proxies (p, s, which, why, reserve);
}

/* ---- agents that cannot reach the master ---------------------------- */

/* A job can run while its agent never connects: told an address the
 * nodes cannot reach (a wildcard listen, a wrong advertise, a firewall).
 * The agent says why in its log (worker-agent/reach.c); the master reads
 * the end of that log through the site's transport, once per proxy, when
 * a proxy has run for connect_wait without its agent, and says it on
 * stderr (once per reason and site), in `datc status` and in the trace. */
typedef struct {
  SiteState *s;
  guint command_ms;
  gchar *proxy, *job, *log;
  gchar *tail; /* out: the log's last bytes, or NULL */
  GError *error;
} LogJob;

static void
log_run (DatcSite *site, gpointer data)
{
  LogJob *j = data;
  g_autofree gchar *bytes = g_strdup_printf ("%d", LOG_TAIL_BYTES);
  const char *argv[] = { "tail", "-c", bytes, "--", j->log, NULL };
  DatcCommandResult res = { 0 };
  datc_site_set_command_timeout (site, j->command_ms);
  if (j->s->site_calls->run (site, argv, &res, &j->error) && res.exit_status == 0
      && res.out != NULL)
    j->tail = g_strndup (g_bytes_get_data (res.out, NULL),
                         MIN (g_bytes_get_size (res.out), (gsize) LOG_TAIL_BYTES));
  datc_command_result_clear (&res);
}

/* The agent's last word on reaching the master, from its log: "HOST\tWHAT"
 * (WHAT: "ENDPOINT: WHY"), or NULL when its last such line says it got
 * through, or there is none.  The log is data from the site: made valid
 * UTF-8, control characters replaced, cut to REACH_TEXT_MAX. */
static gchar *
reach_failure (const char *tail)
{
  g_autofree gchar *valid = g_utf8_make_valid (tail, -1);
  g_auto (GStrv) lines = g_strsplit (valid, "\n", -1);
  for (guint n = g_strv_length (lines); n > 0; n--)
    {
      const char *l = lines[n - 1];
      if (!g_str_has_prefix (l, "datc-agent on "))
        continue;
      const char *host = l + strlen ("datc-agent on ");
      const char *failed = strstr (host, DATC_REACH_FAILED);
      if (failed == NULL)
        {
          if (strstr (host, ": reached ") != NULL)
            return NULL;
          continue;
        }
      const char *what = failed + strlen (DATC_REACH_FAILED);
      gsize len = strlen (what);
      if (g_str_has_suffix (what, DATC_REACH_RETRYING))
        len -= strlen (DATC_REACH_RETRYING);
      GString *out = g_string_new (NULL);
      g_string_append_len (out, host, MIN ((gssize) (failed - host), 64));
      g_string_append_c (out, '\t');
      g_string_append_len (out, what, (gssize) MIN (len, (gsize) REACH_TEXT_MAX));
      for (gchar *c = out->str; *c; c++)
        if ((guchar) *c < 0x20 && *c != '\t')
          *c = '?';
      return g_string_free (out, FALSE);
    }
  return NULL;
}

static void
log_done (gpointer owner, gpointer data)
{
  DatcProvisioner *p = owner;
  LogJob *j = data;
  SiteState *s = j->s;
  s->reading_log = FALSE;
  g_autofree gchar *found = j->tail != NULL ? reach_failure (j->tail) : NULL;
  if (j->error != NULL)
    g_debug ("site %s: reading %s: %s", s->spec->name, j->log, j->error->message);
  else if (found == NULL)
    g_debug ("site %s: proxy %s runs without its agent; its log %s says nothing of why",
             s->spec->name, j->proxy, j->log);
  else
    {
      g_auto (GStrv) f = g_strsplit (found, "\t", 2);
      g_autofree gchar *why
          = s->spec->relay != NULL
                ? g_strdup_printf ("job %s runs on %s but its agent cannot reach its relay: %s; "
                                   "set relay_address = the login node's address its compute "
                                   "nodes reach (the proxy's log: %s)",
                                   j->job, f[0], f[1], j->log)
                : g_strdup_printf ("job %s runs on %s but its agent cannot reach %s; set "
                                   "[master] advertise = an address the nodes can reach, or "
                                   "reach = relay when they reach only the login node (the "
                                   "proxy's log: %s)",
                                   j->job, f[0], f[1], j->log);
      datc_trace_event (p->trace, "agent_unreachable", "site", 's', s->spec->name, "proxy", 's',
                        j->proxy, "job", 's', j->job, "host", 's', f[0], "error", 's', f[1], NULL);
      /* Once per site and reason, not per proxy. */
      if (g_strcmp0 (s->unreachable, f[1]) != 0)
        {
          g_free (s->unreachable);
          s->unreachable = g_strdup (f[1]);
          g_warning ("site %s: %s", s->spec->name, why);
          g_free (s->last_error);
          s->last_error = g_strdup (why);
          /* Degraded at once (said just above): its proxies will not
           * bring capacity.  An agent that connects makes it ok again. */
          if (s->health == HEALTH_OK)
            {
              s->health = HEALTH_UNREACHABLE;
              datc_trace_event (p->trace, "site_degraded", "site", 's', s->spec->name, "error", 's',
                                why, NULL);
            }
        }
    }
  g_clear_error (&j->error);
  g_free (j->proxy);
  g_free (j->job);
  g_free (j->log);
  g_free (j->tail);
  g_free (j);
}

/* At most one log read at a time per site, one every LOG_READ_SPACING_US,
 * once per proxy: a proxy the scheduler has said runs for connect_wait
 * whose agent has not connected. */
static void
check_reach (DatcProvisioner *p, SiteState *s, gint64 now)
{
  if (s->reading_log || now < s->next_log_us)
    return;
  for (guint i = 0; i < s->proxies->len; i++)
    {
      Proxy *x = s->proxies->pdata[i];
      if (x->log == NULL || x->log_read || x->cancelling || x->state != DATC_PROXY_RUNNING
          || x->running_since_us == 0 || now - x->running_since_us < s->connect_wait_us
          || ever_connected (p, s, x))
        continue;
      x->log_read = TRUE;
      LogJob *j = g_new0 (LogJob, 1);
      j->s = s;
      j->command_ms = s->command_ms;
      j->proxy = g_strdup (x->id);
      j->job = g_strdup (x->job_id);
      j->log = g_strdup (x->log);
      s->n_log++;
      s->reading_log = TRUE;
      s->next_log_us = now + LOG_READ_SPACING_US;
      post (p, s, log_run, log_done, j);
      return;
    }
  /* Nothing to read: not looked for again every loop turn (a thousand
   * proxies would make each turn walk them all), but soon, against a
   * connect_wait of seconds. */
  s->next_log_us = now + LOG_SCAN_US;
}

/* ---- observe -------------------------------------------------------- */

static gint64
queue_wait_us (const SiteState *s)
{
  gint64 w = 0;
  for (guint i = 0; i < MIN (s->n_waits, G_N_ELEMENTS (s->waits)); i++)
    w = MAX (w, s->waits[i]);
  return w;
}

/* How long before a proxy's end its replacement is submitted: the time a
 * proxy of this site recently waited in the queue (half again, at least
 * 5 s) plus a poll interval, but never more than half of the proxy's
 * working life, so that at most two generations overlap. */
static gboolean
is_expiring (const SiteState *s, const Proxy *x, gint64 now_real)
{
  if (x->walltime_end_us <= 0 || x->started_us <= 0)
    return FALSE;
  gint64 lead = MAX (5 * G_USEC_PER_SEC, queue_wait_us (s) * 3 / 2) + s->poll_us;
  lead = MIN (lead, (x->walltime_end_us - x->started_us) / 2);
  return now_real >= x->walltime_end_us - lead;
}

/* Each proxy's agent, by the proxy's name (the first agent listed for it),
 * from p->loads: a look-up, not a walk over every agent for each proxy
 * (a thousand of each made every plan a million comparisons). */
static void
index_loads (DatcProvisioner *p)
{
  g_hash_table_remove_all (p->load_index);
  for (guint i = 0; i < p->loads->len; i++)
    {
      const DatcAgentLoad *l = &g_array_index (p->loads, DatcAgentLoad, i);
      if (l->proxy != NULL && !g_hash_table_contains (p->load_index, l->proxy))
        g_hash_table_insert (p->load_index, (gpointer) l->proxy, GUINT_TO_POINTER (i + 1));
    }
}

static const DatcAgentLoad *
find_load (DatcProvisioner *p, const char *proxy)
{
  guint i = GPOINTER_TO_UINT (g_hash_table_lookup (p->load_index, proxy));
  return i > 0 ? &g_array_index (p->loads, DatcAgentLoad, i - 1) : NULL;
}

/* A proxy's agent said HELLO for the first time: what it waited, when it
 * will end, and proof that the site works. */
static void
proxy_connected (DatcProvisioner *p, SiteState *s, Proxy *x, const DatcAgentLoad *l)
{
  if (x->submitted_us > 0 && x->started_us > x->submitted_us)
    {
      gint64 wait_us = x->started_us - x->submitted_us;
      s->waits[s->n_waits++ % G_N_ELEMENTS (s->waits)] = wait_us;
      double wait_s = wait_us / 1e6;
      g_array_append_val (s->all_waits, wait_s);
      if (s->all_waits->len > DATC_WAIT_CACHE_PER_SITE)
        g_array_remove_range (s->all_waits, 0, s->all_waits->len - DATC_WAIT_CACHE_PER_SITE);
      if (p->waits != NULL)
        datc_wait_cache_add (p->waits, s->wait_key, wait_s, x->started_us / G_USEC_PER_SEC);
      update_wait_bound (s);
    }
  x->walltime_end_us = l != NULL ? l->walltime_end_us : 0;
  if (x->walltime_end_us == 0 && s->spec->walltime_s > 0)
    x->walltime_end_us = x->started_us + (gint64) s->spec->walltime_s * G_USEC_PER_SEC;
  s->early_deaths = 0;
  g_clear_pointer (&s->unreachable, g_free);
  site_recovered (p, s, HEALTH_OK);
  trace_started (p, s, x, "agent", x->started_us);
}

/* Brings each proxy up to date with what the dispatcher knows of its
 * agent, and sums the site's capacity for the plan. */
static void
observe (DatcProvisioner *p, SiteState *s, gint64 now_real)
{
  g_array_set_size (p->loads, 0);
  datc_dispatcher_proxy_agents (p->disp, s->spec->name, p->loads);
  index_loads (p);
  s->free_running = s->running_expiring = s->coming = 0;
  s->alive = 0;
  for (guint i = 0; i < s->proxies->len; i++)
    {
      Proxy *x = s->proxies->pdata[i];
      const DatcAgentLoad *l = find_load (p, x->id);
      if (x->started_us == 0 && ever_connected (p, s, x))
        {
          /* Its agent connected: seen connected now, or come and gone
           * since the last look (a quick direct-mode agent). */
          x->started_us = l != NULL ? l->connected_us : now_real;
          proxy_connected (p, s, x, l);
        }
      if (l == NULL && x->online)
        /* Its agent left: the job is about to end; see it end soon. */
        s->next_poll_us = MIN (s->next_poll_us, clock_mono (p) + G_USEC_PER_SEC / 2);
      if (x->online != (l != NULL))
        proxies_changed (s);
      x->online = l != NULL;
      x->free = l && l->slots > l->running ? (guint32) (l->slots - l->running) : 0;
      x->running = l ? (guint32) l->running : 0;
      x->starved = l != NULL && l->starved;
      x->expiring = is_expiring (s, x, now_real);

      if (x->cancelling || x->migrating)
        {
          s->alive++;
          continue;
        }
      /* An expiring proxy makes room for its replacement: it no longer
       * counts against max_proxies, its replacement does in its place.
       * Not a replacement whose own predecessor is still there.  Not in
       * direct mode: a proxy there is bound to its one task, nothing can
       * replace it, and max_jobs is a hard cap (per-user job limits). */
      if (p->mode == DATC_MODE_DIRECT || !x->expiring || x->replaces != NULL)
        s->alive++;
      if (x->online && x->expiring)
        s->running_expiring += x->running;
      else if (x->online && !x->starved)
        /* Slots where no queued task fits are no room for the work: counting
         * them would keep other sites from getting proxies while these
         * idle to their walltime and are replaced by more of the same. */
        s->free_running += x->free;
      else if (!x->expiring && !ever_connected (p, s, x))
        s->coming += x->slots;
    }
  /* Tasks a walltime is predicted to cut short, on any agent of the site
   * (ours or started by hand); none where no agent has a walltime. */
  gboolean walltimes = FALSE;
  for (guint i = 0; i < p->loads->len && !walltimes; i++)
    walltimes = g_array_index (p->loads, DatcAgentLoad, i).walltime_end_us > 0;
  /* A look at every running task: at most once per OUTLIVING_US (a plan
   * comes every DATC_PROVISIONER_PERIOD_MS), against walltimes of hours. */
  if (!walltimes)
    s->outliving = 0, s->outliving_us = 0;
  else if (s->outliving_us == 0 || now_real - s->outliving_us >= OUTLIVING_US)
    {
      s->outliving = datc_ledger_walltime_outliving (p->ledger, s->spec->name, now_real);
      s->outliving_us = now_real;
    }
  /* Tasks that a walltime may still interrupt: the site's idle agents
   * (the replacements submitted for them) stay until those tasks end or
   * come back, rather than leave because the bag is empty for now and
   * leave the returning tasks to wait for a new proxy. */
  datc_dispatcher_keep_idle (p->disp, s->spec->name, s->running_expiring > 0 || s->outliving > 0);
}

/* ---- plans ---------------------------------------------------------- */

/* The last n proxies of the site were just submitted: they count against
 * max_proxies, and each replaces the oldest expiring proxy that made room
 * and has no replacement yet.  Every such proxy gets its own: proxies
 * that started together are all replaced ahead of time. */
static void
count_submitted (SiteState *s, guint n)
{
  s->alive += n;
  for (guint f = s->proxies->len - n; f < s->proxies->len; f++)
    {
      Proxy *fresh = s->proxies->pdata[f];
      for (guint i = 0; i < s->proxies->len - n; i++)
        {
          Proxy *x = s->proxies->pdata[i];
          if (x->expiring && x->replaces == NULL && x->replaced_by == NULL && !x->cancelling)
            {
              x->replaced_by = fresh;
              fresh->replaces = x;
              break;
            }
        }
    }
}

static gboolean
can_submit (const SiteState *s, gint64 now)
{
  return now >= s->next_submit_us && s->alive < s->max_jobs;
}

/* Proxies of the site for `slots` more slots of work, at once (an array
 * where the scheduler has them), as far as max_proxies allows; returns
 * the slots submitted. */
static guint64
submit_for (DatcProvisioner *p, SiteState *s, guint64 slots, gint64 now)
{
  guint64 per = s->spec->slots_per_proxy, added = 0;
  while (added < slots && can_submit (s, now))
    {
      guint64 want = MIN ((slots - added + per - 1) / per, s->max_jobs - s->alive);
      guint n = submit_proxies (p, s, (guint) per, (guint) MIN (want, DATC_ARRAY_MAX), FALSE);
      if (n == 0)
        break;
      count_submitted (s, n);
      added += n * per;
    }
  return added;
}

/* A proxy's predicted wait in a site's queue: the QBETS bound on its
 * waits (this campaign's and earlier ones', waitcache.h) once there are
 * enough to bound it; until then 0, so an unknown site is tried (and its
 * waits learnt) rather than passed over. */
static double
predicted_wait_s (const SiteState *s)
{
  return s->wait_bound.index > 0 ? s->wait_bound.bound : 0;
}

static gint
by_predicted_start (gconstpointer a, gconstpointer b)
{
  const SiteState *x = *(SiteState *const *) a, *y = *(SiteState *const *) b;
  double wx = predicted_wait_s (x), wy = predicted_wait_s (y);
  if (wx != wy)
    return wx < wy ? -1 : 1;
  return x->index < y->index ? -1 : x->index > y->index; /* then the sites file's order */
}

/* A site still being prepared (agent and key going up) submits once that
 * is done, at worst after its command timeout: a site predicted to start
 * proxies later than that is not worth taking instead (G_MAXDOUBLE: the
 * site is not preparing).  Without it, which of two sites got the first
 * proxy would depend on whose preparation ended first. */
static double
ready_soon_s (const SiteState *s)
{
  if (s->prepared || !s->preparing)
    return G_MAXDOUBLE;
  return predicted_wait_s (s) + s->timeout_ms / 1000.0;
}

/* The sites, where a proxy is predicted to start soonest first (transfer
 * container). */
static GPtrArray *
sites_by_predicted_start (DatcProvisioner *p)
{
  GPtrArray *order = g_ptr_array_sized_new (p->sites->len);
  for (guint i = 0; i < p->sites->len; i++)
    g_ptr_array_add (order, p->sites->pdata[i]);
  g_ptr_array_sort (order, by_predicted_start);
  return order;
}

/* ---- migration of pending proxies ----------------------------------- */

/* How long a proxy of the site may stay queued before it moves. */
static double
migrate_bound_s (const SiteState *s)
{
  if (s->spec->migrate_after_s > 0)
    return s->spec->migrate_after_s;
  return s->wait_bound.index > 0 ? s->wait_bound.bound : DATC_MIGRATE_DEFAULT_S;
}

/* A site with room for another proxy now, predicted to start it sooner
 * than the proxy to move has already waited (past its site's bound, the
 * site says nothing of when it will start it: what it waited is the best
 * guess of what it still has to), and not itself holding a proxy queued
 * past its own bound; NULL: none. */
static SiteState *
migration_target (DatcProvisioner *p, SiteState *from, double waited, gint64 now, gint64 now_real)
{
  g_autoptr (GPtrArray) order = sites_by_predicted_start (p);
  for (guint i = 0; i < order->len; i++)
    {
      SiteState *t = order->pdata[i];
      if (t == from || t->health != HEALTH_OK || !can_submit (t, now)
          || predicted_wait_s (t) >= waited)
        continue;
      gboolean stuck = FALSE;
      for (guint k = 0; k < t->proxies->len && !stuck; k++)
        {
          Proxy *y = t->proxies->pdata[k];
          stuck = !y->cancelling && y->submitted_us > 0
                  && (now_real - y->submitted_us) / 1e6 > migrate_bound_s (t)
                  && !ever_connected (p, t, y);
        }
      if (!stuck)
        return t;
    }
  return NULL;
}

/* MyCluster's proxy migration, Nextflow's maxSubmitAwait made adaptive:
 * a proxy queued longer than its site's bound (the QBETS bound on the
 * site's waits, or migrate_after) while another site has room predicted
 * to start one sooner is cancelled and submitted there, within
 * max_proxies and both sites' call budgets; one move per site and tick.
 * Each move is traced (`proxy_migrated`) with its reason. */
static void
migrate (DatcProvisioner *p, gint64 now)
{
  gint64 now_real = clock_real (p);
  for (guint i = 0; i < p->sites->len; i++)
    {
      SiteState *s = p->sites->pdata[i];
      if (s->spec->migrate_after_s == DATC_MIGRATE_NEVER || s->cancelling)
        continue;
      double bound = migrate_bound_s (s), longest = 0;
      g_autoptr (GPtrArray) which = g_ptr_array_new ();
      for (guint k = 0; k < s->proxies->len; k++)
        {
          Proxy *x = s->proxies->pdata[k];
          double waited = (now_real - x->submitted_us) / 1e6;
          if (x->cancelling || x->migrating || x->job_id == NULL || x->submitted_us <= 0
              || waited <= bound || ever_connected (p, s, x))
            continue;
          g_ptr_array_add (which, x);
          longest = MAX (longest, waited);
        }
      SiteState *t = which->len > 0 ? migration_target (p, s, longest, now, now_real) : NULL;
      if (t == NULL)
        continue;
      /* As many as the target has room for, the longest waiting first
       * (the oldest submits come first in s->proxies), in one cancel. */
      g_ptr_array_set_size (which, MIN (which->len, t->max_jobs - t->alive));
      g_autofree gchar *why = g_strdup_printf (
          "queued %.0f s, over the site's bound of %.0f s; site %s has room and is predicted "
          "to start a proxy within %.0f s",
          longest, bound, t->spec->name, predicted_wait_s (t));
      if (!cancel_proxies (p, s, which, why, BUDGET_RESERVE))
        {
          /* Polls leave the cancel room next time (as for a submit). */
          s->calls_short = s->calls_per_minute > 0;
          continue;
        }
      guint slots = 0;
      for (guint k = 0; k < which->len; k++)
        {
          Proxy *x = which->pdata[k];
          x->migrating = TRUE;
          slots += x->slots;
        }
      guint64 submitted = submit_for (p, t, slots, now);
      for (guint k = 0; k < which->len; k++)
        {
          Proxy *x = which->pdata[k];
          double waited = (now_real - x->submitted_us) / 1e6;
          g_message ("site %s: proxy %s (job %s) moves to site %s: %s", s->spec->name, x->id,
                     x->job_id, t->spec->name, why);
          datc_trace_event (p->trace, "proxy_migrated", "site", 's', s->spec->name, "proxy", 's',
                            x->id, "job", 's', x->job_id, "to", 's', t->spec->name, "waited_s", 'd',
                            waited, "bound_s", 'd', bound, "submitted_slots", 'i',
                            (gint64) submitted, "reason", 's', why, NULL);
        }
    }
}

/* Pending proxies that may move: the site's polls keep a cancel's room
 * (its budget would otherwise be spent on polls of the very proxies that
 * wait, and the move put off until the window frees). */
static gboolean
may_migrate (DatcProvisioner *p, SiteState *s)
{
  if (p->mode != DATC_MODE_PULL || s->spec->migrate_after_s == DATC_MIGRATE_NEVER)
    return FALSE;
  for (guint k = 0; k < s->proxies->len; k++)
    {
      Proxy *x = s->proxies->pdata[k];
      if (!x->cancelling && !x->migrating && !ever_connected (p, s, x))
        return TRUE;
    }
  return FALSE;
}

/* No early release that costs a walltime.  The work left fits in the
 * running slots, so the site's pending proxies go; but a task expected to
 * run past its agent's walltime end comes back to the queue then, and
 * with no free slot of the site left to take it, it would wait a whole
 * queue wait for a fresh proxy (the model: pure pull losing to pull with
 * replication with 2-hour walltimes).  While such tasks outnumber the
 * free slots of the site's agents not near their end, one pending proxy
 * stays (the oldest, nearest the queue's head), or, with none pending,
 * one is submitted ahead; the site's idle agents are kept meanwhile
 * (observe), so the one that starts waits for those tasks instead of
 * leaving and being submitted again. */
static void
cancel_pending_but_one (DatcProvisioner *p, SiteState *s, gint64 now)
{
  guint keep = s->outliving > s->free_running ? 1 : 0;
  cancel_pending (p, s, "the work left fits in the running slots", BUDGET_RESERVE, keep);
  if (keep == 0)
    return;
  for (guint i = 0; i < s->proxies->len; i++)
    {
      Proxy *x = s->proxies->pdata[i];
      if (!x->online && !x->cancelling && !x->migrating && !ever_connected (p, s, x))
        return;
    }
  g_debug ("site %s: %" G_GUINT64_FORMAT " running tasks are expected to outlive their "
           "proxy's walltime: a proxy is submitted ahead",
           s->spec->name, s->outliving);
  submit_for (p, s, s->spec->slots_per_proxy, now);
}

/* Work that needs slots: queued tasks plus those running on agents whose
 * walltime is near (they will be drained back to the queue, or finish).
 * Tasks an agent took ahead of a free slot (prefetch) are not counted: no
 * other agent could get them, so a new proxy would not help them. */
static void
plan_pull (DatcProvisioner *p, gint64 now)
{
  migrate (p, now);
  guint64 demand = datc_ledger_unbound_queued (p->ledger), supply = 0, running = 0;
  for (guint i = 0; i < p->sites->len; i++)
    {
      SiteState *s = p->sites->pdata[i];
      demand += s->running_expiring;
      running += s->free_running;
      /* A degraded site's proxies may never start: do not wait for them. */
      supply += s->free_running + (s->health == HEALTH_OK ? s->coming : 0);
    }
  if (demand == 0 || demand <= running)
    {
      for (guint i = 0; i < p->sites->len; i++)
        cancel_pending_but_one (p, p->sites->pdata[i], now);
      return;
    }
  /* Healthy sites first, where proxies are predicted to start soonest. */
  g_autoptr (GPtrArray) order = sites_by_predicted_start (p);
  for (guint pass = 0; pass < 2 && demand > supply; pass++)
    {
      double beyond = G_MAXDOUBLE;
      for (guint i = 0; i < order->len && demand > supply; i++)
        {
          SiteState *s = order->pdata[i];
          if ((s->health == HEALTH_OK) != (pass == 0) || predicted_wait_s (s) > beyond)
            continue;
          supply += submit_for (p, s, demand - supply, now);
          beyond = MIN (beyond, ready_soon_s (s));
        }
    }
}

/* Each site on its own share only. */
static void
plan_static (DatcProvisioner *p, gint64 now)
{
  for (guint i = 0; i < p->sites->len; i++)
    {
      SiteState *s = p->sites->pdata[i];
      guint64 demand = datc_ledger_queued_in (p->ledger, s->index) + s->running_expiring;
      guint64 supply = s->free_running + s->coming;
      if (demand == 0 || demand <= s->free_running)
        {
          cancel_pending_but_one (p, s, now);
          continue;
        }
      if (demand > supply)
        submit_for (p, s, demand - supply, now);
    }
}

/* One single-slot proxy per task, bound to it at submission, up to
 * max_jobs (max_proxies x slots_per_proxy) queued or running per site. */
static void
plan_direct (DatcProvisioner *p, gint64 now)
{
  g_autoptr (GPtrArray) order = sites_by_predicted_start (p);
  for (guint pass = 0; pass < 2; pass++)
    {
      double beyond = G_MAXDOUBLE; /* as in plan_pull */
      for (guint i = 0; i < order->len; i++)
        {
          SiteState *s = order->pdata[i];
          if ((s->health == HEALTH_OK) != (pass == 0) || predicted_wait_s (s) > beyond)
            continue;
          while (can_submit (s, now))
            {
              /* Each proxy submitted binds the next queued task (submit_job). */
              guint k = (guint) MIN (MIN (s->max_jobs - s->alive, DATC_ARRAY_MAX),
                                     datc_ledger_unbound_queued (p->ledger));
              if (k == 0)
                break;
              guint n = submit_proxies (p, s, 1, k, TRUE);
              if (n == 0)
                break;
              count_submitted (s, n);
            }
          beyond = MIN (beyond, ready_soon_s (s));
        }
    }
}

/* Outcomes of site commands, as events on the loop; the plan looks at
 * them at once (a site just prepared wants its submit now, not at the
 * loop's next wake-up). */
static guint
collect (DatcProvisioner *p)
{
  guint n = 0;
  for (guint i = 0; i < p->sites->len; i++)
    n += datc_site_worker_collect (((SiteState *) p->sites->pdata[i])->worker, p);
  /* Those run here; not the ones their outcomes post in turn. */
  for (guint k = p->done_here != NULL ? g_queue_get_length (p->done_here) : 0; k > 0; k--, n++)
    {
      DoneHere *d = g_queue_pop_head (p->done_here);
      d->done (p, d->data);
      g_free (d);
    }
  if (n > 0)
    p->next_plan_us = 0;
  return n;
}

/* A command that outlives its timeout (and the transport's own grace)
 * means the login node does not answer: the site is degraded at once, not
 * after three failures, and recovers by itself when a command works. */
static void
check_hung (DatcProvisioner *p, SiteState *s, gint64 now)
{
  gint64 since = datc_site_worker_busy_since (s->worker);
  if (since == 0 || s->health == HEALTH_HUNG
      || now - since < (gint64) s->timeout_ms * 1000 + 5 * G_USEC_PER_SEC)
    return;
  g_autofree gchar *why = g_strdup_printf ("a command has not come back for %" G_GINT64_FORMAT
                                           " s (timeout %u s): the site does not answer",
                                           (now - since) / G_USEC_PER_SEC, s->timeout_ms / 1000);
  s->health = HEALTH_OK; /* so that site_failed marks it, whatever it was */
  site_failed (p, s, HEALTH_HUNG, DEGRADED_AFTER, why);
}

/* A proxy whose agent is connected proves it runs with every heartbeat:
 * the scheduler is asked about it only now and then (a job can be held or
 * its agent stuck), or as soon as its agent leaves or goes silent
 * (observe() brings the poll forward).  Proxies still waiting to start,
 * being cancelled, or adopted from an earlier master are polled at the
 * site's poll interval. */
#define LIVENESS_POLL_US (60 * G_USEC_PER_SEC)

static gboolean
needs_poll (SiteState *s, gint64 now)
{
  if (s->poll_stale)
    {
      s->poll_stale = FALSE;
      s->poll_unsettled = s->poll_any = FALSE;
      for (guint i = 0; i < s->proxies->len && !s->poll_unsettled; i++)
        {
          const Proxy *x = s->proxies->pdata[i];
          if (x->job_id == NULL)
            continue; /* its submit is out */
          if (!x->online || x->cancelling)
            s->poll_unsettled = TRUE;
          s->poll_any = TRUE;
        }
    }
  if (s->poll_unsettled)
    return TRUE;
  return s->poll_any && now - s->last_poll_us >= MAX (LIVENESS_POLL_US, 10 * s->poll_us);
}

void
datc_provisioner_poll_items (DatcProvisioner *p, GArray *items)
{
  for (guint i = 0; i < p->sites->len; i++)
    {
      zmq_pollitem_t it = { datc_site_worker_socket (((SiteState *) p->sites->pdata[i])->worker), 0,
                            ZMQ_POLLIN, 0 };
      g_array_append_val (items, it);
    }
}

void
datc_provisioner_tick (DatcProvisioner *p)
{
  collect (p);
  gint64 now = clock_mono (p);
  for (guint i = 0; i < p->sites->len; i++)
    {
      SiteState *s = p->sites->pdata[i];
      check_hung (p, s, g_get_monotonic_time ()); /* the worker's own clock */
      check_reach (p, s, now);
      lookup_submits (p, s, BUDGET_RESERVE);
      if (now >= s->next_poll_us)
        {
          s->next_poll_us = now + s->poll_us;
          if (needs_poll (s, now))
            {
              guint room = (s->calls_short ? 2 : 0) + (may_migrate (p, s) ? 1 : 0);
              if (poll_site (p, s, BUDGET_RESERVE + room))
                s->last_poll_us = now;
              else if (!s->polling)
                s->next_poll_us = now + G_USEC_PER_SEC; /* the budget: try again soon */
            }
        }
    }
  if (now < p->next_plan_us)
    {
      p->plan_due = TRUE;
      return;
    }
  p->plan_due = FALSE;
  p->next_plan_us = now + DATC_PROVISIONER_PERIOD_MS * 1000;

  gint64 now_real = clock_real (p);
  for (guint i = 0; i < p->sites->len; i++)
    {
      SiteState *s = p->sites->pdata[i];
      observe (p, s, now_real);
      s->calls_short = FALSE; /* the plan says again */
      /* A relay site's relay goes up at once, not at its first submit:
       * the agents of an earlier master's proxies come back through it
       * (a resumed campaign may submit nothing until they have). */
      if (s->spec->relay != NULL)
        (void) prepare_site (p, s);
    }
  switch (p->mode)
    {
    case DATC_MODE_PULL:
      plan_pull (p, now);
      break;
    case DATC_MODE_STATIC:
      plan_static (p, now);
      break;
    case DATC_MODE_DIRECT:
      plan_direct (p, now);
      break;
    }
}

int
datc_provisioner_next_timeout_ms (DatcProvisioner *p)
{
  gint64 now = clock_mono (p), next = G_MAXINT64;
  if (p->plan_due)
    next = p->next_plan_us;
  for (guint i = 0; i < p->sites->len; i++)
    {
      SiteState *s = p->sites->pdata[i];
      if (!s->polling && needs_poll (s, now))
        next = MIN (next, s->next_poll_us);
    }
  if (next == G_MAXINT64)
    return -1;
  return next <= now ? 0 : (int) MIN ((next - now + 999) / 1000, (gint64) G_MAXINT);
}

guint
datc_provisioner_alive (DatcProvisioner *p)
{
  guint n = 0;
  for (guint i = 0; i < p->sites->len; i++)
    n += ((SiteState *) p->sites->pdata[i])->proxies->len;
  return n;
}

/* What each site was asked, for comparing modes and policies. */
static void
trace_commands (DatcProvisioner *p)
{
  for (guint i = 0; i < p->sites->len; i++)
    {
      SiteState *s = p->sites->pdata[i];
      datc_trace_event (p->trace, "site_commands", "site", 's', s->spec->name, "submit", 'i',
                        (gint64) s->n_submit, "poll", 'i', (gint64) s->n_poll, "cancel", 'i',
                        (gint64) s->n_cancel, "put", 'i', (gint64) s->n_put, "lookup", 'i',
                        (gint64) s->n_lookup, NULL);
    }
}

typedef struct {
  SiteState *s;
  guint command_ms;
  gchar *key_file;
  gchar *said; /* out: why not */
  GError *error;
} KeyJob;

static void
key_run (DatcSite *site, gpointer data)
{
  KeyJob *j = data;
  const char *argv[] = { "rm", "-f", "--", j->key_file, NULL };
  DatcCommandResult res = { 0 };
  datc_site_set_command_timeout (site, j->command_ms);
  if (j->s->site_calls->run (site, argv, &res, &j->error) && res.exit_status != 0)
    j->said = res.err != NULL && g_bytes_get_size (res.err) > 0
                  ? g_strstrip (
                        g_strndup (g_bytes_get_data (res.err, NULL), g_bytes_get_size (res.err)))
                  : g_strdup ("rm failed");
  datc_command_result_clear (&res);
}

static void
key_done (gpointer owner, gpointer data)
{
  DatcProvisioner *p = owner;
  KeyJob *j = data;
  p->keys_out--;
  if (j->error == NULL && j->said == NULL)
    j->s->prepared = FALSE;
  else
    g_warning ("site %s: could not remove the agent key %s: %s", j->s->spec->name, j->key_file,
               j->error != NULL ? j->error->message : j->said);
  g_clear_error (&j->error);
  g_free (j->said);
  g_free (j->key_file);
  g_free (j);
}

/* The files of proxies that ended well, removed from the site's workdir
 * in one command (datc_site_remove_files), on its worker. */
typedef struct {
  SiteState *s;
  guint command_ms;
  gchar *workdir;
  GStrv names;
  GError *error;
} RemoveJob;

static void
remove_run (DatcSite *site, gpointer data)
{
  RemoveJob *j = data;
  datc_site_set_command_timeout (site, j->command_ms);
  datc_site_remove_files (site, j->workdir, (const char *const *) j->names, &j->error);
}

static void
remove_done (gpointer owner, gpointer data)
{
  DatcProvisioner *p = owner;
  RemoveJob *j = data;
  p->removals_out--;
  if (j->error != NULL)
    g_warning ("site %s: could not remove the scripts and logs of %u proxies that ended well: %s",
               j->s->spec->name, g_strv_length (j->names), j->error->message);
  g_clear_error (&j->error);
  g_free (j->workdir);
  g_strfreev (j->names);
  g_free (j);
}

static void
remove_spent (DatcProvisioner *p, SiteState *s)
{
  if (s->spent->len == 0)
    return;
  RemoveJob *j = g_new0 (RemoveJob, 1);
  j->s = s;
  j->command_ms = s->command_ms;
  j->workdir = g_strdup (s->spec->workdir);
  g_ptr_array_add (s->spent, NULL);
  j->names = (GStrv) g_ptr_array_steal (s->spent, NULL);
  p->removals_out++;
  post (p, s, remove_run, remove_done, j);
}

/* No command may outlast the shutdown's deadline by more than its own
 * retry: each gets the time left (at least a second, at most the usual
 * timeout). */
static void
bound_commands (DatcProvisioner *p, gint64 deadline)
{
  gint64 left_ms = (deadline - g_get_monotonic_time ()) / 1000;
  for (guint i = 0; i < p->sites->len; i++)
    {
      SiteState *s = p->sites->pdata[i];
      s->command_ms = (guint) CLAMP (left_ms, 1000, (gint64) s->timeout_ms);
    }
}

/* Submits still out, and those of an earlier master still to be looked
 * up: each may yet bring back a job to cancel. */
static guint
submits_out (DatcProvisioner *p)
{
  guint n = 0;
  for (guint i = 0; i < p->sites->len; i++)
    {
      SiteState *s = p->sites->pdata[i];
      n += s->submitting + s->lookups->len;
    }
  return n;
}

/* Waits up to `wait_us` (and never past `deadline`) for a site command to
 * come back, and takes what came. */
static void
wait_for_sites (DatcProvisioner *p, gint64 wait_us, gint64 deadline)
{
  g_autoptr (GArray) items = g_array_new (FALSE, FALSE, sizeof (zmq_pollitem_t));
  datc_provisioner_poll_items (p, items);
  if (p->serve_items != NULL)
    g_array_append_vals (items, p->serve_items->data, p->serve_items->len);
  gint64 left = MIN (wait_us, deadline - g_get_monotonic_time ());
  if (left > 0)
    zmq_poll ((zmq_pollitem_t *) items->data, (int) items->len, (long) ((left + 999) / 1000));
  if (p->serve != NULL)
    p->serve (p->serve_data);
  collect (p);
}

void
datc_provisioner_serve_while_waiting (DatcProvisioner *p, const zmq_pollitem_t *items,
                                      guint n_items, void (*serve) (gpointer data), gpointer data)
{
  g_clear_pointer (&p->serve_items, g_array_unref);
  p->serve = serve;
  p->serve_data = data;
  if (serve == NULL)
    return;
  p->serve_items = g_array_new (FALSE, FALSE, sizeof (zmq_pollitem_t));
  g_array_append_vals (p->serve_items, items, n_items);
}

/* With its proxies gone no agent needs the site's key: the dispatcher
 * refuses it from then on, and it is not left behind in the workdir (a
 * resumed campaign accepts it again and puts it again at its first
 * submit).  A site where proxies are left keeps it (their agents
 * need it), and says so.  The scripts and logs of proxies that ended well
 * go too (proxy_spent), those of failed ones stay for whoever debugs.
 * All sites at once, each on its worker. */
static gboolean
remove_keys (DatcProvisioner *p, gint64 deadline)
{
  for (guint i = 0; i < p->sites->len; i++)
    remove_spent (p, p->sites->pdata[i]);
  gboolean all = TRUE;
  for (guint i = 0; i < p->sites->len; i++)
    {
      SiteState *s = p->sites->pdata[i];
      DatcSiteSpec *sp = s->spec;
      /* Done with: no agent of it may come (or stay) any more, whatever
       * becomes of the file on the site. */
      if (s->proxies->len == 0)
        datc_dispatcher_revoke_site (p->disp, sp->name);
      if (!s->prepared || sp->key_data == NULL)
        continue;
      if (s->proxies->len > 0)
        {
          g_warning ("site %s: the agent key %s stays there: %u proxies left need it", sp->name,
                     sp->key_file, s->proxies->len);
          all = FALSE;
          continue;
        }
      KeyJob *j = g_new0 (KeyJob, 1);
      j->s = s;
      j->command_ms = s->command_ms;
      j->key_file = g_strdup (sp->key_file);
      p->keys_out++;
      post (p, s, key_run, key_done, j);
    }
  /* Behind a command that hangs a removal never comes: said below. */
  while ((p->keys_out > 0 || p->removals_out > 0) && g_get_monotonic_time () < deadline)
    wait_for_sites (p, 200 * 1000, deadline);
  for (guint i = 0; i < p->sites->len; i++)
    {
      SiteState *s = p->sites->pdata[i];
      if (s->prepared && s->spec->key_data != NULL && s->proxies->len == 0)
        {
          if (datc_site_worker_busy_since (s->worker) != 0)
            g_warning ("site %s: the agent key %s may still be there: the site did not answer "
                       "in time",
                       s->spec->name, s->spec->key_file);
          all = FALSE;
        }
    }
  return all;
}

gboolean
datc_provisioner_shutdown (DatcProvisioner *p, const char *why, guint timeout_ms)
{
  gint64 deadline = g_get_monotonic_time () + (gint64) timeout_ms * 1000;
  gint64 cancel_at = g_get_monotonic_time () + 2 * G_USEC_PER_SEC;
  gint64 wait_us = 2000;

  /* A proxy whose agent never connected (queued, or an earlier master's)
   * will not end on its own: cancelled at once (and any a submit still
   * out brings back).  Agents were told BYE: most other proxies end on
   * their own within milliseconds.  Polls with growing waits between
   * them; what is still there after two seconds is cancelled, and again
   * every five while anything is left (a cancel that failed, or one the
   * scheduler did not act on).  Every site at once, on its worker. */
  for (guint i = 0; i < p->sites->len; i++)
    ((SiteState *) p->sites->pdata[i])->next_poll_us = 0;
  for (;;)
    {
      bound_commands (p, deadline);
      collect (p);
      gint64 now = g_get_monotonic_time ();
      for (guint i = 0; i < p->sites->len; i++)
        {
          SiteState *s = p->sites->pdata[i];
          lookup_submits (p, s, 0);
          cancel_pending (p, s, why, 0, 0);
          /* A site with a budget is asked at most twice a second: its
           * proxies take that long to leave the queue anyway. */
          if (now >= s->next_poll_us && poll_site (p, s, 0))
            s->next_poll_us
                = now + (s->calls_per_minute > 0 ? MAX (wait_us, G_USEC_PER_SEC / 2) : wait_us);
        }
      if (datc_provisioner_alive (p) == 0 && submits_out (p) == 0)
        break;
      if (now >= deadline)
        break;
      if (now >= cancel_at)
        {
          for (guint i = 0; i < p->sites->len; i++)
            {
              SiteState *s = p->sites->pdata[i];
              g_autoptr (GPtrArray) which = g_ptr_array_new ();
              for (guint j = 0; j < s->proxies->len; j++)
                g_ptr_array_add (which, s->proxies->pdata[j]);
              cancel_proxies (p, s, which, why, 0);
            }
          cancel_at = now + 5 * G_USEC_PER_SEC;
        }
      wait_for_sites (p, wait_us, deadline);
      wait_us = MIN (wait_us * 2, 200 * 1000);
    }
  for (guint i = 0; i < p->sites->len; i++)
    {
      SiteState *s = p->sites->pdata[i];
      for (guint j = 0; j < s->proxies->len; j++)
        {
          Proxy *x = s->proxies->pdata[j];
          g_warning ("site %s: proxy %s (job %s) is still there after %u s", s->spec->name, x->id,
                     x->job_id ? x->job_id : "not known: its submit did not come back",
                     timeout_ms / 1000);
        }
    }
  gboolean looked_up = TRUE;
  for (guint i = 0; i < p->sites->len; i++)
    {
      SiteState *s = p->sites->pdata[i];
      for (guint j = 0; j < s->lookups->len; j++)
        {
          g_auto (GStrv) f = g_strsplit (s->lookups->pdata[j], "\t", 2);
          g_warning ("site %s: a submit of an earlier run could not be looked up: jobs named "
                     "datc-%s may still be there",
                     s->spec->name, f[0]);
          looked_up = FALSE;
        }
    }
  bound_commands (p, deadline);
  gboolean clean = remove_keys (p, deadline) && datc_provisioner_alive (p) == 0 && looked_up;
  trace_commands (p);
  return clean;
}

/* ---- a campaign no site can run -------------------------------------- */

gboolean
datc_provisioner_cannot_run (DatcProvisioner *p, gchar **why)
{
  /* A busy cluster is not a broken one: only degraded sites count (a site
   * whose proxies wait in a queue is healthy), and a single agent
   * connected anywhere means the campaign runs. */
  DatcLedgerCounts c;
  datc_ledger_counts (p->ledger, &c);
  gboolean stuck = p->give_up_s > 0 && p->sites->len > 0 && c.queued > 0
                   && datc_dispatcher_agents (p->disp) == 0;
  for (guint i = 0; i < p->sites->len && stuck; i++)
    stuck = ((SiteState *) p->sites->pdata[i])->health != HEALTH_OK;
  gint64 now = clock_mono (p);
  if (!stuck)
    {
      p->stuck_since_us = 0;
      return FALSE;
    }
  if (p->stuck_since_us == 0)
    p->stuck_since_us = now;
  if (now - p->stuck_since_us < (gint64) p->give_up_s * G_USEC_PER_SEC)
    return FALSE;
  g_autofree gchar *wait = human_duration (p->give_up_s);
  GString *text = g_string_new (NULL);
  g_string_printf (text,
                   "no site can run the campaign: every site has been degraded for %s "
                   "with no agent connected (give_up_after in [master] of the sites file, or "
                   "--give-up-after); fix the sites and run the same command again to resume:",
                   wait);
  for (guint i = 0; i < p->sites->len; i++)
    {
      SiteState *s = p->sites->pdata[i];
      g_autofree gchar *own = g_strdup_printf ("site %s: ", s->spec->name);
      const char *last = s->last_error ? s->last_error : "(no message)";
      if (g_str_has_prefix (last, own))
        last += strlen (own); /* the driver's errors name the site already */
      g_auto (GStrv) lines = g_strsplit (last, "\n", -1);
      g_autofree gchar *error = g_strjoinv ("\n    ", lines);
      g_string_append_printf (text, "\n  site %s: %s", s->spec->name, error);
    }
  *why = g_string_free (text, FALSE);
  return TRUE;
}

/* ---- status --------------------------------------------------------- */

static void
member_int (JsonBuilder *b, const char *name, gint64 v)
{
  json_builder_set_member_name (b, name);
  json_builder_add_int_value (b, v);
}

/* "queue_wait_bound": {quantile, confidence, observations, needed,
 * bound_s (null until `needed` waits are known)}. */
static void
describe_wait_bound (JsonBuilder *b, const SiteState *s)
{
  json_builder_set_member_name (b, "queue_wait_bound");
  json_builder_begin_object (b);
  json_builder_set_member_name (b, "quantile");
  json_builder_add_double_value (b, WAIT_BOUND_Q);
  json_builder_set_member_name (b, "confidence");
  json_builder_add_double_value (b, WAIT_BOUND_C);
  member_int (b, "observations", s->all_waits->len);
  member_int (b, "needed", (gint64) datc_qbets_needed (WAIT_BOUND_Q, WAIT_BOUND_C));
  json_builder_set_member_name (b, "bound_s");
  if (s->wait_bound.index > 0)
    json_builder_add_double_value (b, s->wait_bound.bound);
  else
    json_builder_add_null_value (b);
  json_builder_end_object (b);
}

static void
describe_site (DatcProvisioner *p, SiteState *s, JsonBuilder *b)
{
  guint running = 0, expiring = 0, queued = 0;
  /* Proxies the scheduler last said are pending (and whose agent is not
   * here), counted by the reason it gave. */
  g_autoptr (GHashTable) reasons = g_hash_table_new (g_str_hash, g_str_equal);
  for (guint i = 0; i < s->proxies->len; i++)
    {
      Proxy *x = s->proxies->pdata[i];
      running += x->online;
      expiring += x->expiring;
      if (x->queued && !x->online)
        {
          queued++;
          guint seen = GPOINTER_TO_UINT (
              x->reason != NULL ? g_hash_table_lookup (reasons, x->reason) : NULL);
          if (x->reason != NULL)
            g_hash_table_insert (reasons, x->reason, GUINT_TO_POINTER (seen + 1));
        }
    }
  guint alive = s->proxies->len;
  json_builder_begin_object (b);
  json_builder_set_member_name (b, "name");
  json_builder_add_string_value (b, s->spec->name);
  json_builder_set_member_name (b, "state");
  json_builder_add_string_value (b, s->health == HEALTH_OK ? "ok" : "degraded");
  json_builder_set_member_name (b, "last_error");
  if (s->last_error != NULL)
    json_builder_add_string_value (b, s->last_error);
  else
    json_builder_add_null_value (b);
  member_int (b, "proxies", alive);
  member_int (b, "proxies_pending", alive - MIN (running, alive));
  member_int (b, "proxies_running", running);
  member_int (b, "proxies_expiring", expiring);
  member_int (b, "proxies_queued", queued);
  json_builder_set_member_name (b, "pending_reasons");
  json_builder_begin_object (b);
  GHashTableIter it;
  gpointer reason, count;
  g_hash_table_iter_init (&it, reasons);
  while (g_hash_table_iter_next (&it, &reason, &count))
    member_int (b, reason, GPOINTER_TO_UINT (count));
  json_builder_end_object (b);
  member_int (b, "agents", datc_dispatcher_site_agents (p->disp, s->spec->name, NULL));
  member_int (b, "slots_per_proxy", s->spec->slots_per_proxy);
  member_int (b, "max_proxies", s->spec->max_proxies);
  member_int (b, "done", (gint64) datc_dispatcher_site_done (p->disp, s->spec->name));
  /* Hosts where tasks kept failing fast, and, if the scheduler cannot
   * keep proxies off them, why. */
  const char *const *excluded = datc_dispatcher_excluded_hosts (p->disp, s->spec->name);
  json_builder_set_member_name (b, "excluded_hosts");
  json_builder_begin_array (b);
  for (guint i = 0; excluded != NULL && excluded[i] != NULL; i++)
    json_builder_add_string_value (b, excluded[i]);
  json_builder_end_array (b);
  const char *no_exclude = NULL;
  if (excluded != NULL
      && !datc_scheduler_can_exclude_hosts (datc_site_scheduler_name (s->spec->site), &no_exclude))
    {
      json_builder_set_member_name (b, "exclusion_ignored");
      json_builder_add_string_value (b, no_exclude);
    }
  if (p->mode == DATC_MODE_STATIC)
    member_int (b, "queued", (gint64) datc_ledger_queued_in (p->ledger, s->index));
  member_int (b, "submit_failures", s->failures);
  member_int (b, "proxies_died_early", s->early_deaths_total);
  member_int (b, "proxies_submitted", s->submitted_total);
  member_int (b, "proxies_cancelled", s->cancelled_total);
  guint64 calls = s->n_submit + s->n_poll + s->n_cancel + s->n_lookup;
  member_int (b, "commands", (gint64) (calls + s->n_put + s->n_log));
  /* What the site's admins see of us: scheduler commands (not the puts),
   * per kind, and per 1,000 tasks done there (null until one is). */
  member_int (b, "scheduler_calls", (gint64) calls);
  json_builder_set_member_name (b, "commands_by_kind");
  json_builder_begin_object (b);
  member_int (b, "submit", (gint64) s->n_submit);
  member_int (b, "poll", (gint64) s->n_poll);
  member_int (b, "cancel", (gint64) s->n_cancel);
  member_int (b, "put", (gint64) s->n_put);
  member_int (b, "lookup", (gint64) s->n_lookup);
  member_int (b, "log", (gint64) s->n_log);
  json_builder_end_object (b);
  /* What an agent's log said of reaching the master ("ENDPOINT: WHY"),
   * until one of the site's agents connects. */
  json_builder_set_member_name (b, "agents_cannot_reach");
  if (s->unreachable != NULL)
    json_builder_add_string_value (b, s->unreachable);
  else
    json_builder_add_null_value (b);
  /* reach = relay: its session to the login node, null for a direct site. */
  json_builder_set_member_name (b, "relay");
  if (s->spec->relay != NULL)
    {
      DatcRelayState rs;
      datc_relay_state (s->spec->relay, &rs);
      json_builder_begin_object (b);
      json_builder_set_member_name (b, "state");
      json_builder_add_string_value (b, rs.up        ? "up"
                                        : rs.started ? "re-establishing"
                                                     : "not started");
      json_builder_set_member_name (b, "endpoint");
      if (rs.endpoint != NULL)
        json_builder_add_string_value (b, rs.endpoint);
      else
        json_builder_add_null_value (b);
      member_int (b, "sessions", rs.sessions);
      member_int (b, "connections", rs.conns);
      member_int (b, "connections_total", (gint64) rs.conns_total);
      member_int (b, "bytes_to_master", (gint64) rs.bytes_to_master);
      member_int (b, "bytes_to_agents", (gint64) rs.bytes_to_agents);
      json_builder_set_member_name (b, "last_error");
      if (rs.last_error != NULL)
        json_builder_add_string_value (b, rs.last_error);
      else
        json_builder_add_null_value (b);
      json_builder_end_object (b);
      datc_relay_state_clear (&rs);
    }
  else
    json_builder_add_null_value (b);
  json_builder_set_member_name (b, "max_calls_per_minute");
  if (s->calls_per_minute > 0)
    json_builder_add_int_value (b, s->calls_per_minute);
  else
    json_builder_add_null_value (b);
  member_int (b, "calls_last_minute", calls_last_minute (p, s));
  /* The plan wants a proxy here and waits for the budget. */
  json_builder_set_member_name (b, "waiting_for_calls");
  json_builder_add_boolean_value (b, s->calls_short);
  guint64 done = datc_dispatcher_site_done (p->disp, s->spec->name);
  json_builder_set_member_name (b, "scheduler_calls_per_1000_tasks");
  if (done > 0)
    json_builder_add_double_value (b, 1000.0 * (double) calls / (double) done);
  else
    json_builder_add_null_value (b);
  json_builder_set_member_name (b, "queue_wait_s");
  json_builder_add_double_value (b, queue_wait_us (s) / 1e6);
  describe_wait_bound (b, s);
  json_builder_end_object (b);
}

void
datc_provisioner_describe (DatcProvisioner *p, JsonBuilder *b)
{
  json_builder_set_member_name (b, "mode");
  json_builder_add_string_value (b, datc_mode_name (p->mode));
  json_builder_set_member_name (b, "sites");
  json_builder_begin_array (b);
  for (guint i = 0; i < p->sites->len; i++)
    describe_site (p, p->sites->pdata[i], b);
  json_builder_end_array (b);
}
