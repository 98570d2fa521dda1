/* runner.c: spawns tasks and follows them to the end, on the caller's
 * thread or, with slot threads (see "slot threads" below; the agent's
 * default), on one thread per slot.
 *
 * Why it is shaped so.  An agent may run tens of thousands of tiny tasks, so
 * the per-task cost must stay close to a bare posix_spawn + waitpid:
 *   - a vfork-style clone with its own small child function (see "spawning"
 *     below) instead of posix_spawn, and no shell for plain lines (command.c);
 *   - every fd the runner watches (each leader's pidfd, each output pipe, a
 *     wake-up eventfd) sits in one level-triggered epoll set, so the agent
 *     polls a single fd and dispatch() never blocks;
 *   - output is read through one 64 KiB buffer owned by the runner and only
 *     copied into a per-task GByteArray when there is some.
 * Epoll events carry (serial << 2 | kind), never a pointer, and a task is
 * found by serial in a hash table: an event for a task that ended earlier
 * in the same batch, or for a stale registration, finds nothing and is
 * ignored.  That is also why fds are simply closed, without EPOLL_CTL_DEL
 * (syscalls are a large part of the per-task cost): we hold the only
 * reference to each read end and pidfd, so close() removes it from the set.
 *
 * Ending.  When a leader's pidfd becomes readable we read its status with
 * waitid(WNOWAIT), which leaves it a zombie so that its pid, which is also
 * the pgid, cannot be reused; then SIGKILL the group (whatever it left
 * behind), then reap.  Output is then read only as far as it is already
 * in the pipes: a grandchild that left the group (setsid) may keep a write
 * end open forever, so waiting for EOF could hang the task; what such an
 * escapee writes afterwards is lost, by design.  Until the leader exits
 * the runner holds a copy of each pipe's write end: the child's exit then
 * makes no hang-up on the pipes, and the pidfd alone wakes the agent, once.
 *
 * Timeouts and cancels send SIGTERM to the group (and to the leader through
 * its pidfd, in case it moved to another group), then SIGKILL after
 * kill_grace_ms.  Deadlines use the monotonic clock; started/finished use
 * the real-time clock because they travel to the master. */
#include "runner.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/sched.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/pidfd.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "command.h"
#include "datc-limits.h"
#include "oomevidence.h"

extern char **environ;

#define READ_CHUNK (64u * 1024u)
/* Reads per readiness event while a task runs (fairness between tasks). */
#define READS_PER_EVENT 4
/* Upper bound on reads of the pipes' leftovers once the leader is reaped: pipes
 * hold at most pipe-max-size (1 MiB by default), this allows 4 MiB. */
#define LEFTOVER_READS_MAX 64
#define EVENTS_MAX 64
#define DISPATCH_ROUNDS_MAX 8

/* Low two bits of an epoll event's u64; the rest is the task's serial. */
enum {
  WATCH_PID = 0,
  WATCH_OUT = 1,
  WATCH_ERR = 2,
  WATCH_WAKE = 3, /* with serial 0: the runner's eventfd */
};

typedef enum {
  STOP_NONE,
  STOP_TIMEOUT,
  STOP_CANCEL,
} StopReason;

typedef struct {
  int fd;           /* read end of the pipe, -1 once closed */
  int hold;         /* our copy of the write end while the leader lives */
  GByteArray *kept; /* NULL until the first byte is kept */
  guint64 dropped;
  gboolean nonblocking; /* O_NONBLOCK set: only without RWF_NOWAIT */
} Capture;

typedef struct {
  DatcTaskKey key;
  guint64 serial;
  guint index; /* position in runner->tasks */
  pid_t pid;   /* the leader; also the pgid */
  int pidfd;
  Capture out;
  Capture err;
  gint64 started_us; /* real time */
  gint64 started_mono;
  gint64 oom_kills; /* the OOM-kill counter when it started; -1: none */
  guint32 timeout_ms;
  gint64 deadline; /* monotonic; 0: no timeout */
  gint64 kill_at;  /* monotonic; 0: no SIGKILL scheduled */
  StopReason stop;
  DatcTaskStatus stop_status;
  /* With slot threads (see "slot threads" below): */
  gboolean in_slots;         /* FALSE: spawned by the main thread */
  int state;                 /* TaskState, under runner->lock */
  guint32 est_runtime_ms;    /* checked against the walltime when it starts */
  DatcTaskStatus unstarted;  /* never started for this reason (0: it started, or
                              * was stopped: stop_status) */
  const char *unstarted_why; /* static */
  gchar **argv;              /* owned copies of what the slot thread spawns */
  gchar **envp;              /* or NULL: the agent's environment */
  gchar *task_path;          /* the task's PATH, or NULL */
  gchar *cwd;
  gchar *sh;          /* for the ENOEXEC retry of a direct line */
  int spawn_err;      /* the spawn failed with this errno */
  int wait_rc;        /* waitid's return, as task_finish sees it */
  int wait_errno;     /* its errno */
  siginfo_t info;     /* the leader's status */
  gint64 finished_us; /* real time, when reaped */
} RunTask;

typedef enum {
  TASK_STAGED,   /* pipes open, waiting in the runner's ready queue */
  TASK_SPAWNING, /* the slot thread spawns it */
  TASK_RUNNING,  /* the slot thread waits for it */
  TASK_EXITED,   /* the leader exited; no signal may reach its pid any more */
  TASK_ENDED,    /* reaped (or never started): in runner->ended */
} TaskState;

typedef struct Slot {
  struct DatcRunner *runner;
  pthread_t thread;
  RunTask *current; /* SPAWNING, RUNNING or EXITED; under runner->lock */
  guint8 *stack;
} Slot;

/* The child's stack: the parent is suspended until the child execs or
 * exits (CLONE_VFORK), so one stack serves every spawn.  It holds the child
 * function's frames and one path buffer for the PATH search. */
#define CHILD_STACK_SIZE (64u * 1024u)

struct DatcRunner {
  int epfd;
  int devnull;
  int wakefd; /* readable while spawn failures wait in `failed` */
  gsize output_limit;
  guint kill_grace_ms;
  guint64 next_serial;
  GPtrArray *tasks;       /* RunTask*, owned */
  GHashTable *by_serial;  /* &task->serial -> task */
  GHashTable *by_key;     /* &task->key -> task */
  GPtrArray *failed;      /* DatcResult*, owned: spawn failures not yet dispatched */
  guint8 *buf;            /* READ_CHUNK bytes, shared by every read */
  gboolean no_rwf_nowait; /* the kernel refused RWF_NOWAIT on a pipe */
  sigset_t reset;         /* dispositions a child sets to SIG_DFL before exec */
  guint8 *stack;          /* CHILD_STACK_SIZE bytes, the lowest page a guard */
  struct rlimit nofile;   /* a child's RLIMIT_NOFILE, when we raised ours */
  gboolean restore_nofile;
  DatcOomWatch *oom; /* the node's OOM-killer evidence for tasks killed by SIGKILL */
  /* Slot threads: none unless datc_runner_use_slot_threads(). */
  guint n_slots;
  Slot *slots;
  guint max_held;     /* tasks held at most, started or ready */
  gint64 work_end_us; /* real time: a task whose est_runtime ends later is refused */
  pthread_mutex_t lock;
  pthread_cond_t ready_cond; /* a task is ready, the lease renewed, or quit */
  GQueue ready;              /* RunTask*, STAGED, under lock, in arrival order */
  gint64 start_until;        /* under lock, monotonic: no start at or after it */
  gboolean collecting;       /* in collect_ended: failures leave in this dispatch */
  guint spawning;            /* under lock: taken from `ready`, not yet spawned */
  gint64 main_due;           /* under lock, monotonic: how long the main thread may
                              * sleep, as datc_runner_next_timeout_ms last said */
  guint n_stacks;            /* slots whose child stack is mapped */
  gint64 last_ended_us;      /* under lock, monotonic: when a task last ended */
  GPtrArray *ended;          /* RunTask*, under lock: ended in a slot, for the main thread */
  gboolean quit;             /* under lock */
  gboolean told;             /* under lock: the eventfd was written since the last collect */
  gint64 ended_since;        /* under lock: monotonic, when `ended` stopped being empty */
};

static gboolean
set_errno_error (GError **error, int errsv, const char *what)
{
  g_set_error (error, G_FILE_ERROR, g_file_error_from_errno (errsv), "%s: %s", what,
               g_strerror (errsv));
  return FALSE;
}

static void
close_fd (int *fd)
{
  if (*fd >= 0)
    close (*fd);
  *fd = -1;
}

/* A fd about to be dup2'ed onto 0, 1 or 2 must not itself be 0, 1 or 2, or
 * the file actions would clobber each other (only if the agent runs with
 * stdio closed). */
static int
fd_above_stdio (int fd)
{
  if (fd < 0 || fd > 2)
    return fd;
  int moved = fcntl (fd, F_DUPFD_CLOEXEC, 3);
  int errsv = errno;
  close (fd);
  errno = errsv;
  return moved;
}

DatcRunner *
datc_runner_new (gsize output_limit, guint kill_grace_ms, GError **error)
{
  if (output_limit > DATC_OUTPUT_MAX)
    {
      g_set_error (error, G_FILE_ERROR, G_FILE_ERROR_INVAL,
                   "output limit %" G_GSIZE_FORMAT " is over the maximum %u", output_limit,
                   DATC_OUTPUT_MAX);
      return NULL;
    }

  g_autoptr (DatcRunner) runner = g_new0 (DatcRunner, 1);
  runner->epfd = runner->devnull = runner->wakefd = -1;
  runner->output_limit = output_limit;
  runner->kill_grace_ms = kill_grace_ms;
  runner->next_serial = 1;
  runner->tasks = g_ptr_array_new ();
  runner->by_serial = g_hash_table_new (g_int64_hash, g_int64_equal);
  runner->by_key = g_hash_table_new (datc_task_key_hash, datc_task_key_equal);
  runner->failed = g_ptr_array_new_with_free_func ((GDestroyNotify) datc_result_free);
  runner->buf = g_malloc (READ_CHUNK);
  runner->oom = datc_oom_watch_new ("/proc/self/cgroup", "/sys/fs/cgroup", "/dev/kmsg");
  pthread_mutex_init (&runner->lock, NULL);
  pthread_cond_init (&runner->ready_cond, NULL);
  g_queue_init (&runner->ready);
  runner->ended = g_ptr_array_new ();

  /* Children start with an empty signal mask (the agent blocks signals for
   * its signalfd) and no signal ignored: an ignored signal would survive
   * exec (the agent ignores SIGPIPE; a background shell may have ignored
   * SIGINT and SIGQUIT).  The child resets the signals commonly ignored and
   * any that is ignored or caught now; caught ones reset at exec anyway,
   * and a handler cannot run in the child before that: every signal stays
   * blocked there until the call before execve.  Each reset is one system
   * call in every spawn, so the rest (some 50 signals) are left alone. */
  static const int usual[] = { SIGHUP,  SIGINT,  SIGQUIT, SIGPIPE, SIGALRM, SIGTERM, SIGUSR1,
                               SIGUSR2, SIGCHLD, SIGTSTP, SIGTTIN, SIGTTOU, SIGXFSZ };
  sigemptyset (&runner->reset);
  for (gsize i = 0; i < G_N_ELEMENTS (usual); i++)
    sigaddset (&runner->reset, usual[i]);
  for (int sig = 1; sig < NSIG; sig++)
    {
      struct sigaction sa;
      if (sig != SIGKILL && sig != SIGSTOP && sigaction (sig, NULL, &sa) == 0
          && sa.sa_handler != SIG_DFL)
        sigaddset (&runner->reset, sig);
    }

  runner->stack = mmap (NULL, CHILD_STACK_SIZE, PROT_READ | PROT_WRITE,
                        MAP_PRIVATE | MAP_ANONYMOUS | MAP_STACK, -1, 0);
  if (runner->stack == MAP_FAILED)
    {
      runner->stack = NULL;
      return (set_errno_error (error, errno, "mmap (child stack)"), NULL);
    }
  if (mprotect (runner->stack, (size_t) sysconf (_SC_PAGESIZE), PROT_NONE) != 0)
    return (set_errno_error (error, errno, "mprotect (child stack guard)"), NULL);

  runner->epfd = epoll_create1 (EPOLL_CLOEXEC);
  if (runner->epfd < 0)
    return (set_errno_error (error, errno, "epoll_create1"), NULL);
  runner->devnull = fd_above_stdio (open ("/dev/null", O_RDONLY | O_CLOEXEC));
  if (runner->devnull < 0)
    return (set_errno_error (error, errno, "/dev/null"), NULL);
  runner->wakefd = eventfd (0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (runner->wakefd < 0)
    return (set_errno_error (error, errno, "eventfd"), NULL);
  struct epoll_event ev = { .events = EPOLLIN, .data.u64 = WATCH_WAKE };
  if (epoll_ctl (runner->epfd, EPOLL_CTL_ADD, runner->wakefd, &ev) != 0)
    return (set_errno_error (error, errno, "epoll_ctl"), NULL);

  return g_steal_pointer (&runner);
}

static void
capture_clear (Capture *cap)
{
  close_fd (&cap->fd);
  close_fd (&cap->hold);
  g_clear_pointer (&cap->kept, g_byte_array_unref);
}

/* Kills what is left of a task and reaps its leader, blocking: only for
 * runner_free() and for a task whose registration failed. */
static void
task_kill_and_reap (pid_t pid, int pidfd)
{
  kill (-pid, SIGKILL);
  if (pidfd >= 0)
    pidfd_send_signal (pidfd, SIGKILL, NULL, 0);
  else
    kill (pid, SIGKILL);
  while (waitpid (pid, NULL, 0) < 0 && errno == EINTR)
    ;
}

static void
run_task_free (RunTask *task)
{
  capture_clear (&task->out);
  capture_clear (&task->err);
  close_fd (&task->pidfd);
  g_strfreev (task->argv);
  g_strfreev (task->envp);
  g_free (task->task_path);
  g_free (task->cwd);
  g_free (task->sh);
  g_free (task);
}

/* A signal to the leader itself, in case it left its group (the group
 * gets its own kill).  Through its pidfd, or, spawned by a slot thread
 * (no pidfd: one file less to make and close per task), by pid: callers
 * hold runner->lock and signal only a TASK_RUNNING leader, which its slot
 * thread reaps only after marking it TASK_EXITED under that lock, so
 * until then the pid is its, even as a zombie. */
static void
signal_leader (RunTask *task, int sig)
{
  if (task->pidfd >= 0)
    pidfd_send_signal (task->pidfd, sig, NULL, 0);
  else if (task->pid > 0)
    kill (task->pid, sig);
}

static void slots_stop (DatcRunner *runner);

void
datc_runner_free (DatcRunner *runner)
{
  if (runner == NULL)
    return;
  slots_stop (runner);
  for (guint i = 0; runner->tasks != NULL && i < runner->tasks->len; i++)
    {
      RunTask *task = g_ptr_array_index (runner->tasks, i);
      /* A slot's task is reaped by its thread, or never started. */
      if (!task->in_slots)
        task_kill_and_reap (task->pid, task->pidfd);
      run_task_free (task);
    }
  g_clear_pointer (&runner->ended, g_ptr_array_unref);
  pthread_cond_destroy (&runner->ready_cond);
  pthread_mutex_destroy (&runner->lock);
  g_clear_pointer (&runner->tasks, g_ptr_array_unref);
  g_clear_pointer (&runner->by_serial, g_hash_table_unref);
  g_clear_pointer (&runner->by_key, g_hash_table_unref);
  g_clear_pointer (&runner->failed, g_ptr_array_unref);
  if (runner->stack != NULL)
    munmap (runner->stack, CHILD_STACK_SIZE);
  close_fd (&runner->wakefd);
  close_fd (&runner->devnull);
  close_fd (&runner->epfd);
  g_free (runner->buf);
  datc_oom_watch_free (runner->oom);
  g_free (runner);
}

/* --- starting ------------------------------------------------------------ */

/* Queues a result for a task that never ran. */
static void
queue_spawn_failure (DatcRunner *runner, const DatcTask *task, gint32 exit_code,
                     char *message /* transfer full */)
{
  DatcResult *result = datc_result_new (task->id, task->attempt);
  result->status = DATC_STATUS_SPAWN_FAILED;
  result->exit_code = exit_code;
  result->signal = 0;
  result->started_us = result->finished_us = g_get_real_time ();
  g_clear_pointer (&result->out, g_bytes_unref);
  g_clear_pointer (&result->err, g_bytes_unref);
  result->out = g_bytes_new (NULL, 0);
  result->err = g_bytes_new (NULL, 0);
  result->out_dropped = result->err_dropped = 0;
  g_free (result->message);
  result->message = message;

  if (runner->failed->len == 0 && !runner->collecting)
    {
      guint64 one = 1;
      if (write (runner->wakefd, &one, sizeof one) < 0)
        g_debug ("runner: eventfd write: %s", g_strerror (errno));
    }
  g_ptr_array_add (runner->failed, result);
}

static gsize
env_key_len (const char *entry)
{
  const char *eq = strchr (entry, '=');
  return eq != NULL ? (gsize) (eq - entry) : strlen (entry);
}

static gboolean
env_key_in (const char *entry, gsize key_len, gchar **list)
{
  for (gchar **e = list; e != NULL && *e != NULL; e++)
    if (env_key_len (*e) == key_len && strncmp (*e, entry, key_len) == 0)
      return TRUE;
  return FALSE;
}

/* The agent's environment with the task's entries added (the task wins).
 * The array borrows its strings: free it with g_free() only.  Sets *path to
 * the task's PATH value when it sets one.  Returns NULL and sets *bad to the
 * first malformed entry. */
static char **
merge_env (gchar **extra, const char **path, const char **bad)
{
  gsize n_base = environ != NULL ? g_strv_length (environ) : 0;
  gsize n_extra = g_strv_length (extra);
  char **envp = g_new (char *, n_base + n_extra + 1);
  gsize n = 0;

  *path = NULL;
  for (gsize i = 0; i < n_extra; i++)
    {
      gsize len = env_key_len (extra[i]);
      if (len == 0 || extra[i][len] != '=')
        {
          *bad = extra[i];
          g_free (envp);
          return NULL;
        }
      /* a later entry with the same key wins */
      if (env_key_in (extra[i], len, extra + i + 1))
        continue;
      if (len == 4 && strncmp (extra[i], "PATH", 4) == 0)
        *path = extra[i] + 5;
      envp[n++] = extra[i];
    }
  for (gsize i = 0; i < n_base; i++)
    if (!env_key_in (environ[i], env_key_len (environ[i]), extra))
      envp[n++] = environ[i];
  envp[n] = NULL;
  return envp;
}

/* posix_spawnp() searches the agent's PATH; a task that sets its own PATH
 * gets it searched here instead, as its shell would.  Returns NULL with
 * errno ENOENT or EACCES. */
static gchar *
search_path (const char *name, const char *path)
{
  int errsv = ENOENT;
  g_auto (GStrv) dirs = g_strsplit (path, ":", -1);
  for (gchar **d = dirs; *d != NULL; d++)
    {
      g_autofree gchar *file = g_build_filename (**d ? *d : ".", name, NULL);
      struct stat st;
      if (stat (file, &st) != 0 || !S_ISREG (st.st_mode))
        continue;
      if (access (file, X_OK) == 0)
        return g_steal_pointer (&file);
      errsv = EACCES;
    }
  errno = errsv;
  return NULL;
}

/* --- spawning -------------------------------------------------------------
 *
 * glibc's posix_spawn costs the child two sigaction calls for nearly every
 * signal (a query, then a reset), and the parent an mmap and munmap of a
 * fresh stack; a pidfd then costs one more call.  For tasks of a few
 * milliseconds that is a good part of the agent's work, so the runner
 * spawns the same way glibc does (clone with CLONE_VM | CLONE_VFORK, the
 * parent suspended until the child execs or exits, every signal blocked
 * meanwhile) with a child that does only what a task needs, on a stack kept
 * for all spawns, and gets the pidfd from the clone itself.
 *
 * The child shares our memory (and this thread's errno): it calls only
 * system-call wrappers, writes nothing of ours but `err`, and leaves
 * through execve or _exit. */

typedef struct {
  const char *file;   /* what to exec; searched in `search` if it has no '/' */
  const char *search; /* PATH to search, or NULL to exec `file` as is */
  char *const *argv;
  char *const *envp;
  const sigset_t *reset;
  const char *cwd;             /* or NULL */
  const struct rlimit *nofile; /* or NULL: the agent's own */
  int devnull, out_w, err_w;
  int err; /* set by the child when it did not exec */
} SpawnRequest;

/* execvp's search, as glibc's posix_spawnp does it: each PATH entry in
 * turn (an empty one is the current directory); EACCES is reported if some
 * candidate was refused and none ran.  Returns only on failure. */
static void
child_exec_search (const SpawnRequest *r)
{
  if (r->search == NULL || strchr (r->file, '/') != NULL)
    {
      execve (r->file, r->argv, r->envp);
      return;
    }
  char path[4096];
  size_t flen = strlen (r->file);
  gboolean got_eacces = FALSE;
  const char *p = r->search;
  for (;;)
    {
      const char *end = strchr (p, ':');
      size_t dlen = end != NULL ? (size_t) (end - p) : strlen (p);
      if (dlen + 1 + flen + 1 <= sizeof path)
        {
          memcpy (path, p, dlen);
          size_t at = dlen;
          if (dlen > 0)
            path[at++] = '/';
          memcpy (path + at, r->file, flen + 1);
          execve (path, r->argv, r->envp);
          switch (errno)
            {
            case EACCES:
              got_eacces = TRUE;
              break;
            case ENOENT:
            case ESTALE:
            case ENOTDIR:
            case ENODEV:
            case ETIMEDOUT:
            case ENAMETOOLONG:
              break;
            default:
              return;
            }
        }
      if (end == NULL)
        break;
      p = end + 1;
    }
  errno = got_eacces ? EACCES : ENOENT;
}

static int
spawn_child (void *data)
{
  SpawnRequest *r = data;
  struct sigaction dfl;
  memset (&dfl, 0, sizeof dfl);
  dfl.sa_handler = SIG_DFL;
  for (int sig = 1; sig < NSIG; sig++)
    if (sigismember (r->reset, sig) == 1)
      sigaction (sig, &dfl, NULL);

  sigset_t none;
  sigemptyset (&none);
  if (setpgid (0, 0) != 0 || dup2 (r->devnull, 0) < 0 || dup2 (r->out_w, 1) < 0
      || dup2 (r->err_w, 2) < 0 || (r->cwd != NULL && chdir (r->cwd) != 0)
      || (r->nofile != NULL && setrlimit (RLIMIT_NOFILE, r->nofile) != 0))
    goto fail;
  /* Belt and braces: the agent's own fds are O_CLOEXEC, but a library may
   * have opened one without it. */
  closefrom (3);
  sigprocmask (SIG_SETMASK, &none, NULL);
  child_exec_search (r);
fail:
  r->err = errno != 0 ? errno : EINVAL;
  _exit (127);
}

/* Returns 0 with *pid and *pidfd set, or the errno of the failure (the
 * child, if any, already reaped).  PIDFD NULL: no pidfd (slot threads,
 * whose leaders are signalled by pid: see signal_leader). */
static int
spawn_request_on (guint8 *stack, gboolean masked, SpawnRequest *r, pid_t *pid, int *pidfd)
{
  sigset_t all, old;
  if (!masked)
    {
      sigfillset (&all);
      pthread_sigmask (SIG_SETMASK, &all, &old);
    }
  r->err = 0;
  if (pidfd != NULL)
    *pidfd = -1;
  pid_t child
      = clone (spawn_child, stack + CHILD_STACK_SIZE,
               CLONE_VM | CLONE_VFORK | (pidfd != NULL ? CLONE_PIDFD : 0) | SIGCHLD, r, pidfd);
  int errsv = errno;
  if (!masked)
    pthread_sigmask (SIG_SETMASK, &old, NULL);
  if (child < 0)
    return errsv;
  if (r->err != 0)
    {
      while (waitpid (child, NULL, 0) < 0 && errno == EINTR)
        ;
      if (pidfd != NULL)
        close_fd (pidfd);
      return r->err;
    }
  /* CLONE_PIDFD is new in Linux 5.2; an older kernel ignores the flag. */
  if (pidfd != NULL && *pidfd < 0)
    *pidfd = pidfd_open (child, 0);
  *pid = child;
  return 0;
}

static int
spawn_request (DatcRunner *runner, SpawnRequest *r, pid_t *pid, int *pidfd)
{
  return spawn_request_on (runner->stack, FALSE, r, pid, pidfd);
}

static int
spawn_on (guint8 *stack, gboolean masked, SpawnRequest *r, const char *task_path, pid_t *pid,
          int *pidfd)
{
  const char *name = r->argv[0];
  if (task_path == NULL || strchr (name, '/') != NULL)
    {
      const char *agent_path = g_getenv ("PATH");
      r->file = name;
      r->search = agent_path != NULL ? agent_path : "/bin:/usr/bin";
      return spawn_request_on (stack, masked, r, pid, pidfd);
    }
  g_autofree gchar *file = search_path (name, task_path);
  if (file == NULL)
    return errno;
  r->file = file;
  r->search = NULL;
  return spawn_request_on (stack, masked, r, pid, pidfd);
}

static int
spawn (DatcRunner *runner, SpawnRequest *r, const char *task_path, pid_t *pid, int *pidfd)
{
  return spawn_on (runner->stack, FALSE, r, task_path, pid, pidfd);
}

/* Why did the spawn fail?  Checked only after a failure, so a task with a
 * cwd pays nothing when all is well.  (chdir and exec both say ENOENT.) */
static void
queue_spawn_errno (DatcRunner *runner, const DatcTask *task, const char *name, int errsv)
{
  const char *cwd = task->spec.cwd;
  if (cwd != NULL)
    {
      struct stat st;
      int cwd_errno = 0;
      if (stat (cwd, &st) != 0)
        cwd_errno = errno;
      else if (!S_ISDIR (st.st_mode))
        cwd_errno = ENOTDIR;
      else if (access (cwd, X_OK) != 0)
        cwd_errno = errno;
      if (cwd_errno != 0)
        {
          queue_spawn_failure (
              runner, task, 126,
              g_strdup_printf ("cannot change to directory %s: %s", cwd, g_strerror (cwd_errno)));
          return;
        }
    }

  if (errsv == ENOENT)
    queue_spawn_failure (runner, task, 127, g_strdup_printf ("%s: command not found", name));
  else if (errsv == EACCES)
    queue_spawn_failure (runner, task, 126, g_strdup_printf ("%s: permission denied", name));
  else
    queue_spawn_failure (runner, task, 126, g_strdup_printf ("%s: %s", name, g_strerror (errsv)));
}

/* Both ends stay blocking: O_NONBLOCK would be shared with the child's
 * stdout through the open file, and many programs fail on EAGAIN.  Our
 * reads use RWF_NOWAIT instead, which costs no extra syscall. */
static gboolean
open_capture_pipe (int *read_fd, int *write_fd, GError **error)
{
  int fds[2];
  if (pipe2 (fds, O_CLOEXEC) != 0)
    return set_errno_error (error, errno, "pipe2");
  *read_fd = fds[0];
  *write_fd = fd_above_stdio (fds[1]);
  if (*write_fd < 0)
    {
      int errsv = errno;
      close_fd (read_fd);
      return set_errno_error (error, errsv, "pipe");
    }
  return TRUE;
}

static gboolean
watch_add (DatcRunner *runner, int fd, guint64 serial, int kind, GError **error)
{
  struct epoll_event ev = { .events = EPOLLIN, .data.u64 = serial << 2 | kind };
  if (epoll_ctl (runner->epfd, EPOLL_CTL_ADD, fd, &ev) != 0)
    return set_errno_error (error, errno, "epoll_ctl");
  return TRUE;
}

/* The agent's time slice (its main thread's, and each slot thread's).
 * When a task ends, the kernel wakes the agent
 * on the core it last ran on, where another task is usually running (and
 * after each spawn, when the child execs, on the child's core); with the
 * default slice (1.4 ms on 2 cores, more with more) the agent often
 * waited there behind a task while the core the ended task left sat
 * idle, and the next task started only after that (perf sched: a third
 * of the idle time of `bench-core spawn`).  With a short slice its
 * deadline comes first, so it preempts the running task at once (EEVDF;
 * Linux 6.12 takes a slice of one's own, older kernels ignore the
 * request), does its few tens of microseconds of work and sleeps again.
 * It gets no more CPU than before, only sooner. */
#define AGENT_SLICE_NS (100 * 1000)

/* struct sched_attr as the kernel takes it (its first version): glibc
 * 2.36 has no wrapper, and <linux/sched/types.h> clashes with <sched.h>. */
typedef struct {
  guint32 size, policy;
  guint64 flags;
  gint32 nice;
  guint32 priority;
  guint64 runtime, deadline, period;
} SchedAttr;

/* Only for the normal policy at nice 0 or above: reset-on-fork gives the
 * tasks the default slice back, but it would also turn a negative nice to
 * 0 in them, and a batch or idle policy is the site's choice. */
void
datc_runner_ask_short_slice (void)
{
  SchedAttr attr = { 0 };
  if (syscall (SYS_sched_getattr, 0, &attr, sizeof attr, 0) != 0)
    return;
  if (attr.policy != SCHED_NORMAL || attr.nice < 0)
    return;
  attr.size = sizeof attr;
  attr.flags = SCHED_FLAG_RESET_ON_FORK;
  attr.runtime = AGENT_SLICE_NS;
  if (syscall (SYS_sched_setattr, 0, &attr, 0) != 0)
    g_debug ("sched_setattr: %s", g_strerror (errno));
}

/* --- slot threads (issue 17 item 4) -------------------------------------
 *
 * Why.  A task's end wakes its waiter on the core the waiter last ran on.
 * For a bare posix_spawn + wait loop that is the ending task's core (now
 * free) 70% of the time; for the single-threaded runner 44%: woken on the
 * other task's core, it waited there while the freed one idled (11-12% of
 * two cores against 6-7% for the bare loop; benchmarks/README.md, spawn
 * ratio).  So each slot has a thread that spawns a task and blocks in
 * waitid on it: it last ran where its child started, and the child's exit
 * wakes it on the freed core.  Woken, it reaps, at once spawns the next
 * ready task (argv, env and pipes prepared by the main thread), and only
 * then hands the ended task to the main thread, which reads the pipes'
 * leftovers and builds the result off the critical path.  The main thread
 * is told at once only when the ready queue runs low (fewer than one task
 * per slot), a slot idles, or a task was stopped; otherwise it collects
 * within ENDED_LINGER_US (datc_runner_next_timeout_ms): one wake-up per
 * task cost as much CPU as the placement saved.
 *
 * What holds as before.  One ready queue, so a task never waits behind a
 * long one while another slot is free.  A task starts only while the
 * agent's lease holds (datc_runner_set_start_until: the master heard
 * from recently) and, with a walltime, only if its est_runtime fits what
 * is left, checked when it starts, not when it was queued; one that may
 * not start waits (the lease) or is refused (the walltime).  A stop or
 * cancel of a ready task ends it unstarted with its status.  Signals
 * reach only a leader that has not exited (TASK_RUNNING), so never a
 * reused pid.  Ready tasks hold their pipes: the agent reserves fds for
 * max_held tasks.
 *
 * A slot thread's task has no pidfd: its thread waits by pid, and the
 * leader is signalled by pid while it is TASK_RUNNING (signal_leader).
 *
 * Who touches what.  Only the main thread touches the runner's tables,
 * the epoll set and the captures; a slot thread touches a task's pid,
 * status and state, the ready queue and `ended`, under runner->lock. */

/* The main thread, told of ended tasks in batches, collects them at the
 * latest this long after the first. */
#define ENDED_LINGER_US 5000
#define ENDED_RECENT_US (100 * 1000)

static void
ended_push (DatcRunner *runner, RunTask *t, gboolean tell)
{
  t->state = TASK_ENDED;
  runner->last_ended_us = g_get_monotonic_time ();
  if (runner->ended->len == 0)
    runner->ended_since = runner->last_ended_us;
  /* A batch's first task, when the main thread would sleep past the
   * linger (it last asked before anything had ended): told now. */
  if (runner->ended->len == 0 && runner->main_due > g_get_monotonic_time () + ENDED_LINGER_US)
    tell = TRUE;
  g_ptr_array_add (runner->ended, t);
  if (tell && !runner->told)
    {
      runner->told = TRUE;
      guint64 one = 1;
      if (write (runner->wakefd, &one, sizeof one) < 0)
        g_debug ("runner: eventfd write: %s", g_strerror (errno));
    }
}

/* Locked: the next task that may start now, or NULL (none ready, or the
 * lease has lapsed: they wait for datc_runner_set_start_until).  A task
 * whose est_runtime no longer fits the walltime is refused on the way. */
static RunTask *
take_ready (DatcRunner *runner)
{
  RunTask *t;
  while ((t = g_queue_peek_head (&runner->ready)) != NULL)
    {
      if (runner->quit || g_get_monotonic_time () >= runner->start_until)
        return NULL;
      g_queue_pop_head (&runner->ready);
      if (runner->work_end_us > 0 && t->est_runtime_ms > 0
          && g_get_real_time () + (gint64) t->est_runtime_ms * 1000 > runner->work_end_us)
        {
          t->unstarted = DATC_STATUS_REFUSED;
          t->unstarted_why = "expected runtime does not fit the walltime left";
          ended_push (runner, t, TRUE);
          continue;
        }
      t->state = TASK_SPAWNING;
      runner->spawning++;
      return t;
    }
  return NULL;
}

/* Unlocked: the task is SPAWNING, so nothing else touches its pid. */
static void
slot_spawn (Slot *slot, RunTask *t)
{
  DatcRunner *runner = slot->runner;
  SpawnRequest req = {
    .argv = t->argv,
    .envp = t->envp != NULL ? t->envp : environ,
    .reset = &runner->reset,
    .cwd = t->cwd,
    .nofile = runner->restore_nofile ? &runner->nofile : NULL,
    .devnull = runner->devnull,
    .out_w = t->out.hold,
    .err_w = t->err.hold,
  };
  t->started_us = g_get_real_time ();
  t->started_mono = g_get_monotonic_time ();
  int rc = spawn_on (slot->stack, TRUE, &req, t->task_path, &t->pid, NULL);
  if (rc == ENOEXEC && t->sh != NULL)
    {
      char *sh_argv[] = { (char *) "/bin/sh", (char *) "-c", t->sh, NULL };
      req.argv = sh_argv;
      req.file = "/bin/sh";
      req.search = NULL;
      rc = spawn_request_on (slot->stack, TRUE, &req, &t->pid, NULL);
    }
  t->spawn_err = rc;
}

/* Locked, after slot_spawn: the task runs (or failed to start). */
static void
slot_spawned (Slot *slot, RunTask *t)
{
  DatcRunner *runner = slot->runner;
  runner->spawning--;
  if (t->spawn_err != 0)
    {
      slot->current = NULL;
      ended_push (runner, t, TRUE);
      return;
    }
  t->state = TASK_RUNNING;
  if (t->timeout_ms > 0)
    t->deadline = t->started_mono + (gint64) t->timeout_ms * 1000;
  if (runner->quit)
    {
      kill (-t->pid, SIGKILL);
      signal_leader (t, SIGKILL);
    }
  else if (t->stop != STOP_NONE)
    {
      /* stopped while it was being spawned */
      kill (-t->pid, SIGTERM);
      signal_leader (t, SIGTERM);
      t->kill_at = g_get_monotonic_time () + (gint64) runner->kill_grace_ms * 1000;
    }
}

static void *
slot_main (void *data)
{
  Slot *slot = data;
  DatcRunner *runner = slot->runner;
  /* Reset-on-fork: a new thread does not inherit the agent's. */
  datc_runner_ask_short_slice ();

  pthread_mutex_lock (&runner->lock);
  for (;;)
    {
      if (slot->current == NULL)
        {
          if (runner->quit)
            break;
          RunTask *t = take_ready (runner);
          if (t == NULL)
            {
              pthread_cond_wait (&runner->ready_cond, &runner->lock);
              continue;
            }
          slot->current = t;
          pthread_mutex_unlock (&runner->lock);
          slot_spawn (slot, t);
          pthread_mutex_lock (&runner->lock);
          slot_spawned (slot, t);
          continue;
        }

      RunTask *t = slot->current;
      pthread_mutex_unlock (&runner->lock);
      int rc;
      /* By pid, not pidfd (P_PIDFD is Linux 5.4, CLONE_PIDFD 5.2): only
       * this thread reaps it, so the pid is its until then. */
      while ((rc = waitid (P_PID, t->pid, &t->info, WEXITED | WNOWAIT)) != 0 && errno == EINTR)
        ;
      t->wait_rc = rc;
      t->wait_errno = rc != 0 ? errno : 0;
      pthread_mutex_lock (&runner->lock);
      t->state = TASK_EXITED;
      pthread_mutex_unlock (&runner->lock);
      if (rc == 0)
        {
          /* As task_finish: whatever the leader left behind in its group,
           * then the leader, whose zombie kept the pgid from reuse. */
          if (kill (-t->pid, SIGKILL) != 0 && errno != ESRCH)
            g_debug ("runner: kill group %d: %s", (int) t->pid, g_strerror (errno));
          siginfo_t reaped;
          while (waitid (P_PID, t->pid, &reaped, WEXITED) != 0 && errno == EINTR)
            ;
        }
      t->finished_us = g_get_real_time ();

      /* The successor first: this is what the slot thread is for. */
      pthread_mutex_lock (&runner->lock);
      RunTask *n = take_ready (runner);
      slot->current = n;
      if (n != NULL)
        {
          pthread_mutex_unlock (&runner->lock);
          slot_spawn (slot, n);
          pthread_mutex_lock (&runner->lock);
          slot_spawned (slot, n);
        }
      ended_push (runner, t,
                  runner->quit || t->stop != STOP_NONE || slot->current == NULL
                      || g_queue_get_length (&runner->ready) < runner->n_slots);
    }
  pthread_mutex_unlock (&runner->lock);
  return NULL;
}

gboolean
datc_runner_use_slot_threads (DatcRunner *runner, guint slots, guint max_held, gint64 work_end_us,
                              GError **error)
{
  g_return_val_if_fail (runner != NULL, FALSE);
  g_return_val_if_fail (runner->n_slots == 0 && runner->tasks->len == 0, FALSE);
  g_return_val_if_fail (slots > 0 && max_held >= slots, FALSE);

  runner->slots = g_new0 (Slot, slots);
  runner->max_held = max_held;
  runner->work_end_us = work_end_us;
  for (guint i = 0; i < slots; i++)
    {
      Slot *slot = &runner->slots[i];
      slot->runner = runner;
      slot->stack = mmap (NULL, CHILD_STACK_SIZE, PROT_READ | PROT_WRITE,
                          MAP_PRIVATE | MAP_ANONYMOUS | MAP_STACK, -1, 0);
      if (slot->stack == MAP_FAILED)
        {
          int errsv = errno;
          slot->stack = NULL;
          slots_stop (runner);
          return set_errno_error (error, errsv, "mmap (child stack)");
        }
      runner->n_stacks = i + 1;
    }
  /* Every signal blocked in the slot threads: the agent takes its own
   * through a signalfd, and the spawns need them blocked anyway. */
  sigset_t all, old;
  sigfillset (&all);
  pthread_sigmask (SIG_SETMASK, &all, &old);
  for (guint i = 0; i < slots; i++)
    {
      int rc = pthread_create (&runner->slots[i].thread, NULL, slot_main, &runner->slots[i]);
      if (rc != 0)
        {
          pthread_sigmask (SIG_SETMASK, &old, NULL);
          return set_errno_error (error, rc, "pthread_create");
        }
      pthread_mutex_lock (&runner->lock);
      runner->n_slots = i + 1;
      pthread_mutex_unlock (&runner->lock);
    }
  pthread_sigmask (SIG_SETMASK, &old, NULL);
  return TRUE;
}

void
datc_runner_set_start_until (DatcRunner *runner, gint64 until)
{
  g_return_if_fail (runner != NULL);
  if (runner->n_slots == 0)
    return;
  pthread_mutex_lock (&runner->lock);
  gint64 now = g_get_monotonic_time ();
  gboolean lapsed = runner->start_until <= now;
  runner->start_until = until;
  if (lapsed && until > now && runner->ready.length > 0)
    pthread_cond_broadcast (&runner->ready_cond);
  pthread_mutex_unlock (&runner->lock);
}

/* Kills what runs in the slots and joins their threads; ready tasks stay
 * in the table, unstarted, for datc_runner_free. */
static void
slots_stop (DatcRunner *runner)
{
  if (runner->slots == NULL)
    return;
  pthread_mutex_lock (&runner->lock);
  runner->quit = TRUE;
  for (guint i = 0; i < runner->n_slots; i++)
    {
      RunTask *t = runner->slots[i].current;
      if (t != NULL && t->state == TASK_RUNNING)
        {
          kill (-t->pid, SIGKILL);
          signal_leader (t, SIGKILL);
        }
    }
  pthread_cond_broadcast (&runner->ready_cond);
  pthread_mutex_unlock (&runner->lock);
  for (guint i = 0; i < runner->n_slots; i++)
    pthread_join (runner->slots[i].thread, NULL);
  for (guint i = 0; i < runner->n_stacks; i++)
    munmap (runner->slots[i].stack, CHILD_STACK_SIZE);
  runner->n_stacks = 0;
  g_queue_clear (&runner->ready);
  g_clear_pointer (&runner->slots, g_free);
  runner->n_slots = 0;
}

gboolean
datc_runner_has_room (DatcRunner *runner, guint slots)
{
  g_return_val_if_fail (runner != NULL, FALSE);
  if (runner->n_slots == 0)
    return runner->tasks->len < slots;
  return runner->tasks->len < runner->max_held;
}

guint
datc_runner_waiting (DatcRunner *runner)
{
  g_return_val_if_fail (runner != NULL, 0);
  if (runner->n_slots == 0)
    return 0;
  pthread_mutex_lock (&runner->lock);
  guint waiting = runner->ready.length + runner->spawning;
  pthread_mutex_unlock (&runner->lock);
  return waiting;
}

guint
datc_runner_executing (DatcRunner *runner)
{
  g_return_val_if_fail (runner != NULL, 0);
  if (runner->n_slots == 0)
    return runner->tasks->len;
  pthread_mutex_lock (&runner->lock);
  guint not_running = runner->ready.length + runner->spawning + runner->ended->len;
  pthread_mutex_unlock (&runner->lock);
  return runner->tasks->len - MIN (not_running, runner->tasks->len);
}

/* Into the runner's tables (task_remove takes it out). */
static void
task_add (DatcRunner *runner, RunTask *t)
{
  t->index = runner->tasks->len;
  g_ptr_array_add (runner->tasks, t);
  g_hash_table_insert (runner->by_serial, &t->serial, t);
  g_hash_table_insert (runner->by_key, &t->key, t);
}

/* Registers a task and puts it in the ready queue for the first free
 * slot thread. */
static gboolean
stage_task (DatcRunner *runner, const DatcTask *task, DatcTaskKey key, char *const *argv,
            char **envp, const char *task_path, gboolean direct_line, int out_r, int out_w,
            int err_r, int err_w, GError **error)
{
  RunTask *t = g_new0 (RunTask, 1);
  t->key = key;
  t->serial = runner->next_serial++;
  t->pidfd = -1;
  t->out.fd = out_r;
  t->err.fd = err_r;
  t->out.hold = out_w;
  t->err.hold = err_w;
  t->timeout_ms = task->spec.timeout_ms;
  t->est_runtime_ms = task->spec.est_runtime_ms;
  t->in_slots = TRUE;
  /* Before the spawn, so a kill right after it still shows as a rise; read
   * here rather than on the slot thread, whose every µs delays the spawn
   * (a rise in between, a task or two earlier, would count as this one's
   * evidence only if it too ends by SIGKILL). */
  t->oom_kills = datc_oom_watch_kills (runner->oom);
  t->argv = g_strdupv ((gchar **) argv);
  t->envp = envp != NULL ? g_strdupv (envp) : NULL;
  t->task_path = g_strdup (task_path);
  t->cwd = g_strdup (task->spec.cwd);
  t->sh = direct_line ? g_strdup (task->spec.sh) : NULL;
  if (!watch_add (runner, t->out.fd, t->serial, WATCH_OUT, error)
      || !watch_add (runner, t->err.fd, t->serial, WATCH_ERR, error))
    {
      run_task_free (t);
      return FALSE;
    }
  task_add (runner, t);

  pthread_mutex_lock (&runner->lock);
  t->state = TASK_STAGED;
  g_queue_push_tail (&runner->ready, t);
  pthread_cond_signal (&runner->ready_cond);
  pthread_mutex_unlock (&runner->lock);
  return TRUE;
}

gboolean
datc_runner_start (DatcRunner *runner, const DatcTask *task, GError **error)
{
  g_return_val_if_fail (runner != NULL, FALSE);
  g_return_val_if_fail (task != NULL, FALSE);

  DatcTaskKey key = { .id = task->id, .attempt = task->attempt };
  if (g_hash_table_contains (runner->by_key, &key))
    {
      g_set_error (error, G_FILE_ERROR, G_FILE_ERROR_EXIST,
                   "task %" G_GUINT64_FORMAT ".%u is already running", task->id, task->attempt);
      return FALSE;
    }

  const DatcTaskSpec *spec = &task->spec;
  g_auto (GStrv) line_argv = NULL;
  gboolean direct_line = FALSE;
  char *const *argv;
  if (spec->argv != NULL)
    {
      if (spec->argv[0] == NULL)
        {
          queue_spawn_failure (runner, task, 127, g_strdup ("empty argv"));
          return TRUE;
        }
      argv = spec->argv;
    }
  else if (spec->sh != NULL)
    {
      line_argv = datc_command_argv (spec->sh, &direct_line);
      argv = line_argv;
    }
  else
    {
      queue_spawn_failure (runner, task, 127, g_strdup ("nothing to run"));
      return TRUE;
    }

  g_autofree char **envp = NULL;
  const char *task_path = NULL;
  if (spec->env != NULL && spec->env[0] != NULL)
    {
      const char *bad = NULL;
      envp = merge_env (spec->env, &task_path, &bad);
      if (envp == NULL)
        {
          queue_spawn_failure (runner, task, 126,
                               g_strdup_printf ("bad environment entry \"%s\"", bad));
          return TRUE;
        }
    }

  int out_r = -1, out_w = -1, err_r = -1, err_w = -1;
  if (!open_capture_pipe (&out_r, &out_w, error))
    return FALSE;
  if (!open_capture_pipe (&err_r, &err_w, error))
    {
      close_fd (&out_r);
      close_fd (&out_w);
      return FALSE;
    }

  if (runner->n_slots > 0)
    return stage_task (runner, task, key, argv, envp, task_path, direct_line, out_r, out_w, err_r,
                       err_w, error);

  SpawnRequest req = {
    .argv = argv,
    .envp = envp != NULL ? envp : environ,
    .reset = &runner->reset,
    .cwd = spec->cwd,
    .nofile = runner->restore_nofile ? &runner->nofile : NULL,
    .devnull = runner->devnull,
    .out_w = out_w,
    .err_w = err_w,
  };
  pid_t pid = -1;
  int pidfd = -1;
  /* Before the spawn, so a kill right after it still shows as a rise. */
  gint64 oom_kills = datc_oom_watch_kills (runner->oom);
  gint64 started_us = g_get_real_time ();
  gint64 started_mono = g_get_monotonic_time ();
  int rc = spawn (runner, &req, task_path, &pid, &pidfd);
  if (rc == ENOEXEC && direct_line)
    {
      /* A script without "#!": the shell would run it, so let it. */
      char *sh_argv[] = { (char *) "/bin/sh", (char *) "-c", spec->sh, NULL };
      req.argv = sh_argv;
      req.file = "/bin/sh";
      req.search = NULL;
      rc = spawn_request (runner, &req, &pid, &pidfd);
    }
  if (rc != 0)
    {
      close_fd (&out_w);
      close_fd (&err_w);
      close_fd (&out_r);
      close_fd (&err_r);
      queue_spawn_errno (runner, task, argv[0], rc);
      return TRUE;
    }

  RunTask *t = g_new0 (RunTask, 1);
  t->key = key;
  t->serial = runner->next_serial++;
  t->pid = pid;
  t->out.fd = out_r;
  t->err.fd = err_r;
  t->out.hold = out_w;
  t->err.hold = err_w;
  t->started_us = started_us;
  t->started_mono = started_mono;
  t->oom_kills = oom_kills;
  t->timeout_ms = spec->timeout_ms;
  if (spec->timeout_ms > 0)
    t->deadline = g_get_monotonic_time () + (gint64) spec->timeout_ms * 1000;

  t->pidfd = pidfd;
  if (t->pidfd < 0)
    {
      int errsv = errno;
      task_kill_and_reap (pid, -1);
      run_task_free (t);
      return set_errno_error (error, errsv, "pidfd_open");
    }
  if (!watch_add (runner, t->pidfd, t->serial, WATCH_PID, error)
      || !watch_add (runner, t->out.fd, t->serial, WATCH_OUT, error)
      || !watch_add (runner, t->err.fd, t->serial, WATCH_ERR, error))
    {
      close_fd (&t->pidfd);
      close_fd (&t->out.fd);
      close_fd (&t->err.fd);
      task_kill_and_reap (pid, -1);
      run_task_free (t);
      return FALSE;
    }

  task_add (runner, t);
  return TRUE;
}

guint
datc_runner_reserve_fds (DatcRunner *runner, guint tasks, guint reserved)
{
  g_return_val_if_fail (runner != NULL, 0);
  struct rlimit now;
  if (getrlimit (RLIMIT_NOFILE, &now) != 0)
    return tasks;
  rlim_t need = (rlim_t) tasks * DATC_RUNNER_FDS_PER_TASK + reserved;
  if (now.rlim_cur != RLIM_INFINITY && now.rlim_cur < need)
    {
      struct rlimit raised = now;
      raised.rlim_cur = now.rlim_max == RLIM_INFINITY ? need : MIN (need, now.rlim_max);
      if (raised.rlim_cur > now.rlim_cur && setrlimit (RLIMIT_NOFILE, &raised) == 0)
        {
          if (!runner->restore_nofile)
            {
              runner->nofile = now;
              runner->restore_nofile = TRUE;
            }
          now = raised;
        }
    }
  if (now.rlim_cur == RLIM_INFINITY || now.rlim_cur >= need)
    return tasks;
  return now.rlim_cur > reserved ? (guint) ((now.rlim_cur - reserved) / DATC_RUNNER_FDS_PER_TASK)
                                 : 0;
}

guint
datc_runner_running (DatcRunner *runner)
{
  g_return_val_if_fail (runner != NULL, 0);
  return runner->tasks->len;
}

int
datc_runner_get_fd (DatcRunner *runner)
{
  g_return_val_if_fail (runner != NULL, -1);
  return runner->epfd;
}

/* --- output ------------------------------------------------------------- */

static void
capture_keep (Capture *cap, const guint8 *data, gsize len, gsize limit)
{
  gsize have = cap->kept != NULL ? cap->kept->len : 0;
  gsize take = have < limit ? MIN (len, limit - have) : 0;
  if (take > 0)
    {
      if (cap->kept == NULL)
        cap->kept = g_byte_array_sized_new (MIN (limit, MAX (take, 4096u)));
      g_byte_array_append (cap->kept, data, take);
    }
  cap->dropped += len - take;
}

/* One read that never blocks.  RWF_NOWAIT works on pipes on the kernels we
 * support; should it not, the read end is made O_NONBLOCK (one fcntl per
 * pipe, from then on). */
static ssize_t
capture_read_once (DatcRunner *runner, Capture *cap)
{
  if (!runner->no_rwf_nowait)
    {
      struct iovec iov = { .iov_base = runner->buf, .iov_len = READ_CHUNK };
      ssize_t n = preadv2 (cap->fd, &iov, 1, -1, RWF_NOWAIT);
      if (n >= 0 || errno != EOPNOTSUPP)
        return n;
      runner->no_rwf_nowait = TRUE;
    }
  if (!cap->nonblocking)
    {
      if (fcntl (cap->fd, F_SETFL, O_NONBLOCK) != 0)
        return -1;
      cap->nonblocking = TRUE;
    }
  return read (cap->fd, runner->buf, READ_CHUNK);
}

/* Reads up to `max_reads` chunks; closes the capture at EOF or on error.
 * With `until_short` it stops at the first short read: the pipe was empty
 * at that moment, which is all reading the leftovers after the leader's
 * death needs. */
static void
capture_read (DatcRunner *runner, RunTask *task, Capture *cap, int max_reads, gboolean until_short)
{
  for (int i = 0; cap->fd >= 0 && i < max_reads; i++)
    {
      ssize_t n = capture_read_once (runner, cap);
      if (n > 0)
        {
          capture_keep (cap, runner->buf, n, runner->output_limit);
          if (until_short && (gsize) n < READ_CHUNK)
            return;
          continue;
        }
      if (n < 0 && errno == EINTR)
        continue;
      if (n < 0 && errno == EAGAIN)
        return;
      if (n < 0)
        g_debug ("runner: task %" G_GUINT64_FORMAT ": read: %s", task->key.id, g_strerror (errno));
      close_fd (&cap->fd);
    }
}

/* The kept bytes, ending with the marker when some were dropped.  The whole
 * stays within DATC_OUTPUT_MAX (what a RESULT may carry): with a limit that
 * close to the maximum, kept bytes give way to the marker and count as
 * dropped. */
static GBytes *
capture_finish (Capture *cap, const char *stream)
{
  if (cap->dropped > 0)
    {
      if (cap->kept == NULL)
        cap->kept = g_byte_array_new ();
      g_autofree gchar *marker = NULL;
      for (;;)
        {
          g_free (marker);
          marker = g_strdup_printf ("\n[datc: %" G_GUINT64_FORMAT " bytes of %s dropped]\n",
                                    cap->dropped, stream);
          gsize total = cap->kept->len + strlen (marker);
          if (total <= DATC_OUTPUT_MAX)
            break;
          gsize cut = MIN (total - DATC_OUTPUT_MAX, cap->kept->len);
          g_byte_array_set_size (cap->kept, cap->kept->len - cut);
          cap->dropped += cut;
        }
      g_byte_array_append (cap->kept, (const guint8 *) marker, strlen (marker));
    }
  if (cap->kept == NULL)
    return g_bytes_new (NULL, 0);
  return g_byte_array_free_to_bytes (g_steal_pointer (&cap->kept));
}

/* --- ending ------------------------------------------------------------- */

static void
task_remove (DatcRunner *runner, RunTask *task)
{
  g_hash_table_remove (runner->by_serial, &task->serial);
  g_hash_table_remove (runner->by_key, &task->key);
  RunTask *last = g_ptr_array_index (runner->tasks, runner->tasks->len - 1);
  last->index = task->index;
  g_ptr_array_remove_index_fast (runner->tasks, task->index);
}

static void task_conclude (DatcRunner *runner, RunTask *task, int rc, const siginfo_t *info_p,
                           gint64 finished_us, GPtrArray *finished);

/* The leader's pidfd is readable: it has exited.  Learns how (without
 * reaping), kills what is left of the group, reaps, reads the pipes'
 * leftovers, reports. */
static void
task_finish (DatcRunner *runner, RunTask *task, GPtrArray *finished)
{
  siginfo_t info = { 0 };
  int rc;
  while ((rc = waitid (P_PID, task->pid, &info, WEXITED | WNOWAIT | WNOHANG)) != 0
         && errno == EINTR)
    ;
  if (rc != 0)
    {
      /* ECHILD: someone else reaped our child (SIGCHLD set to SIG_IGN, or a
       * stray waitpid(-1)).  The status is lost and the pgid may be reused,
       * so do not signal it. */
      g_warning ("runner: task %" G_GUINT64_FORMAT ": leader %d: waitid: %s", task->key.id,
                 (int) task->pid, g_strerror (errno));
    }
  else if (info.si_pid == 0)
    {
      return; /* not exited after all; stay registered */
    }
  else
    {
      if (kill (-task->pid, SIGKILL) != 0 && errno != ESRCH)
        g_debug ("runner: kill group %d: %s", (int) task->pid, g_strerror (errno));
      siginfo_t reaped;
      while (waitid (P_PID, task->pid, &reaped, WEXITED) != 0 && errno == EINTR)
        ;
    }
  gint64 finished_us = g_get_real_time ();
  task_conclude (runner, task, rc, &info, finished_us, finished);
}

/* The leader is reaped (rc 0, `info` its status) or its status lost (rc
 * != 0): reads the pipes' leftovers, reports, forgets the task. */
static void
task_conclude (DatcRunner *runner, RunTask *task, int rc, const siginfo_t *info_p,
               gint64 finished_us, GPtrArray *finished)
{
  siginfo_t info = *info_p;
  close_fd (&task->out.hold);
  close_fd (&task->err.hold);
  capture_read (runner, task, &task->out, LEFTOVER_READS_MAX, TRUE);
  capture_read (runner, task, &task->err, LEFTOVER_READS_MAX, TRUE);
  close_fd (&task->out.fd);
  close_fd (&task->err.fd);
  close_fd (&task->pidfd);

  DatcResult *result = datc_result_new (task->key.id, task->key.attempt);
  result->started_us = task->started_us;
  result->finished_us = finished_us;
  if (rc != 0)
    {
      result->status = DATC_STATUS_SIGNALED;
      result->exit_code = -1;
      result->signal = 0;
      g_free (result->message);
      result->message = g_strdup ("exit status lost: the leader was reaped elsewhere");
    }
  else if (info.si_code == CLD_EXITED)
    {
      result->status = DATC_STATUS_EXITED;
      result->exit_code = info.si_status;
      result->signal = 0;
    }
  else
    {
      /* CLD_KILLED or CLD_DUMPED; exit_code as a shell's $? would show it */
      result->status = DATC_STATUS_SIGNALED;
      result->signal = info.si_status;
      result->exit_code = 128 + info.si_status;
      /* The OOM killer sends SIGKILL; so do users and schedulers: only
       * what the node recorded tells them apart. */
      if (info.si_status == SIGKILL && task->stop == STOP_NONE)
        result->oom_evidence
            = datc_oom_watch_evidence (runner->oom, task->oom_kills, task->pid, task->started_mono);
    }
  if (task->stop == STOP_TIMEOUT)
    {
      result->status = DATC_STATUS_TIMEOUT;
      g_free (result->message);
      result->message = g_strdup_printf ("timed out after %u ms", task->timeout_ms);
    }
  else if (task->stop == STOP_CANCEL)
    result->status = task->stop_status;

  g_clear_pointer (&result->out, g_bytes_unref);
  g_clear_pointer (&result->err, g_bytes_unref);
  result->out = capture_finish (&task->out, "stdout");
  result->err = capture_finish (&task->err, "stderr");
  result->out_dropped = task->out.dropped;
  result->err_dropped = task->err.dropped;
  g_ptr_array_add (finished, result);

  task_remove (runner, task);
  run_task_free (task);
}

/* Main thread: finishes the tasks the slot threads have done with. */
static void
collect_ended (DatcRunner *runner, GPtrArray *finished)
{
  if (runner->n_slots == 0)
    return;
  pthread_mutex_lock (&runner->lock);
  if (runner->ended->len == 0)
    {
      pthread_mutex_unlock (&runner->lock);
      return;
    }
  g_autoptr (GPtrArray) ended = g_steal_pointer (&runner->ended);
  runner->ended = g_ptr_array_new ();
  runner->told = FALSE;
  pthread_mutex_unlock (&runner->lock);

  runner->collecting = TRUE;
  for (guint i = 0; i < ended->len; i++)
    {
      RunTask *t = ended->pdata[i];
      if (t->spawn_err != 0 || t->pid <= 0)
        {
          if (t->spawn_err != 0)
            {
              DatcTask fake = { .id = t->key.id, .attempt = t->key.attempt };
              fake.spec.cwd = t->cwd;
              queue_spawn_errno (runner, &fake, t->argv[0], t->spawn_err);
            }
          else
            {
              /* Never started: stopped (a cancel, a drain) or refused, as
               * the agent says of a task it never gave the runner. */
              DatcResult *r = datc_result_new (t->key.id, t->key.attempt);
              r->status = t->unstarted != 0 ? t->unstarted : t->stop_status;
              r->exit_code = 0;
              r->message
                  = g_strdup (t->unstarted != 0 ? t->unstarted_why : "stopped before it started");
              g_ptr_array_add (runner->failed, r);
            }
          task_remove (runner, t);
          run_task_free (t);
          continue;
        }
      if (t->wait_rc != 0)
        g_warning ("runner: task %" G_GUINT64_FORMAT ": leader %d: waitid: %s", t->key.id,
                   (int) t->pid, g_strerror (t->wait_errno));
      task_conclude (runner, t, t->wait_rc, &t->info, t->finished_us, finished);
    }
  runner->collecting = FALSE;
}

/* SIGTERM now, SIGKILL after the grace.  The first reason sticks.  With
 * slot threads, called with runner->lock held. */
static void
task_stop (DatcRunner *runner, RunTask *task, StopReason reason, DatcTaskStatus status, gint64 now)
{
  if (task->stop != STOP_NONE)
    return;
  /* Exited already (its result waits for the main thread): it ended on
   * its own, and says so; its pid may be reused. */
  if (task->in_slots && (task->state == TASK_EXITED || task->state == TASK_ENDED))
    return;
  task->stop = reason;
  task->stop_status = status;
  if (task->in_slots)
    {
      if (task->state == TASK_STAGED)
        {
          g_queue_remove (&runner->ready, task);
          ended_push (runner, task, TRUE);
        }
      /* SPAWNING: its thread stops it once spawned. */
      if (task->state != TASK_RUNNING)
        return;
    }
  kill (-task->pid, SIGTERM);
  signal_leader (task, SIGTERM);
  task->kill_at = now + (gint64) runner->kill_grace_ms * 1000;
}

static void
runner_lock (DatcRunner *runner)
{
  if (runner->n_slots > 0)
    pthread_mutex_lock (&runner->lock);
}

static void
runner_unlock (DatcRunner *runner)
{
  if (runner->n_slots > 0)
    pthread_mutex_unlock (&runner->lock);
}

static void
enforce_deadlines (DatcRunner *runner)
{
  gint64 now = g_get_monotonic_time ();
  runner_lock (runner);
  for (guint i = 0; i < runner->tasks->len; i++)
    {
      RunTask *task = g_ptr_array_index (runner->tasks, i);
      if (task->in_slots && task->state != TASK_RUNNING)
        continue;
      if (task->stop == STOP_NONE && task->deadline != 0 && now >= task->deadline)
        task_stop (runner, task, STOP_TIMEOUT, DATC_STATUS_TIMEOUT, now);
      if (task->kill_at != 0 && now >= task->kill_at)
        {
          kill (-task->pid, SIGKILL);
          signal_leader (task, SIGKILL);
          task->kill_at = 0;
        }
    }
  runner_unlock (runner);
}

int
datc_runner_next_timeout_ms (DatcRunner *runner)
{
  g_return_val_if_fail (runner != NULL, -1);
  if (runner->failed->len > 0)
    return 0;

  gint64 due = G_MAXINT64;
  runner_lock (runner);
  gint64 now = g_get_monotonic_time ();
  if (runner->n_slots > 0 && runner->ended->len > 0)
    due = runner->ended_since + ENDED_LINGER_US;
  /* Streaming (tasks ended lately, enough ready that the slot threads do
   * not tell at once): look again within the linger rather than be woken
   * by each batch's first task.  Long tasks end rarely: no timer then. */
  else if (runner->n_slots > 0 && runner->ready.length >= runner->n_slots
           && now - runner->last_ended_us < ENDED_RECENT_US)
    due = now + ENDED_LINGER_US;
  for (guint i = 0; i < runner->tasks->len; i++)
    {
      RunTask *task = g_ptr_array_index (runner->tasks, i);
      if (task->in_slots && task->state != TASK_RUNNING)
        continue;
      if (task->stop == STOP_NONE && task->deadline != 0)
        due = MIN (due, task->deadline);
      if (task->kill_at != 0)
        due = MIN (due, task->kill_at);
    }
  runner->main_due = due;
  runner_unlock (runner);
  if (due == G_MAXINT64)
    return -1;
  gint64 left = due - g_get_monotonic_time ();
  if (left <= 0)
    return 0;
  /* round up, so that a poll() that waits this long finds it due */
  return (int) MIN ((left + 999) / 1000, (gint64) G_MAXINT32);
}

static void
handle_event (DatcRunner *runner, guint64 data, GPtrArray *finished)
{
  guint64 serial = data >> 2;
  int kind = data & 3;

  if (kind == WATCH_WAKE)
    {
      guint64 count;
      if (read (runner->wakefd, &count, sizeof count) < 0 && errno != EAGAIN)
        g_debug ("runner: eventfd read: %s", g_strerror (errno));
      return;
    }

  RunTask *task = g_hash_table_lookup (runner->by_serial, &serial);
  if (task == NULL)
    return; /* ended earlier in this batch */
  if (kind == WATCH_PID)
    task_finish (runner, task, finished);
  else
    capture_read (runner, task, kind == WATCH_OUT ? &task->out : &task->err, READS_PER_EVENT,
                  FALSE);
}

void
datc_runner_dispatch (DatcRunner *runner, GPtrArray *finished)
{
  g_return_if_fail (runner != NULL);
  g_return_if_fail (finished != NULL);

  struct epoll_event events[EVENTS_MAX];
  for (int round = 0; round < DISPATCH_ROUNDS_MAX; round++)
    {
      int n = epoll_wait (runner->epfd, events, EVENTS_MAX, 0);
      if (n < 0 && errno == EINTR)
        continue;
      if (n < 0)
        {
          g_warning ("runner: epoll_wait: %s", g_strerror (errno));
          break;
        }
      for (int i = 0; i < n; i++)
        handle_event (runner, events[i].data.u64, finished);
      if (n < EVENTS_MAX)
        break;
    }

  collect_ended (runner, finished);
  if (runner->failed->len > 0)
    {
      g_ptr_array_extend_and_steal (finished, g_steal_pointer (&runner->failed));
      runner->failed = g_ptr_array_new_with_free_func ((GDestroyNotify) datc_result_free);
    }

  enforce_deadlines (runner);
}

gboolean
datc_runner_cancel (DatcRunner *runner, guint64 id, guint32 attempt, DatcTaskStatus status)
{
  g_return_val_if_fail (runner != NULL, FALSE);
  g_return_val_if_fail (status == DATC_STATUS_CANCELLED || status == DATC_STATUS_DRAINED, FALSE);

  DatcTaskKey key = { .id = id, .attempt = attempt };
  RunTask *task = g_hash_table_lookup (runner->by_key, &key);
  if (task == NULL)
    return FALSE;
  runner_lock (runner);
  task_stop (runner, task, STOP_CANCEL, status, g_get_monotonic_time ());
  runner_unlock (runner);
  return TRUE;
}

void
datc_runner_cancel_all (DatcRunner *runner, DatcTaskStatus status)
{
  g_return_if_fail (runner != NULL);
  g_return_if_fail (status == DATC_STATUS_CANCELLED || status == DATC_STATUS_DRAINED);

  gint64 now = g_get_monotonic_time ();
  runner_lock (runner);
  for (guint i = 0; i < runner->tasks->len; i++)
    task_stop (runner, g_ptr_array_index (runner->tasks, i), STOP_CANCEL, status, now);
  runner_unlock (runner);
}

void
datc_runner_unstage (DatcRunner *runner, DatcTaskStatus status)
{
  g_return_if_fail (runner != NULL);
  if (runner->n_slots == 0)
    return;
  pthread_mutex_lock (&runner->lock);
  RunTask *t;
  while ((t = g_queue_pop_head (&runner->ready)) != NULL)
    {
      t->stop = STOP_CANCEL;
      t->stop_status = status;
      ended_push (runner, t, TRUE);
    }
  pthread_mutex_unlock (&runner->lock);
}

void
datc_runner_list (DatcRunner *runner, GArray *keys)
{
  g_return_if_fail (runner != NULL);
  g_return_if_fail (keys != NULL);

  for (guint i = 0; i < runner->tasks->len; i++)
    {
      RunTask *task = g_ptr_array_index (runner->tasks, i);
      g_array_append_val (keys, task->key);
    }
}

void
datc_runner_set_oom_watch (DatcRunner *runner, DatcOomWatch *watch)
{
  g_return_if_fail (runner != NULL);
  datc_oom_watch_free (runner->oom);
  runner->oom = watch;
}
