/* upload.h: the agent, copied to a site once and found there by content.
 *
 * With `agent = upload` in a site's group, the master copies its agent
 * binary to CACHE_DIR/datc-agent-<first 16 hex digits of its SHA-256> on
 * the site and starts proxies with that path.  A copy already there is
 * reused when its full SHA-256 (computed on the site with sha256sum)
 * matches; one that does not, or is not an executable file, is replaced. */
#pragma once

#include "driver.h"

G_BEGIN_DECLS

/* Largest agent binary we read into memory to send. */
#define DATC_UPLOAD_AGENT_MAX (256u * 1024u * 1024u)

/* Makes sure the site holds `local_path`'s content, executable, under
 * `cache_dir` (absolute, or relative to the login directory; no `~`), and
 * says where (*remote_path, transfer full).  Runs one command on the site
 * to check, and when needed one put and one command to verify. */
gboolean datc_site_upload_agent (DatcSite *site, const char *local_path, const char *cache_dir,
                                 gchar **remote_path, GError **error);

/* The same against any pair of functions with datc_site_put()'s and
 * datc_site_run()'s contracts (tests count the puts with it).  `target`
 * is handed to both; `site_name` is for messages. */
typedef struct {
  gboolean (*put) (gpointer target, GBytes *data, const char *path, int mode, GError **error);
  gboolean (*run) (gpointer target, const char *const *argv, DatcCommandResult *res,
                   GError **error);
} DatcUploadOps;

gboolean datc_upload_agent_with (const DatcUploadOps *ops, gpointer target, const char *site_name,
                                 const char *local_path, const char *cache_dir, gchar **remote_path,
                                 GError **error);

G_END_DECLS
