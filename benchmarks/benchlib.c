/* benchlib.c: see benchlib.h.  Moved out of bench-core.c unchanged, so
 * bench-core prints what it printed. */
#include "benchlib.h"

#include <errno.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;

BenchRun
bench_run (const char *const *argv)
{
  BenchRun st = { 0 };
  pid_t pid;
  struct rusage ru;
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init (&fa);
  posix_spawn_file_actions_addopen (&fa, 1, "/dev/null", 0x1 /* O_WRONLY */, 0);
  gint64 t0 = g_get_monotonic_time ();
  if (posix_spawn (&pid, argv[0], &fa, NULL, (char *const *) argv, environ) != 0)
    {
      fprintf (stderr, "cannot run %s\n", argv[0]);
      exit (1);
    }
  posix_spawn_file_actions_destroy (&fa);
  int status;
  while (wait4 (pid, &status, 0, &ru) < 0 && errno == EINTR)
    ;
  st.wall_s = (g_get_monotonic_time () - t0) / 1e6;
  st.cpu_s = ru.ru_utime.tv_sec + ru.ru_utime.tv_usec / 1e6 + ru.ru_stime.tv_sec
             + ru.ru_stime.tv_usec / 1e6;
  st.maxrss_kib = ru.ru_maxrss;
  st.status = WIFEXITED (status) ? WEXITSTATUS (status) : 128 + WTERMSIG (status);
  return st;
}

void
bench_rm_rf (const char *path)
{
  const char *argv[] = { "/bin/rm", "-rf", path, NULL };
  bench_run (argv);
}

gchar *
bench_write_tasks (const char *dir, guint n, const char *prefix, gboolean numbered)
{
  gchar *path = g_build_filename (dir, "tasks.txt", NULL);
  FILE *f = fopen (path, "w");
  for (guint i = 1; i <= n; i++)
    {
      if (numbered)
        fprintf (f, "%s%08u\n", prefix, i);
      else
        fprintf (f, "%s\n", prefix);
    }
  fclose (f);
  return path;
}

const char *
bench_datc (void)
{
  const char *p = g_getenv ("DATC");
  if (p == NULL)
    {
      fprintf (stderr, "set DATC to the datc binary\n");
      exit (2);
    }
  return p;
}

int
bench_cmp_double (const void *a, const void *b)
{
  double x = *(const double *) a, y = *(const double *) b;
  return x < y ? -1 : x > y;
}

double
bench_machine_busy_s (void)
{
  g_autofree gchar *text = NULL;
  if (!g_file_get_contents ("/proc/stat", &text, NULL, NULL))
    return 0;
  guint64 v[8] = { 0 };
  if (sscanf (text,
              "cpu %" G_GUINT64_FORMAT " %" G_GUINT64_FORMAT " %" G_GUINT64_FORMAT
              " %" G_GUINT64_FORMAT " %" G_GUINT64_FORMAT " %" G_GUINT64_FORMAT
              " %" G_GUINT64_FORMAT " %" G_GUINT64_FORMAT,
              &v[0], &v[1], &v[2], &v[3], &v[4], &v[5], &v[6], &v[7])
      != 8)
    return 0;
  /* user nice system [idle iowait] irq softirq steal */
  guint64 busy = v[0] + v[1] + v[2] + v[5] + v[6] + v[7];
  return (double) busy / (double) sysconf (_SC_CLK_TCK);
}
