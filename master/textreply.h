/* textreply.h: the master's reply to `status` with "format":"text",
 * {"text":"..."}, read in libc alone for the fast `datc status` (front.c;
 * zmtp.h says why there is no GLib there).  The master writes it with
 * json-glib (datc_status_reply): exactly that one member, compact. */
#pragma once

#include <stdbool.h>
#include <stddef.h>

/* Decodes `reply` (`len` bytes): TRUE with *text (malloc'ed, NUL-ended,
 * transfer full) and *text_len, or false with *why (static) when it is
 * not exactly {"text":STRING} with a valid JSON string. */
bool datc_text_reply_decode (const char *reply, size_t len, char **text, size_t *text_len,
                             const char **why);
