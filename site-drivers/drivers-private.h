/* drivers-private.h: what the driver files share with the registry, the
 * DatcSite wrappers and the tests, and nothing the rest of datc needs.
 *
 * Each driver .c defines one `const` table; registry.c is the only place
 * that lists them.  The helpers below keep error messages about commands
 * and their output looking the same whichever driver produced them. */
#pragma once

#include "driver.h"

G_BEGIN_DECLS

/* ---- the drivers (one line per driver .c) --------------------------- */

extern const DatcTransportClass datc_transport_local;
extern const DatcTransportClass datc_transport_ssh;
extern const DatcSchedulerClass datc_scheduler_fork;
extern const DatcSchedulerClass datc_scheduler_slurm;
extern const DatcSchedulerClass datc_scheduler_sge;
extern const DatcSchedulerClass datc_scheduler_pbs;
extern const DatcSchedulerClass datc_scheduler_condor;
extern const DatcSchedulerClass datc_scheduler_lsf;

/* ---- registry ------------------------------------------------------- */

/* "local, ssh" for error messages (transfer full). */
gchar *datc_transport_known_names(void);
gchar *datc_scheduler_known_names(void);

/* ---- helpers for drivers (site.c) ----------------------------------- */

/* Largest scheduler answer (stdout or stderr) a parser will look at; a
 * bigger one is a DATC_SITE_ERROR_PARSE, never an allocation. */
#define DATC_SITE_ANSWER_MAX (16u * 1024u * 1024u)

/* How much of a command or of its output an error message quotes. */
#define DATC_SITE_QUOTE_MAX 200u

/* A command line for an error message: arguments shell-quoted where they
 * need it, shortened to DATC_SITE_QUOTE_MAX (transfer full). */
gchar *datc_site_describe_argv(const char *const *argv);

/* Output for an error message: trimmed, control characters escaped,
 * shortened to DATC_SITE_QUOTE_MAX; "(nothing)" when empty.  `bytes` may be
 * NULL (transfer none; returns transfer full). */
gchar *datc_site_quote_output(GBytes *bytes);

/* `bytes` (may be NULL: empty) as a NUL-terminated string for a parser.
 * Fails with DATC_SITE_ERROR_PARSE when it is larger than
 * DATC_SITE_ANSWER_MAX or holds a NUL byte; `what` names it ("stdout"). */
gboolean datc_site_answer_text(GBytes *bytes, const char *what, gchar **text,
                               GError **error);

/* The error parsers raise for a command that exited non-zero:
 * DATC_SITE_ERROR_COMMAND "<what> exited with status N: <stderr>", the
 * stderr's lines kept as lines (each after "\n  "), at most 8 of them. */
void datc_site_set_command_error(GError **error, const char *what,
                                 const DatcCommandResult *res);

G_DEFINE_AUTO_CLEANUP_CLEAR_FUNC(DatcCommandResult, datc_command_result_clear)

G_END_DECLS
