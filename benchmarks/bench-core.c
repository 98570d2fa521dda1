/* bench-core.c: the core's speed and memory targets, measured on the real
 * programs and printed; nothing here asserts.  Usage:
 *
 *   bench-core spawn   [N=20000 [ROUNDS=5]]
 *                                  /bin/true tasks through datc at 2 slots vs a
 *                                  bare posix_spawn loop at concurrency 2, run
 *                                  before and after each datc run
 *   bench-core master  [N=1000000] --local-exec none: master tasks/s and CPU/task
 *   bench-core memory  [N=1000000] peak RSS of the master for N ~40-byte commands
 *   bench-core latency [RUNS=20]   a one-task campaign, datc start to exit
 *
 * DATC points to the datc binary (meson's benchmark() sets it).  Each run
 * uses a fresh campaign directory under $TMPDIR and removes it. */
#include <errno.h>
#include <glib.h>
#include <glib/gstdio.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include "benchlib.h"

extern char **environ;

static double
tv_s (struct timeval tv)
{
  return tv.tv_sec + tv.tv_usec / 1e6;
}

/* User + system CPU of this process (the bare loop runs here) and of
 * every descendant reaped so far.  The spawn benchmark makes this process
 * a child subreaper, so the agent that the fork scheduler detaches (and,
 * through it, every task) is reaped here too. */
static double
own_cpu_s (void)
{
  struct rusage self, children;
  getrusage (RUSAGE_SELF, &self);
  getrusage (RUSAGE_CHILDREN, &children);
  return tv_s (self.ru_utime) + tv_s (self.ru_stime) + tv_s (children.ru_utime)
         + tv_s (children.ru_stime);
}

/* Reaps orphans that were reparented here (the detached agent). */
static void
reap_orphans (void)
{
  int status;
  while (waitpid (-1, &status, 0) > 0 || errno == EINTR)
    ;
}

/* The reference: posix_spawn + waitpid, `conc` at a time, nothing else. */
static double
bare_loop (guint n, guint conc)
{
  char *argv[] = { (char *) "/bin/true", NULL };
  guint started = 0, running = 0;
  gint64 t0 = g_get_monotonic_time ();
  while (started < n || running > 0)
    {
      while (running < conc && started < n)
        {
          pid_t pid;
          if (posix_spawn (&pid, argv[0], NULL, NULL, argv, environ) != 0)
            exit (1);
          started++;
          running++;
        }
      int status;
      if (wait (&status) > 0)
        running--;
    }
  return n / ((g_get_monotonic_time () - t0) / 1e6);
}

/* One measured phase: its wall time, the CPU of what it ran, and the CPU
 * the rest of the machine spent meanwhile (other users' work). */
typedef struct {
  double wall_s, cpu_s, other_s;
} Phase;

static void
phase_begin (Phase *p)
{
  p->wall_s = g_get_monotonic_time () / 1e6;
  p->cpu_s = own_cpu_s ();
  p->other_s = bench_machine_busy_s ();
}

static void
phase_end (Phase *p)
{
  p->wall_s = g_get_monotonic_time () / 1e6 - p->wall_s;
  p->cpu_s = own_cpu_s () - p->cpu_s;
  p->other_s = MAX (0.0, bench_machine_busy_s () - p->other_s - p->cpu_s);
}

/* Of the machine's cores during the phase: the share nobody used. */
static double
phase_idle (const Phase *p, double cores)
{
  return MAX (0.0, 1.0 - (p->cpu_s + p->other_s) / (p->wall_s * cores));
}

/* One datc run between two bare loops: the machine's speed drifts by tens
 * of percent from one phase to the next (a VM with neighbours), so each
 * datc rate is compared with the bare loop run just before and just after
 * it, and the rounds share their bare loops: bare datc bare datc ... bare. */
static void
bench_spawn (const char *tmp, guint n, guint rounds)
{
  g_autofree gchar *file = bench_write_tasks (tmp, n, "/bin/true", FALSE);
  g_autofree gchar *dir = g_build_filename (tmp, "c", NULL);
  const char *argv[] = { bench_datc (), "run", "--dir", dir, "--local-slots", "2", file, NULL };
  g_autofree double *ratios = g_new (double, rounds);
  double cores = g_get_num_processors ();
  double bare_cpu_s = 0, datc_cpu_s = 0;
  int status = 0;

  /* The fork scheduler detaches the agent; as a subreaper we reap it, so
   * its CPU and its tasks' count in d.cpu_s. */
  prctl (PR_SET_CHILD_SUBREAPER, 1);
  printf ("spawn: %u x /bin/true, 2 slots, %u rounds of bare loop / datc run / bare loop\n", n,
          rounds);
  printf ("  (other = CPU of the rest of the machine meanwhile, in cores;"
          " idle = cores nobody used)\n");
  Phase b, d;
  phase_begin (&b);
  double before = bare_loop (n, 2);
  phase_end (&b);
  bare_cpu_s += b.cpu_s;
  for (guint r = 0; r < rounds; r++)
    {
      Phase b0 = b;
      phase_begin (&d);
      BenchRun st = bench_run (argv);
      reap_orphans ();
      phase_end (&d);
      bench_rm_rf (dir);
      if (st.status != 0)
        status = st.status;
      double rate = n / st.wall_s;
      phase_begin (&b);
      double after = bare_loop (n, 2);
      phase_end (&b);
      bare_cpu_s += b.cpu_s;
      datc_cpu_s += d.cpu_s;
      ratios[r] = rate / ((before + after) / 2);
      printf ("  round %u: bare %5.0f/s, datc %5.0f/s (exit %d), bare %5.0f/s: ratio %.2f"
              "   other %.2f %.2f %.2f  idle %.1f%% %.1f%% %.1f%%\n",
              r + 1, before, rate, st.status, after, ratios[r], b0.other_s / b0.wall_s,
              d.other_s / d.wall_s, b.other_s / b.wall_s, 100 * phase_idle (&b0, cores),
              100 * phase_idle (&d, cores), 100 * phase_idle (&b, cores));
      before = after;
    }
  qsort (ratios, rounds, sizeof *ratios, bench_cmp_double);
  double median
      = rounds % 2 ? ratios[rounds / 2] : (ratios[rounds / 2 - 1] + ratios[rounds / 2]) / 2;
  printf ("  ratio                  %8.2f median of %u (min %.2f, max %.2f)%s\n", median, rounds,
          ratios[0], ratios[rounds - 1], status ? "  -- a datc run FAILED" : "");
  /* CPU per task counts every process (master, agent, tasks). */
  printf ("  CPU per task           %8.1f us bare, %.1f us datc\n",
          bare_cpu_s * 1e6 / ((double) n * (rounds + 1)), datc_cpu_s * 1e6 / ((double) n * rounds));
}

static void
bench_master (const char *tmp, guint n)
{
  g_autofree gchar *file = bench_write_tasks (tmp, n, "/bin/echo task ", TRUE);
  g_autofree gchar *dir = g_build_filename (tmp, "c", NULL);
  const char *argv[] = { bench_datc (),    "run", "--dir",         dir,    "--local-exec", "none",
                         "--local-agents", "4",   "--local-slots", "4096", file,           NULL };
  BenchRun st = bench_run (argv);
  printf ("master: %u tasks, --local-exec none, 4 agents, journal on\n", n);
  printf ("  %.0f tasks/s  (%.2f s wall, exit %d)\n", n / st.wall_s, st.wall_s, st.status);
  printf ("  master CPU %.2f us/task  (%.2f s user+sys)\n", st.cpu_s * 1e6 / n, st.cpu_s);
  printf ("  master peak RSS %.1f MiB\n", st.maxrss_kib / 1024.0);
  bench_rm_rf (dir);
}

static void
bench_memory (const char *tmp, guint n)
{
  /* ~40-byte commands. */
  g_autofree gchar *file = bench_write_tasks (tmp, n, "/usr/bin/printf %s\\n parameter-set-", TRUE);
  g_autofree gchar *dir = g_build_filename (tmp, "c", NULL);
  GStatBuf sb;
  g_stat (file, &sb);
  const char *argv[] = { bench_datc (),    "run", "--dir",         dir,    "--local-exec", "none",
                         "--local-agents", "2",   "--local-slots", "4096", file,           NULL };
  BenchRun st = bench_run (argv);
  printf ("memory: %u tasks, task file %.1f MiB (%.1f bytes/line)\n", n, sb.st_size / 1048576.0,
          (double) sb.st_size / n);
  printf ("  master peak RSS %.1f MiB  (%.2f s, exit %d)\n", st.maxrss_kib / 1024.0, st.wall_s,
          st.status);
  bench_rm_rf (dir);
}

static void
bench_latency (const char *tmp, guint runs)
{
  g_autofree gchar *file = bench_write_tasks (tmp, 1, "/bin/true", FALSE);
  g_autofree double *t = g_new (double, runs);
  for (guint i = 0; i < runs; i++)
    {
      g_autofree gchar *dir = g_strdup_printf ("%s/c%u", tmp, i);
      const char *argv[] = { bench_datc (), "run", "--dir", dir, file, NULL };
      BenchRun st = bench_run (argv);
      t[i] = st.wall_s * 1000;
      bench_rm_rf (dir);
    }
  qsort (t, runs, sizeof *t, bench_cmp_double);
  printf ("latency: one-task campaign, %u runs\n", runs);
  printf ("  min %.1f ms  median %.1f ms  max %.1f ms\n", t[0], t[runs / 2], t[runs - 1]);
}

int
main (int argc, char **argv)
{
  if (argc < 2)
    {
      fprintf (stderr, "usage: bench-core spawn [N [ROUNDS]] | master|memory|latency [N]\n");
      return 2;
    }
  g_autofree gchar *tmp = g_dir_make_tmp ("datc-bench-XXXXXX", NULL);
  guint n = argc > 2 ? (guint) g_ascii_strtoull (argv[2], NULL, 10) : 0;
  if (g_str_equal (argv[1], "spawn"))
    {
      guint rounds = argc > 3 ? (guint) g_ascii_strtoull (argv[3], NULL, 10) : 0;
      bench_spawn (tmp, n ? n : 20000, rounds ? rounds : 5);
    }
  else if (g_str_equal (argv[1], "master"))
    bench_master (tmp, n ? n : 1000000);
  else if (g_str_equal (argv[1], "memory"))
    bench_memory (tmp, n ? n : 1000000);
  else if (g_str_equal (argv[1], "latency"))
    bench_latency (tmp, n ? n : 20);
  else
    {
      fprintf (stderr, "unknown benchmark %s\n", argv[1]);
      return 2;
    }
  bench_rm_rf (tmp);
  return 0;
}
