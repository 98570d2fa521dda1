/* agentoutput.h: one agent's append-only output file,
 * DIR/outputs/AGENT_ID.out.  A result's stdout and stderr are appended
 * together and results.jsonl points at them by offset, so the file holds
 * bytes only, no framing.  It is opened at its first write (an agent that
 * returns appends to the file it had) and synced by the ledger's commit
 * before the journal records that point into it. */
#pragma once

#include <glib.h>

G_BEGIN_DECLS

typedef struct DatcAgentOutput DatcAgentOutput;

/* Nothing is opened yet.  Errors come in the ledger's domain
 * (DATC_LEDGER_ERROR_IO), naming the file. */
DatcAgentOutput *datc_agent_output_new (const char *dir, const char *agent_id);
void datc_agent_output_free (DatcAgentOutput *output);
G_DEFINE_AUTOPTR_CLEANUP_FUNC (DatcAgentOutput, datc_agent_output_free)

/* "outputs/AGENT_ID.out", relative to the campaign's directory, as
 * results.jsonl gives it (transfer none). */
const char *datc_agent_output_name (const DatcAgentOutput *output);
/* Bytes in the file as far as this master knows: 0 until its first write. */
guint64 datc_agent_output_size (const DatcAgentOutput *output);

/* Opens the file if it is not yet (even for nothing to write: the offsets
 * are the file's), then appends `out` and `err` (either may be NULL) in one
 * go.  `out_off` and `err_off` say where each starts. */
gboolean datc_agent_output_append (DatcAgentOutput *output, GBytes *out, GBytes *err,
                                   guint64 *out_off, guint64 *err_off, GError **error);
/* fdatasync()s what was appended. */
gboolean datc_agent_output_sync (DatcAgentOutput *output, GError **error);

G_END_DECLS
