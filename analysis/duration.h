/* duration.h: times as people write them in scenario files ("90", "45s",
 * "30m", "1.5h") and as the analysis prints them. */
#pragma once

#include <glib.h>

G_BEGIN_DECLS

/* The largest time accepted anywhere in a scenario: ten years. */
#define DATC_DURATION_MAX (10.0 * 365.0 * 86400.0)

/* Parses a non-negative number of seconds with an optional s, m or h
 * suffix.  Rejects empty, negative, non-finite, too large and trailing
 * text; the error says what was wrong (the caller adds where). */
gboolean datc_duration_parse (const char *text, double *seconds, GError **error);

/* Parses a plain finite number (no suffix). */
gboolean datc_number_parse (const char *text, double *value, GError **error);

/* "2h03m", "4m05s", "12.3s": for people; JSON always carries seconds. */
gchar *datc_duration_format (double seconds);

G_END_DECLS
