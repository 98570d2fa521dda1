/* test-resultpack.c: results.jsonl lines packed for a checkpoint come
 * back as the same bytes, lines that would not go in verbatim, and a cut
 * or garbled run is refused, never misread. */
#include <string.h>

#include "ledger.h"
#include "resultpack.h"
#include "resultsfile.h"

/* A run like a campaign's: two agents taking turns, their outputs
 * growing, one failure with a message, one OOM kill, names that need
 * escaping, and two lines that are not ours. */
static GString *
sample_lines (guint n)
{
  GString *s = g_string_new (NULL);
  guint64 ends[2] = { 0, 0 };
  for (guint i = 1; i <= n; i++)
    {
      guint a = i % 2;
      DatcResultLine r = {
        .id = i + (i % 7 == 0 ? 1000 : 0),
        .line = i + 1,
        .attempt = 1 + (i % 5 == 0),
        .status = i % 11 == 0 ? "signaled" : "exited",
        .end_class = i % 11 == 0 ? "oom" : "exit",
        .exit_code = i % 13 == 0 ? -1 : (gint64) (i % 3),
        .signal = i % 11 == 0 ? 9 : 0,
        .site = a ? "slurm \"big\"" : "local",
        .proxy = a ? "p-1" : "",
        .host = a ? "n\tode\x01" : "h",
        .agent = a ? "agent-ä" : "agent-2",
        .submitted = 1700000000000000,
        .started = 1700000000000000 + (gint64) i * 1500,
        .finished = 1700000000000000 + (gint64) i * 1700,
        .output = a ? "outputs/agent-ä.out" : "outputs/agent-2.out",
        .out_off = ends[a],
        .out_len = i * 3,
        .err_len = i % 4,
        .message = i % 13 == 0 ? "spawn failed: \"no such file\"\n" : NULL,
        .oom_evidence = i % 11 == 0 ? "cgroup oom_kill 1" : NULL,
      };
      r.err_off = r.out_off + r.out_len;
      ends[a] = r.err_off + r.err_len;
      datc_result_line_format (s, &r);
      if (i == 5)
        g_string_append (s, "{\"id\":1,\"note\":\"not ours\"}\n");
      if (i == 6)
        /* Ours in shape, but an escape jsonout.c writes in lower case. */
        g_string_append (
            s, "{\"id\":1,\"line\":2,\"attempt\":1,\"status\":\"exited\",\"class\":\"exit\","
               "\"exit_code\":0,\"signal\":0,\"site\":\"\\u001F\",\"proxy\":\"\",\"host\":\"\","
               "\"agent\":\"\",\"submitted\":0,\"started\":0,\"finished\":0,\"output\":\"\","
               "\"stdout_offset\":0,\"stdout_bytes\":0,\"stderr_offset\":0,\"stderr_bytes\":0,"
               "\"stdout_dropped\":0,\"stderr_dropped\":0}\n");
    }
  return s;
}

static void
test_round_trip (void)
{
  g_autoptr (GString) lines = sample_lines (2000);
  g_autoptr (GByteArray) packed = g_byte_array_new ();
  g_autoptr (GString) back = g_string_new (NULL);
  g_autoptr (GError) error = NULL;

  guint raw = datc_result_pack ((const guint8 *) lines->str, lines->len, packed);
  g_assert_cmpuint (raw, ==, 2);
  g_assert_true (datc_result_unpack (packed->data, packed->len, back, &error));
  g_assert_no_error (error);
  g_assert_cmpuint (back->len, ==, lines->len);
  g_assert_true (memcmp (back->str, lines->str, lines->len) == 0);
  /* The point of packing: a line costs a tenth or less. */
  g_test_message ("%u bytes of lines packed into %u", (guint) lines->len, packed->len);
  g_assert_cmpuint (packed->len * 10, <, lines->len);
}

static void
test_every_cut (void)
{
  g_autoptr (GString) lines = sample_lines (40);
  g_autoptr (GByteArray) packed = g_byte_array_new ();
  datc_result_pack ((const guint8 *) lines->str, lines->len, packed);
  for (guint cut = 0; cut < packed->len; cut++)
    {
      g_autoptr (GString) back = g_string_new (NULL);
      g_autoptr (GError) error = NULL;
      /* A cut between items reads as fewer lines; anywhere else it is
       * refused.  Either way what came out is a prefix of the input. */
      if (!datc_result_unpack (packed->data, cut, back, &error))
        g_assert_error (error, DATC_LEDGER_ERROR, DATC_LEDGER_ERROR_CORRUPT);
      g_assert_cmpuint (back->len, <=, lines->len);
      g_assert_true (memcmp (back->str, lines->str, back->len) == 0);
    }
}

static void
test_refuses_garbage (void)
{
  static const struct {
    const char *bytes;
    gsize len;
    const char *message;
  } cases[] = {
    { "\x09", 1, "byte 0: an unknown item" },
    { "\x03\x00\x00", 3, "byte 3: a name index beyond those given" },
    { "\x04\x05"
      "ab\n",
      5, "byte 2: a line cut short" },
    { "\x04\x03"
      "abc",
      5, "byte 2: a line cut short" },
    { "\x02\x01"
      "a"
      "\x02"
      "b\0",
      6, "byte 4: a name cut short" },
    { "\x04\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\x01", 12,
      "byte 11: a line's length cut short" },
  };
  for (guint i = 0; i < G_N_ELEMENTS (cases); i++)
    {
      g_autoptr (GString) back = g_string_new (NULL);
      g_autoptr (GError) error = NULL;
      g_assert_false (
          datc_result_unpack ((const guint8 *) cases[i].bytes, cases[i].len, back, &error));
      g_assert_error (error, DATC_LEDGER_ERROR, DATC_LEDGER_ERROR_CORRUPT);
      g_assert_nonnull (strstr (error->message, cases[i].message));
    }
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  g_test_add_func ("/resultpack/lines-come-back-byte-for-byte", test_round_trip);
  g_test_add_func ("/resultpack/a-cut-run-gives-a-prefix-or-an-error", test_every_cut);
  g_test_add_func ("/resultpack/refuses-garbled-runs", test_refuses_garbage);
  return g_test_run ();
}
