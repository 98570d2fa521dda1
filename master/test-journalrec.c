/* test-journalrec.c: the journal record codec.  Every record type is
 * encoded to the very bytes the ledger wrote by hand before the codec
 * existed (packed here the old way, call by call: journals on disk must
 * resume), decodes back to the same values, and every truncation or
 * garbling of it is refused with an error that names the record and the
 * field. */
#include <glib.h>
#include <msgpack.h>
#include <string.h>

#include "journalrec.h"

static int
gba_write (void *data, const char *buf, size_t len)
{
  g_byte_array_append ((GByteArray *) data, (const guint8 *) buf, len);
  return 0;
}

static void
old_str (msgpack_packer *pk, const char *s)
{
  if (s == NULL)
    {
      msgpack_pack_nil (pk);
      return;
    }
  msgpack_pack_str (pk, strlen (s));
  msgpack_pack_str_body (pk, s, strlen (s));
}

static const DatcTaskKey keys[] = { { 1, 1 }, { 300, 70000 }, { G_MAXUINT64, G_MAXUINT32 } };
static const guint64 ids[] = { 5, 0x1ffffffffull };
static const guint8 data[] = { 't', 'r', 'u', 'e', '\n', 0 };

/* One record of each type, with values that take every msgpack width,
 * and the bytes the ledger's hand-written packer gave it. */
static GPtrArray *
samples (GPtrArray **expected)
{
  GPtrArray *recs = g_ptr_array_new_with_free_func (g_free);
  *expected = g_ptr_array_new_with_free_func ((GDestroyNotify) g_byte_array_unref);
  msgpack_packer pk;
  DatcRecord *r;
  GByteArray *b;

#define NEXT(t, n)                                                                                 \
  r = g_new0 (DatcRecord, 1);                                                                      \
  r->type = t;                                                                                     \
  g_ptr_array_add (recs, r);                                                                       \
  b = g_byte_array_new ();                                                                         \
  g_ptr_array_add (*expected, b);                                                                  \
  msgpack_packer_init (&pk, b, gba_write);                                                         \
  msgpack_pack_array (&pk, n);                                                                     \
  msgpack_pack_uint8 (&pk, (guint8) t)

  NEXT (DATC_REC_START, 3);
  r->u.start = (DatcRecStart) { 4000000000u, 1700000000123456 };
  msgpack_pack_uint64 (&pk, 4000000000u);
  msgpack_pack_int64 (&pk, 1700000000123456);

  NEXT (DATC_REC_AGENT, 6);
  r->u.agent = (DatcRecAgent) { 65536, "agent-é", "slurm", "p-1", "" };
  msgpack_pack_uint32 (&pk, 65536);
  old_str (&pk, "agent-é");
  old_str (&pk, "slurm");
  old_str (&pk, "p-1");
  old_str (&pk, "");

  NEXT (DATC_REC_DISPATCH, 4);
  r->u.dispatch = (DatcRecDispatch) { 7, 1700000000123456, { keys, G_N_ELEMENTS (keys) } };
  msgpack_pack_uint32 (&pk, 7);
  msgpack_pack_int64 (&pk, 1700000000123456);
  msgpack_pack_array (&pk, 2 * G_N_ELEMENTS (keys));
  for (guint i = 0; i < G_N_ELEMENTS (keys); i++)
    {
      msgpack_pack_uint64 (&pk, keys[i].id);
      msgpack_pack_uint32 (&pk, keys[i].attempt);
    }

  NEXT (DATC_REC_RESULT, 19);
  r->u.result = (DatcRecResult) {
    .id = 123456789012,
    .attempt = 3,
    .agent = G_MAXUINT32,
    .final = TRUE,
    .status = 100,
    .exit_code = -1,
    .signal = 9,
    .started = -5,
    .finished = 1700000000123456,
    .out_off = 0,
    .out_len = 255,
    .err_off = 65536,
    .err_len = 1,
    .out_dropped = 2,
    .err_dropped = G_MAXUINT64,
    .message = "lost \"twice\"\n",
    .end_class = 4,
    .oom_evidence = NULL,
  };
  msgpack_pack_uint64 (&pk, 123456789012);
  msgpack_pack_uint32 (&pk, 3);
  msgpack_pack_uint32 (&pk, G_MAXUINT32);
  msgpack_pack_true (&pk);
  msgpack_pack_uint32 (&pk, 100);
  msgpack_pack_int64 (&pk, -1);
  msgpack_pack_int64 (&pk, 9);
  msgpack_pack_int64 (&pk, -5);
  msgpack_pack_int64 (&pk, 1700000000123456);
  msgpack_pack_uint64 (&pk, 0);
  msgpack_pack_uint64 (&pk, 255);
  msgpack_pack_uint64 (&pk, 65536);
  msgpack_pack_uint64 (&pk, 1);
  msgpack_pack_uint64 (&pk, 2);
  msgpack_pack_uint64 (&pk, G_MAXUINT64);
  old_str (&pk, "lost \"twice\"\n");
  msgpack_pack_uint32 (&pk, 4);
  old_str (&pk, NULL);

  NEXT (DATC_REC_REQUEUE, 3);
  r->u.requeue = (DatcRecRequeue) { 42, TRUE };
  msgpack_pack_uint64 (&pk, 42);
  msgpack_pack_true (&pk);

  NEXT (DATC_REC_SOURCE, 9);
  r->u.source = (DatcRecSource) { 1, "sub.txt", "ab12", 11, 1, -7, 2, { data, sizeof data } };
  msgpack_pack_uint32 (&pk, 1);
  old_str (&pk, "sub.txt");
  old_str (&pk, "ab12");
  msgpack_pack_uint64 (&pk, 11);
  msgpack_pack_uint64 (&pk, 1);
  msgpack_pack_int64 (&pk, -7);
  msgpack_pack_uint8 (&pk, 2);
  msgpack_pack_bin (&pk, sizeof data);
  msgpack_pack_bin_body (&pk, data, sizeof data);

  NEXT (DATC_REC_SOURCE, 9);
  r->u.source = (DatcRecSource) { 0, "tasks.txt", "cd34", 1, 1000000, 1, 0, { NULL, 0 } };
  msgpack_pack_uint32 (&pk, 0);
  old_str (&pk, "tasks.txt");
  old_str (&pk, "cd34");
  msgpack_pack_uint64 (&pk, 1);
  msgpack_pack_uint64 (&pk, 1000000);
  msgpack_pack_int64 (&pk, 1);
  msgpack_pack_uint8 (&pk, 0);
  msgpack_pack_nil (&pk);

  NEXT (DATC_REC_PROXY, 6);
  r->u.proxy = (DatcRecProxy) { "sge", "p-9", "4242.1", "submitted", 99 };
  old_str (&pk, "sge");
  old_str (&pk, "p-9");
  old_str (&pk, "4242.1");
  old_str (&pk, "submitted");
  msgpack_pack_int64 (&pk, 99);

  NEXT (DATC_REC_CANCEL, 3);
  r->u.cancel = (DatcRecCancel) { 5, { ids, G_N_ELEMENTS (ids), FALSE } };
  msgpack_pack_int64 (&pk, 5);
  msgpack_pack_array (&pk, G_N_ELEMENTS (ids));
  for (guint i = 0; i < G_N_ELEMENTS (ids); i++)
    msgpack_pack_uint64 (&pk, ids[i]);

  NEXT (DATC_REC_CANCEL, 3);
  r->u.cancel = (DatcRecCancel) { 6, { NULL, 0, TRUE } };
  msgpack_pack_int64 (&pk, 6);
  msgpack_pack_nil (&pk);

  NEXT (DATC_REC_RETRY, 2);
  r->u.retry = (DatcRecRetry) { 1700000000123456 };
  msgpack_pack_int64 (&pk, 1700000000123456);

  NEXT (DATC_REC_ORPHANS, 3);
  r->u.orphans = (DatcRecOrphans) { 1700000060000000, { keys, 2 } };
  msgpack_pack_int64 (&pk, 1700000060000000);
  msgpack_pack_array (&pk, 4);
  for (guint i = 0; i < 2; i++)
    {
      msgpack_pack_uint64 (&pk, keys[i].id);
      msgpack_pack_uint32 (&pk, keys[i].attempt);
    }

  NEXT (DATC_REC_AGENT_GONE, 2);
  r->u.agent_gone = (DatcRecAgentGone) { 300 };
  msgpack_pack_uint32 (&pk, 300);

  NEXT (DATC_REC_REPLICATE, 5);
  r->u.replicate = (DatcRecReplicate) { 2, 1700000000123456, 77, 4 };
  msgpack_pack_uint32 (&pk, 2);
  msgpack_pack_int64 (&pk, 1700000000123456);
  msgpack_pack_uint64 (&pk, 77);
  msgpack_pack_uint32 (&pk, 4);

  NEXT (DATC_REC_COPY_END, 3);
  r->u.copy_end = (DatcRecCopyEnd) { 77, 3 };
  msgpack_pack_uint64 (&pk, 77);
  msgpack_pack_uint32 (&pk, 3);

  /* A checkpoint's records: no earlier datc wrote them, so the bytes
   * here are what the field tables give, pinned. */
  static const guint8 runtimes[] = { 1, 0, 0, 0, 0, 0, 0, 0, 0xff };
  static const guint8 sites[] = "slurm\0sge";
  NEXT (DATC_REC_CHECKPOINT, 9);
  r->u.checkpoint = (DatcRecCheckpoint) {
    .time_us = 1700000000123456,
    .from_bytes = G_MAXUINT64,
    .n_tasks = 1000000,
    .agents = 65536,
    .filter = TRUE,
    .runtimes = { runtimes, sizeof runtimes },
    .sites = { sites, sizeof sites },
    .seen = { NULL, 0 },
  };
  msgpack_pack_int64 (&pk, 1700000000123456);
  msgpack_pack_uint64 (&pk, G_MAXUINT64);
  msgpack_pack_uint64 (&pk, 1000000);
  msgpack_pack_uint32 (&pk, 65536);
  msgpack_pack_true (&pk);
  msgpack_pack_bin (&pk, sizeof runtimes);
  msgpack_pack_bin_body (&pk, runtimes, sizeof runtimes);
  msgpack_pack_bin (&pk, sizeof sites);
  msgpack_pack_bin_body (&pk, sites, sizeof sites);
  msgpack_pack_nil (&pk);

  static guint8 entries[2 * DATC_REC_TASK_ENTRY] = { 2, 1, 0, 0, 1, 0 };
  NEXT (DATC_REC_TASKS, 3);
  r->u.tasks = (DatcRecTasks) { 65537, { entries, sizeof entries } };
  msgpack_pack_uint64 (&pk, 65537);
  msgpack_pack_bin (&pk, sizeof entries);
  msgpack_pack_bin_body (&pk, entries, sizeof entries);

  static const guint8 packed[] = { 4, 3, 'a', 'b', '\n' };
  NEXT (DATC_REC_LINES, 2);
  r->u.lines = (DatcRecLines) { { packed, sizeof packed } };
  msgpack_pack_bin (&pk, sizeof packed);
  msgpack_pack_bin_body (&pk, packed, sizeof packed);
#undef NEXT
  return recs;
}

static void
assert_same (const DatcRecord *a, const DatcRecord *b)
{
  GByteArray *x = g_byte_array_new (), *y = g_byte_array_new ();
  g_assert_cmpint (a->type, ==, b->type);
  /* Equal values encode alike; the encoder is checked against the old
   * bytes separately. */
  datc_record_encode (a, x);
  datc_record_encode (b, y);
  g_assert_cmpmem (x->data, x->len, y->data, y->len);
  g_byte_array_unref (x);
  g_byte_array_unref (y);
}

static void
test_every_type_keeps_its_bytes_and_round_trips (void)
{
  g_autoptr (GPtrArray) expected = NULL;
  g_autoptr (GPtrArray) recs = samples (&expected);
  gboolean seen[DATC_REC_LINES + 1] = { FALSE };

  for (guint i = 0; i < recs->len; i++)
    {
      const DatcRecord *r = recs->pdata[i];
      GByteArray *want = expected->pdata[i];
      g_autoptr (GByteArray) got = g_byte_array_new ();
      datc_record_encode (r, got);
      g_test_message ("%s", datc_record_type_name (r->type));
      g_assert_cmpmem (got->data, got->len, want->data, want->len);

      g_auto (DatcRecord) back = { 0 };
      g_autoptr (GError) error = NULL;
      g_assert_true (datc_record_decode (got->data, got->len, &back, &error));
      g_assert_no_error (error);
      assert_same (r, &back);
      seen[r->type] = TRUE;
    }
  for (guint t = DATC_REC_START; t <= DATC_REC_LINES; t++)
    if (t != 6)
      g_assert_true (seen[t]);

  /* A few values read back field by field too. */
  const DatcRecord *res = recs->pdata[3];
  GByteArray *bytes = expected->pdata[3];
  g_auto (DatcRecord) back = { 0 };
  g_assert_true (datc_record_decode (bytes->data, bytes->len, &back, NULL));
  g_assert_cmpuint (back.u.result.id, ==, res->u.result.id);
  g_assert_cmpint (back.u.result.exit_code, ==, -1);
  g_assert_cmpint (back.u.result.started, ==, -5);
  g_assert_cmpuint (back.u.result.err_dropped, ==, G_MAXUINT64);
  g_assert_cmpstr (back.u.result.message, ==, "lost \"twice\"\n");
  g_assert_null (back.u.result.oom_evidence);
  g_assert_cmpuint (back.u.result.end_class, ==, 4);
}

/* A result of a datc before classes: 16 fields, no class, no evidence. */
static void
test_older_result_has_no_class (void)
{
  g_autoptr (GByteArray) b = g_byte_array_new ();
  msgpack_packer pk;
  msgpack_packer_init (&pk, b, gba_write);
  msgpack_pack_array (&pk, 17);
  msgpack_pack_uint8 (&pk, DATC_REC_RESULT);
  msgpack_pack_uint64 (&pk, 8);
  msgpack_pack_uint32 (&pk, 1);
  msgpack_pack_uint32 (&pk, 0);
  msgpack_pack_true (&pk);
  for (guint i = 0; i < 5; i++)
    msgpack_pack_int64 (&pk, i == 0 ? 1 : 0); /* status 1: signaled */
  for (guint i = 0; i < 6; i++)
    msgpack_pack_uint64 (&pk, i);
  msgpack_pack_nil (&pk);

  g_auto (DatcRecord) r = { 0 };
  g_autoptr (GError) error = NULL;
  g_assert_true (datc_record_decode (b->data, b->len, &r, &error));
  g_assert_no_error (error);
  g_assert_cmpuint (r.u.result.id, ==, 8);
  g_assert_cmpuint (r.u.result.status, ==, 1);
  g_assert_cmpuint (r.u.result.err_dropped, ==, 5);
  g_assert_cmpuint (r.u.result.end_class, ==, DATC_REC_NO_CLASS);
  g_assert_null (r.u.result.oom_evidence);
}

/* Every proper prefix of every record is refused, naming its record. */
static void
test_every_truncation_is_refused (void)
{
  g_autoptr (GPtrArray) expected = NULL;
  g_autoptr (GPtrArray) recs = samples (&expected);
  for (guint i = 0; i < expected->len; i++)
    {
      GByteArray *b = expected->pdata[i];
      const char *name = datc_record_type_name (((DatcRecord *) recs->pdata[i])->type);
      for (guint cut = 0; cut < b->len; cut++)
        {
          /* A copy of exactly `cut` bytes, so a read past it is ASan's. */
          g_autofree guint8 *part = g_memdup2 (b->data, cut);
          g_auto (DatcRecord) r = { 0 };
          g_autoptr (GError) error = NULL;
          g_assert_false (datc_record_decode (part, cut, &r, &error));
          g_assert_error (error, DATC_RECORD_ERROR, DATC_RECORD_ERROR_MALFORMED);
          /* Named by its type once that is read (a header of 1 or 3
           * bytes, a type byte). */
          if (cut >= 4)
            g_assert_true (g_str_has_prefix (error->message, name));
          g_assert_cmpint (r.type, ==, 0);
        }
    }
}

/* Decodes `b`, which must be refused, and returns the message. */
static gchar *
refusal (GByteArray *b)
{
  g_auto (DatcRecord) r = { 0 };
  GError *error = NULL;
  g_assert_false (datc_record_decode (b->data, b->len, &r, &error));
  g_assert_error (error, DATC_RECORD_ERROR, DATC_RECORD_ERROR_MALFORMED);
  gchar *message = g_strdup (error->message);
  g_error_free (error);
  return message;
}

static GByteArray *
start_record (msgpack_packer *pk, guint n, guint type)
{
  GByteArray *b = g_byte_array_new ();
  msgpack_packer_init (pk, b, gba_write);
  msgpack_pack_array (pk, n);
  msgpack_pack_uint64 (pk, type);
  return b;
}

static void
assert_refused (GByteArray *b, const char *says)
{
  g_autofree gchar *m = refusal (b);
  g_test_message ("%s", m);
  if (strstr (m, says) == NULL)
    g_error ("\"%s\" does not say \"%s\"", m, says);
  g_byte_array_unref (b);
}

static void
test_garbled_records_name_the_field (void)
{
  msgpack_packer pk;
  GByteArray *b;

  /* A string where exit_code is. */
  b = start_record (&pk, 19, DATC_REC_RESULT);
  msgpack_pack_uint64 (&pk, 1);
  msgpack_pack_uint32 (&pk, 1);
  msgpack_pack_uint32 (&pk, 0);
  msgpack_pack_false (&pk);
  msgpack_pack_uint32 (&pk, 0);
  old_str (&pk, "zero");
  assert_refused (b, "result record: field 6 (exit_code): expected an integer");

  /* A negative attempt. */
  b = start_record (&pk, 3, DATC_REC_COPY_END);
  msgpack_pack_uint64 (&pk, 1);
  msgpack_pack_int64 (&pk, -2);
  assert_refused (b, "copy end record: field 2 (attempt): expected an unsigned integer");

  /* An attempt wider than the wire's. */
  b = start_record (&pk, 5, DATC_REC_REPLICATE);
  msgpack_pack_uint32 (&pk, 1);
  msgpack_pack_int64 (&pk, 1);
  msgpack_pack_uint64 (&pk, 1);
  msgpack_pack_uint64 (&pk, 1ull << 32);
  assert_refused (b, "replicate record: field 4 (attempt): 4294967296 is over the limit");

  /* An agent index no master hands out. */
  b = start_record (&pk, 6, DATC_REC_AGENT);
  msgpack_pack_uint32 (&pk, G_MAXUINT16 * 256u + 1);
  assert_refused (b, "agent record: field 1 (idx)");

  /* nil where a string must be. */
  b = start_record (&pk, 6, DATC_REC_PROXY);
  old_str (&pk, "s");
  old_str (&pk, "p");
  msgpack_pack_nil (&pk);
  assert_refused (b, "proxy record: field 3 (job_id): expected a string");

  /* Keys that are not pairs. */
  b = start_record (&pk, 4, DATC_REC_DISPATCH);
  msgpack_pack_uint32 (&pk, 1);
  msgpack_pack_int64 (&pk, 1);
  msgpack_pack_array (&pk, 3);
  for (guint i = 0; i < 3; i++)
    msgpack_pack_uint32 (&pk, 1);
  assert_refused (b, "dispatch record: field 3 (keys): 3 integers, not (id, attempt) pairs");

  /* A list that declares more elements than there are bytes: refused
   * before anything is allocated for it. */
  b = start_record (&pk, 3, DATC_REC_ORPHANS);
  msgpack_pack_int64 (&pk, 1);
  msgpack_pack_array (&pk, G_MAXUINT32 - 1);
  assert_refused (b, "orphans record: field 2 (keys): an array of 4294967294 elements in 0 bytes");

  /* A bool where bytes or nil must be. */
  b = start_record (&pk, 9, DATC_REC_SOURCE);
  msgpack_pack_uint32 (&pk, 0);
  old_str (&pk, "t");
  old_str (&pk, "s");
  msgpack_pack_uint64 (&pk, 1);
  msgpack_pack_uint64 (&pk, 1);
  msgpack_pack_int64 (&pk, 1);
  msgpack_pack_uint8 (&pk, 0);
  msgpack_pack_true (&pk);
  assert_refused (b, "source record: field 8 (data): expected bytes or nil");

  /* Fields too few or too many. */
  b = start_record (&pk, 2, DATC_REC_REQUEUE);
  msgpack_pack_uint64 (&pk, 1);
  assert_refused (b, "requeue record has 1 fields, not 2");
  b = start_record (&pk, 18, DATC_REC_RESULT);
  assert_refused (b, "result record has 17 fields, not 18 or 16");

  /* Bytes after the record. */
  b = start_record (&pk, 2, DATC_REC_AGENT_GONE);
  msgpack_pack_uint32 (&pk, 1);
  msgpack_pack_nil (&pk);
  assert_refused (b, "agent gone record: 1 bytes after its last field");

  /* Types that are none of ours. */
  b = start_record (&pk, 1, 6);
  assert_refused (b, "unknown record type 6");
  b = start_record (&pk, 1, 1000);
  assert_refused (b, "unknown record type 1000");
  b = g_byte_array_new ();
  msgpack_packer_init (&pk, b, gba_write);
  old_str (&pk, "not a record");
  assert_refused (b, "expected an array");
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  g_test_add_func ("/journalrec/every-type-keeps-its-bytes-and-round-trips",
                   test_every_type_keeps_its_bytes_and_round_trips);
  g_test_add_func ("/journalrec/an-older-result-has-no-class", test_older_result_has_no_class);
  g_test_add_func ("/journalrec/every-truncation-is-refused", test_every_truncation_is_refused);
  g_test_add_func ("/journalrec/garbled-records-name-the-field",
                   test_garbled_records_name_the_field);
  return g_test_run ();
}
