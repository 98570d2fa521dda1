/* benchlib.h: what bench-core and bench-scale share: run a program and
 * take its rusage, write a task file, find datc, remove a tree.  Nothing
 * here asserts; a program that cannot be started stops the benchmark. */
#pragma once

#include <glib.h>

G_BEGIN_DECLS

typedef struct {
  double wall_s;
  double cpu_s; /* user + system of the process itself and its waited children */
  long maxrss_kib;
  int status; /* exit code, or 128 + signal */
} BenchRun;

/* Runs argv (argv[0] a path) with stdout on /dev/null and waits for it. */
BenchRun bench_run (const char *const *argv);
void bench_rm_rf (const char *path);
/* n lines of `prefix`, each followed by its 8-digit number when numbered,
 * in DIR/tasks.txt (transfer full: the path). */
gchar *bench_write_tasks (const char *dir, guint n, const char *prefix, gboolean numbered);
/* $DATC, or exit 2 saying it is needed. */
const char *bench_datc (void);
/* CPU seconds the whole machine spent busy (every process, all cores),
 * from /proc/stat, 0 when unreadable; less a benchmark's own processes',
 * it tells how much other work shared the machine during a measurement. */
double bench_machine_busy_s (void);
/* qsort comparison of doubles. */
int bench_cmp_double (const void *a, const void *b);

G_END_DECLS
