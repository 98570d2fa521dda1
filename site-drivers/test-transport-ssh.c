/* test-transport-ssh.c: the ssh transport against a real sshd from
 * tests/testbed/ (each test gets its own, on a port the kernel picked):
 * host keys, client keys, commands, timeouts, SFTP, ~/.ssh/config, and
 * reconnection, on loopback and from one network namespace to another.
 *
 * Nothing is skipped: when the test bed cannot come up the test fails and
 * says why.  Each test body runs in a child process (g_test_trap_subprocess)
 * while the parent brings the test bed up before and down after it, so an
 * assertion that aborts the child still leaves no sshd, agent, proxy or
 * namespace behind: the parent stops them by pid or by name. */

#include "drivers-private.h"
#include "testbed-sshd.h"

#include <glib/gstdio.h>
#include <libssh/libssh.h>

#include <errno.h>
#include <fcntl.h>
#include <pwd.h>
#include <sched.h>
#include <signal.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#define GROUP "site tb"

typedef struct _Fixture Fixture;

typedef struct {
  const char *path;
  void (*body) (Fixture *f);
  gboolean netns; /* sshd in tb-siteA-*, the child in tb-master-* */
} SshTest;

struct _Fixture {
  gboolean ready;
  TestbedNetns netns;
  TestbedSshd sshd;
  GKeyFile *config;
  DatcTransport *transport;
};

/* Moves this thread, and so every socket it opens from now on and every
 * thread it starts, into the master namespace; proves it did. */
static gboolean
enter_namespace (const char *name)
{
  g_autofree gchar *ns_path = g_strdup_printf ("/run/netns/%s", name);
  int fd = open (ns_path, O_RDONLY | O_CLOEXEC);
  struct stat want, have;

  if (fd < 0 || setns (fd, CLONE_NEWNET) != 0)
    {
      g_printerr ("entering %s: %s\n", ns_path, g_strerror (errno));
      if (fd >= 0)
        close (fd);
      return FALSE;
    }
  close (fd);
  return stat (ns_path, &want) == 0 && stat ("/proc/thread-self/ns/net", &have) == 0
         && want.st_ino == have.st_ino;
}

static void
fixture_set_up (Fixture *f, gconstpointer data)
{
  const SshTest *test = data;

  if (!g_test_subprocess ())
    {
      if (test->netns)
        f->ready = testbed_netns_up (&f->netns, "siteA")
                   && testbed_sshd_up (&f->sshd, testbed_netns_get (&f->netns, "NETNS_SITE_siteA"),
                                       testbed_netns_get (&f->netns, "NETNS_ADDR_siteA"));
      else
        f->ready = testbed_sshd_up (&f->sshd, NULL, NULL);
      return;
    }

  if (test->netns
      && !(testbed_netns_attach (&f->netns, g_getenv ("DATC_TEST_NETNS_DIR"))
           && enter_namespace (testbed_netns_get (&f->netns, "NETNS_MASTER"))))
    {
      g_test_fail ();
      return;
    }
  if (!testbed_sshd_attach (&f->sshd, g_getenv ("DATC_TEST_SSHD_DIR")))
    return;
  f->config = testbed_sshd_site (&f->sshd, GROUP);

  g_autoptr (GError) error = NULL;
  f->transport = datc_transport_ssh.open (f->config, GROUP, &error);
  g_assert_no_error (error);
  f->ready = f->transport != NULL;
}

/* The parent: the body in a child, with the test bed handed over. */
static void
fixture_test (Fixture *f, gconstpointer data)
{
  const SshTest *test = data;

  if (!f->ready)
    return; /* the set-up failed, and said why */
  if (g_test_subprocess ())
    {
      test->body (f);
      return;
    }
  g_setenv ("DATC_TEST_SSHD_DIR", f->sshd.dir, TRUE);
  if (test->netns)
    g_setenv ("DATC_TEST_NETNS_DIR", f->netns.dir, TRUE);
  g_test_trap_subprocess (NULL, 60 * G_USEC_PER_SEC, G_TEST_SUBPROCESS_INHERIT_STDERR);
  g_unsetenv ("DATC_TEST_SSHD_DIR");
  g_unsetenv ("DATC_TEST_NETNS_DIR");
  if (!g_test_trap_has_passed ())
    {
      g_test_message ("%s failed in its child process (its messages are above)", test->path);
      g_test_fail ();
    }
}

static void
fixture_tear_down (Fixture *f, gconstpointer data)
{
  if (f->transport != NULL)
    f->transport->klass->close (f->transport);
  g_clear_pointer (&f->config, g_key_file_unref);
  testbed_sshd_clear (&f->sshd);
  testbed_netns_clear (&f->netns);
}

static gboolean
run (DatcTransport *t, const char *const *argv, GBytes *input, guint timeout_ms,
     DatcCommandResult *res, GError **error)
{
  return t->klass->run (t, argv, input, timeout_ms, res, error);
}

static void
assert_bytes_eq (GBytes *bytes, const char *expected)
{
  gsize len = 0;
  const char *data = g_bytes_get_data (bytes, &len);

  g_assert_cmpmem (data, len, expected, strlen (expected));
}

/* Opens a transport on `config`'s group after `key` was set to `value`. */
static DatcTransport *
open_with (GKeyFile *config, const char *key, const char *value)
{
  g_autoptr (GError) error = NULL;

  if (key != NULL)
    g_key_file_set_string (config, GROUP, key, value);
  DatcTransport *t = datc_transport_ssh.open (config, GROUP, &error);
  g_assert_no_error (error);
  return t;
}

/* The exit status of `echo hi` through `t`, asserting it ran. */
static void
assert_runs (DatcTransport *t)
{
  const char *argv[] = { "echo", "hi", NULL };
  g_auto (DatcCommandResult) res = { 0 };
  g_autoptr (GError) error = NULL;

  g_assert_true (run (t, argv, NULL, 20000, &res, &error));
  g_assert_no_error (error);
  g_assert_cmpint (res.exit_status, ==, 0);
  assert_bytes_eq (res.out, "hi\n");
}

static void
assert_refused (DatcTransport *t, const char *const *needles)
{
  const char *argv[] = { "true", NULL };
  g_auto (DatcCommandResult) res = { 0 };
  g_autoptr (GError) error = NULL;

  g_assert_false (run (t, argv, NULL, 20000, &res, &error));
  g_assert_error (error, DATC_SITE_ERROR, DATC_SITE_ERROR_TRANSPORT);
  g_test_message ("refused: %s", error->message);
  for (gsize i = 0; needles[i] != NULL; i++)
    if (strstr (error->message, needles[i]) == NULL)
      g_error ("'%s' is not in: %s", needles[i], error->message);
  g_assert_null (res.out);
}

/* A fresh ed25519 key written to `path` (private; .pub beside it). */
static void
write_new_key (const char *path)
{
  ssh_key key = NULL;
  g_autofree gchar *pub = g_strconcat (path, ".pub", NULL);

  g_assert_cmpint (ssh_pki_generate (SSH_KEYTYPE_ED25519, 0, &key), ==, SSH_OK);
  g_assert_cmpint (ssh_pki_export_privkey_file (key, NULL, NULL, NULL, path), ==, SSH_OK);
  g_assert_cmpint (ssh_pki_export_pubkey_file (key, pub), ==, SSH_OK);
  ssh_key_free (key);
}

/* ---- trust ------------------------------------------------------------ */

static void
test_unknown_host_key_is_refused (Fixture *f)
{
  g_autofree gchar *empty = g_build_filename (f->sshd.dir, "empty_known_hosts", NULL);
  g_autofree gchar *host
      = g_strdup_printf ("[127.0.0.1]:%s", testbed_sshd_get (&f->sshd, "SSHD_PORT"));
  const char *needles[]
      = { host, testbed_sshd_get (&f->sshd, "SSHD_HOST_FINGERPRINT"), "not known", NULL };

  g_assert_true (g_file_set_contents (empty, "", 0, NULL));
  DatcTransport *t = open_with (f->config, "known_hosts", empty);
  assert_refused (t, needles);
  /* Refused, not written down: the file is still empty. */
  g_autofree gchar *contents = NULL;
  g_assert_true (g_file_get_contents (empty, &contents, NULL, NULL));
  g_assert_cmpstr (contents, ==, "");
  t->klass->close (t);
}

static void
test_changed_host_key_is_refused (Fixture *f)
{
  g_autofree gchar *other = g_build_filename (f->sshd.dir, "other_host_key", NULL);
  g_autofree gchar *other_pub = g_strconcat (other, ".pub", NULL);
  g_autofree gchar *known = g_build_filename (f->sshd.dir, "changed_known_hosts", NULL);
  g_autofree gchar *pub = NULL;
  g_autofree gchar *host
      = g_strdup_printf ("[127.0.0.1]:%s", testbed_sshd_get (&f->sshd, "SSHD_PORT"));
  const char *needles[]
      = { host, testbed_sshd_get (&f->sshd, "SSHD_HOST_FINGERPRINT"), "CHANGED", NULL };

  /* The same host and key type, another key: what a man in the middle
   * (or a reinstalled host) shows. */
  write_new_key (other);
  g_assert_true (g_file_get_contents (other_pub, &pub, NULL, NULL));
  g_auto (GStrv) words = g_strsplit (pub, " ", 3);
  g_autofree gchar *line = g_strdup_printf ("%s %s %s\n", host, words[0], words[1]);
  g_assert_true (g_file_set_contents (known, line, -1, NULL));

  DatcTransport *t = open_with (f->config, "known_hosts", known);
  assert_refused (t, needles);
  t->klass->close (t);
}

static void
test_wrong_client_key_is_refused (Fixture *f)
{
  g_autofree gchar *wrong = g_build_filename (f->sshd.dir, "wrong_client_key", NULL);
  const char *needles[] = { "refused every key", "datc-tb", wrong, NULL };

  write_new_key (wrong);
  g_unsetenv ("SSH_AUTH_SOCK");
  DatcTransport *t = open_with (f->config, "identity", wrong);
  assert_refused (t, needles);
  t->klass->close (t);
}

static void
test_missing_identity_says_so (Fixture *f)
{
  const char *needles[] = { "/nonexistent/key", "no such file", NULL };

  g_unsetenv ("SSH_AUTH_SOCK");
  DatcTransport *t = open_with (f->config, "identity", "/nonexistent/key");
  assert_refused (t, needles);
  t->klass->close (t);
}

/* The key from an ssh-agent, with no key file named anywhere. */
static void
test_authenticates_through_ssh_agent (Fixture *f)
{
  g_autofree gchar *socket_path = g_build_filename (f->sshd.dir, "agent.sock", NULL);
  const char *agent_argv[] = { "ssh-agent", "-D", "-a", socket_path, NULL };
  g_autoptr (GError) error = NULL;
  GPid agent = 0;

  g_assert_true (
      g_spawn_async (NULL, (gchar **) agent_argv, NULL,
                     G_SPAWN_SEARCH_PATH | G_SPAWN_DO_NOT_REAP_CHILD | G_SPAWN_STDOUT_TO_DEV_NULL,
                     NULL, NULL, &agent, &error));
  g_assert_no_error (error);
  testbed_track_pid (&f->sshd, agent);

  /* Until the agent's socket exists (it answers from then on). */
  gint64 deadline = g_get_monotonic_time () + 10 * G_USEC_PER_SEC;
  while (!g_file_test (socket_path, G_FILE_TEST_EXISTS) && g_get_monotonic_time () < deadline)
    g_usleep (10 * 1000);

  g_autofree gchar *env_sock = g_strdup_printf ("SSH_AUTH_SOCK=%s", socket_path);
  const char *add_argv[]
      = { "env", env_sock, "ssh-add", "-q", testbed_sshd_get (&f->sshd, "SSHD_IDENTITY"), NULL };
  gint status = 0;
  g_autofree gchar *add_err = NULL;
  g_assert_true (g_spawn_sync (NULL, (gchar **) add_argv, NULL, G_SPAWN_SEARCH_PATH, NULL, NULL,
                               NULL, &add_err, &status, &error));
  g_assert_no_error (error);
  if (!g_spawn_check_wait_status (status, NULL))
    g_error ("ssh-add failed: %s", add_err);

  g_setenv ("SSH_AUTH_SOCK", socket_path, TRUE);
  g_key_file_remove_key (f->config, GROUP, "identity", NULL);
  DatcTransport *t = open_with (f->config, NULL, NULL);
  assert_runs (t);
  t->klass->close (t);

  g_unsetenv ("SSH_AUTH_SOCK");
  (void) kill (agent, SIGTERM);
  (void) waitpid (agent, NULL, 0);
  g_spawn_close_pid (agent);
}

/* ---- configuration ---------------------------------------------------- */

static void
test_open_checks_the_site_keys (void)
{
  static const struct {
    const char *key;
    const char *value;
    const char *needle;
  } cases[] = {
    { NULL, NULL, "no 'host'" },
    { "host", "", "'host' is empty" },
    { "host", "-oProxyCommand=x", "not a host name" },
    { "host", "a;b", "not a host name" },
    { "host", "alice@hpc", "a user goes in 'user'" },
    { "port", "0", "from 1 to 65535" },
    { "port", "22x", "from 1 to 65535" },
    { "port", "65536", "from 1 to 65535" },
    { "user", "-l", "not a user name" },
    { "user", "a b", "not a user name" },
  };

  for (gsize i = 0; i < G_N_ELEMENTS (cases); i++)
    {
      g_autoptr (GKeyFile) config = g_key_file_new ();
      g_autoptr (GError) error = NULL;

      if (cases[i].key != NULL && strcmp (cases[i].key, "host") != 0)
        g_key_file_set_string (config, GROUP, "host", "127.0.0.1");
      if (cases[i].key != NULL)
        g_key_file_set_string (config, GROUP, cases[i].key, cases[i].value);
      else
        g_key_file_set_string (config, GROUP, "user", "alice");

      g_assert_null (datc_transport_ssh.open (config, GROUP, &error));
      g_assert_error (error, DATC_SITE_ERROR, DATC_SITE_ERROR_CONFIG);
      if (strstr (error->message, cases[i].needle) == NULL)
        g_error ("case %" G_GSIZE_FORMAT ": '%s' is not in: %s", i, cases[i].needle,
                 error->message);
    }

  g_autoptr (GError) error = NULL;
  g_assert_null (datc_transport_ssh.open (NULL, NULL, &error));
  g_assert_error (error, DATC_SITE_ERROR, DATC_SITE_ERROR_CONFIG);
}

static void
test_registry_finds_ssh (void)
{
  g_assert_true (datc_transport_lookup ("ssh") == &datc_transport_ssh);
  g_autofree gchar *names = datc_transport_known_names ();
  g_assert_nonnull (strstr (names, "ssh"));
}

/* Logins the sshd accepted so far, from its log. */
static guint
count_logins (Fixture *f)
{
  g_autofree gchar *log = NULL;
  guint n = 0;

  g_assert_true (g_file_get_contents (testbed_sshd_get (&f->sshd, "SSHD_LOG"), &log, NULL, NULL));
  for (const char *p = log; (p = strstr (p, "Accepted publickey for ")) != NULL; p++)
    n++;
  return n;
}

/* The site names only an alias; ~/.ssh/config says where it leads.  This
 * child gets a home of its own (a bind mount over the real one, in a
 * mount namespace of its own), so the real ~/.ssh is neither read nor
 * touched. */
static void
test_host_goes_through_ssh_config (Fixture *f)
{
  g_autofree gchar *home = g_build_filename (f->sshd.dir, "home", NULL);
  g_autofree gchar *dot_ssh = g_build_filename (home, ".ssh", NULL);
  g_autofree gchar *config_path = g_build_filename (dot_ssh, "config", NULL);
  const char *port = testbed_sshd_get (&f->sshd, "SSHD_PORT");
  const char *user = testbed_sshd_get (&f->sshd, "SSHD_USER");
  const char *identity = testbed_sshd_get (&f->sshd, "SSHD_IDENTITY");
  const char *known = testbed_sshd_get (&f->sshd, "SSHD_KNOWN_HOSTS");
  g_autofree gchar *ssh_config
      = g_strdup_printf ("Host tbalias\n"
                         "  HostName 127.0.0.1\n"
                         "  Port %s\n"
                         "  User %s\n"
                         "  IdentityFile %s\n"
                         "  UserKnownHostsFile %s\n"
                         "Host tbwrong\n"
                         "  HostName 127.0.0.1\n"
                         "  Port 1\n"
                         "  User nobody-at-all\n"
                         "  IdentityFile %s\n"
                         "  UserKnownHostsFile %s\n"
                         "Host tbvia\n"
                         "  ProxyJump tbalias\n"
                         "  HostName 127.0.0.1\n"
                         "  Port %s\n"
                         "  User %s\n"
                         "  IdentityFile %s\n"
                         "  UserKnownHostsFile %s\n"
                         "Host *\n"
                         "  BatchMode yes\n",
                         port, user, identity, known, identity, known, port, user, identity, known);
  g_autoptr (GError) error = NULL;
  struct passwd *pw = getpwuid (getuid ());

  g_assert_cmpint (g_mkdir_with_parents (dot_ssh, 0700), ==, 0);
  g_assert_true (g_file_set_contents (config_path, ssh_config, -1, &error));
  g_assert_no_error (error);
  g_assert_nonnull (pw);
  if (unshare (CLONE_NEWNS) != 0)
    g_error ("unshare(CLONE_NEWNS): %s", g_strerror (errno));
  if (mount (NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) != 0
      || mount (home, pw->pw_dir, NULL, MS_BIND, NULL) != 0)
    g_error ("bind-mounting %s over %s: %s", home, pw->pw_dir, g_strerror (errno));

  /* Only the alias... */
  g_autoptr (GKeyFile) config = g_key_file_new ();
  g_key_file_set_string (config, GROUP, "host", "tbalias");
  DatcTransport *t = open_with (config, NULL, NULL);
  assert_runs (t);
  t->klass->close (t);

  /* ...and the site's keys win over the config's... */
  g_key_file_set_string (config, GROUP, "host", "tbwrong");
  g_key_file_set_string (config, GROUP, "port", port);
  g_key_file_set_string (config, GROUP, "user", user);
  t = open_with (config, NULL, NULL);
  assert_runs (t);
  t->klass->close (t);

  /* ...and ProxyJump works (libssh 0.10 runs `ssh -W` through the jump
   * host): two logins, the jump host's and the target's. */
  g_autoptr (GKeyFile) via = g_key_file_new ();
  g_key_file_set_string (via, GROUP, "host", "tbvia");
  guint before = count_logins (f);
  t = open_with (via, NULL, NULL);
  assert_runs (t);
  t->klass->close (t);
  g_assert_cmpuint (count_logins (f), ==, before + 2);
}

/* ---- run -------------------------------------------------------------- */

static void
test_run_reports_exit_status_stdout_and_stderr (Fixture *f)
{
  const char *argv[] = { "/bin/sh", "-c", "printf 'to out\\n'; printf 'to err' >&2; exit 3", NULL };
  g_auto (DatcCommandResult) res = { 0 };
  g_autoptr (GError) error = NULL;

  g_assert_true (run (f->transport, argv, NULL, 20000, &res, &error));
  g_assert_no_error (error);
  g_assert_cmpint (res.exit_status, ==, 3);
  assert_bytes_eq (res.out, "to out\n");
  assert_bytes_eq (res.err, "to err");
}

static void
test_run_reports_a_signal_as_a_shell_would (Fixture *f)
{
  const char *argv[] = { "/bin/sh", "-c", "kill -s KILL $$", NULL };
  g_auto (DatcCommandResult) res = { 0 };
  g_autoptr (GError) error = NULL;

  g_assert_true (run (f->transport, argv, NULL, 20000, &res, &error));
  g_assert_no_error (error);
  g_assert_cmpint (res.exit_status, ==, 128 + SIGKILL);
}

/* Each word arrives as one argument, whatever it holds. */
static void
test_run_quotes_every_word (Fixture *f)
{
  const char *argv[] = { "printf", "[%s]\\n", "two words", "it's", "$HOME", "`id`",
                         "a\nb",   "",        "*",         ";",    "\\",    NULL };
  g_auto (DatcCommandResult) res = { 0 };
  g_autoptr (GError) error = NULL;

  g_assert_true (run (f->transport, argv, NULL, 20000, &res, &error));
  g_assert_no_error (error);
  g_assert_cmpint (res.exit_status, ==, 0);
  assert_bytes_eq (res.out, "[two words]\n[it's]\n[$HOME]\n[`id`]\n[a\nb]\n[]\n[*]\n[;]\n[\\]\n");
}

static void
test_run_feeds_input_on_stdin (Fixture *f)
{
  const char *argv[] = { "cat", NULL };
  g_autoptr (GBytes) input = g_bytes_new_static ("line one\nline two\n", 18);
  g_auto (DatcCommandResult) res = { 0 };
  g_autoptr (GError) error = NULL;

  g_assert_true (run (f->transport, argv, input, 20000, &res, &error));
  g_assert_no_error (error);
  g_assert_cmpint (res.exit_status, ==, 0);
  assert_bytes_eq (res.out, "line one\nline two\n");
}

/* More than the channel windows hold, both ways at once: input must be
 * fed while output is read, or both ends wait on each other. */
static void
test_run_streams_large_input_and_output (Fixture *f)
{
  const char *argv[] = { "cat", NULL };
  gsize len = 6 * 1024 * 1024;
  guint8 *bytes = g_malloc (len);
  g_auto (DatcCommandResult) res = { 0 };
  g_autoptr (GError) error = NULL;

  for (gsize i = 0; i < len; i++)
    bytes[i] = (guint8) (i * 7 + i / 4096);
  g_autoptr (GBytes) input = g_bytes_new_take (bytes, len);

  g_assert_true (run (f->transport, argv, input, 60000, &res, &error));
  g_assert_no_error (error);
  g_assert_cmpint (res.exit_status, ==, 0);
  g_assert_true (g_bytes_equal (res.out, input));
}

static void
test_run_without_input_reads_nothing (Fixture *f)
{
  const char *argv[] = { "cat", NULL };
  g_auto (DatcCommandResult) res = { 0 };
  g_autoptr (GError) error = NULL;

  g_assert_true (run (f->transport, argv, NULL, 20000, &res, &error));
  g_assert_no_error (error);
  g_assert_cmpint (res.exit_status, ==, 0);
  g_assert_cmpuint (g_bytes_get_size (res.out), ==, 0);
}

/* Commands share one connection: the client port sshd sees stays put. */
static void
test_run_reuses_one_connection (Fixture *f)
{
  const char *argv[] = { "/bin/sh", "-c", "echo $SSH_CONNECTION", NULL };
  g_autofree gchar *first = NULL;

  for (int i = 0; i < 3; i++)
    {
      g_auto (DatcCommandResult) res = { 0 };
      g_autoptr (GError) error = NULL;

      g_assert_true (run (f->transport, argv, NULL, 20000, &res, &error));
      g_assert_no_error (error);
      g_autofree gchar *seen
          = g_strndup (g_bytes_get_data (res.out, NULL), g_bytes_get_size (res.out));
      g_assert_cmpuint (strlen (seen), >, 8);
      if (first == NULL)
        first = g_steal_pointer (&seen);
      else
        g_assert_cmpstr (seen, ==, first);
    }
}

static void
test_run_times_out_then_reconnects (Fixture *f)
{
  g_autofree gchar *pid_file
      = g_build_filename (testbed_sshd_get (&f->sshd, "SSHD_REMOTE_DIR"), "sleeper.pid", NULL);
  g_autofree gchar *script = g_strdup_printf ("echo $$ >%s; exec sleep 30", pid_file);
  const char *argv[] = { "/bin/sh", "-c", script, NULL };
  g_auto (DatcCommandResult) res = { 0 };
  g_autoptr (GError) error = NULL;
  gint64 start = g_get_monotonic_time ();

  g_assert_false (run (f->transport, argv, NULL, 1000, &res, &error));
  g_assert_error (error, DATC_SITE_ERROR, DATC_SITE_ERROR_TIMEOUT);
  g_assert_nonnull (strstr (error->message, "did not finish within 1000 ms"));
  g_assert_null (res.out);
  g_assert_cmpint (g_get_monotonic_time () - start, <, 5 * G_USEC_PER_SEC);

  /* The KILL reached the command: it is gone (or a zombie) shortly. */
  g_autofree gchar *text = NULL;
  g_assert_true (g_file_get_contents (pid_file, &text, NULL, NULL));
  pid_t pid = (pid_t) g_ascii_strtoll (text, NULL, 10);
  g_assert_cmpint (pid, >, 1);
  gint64 deadline = g_get_monotonic_time () + 10 * G_USEC_PER_SEC;
  for (;;)
    {
      g_autofree gchar *stat_path = g_strdup_printf ("/proc/%d/stat", (int) pid);
      g_autofree gchar *stat = NULL;
      if (!g_file_get_contents (stat_path, &stat, NULL, NULL)
          || strstr (strrchr (stat, ')'), ") Z") != NULL)
        break;
      if (g_get_monotonic_time () > deadline)
        {
          (void) kill (pid, SIGKILL);
          g_error ("the timed-out command %d still runs", (int) pid);
        }
      g_usleep (10 * 1000);
    }

  assert_runs (f->transport);
}

/* The connection dies while a command runs: the call says so at once
 * (a transport error, not a timeout), and the next one reconnects. */
typedef struct {
  TestbedSshd *sshd;
  const char *marker;
  gboolean cut;
} MidCommandCutter;

static gpointer
cut_when_command_runs (gpointer data)
{
  MidCommandCutter *c = data;
  gint64 deadline = g_get_monotonic_time () + 20 * G_USEC_PER_SEC;

  while (!g_file_test (c->marker, G_FILE_TEST_EXISTS) && g_get_monotonic_time () < deadline)
    g_usleep (5 * 1000);
  c->cut = g_file_test (c->marker, G_FILE_TEST_EXISTS);
  g_autoptr (GArray) sessions = testbed_sshd_sessions (c->sshd);
  for (guint i = 0; i < sessions->len; i++)
    (void) kill (g_array_index (sessions, pid_t, i), SIGKILL);
  return NULL;
}

static void
test_run_connection_cut_mid_command_is_a_transport_error (Fixture *f)
{
  g_autofree gchar *marker
      = g_build_filename (testbed_sshd_get (&f->sshd, "SSHD_REMOTE_DIR"), "started", NULL);
  g_autofree gchar *script = g_strdup_printf ("echo partial; : >%s; exec sleep 30", marker);
  const char *argv[] = { "/bin/sh", "-c", script, NULL };
  g_auto (DatcCommandResult) res = { 0 };
  g_autoptr (GError) error = NULL;
  MidCommandCutter cutter = { .sshd = &f->sshd, .marker = marker };

  GThread *thread = g_thread_new ("cutter", cut_when_command_runs, &cutter);
  gint64 start = g_get_monotonic_time ();
  gboolean ran = run (f->transport, argv, NULL, 20000, &res, &error);
  g_thread_join (thread);
  g_assert_true (cutter.cut);
  g_assert_false (ran);
  g_assert_error (error, DATC_SITE_ERROR, DATC_SITE_ERROR_TRANSPORT);
  g_assert_nonnull (strstr (error->message, "lost the connection"));
  g_assert_null (res.out);
  g_assert_cmpint (g_get_monotonic_time () - start, <, 10 * G_USEC_PER_SEC);

  assert_runs (f->transport);
}

/* ---- put -------------------------------------------------------------- */

static void
assert_mode (const char *path, mode_t mode)
{
  struct stat st;

  g_assert_cmpint (stat (path, &st), ==, 0);
  g_assert_cmpuint (st.st_mode & 07777, ==, mode);
}

static guint
count_entries (const char *path)
{
  g_autoptr (GDir) dir = g_dir_open (path, 0, NULL);
  guint n = 0;

  g_assert_nonnull (dir);
  while (g_dir_read_name (dir) != NULL)
    n++;
  return n;
}

static void
test_put_creates_parents_applies_mode_and_replaces (Fixture *f)
{
  /* The "site" is this host, so what arrived can be looked at directly. */
  const char *remote = testbed_sshd_get (&f->sshd, "SSHD_REMOTE_DIR");
  g_autofree gchar *parent = g_build_filename (remote, "a", "b", NULL);
  g_autofree gchar *path = g_build_filename (parent, "script.sh", NULL);
  g_autoptr (GBytes) first = g_bytes_new_static ("#!/bin/sh\necho one\n", 19);
  g_autoptr (GBytes) second = g_bytes_new_static ("#!/bin/sh\necho two\n", 19);
  g_autoptr (GError) error = NULL;
  g_autofree gchar *read_back = NULL;

  g_assert_true (f->transport->klass->put (f->transport, first, path, 0750, &error));
  g_assert_no_error (error);
  g_assert_true (g_file_get_contents (path, &read_back, NULL, NULL));
  g_assert_cmpstr (read_back, ==, "#!/bin/sh\necho one\n");
  assert_mode (path, 0750);
  assert_mode (parent, 0700);
  g_assert_cmpuint (count_entries (parent), ==, 1);

  /* A reader holding the old file keeps the old bytes: a rename, not a
   * rewrite in place. */
  int fd = open (path, O_RDONLY);
  g_assert_cmpint (fd, >=, 0);
  g_assert_true (f->transport->klass->put (f->transport, second, path, 0640, &error));
  g_assert_no_error (error);
  char buf[64] = { 0 };
  g_assert_cmpint (read (fd, buf, sizeof buf - 1), ==, 19);
  g_assert_cmpstr (buf, ==, "#!/bin/sh\necho one\n");
  close (fd);
  g_clear_pointer (&read_back, g_free);
  g_assert_true (g_file_get_contents (path, &read_back, NULL, NULL));
  g_assert_cmpstr (read_back, ==, "#!/bin/sh\necho two\n");
  assert_mode (path, 0640);
  g_assert_cmpuint (count_entries (parent), ==, 1);

  /* And the file is the login user's. */
  struct stat st;
  struct passwd *pw = getpwnam (testbed_sshd_get (&f->sshd, "SSHD_USER"));
  g_assert_nonnull (pw);
  g_assert_cmpint (stat (path, &st), ==, 0);
  g_assert_cmpuint (st.st_uid, ==, pw->pw_uid);
}

static void
test_put_large_file (Fixture *f)
{
  const char *remote = testbed_sshd_get (&f->sshd, "SSHD_REMOTE_DIR");
  g_autofree gchar *path = g_build_filename (remote, "big", NULL);
  gsize len = 5 * 1024 * 1024 + 17;
  guint8 *bytes = g_malloc (len);
  g_autoptr (GError) error = NULL;
  g_autofree gchar *read_back = NULL;
  gsize read_len = 0;

  for (gsize i = 0; i < len; i++)
    bytes[i] = (guint8) (i * 13 + i / 65536);
  g_autoptr (GBytes) content = g_bytes_new_take (bytes, len);
  g_assert_true (f->transport->klass->put (f->transport, content, path, 0755, &error));
  g_assert_no_error (error);
  g_assert_true (g_file_get_contents (path, &read_back, &read_len, NULL));
  g_assert_cmpmem (read_back, read_len, g_bytes_get_data (content, NULL), len);
  assert_mode (path, 0755);
}

static void
test_put_where_it_cannot_write_says_where (Fixture *f)
{
  g_autoptr (GBytes) content = g_bytes_new_static ("x", 1);
  g_autoptr (GError) error = NULL;

  /* /root is not the login user's. */
  g_assert_false (
      f->transport->klass->put (f->transport, content, "/root/datc-no/x", 0600, &error));
  g_assert_error (error, DATC_SITE_ERROR, DATC_SITE_ERROR_TRANSPORT);
  g_assert_nonnull (strstr (error->message, "/root/datc-no"));
  g_assert_nonnull (strstr (error->message, "permission denied"));
  /* The connection is fine after a refused put. */
  assert_runs (f->transport);
}

/* The SFTP session died with its connection: that put fails, the next
 * one connects again and leaves no temporary file behind either time. */
static void
test_put_after_a_dropped_connection_reconnects (Fixture *f)
{
  /* A copy: restarting reloads the env table the pointer points into. */
  g_autofree gchar *remote = g_strdup (testbed_sshd_get (&f->sshd, "SSHD_REMOTE_DIR"));
  g_autofree gchar *path = g_build_filename (remote, "again", NULL);
  g_autoptr (GBytes) content = g_bytes_new_static ("x\n", 2);
  g_autoptr (GError) error = NULL;

  g_assert_true (f->transport->klass->put (f->transport, content, path, 0600, &error));
  g_assert_no_error (error);
  g_assert_true (testbed_sshd_stop (&f->sshd) && testbed_sshd_restart (&f->sshd));

  g_assert_false (f->transport->klass->put (f->transport, content, path, 0600, &error));
  g_assert_error (error, DATC_SITE_ERROR, DATC_SITE_ERROR_TRANSPORT);
  g_clear_error (&error);
  g_assert_true (f->transport->klass->put (f->transport, content, path, 0644, &error));
  g_assert_no_error (error);
  assert_mode (path, 0644);
  g_assert_cmpuint (count_entries (remote), ==, 1);
}

/* ---- reconnection ----------------------------------------------------- */

static void
test_reconnects_after_sshd_restart (Fixture *f)
{
  const char *argv[] = { "true", NULL };
  g_auto (DatcCommandResult) res = { 0 };
  g_autoptr (GError) error = NULL;

  assert_runs (f->transport);
  testbed_sshd_stop (&f->sshd);
  testbed_sshd_restart (&f->sshd);

  /* The old connection died with the old sshd: the next command says so
   * and does not run it again by itself... */
  g_assert_false (run (f->transport, argv, NULL, 20000, &res, &error));
  g_assert_error (error, DATC_SITE_ERROR, DATC_SITE_ERROR_TRANSPORT);
  g_assert_nonnull (strstr (error->message, "next command reconnects"));
  /* ...and the one after connects again. */
  assert_runs (f->transport);
}

static void
test_backs_off_after_failed_attempts (Fixture *f)
{
  const char *argv[] = { "true", NULL };

  testbed_sshd_stop (&f->sshd);
  {
    g_auto (DatcCommandResult) res = { 0 };
    g_autoptr (GError) error = NULL;
    g_assert_false (run (f->transport, argv, NULL, 20000, &res, &error));
    g_assert_error (error, DATC_SITE_ERROR, DATC_SITE_ERROR_TRANSPORT);
    g_assert_nonnull (strstr (error->message, "cannot connect"));
  }
  testbed_sshd_restart (&f->sshd);
  {
    /* At once after a failure: no attempt, the last error again. */
    g_auto (DatcCommandResult) res = { 0 };
    g_autoptr (GError) error = NULL;
    gint64 start = g_get_monotonic_time ();
    g_assert_false (run (f->transport, argv, NULL, 20000, &res, &error));
    g_assert_error (error, DATC_SITE_ERROR, DATC_SITE_ERROR_TRANSPORT);
    g_assert_nonnull (strstr (error->message, "cannot connect"));
    g_assert_nonnull (strstr (error->message, "1 failed connection attempt; next one in"));
    g_assert_cmpint (g_get_monotonic_time () - start, <, G_USEC_PER_SEC / 10);
  }
  /* Once the backoff has passed, the next command connects. */
  gint64 deadline = g_get_monotonic_time () + 10 * G_USEC_PER_SEC;
  for (;;)
    {
      g_auto (DatcCommandResult) res = { 0 };
      g_autoptr (GError) error = NULL;
      if (run (f->transport, argv, NULL, 20000, &res, &error))
        break;
      g_assert_nonnull (strstr (error->message, "next one in"));
      g_assert_cmpint (g_get_monotonic_time (), <, deadline);
      g_usleep (20 * 1000);
    }
}

/* The poll command is on its way when the connection is cut: the server
 * side of it is frozen (SIGSTOP), a thread waits until the request sits
 * unread in its socket (more unread bytes than when it froze: what the
 * client sent just before may still be there), then kills it.  The
 * transport reports the loss; datc_site_poll runs the poll once more, on
 * a new connection. */
typedef struct {
  TestbedSshd *sshd;
  GArray *sessions;
  guint64 unread_when_frozen;
  gboolean cut;
} Cutter;

static gpointer
cut_when_poll_is_in_flight (gpointer data)
{
  Cutter *c = data;
  gint64 deadline = g_get_monotonic_time () + 20 * G_USEC_PER_SEC;

  while (testbed_sshd_unread_input (c->sshd) <= c->unread_when_frozen
         && g_get_monotonic_time () < deadline)
    g_usleep (5 * 1000);
  c->cut = testbed_sshd_unread_input (c->sshd) > c->unread_when_frozen;
  for (guint i = 0; i < c->sessions->len; i++)
    (void) kill (g_array_index (c->sessions, pid_t, i), SIGKILL);
  return NULL;
}

/* Until `pid` is stopped (T) or gone: only then is what its socket holds
 * sure to stay unread. */
static void
await_stopped (pid_t pid)
{
  g_autofree gchar *path = g_strdup_printf ("/proc/%d/stat", (int) pid);
  gint64 deadline = g_get_monotonic_time () + 10 * G_USEC_PER_SEC;

  for (;;)
    {
      g_autofree gchar *stat = NULL;
      if (!g_file_get_contents (path, &stat, NULL, NULL))
        return;
      const char *state = strrchr (stat, ')');
      if (state != NULL && (strncmp (state, ") T", 3) == 0 || strncmp (state, ") Z", 3) == 0))
        return;
      if (g_get_monotonic_time () > deadline)
        g_error ("process %d did not stop: %s", (int) pid, stat);
      g_usleep (1000);
    }
}

/* A poll whose connection is cut mid-way runs once more on a new one;
 * not when the caller turned retries off (it counts every command). */
static void
cut_mid_poll (Fixture *f, gboolean retry)
{
  TestbedSshd *sshd = &f->sshd;
  GKeyFile *config = f->config;
  g_autoptr (GError) error = NULL;
  g_autoptr (DatcSite) site = datc_site_new ("tb", "ssh", "fork", config, GROUP, &error);
  g_assert_no_error (error);
  datc_site_set_retry (site, retry);

  DatcProxyRequest req = {
    .name = "datc-test-proxy",
    .slots = 1,
    .workdir = testbed_sshd_get (sshd, "SSHD_REMOTE_DIR"),
    .agent_command = "sleep 120",
  };
  g_autofree gchar *id = NULL;
  g_assert_true (datc_site_submit (site, &req, "proxy.sh", &id, &error));
  g_assert_no_error (error);
  testbed_track_pid (sshd, (pid_t) g_ascii_strtoll (id, NULL, 10));
  const char *ids[] = { id, NULL };
  DatcProxyState states[1];

  g_assert_true (datc_site_poll (site, ids, states, &error));
  g_assert_no_error (error);
  g_assert_cmpint (states[0], ==, DATC_PROXY_RUNNING);

  /* Freeze this connection's server side, then poll. */
  g_autoptr (GArray) sessions = testbed_sshd_sessions (sshd);
  g_assert_cmpuint (sessions->len, >, 0);
  for (guint i = 0; i < sessions->len; i++)
    (void) kill (g_array_index (sessions, pid_t, i), SIGSTOP);
  for (guint i = 0; i < sessions->len; i++)
    await_stopped (g_array_index (sessions, pid_t, i));
  Cutter cutter = {
    .sshd = sshd,
    .sessions = sessions,
    .unread_when_frozen = testbed_sshd_unread_input (sshd),
  };
  GThread *thread = g_thread_new ("cutter", cut_when_poll_is_in_flight, &cutter);

  states[0] = DATC_PROXY_UNKNOWN;
  gboolean polled = datc_site_poll (site, ids, states, &error);
  g_thread_join (thread);
  g_assert_true (cutter.cut);
  if (!retry)
    {
      /* Failed, not run again; the next call connects afresh. */
      g_assert_error (error, DATC_SITE_ERROR, DATC_SITE_ERROR_TRANSPORT);
      g_assert_false (polled);
      g_assert_null (strstr (error->message, "retried once"));
      g_clear_error (&error);
      polled = datc_site_poll (site, ids, states, &error);
    }
  g_assert_no_error (error);
  g_assert_true (polled);
  g_assert_cmpint (states[0], ==, DATC_PROXY_RUNNING);

  /* The retry ran on a new connection: the old sessions are gone. */
  g_autoptr (GArray) now = testbed_sshd_sessions (sshd);
  for (guint i = 0; i < now->len; i++)
    for (guint j = 0; j < sessions->len; j++)
      g_assert_cmpint (g_array_index (now, pid_t, i), !=, g_array_index (sessions, pid_t, j));

  g_assert_true (datc_site_cancel (site, ids, &error));
  g_assert_no_error (error);
  gint64 deadline = g_get_monotonic_time () + 10 * G_USEC_PER_SEC;
  do
    {
      g_assert_true (datc_site_poll (site, ids, states, &error));
      g_assert_no_error (error);
    }
  while (states[0] != DATC_PROXY_FINISHED && g_get_monotonic_time () < deadline
         && (g_usleep (20 * 1000), TRUE));
  g_assert_cmpint (states[0], ==, DATC_PROXY_FINISHED);
}

static void
test_connection_cut_mid_poll_is_retried (Fixture *f)
{
  cut_mid_poll (f, TRUE);
}

static void
test_connection_cut_mid_poll_not_retried_when_off (Fixture *f)
{
  cut_mid_poll (f, FALSE);
}

/* ---- across network namespaces --------------------------------------- */

/* The sshd in tb-siteA-*, this child in tb-master-*: the site sees the
 * master's address, files go over, and commands run. */
static void
test_netns_site_reached_from_master_namespace (Fixture *f)
{
  g_autoptr (GError) error = NULL;
  const char *argv[] = { "/bin/sh", "-c", "echo $SSH_CONNECTION", NULL };
  g_auto (DatcCommandResult) res = { 0 };

  g_assert_true (run (f->transport, argv, NULL, 20000, &res, &error));
  g_assert_no_error (error);
  g_autofree gchar *seen = g_strndup (g_bytes_get_data (res.out, NULL), g_bytes_get_size (res.out));
  g_autofree gchar *from
      = g_strdup_printf ("%s ", testbed_netns_get (&f->netns, "NETNS_MASTER_ADDR"));
  g_autofree gchar *to = g_strdup_printf (" %s %s", testbed_sshd_get (&f->sshd, "SSHD_ADDR"),
                                          testbed_sshd_get (&f->sshd, "SSHD_PORT"));
  g_test_message ("SSH_CONNECTION: %s", seen);
  g_assert_true (g_str_has_prefix (seen, from));
  g_assert_nonnull (strstr (seen, to));

  g_autofree gchar *path
      = g_build_filename (testbed_sshd_get (&f->sshd, "SSHD_REMOTE_DIR"), "x", "file", NULL);
  g_autoptr (GBytes) content = g_bytes_new_static ("across\n", 7);
  g_assert_true (f->transport->klass->put (f->transport, content, path, 0604, &error));
  g_assert_no_error (error);
  g_autofree gchar *read_back = NULL;
  g_assert_true (g_file_get_contents (path, &read_back, NULL, NULL));
  g_assert_cmpstr (read_back, ==, "across\n");
  assert_mode (path, 0604);
}

static const SshTest tests[] = {
  { "/site/ssh/host-key/unknown-is-refused", test_unknown_host_key_is_refused },
  { "/site/ssh/host-key/changed-is-refused", test_changed_host_key_is_refused },
  { "/site/ssh/auth/wrong-client-key-is-refused", test_wrong_client_key_is_refused },
  { "/site/ssh/auth/missing-identity-says-so", test_missing_identity_says_so },
  { "/site/ssh/auth/through-ssh-agent", test_authenticates_through_ssh_agent },
  { "/site/ssh/config/host-goes-through-ssh-config", test_host_goes_through_ssh_config },
  { "/site/ssh/run/reports-exit-status-stdout-and-stderr",
    test_run_reports_exit_status_stdout_and_stderr },
  { "/site/ssh/run/reports-a-signal-as-a-shell-would", test_run_reports_a_signal_as_a_shell_would },
  { "/site/ssh/run/quotes-every-word", test_run_quotes_every_word },
  { "/site/ssh/run/feeds-input-on-stdin", test_run_feeds_input_on_stdin },
  { "/site/ssh/run/streams-large-input-and-output", test_run_streams_large_input_and_output },
  { "/site/ssh/run/without-input-reads-nothing", test_run_without_input_reads_nothing },
  { "/site/ssh/run/reuses-one-connection", test_run_reuses_one_connection },
  { "/site/ssh/run/times-out-then-reconnects", test_run_times_out_then_reconnects },
  { "/site/ssh/run/connection-cut-mid-command-is-a-transport-error",
    test_run_connection_cut_mid_command_is_a_transport_error },
  { "/site/ssh/put/creates-parents-applies-mode-and-replaces",
    test_put_creates_parents_applies_mode_and_replaces },
  { "/site/ssh/put/large-file", test_put_large_file },
  { "/site/ssh/put/where-it-cannot-write-says-where", test_put_where_it_cannot_write_says_where },
  { "/site/ssh/put/after-a-dropped-connection-reconnects",
    test_put_after_a_dropped_connection_reconnects },
  { "/site/ssh/reconnect/after-sshd-restart", test_reconnects_after_sshd_restart },
  { "/site/ssh/reconnect/backs-off-after-failed-attempts", test_backs_off_after_failed_attempts },
  { "/site/ssh/reconnect/connection-cut-mid-poll-is-retried",
    test_connection_cut_mid_poll_is_retried },
  { "/site/ssh/reconnect/connection-cut-mid-poll-not-retried-when-retries-are-off",
    test_connection_cut_mid_poll_not_retried_when_off },
  { "/site/ssh/netns/site-reached-from-master-namespace",
    test_netns_site_reached_from_master_namespace, TRUE },
  { "/site/ssh/netns/connection-cut-mid-poll-is-retried", test_connection_cut_mid_poll_is_retried,
    TRUE },
};

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);

  /* Never the user's agent, unless a test starts its own. */
  g_unsetenv ("SSH_AUTH_SOCK");

  for (gsize i = 0; i < G_N_ELEMENTS (tests); i++)
    g_test_add (tests[i].path, Fixture, &tests[i], fixture_set_up, fixture_test, fixture_tear_down);
  g_test_add_func ("/site/ssh/config/open-checks-the-site-keys", test_open_checks_the_site_keys);
  g_test_add_func ("/site/ssh/config/registry-finds-ssh", test_registry_finds_ssh);

  return g_test_run ();
}
