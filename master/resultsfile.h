/* resultsfile.h: the writer of results.jsonl, one JSON object per line per
 * finished task.  Lines wait in memory until the ledger has made the
 * journal records behind them durable (datc_results_file_write after the
 * journal's commit), so the file never shows a result a crash could take
 * back.  The file is rebuilt from the journal at every start
 * (datc_results_file_rebuild): the lines the replay makes are compared with
 * the bytes results.jsonl already holds, and as long as they match nothing
 * is written (a resume after a crash replays millions of them); those past
 * its end follow at its end; from the first that differs the file is
 * written anew to DIR/results.jsonl.tmp and renamed over results.jsonl
 * (datc_results_file_finish).  A start that fails leaves results.jsonl as
 * it was.  Readers: results.c, and analysis/
 * (campaignlog.c). */
#pragma once

#include <glib.h>

#include "iothread.h"

G_BEGIN_DECLS

/* One line, as plain values (strings transfer none).  Unknown strings are
 * "" (site, proxy, host, agent, output); `message` and `oom_evidence` are
 * left out when NULL. */
typedef struct {
  guint64 id, line;
  guint32 attempt;
  const char *status;    /* "exited", "signaled", "lost", ... */
  const char *end_class; /* "exit", "signal", "oom", ... */
  gint64 exit_code, signal;
  const char *site, *proxy, *host, *agent;
  gint64 submitted, started, finished;
  const char *output; /* the agent's output file, relative to DIR */
  guint64 out_off, out_len, err_off, err_len, out_dropped, err_dropped;
  const char *message;
  const char *oom_evidence;
  /* site, proxy, host and agent as datc_result_line_who formatted them
   * (the same bytes), or NULL: formatted from the four strings.  A
   * writer of many lines per agent (a resume replays millions) formats
   * them once per agent. */
  const char *who;
} DatcResultLine;

/* The members "site", "proxy", "host" and "agent" of a line (from the
 * comma before "site" to the quote after the agent), for
 * DatcResultLine.who; NULL strings as "". */
gchar *datc_result_line_who (const char *site, const char *proxy, const char *host,
                             const char *agent);

/* Appends `line` as results.jsonl has it, "\n" included. */
void datc_result_line_format (GString *out, const DatcResultLine *line);
/* Reads back one whole line (`len` bytes, its "\n" included) written by
 * datc_result_line_format: the members in its order and nothing else,
 * the escapes jsonout.c writes; FALSE for anything else.  Strings point
 * into `scratch` (overwritten by the next call).  Not every line it
 * accepts formats back to the same bytes (a NUL written as \u0000 is
 * refused, but a non-UTF-8 name is not checked): a caller that needs the
 * bytes compares (resultpack.c does). */
gboolean datc_result_line_parse (const char *line, gsize len, DatcResultLine *r, GString *scratch);

typedef struct DatcResultsFile DatcResultsFile;

/* Creates (or empties) `path`.  Errors in the ledger's domain
 * (DATC_LEDGER_ERROR_IO), naming the file. */
DatcResultsFile *datc_results_file_open (const char *path, GError **error);
/* Rebuilds `path`: lines that are the bytes it holds are only compared,
 * those past its end are appended to it (and cut again if the file is
 * freed before finish); from the first that differs, the file is written
 * anew at `tmp_path`, the part that matched copied first (so too when
 * `path` is missing or not a regular file).  Finish (or filter) cuts what
 * `path` holds beyond the lines. */
DatcResultsFile *datc_results_file_rebuild (const char *path, const char *tmp_path, GError **error);
void datc_results_file_free (DatcResultsFile *file);
G_DEFINE_AUTOPTR_CLEANUP_FUNC (DatcResultsFile, datc_results_file_free)

/* Formats one line and keeps it until the next write. */
void datc_results_file_add (DatcResultsFile *file, const DatcResultLine *line);
/* A start's replay of the journal: its results are durable already, so
 * the file writes its lines as they come (a megabyte at a time), and
 * formats and compares them on a thread of its own while the caller's
 * thread decodes and applies the journal (on the caller's if no thread
 * can be had).  Until end_replay only add, add_lines and free may be
 * called.  A write that fails meanwhile keeps its lines for the next
 * datc_results_file_write, which says why. */
void datc_results_file_begin_replay (DatcResultsFile *file);
/* Waits until the thread has formatted every line (it may keep some for
 * the next write). */
void datc_results_file_end_replay (DatcResultsFile *file);
/* Bytes of lines kept and not yet written. */
gsize datc_results_file_pending (DatcResultsFile *file);
/* Whole lines as they were written before (a journal checkpoint's). */
void datc_results_file_add_lines (DatcResultsFile *file, const guint8 *lines, gsize len);
/* Where the file is now (transfer none), and how many bytes were written
 * to it: a compaction copies that much of it into the checkpoint. */
const char *datc_results_file_path (DatcResultsFile *file);
guint64 datc_results_file_written (DatcResultsFile *file);
/* Writes the lines kept.  A write that fails part way (a full disk) keeps
 * only what did not reach the file: the next call goes on from there and
 * completes the torn line, where writing the whole again would repeat its
 * start. */
gboolean datc_results_file_write (DatcResultsFile *file, GError **error);
/* With a wait set, the write() of 256 KiB or more runs on a thread of the
 * file's while the caller's thread calls wait (user_data, done_fd) until
 * it is done (as datc_journal_set_sync_wait does for the journal's
 * fdatasync): a large batch of lines may wait behind the disk's writeback
 * for tens of ms.  A smaller one is written by the caller's thread.
 * `wait` must not touch the file.  NULL: the caller's thread writes. */
void datc_results_file_set_write_wait (DatcResultsFile *file, DatcIoWaitFunc wait,
                                       gpointer user_data);

/* Whether the line of task `id` (whose status is "cancelled" or not) is
 * the one to keep. */
typedef gboolean (*DatcResultsKeepFunc) (guint64 id, gboolean cancelled, gpointer user_data);
/* Rewrites the file with the first line `keep` accepts per task id of 1..
 * `n_tasks`, dropping every other; lines are appended after it as before.
 * Call after a write, with nothing kept. */
gboolean datc_results_file_filter (DatcResultsFile *file, guint64 n_tasks, DatcResultsKeepFunc keep,
                                   gpointer user_data, GError **error);
/* fsync()s the file and renames it to `path`, where it goes on; a file
 * rebuilt in place (every line matched) is only cut to its lines. */
gboolean datc_results_file_finish (DatcResultsFile *file, const char *path, GError **error);

G_END_DECLS
