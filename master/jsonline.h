/* jsonline.h: the one JSON string escaper for the lines the master writes
 * by hand (results.jsonl, trace.jsonl), where building a JsonNode per line
 * would cost more than the rest of the work. */
#pragma once

#include <glib.h>

G_BEGIN_DECLS

/* Appends `value` (UTF-8; NULL is written as "") as a quoted JSON string. */
void datc_json_append_string (GString *out, const char *value);

G_END_DECLS
