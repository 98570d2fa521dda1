/* control.h: the running master's control channel, DIR/control: an ipc
 * socket only the campaign's owner can open (mode 0600 in a 0700 directory).
 * One JSON object per request and per reply:
 *   {"cmd":"status"}                                   -> the status object
 *   {"cmd":"status","format":"text"}                   -> {"text": what datc status prints}
 *   {"cmd":"submit","name":N,"format":F,"data":TEXT}   -> {"first":ID,"count":N}
 *   {"cmd":"cancel"} / {"cmd":"cancel","ids":[...]}   -> {"cancelled":N}
 *   {"cmd":"close"}                                    -> {"closed":true}
 * A failed or malformed request gets {"error":"..."}.  Replies are sent only after the
 * master has committed what the request changed, so a submit that returned
 * is journaled. */
#pragma once

#include <glib.h>
#include <json-glib/json-glib.h>

G_BEGIN_DECLS

#define DATC_CONTROL_ERROR (datc_control_error_quark ())
GQuark datc_control_error_quark (void);

typedef enum {
  DATC_CONTROL_ERROR_NO_MASTER, /* nothing is running this campaign */
  DATC_CONTROL_ERROR_FAILED,    /* could not talk to it */
  DATC_CONTROL_ERROR_TIMEOUT,
  DATC_CONTROL_ERROR_REFUSED, /* the master answered with an error */
} DatcControlError;

/* ---- server (in the master) ---- */

typedef struct DatcControl DatcControl;

/* Handles one request; returns the reply as JSON text (transfer full):
 * text, so that a reply that grows with the campaign (`status` lists
 * every agent) can be written without building a node per member. */
typedef gchar *(*DatcControlHandler) (JsonObject *request, gpointer user_data);

DatcControl *datc_control_new (const char *dir, GError **error);
void datc_control_free (DatcControl *c);
G_DEFINE_AUTOPTR_CLEANUP_FUNC (DatcControl, datc_control_free)
void datc_control_poll_items (DatcControl *c, GArray *items);
/* Reads every waiting request (first those kept while loading) and
 * queues the handler's replies until the ledger has committed (those to
 * `status`, which says what is committed, and to refused requests leave
 * at once). */
void datc_control_receive (DatcControl *c, DatcControlHandler handler, gpointer user_data);
/* Answers the `status` requests waiting now, at once, and keeps every
 * other request, in order, for the next datc_control_receive: for the
 * middle of a turn (datc_dispatcher_set_interlude), where a change's
 * reply could leave before the change is committed. */
void datc_control_answer_status (DatcControl *c, DatcControlHandler handler, gpointer user_data);
/* The same while the loop's thread waits for `fd` (a commit's fdatasync:
 * datc_journal_set_sync_wait): returns once `fd` is readable or after
 * serving one request that came before (call it again while `fd` is
 * not readable). */
void datc_control_answer_status_until (DatcControl *c, int fd, DatcControlHandler handler,
                                       gpointer user_data);
/* TRUE when requests were kept for the next datc_control_receive (the
 * socket no longer shows them: poll without waiting). */
gboolean datc_control_requests_kept (DatcControl *c);
/* While the campaign loads (the task file read, the journal replayed:
 * seconds at 10M tasks), a thread answers `status` with `loading`'s
 * reply (called on that thread: it may only read what is safe to read
 * from there) and keeps every other request, in order, for the first
 * datc_control_receive after datc_control_stop_loading.  The socket is
 * the thread's until then. */
void datc_control_start_loading (DatcControl *c, DatcControlHandler loading, gpointer user_data);
void datc_control_stop_loading (DatcControl *c);
/* TRUE when replies wait to be sent. */
gboolean datc_control_replies_pending (DatcControl *c);
/* Sends the queued replies (call after the ledger committed). */
void datc_control_send_replies (DatcControl *c);

/* ---- client (datc status, submit, cancel, close) ---- */

/* TRUE when a master holds DIR's lock. */
gboolean datc_control_master_running (const char *dir);
/* Sends `request` (transfer none) and waits for the reply (transfer full).
 * A reply {"error": ...} becomes DATC_CONTROL_ERROR_REFUSED. */
JsonNode *datc_control_call (const char *dir, JsonNode *request, guint timeout_ms, GError **error);

/* Helpers to build a reply. */
JsonNode *datc_control_error_reply (const char *message);

G_END_DECLS
