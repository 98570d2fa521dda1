/* scheduler-batch.h: what the five batch schedulers (slurm, sge, pbs,
 * condor, lsf) share, so that each of their files is only its own
 * directives, commands and answers.
 *
 *  - What may go into a script or a command: job names, queues, extra
 *    submit arguments and ids are checked here against one set of rules
 *    and limits, so a request one scheduler accepts is not silently
 *    mangled by another.
 *  - The proxy script's body: DATC_SLOTS from what the batch system
 *    granted (falling back to what was asked), DATC_WALLTIME_END, `exec`
 *    of the agent command.
 *  - Answers: lines of stdout, errors that name the scheduler, the table
 *    from a scheduler's state words to DatcProxyState.
 *  - Cancel: a `sh -c` wrapper that exits 0 when the only complaints are
 *    about jobs that are already gone (the DatcSite contract). */
#pragma once

#include "drivers-private.h"

G_BEGIN_DECLS

/* Longest job name: fits every scheduler's limit (PBS Pro: 236, LSF:
 * 4094, SGE and Slurm: larger; Torque's old 15 is not supported). */
#define DATC_BATCH_NAME_MAX 64u
/* Longest queue (partition, queue@host, comma list). */
#define DATC_BATCH_QUEUE_MAX 128u
/* Extra submit arguments: how many words, and how long each. */
#define DATC_BATCH_SUBMIT_ARGS_MAX 64u
#define DATC_BATCH_SUBMIT_ARG_LEN_MAX 1024u
/* Longest job id we accept from or hand to a scheduler. */
#define DATC_BATCH_ID_MAX 128u
/* Longest numeric job id, in digits (ids are below 2^63). */
#define DATC_BATCH_NUMERIC_ID_DIGITS_MAX 18u

/* ---- what goes in ------------------------------------------------------ */

/* [A-Za-z][A-Za-z0-9_.-]*, at most DATC_BATCH_NAME_MAX: safe as a word in
 * a directive, an argument, a ClassAd string and an output file name. */
gboolean datc_batch_name_is_valid (const char *name);

/* [A-Za-z0-9_.@,+-]+, at most DATC_BATCH_QUEUE_MAX. */
gboolean datc_batch_queue_is_valid (const char *queue);

/* A request every batch scheduler can turn into a script: valid name,
 * slots > 0, a one-line non-empty agent command, a valid queue or none,
 * an absolute one-line workdir. */
gboolean datc_batch_request_is_valid (const DatcProxyRequest *req);

/* submit_args split like a shell would (g_shell_parse_argv); NULL or blank
 * gives an empty vector.  NULL when it cannot be split, has more than
 * DATC_BATCH_SUBMIT_ARGS_MAX words, or a word that is empty, longer than
 * DATC_BATCH_SUBMIT_ARG_LEN_MAX or holds a control character (transfer
 * full). */
GStrv datc_batch_split_submit_args (const char *submit_args);

/* 1 to DATC_BATCH_NUMERIC_ID_DIGITS_MAX decimal digits, no leading zero:
 * Slurm, Grid Engine and LSF ids. */
gboolean datc_batch_id_is_numeric (const char *id);

/* Every id passes `valid`, and there is at least one. */
gboolean datc_batch_ids_are_valid (const char *const *ids, gboolean (*valid) (const char *id));

/* An array element's id "BASE<sep>INDEX", both numeric (Slurm 123_4 with
 * '_', Grid Engine 123.4 with '.'). */
gboolean datc_batch_id_is_element (const char *id, char sep);

/* k is a size an array may have (DATC_ARRAY_MIN..DATC_ARRAY_MAX). */
gboolean datc_batch_array_size_is_valid (guint k);

/* ---- the script -------------------------------------------------------- */

/* Lines for an array's script that export DATC_ARRAY_INDEX from the batch
 * system's `variable` (+1 when `zero_based`), or exit 1 saying why when
 * it is not an index: an agent must not start under a wrong proxy name
 * (transfer full). */
gchar *datc_batch_array_index_code (const char *variable, gboolean zero_based);

/* The whole proxy script: "#!/bin/sh", `directives` (complete lines, may
 * be empty), a comment naming the proxy and `scheduler`, `slots_code`
 * (lines that set DATC_SLOTS from the batch system's variables; the body
 * then falls back to req->slots unless it is a positive number), the
 * walltime end when req->walltime_s > 0, `before_exec` (lines, may be
 * NULL) and `exec` of the agent command (transfer full). */
gchar *datc_batch_script (const DatcProxyRequest *req, const char *scheduler,
                          const char *directives, const char *slots_code, const char *before_exec);

/* ---- argv -------------------------------------------------------------- */

/* Appends a copy of `arg` / of each of `args` (may be NULL). */
void datc_batch_argv_add (GPtrArray *argv, const char *arg);
void datc_batch_argv_add_all (GPtrArray *argv, const char *const *args);
/* A new argv array (elements freed with it) and its NULL-terminated end. */
GPtrArray *datc_batch_argv_new (void);
GStrv datc_batch_argv_end (GPtrArray *argv);

/* /bin/sh -c SCRIPT NAME, then `args` as positional parameters. */
GStrv datc_batch_sh_argv (const char *script, const char *name, const char *const *args);

/* Cancel through `command IDS...`, exiting 0 when every line the command
 * printed (stdout and stderr) matches `ok_regex` (POSIX ERE: a job being
 * deleted or already gone); otherwise the command's status, with the
 * other lines on stderr.  NULL when an id fails `valid`. */
GStrv datc_batch_cancel_argv (const char *command, const char *ok_regex, const char *name,
                              const char *const *ids, gboolean (*valid) (const char *id));

/* ---- answers ----------------------------------------------------------- */

/* The scheduler's stdout (or stderr) as stripped, non-empty lines; a
 * DATC_SITE_ERROR_PARSE naming the scheduler when it is too large or
 * holds a NUL (transfer full). */
gboolean datc_batch_answer_lines (GBytes *bytes, const char *scheduler, const char *what,
                                  GStrv *lines, GError **error);

/* DATC_SITE_ERROR_PARSE "SCHEDULER: WHAT: <quoted text>". */
void datc_batch_set_parse_error (GError **error, const char *scheduler, const char *what,
                                 const char *text);

/* DATC_SITE_ERROR_COMMAND "SCHEDULER: COMMAND exited with status N:
 * <stderr>". */
void datc_batch_set_command_error (GError **error, const char *scheduler, const char *command,
                                   const DatcCommandResult *res);

/* A submit's answer: exactly one line, a `valid` id (copied to *job_id);
 * otherwise DATC_SITE_ERROR_PARSE "SCHEDULER: EXPECTED: <the lines>". */
gboolean datc_batch_one_id (const char *const *lines, gboolean (*valid) (const char *id),
                            const char *scheduler, const char *expected, gchar **job_id,
                            GError **error);

/* The end of every lookup: `found` (NULL-terminated) holds no id (*job_id
 * NULL), one (*job_id its copy), or several: an error naming them, since a
 * job name is unique per campaign and proxy. */
gboolean datc_batch_lookup_result (const char *const *found, const char *scheduler, gchar **job_id,
                                   GError **error);

/* A lookup whose answer is nothing but ids: each must be `valid`
 * (else "SCHEDULER: EXPECTED: <item>"), then as datc_batch_lookup_result. */
gboolean datc_batch_lookup_ids (const char *const *items, gboolean (*valid) (const char *id),
                                const char *scheduler, const char *expected, gchar **job_id,
                                GError **error);

/* ---- queues ------------------------------------------------------------ */

/* The end of a queue query whose command failed: when it exited non-zero
 * and its `stream` (res->err, or res->out for a scheduler that reports
 * there) has a line matching `missing_regex` (GRegex) and every other
 * non-blank line of it matches `other_regex` (NULL: none may), the queue
 * does not exist: *exists FALSE, *answer those lines, quoted and joined
 * (transfer full).  Otherwise DATC_SITE_ERROR_COMMAND naming the
 * scheduler and `command`, with its stderr. */
gboolean datc_batch_queue_missing (const DatcCommandResult *res, GBytes *stream,
                                   const char *missing_regex, const char *other_regex,
                                   const char *scheduler, const char *command, gboolean *exists,
                                   gchar **answer, GError **error);

/* "A: summary; B: summary" as a queue's answer (transfer full). */
gchar *datc_batch_queue_answer (const char *const *parts);

/* Whitespace-separated words of a line (transfer full). */
GStrv datc_batch_words (const char *line);

typedef struct {
  const char *word;
  DatcProxyState state;
} DatcBatchStateWord;

/* The state `word` maps to in `table` (n entries), or UNKNOWN. */
DatcProxyState datc_batch_state_lookup (const DatcBatchStateWord *table, gsize n, const char *word);

/* Answers are collected id -> state; then states[i] for each ids[i], with
 * `missing` for an id the answer did not mention. */
GHashTable *datc_batch_answers_new (void);
void datc_batch_answers_set (GHashTable *answers, const char *id, DatcProxyState state);
void datc_batch_answers_fill (GHashTable *answers, const char *const *ids, DatcProxyState *states,
                              DatcProxyState missing);

/* Pending reasons (parse_poll_reasons) are collected id -> text: `text`
 * (may be NULL) is kept as printable UTF-8 (control characters become
 * spaces, runs of blanks one), stripped, cut to DATC_SITE_REASON_MAX
 * bytes; an empty one is not kept.  Then reasons[i] (transfer full) for
 * each ids[i] whose states[i] is PENDING and that has one. */
GHashTable *datc_batch_reasons_new (void);
void datc_batch_reasons_set (GHashTable *table, const char *id, const char *text);
void datc_batch_reasons_fill (GHashTable *table, const char *const *ids,
                              const DatcProxyState *states, gchar **reasons);

/* Every stripped, non-empty line of `text` matches one of `patterns`
 * (GRegex, anchored by the caller); empty text counts as matching. */
gboolean datc_batch_lines_all_match (const char *text, const char *const *patterns);

G_END_DECLS
