/* campaign.c: create, reopen and lock a campaign directory. */
#include "campaign.h"

#include <errno.h>
#include <fcntl.h>
#include <json-glib/json-glib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "curve.h"

G_DEFINE_QUARK (datc-campaign-error-quark, datc_campaign_error)

struct DatcCampaign {
  gchar *dir;
  gchar *master_key, *agent_key, *agents_dir, *sites_dir;
  int lock_fd;
  gboolean resumed;
  gboolean made_dir; /* DIR did not exist before datc_campaign_lock */
};

void
datc_campaign_free (DatcCampaign *c)
{
  if (c == NULL)
    return;
  if (c->lock_fd >= 0)
    close (c->lock_fd);
  g_free (c->dir);
  g_free (c->master_key);
  g_free (c->agent_key);
  g_free (c->agents_dir);
  g_free (c->sites_dir);
  g_free (c);
}

static gboolean
io_fail (GError **error, const char *path)
{
  g_set_error (error, DATC_CAMPAIGN_ERROR, DATC_CAMPAIGN_ERROR_IO, "%s: %s", path,
               g_strerror (errno));
  return FALSE;
}

static gboolean
make_keys (DatcCampaign *c, GError **error)
{
  g_autofree gchar *keys = g_build_filename (c->dir, "keys", NULL);
  DatcCurveKeypair kp;

  if (g_mkdir_with_parents (c->agents_dir, 0700) != 0 || chmod (keys, 0700) != 0)
    return io_fail (error, c->agents_dir);
  if (g_mkdir_with_parents (c->sites_dir, 0700) != 0)
    return io_fail (error, c->sites_dir);
  if (!g_file_test (c->master_key, G_FILE_TEST_EXISTS))
    {
      if (!datc_curve_keypair_generate (&kp, error)
          || !datc_curve_keypair_save (&kp, c->master_key, error))
        return FALSE;
      datc_curve_keypair_clear (&kp);
    }
  if (!g_file_test (c->agent_key, G_FILE_TEST_EXISTS))
    {
      if (!datc_curve_keypair_generate (&kp, error)
          || !datc_curve_keypair_save (&kp, c->agent_key, error))
        return FALSE;
      datc_curve_keypair_clear (&kp);
    }
  return TRUE;
}

static gboolean
write_json (const char *path, const char *task_file, const char *sha256, const char *format,
            const char *mode, GError **error)
{
  g_autoptr (JsonBuilder) b = json_builder_new ();
  json_builder_begin_object (b);
  json_builder_set_member_name (b, "version");
  json_builder_add_int_value (b, 1);
  json_builder_set_member_name (b, "task_file");
  json_builder_add_string_value (b, task_file);
  json_builder_set_member_name (b, "task_file_sha256");
  json_builder_add_string_value (b, sha256);
  json_builder_set_member_name (b, "format");
  json_builder_add_string_value (b, format);
  json_builder_set_member_name (b, "mode");
  json_builder_add_string_value (b, mode);
  json_builder_set_member_name (b, "created");
  json_builder_add_int_value (b, g_get_real_time ());
  json_builder_end_object (b);
  g_autoptr (JsonGenerator) gen = json_generator_new ();
  g_autoptr (JsonNode) root = json_builder_get_root (b);
  json_generator_set_root (gen, root);
  json_generator_set_pretty (gen, TRUE);
  g_autofree gchar *text = json_generator_to_data (gen, NULL);
  g_autofree gchar *with_nl = g_strconcat (text, "\n", NULL);
  return g_file_set_contents_full (path, with_nl, -1, G_FILE_SET_CONTENTS_CONSISTENT, 0600, error);
}

static JsonObject *
read_json (const char *path, JsonParser *parser, GError **error)
{
  if (!json_parser_load_from_file (parser, path, error))
    {
      g_prefix_error (error, "%s: ", path);
      return NULL;
    }
  JsonNode *root = json_parser_get_root (parser);
  if (root == NULL || !JSON_NODE_HOLDS_OBJECT (root)
      || !json_object_has_member (json_node_get_object (root), "task_file_sha256"))
    {
      g_set_error (error, DATC_CAMPAIGN_ERROR, DATC_CAMPAIGN_ERROR_INVALID,
                   "%s: not a datc campaign description", path);
      return NULL;
    }
  return json_node_get_object (root);
}

/* The task file and the format it was run with, from campaign.json. */
static gboolean
read_task_file (const char *dir, gchar **task_file, DatcTaskFileFormat *format, GError **error)
{
  g_autofree gchar *path = g_build_filename (dir, "campaign.json", NULL);
  g_autoptr (JsonParser) parser = json_parser_new ();
  JsonObject *o = read_json (path, parser, error);
  if (o == NULL)
    return FALSE;
  const char *fmt = json_object_get_string_member_with_default (o, "format", "auto");
  if (format != NULL && !datc_task_file_format_parse (fmt, format))
    {
      g_set_error (error, DATC_CAMPAIGN_ERROR, DATC_CAMPAIGN_ERROR_INVALID,
                   "%s: unknown task file format \"%s\"", path, fmt);
      return FALSE;
    }
  *task_file = g_strdup (json_object_get_string_member_with_default (o, "task_file", ""));
  return TRUE;
}

gchar *
datc_campaign_read_task_file (const char *dir, GError **error)
{
  gchar *task_file = NULL;
  return read_task_file (dir, &task_file, NULL, error) ? task_file : NULL;
}

DatcLedger *
datc_campaign_open_ledger (const char *dir, DatcBag *bag, const DatcLedgerOptions *options,
                           GError **error)
{
  g_autofree gchar *task_file = NULL;
  g_autofree gchar *sha = NULL;
  DatcTaskFileFormat format;
  if (!read_task_file (dir, &task_file, &format, error))
    return NULL;
  if (!datc_bag_load_file (bag, task_file, format, &sha, error))
    {
      g_prefix_error (error, "%s: reading its task file: ", dir);
      return NULL;
    }
  return datc_ledger_open (dir, bag, task_file, sha, options, error);
}

/* Whoever can write into the directory holding a campaign's sockets can
 * rename one away and bind their own in its place, and our clients and
 * agents would talk to it.  So that directory must be ours, a real
 * directory (lstat: not a symlink to somewhere else), and writable by no
 * one else; the /tmp fallback, shared by every user, must be 0700. */
static gboolean
check_socket_dir (const char *path, gboolean private_dir, GError **error)
{
  struct stat st;
  if (lstat (path, &st) != 0)
    return io_fail (error, path);
  const char *wrong = NULL;
  if (!S_ISDIR (st.st_mode))
    wrong = S_ISLNK (st.st_mode) ? "a symbolic link" : "not a directory";
  else if (st.st_uid != geteuid ())
    wrong = "owned by another user";
  else if (private_dir ? (st.st_mode & 077) != 0 : (st.st_mode & 022) != 0)
    wrong = private_dir ? "open to other users" : "writable by other users";
  if (wrong != NULL)
    {
      g_set_error (error, DATC_CAMPAIGN_ERROR, DATC_CAMPAIGN_ERROR_UNSAFE,
                   "%s: %s (owner uid %u, mode %04o), so someone else could put their own "
                   "socket in place of this campaign's; refusing to use it%s",
                   path, wrong, (unsigned) st.st_uid, (unsigned) (st.st_mode & 07777),
                   private_dir ? " (remove it, or have it removed: datc makes it again, mode 0700)"
                               : "");
      return FALSE;
    }
  return TRUE;
}

gchar *
datc_campaign_socket_path (const char *dir, const char *name, GError **error)
{
  g_autofree gchar *canon = g_canonicalize_filename (dir, NULL);
  g_autofree gchar *path = g_build_filename (canon, name, NULL);
  struct sockaddr_un sun;
  if (strlen (path) < sizeof sun.sun_path)
    return check_socket_dir (canon, FALSE, error) ? g_steal_pointer (&path) : NULL;
  g_autofree gchar *hash = g_compute_checksum_for_string (G_CHECKSUM_SHA256, canon, -1);
  g_autofree gchar *priv = g_strdup_printf ("/tmp/datc-%u", (unsigned) geteuid ());
  if (mkdir (priv, 0700) != 0 && errno != EEXIST)
    {
      io_fail (error, priv);
      return NULL;
    }
  if (!check_socket_dir (priv, TRUE, error))
    return NULL;
  return g_strdup_printf ("%s/%.24s.%s", priv, hash, name);
}

DatcCampaign *
datc_campaign_lock (const char *dir, GError **error)
{
  g_autoptr (DatcCampaign) c = g_new0 (DatcCampaign, 1);
  g_autofree gchar *lock = g_build_filename (dir, "lock", NULL);

  c->lock_fd = -1;
  c->dir = g_canonicalize_filename (dir, NULL);
  c->master_key = g_build_filename (c->dir, "keys", "master.key", NULL);
  c->agents_dir = g_build_filename (c->dir, "keys", "agents", NULL);
  c->agent_key = g_build_filename (c->agents_dir, "default.key", NULL);
  c->sites_dir = g_build_filename (c->dir, "keys", "sites", NULL);

  c->made_dir = !g_file_test (c->dir, G_FILE_TEST_EXISTS);
  if (g_mkdir_with_parents (c->dir, 0700) != 0)
    {
      io_fail (error, c->dir);
      return NULL;
    }
  c->lock_fd = open (lock, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
  if (c->lock_fd < 0)
    {
      io_fail (error, lock);
      return NULL;
    }
  if (flock (c->lock_fd, LOCK_EX | LOCK_NB) != 0)
    {
      g_set_error (error, DATC_CAMPAIGN_ERROR, DATC_CAMPAIGN_ERROR_BUSY,
                   "%s: another datc master is running this campaign", c->dir);
      return NULL;
    }
  if (ftruncate (c->lock_fd, 0) == 0)
    {
      g_autofree gchar *pid = g_strdup_printf ("%d\n", (int) getpid ());
      if (write (c->lock_fd, pid, strlen (pid)) < 0)
        g_debug ("%s: %s", lock, g_strerror (errno));
    }
  return g_steal_pointer (&c);
}

gboolean
datc_campaign_bind (DatcCampaign *c, const char *task_file, const char *sha256, const char *format,
                    const char *mode, GError **error)
{
  g_autofree gchar *json = g_build_filename (c->dir, "campaign.json", NULL);

  if (g_file_test (json, G_FILE_TEST_EXISTS))
    {
      g_autoptr (JsonParser) parser = json_parser_new ();
      JsonObject *o = read_json (json, parser, error);
      if (o == NULL)
        return FALSE;
      const char *old_sha = json_object_get_string_member_with_default (o, "task_file_sha256", "");
      const char *old_file = json_object_get_string_member_with_default (o, "task_file", "?");
      if (g_strcmp0 (old_sha, sha256) != 0)
        {
          g_set_error (error, DATC_CAMPAIGN_ERROR, DATC_CAMPAIGN_ERROR_MISMATCH,
                       "%s was started with task file %s; %s is a different file (sha256 "
                       "%.12s… instead of %.12s…). Use another --dir for a new campaign",
                       c->dir, old_file, task_file, sha256, old_sha);
          return FALSE;
        }
      c->resumed = TRUE;
    }
  else
    {
      g_autofree gchar *abs = g_canonicalize_filename (task_file, NULL);
      if (!write_json (json, abs, sha256, format, mode, error))
        return FALSE;
    }
  return make_keys (c, error);
}

void
datc_campaign_abandon (DatcCampaign *c)
{
  if (!c->made_dir || c->resumed)
    return;
  g_autofree gchar *lock = g_build_filename (c->dir, "lock", NULL);
  g_autofree gchar *json = g_build_filename (c->dir, "campaign.json", NULL);
  if (g_file_test (json, G_FILE_TEST_EXISTS))
    return; /* bound: a campaign now, whatever failed after */
  unlink (lock);
  rmdir (c->dir); /* only if nothing else is in it */
}

gboolean
datc_campaign_resumed (DatcCampaign *c)
{
  return c->resumed;
}

const char *
datc_campaign_dir (DatcCampaign *c)
{
  return c->dir;
}

const char *
datc_campaign_master_key (DatcCampaign *c)
{
  return c->master_key;
}

const char *
datc_campaign_agent_key (DatcCampaign *c)
{
  return c->agent_key;
}

/* The public keys under `dir` (*.pub), and the names they have there
 * without ".pub" (when `names` is not NULL). */
static GStrv
publics_in (const char *dir, GStrv *names, GError **error)
{
  g_autoptr (GDir) d = g_dir_open (dir, 0, error);
  g_autoptr (GStrvBuilder) b = g_strv_builder_new ();
  g_autoptr (GStrvBuilder) nb = g_strv_builder_new ();
  const char *name;
  if (d == NULL)
    return NULL;
  while ((name = g_dir_read_name (d)) != NULL)
    {
      if (!g_str_has_suffix (name, ".key.pub"))
        continue;
      g_autofree gchar *path = g_build_filename (dir, name, NULL);
      char pub[DATC_CURVE_Z85_LEN + 1];
      if (!datc_curve_public_load (pub, path, error))
        return NULL;
      g_strv_builder_add (b, pub);
      g_autofree gchar *bare = g_strndup (name, strlen (name) - strlen (".key.pub"));
      g_strv_builder_add (nb, bare);
    }
  if (names != NULL)
    *names = g_strv_builder_end (nb);
  return g_strv_builder_end (b);
}

GStrv
datc_campaign_agent_publics (DatcCampaign *c, GError **error)
{
  return publics_in (c->agents_dir, NULL, error);
}

gchar *
datc_campaign_site_key (DatcCampaign *c, const char *site, GError **error)
{
  /* Site names are letters, digits, '-', '_' and '.' (sitesfile.c, and
   * "local"): with ".key" after them, a plain name inside sites_dir. */
  g_autofree gchar *base = g_strconcat (site, ".key", NULL);
  g_autofree gchar *path = g_build_filename (c->sites_dir, base, NULL);
  DatcCurveKeypair kp;
  if (strchr (site, '/') != NULL || site[0] == '\0')
    {
      g_set_error (error, DATC_CAMPAIGN_ERROR, DATC_CAMPAIGN_ERROR_INVALID,
                   "site name \"%s\" cannot name a key file", site);
      return NULL;
    }
  if (!g_file_test (path, G_FILE_TEST_EXISTS))
    {
      gboolean ok
          = datc_curve_keypair_generate (&kp, error) && datc_curve_keypair_save (&kp, path, error);
      datc_curve_keypair_clear (&kp);
      if (!ok)
        return NULL;
    }
  return g_steal_pointer (&path);
}

GStrv
datc_campaign_site_publics (DatcCampaign *c, GStrv *sites, GError **error)
{
  return publics_in (c->sites_dir, sites, error);
}

gchar *
datc_campaign_ipc_endpoint (DatcCampaign *c, GError **error)
{
  g_autofree gchar *path = datc_campaign_socket_path (c->dir, "agents.sock", error);
  return path != NULL ? g_strconcat ("ipc://", path, NULL) : NULL;
}
