/* test-workdir.c: the workdir made and checked on the site (workdir.c),
 * through a local site (/workdir/local/..., suite unit) and through a real
 * sshd from tests/testbed/ whose login user is not root
 * (/workdir/ssh/..., suite testbed).  The same bodies run on both: each
 * gets a base directory of the login user on the site (this host, so what
 * the check made can be looked at directly).
 *
 * As in test-upload.c, an ssh body runs in a child process and the parent
 * brings the sshd up and down, so a failed assertion leaves nothing
 * running. */

#include "testbed-sshd.h"
#include "upload.h"
#include "workdir.h"

#include <glib/gstdio.h>

#include <pwd.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define GROUP "site tb"

typedef struct _Fixture Fixture;

typedef struct {
  const char *name;
  void (*body) (Fixture *f);
} WorkdirTest;

typedef struct {
  const WorkdirTest *test;
  gboolean ssh;
} Case;

struct _Fixture {
  gboolean ready;
  gboolean ssh;
  TestbedSshd sshd;
  GKeyFile *config;
  DatcSite *site;
  gchar *base; /* the login user's, closed to others */
  gchar *home; /* the login user's home, physical (transfer full) */
  uid_t uid;   /* the login user */
  gid_t gid;
};

static void
fixture_set_up (Fixture *f, gconstpointer data)
{
  const Case *c = data;
  g_autoptr (GError) error = NULL;

  f->ssh = c->ssh;
  if (!f->ssh)
    {
      /* The local site's login user is us; its home, for `~`, the
       * directory main() made ours. */
      f->base = g_dir_make_tmp ("datc-workdir-XXXXXX", &error);
      g_assert_no_error (error);
      f->home = realpath (g_getenv ("HOME"), NULL);
      f->uid = geteuid ();
      f->gid = getegid ();
      f->site = datc_site_new ("tb", "local", "fork", NULL, NULL, &error);
      g_assert_no_error (error);
      f->ready = TRUE;
      return;
    }
  if (!g_test_subprocess ())
    {
      f->ready = testbed_sshd_up (&f->sshd, NULL, NULL);
      return;
    }
  if (!testbed_sshd_attach (&f->sshd, g_getenv ("DATC_TEST_SSHD_DIR")))
    return;
  f->config = testbed_sshd_site (&f->sshd, GROUP);
  f->site = datc_site_new ("tb", "ssh", "fork", f->config, GROUP, &error);
  g_assert_no_error (error);
  f->base = g_strdup (testbed_sshd_get (&f->sshd, "SSHD_REMOTE_DIR"));
  struct passwd *pw = getpwnam (testbed_sshd_get (&f->sshd, "SSHD_USER"));
  g_assert_nonnull (pw);
  f->uid = pw->pw_uid;
  f->gid = pw->pw_gid;
  f->home = realpath (pw->pw_dir, NULL);
  g_assert_nonnull (f->home);
  f->ready = f->site != NULL;
}

static void
fixture_test (Fixture *f, gconstpointer data)
{
  const Case *c = data;

  if (!f->ready)
    return;
  if (!f->ssh || g_test_subprocess ())
    {
      c->test->body (f);
      return;
    }
  g_setenv ("DATC_TEST_SSHD_DIR", f->sshd.dir, TRUE);
  g_test_trap_subprocess (NULL, 60 * G_USEC_PER_SEC, G_TEST_SUBPROCESS_INHERIT_STDERR);
  g_unsetenv ("DATC_TEST_SSHD_DIR");
  if (!g_test_trap_has_passed ())
    {
      g_test_message ("%s failed in its child process (its messages are above)", c->test->name);
      g_test_fail ();
    }
}

static void
fixture_tear_down (Fixture *f, gconstpointer data)
{
  g_clear_pointer (&f->site, datc_site_free);
  g_clear_pointer (&f->config, g_key_file_unref);
  if (!f->ssh && f->base != NULL)
    testbed_remove_tree (f->base);
  g_clear_pointer (&f->base, g_free);
  g_clear_pointer (&f->home, free);
  if (f->ssh)
    testbed_sshd_clear (&f->sshd);
}

/* ---- helpers ------------------------------------------------------------ */

/* A directory of the login user under the base, with `mode` (transfer full). */
static gchar *
user_dir (Fixture *f, const char *name, mode_t mode)
{
  gchar *path = g_build_filename (f->base, name, NULL);

  g_assert_cmpint (g_mkdir (path, 0700), ==, 0);
  g_assert_cmpint (chown (path, f->uid, f->gid), ==, 0);
  g_assert_cmpint (chmod (path, mode), ==, 0);
  return path;
}

static void
assert_made (Fixture *f, const char *path)
{
  struct stat st;

  g_assert_cmpint (lstat (path, &st), ==, 0);
  g_assert_true (S_ISDIR (st.st_mode));
  g_assert_cmpuint (st.st_mode & 07777, ==, 0700);
  g_assert_cmpuint (st.st_uid, ==, f->uid);
}

/* The workdir is refused, naming `needle` (the directory and what is
 * wrong), and nothing is made there. */
static void
assert_refused (Fixture *f, const char *workdir, const char *needle)
{
  g_autoptr (GError) error = NULL;
  gchar *resolved = NULL;

  g_assert_false (datc_site_make_workdir (f->site, workdir, &resolved, &error));
  g_assert_error (error, DATC_SITE_ERROR, DATC_SITE_ERROR_CONFIG);
  g_assert_null (resolved);
  if (strstr (error->message, needle) == NULL || strstr (error->message, "site tb: ") == NULL)
    g_error ("'%s' is not in: %s", needle, error->message);
}

/* ---- tests -------------------------------------------------------------- */

static void
test_makes_each_missing_directory_0700 (Fixture *f)
{
  g_autofree gchar *a = g_build_filename (f->base, "a", NULL);
  g_autofree gchar *b = g_build_filename (a, "b", NULL);
  g_autofree gchar *c = g_build_filename (b, "c", NULL);
  g_autofree gchar *given = g_strdup_printf ("%s//a/b/c/", f->base);
  g_autoptr (GError) error = NULL;
  g_autofree gchar *resolved = NULL;

  /* A umask that would leave others in, were the mode not set. */
  mode_t old = umask (0);
  gboolean made = datc_site_make_workdir (f->site, given, &resolved, &error);
  umask (old);
  g_assert_no_error (error);
  g_assert_true (made);
  g_assert_cmpstr (resolved, ==, c);
  assert_made (f, a);
  assert_made (f, b);
  assert_made (f, c);

  /* Again: it is there, and fine. */
  g_clear_pointer (&resolved, g_free);
  g_assert_true (datc_site_make_workdir (f->site, c, &resolved, &error));
  g_assert_no_error (error);
  g_assert_cmpstr (resolved, ==, c);
}

/* `~/...` (what run.c gives a remote site by default: ~/.datc/TAG/SITE)
 * lands in the login user's home, each level made 0700. */
static void
test_resolves_home (Fixture *f)
{
  g_autofree gchar *top_name = g_strdup_printf (".datc-test-%d", (int) getpid ());
  g_autofree gchar *given = g_strdup_printf ("~/%s/0123456789abcdef/site", top_name);
  g_autofree gchar *top = g_build_filename (f->home, top_name, NULL);
  g_autofree gchar *tag = g_build_filename (top, "0123456789abcdef", NULL);
  g_autofree gchar *want = g_build_filename (tag, "site", NULL);
  g_autoptr (GError) error = NULL;
  g_autofree gchar *resolved = NULL;

  gboolean made = datc_site_make_workdir (f->site, given, &resolved, &error);
  g_assert_no_error (error);
  g_assert_true (made);
  g_assert_cmpstr (resolved, ==, want);
  assert_made (f, top);
  assert_made (f, tag);
  assert_made (f, want);
  testbed_remove_tree (top);
}

static void
test_refuses_a_symlink (Fixture *f)
{
  g_autofree gchar *real = user_dir (f, "real", 0700);
  g_autofree gchar *link = g_build_filename (f->base, "link", NULL);
  g_autofree gchar *below = g_build_filename (link, "below", NULL);
  g_autofree gchar *is_link = g_strdup_printf ("%s is a symbolic link", link);

  g_assert_cmpint (symlink (real, link), ==, 0);
  g_assert_cmpint (lchown (link, f->uid, f->gid), ==, 0);
  assert_refused (f, link, is_link);
  /* A parent that is one, too; nothing is made through it.  (Not for
   * root: root's own links are as much its choice as its directories, and
   * no one else can change them.) */
  if (f->uid == 0)
    return;
  assert_refused (f, below, is_link);
  g_autofree gchar *inside = g_build_filename (real, "below", NULL);
  g_assert_false (g_file_test (inside, G_FILE_TEST_EXISTS));
}

static void
test_refuses_a_group_writable_parent (Fixture *f)
{
  g_autofree gchar *gw = user_dir (f, "gw", 0770);
  g_autofree gchar *wd = g_build_filename (gw, "wd", NULL);
  g_autofree gchar *said = g_strdup_printf ("%s is drwxrwx---, writable by its group", gw);

  assert_refused (f, wd, said);
  g_assert_false (g_file_test (wd, G_FILE_TEST_EXISTS));
  /* Writable by anyone, the same. */
  g_assert_cmpint (chmod (gw, 0707), ==, 0);
  g_autofree gchar *said_o = g_strdup_printf ("%s is drwx---rwx, writable by other users", gw);
  assert_refused (f, wd, said_o);
}

static void
test_refuses_a_parent_of_another_user (Fixture *f)
{
  g_autofree gchar *theirs = g_build_filename (f->base, "theirs", NULL);
  g_autofree gchar *wd = g_build_filename (theirs, "wd", NULL);
  g_autofree gchar *said = g_strdup_printf ("%s belongs to another user (uid 65534", theirs);

  if (geteuid () != 0)
    {
      g_test_skip ("giving a directory to another user needs root");
      return;
    }
  g_assert_cmpint (g_mkdir (theirs, 0777), ==, 0);
  g_assert_cmpint (chmod (theirs, 0777), ==, 0);
  g_assert_cmpint (chown (theirs, 65534, 65534), ==, 0);
  assert_refused (f, wd, said);
  g_assert_false (g_file_test (wd, G_FILE_TEST_EXISTS));
  /* The workdir itself another's: the same. */
  assert_refused (f, theirs, said);
}

static void
test_refuses_an_open_workdir (Fixture *f)
{
  g_autofree gchar *open = user_dir (f, "open", 0755);
  g_autofree gchar *said = g_strdup_printf ("%s is drwxr-xr-x, open to other users", open);

  assert_refused (f, open, said);
}

static void
test_refuses_a_name_that_is_not_plain (Fixture *f)
{
  const struct {
    const char *workdir;
    const char *needle;
  } cases[] = {
    { "datc", "not an absolute path" },     { "~other/datc", "not an absolute path" },
    { "/tmp/../etc", "'.' or '..'" },       { "~/./datc", "'.' or '..'" },
    { "/tmp/a\nb", "a control character" },
  };

  for (gsize i = 0; i < G_N_ELEMENTS (cases); i++)
    assert_refused (f, cases[i].workdir, cases[i].needle);
}

/* The agent's hash is checked where it lies: in the workdir made here,
 * the same copy reused by the next upload. */
static void
test_upload_into_a_made_workdir (Fixture *f)
{
  g_autofree gchar *given = g_build_filename (f->base, "up", "wd", NULL);
  g_autofree gchar *wd = NULL;
  g_autoptr (GError) error = NULL;

  g_assert_true (datc_site_make_workdir (f->site, given, &wd, &error));
  g_assert_no_error (error);
  g_autofree gchar *first = NULL;
  g_assert_true (datc_site_upload_agent (f->site, "/bin/echo", wd, &first, &error));
  g_assert_no_error (error);
  g_autofree gchar *dir = g_path_get_dirname (first);
  g_assert_cmpstr (dir, ==, wd);
  struct stat st1, st2;
  g_assert_cmpint (stat (first, &st1), ==, 0);
  g_assert_cmpuint (st1.st_uid, ==, f->uid);

  g_autofree gchar *second = NULL;
  g_assert_true (datc_site_upload_agent (f->site, "/bin/echo", wd, &second, &error));
  g_assert_no_error (error);
  g_assert_cmpstr (second, ==, first);
  g_assert_cmpint (stat (second, &st2), ==, 0);
  g_assert_cmpuint (st2.st_ino, ==, st1.st_ino);
}

/* `datc sites check`'s form: nothing made, what would be said. */
static void
test_check_makes_nothing (Fixture *f)
{
  g_autofree gchar *fresh = g_build_filename (f->base, "fresh", "wd", NULL);
  g_autofree gchar *gw = user_dir (f, "gw", 0775);
  g_autofree gchar *in_gw = g_build_filename (gw, "wd", NULL);
  g_autoptr (GError) error = NULL;
  gboolean ok = FALSE;
  g_autofree gchar *said = NULL;

  g_assert_true (datc_site_check_workdir (f->site, fresh, &ok, &said, &error));
  g_assert_no_error (error);
  g_assert_true (ok);
  g_autofree gchar *can = g_strdup_printf ("%s: can be created (0700) in %s", fresh, f->base);
  g_assert_cmpstr (said, ==, can);
  g_autofree gchar *parent = g_path_get_dirname (fresh);
  g_assert_false (g_file_test (parent, G_FILE_TEST_EXISTS));

  g_clear_pointer (&said, g_free);
  g_assert_true (datc_site_check_workdir (f->site, in_gw, &ok, &said, &error));
  g_assert_no_error (error);
  g_assert_false (ok);
  g_autofree gchar *bad
      = g_strdup_printf ("%s is drwxrwxr-x, writable by its group: chmod g-w it", gw);
  g_assert_cmpstr (said, ==, bad);
}

static const WorkdirTest tests[] = {
  { "makes-each-missing-directory-0700", test_makes_each_missing_directory_0700 },
  { "resolves-home", test_resolves_home },
  { "refuses-a-symlink", test_refuses_a_symlink },
  { "refuses-a-group-writable-parent", test_refuses_a_group_writable_parent },
  { "refuses-a-parent-of-another-user", test_refuses_a_parent_of_another_user },
  { "refuses-an-open-workdir", test_refuses_an_open_workdir },
  { "refuses-a-name-that-is-not-plain", test_refuses_a_name_that_is_not_plain },
  { "upload-into-a-made-workdir", test_upload_into_a_made_workdir },
  { "check-makes-nothing", test_check_makes_nothing },
};

int
main (int argc, char **argv)
{
  static Case cases[2 * G_N_ELEMENTS (tests)];

  g_test_init (&argc, &argv, NULL);
  g_unsetenv ("SSH_AUTH_SOCK");
  /* The local cases' home (their commands inherit our environment), set
   * before any thread exists. */
  g_autoptr (GError) error = NULL;
  g_autofree gchar *home = NULL;
  if (!g_test_subprocess ())
    {
      home = g_dir_make_tmp ("datc-workdir-home-XXXXXX", &error);
      g_assert_no_error (error);
      g_setenv ("HOME", home, TRUE);
    }
  for (gsize i = 0; i < G_N_ELEMENTS (tests); i++)
    for (guint ssh = 0; ssh < 2; ssh++)
      {
        Case *c = &cases[2 * i + ssh];
        c->test = &tests[i];
        c->ssh = ssh;
        g_autofree gchar *path
            = g_strdup_printf ("/workdir/%s/%s", ssh ? "ssh" : "local", tests[i].name);
        g_test_add (path, Fixture, c, fixture_set_up, fixture_test, fixture_tear_down);
      }
  int status = g_test_run ();
  if (home != NULL)
    testbed_remove_tree (home);
  return status;
}
