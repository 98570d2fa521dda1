/* iothread.h: one blocking I/O call at a time (an fdatasync, a large
 * write) on a thread of its own, while the owner's thread waits in a
 * function of its choosing: the master's loop answers `datc status`
 * there instead of sitting in the kernel behind the disk. */
#pragma once

#include <glib.h>

/* Called on the owner's thread, at least once per call, until the job is
 * done; it must return once `done_fd` is readable (poll it beside its own
 * fds) and must not touch what the job works on. */
typedef void (*DatcIoWaitFunc) (gpointer user_data, int done_fd);

/* The blocking call: 0, or the errno it failed with. */
typedef int (*DatcIoJob) (gpointer job_data);

typedef struct DatcIoThread DatcIoThread;

/* `name` names the thread (at most 15 bytes shown).  NULL when no thread
 * (or eventfd) could be had: callers then do the job themselves. */
DatcIoThread *datc_io_thread_new (const char *name);

/* Runs job (job_data) on the thread while `wait` (wait_data, done_fd)
 * runs on the caller's, and returns the job's result.  Without a thread
 * or a wait, the caller runs the job itself. */
int datc_io_thread_run (DatcIoThread *t, DatcIoJob job, gpointer job_data, DatcIoWaitFunc wait,
                        gpointer wait_data);

/* Joins the thread (no job may be running: datc_io_thread_run returns
 * only when its job is done); accepts NULL. */
void datc_io_thread_free (DatcIoThread *t);
G_DEFINE_AUTOPTR_CLEANUP_FUNC (DatcIoThread, datc_io_thread_free)
