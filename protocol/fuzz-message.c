/* fuzz-message.c: libFuzzer target for datc_msg_decode().
 *
 * Each input is decoded under both caps (DATC_FRAME_MAX, and
 * DATC_HELLO_FRAME_MAX for a peer that has not said HELLO); the two must
 * agree wherever the smaller cap allows.  A failure must be a
 * DATC_WIRE_ERROR with a reason.  A success is the round-trip oracle:
 * encode it, decode that, and the two messages must be equal field by field
 * and encode to the same bytes.  Any disagreement aborts, which libFuzzer
 * reports as a crash with the input saved.
 *
 *   CC=clang meson setup build-fuzz -Dfuzz=true
 *   ninja -C build-fuzz protocol/fuzz-message
 *   build-fuzz/protocol/fuzz-message -max_total_time=600 CORPUS protocol/fuzz-corpus */

#include "message.h"
#include "datc-limits.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput (const uint8_t *data, size_t size);

static void
fail (const char *what)
{
  fprintf (stderr, "fuzz-message: %s\n", what);
  abort ();
}

static gboolean
strv_equal (char **a, char **b)
{
  if (a == NULL || b == NULL)
    return a == b;
  return g_strv_equal ((const char *const *) a, (const char *const *) b);
}

static gboolean
bytes_equal (GBytes *a, GBytes *b)
{
  if (a == NULL || b == NULL)
    return a == b;
  return g_bytes_equal (a, b);
}

static gboolean
keys_equal (GArray *a, GArray *b)
{
  if (a == NULL || b == NULL)
    return a == b;
  if (a->len != b->len)
    return FALSE;
  for (guint i = 0; i < a->len; i++)
    {
      const DatcTaskKey *ka = &g_array_index (a, DatcTaskKey, i);
      const DatcTaskKey *kb = &g_array_index (b, DatcTaskKey, i);
      if (ka->id != kb->id || ka->attempt != kb->attempt)
        return FALSE;
    }
  return TRUE;
}

static gboolean
task_equal (const DatcTask *a, const DatcTask *b)
{
  return a->id == b->id && a->attempt == b->attempt && strv_equal (a->spec.argv, b->spec.argv)
         && g_strcmp0 (a->spec.sh, b->spec.sh) == 0 && strv_equal (a->spec.env, b->spec.env)
         && g_strcmp0 (a->spec.cwd, b->spec.cwd) == 0 && a->spec.timeout_ms == b->spec.timeout_ms
         && a->spec.est_runtime_ms == b->spec.est_runtime_ms;
}

static gboolean
result_equal (const DatcResult *a, const DatcResult *b)
{
  return a->id == b->id && a->attempt == b->attempt && a->status == b->status
         && a->exit_code == b->exit_code && a->signal == b->signal && a->started_us == b->started_us
         && a->finished_us == b->finished_us && bytes_equal (a->out, b->out)
         && bytes_equal (a->err, b->err) && a->out_dropped == b->out_dropped
         && a->err_dropped == b->err_dropped && g_strcmp0 (a->message, b->message) == 0;
}

static gboolean
msg_equal (const DatcMsg *a, const DatcMsg *b)
{
  if (a->type != b->type)
    return FALSE;
  switch (a->type)
    {
    case DATC_MSG_HELLO:
      return g_strcmp0 (a->u.hello.agent_id, b->u.hello.agent_id) == 0
             && g_strcmp0 (a->u.hello.site, b->u.hello.site) == 0
             && g_strcmp0 (a->u.hello.proxy, b->u.hello.proxy) == 0
             && g_strcmp0 (a->u.hello.host, b->u.hello.host) == 0
             && a->u.hello.pid == b->u.hello.pid && a->u.hello.slots == b->u.hello.slots
             && a->u.hello.walltime_end_us == b->u.hello.walltime_end_us
             && a->u.hello.session == b->u.hello.session
             && keys_equal (a->u.hello.held, b->u.hello.held);
    case DATC_MSG_WELCOME:
      return a->u.welcome.epoch == b->u.welcome.epoch
             && a->u.welcome.session == b->u.welcome.session
             && a->u.welcome.heartbeat_ms == b->u.welcome.heartbeat_ms
             && a->u.welcome.timeout_ms == b->u.welcome.timeout_ms;
    case DATC_MSG_CREDIT:
      return a->u.credit.session == b->u.credit.session && a->u.credit.limit == b->u.credit.limit;
    case DATC_MSG_TASKS:
      if (a->u.tasks.session != b->u.tasks.session
          || a->u.tasks.tasks->len != b->u.tasks.tasks->len)
        return FALSE;
      for (guint i = 0; i < a->u.tasks.tasks->len; i++)
        if (!task_equal (g_ptr_array_index (a->u.tasks.tasks, i),
                         g_ptr_array_index (b->u.tasks.tasks, i)))
          return FALSE;
      return TRUE;
    case DATC_MSG_RESULT:
      if (a->u.results.results->len != b->u.results.results->len)
        return FALSE;
      for (guint i = 0; i < a->u.results.results->len; i++)
        if (!result_equal (g_ptr_array_index (a->u.results.results, i),
                           g_ptr_array_index (b->u.results.results, i)))
          return FALSE;
      return TRUE;
    case DATC_MSG_ACK:
    case DATC_MSG_CANCEL:
      return keys_equal (a->u.keys, b->u.keys);
    case DATC_MSG_HEARTBEAT:
      return a->u.heartbeat.epoch == b->u.heartbeat.epoch
             && a->u.heartbeat.session == b->u.heartbeat.session
             && a->u.heartbeat.received == b->u.heartbeat.received
             && a->u.heartbeat.running == b->u.heartbeat.running
             && !!a->u.heartbeat.rehello == !!b->u.heartbeat.rehello;
    case DATC_MSG_RETIRE:
    case DATC_MSG_BYE:
      return g_strcmp0 (a->u.reason, b->u.reason) == 0;
    }
  return FALSE;
}

static void
check_error (const GError *error)
{
  if (error == NULL || error->domain != DATC_WIRE_ERROR || error->message == NULL
      || error->message[0] == '\0')
    fail ("a refused frame has no DATC_WIRE_ERROR with a reason");
}

static void
check_round_trip (const DatcMsg *msg)
{
  g_autoptr (GByteArray) first = g_byte_array_new ();
  datc_msg_encode (msg, first);

  g_autoptr (GError) error = NULL;
  g_autoptr (DatcMsg) again = datc_msg_decode (first->data, first->len, DATC_FRAME_MAX, &error);
  if (again == NULL)
    {
      fprintf (stderr, "re-encoded frame refused: %s\n", error->message);
      fail ("a decoded message does not re-encode to a frame that decodes");
    }
  if (!msg_equal (msg, again))
    fail ("decode (encode (msg)) differs from msg");

  g_autoptr (GByteArray) second = g_byte_array_new ();
  datc_msg_encode (again, second);
  if (first->len != second->len || memcmp (first->data, second->data, first->len) != 0)
    fail ("encoding is not stable across a round trip");
}

int
LLVMFuzzerTestOneInput (const uint8_t *data, size_t size)
{
  g_autoptr (GError) error = NULL;
  g_autoptr (GError) hello_error = NULL;
  g_autoptr (DatcMsg) msg = datc_msg_decode (data, size, DATC_FRAME_MAX, &error);
  g_autoptr (DatcMsg) hello = datc_msg_decode (data, size, DATC_HELLO_FRAME_MAX, &hello_error);

  if (msg == NULL)
    check_error (error);
  if (hello == NULL)
    check_error (hello_error);

  if (size > DATC_HELLO_FRAME_MAX)
    {
      if (hello != NULL || hello_error->code != DATC_WIRE_ERROR_TOO_BIG)
        fail ("a frame over the HELLO cap was not refused as TOO_BIG");
    }
  else if ((msg == NULL) != (hello == NULL)
           || (msg == NULL
               && (error->code != hello_error->code
                   || strcmp (error->message, hello_error->message) != 0))
           || (msg != NULL && !msg_equal (msg, hello)))
    fail ("the two caps disagree on a frame under both");

  if (msg != NULL)
    check_round_trip (msg);
  return 0;
}
