/* waitcache.h: the queue waits a user's proxies met on each site, kept
 * across campaigns in a per-user file (by default
 * $XDG_CACHE_HOME/datc/waits.jsonl, i.e. ~/.cache/datc/waits.jsonl), so a
 * new campaign starts with what earlier ones saw.
 *
 * One JSON object per line: {"site": KEY, "wait_s": SECONDS, "time":
 * EPOCH_S}.  A site's KEY is its name, scheduler and queue
 * (datc_wait_cache_key): a site renamed, or pointed at another queue, starts
 * afresh.  The cache keeps the last DATC_WAIT_CACHE_PER_SITE waits of each
 * site; the file is rewritten (temporary file and rename) to those once it
 * holds twice as many lines as that, so it stays bounded.  A cache is a
 * convenience: an unreadable file, or a bad line, is said once on stderr
 * and skipped, never an error; two campaigns writing at once may lose a
 * line to each other's rewrite. */
#pragma once

#include <glib.h>

G_BEGIN_DECLS

#define DATC_WAIT_CACHE_PER_SITE 200

typedef struct DatcWaitCache DatcWaitCache;

/* The default path: $XDG_CACHE_HOME/datc/waits.jsonl (transfer full). */
gchar *datc_wait_cache_default_path (void);

/* Reads `path` (NULL: the default path; missing: empty).  Never fails. */
DatcWaitCache *datc_wait_cache_open (const char *path);
void datc_wait_cache_free (DatcWaitCache *c);
G_DEFINE_AUTOPTR_CLEANUP_FUNC (DatcWaitCache, datc_wait_cache_free)

/* "NAME|SCHEDULER|QUEUE" (QUEUE empty for the default; transfer full). */
gchar *datc_wait_cache_key (const char *name, const char *scheduler, const char *queue);

/* Appends the waits (seconds) known for `key`, oldest first, to `out`
 * (a GArray of double). */
void datc_wait_cache_get (DatcWaitCache *c, const char *key, GArray *out);

/* One more wait of `key`, at `when` (epoch seconds): kept, and appended to
 * the file (which is first rewritten when it has grown past its bound). */
void datc_wait_cache_add (DatcWaitCache *c, const char *key, double wait_s, gint64 when);

G_END_DECLS
