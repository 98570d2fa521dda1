/* bench-scale.c: issue 17's cost curves.  For each (tasks, agents) point a
 * campaign of ~44-byte null commands runs with --exec none against that
 * many datc-agent processes, and the master's costs are printed: wall
 * time, tasks/s, CPU per task and peak RSS (wait4 of `datc run`), journal
 * bytes per task, how fast the task file loads (start to
 * `campaign_started` in trace.jsonl) and how long `datc status DIR` takes
 * (asked every --status-ms while the master lives, the first after a fifth
 * of that), the command and the same question from a thread of this
 * process (the master's answer without the command's start).  Then, for the largest task count, a
 * master killed with SIGKILL half way and started again: how fast the journal replays. Nothing here
 * asserts.  By hand (see benchmarks/README.md):
 *
 *   DATC=... DATC_AGENT=... bench-scale [--tasks 10000,100000,1000000]
 *       [--agents 1,10,100,1000] [--transport ipc|tcp-curve] [--slots 64] [--agents-cpu CPU]
 *       [--repeat 1] [--status-ms 250] [--timeout 900] [--no-resume] [--svg DIR]
 *
 * The agents are started before the master, so that they are all waiting
 * when it binds (otherwise a short campaign ends before the last of 1,000
 * agents has connected).  On ipc the campaign directory is made here (the
 * socket goes into it) and N-1 agents are started here, the master's own
 * local agent being the Nth (only the local site gets an ipc socket).  On
 * tcp-curve all N are, against a free loopback port, with the campaign's
 * keys made here (keys/master.key and keys/agents/default.key, which
 * `datc run` keeps when they exist).  An agent is ready when it has said
 * it cannot reach the master yet.  A master still running after --timeout
 * is killed, and its point printed as failed.
 *
 * --agents-cpu CPU puts the agents on that CPU alone and this process, the
 * master and every `datc status` on the others, as a head node whose
 * agents run on other hosts would be: the master's figures and the
 * command's time without 1,000 agent processes competing for their cores
 * (by default all share every CPU, the worst case).
 *
 * DATC_AGENT should be datc-agent-static (-Dstatic_agent=true), as the
 * issue asks and as a site that uploads the agent runs it: a dynamically
 * linked agent maps some 20 shared libraries, and 1,000 processes mapping
 * the master's own libc, libzmq and glib are not what a head node whose
 * agents run elsewhere sees (benchmarks/README.md, "Static agents").
 * The header says which it is, and warns at 100 agents or more.
 *
 * Every process started here is ended by pid (SIGKILL on SIGINT/SIGTERM). */
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <glib.h>
#include <glib/gstdio.h>
#include <math.h>
#include <netinet/in.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "benchlib.h"
#include "control.h"
#include "curve.h"
#include "svgplot.h"

extern char **environ;

/* 1 when the ELF file at PATH asks for a program interpreter (dynamically
 * linked), 0 when it does not (static), -1 when it cannot be read as a
 * 64-bit ELF file. */
static int
elf_is_dynamic (const char *path)
{
  int fd = open (path, O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    return -1;
  Elf64_Ehdr eh;
  int dynamic = -1;
  if (pread (fd, &eh, sizeof eh, 0) == (ssize_t) sizeof eh
      && memcmp (eh.e_ident, ELFMAG, SELFMAG) == 0 && eh.e_ident[EI_CLASS] == ELFCLASS64
      && eh.e_phentsize == sizeof (Elf64_Phdr) && eh.e_phnum < 256)
    {
      dynamic = 0;
      for (guint i = 0; i < eh.e_phnum; i++)
        {
          Elf64_Phdr ph;
          if (pread (fd, &ph, sizeof ph, (off_t) (eh.e_phoff + i * sizeof ph))
              != (ssize_t) sizeof ph)
            {
              dynamic = -1;
              break;
            }
          if (ph.p_type == PT_INTERP)
            dynamic = 1;
        }
    }
  close (fd);
  return dynamic;
}

typedef struct {
  gboolean tcp;         /* tcp-curve on loopback, else ipc */
  int agents_cpu;       /* the one CPU the agents run on (the rest: everything else), or -1 */
  guint slots;          /* per agent */
  guint status_ms;      /* between two `datc status` */
  guint timeout_s;      /* a master still running after this is killed */
  gboolean evict_front; /* drop `datc`'s unmapped pages before each status */
  const char *datc, *agent, *tmp;
} Bench;

typedef struct {
  gint64 start_real; /* when it was asked (g_get_real_time) */
  double ms;
  long majflt; /* the command's major page faults: its pages read from the disk (-1: in-process) */
  /* The command's CPU (all its threads), the time its main thread waited
   * for a CPU while runnable, and how often it was preempted (all its
   * threads): where its wall time went.  NAN and -1 in-process. */
  double cpu_ms, queued_ms;
  long preempted;
} StatusSample;

typedef struct {
  guint64 tasks;
  guint agents, run;
  int exit_status;
  double loadavg; /* 1-minute, at the start of the point (counts our agents too) */
  double others;  /* CPU of everything but our children meanwhile, in cores */
  double wall_s, cpu_s;
  long maxrss_kib;
  guint connected;  /* agent_connected events */
  double load_s;    /* `datc run` started to campaign_started */
  double connect_s; /* campaign_started to the last agent's HELLO */
  double rate;      /* tasks / (campaign_finished - campaign_started) */
  double rate_all;  /* tasks/s finished once every agent was connected */
  double share_all; /* of the tasks, those */
  guint64 journal_bytes;
  GArray *samples;                           /* StatusSample: answered while the master lived */
  GArray *asked;                             /* StatusSample: the in-process asker's (Asker) */
  gint64 t_started, t_connected, t_finished; /* trace.jsonl: campaign_started, the last
                                              * agent_connected, campaign_finished */
  double status_load_max;                    /* the slowest asked before campaign_started */
  double status_med, status_max;
  double asked_med, asked_max;
} Point;

/* ---- processes ---------------------------------------------------- */

/* Every pid started and not reaped yet, for the signal handler. */
static GArray *live_pids;

static void
on_signal (int sig)
{
  for (guint i = 0; live_pids != NULL && i < live_pids->len; i++)
    kill (g_array_index (live_pids, pid_t, i), SIGKILL);
  signal (sig, SIG_DFL);
  raise (sig);
}

static void
forget_pid (pid_t pid)
{
  for (guint i = 0; i < live_pids->len; i++)
    if (g_array_index (live_pids, pid_t, i) == pid)
      {
        g_array_remove_index_fast (live_pids, i);
        return;
      }
}

/* argv with stdin from /dev/null, stdout and stderr appended to `log`
 * (NULL: /dev/null). */
static pid_t
spawn (const char *const *argv, const char *log)
{
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init (&fa);
  posix_spawn_file_actions_addopen (&fa, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_addopen (&fa, 1, log ? log : "/dev/null", O_WRONLY | O_CREAT | O_APPEND,
                                    0600);
  posix_spawn_file_actions_adddup2 (&fa, 1, 2);
  pid_t pid;
  int rc = posix_spawn (&pid, argv[0], &fa, NULL, (char *const *) argv, environ);
  posix_spawn_file_actions_destroy (&fa);
  if (rc != 0)
    {
      fprintf (stderr, "bench-scale: cannot run %s: %s\n", argv[0], g_strerror (rc));
      exit (1);
    }
  g_array_append_val (live_pids, pid);
  return pid;
}

static int
pidfd_of (pid_t pid)
{
  int fd = (int) syscall (SYS_pidfd_open, pid, 0);
  if (fd < 0)
    {
      fprintf (stderr, "bench-scale: pidfd_open %d: %s\n", (int) pid, g_strerror (errno));
      exit (1);
    }
  return fd;
}

static void
reap (pid_t pid, struct rusage *ru, int *status)
{
  int st;
  struct rusage r;
  while (wait4 (pid, &st, 0, &r) < 0 && errno == EINTR)
    ;
  forget_pid (pid);
  if (ru)
    *ru = r;
  if (status)
    *status = WIFEXITED (st) ? WEXITSTATUS (st) : 128 + WTERMSIG (st);
}

/* Waits up to `grace_ms` for the agents to leave (they do on the master's
 * BYE), then kills those left. */
static void
end_agents (GArray *pids, guint grace_ms)
{
  gint64 deadline = g_get_monotonic_time () + grace_ms * 1000;
  guint left = pids->len;
  while (left > 0 && g_get_monotonic_time () < deadline)
    {
      left = 0;
      for (guint i = 0; i < pids->len; i++)
        {
          pid_t *p = &g_array_index (pids, pid_t, i);
          if (*p == 0)
            continue;
          if (waitpid (*p, NULL, WNOHANG) == *p)
            {
              forget_pid (*p);
              *p = 0;
            }
          else
            left++;
        }
      if (left > 0)
        g_usleep (10000);
    }
  for (guint i = 0; i < pids->len; i++)
    {
      pid_t p = g_array_index (pids, pid_t, i);
      if (p != 0)
        {
          kill (p, SIGKILL);
          reap (p, NULL, NULL);
        }
    }
  g_array_set_size (pids, 0);
}

/* This process is a child subreaper: the local agent the master's fork
 * site detaches comes back here when it outlives its master (kill -9).
 * Any child we did not start is such an agent: killed by pid, reaped. */
static void
end_strays (void)
{
  g_autoptr (GDir) proc = g_dir_open ("/proc", 0, NULL);
  const char *name;
  while (proc != NULL && (name = g_dir_read_name (proc)) != NULL)
    {
      pid_t pid = (pid_t) g_ascii_strtoll (name, NULL, 10);
      if (pid <= 0)
        continue;
      g_autofree gchar *path = g_strdup_printf ("/proc/%d/stat", (int) pid);
      g_autofree gchar *stat = NULL;
      if (!g_file_get_contents (path, &stat, NULL, NULL))
        continue;
      const char *end = strrchr (stat, ')');
      int ppid = 0;
      char state;
      if (end == NULL || sscanf (end + 1, " %c %d", &state, &ppid) != 2 || ppid != getpid ())
        continue;
      gboolean ours = FALSE;
      for (guint i = 0; i < live_pids->len; i++)
        ours |= g_array_index (live_pids, pid_t, i) == pid;
      if (ours)
        continue;
      kill (pid, SIGKILL);
      waitpid (pid, NULL, 0);
    }
}

/* ---- the campaign's files ----------------------------------------- */

static guint
count_in_file (const char *path, const char *needle)
{
  g_autofree gchar *text = NULL;
  if (!g_file_get_contents (path, &text, NULL, NULL))
    return 0;
  guint n = 0;
  for (const char *p = text; (p = strstr (p, needle)) != NULL; p += strlen (needle))
    n++;
  return n;
}

typedef struct {
  gint64 started[2]; /* the first two campaign_started */
  guint n_started;
  gint64 finished;
  gint64 nth_connect; /* the want-th agent_connected, else the last */
  guint connected;
} Trace;

static void
read_trace (const char *dir, guint want, Trace *t)
{
  g_autofree gchar *path = g_build_filename (dir, "trace.jsonl", NULL);
  g_autofree gchar *text = NULL;
  memset (t, 0, sizeof *t);
  if (!g_file_get_contents (path, &text, NULL, NULL))
    return;
  for (char *line = text, *next; line && *line; line = next)
    {
      next = strchr (line, '\n');
      if (next)
        *next++ = '\0';
      const char *tp = strstr (line, "\"time\":");
      gint64 time = tp ? g_ascii_strtoll (tp + 7, NULL, 10) : 0;
      if (strstr (line, "\"event\":\"campaign_started\""))
        {
          if (t->n_started < 2)
            t->started[t->n_started] = time;
          t->n_started++;
        }
      else if (strstr (line, "\"event\":\"campaign_finished\""))
        t->finished = time;
      else if (strstr (line, "\"event\":\"agent_connected\""))
        {
          if (++t->connected <= want)
            t->nth_connect = time;
        }
    }
}

/* Results whose `finished` (the agent's clock: this machine's) is at or
 * after `since`. */
static guint64
results_since (const char *dir, gint64 since)
{
  g_autofree gchar *path = g_build_filename (dir, "results.jsonl", NULL);
  FILE *f = fopen (path, "r");
  if (f == NULL)
    return 0;
  static char buf[1 << 20];
  setvbuf (f, NULL, _IOFBF, 1 << 22);
  guint64 n = 0;
  while (fgets (buf, sizeof buf, f))
    {
      const char *p = strstr (buf, "\"finished\":");
      if (p && g_ascii_strtoll (p + 11, NULL, 10) >= since)
        n++;
    }
  fclose (f);
  return n;
}

static guint64
file_size (const char *dir, const char *name)
{
  g_autofree gchar *path = g_build_filename (dir, name, NULL);
  GStatBuf sb;
  return g_stat (path, &sb) == 0 ? (guint64) sb.st_size : 0;
}

/* Records in the journal: after the 8-byte magic, [u32 len][u32 crc][len
 * bytes] each (master/journal.h). */
static guint64
journal_records (const char *dir)
{
  g_autofree gchar *path = g_build_filename (dir, "journal", NULL);
  FILE *f = fopen (path, "r");
  if (f == NULL)
    return 0;
  guint64 n = 0;
  guint8 h[8];
  if (fread (h, 1, 8, f) == 8)
    while (fread (h, 1, 8, f) == 8)
      {
        guint32 len = h[0] | h[1] << 8 | h[2] << 16 | (guint32) h[3] << 24;
        if (len == 0 || fseeko (f, len, SEEK_CUR) != 0)
          break;
        n++;
      }
  fclose (f);
  return n;
}

static double tv_s (struct timeval tv);

/* CPU of this process and every child reaped so far. */
static double
own_cpu_s (void)
{
  struct rusage self, children;
  getrusage (RUSAGE_SELF, &self);
  getrusage (RUSAGE_CHILDREN, &children);
  return tv_s (self.ru_utime) + tv_s (self.ru_stime) + tv_s (children.ru_utime)
         + tv_s (children.ru_stime);
}

static double
loadavg (void)
{
  g_autofree gchar *text = NULL;
  return g_file_get_contents ("/proc/loadavg", &text, NULL, NULL) ? g_ascii_strtod (text, NULL) : 0;
}

/* ---- one master, watched ------------------------------------------ */

static double
tv_s (struct timeval tv)
{
  return tv.tv_sec + tv.tv_usec / 1e6;
}

/* How long an exited child's main thread waited for a CPU while runnable
 * (the second field of /proc/PID/schedstat, in ns), read while it is a
 * zombie, before it is reaped; NAN if the kernel does not say. */
static double
queued_ms_of_exited (pid_t pid)
{
  siginfo_t info;
  while (waitid (P_PID, (id_t) pid, &info, WEXITED | WNOWAIT) < 0)
    if (errno != EINTR)
      return NAN;
  g_autofree gchar *path = g_strdup_printf ("/proc/%d/schedstat", (int) pid);
  g_autofree gchar *text = NULL;
  unsigned long long on_cpu, waited;
  if (!g_file_get_contents (path, &text, NULL, NULL)
      || sscanf (text, "%llu %llu", &on_cpu, &waited) != 2)
    return NAN;
  return waited / 1e6;
}

typedef gboolean (*StopCheck) (const char *dir, gpointer data);

/* --evict-front: what reclaim of unmapped page cache does to a command run
 * now and then (DAMON's pageout on these VMs, memory pressure on a head
 * node): the file's pages that no process maps leave memory, so the next
 * `datc status` reads its code from the disk unless something keeps them
 * (the master's pin of the front: master/filepin.h). */
static void
evict_file (const char *path)
{
  int fd = open (path, O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    return;
  (void) posix_fadvise (fd, 0, 0, POSIX_FADV_DONTNEED);
  close (fd);
}

/* Until the master exits: `datc status DIR` every status_ms (one at a
 * time; one still out when the master ends is killed and not counted,
 * since it would read the campaign offline), and `check` every 20 ms: when
 * it says so, `stop_signal` goes to the master (once).  A master still
 * there after b->timeout_s gets SIGKILL (its exit status says so). */
static void
watch_master (const Bench *b, const char *dir, pid_t master, GArray *samples, StopCheck check,
              gpointer data, int stop_signal, struct rusage *ru, int *status)
{
  int mfd = pidfd_of (master);
  pid_t st_pid = 0;
  int st_fd = -1;
  gint64 st_start = 0, st_start_real = 0;
  /* The first question comes early, to catch a master still loading. */
  gint64 next = g_get_monotonic_time () + b->status_ms * 200;
  gboolean stopped = FALSE, killed = FALSE;
  gint64 deadline = g_get_monotonic_time () + (gint64) b->timeout_s * G_USEC_PER_SEC;
  const char *argv[] = { b->datc, "status", dir, NULL };
  for (;;)
    {
      gint64 now = g_get_monotonic_time ();
      if (!killed && now >= deadline)
        {
          fprintf (stderr, "bench-scale: datc run still running after %u s: killed\n",
                   b->timeout_s);
          kill (master, SIGKILL);
          killed = TRUE;
        }
      if (st_pid == 0 && now >= next)
        {
          if (b->evict_front)
            evict_file (b->datc);
          st_start = g_get_monotonic_time ();
          st_start_real = g_get_real_time ();
          st_pid = spawn (argv, NULL);
          st_fd = pidfd_of (st_pid);
        }
      gint64 wait_us = MIN (st_pid ? G_MAXINT32 : next - now, MAX (0, deadline - now));
      if (check && !stopped)
        wait_us = MIN (wait_us, 20000);
      struct pollfd fds[2] = { { mfd, POLLIN, 0 }, { st_fd, POLLIN, 0 } };
      int rc = poll (fds, st_pid ? 2 : 1, (int) MAX (0, (wait_us + 999) / 1000));
      if (rc < 0 && errno != EINTR)
        break;
      if (st_pid && (fds[1].revents & POLLIN))
        {
          StatusSample s = { st_start_real, (g_get_monotonic_time () - st_start) / 1000.0, 0 };
          s.queued_ms = queued_ms_of_exited (st_pid);
          struct rusage st_ru;
          reap (st_pid, &st_ru, NULL);
          s.majflt = st_ru.ru_majflt;
          s.cpu_ms = (tv_s (st_ru.ru_utime) + tv_s (st_ru.ru_stime)) * 1000;
          s.preempted = st_ru.ru_nivcsw;
          close (st_fd);
          st_pid = 0;
          g_array_append_val (samples, s);
          next = st_start + b->status_ms * 1000;
        }
      if (fds[0].revents & POLLIN)
        break;
      if (check && !stopped && check (dir, data))
        {
          kill (master, stop_signal);
          stopped = TRUE;
        }
    }
  reap (master, ru, status);
  close (mfd);
  if (st_pid)
    {
      kill (st_pid, SIGKILL);
      reap (st_pid, NULL, NULL);
      close (st_fd);
    }
}

/* ---- the same question from a running process --------------------- */

/* `datc status` asked from a thread of this process, through the call
 * the command makes (datc_control_call: its own ZeroMQ context and REQ
 * socket each time, the 20 agents the text form lists), every status_ms,
 * half a period after the command's.  Its time is the master's answer and
 * the socket's round trip without the command's start (fork, exec, 34
 * shared libraries, about 5 ms of CPU idle), which on these 2 cores,
 * shared with up to 1,000 agent processes, waits for a core: on a real
 * head node the agents run elsewhere.  Asked while no master runs (before
 * it took the campaign, after it let it go) or while its socket is not
 * there: not counted; a timeout counts with its time. */
typedef struct {
  const char *dir;
  guint interval_ms;
  GMutex lock;
  GCond cond;
  gboolean stop; /* under lock */
  GArray *asked; /* StatusSample */
  guint failed;  /* other errors (the master refused, the socket failed mid-call) */
} Asker;

static gpointer
asker_main (gpointer data)
{
  Asker *a = data;
  g_autoptr (JsonNode) req = json_from_string ("{\"cmd\":\"status\",\"agents_max\":20}", NULL);
  gint64 next = g_get_monotonic_time () + a->interval_ms * 500;
  g_mutex_lock (&a->lock);
  while (!a->stop)
    {
      if (g_cond_wait_until (&a->cond, &a->lock, next) || a->stop)
        continue;
      g_mutex_unlock (&a->lock);
      g_autoptr (GError) error = NULL;
      StatusSample s = { g_get_real_time (), 0, -1, NAN, NAN, -1 };
      gint64 t0 = g_get_monotonic_time ();
      g_autoptr (JsonNode) st = datc_control_call (a->dir, req, 30000, &error);
      s.ms = (g_get_monotonic_time () - t0) / 1000.0;
      next = t0 + a->interval_ms * 1000;
      g_mutex_lock (&a->lock);
      if (st != NULL || g_error_matches (error, DATC_CONTROL_ERROR, DATC_CONTROL_ERROR_TIMEOUT))
        g_array_append_val (a->asked, s);
      else if (!g_error_matches (error, DATC_CONTROL_ERROR, DATC_CONTROL_ERROR_NO_MASTER)
               && !g_error_matches (error, DATC_CONTROL_ERROR, DATC_CONTROL_ERROR_FAILED))
        a->failed++;
    }
  g_mutex_unlock (&a->lock);
  return NULL;
}

static GThread *
asker_start (Asker *a, const char *dir, guint interval_ms, GArray *asked)
{
  *a = (Asker) { .dir = dir, .interval_ms = interval_ms, .asked = asked };
  g_mutex_init (&a->lock);
  g_cond_init (&a->cond);
  return g_thread_new ("asker", asker_main, a);
}

/* Waits for a call in progress: it ends within its 100 ms look at the
 * master's lock once the master is gone. */
static void
asker_stop (Asker *a, GThread *thread)
{
  g_mutex_lock (&a->lock);
  a->stop = TRUE;
  g_cond_signal (&a->cond);
  g_mutex_unlock (&a->lock);
  g_thread_join (thread);
  if (a->failed > 0)
    fprintf (stderr, "bench-scale: %u in-process status questions failed\n", a->failed);
  g_mutex_clear (&a->lock);
  g_cond_clear (&a->cond);
}

/* ---- one point ---------------------------------------------------- */

static guint16
free_port (void)
{
  int fd = socket (AF_INET, SOCK_STREAM, 0);
  struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl (INADDR_LOOPBACK) };
  socklen_t len = sizeof a;
  if (fd < 0 || bind (fd, (struct sockaddr *) &a, sizeof a) != 0
      || getsockname (fd, (struct sockaddr *) &a, &len) != 0)
    {
      fprintf (stderr, "bench-scale: no free loopback port: %s\n", g_strerror (errno));
      exit (1);
    }
  close (fd);
  return ntohs (a.sin_port);
}

static void
make_key (const char *path, DatcCurveKeypair *kp)
{
  g_autoptr (GError) error = NULL;
  if (!datc_curve_keypair_generate (kp, &error) || !datc_curve_keypair_save (kp, path, &error))
    {
      fprintf (stderr, "bench-scale: %s: %s\n", path, error->message);
      exit (1);
    }
}

/* A campaign directory the agents can be pointed at before its master
 * starts; fills `endpoint` and, on tcp, the agents' key options. */
typedef struct {
  gchar *dir, *endpoint, *server_public, *key_file, *agents_log, *master_log;
} Setup;

static void
setup_clear (Setup *s)
{
  g_free (s->dir);
  g_free (s->endpoint);
  g_free (s->server_public);
  g_free (s->key_file);
  g_free (s->agents_log);
  g_free (s->master_log);
}

/* Until the machine is quiet: the files just removed written out and
 * freed, and no core busier than `idle_cores` over 200 ms (at most 60 s).
 * A point started right after a 10M-task point otherwise shares the
 * machine with that point's teardown: its GBs of results.jsonl and
 * journal deleted while the kernel still writes them back.  Prints how
 * long it took when that was more than a moment. */
static void
settle (void)
{
  gint64 t0 = g_get_monotonic_time ();
  sync ();
  double busy = 0;
  while (g_get_monotonic_time () - t0 < 60 * G_USEC_PER_SEC)
    {
      double b0 = bench_machine_busy_s ();
      gint64 w0 = g_get_monotonic_time ();
      g_usleep (200000);
      busy = (bench_machine_busy_s () - b0) / ((g_get_monotonic_time () - w0) / 1e6);
      if (busy < 0.1)
        break;
    }
  double took = (g_get_monotonic_time () - t0) / 1e6;
  if (took > 0.5)
    printf ("  (settled for %.1f s before the next point: the last 200 ms %.2f cores busy)\n", took,
            busy);
}

static void
setup (const Bench *b, Setup *s)
{
  memset (s, 0, sizeof *s);
  s->dir = g_build_filename (b->tmp, "c", NULL);
  s->agents_log = g_build_filename (b->tmp, "agents.log", NULL);
  s->master_log = g_build_filename (b->tmp, "master.log", NULL);
  bench_rm_rf (s->dir);
  g_unlink (s->agents_log);
  g_unlink (s->master_log);
  settle ();
  g_mkdir (s->dir, 0700);
  if (b->tcp)
    {
      g_autofree gchar *agents = g_build_filename (s->dir, "keys", "agents", NULL);
      g_autofree gchar *keys = g_build_filename (s->dir, "keys", NULL);
      g_autofree gchar *master = g_build_filename (keys, "master.key", NULL);
      g_mkdir_with_parents (agents, 0700);
      g_chmod (keys, 0700);
      DatcCurveKeypair kp;
      make_key (master, &kp);
      s->server_public = g_strdup (kp.public_z85);
      datc_curve_keypair_clear (&kp);
      s->key_file = g_build_filename (agents, "default.key", NULL);
      make_key (s->key_file, &kp);
      datc_curve_keypair_clear (&kp);
      s->endpoint = g_strdup_printf ("tcp://127.0.0.1:%u", free_port ());
    }
  else
    s->endpoint = g_strdup_printf ("ipc://%s/agents.sock", s->dir);
}

static GArray *
start_agents (const Bench *b, const Setup *s, guint n)
{
  g_autoptr (GArray) pids = g_array_new (FALSE, FALSE, sizeof (pid_t));
  g_autofree gchar *slots = g_strdup_printf ("%u", b->slots);
  for (guint i = 0; i < n; i++)
    {
      const char *argv[]
          = { b->agent,         "--connect",  s->endpoint, "--exec",
              "none",           "--slots",    slots,       s->server_public ? "--server-key" : NULL,
              s->server_public, "--key-file", s->key_file, NULL };
      pid_t pid = spawn (argv, s->agents_log);
      g_array_append_val (pids, pid);
      if (b->agents_cpu >= 0)
        {
          cpu_set_t one;
          CPU_ZERO (&one);
          CPU_SET (b->agents_cpu, &one);
          if (sched_setaffinity (pid, sizeof one, &one) != 0)
            fprintf (stderr, "bench-scale: agent %d on CPU %d: %s\n", (int) pid, b->agents_cpu,
                     g_strerror (errno));
        }
    }
  /* Ready: each has said, once, that it cannot reach the master yet. */
  gint64 deadline = g_get_monotonic_time () + (30 + n / 10) * G_USEC_PER_SEC;
  guint ready = 0;
  while ((ready = count_in_file (s->agents_log, "cannot reach")) < n
         && g_get_monotonic_time () < deadline)
    g_usleep (20000);
  if (ready < n)
    fprintf (stderr, "bench-scale: only %u of %u agents said they were waiting (%s)\n", ready, n,
             s->agents_log);
  return g_steal_pointer (&pids);
}

/* On ipc the master's own local agent is one of the N (only the local
 * site gets an ipc socket: `--no-local` needs `--listen tcp://`), with the
 * same slots and --exec none; on tcp-curve all N are started here. */
static pid_t
start_master (const Bench *b, const Setup *s, const char *task_file)
{
  g_autofree gchar *slots = g_strdup_printf ("%u", b->slots);
  const char *tcp[]
      = { b->datc,           "run", "--dir",    s->dir,      "--no-local", "--no-progress",
          "--give-up-after", "0",   "--listen", s->endpoint, task_file,    NULL };
  const char *ipc[]
      = { b->datc, "run",          "--dir", s->dir,          "--local-agents", "1", "--local-slots",
          slots,   "--local-exec", "none",  "--no-progress", task_file,        NULL };
  return spawn (b->tcp ? tcp : ipc, s->master_log);
}

static double
median_of (GArray *a, double *max)
{
  if (a->len == 0)
    return *max = NAN;
  g_autofree double *v = g_new (double, a->len);
  for (guint i = 0; i < a->len; i++)
    v[i] = g_array_index (a, StatusSample, i).ms;
  qsort (v, a->len, sizeof *v, bench_cmp_double);
  *max = v[a->len - 1];
  return a->len % 2 ? v[a->len / 2] : (v[a->len / 2 - 1] + v[a->len / 2]) / 2;
}

static void
run_point (const Bench *b, const char *task_file, Point *p)
{
  Setup s;
  setup (b, &s);
  p->loadavg = loadavg ();
  double busy0 = bench_machine_busy_s (), own0 = own_cpu_s ();
  p->samples = g_array_new (FALSE, FALSE, sizeof (StatusSample));
  g_autoptr (GArray) agents = start_agents (b, &s, b->tcp ? p->agents : p->agents - 1);
  gint64 t0_real = g_get_real_time ();
  gint64 t0 = g_get_monotonic_time ();
  pid_t master = start_master (b, &s, task_file);
  p->asked = g_array_new (FALSE, FALSE, sizeof (StatusSample));
  Asker asker;
  GThread *asking = asker_start (&asker, s.dir, b->status_ms, p->asked);
  struct rusage ru;
  watch_master (b, s.dir, master, p->samples, NULL, NULL, 0, &ru, &p->exit_status);
  p->wall_s = (g_get_monotonic_time () - t0) / 1e6;
  asker_stop (&asker, asking);
  end_agents (agents, 10000);
  end_strays ();
  double whole_s = (g_get_monotonic_time () - t0) / 1e6;
  p->others = MAX (0.0, bench_machine_busy_s () - busy0 - (own_cpu_s () - own0)) / whole_s;

  p->cpu_s = tv_s (ru.ru_utime) + tv_s (ru.ru_stime);
  p->maxrss_kib = ru.ru_maxrss;
  Trace t;
  read_trace (s.dir, p->agents, &t);
  p->connected = t.connected;
  p->t_started = t.n_started ? t.started[0] : 0;
  p->t_connected = t.nth_connect;
  p->t_finished = t.finished;
  p->load_s = t.n_started ? (t.started[0] - t0_real) / 1e6 : NAN;
  p->connect_s = t.connected ? (t.nth_connect - t.started[0]) / 1e6 : NAN;
  p->rate = t.finished > t.started[0] ? p->tasks / ((t.finished - t.started[0]) / 1e6) : NAN;
  if (t.connected >= p->agents && t.finished > t.nth_connect)
    {
      guint64 after = results_since (s.dir, t.nth_connect);
      p->share_all = (double) after / p->tasks;
      p->rate_all = after / ((t.finished - t.nth_connect) / 1e6);
    }
  else
    p->rate_all = p->share_all = NAN;
  p->journal_bytes = file_size (s.dir, "journal");
  p->status_load_max = NAN; /* none asked that early */
  for (guint i = 0; i < p->samples->len; i++)
    {
      StatusSample *x = &g_array_index (p->samples, StatusSample, i);
      if (t.n_started == 0 || x->start_real < t.started[0])
        p->status_load_max = fmax (p->status_load_max, x->ms);
    }
  p->status_med = median_of (p->samples, &p->status_max);
  p->asked_med = median_of (p->asked, &p->asked_max);
  if (p->exit_status != 0)
    fprintf (stderr, "bench-scale: datc run exited %d; its log: %s\n", p->exit_status,
             s.master_log);
  bench_rm_rf (s.dir);
  setup_clear (&s);
}

static int
cmp_sample_slower (const void *a, const void *b)
{
  double x = ((const StatusSample *) a)->ms, y = ((const StatusSample *) b)->ms;
  return x < y ? 1 : x > y ? -1 : 0;
}

/* When the slowest of `samples` were asked: seconds from
 * campaign_started (negative: while loading), beside when the last agent
 * connected and the campaign finished. */
static void
print_slowest (const Point *p, GArray *samples, const char *what)
{
  if (samples->len == 0 || p->t_started == 0)
    return;
  g_autoptr (GArray) v = g_array_copy (samples);
  g_array_sort (v, cmp_sample_slower);
  printf ("    slowest %s:", what);
  for (guint i = 0; i < MIN (v->len, 5); i++)
    {
      const StatusSample *x = &g_array_index (v, StatusSample, i);
      printf (" %.1f ms at %+.2f s", x->ms, (x->start_real - p->t_started) / 1e6);
      if (x->majflt >= 0)
        {
          printf (" (CPU %.1f ms, waited for a CPU %.1f ms, preempted %ld times", x->cpu_ms,
                  x->queued_ms, x->preempted);
          if (x->majflt > 0)
            printf (", %ld major faults", x->majflt);
          printf (")");
        }
      printf (",");
    }
  if (p->t_connected > 0)
    printf (" (all connected at %+.2f s,", (p->t_connected - p->t_started) / 1e6);
  else
    printf (" (no agent connected,");
  if (p->t_finished > 0)
    printf (" finished at %+.2f s)\n", (p->t_finished - p->t_started) / 1e6);
  else
    printf (" never finished)\n");
}

static void
print_point (const Point *p)
{
  printf ("  %8" G_GUINT64_FORMAT " tasks %4u agents (%u connected, the last %.2f s after start)"
          " run %u: %.2f s, %.0f tasks/s (%.0f with all connected, %.0f%% of the tasks),"
          " %.2f us CPU/task, peak RSS %.1f MiB, journal %.1f B/task, load %.0f lines/s,"
          " status median %.1f max %.1f ms (%u; while loading max %.1f), in-process median %.1f"
          " max %.1f ms (%u), exit %d, loadavg %.2f, others %.2f cores\n",
          p->tasks, p->agents, p->connected, p->connect_s, p->run, p->wall_s, p->rate, p->rate_all,
          100 * p->share_all, p->cpu_s * 1e6 / p->tasks, p->maxrss_kib / 1024.0,
          (double) p->journal_bytes / p->tasks, p->tasks / p->load_s, p->status_med, p->status_max,
          p->samples->len, p->status_load_max, p->asked_med, p->asked_max, p->asked->len,
          p->exit_status, p->loadavg, p->others);
  guint faulted = 0;
  double faulted_max = 0;
  for (guint i = 0; i < p->samples->len; i++)
    {
      const StatusSample *x = &g_array_index (p->samples, StatusSample, i);
      if (x->majflt > 0)
        {
          faulted++;
          faulted_max = MAX (faulted_max, x->ms);
        }
    }
  if (faulted > 0)
    printf ("    %u of the %u `datc status` had major page faults (their pages read from the disk),"
            " the slowest of them %.1f ms\n",
            faulted, p->samples->len, faulted_max);
  print_slowest (p, p->samples, "status");
  print_slowest (p, p->asked, "in-process status");
  fflush (stdout);
}

/* ---- kill -9 and resume ------------------------------------------- */

static gboolean
journal_reached (const char *dir, gpointer data)
{
  return file_size (dir, "journal") >= *(guint64 *) data;
}

static gboolean
resumed_started (const char *dir, gpointer data)
{
  (void) data;
  g_autofree gchar *path = g_build_filename (dir, "trace.jsonl", NULL);
  return count_in_file (path, "\"event\":\"campaign_started\"") >= 2;
}

/* The campaign of `tasks` with `agents` agents, its master killed with
 * SIGKILL once the journal holds about half of what a whole run writes
 * (`journal_per_task`), the agents killed too; then `datc run` again, alone,
 * stopped with SIGTERM once it has replayed (its second campaign_started).
 * `fresh_load_s`: the same task file's load in a fresh run, taken off the
 * resume's start to give the replay's share. */
static void
bench_resume (const Bench *b, const char *task_file, guint64 tasks, guint n_agents,
              double journal_per_task, double fresh_load_s)
{
  Setup s;
  setup (b, &s);
  printf ("resume: %" G_GUINT64_FORMAT " tasks, %u agents, master killed (SIGKILL) half way,"
          " loadavg %.2f\n",
          tasks, n_agents, loadavg ());
  g_autoptr (GArray) agents = start_agents (b, &s, b->tcp ? n_agents : n_agents - 1);
  guint64 half = (guint64) (journal_per_task * tasks / 2);
  g_autoptr (GArray) samples = g_array_new (FALSE, FALSE, sizeof (StatusSample));
  struct rusage ru;
  int status;
  pid_t master = start_master (b, &s, task_file);
  watch_master (b, s.dir, master, samples, journal_reached, &half, SIGKILL, &ru, &status);
  for (guint i = 0; i < agents->len; i++)
    kill (g_array_index (agents, pid_t, i), SIGKILL);
  end_agents (agents, 0);
  end_strays ();
  guint64 records = journal_records (s.dir);
  guint64 bytes = file_size (s.dir, "journal");
  printf ("  killed: exit %d, journal %" G_GUINT64_FORMAT " records, %.1f MiB\n", status, records,
          bytes / 1048576.0);

  g_array_set_size (samples, 0);
  gint64 t0_real = g_get_real_time ();
  master = start_master (b, &s, task_file);
  g_autoptr (GArray) asked = g_array_new (FALSE, FALSE, sizeof (StatusSample));
  Asker asker;
  GThread *asking = asker_start (&asker, s.dir, b->status_ms, asked);
  watch_master (b, s.dir, master, samples, resumed_started, NULL, SIGTERM, &ru, &status);
  asker_stop (&asker, asking);
  Trace t;
  read_trace (s.dir, 0, &t);
  double ready_s = t.n_started >= 2 ? (t.started[1] - t0_real) / 1e6 : NAN;
  double max_ms, med_ms = median_of (samples, &max_ms);
  double asked_max_ms, asked_med_ms = median_of (asked, &asked_max_ms);
  printf ("  resumed: replayed and serving %.2f s after start: %.0f records/s", ready_s,
          records / ready_s);
  /* Less the fresh run's load, when the replay took longer than it (the
   * loads differ by tenths of a second: bench-replay times the replay
   * alone). */
  if (ready_s > fresh_load_s + 0.1)
    printf (" (%.0f records/s after the task file's %.2f s load in the fresh run)\n",
            records / (ready_s - fresh_load_s), fresh_load_s);
  else
    printf (" (the fresh run's load took %.2f s: the replay's own time is within its spread,"
            " see bench-replay)\n",
            fresh_load_s);
  printf ("  resumed master: peak RSS %.1f MiB, CPU %.2f s, exit %d (SIGTERM once serving);"
          " status median %.1f max %.1f ms (%u), in-process median %.1f max %.1f ms (%u)\n",
          ru.ru_maxrss / 1024.0, tv_s (ru.ru_utime) + tv_s (ru.ru_stime), status, med_ms, max_ms,
          samples->len, asked_med_ms, asked_max_ms, asked->len);
  end_strays ();
  bench_rm_rf (s.dir);
  setup_clear (&s);
}

/* ---- output ------------------------------------------------------- */

static int
cmp_point (const void *a, const void *b)
{
  const Point *x = a, *y = b;
  if (x->tasks != y->tasks)
    return x->tasks < y->tasks ? -1 : 1;
  if (x->agents != y->agents)
    return x->agents < y->agents ? -1 : 1;
  return (int) x->run - (int) y->run;
}

/* Peak RSS per connected agent: against the fewest agents of the same
 * task count and run, over the agents added (those that connected). */
static double
rss_per_agent_kib (const GArray *points, const Point *p)
{
  const Point *base = NULL;
  for (guint i = 0; i < points->len; i++)
    {
      const Point *q = &g_array_index (points, Point, i);
      if (q->tasks == p->tasks && q->run == p->run && (base == NULL || q->agents < base->agents))
        base = q;
    }
  if (base == NULL || base->connected >= p->connected)
    return NAN;
  return (double) (p->maxrss_kib - base->maxrss_kib) / (p->connected - base->connected);
}

static void
print_table (GArray *points)
{
  printf ("\n| tasks | agents | connected (last after) | wall s | tasks/s | tasks/s all connected "
          "(share)"
          " | master CPU µs/task | peak RSS MiB | RSS/agent KiB | journal B/task | load lines/s"
          " | status ms median / max (n) | status max while loading"
          " | in-process status ms median / max (n) | others' CPU, cores |\n");
  printf ("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n");
  for (guint i = 0; i < points->len; i++)
    {
      const Point *p = &g_array_index (points, Point, i);
      double per_agent = rss_per_agent_kib (points, p);
      g_autofree gchar *pa
          = isnan (per_agent) ? g_strdup ("–") : g_strdup_printf ("%.0f", per_agent);
      g_autofree gchar *loading = isnan (p->status_load_max)
                                      ? g_strdup ("–")
                                      : g_strdup_printf ("%.1f", p->status_load_max);
      g_autofree gchar *all = isnan (p->rate_all) ? g_strdup ("–")
                                                  : g_strdup_printf ("%.0f (%.0f%%)", p->rate_all,
                                                                     100 * p->share_all);
      /* None asked in a campaign shorter than half a period. */
      g_autofree gchar *asked
          = p->asked->len == 0
                ? g_strdup ("– (0)")
                : g_strdup_printf ("%.1f / %.1f (%u)", p->asked_med, p->asked_max, p->asked->len);
      printf ("| %" G_GUINT64_FORMAT " | %u | %u (%.2f s) | %.2f | %.0f | %s | %.2f | %.1f"
              " | %s | %.1f | %.0f | %.1f / %.1f (%u) | %s | %s | %.2f |%s\n",
              p->tasks, p->agents, p->connected, p->connect_s, p->wall_s, p->rate, all,
              p->cpu_s * 1e6 / p->tasks, p->maxrss_kib / 1024.0, pa,
              (double) p->journal_bytes / p->tasks, p->tasks / p->load_s, p->status_med,
              p->status_max, p->samples->len, loading, asked, p->others,
              p->exit_status ? " FAILED" : "");
    }
}

typedef double (*Metric) (const Point *p);

static double
m_cpu (const Point *p)
{
  return p->cpu_s * 1e6 / p->tasks;
}
static double
m_rss (const Point *p)
{
  return p->maxrss_kib / 1024.0;
}
static double
m_journal (const Point *p)
{
  return (double) p->journal_bytes / p->tasks;
}
static double
m_status (const Point *p)
{
  return p->status_max;
}
static double
m_asked (const Point *p)
{
  return p->asked_max;
}
static double
m_rate (const Point *p)
{
  return p->rate;
}

/* svgplot draws for the HTML report, whose page carries its styles: a
 * file of its own needs the namespace and those styles inside it. */
static void
write_svg (const char *dir, const char *id, const GString *svg)
{
  static const char style[]
      = "<style>svg{font-family:sans-serif;font-size:12px;background:#fff}.grid{stroke:#eee}"
        ".axis{stroke:#444}.title{font-weight:bold}</style>\n";
  g_autoptr (GString) out = g_string_new (NULL);
  const char *body = strchr (svg->str, '>');
  g_string_append (out, "<svg xmlns=\"http://www.w3.org/2000/svg\"");
  g_string_append_len (out, svg->str + 4, body + 2 - (svg->str + 4));
  g_string_append (out, style);
  g_string_append (out, body + 2);
  g_autofree gchar *path = g_strdup_printf ("%s/%s.svg", dir, id);
  g_autoptr (GError) error = NULL;
  if (!g_file_set_contents (path, out->str, (gssize) out->len, &error))
    fprintf (stderr, "bench-scale: %s\n", error->message);
  else
    printf ("wrote %s\n", path);
}

/* One series per agent count: the median over runs at each task count,
 * x = log10(tasks) (svgplot has no log axis). */
static void
plot (const char *dir, GArray *points, const guint *agents, guint n_agents, const char *id,
      const char *title, const char *y_label, Metric metric)
{
  g_autoptr (DatcSvgPlot) plot
      = datc_svg_plot_new (id, title, "tasks, log10 (4 = 10k, 5 = 100k, 6 = 1M, 7 = 10M)", y_label);
  for (guint a = 0; a < n_agents; a++)
    {
      g_autoptr (GArray) xs = g_array_new (FALSE, FALSE, sizeof (double));
      g_autoptr (GArray) ys = g_array_new (FALSE, FALSE, sizeof (double));
      for (guint i = 0; i < points->len;)
        {
          const Point *p = &g_array_index (points, Point, i);
          guint64 tasks = p->tasks;
          g_autoptr (GArray) vals = g_array_new (FALSE, FALSE, sizeof (double));
          for (; i < points->len && g_array_index (points, Point, i).tasks == tasks; i++)
            {
              const Point *q = &g_array_index (points, Point, i);
              double v = metric (q);
              if (q->agents == agents[a] && q->exit_status == 0 && isfinite (v))
                g_array_append_val (vals, v);
            }
          if (vals->len == 0)
            continue;
          g_array_sort (vals, bench_cmp_double);
          double x = log10 ((double) tasks);
          double y = vals->len % 2 ? g_array_index (vals, double, vals->len / 2)
                                   : (g_array_index (vals, double, vals->len / 2 - 1)
                                      + g_array_index (vals, double, vals->len / 2))
                                         / 2;
          g_array_append_val (xs, x);
          g_array_append_val (ys, y);
        }
      g_autofree gchar *name = g_strdup_printf ("%u agent%s", agents[a], agents[a] == 1 ? "" : "s");
      datc_svg_plot_add_series (plot, name, datc_svg_plot_color (a), FALSE, FALSE,
                                (double *) xs->data, (double *) ys->data, xs->len);
    }
  g_autoptr (GString) svg = g_string_new (NULL);
  datc_svg_plot_render (plot, svg);
  write_svg (dir, id, svg);
}

/* ---- main --------------------------------------------------------- */

static int
cmp_u64 (const void *a, const void *b)
{
  guint64 x = *(const guint64 *) a, y = *(const guint64 *) b;
  return x < y ? -1 : x > y;
}

/* This process, and so every child started afterwards, on every online
 * CPU but `cpu`; FALSE with a message when that leaves none. */
static gboolean
keep_off_cpu (int cpu)
{
  cpu_set_t set;
  if (sched_getaffinity (0, sizeof set, &set) != 0)
    {
      fprintf (stderr, "bench-scale: sched_getaffinity: %s\n", g_strerror (errno));
      return FALSE;
    }
  if (cpu >= CPU_SETSIZE || !CPU_ISSET (cpu, &set) || CPU_COUNT (&set) < 2)
    {
      fprintf (stderr,
               "bench-scale: --agents-cpu %d: not one of two or more CPUs this process may use\n",
               cpu);
      return FALSE;
    }
  CPU_CLR (cpu, &set);
  if (sched_setaffinity (0, sizeof set, &set) != 0)
    {
      fprintf (stderr, "bench-scale: sched_setaffinity: %s\n", g_strerror (errno));
      return FALSE;
    }
  return TRUE;
}

/* "10000,100000" into numbers; FALSE with a message naming the option. */
static gboolean
parse_list (const char *option, const char *text, GArray *out, guint64 max)
{
  g_auto (GStrv) parts = g_strsplit (text, ",", -1);
  for (guint i = 0; parts[i] != NULL; i++)
    {
      guint64 v;
      g_autoptr (GError) error = NULL;
      if (!g_ascii_string_to_unsigned (g_strstrip (parts[i]), 10, 1, max, &v, &error))
        {
          fprintf (stderr, "bench-scale: --%s: \"%s\": %s\n", option, parts[i], error->message);
          return FALSE;
        }
      g_array_append_val (out, v);
    }
  return out->len > 0;
}

int
main (int argc, char **argv)
{
  g_autofree gchar *tasks_opt = NULL, *agents_opt = NULL, *transport = NULL, *svg_dir = NULL;
  gint slots = 64, status_ms = 250, repeat = 1, timeout_s = 900, agents_cpu = -1;
  gboolean no_resume = FALSE, evict_front = FALSE;
  GOptionEntry entries[] = {
    { "tasks", 0, 0, G_OPTION_ARG_STRING, &tasks_opt, "Task counts (default 10000,100000,1000000)",
      "N,..." },
    { "agents", 0, 0, G_OPTION_ARG_STRING, &agents_opt, "Agent counts (default 1,10,100,1000)",
      "N,..." },
    { "transport", 0, 0, G_OPTION_ARG_STRING, &transport, "ipc (default) or tcp-curve", "T" },
    { "slots", 0, 0, G_OPTION_ARG_INT, &slots, "Slots per agent (default 64)", "N" },
    { "agents-cpu", 0, 0, G_OPTION_ARG_INT, &agents_cpu,
      "The agents on this CPU only, the master and `datc status` on the others, as if the agents "
      "ran on other hosts (default: all share every CPU)",
      "CPU" },
    { "repeat", 0, 0, G_OPTION_ARG_INT, &repeat, "Runs per point (default 1)", "N" },
    { "status-ms", 0, 0, G_OPTION_ARG_INT, &status_ms, "Between two `datc status` (default 250)",
      "MS" },
    { "timeout", 0, 0, G_OPTION_ARG_INT, &timeout_s,
      "Kill a datc run still running after this (default 900)", "S" },
    { "no-resume", 0, 0, G_OPTION_ARG_NONE, &no_resume, "No kill -9 and resume at the end", NULL },
    { "evict-front", 0, 0, G_OPTION_ARG_NONE, &evict_front,
      "Drop the unmapped page cache of $DATC (the `datc` front) before each `datc status`, as "
      "reclaim does to a command run now and then",
      NULL },
    { "svg", 0, 0, G_OPTION_ARG_FILENAME, &svg_dir, "Write the plots into DIR", "DIR" },
    { NULL },
  };
  g_autoptr (GOptionContext) ctx = g_option_context_new ("- issue 17's cost curves");
  g_option_context_add_main_entries (ctx, entries, NULL);
  g_autoptr (GError) error = NULL;
  if (!g_option_context_parse (ctx, &argc, &argv, &error) || argc != 1)
    {
      fprintf (stderr, "bench-scale: %s\n", error ? error->message : "unexpected arguments");
      return 2;
    }
  g_autoptr (GArray) task_counts = g_array_new (FALSE, FALSE, sizeof (guint64));
  g_autoptr (GArray) agent_counts64 = g_array_new (FALSE, FALSE, sizeof (guint64));
  if (!parse_list ("tasks", tasks_opt ? tasks_opt : "10000,100000,1000000", task_counts, 100000000)
      || !parse_list ("agents", agents_opt ? agents_opt : "1,10,100,1000", agent_counts64, 10000))
    return 2;
  if (transport != NULL && !g_str_equal (transport, "ipc") && !g_str_equal (transport, "tcp-curve"))
    {
      fprintf (stderr, "bench-scale: --transport: \"%s\": ipc or tcp-curve\n", transport);
      return 2;
    }
  if (slots < 1 || status_ms < 10 || repeat < 1 || timeout_s < 1 || agents_cpu < -1)
    {
      fprintf (stderr, "bench-scale: --slots, --repeat and --timeout take 1 or more,"
                       " --status-ms 10 or more, --agents-cpu a CPU number\n");
      return 2;
    }
  /* Children inherit the mask: the master (and the local agent it
   * forks), `datc status` and this process keep off the agents' CPU. */
  if (agents_cpu >= 0 && !keep_off_cpu (agents_cpu))
    return 2;
  g_array_sort (task_counts, cmp_u64);
  guint n_agents = agent_counts64->len;
  g_autofree guint *agent_counts = g_new (guint, n_agents);
  for (guint i = 0; i < n_agents; i++)
    agent_counts[i] = (guint) g_array_index (agent_counts64, guint64, i);
  const char *agent = g_getenv ("DATC_AGENT");
  if (agent == NULL || !g_path_is_absolute (agent) || !g_path_is_absolute (bench_datc ()))
    {
      fprintf (stderr,
               "bench-scale: set DATC and DATC_AGENT to absolute paths of datc and datc-agent\n");
      return 2;
    }

  g_autofree gchar *tmp = g_dir_make_tmp ("datc-scale-XXXXXX", &error);
  if (tmp == NULL)
    {
      fprintf (stderr, "bench-scale: %s\n", error->message);
      return 1;
    }
  /* The ipc socket goes in DIR/c: a path longer than sun_path would be
   * moved to /tmp by datc, where the agents would not find it. */
  if (strlen (tmp) + sizeof "/c/agents.sock" > 100)
    {
      fprintf (stderr, "bench-scale: %s: too long for an ipc socket path; set a shorter TMPDIR\n",
               tmp);
      return 2;
    }
  live_pids = g_array_new (FALSE, FALSE, sizeof (pid_t));
  prctl (PR_SET_CHILD_SUBREAPER, 1);
  signal (SIGINT, on_signal);
  signal (SIGTERM, on_signal);
  struct rlimit rl;
  if (getrlimit (RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max)
    {
      rl.rlim_cur = rl.rlim_max;
      setrlimit (RLIMIT_NOFILE, &rl);
    }
  Bench b = { .tcp = transport != NULL && g_str_equal (transport, "tcp-curve"),
              .agents_cpu = agents_cpu,
              .slots = (guint) slots,
              .status_ms = (guint) status_ms,
              .timeout_s = (guint) timeout_s,
              .evict_front = evict_front,
              .datc = bench_datc (),
              .agent = agent,
              .tmp = tmp };
  printf ("bench-scale: --exec none, ~44-byte commands, %s, %u slots per agent, `datc status` every"
          " %u ms; loadavg %.2f\n",
          b.tcp ? "tcp-curve on loopback" : "ipc", b.slots, b.status_ms, loadavg ());
  if (b.evict_front)
    printf ("bench-scale: %s's unmapped pages dropped before each `datc status`\n", b.datc);
  int dynamic = elf_is_dynamic (agent);
  printf ("bench-scale: agents %s (%s)\n", agent,
          dynamic == 0   ? "statically linked"
          : dynamic == 1 ? "dynamically linked"
                         : "not an ELF file this can read");
  guint most_agents = 0;
  for (guint i = 0; i < n_agents; i++)
    most_agents = MAX (most_agents, agent_counts[i]);
  if (dynamic == 1 && most_agents >= 100)
    printf ("bench-scale: warning: %u dynamically linked agents map the master's shared"
            " libraries as well; DATC_AGENT=.../datc-agent-static is the agent the issue asks"
            " for (benchmarks/README.md, \"Static agents\")\n",
            most_agents);
  if (b.agents_cpu >= 0)
    printf ("bench-scale: the agents on CPU %d, the master and `datc status` on the other %d\n",
            b.agents_cpu, (int) sysconf (_SC_NPROCESSORS_ONLN) - 1);

  g_autoptr (GArray) points = g_array_new (FALSE, TRUE, sizeof (Point));
  for (guint t = 0; t < task_counts->len; t++)
    {
      guint64 n = g_array_index (task_counts, guint64, t);
      g_autofree gchar *file
          = bench_write_tasks (tmp, (guint) n, "/usr/bin/printf %s\\n parameter-set-", TRUE);
      for (guint a = 0; a < n_agents; a++)
        for (guint r = 1; r <= (guint) repeat; r++)
          {
            Point p = { .tasks = n, .agents = agent_counts[a], .run = r };
            run_point (&b, file, &p);
            print_point (&p);
            g_array_append_val (points, p);
          }
      if (!no_resume && t + 1 == task_counts->len)
        {
          /* The first point of this task count that ended well tells
           * the journal's size and the task file's load. */
          const Point *ok = NULL;
          for (guint i = points->len - n_agents * repeat; i < points->len && ok == NULL; i++)
            if (g_array_index (points, Point, i).exit_status == 0)
              ok = &g_array_index (points, Point, i);
          if (ok != NULL)
            bench_resume (&b, file, n, ok->agents, (double) ok->journal_bytes / n, ok->load_s);
          else
            printf ("resume: not measured, no campaign of %" G_GUINT64_FORMAT " tasks ended well\n",
                    n);
        }
      g_unlink (file);
    }
  g_array_sort (points, cmp_point);
  print_table (points);
  if (svg_dir != NULL)
    {
      g_mkdir_with_parents (svg_dir, 0755);
      plot (svg_dir, points, agent_counts, n_agents, "scale-cpu", "Master CPU per task",
            "µs per task", m_cpu);
      plot (svg_dir, points, agent_counts, n_agents, "scale-rss", "Master peak RSS", "MiB", m_rss);
      plot (svg_dir, points, agent_counts, n_agents, "scale-journal", "Journal per task",
            "bytes per task", m_journal);
      plot (svg_dir, points, agent_counts, n_agents, "scale-status", "Slowest `datc status`", "ms",
            m_status);
      plot (svg_dir, points, agent_counts, n_agents, "scale-status-in-process",
            "Slowest status asked in-process (the master's answer)", "ms", m_asked);
      plot (svg_dir, points, agent_counts, n_agents, "scale-rate", "Master throughput", "tasks/s",
            m_rate);
    }
  for (guint i = 0; i < points->len; i++)
    {
      g_array_unref (g_array_index (points, Point, i).samples);
      g_array_unref (g_array_index (points, Point, i).asked);
    }
  bench_rm_rf (tmp);
  return 0;
}
