/* test-upload.c: the agent upload against a real sshd from tests/testbed/
 * (the "site" is this host, so what arrived can be looked at directly).
 * The puts and commands are counted through datc_upload_agent_with with
 * counting wrappers around datc_site_put and datc_site_run.
 *
 * As in test-transport-ssh.c, each body runs in a child process and the
 * parent brings the sshd up and down, so a failed assertion leaves
 * nothing running. */

#include "drivers-private.h"
#include "testbed-sshd.h"
#include "upload.h"

#include <glib/gstdio.h>

#include <string.h>
#include <sys/stat.h>

#define GROUP "site tb"

typedef struct _Fixture Fixture;

typedef struct {
  const char *path;
  void (*body) (Fixture *f);
} UploadTest;

struct _Fixture {
  gboolean ready;
  TestbedSshd sshd;
  GKeyFile *config;
  DatcSite *site;
  gchar *cache; /* the cache directory on the site */
  guint puts;
  guint runs;
};

static void
fixture_set_up (Fixture *f, gconstpointer data)
{
  if (!g_test_subprocess ())
    {
      f->ready = testbed_sshd_up (&f->sshd, NULL, NULL);
      return;
    }
  if (!testbed_sshd_attach (&f->sshd, g_getenv ("DATC_TEST_SSHD_DIR")))
    return;
  f->config = testbed_sshd_site (&f->sshd, GROUP);
  g_autoptr (GError) error = NULL;
  f->site = datc_site_new ("tb", "ssh", "fork", f->config, GROUP, &error);
  g_assert_no_error (error);
  f->cache = g_build_filename (testbed_sshd_get (&f->sshd, "SSHD_REMOTE_DIR"), "cache", NULL);
  f->ready = f->site != NULL;
}

static void
fixture_test (Fixture *f, gconstpointer data)
{
  const UploadTest *test = data;

  if (!f->ready)
    return;
  if (g_test_subprocess ())
    {
      test->body (f);
      return;
    }
  g_setenv ("DATC_TEST_SSHD_DIR", f->sshd.dir, TRUE);
  g_test_trap_subprocess (NULL, 60 * G_USEC_PER_SEC, G_TEST_SUBPROCESS_INHERIT_STDERR);
  g_unsetenv ("DATC_TEST_SSHD_DIR");
  if (!g_test_trap_has_passed ())
    {
      g_test_message ("%s failed in its child process (its messages are above)", test->path);
      g_test_fail ();
    }
}

static void
fixture_tear_down (Fixture *f, gconstpointer data)
{
  g_clear_pointer (&f->site, datc_site_free);
  g_clear_pointer (&f->config, g_key_file_unref);
  g_clear_pointer (&f->cache, g_free);
  testbed_sshd_clear (&f->sshd);
}

/* ---- counting ops ------------------------------------------------------- */

static gboolean
counting_put (gpointer target, GBytes *data, const char *path, int mode, GError **error)
{
  Fixture *f = target;

  f->puts++;
  return datc_site_put (f->site, data, path, mode, error);
}

static gboolean
counting_run (gpointer target, const char *const *argv, DatcCommandResult *res, GError **error)
{
  Fixture *f = target;

  f->runs++;
  return datc_site_run (f->site, argv, res, error);
}

static const DatcUploadOps counting_ops = {
  .put = counting_put,
  .run = counting_run,
};

/* Uploads `agent`, counting from zero; returns the remote path. */
static gchar *
upload (Fixture *f, const char *agent)
{
  g_autoptr (GError) error = NULL;
  gchar *remote = NULL;

  f->puts = f->runs = 0;
  g_assert_true (datc_upload_agent_with (&counting_ops, f, "tb", agent, f->cache, &remote, &error));
  g_assert_no_error (error);
  g_assert_nonnull (remote);
  return remote;
}

/* A local copy of a real program, so the uploaded agent can be run. */
static gchar *
local_agent (Fixture *f, const char *program, const char *name)
{
  g_autofree gchar *contents = NULL;
  gsize len = 0;
  gchar *path = g_build_filename (f->sshd.dir, name, NULL);

  g_assert_true (g_file_get_contents (program, &contents, &len, NULL));
  g_assert_true (g_file_set_contents (path, contents, (gssize) len, NULL));
  return path;
}

static void
assert_same_file (const char *a, const char *b)
{
  g_autofree gchar *ca = NULL;
  g_autofree gchar *cb = NULL;
  gsize la = 0, lb = 0;

  g_assert_true (g_file_get_contents (a, &ca, &la, NULL));
  g_assert_true (g_file_get_contents (b, &cb, &lb, NULL));
  g_assert_cmpmem (ca, la, cb, lb);
}

static ino_t
inode_of (const char *path, mode_t *mode)
{
  struct stat st;

  g_assert_cmpint (stat (path, &st), ==, 0);
  if (mode != NULL)
    *mode = st.st_mode & 07777;
  return st.st_ino;
}

/* ---- tests -------------------------------------------------------------- */

static void
test_copies_once_then_reuses (Fixture *f)
{
  g_autofree gchar *agent = local_agent (f, "/bin/echo", "agent");
  g_autofree gchar *contents = NULL;
  gsize len = 0;

  g_assert_true (g_file_get_contents (agent, &contents, &len, NULL));
  g_autofree gchar *digest
      = g_compute_checksum_for_data (G_CHECKSUM_SHA256, (const guchar *) contents, len);
  g_autofree gchar *expected = g_strdup_printf ("%s/datc-agent-%.16s", f->cache, digest);

  /* First time: one check, one put, one check of what arrived. */
  g_autofree gchar *first = upload (f, agent);
  g_assert_cmpstr (first, ==, expected);
  g_assert_cmpuint (f->puts, ==, 1);
  g_assert_cmpuint (f->runs, ==, 2);
  assert_same_file (first, agent);
  mode_t mode = 0;
  ino_t inode = inode_of (first, &mode);
  g_assert_cmpuint (mode, ==, 0755);

  /* It runs on the site. */
  const char *argv[] = { first, "from", "the site", NULL };
  g_auto (DatcCommandResult) res = { 0 };
  g_autoptr (GError) error = NULL;
  g_assert_true (datc_site_run (f->site, argv, &res, &error));
  g_assert_no_error (error);
  g_assert_cmpint (res.exit_status, ==, 0);
  g_assert_cmpmem (g_bytes_get_data (res.out, NULL), g_bytes_get_size (res.out), "from the site\n",
                   14);

  /* Again, even from a new connection: one check, no put, same file. */
  g_clear_pointer (&f->site, datc_site_free);
  f->site = datc_site_new ("tb", "ssh", "fork", f->config, GROUP, &error);
  g_assert_no_error (error);
  g_autofree gchar *second = upload (f, agent);
  g_assert_cmpstr (second, ==, first);
  g_assert_cmpuint (f->puts, ==, 0);
  g_assert_cmpuint (f->runs, ==, 1);
  g_assert_cmpuint (inode_of (second, NULL), ==, inode);

  /* The public entry point says the same. */
  g_autofree gchar *third = NULL;
  g_assert_true (datc_site_upload_agent (f->site, agent, f->cache, &third, &error));
  g_assert_no_error (error);
  g_assert_cmpstr (third, ==, first);
  g_assert_cmpuint (inode_of (third, NULL), ==, inode);
}

static void
test_replaces_a_corrupted_copy (Fixture *f)
{
  g_autofree gchar *agent = local_agent (f, "/bin/echo", "agent");
  g_autofree gchar *remote = upload (f, agent);
  g_autofree gchar *contents = NULL;
  gsize len = 0;

  /* Cut short (a crash mid-copy, a full disk): same name, same mode. */
  g_assert_true (g_file_get_contents (remote, &contents, &len, NULL));
  g_assert_true (g_file_set_contents (remote, contents, (gssize) (len / 2), NULL));
  g_assert_cmpint (g_chmod (remote, 0755), ==, 0);

  g_autofree gchar *again = upload (f, agent);
  g_assert_cmpstr (again, ==, remote);
  g_assert_cmpuint (f->puts, ==, 1);
  assert_same_file (again, agent);

  /* One bit flipped: still caught, by the full digest. */
  g_clear_pointer (&contents, g_free);
  g_assert_true (g_file_get_contents (remote, &contents, &len, NULL));
  contents[len / 3] ^= 0x01;
  g_assert_true (g_file_set_contents (remote, contents, (gssize) len, NULL));
  g_assert_cmpint (g_chmod (remote, 0755), ==, 0);
  g_clear_pointer (&again, g_free);
  again = upload (f, agent);
  g_assert_cmpuint (f->puts, ==, 1);
  assert_same_file (again, agent);

  /* The right bytes without the exec bit are no use either. */
  g_assert_cmpint (g_chmod (remote, 0644), ==, 0);
  g_clear_pointer (&again, g_free);
  again = upload (f, agent);
  g_assert_cmpuint (f->puts, ==, 1);
  mode_t mode = 0;
  (void) inode_of (again, &mode);
  g_assert_cmpuint (mode, ==, 0755);
}

/* A copy that is a symlink is replaced even when what it points to has
 * the right bytes: the digest was of the target, which may change. */
static void
test_replaces_a_symlinked_copy (Fixture *f)
{
  g_autofree gchar *agent = local_agent (f, "/bin/echo", "agent");
  g_autofree gchar *remote = upload (f, agent);
  g_autofree gchar *aside = g_strdup_printf ("%s.aside", remote);

  g_assert_cmpint (g_rename (remote, aside), ==, 0);
  g_assert_cmpint (symlink (aside, remote), ==, 0);
  struct stat st;
  g_assert_cmpint (stat (aside, &st), ==, 0);
  g_assert_cmpint (lchown (remote, st.st_uid, st.st_gid), ==, 0);

  g_autofree gchar *again = upload (f, agent);
  g_assert_cmpstr (again, ==, remote);
  g_assert_cmpuint (f->puts, ==, 1);
  g_assert_cmpint (lstat (again, &st), ==, 0);
  g_assert_true (S_ISREG (st.st_mode));
  assert_same_file (again, agent);
}

static void
test_keeps_agents_apart_by_content (Fixture *f)
{
  g_autofree gchar *echo = local_agent (f, "/bin/echo", "agent-echo");
  g_autofree gchar *cat = local_agent (f, "/bin/cat", "agent-cat");
  g_autofree gchar *a = upload (f, echo);
  g_autofree gchar *b = upload (f, cat);

  g_assert_cmpstr (a, !=, b);
  g_assert_cmpuint (f->puts, ==, 1);
  assert_same_file (a, echo);
  assert_same_file (b, cat);
}

static void
test_refuses_bad_input_before_touching_the_site (Fixture *f)
{
  g_autofree gchar *agent = local_agent (f, "/bin/echo", "agent");
  g_autofree gchar *empty = g_build_filename (f->sshd.dir, "empty", NULL);
  gchar *remote = NULL;

  g_assert_true (g_file_set_contents (empty, "", 0, NULL));
  const struct {
    const char *agent;
    const char *cache;
    const char *needle;
  } cases[] = {
    { "/nonexistent/datc-agent", f->cache, "/nonexistent/datc-agent" },
    { empty, f->cache, "0 bytes" },
    { agent, "~/cache", "no '~'" },
    { agent, "", "not usable" },
  };

  f->puts = f->runs = 0;
  for (gsize i = 0; i < G_N_ELEMENTS (cases); i++)
    {
      g_autoptr (GError) error = NULL;

      g_assert_false (datc_upload_agent_with (&counting_ops, f, "tb", cases[i].agent,
                                              cases[i].cache, &remote, &error));
      g_assert_error (error, DATC_SITE_ERROR, DATC_SITE_ERROR_CONFIG);
      g_assert_nonnull (strstr (error->message, "site tb: agent upload: "));
      if (strstr (error->message, cases[i].needle) == NULL)
        g_error ("'%s' is not in: %s", cases[i].needle, error->message);
    }
  g_assert_null (remote);
  g_assert_cmpuint (f->puts + f->runs, ==, 0);
}

/* A site answer that is not a digest is a parse error, not a reuse. */
static gboolean
lying_run (gpointer target, const char *const *argv, DatcCommandResult *res, GError **error)
{
  res->exit_status = 0;
  res->out = g_bytes_new_static ("deadbeef  -\n", 12);
  res->err = g_bytes_new_static ("", 0);
  return TRUE;
}

static void
test_refuses_an_answer_that_is_no_digest (Fixture *f)
{
  static const DatcUploadOps lying_ops = {
    .put = counting_put,
    .run = lying_run,
  };
  g_autofree gchar *agent = local_agent (f, "/bin/echo", "agent");
  g_autoptr (GError) error = NULL;
  gchar *remote = NULL;

  f->puts = 0;
  g_assert_false (datc_upload_agent_with (&lying_ops, f, "tb", agent, f->cache, &remote, &error));
  g_assert_error (error, DATC_SITE_ERROR, DATC_SITE_ERROR_PARSE);
  g_assert_nonnull (strstr (error->message, "deadbeef"));
  g_assert_cmpuint (f->puts, ==, 0);
  g_assert_null (remote);
}

static const UploadTest tests[] = {
  { "/site/upload/copies-once-then-reuses", test_copies_once_then_reuses },
  { "/site/upload/replaces-a-corrupted-copy", test_replaces_a_corrupted_copy },
  { "/site/upload/replaces-a-symlinked-copy", test_replaces_a_symlinked_copy },
  { "/site/upload/keeps-agents-apart-by-content", test_keeps_agents_apart_by_content },
  { "/site/upload/refuses-bad-input-before-touching-the-site",
    test_refuses_bad_input_before_touching_the_site },
  { "/site/upload/refuses-an-answer-that-is-no-digest", test_refuses_an_answer_that_is_no_digest },
};

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  g_unsetenv ("SSH_AUTH_SOCK");

  for (gsize i = 0; i < G_N_ELEMENTS (tests); i++)
    g_test_add (tests[i].path, Fixture, &tests[i], fixture_set_up, fixture_test, fixture_tear_down);
  return g_test_run ();
}
