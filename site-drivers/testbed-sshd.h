/* testbed-sshd.h: the real sshd (and network namespaces) of tests/testbed/
 * for the ssh transport's and the upload's tests.
 *
 * Everything here fails the test loudly, quoting the script's stderr,
 * when the test bed cannot come up: a test that needs sshd never skips.
 * The scripts directory comes from $DATC_TESTBED, which meson sets. */
#pragma once

#include <glib.h>
#include <sys/types.h>

G_BEGIN_DECLS

typedef struct {
  gchar *dir;      /* the sshd's state directory (a temp dir) */
  GHashTable *env; /* sshd.env: SSHD_PORT, SSHD_IDENTITY, ... */
  gchar *netns;    /* the namespace it runs in, or NULL */
  gchar *addr;     /* the address it listens on there */
  gboolean owner;  /* brought up here (the parent), not attached to */
} TestbedSshd;

typedef struct {
  gchar *dir;      /* netns-up.sh's state directory */
  GHashTable *env; /* netns.env */
  gboolean owner;
} TestbedNetns;

/* The tests run each test body in a child (g_test_trap_subprocess) and
 * keep bringing up and tearing down in the parent, so that a failed
 * assertion, which aborts the child, still leaves nothing running.  Every
 * function here reports failure with g_test_fail() and a message quoting
 * the script's stderr, and returns FALSE; none aborts. */

/* The KEY=VALUE lines the test-bed scripts write (a value in double quotes
 * loses them; lines without '=' are skipped), as a new table (transfer
 * full). */
GHashTable *testbed_env_parse (const char *text);

/* Runs tests/testbed/SCRIPT ARGS...; stdout (transfer full) if `out` is
 * not NULL. */
gboolean testbed_script (const char *script, const char *const *args, gchar **out);

/* Brings an sshd up in a new temp dir (netns/addr: NULL for loopback). */
gboolean testbed_sshd_up (TestbedSshd *sshd, const char *netns, const char *addr);
/* In the child: the sshd the parent brought up in `dir`. */
gboolean testbed_sshd_attach (TestbedSshd *sshd, const char *dir);
/* Starts it again in the same dir (same keys, same port if free). */
gboolean testbed_sshd_restart (TestbedSshd *sshd);
/* Stops it (sshd-down.sh) but keeps the dir. */
gboolean testbed_sshd_stop (TestbedSshd *sshd);
/* Stops it, and every process testbed_track_pid() noted, and removes the
 * dir (kept, and named, when the test failed).  In the child it only
 * forgets. */
void testbed_sshd_clear (TestbedSshd *sshd);

/* A value from sshd.env (transfer none: valid until the next restart). */
const char *testbed_sshd_get (TestbedSshd *sshd, const char *key);
pid_t testbed_sshd_pid (TestbedSshd *sshd);

/* Notes a process a test started outside the sshd's tree (an ssh-agent,
 * a detached proxy), so the parent stops it whatever became of the child. */
void testbed_track_pid (TestbedSshd *sshd, pid_t pid);

/* A site group `group` reaching this sshd: host, port, user, identity,
 * known_hosts (transfer full). */
GKeyFile *testbed_sshd_site (TestbedSshd *sshd, const char *group);

/* The pids of every process below the sshd listener (its sessions and
 * what they run), read from /proc (transfer full). */
GArray *testbed_sshd_sessions (TestbedSshd *sshd);

/* Bytes that connections to the sshd hold and the server side has not
 * read yet (from the listener's namespace's /proc/PID/net/tcp). */
guint64 testbed_sshd_unread_input (TestbedSshd *sshd);

gboolean testbed_netns_up (TestbedNetns *netns, const char *site);
gboolean testbed_netns_attach (TestbedNetns *netns, const char *dir);
void testbed_netns_clear (TestbedNetns *netns);
const char *testbed_netns_get (TestbedNetns *netns, const char *key);

/* rm -rf `path` (transfer none). */
void testbed_remove_tree (const char *path);

G_END_DECLS
