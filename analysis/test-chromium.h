/* test-chromium.h: load an HTML file in headless Chromium (Debian's
 * `chromium`, installed by scripts/install-deps --test) and return the DOM
 * after its scripts ran.  A missing browser fails the test: a report test
 * that skips proves nothing. */
#pragma once

#include <glib.h>

/* The serialised DOM of `path` (transfer full); fails the test on error. */
gchar *chromium_dump_dom (const char *path);
/* Checks the marks the report's own script leaves on a loaded page: no
 * error, `plots` plots, every one of them drawn with a non-empty box. */
void chromium_assert_report_drawn (const char *dom, guint plots);
