/* upload.c: copying the agent to a site once, and only once per content.
 *
 * The cached copy is named by the agent's hash, so different agents (two
 * datc versions) never overwrite each other and the name alone says
 * whether a copy may be the right one.  The name is only a claim, though:
 * a copy cut short by a crash or changed on the site would still carry
 * it, so the site hashes the file (sha256sum, or shasum -a 256 where that
 * is all there is) and the master compares the full digest before reusing
 * it.  A new copy goes through the transport's put (temporary name, mode,
 * rename), so a reader never sees half a file, and is hashed again after
 * it arrived.
 *
 * Everything the site answers is data from outside: sizes are capped by
 * datc_site_answer_text and the digest must be exactly 64 hex digits. */

#include "upload.h"

#include "drivers-private.h"

#include <string.h>

/* Hex digits of the digest in the file name: 64 bits tell agents apart;
 * the full digest decides. */
#define UPLOAD_NAME_DIGITS 16

/* The check run on the site; $1 is the cached path.  Prints "missing",
 * "unusable" (not an executable regular file, or a symlink: what it
 * points to is not what was checked), or the digest line. */
static const char check_script[]
    = "f=$1\n"
      "if [ ! -e \"$f\" ] && [ ! -L \"$f\" ]; then echo missing; exit 0; fi\n"
      "if [ -L \"$f\" ] || [ ! -f \"$f\" ] || [ ! -x \"$f\" ]; then echo unusable; exit 0; fi\n"
      "if command -v sha256sum >/dev/null 2>&1; then sha256sum <\"$f\"\n"
      "else shasum -a 256 <\"$f\"; fi\n";

typedef enum {
  CACHED_MISSING,
  CACHED_UNUSABLE,
  CACHED_HASHED,
} CachedState;

static gboolean
read_agent (const char *local_path, GBytes **data, GError **error)
{
  g_autoptr (GMappedFile) mapped = NULL;
  g_autoptr (GError) local_error = NULL;

  mapped = g_mapped_file_new (local_path, FALSE, &local_error);
  if (mapped == NULL)
    {
      g_set_error (error, DATC_SITE_ERROR, DATC_SITE_ERROR_CONFIG, "agent %s: %s", local_path,
                   local_error->message);
      return FALSE;
    }
  gsize len = g_mapped_file_get_length (mapped);
  if (len == 0 || len > DATC_UPLOAD_AGENT_MAX)
    {
      g_set_error (error, DATC_SITE_ERROR, DATC_SITE_ERROR_CONFIG,
                   "agent %s is %" G_GSIZE_FORMAT " bytes; an agent to upload is 1 to %u",
                   local_path, len, DATC_UPLOAD_AGENT_MAX);
      return FALSE;
    }
  /* A copy, not the mapping: the file may change under a long upload. */
  *data = g_bytes_new (g_mapped_file_get_contents (mapped), len);
  return TRUE;
}

static gboolean
cache_dir_is_usable (const char *cache_dir, GError **error)
{
  if (*cache_dir == '\0' || cache_dir[0] == '~' || strchr (cache_dir, '\n') != NULL)
    {
      g_autofree gchar *escaped = g_strescape (cache_dir, NULL);
      g_set_error (error, DATC_SITE_ERROR, DATC_SITE_ERROR_CONFIG,
                   "agent cache directory '%s' is not usable: give an absolute path, or "
                   "one relative to the login directory (no '~')",
                   escaped);
      return FALSE;
    }
  return TRUE;
}

/* What the site holds at `path`; *digest (transfer full) when hashed. */
static gboolean
check_cached (const DatcUploadOps *ops, gpointer target, const char *site_name, const char *path,
              CachedState *state, gchar **digest, GError **error)
{
  const char *argv[] = { "/bin/sh", "-c", check_script, "datc-agent-check", path, NULL };
  g_auto (DatcCommandResult) res = { 0 };
  g_autofree gchar *out = NULL;

  /* The runner's errors name the site already. */
  if (!ops->run (target, argv, &res, error))
    {
      g_prefix_error (error, "agent upload, checking %s: ", path);
      return FALSE;
    }
  if (res.exit_status != 0)
    {
      datc_site_set_command_error (error, "the agent check (sha256sum)", &res);
      g_prefix_error (error, "site %s: agent upload, checking %s: ", site_name, path);
      return FALSE;
    }
  if (!datc_site_answer_text (res.out, "the agent check's stdout", &out, error))
    {
      g_prefix_error (error, "site %s: agent upload, checking %s: ", site_name, path);
      return FALSE;
    }
  g_strstrip (out);

  if (strcmp (out, "missing") == 0)
    {
      *state = CACHED_MISSING;
      return TRUE;
    }
  if (strcmp (out, "unusable") == 0)
    {
      *state = CACHED_UNUSABLE;
      return TRUE;
    }
  /* "<64 hex>  -" */
  gsize hex = strspn (out, "0123456789abcdef");
  if (hex != 64 || (out[64] != '\0' && out[64] != ' '))
    {
      g_autofree gchar *quoted = datc_site_quote_output (res.out);
      g_set_error (error, DATC_SITE_ERROR, DATC_SITE_ERROR_PARSE,
                   "site %s: agent upload, checking %s: expected a SHA-256 digest, got: %s",
                   site_name, path, quoted);
      return FALSE;
    }
  *state = CACHED_HASHED;
  *digest = g_strndup (out, 64);
  return TRUE;
}

gboolean
datc_upload_agent_with (const DatcUploadOps *ops, gpointer target, const char *site_name,
                        const char *local_path, const char *cache_dir, gchar **remote_path,
                        GError **error)
{
  g_return_val_if_fail (ops != NULL && ops->put != NULL && ops->run != NULL, FALSE);
  g_return_val_if_fail (site_name != NULL, FALSE);
  g_return_val_if_fail (local_path != NULL, FALSE);
  g_return_val_if_fail (cache_dir != NULL, FALSE);
  g_return_val_if_fail (remote_path != NULL, FALSE);
  g_return_val_if_fail (error == NULL || *error == NULL, FALSE);

  g_autoptr (GBytes) agent = NULL;
  if (!cache_dir_is_usable (cache_dir, error) || !read_agent (local_path, &agent, error))
    {
      g_prefix_error (error, "site %s: agent upload: ", site_name);
      return FALSE;
    }

  g_autofree gchar *digest = g_compute_checksum_for_bytes (G_CHECKSUM_SHA256, agent);
  g_autofree gchar *name = g_strdup_printf ("datc-agent-%.*s", UPLOAD_NAME_DIGITS, digest);
  g_autofree gchar *path = g_build_filename (cache_dir, name, NULL);
  CachedState state = CACHED_MISSING;
  g_autofree gchar *found = NULL;

  if (!check_cached (ops, target, site_name, path, &state, &found, error))
    return FALSE;
  if (state == CACHED_HASHED && strcmp (found, digest) == 0)
    {
      *remote_path = g_steal_pointer (&path);
      return TRUE;
    }
  if (state != CACHED_MISSING)
    g_message ("site %s: replacing the cached agent %s (%s)", site_name, path,
               state == CACHED_UNUSABLE ? "not an executable file" : "its content changed");

  if (!ops->put (target, agent, path, 0755, error))
    {
      g_prefix_error (error, "agent upload to %s: ", path);
      return FALSE;
    }

  /* What arrived, not what was sent. */
  g_clear_pointer (&found, g_free);
  if (!check_cached (ops, target, site_name, path, &state, &found, error))
    return FALSE;
  if (state != CACHED_HASHED || strcmp (found, digest) != 0)
    {
      g_set_error (error, DATC_SITE_ERROR, DATC_SITE_ERROR_TRANSPORT,
                   "site %s: agent upload: %s does not hold what was sent (%s)", site_name, path,
                   state == CACHED_HASHED ? "its digest differs" : "not an executable file");
      return FALSE;
    }
  *remote_path = g_steal_pointer (&path);
  return TRUE;
}

static gboolean
site_put (gpointer target, GBytes *data, const char *path, int mode, GError **error)
{
  return datc_site_put (target, data, path, mode, error);
}

static gboolean
site_run (gpointer target, const char *const *argv, DatcCommandResult *res, GError **error)
{
  return datc_site_run (target, argv, res, error);
}

gboolean
datc_site_upload_agent (DatcSite *site, const char *local_path, const char *cache_dir,
                        gchar **remote_path, GError **error)
{
  static const DatcUploadOps site_ops = {
    .put = site_put,
    .run = site_run,
  };

  g_return_val_if_fail (site != NULL, FALSE);
  return datc_upload_agent_with (&site_ops, site, datc_site_name (site), local_path, cache_dir,
                                 remote_path, error);
}
