/* fuzz-zmtp.c: libFuzzer target for what the fast `datc status` reads
 * from a master (zmtp.h, textreply.h).  The input is the byte stream a
 * peer sends, fed to the reader in chunks whose sizes the first byte
 * chooses; when a reply comes out whole, {"text"} is decoded from it.
 * Checked: the reader never takes more than it was given, a reply stays
 * within its limit, and a decoded text is no longer than its reply.
 *
 *   CC=clang meson setup build-fuzz -Dfuzz=true
 *   ninja -C build-fuzz master/fuzz-zmtp
 *   build-fuzz/master/fuzz-zmtp -max_total_time=600 [CORPUS_DIR] */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "textreply.h"
#include "zmtp.h"

int LLVMFuzzerTestOneInput (const uint8_t *data, size_t size);

#define FUZZ_REPLY_MAX 4096

static void
fail (const char *what)
{
  fprintf (stderr, "fuzz-zmtp: %s\n", what);
  abort ();
}

int
LLVMFuzzerTestOneInput (const uint8_t *data, size_t size)
{
  if (size == 0)
    return 0;
  size_t chunk = (size_t) (data[0] % 17) + 1;
  data++;
  size--;
  DatcZmtpReader r;
  datc_zmtp_reader_init (&r, FUZZ_REPLY_MAX);
  DatcZmtpStatus st = DATC_ZMTP_NEED_MORE;
  size_t at = 0;
  while (at < size && st == DATC_ZMTP_NEED_MORE)
    {
      size_t n = size - at < chunk ? size - at : chunk;
      size_t used = 0;
      st = datc_zmtp_reader_feed (&r, data + at, n, &used);
      if (used > n)
        fail ("took more bytes than it was given");
      at += used;
      if (st == DATC_ZMTP_NEED_MORE && used != n)
        fail ("asked for more while bytes were left");
    }
  if (st == DATC_ZMTP_FAILED && r.why == NULL)
    fail ("failed without a reason");
  if (st == DATC_ZMTP_DONE)
    {
      if (r.reply_len > FUZZ_REPLY_MAX)
        fail ("a reply over its limit");
      char *text = NULL;
      size_t text_len = 0;
      const char *why = NULL;
      if (datc_text_reply_decode ((const char *) r.reply, r.reply_len, &text, &text_len, &why))
        {
          if (text_len > r.reply_len)
            fail ("a text longer than its reply");
          free (text);
        }
      else if (why == NULL)
        fail ("refused without a reason");
    }
  datc_zmtp_reader_clear (&r);
  return 0;
}
