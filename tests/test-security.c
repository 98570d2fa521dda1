/* test-security.c: a TCP master admits only agents holding a key this
 * campaign issued, and a peer that sends garbage is dropped while the
 * others are served; no other local user can take a campaign's sockets
 * (the /tmp fallback directory, an agent's ipc peer, --listen). */
#include <fcntl.h>
#include <signal.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zmq.h>
#include <glib/gstdio.h>

#include "curve.h"
#include "harness.h"
#include "message.h"

static void *
curve_dealer (void *ctx, const char *endpoint, const char *server_pub, DatcCurveKeypair *kp,
              const char *routing_id)
{
  void *s = zmq_socket (ctx, ZMQ_DEALER);
  int zero = 0;
  zmq_setsockopt (s, ZMQ_LINGER, &zero, sizeof zero);
  zmq_setsockopt (s, ZMQ_ROUTING_ID, routing_id, strlen (routing_id));
  zmq_setsockopt (s, ZMQ_CURVE_SERVERKEY, server_pub, DATC_CURVE_Z85_LEN);
  zmq_setsockopt (s, ZMQ_CURVE_PUBLICKEY, kp->public_z85, DATC_CURVE_Z85_LEN);
  zmq_setsockopt (s, ZMQ_CURVE_SECRETKEY, kp->secret_z85, DATC_CURVE_Z85_LEN);
  g_assert_cmpint (zmq_connect (s, endpoint), ==, 0);
  return s;
}

static void
send_hello (void *s, const char *id)
{
  g_autoptr (DatcMsg) m = datc_msg_new (DATC_MSG_HELLO);
  m->u.hello.agent_id = g_strdup (id);
  m->u.hello.site = g_strdup ("intruder");
  m->u.hello.proxy = g_strdup ("x");
  m->u.hello.host = g_strdup ("x");
  m->u.hello.slots = 4;
  m->u.hello.session = 1;
  g_autoptr (GByteArray) b = g_byte_array_new ();
  datc_msg_encode (m, b);
  zmq_send (s, b->data, b->len, ZMQ_DONTWAIT);
}

static void
test_keys_and_garbage (void)
{
  g_autoptr (TbDir) d = tb_dir_new ();
  g_autofree gchar *file = tb_write (d, "t.txt", "echo one\necho two\necho three\n");
  g_autofree gchar *dir = g_build_filename (d->path, "c", NULL);
  g_autofree gchar *ep_file = g_build_filename (dir, "endpoint", NULL);
  const char *argv[] = { tb_datc (),          "run", "--dir", dir, "--no-local", "--listen",
                         "tcp://127.0.0.1:0", file,  NULL };
  g_autoptr (TbProc) master = tb_spawn (d, "master", argv);
  g_assert_true (tb_await_file (ep_file, 30));

  g_autofree gchar *endpoint = NULL;
  g_assert_true (g_file_get_contents (ep_file, &endpoint, NULL, NULL));
  g_strstrip (endpoint);
  g_assert_true (g_str_has_prefix (endpoint, "tcp://127.0.0.1:"));
  g_autofree gchar *pub_path = g_build_filename (dir, "keys", "master.key.pub", NULL);
  char server_pub[DATC_CURVE_Z85_LEN + 1];
  g_autoptr (GError) error = NULL;
  g_assert_true (datc_curve_public_load (server_pub, pub_path, &error));

  void *ctx = zmq_ctx_new ();

  /* 1. A key the campaign never issued: refused at the handshake. */
  DatcCurveKeypair stranger;
  g_assert_true (datc_curve_keypair_generate (&stranger, &error));
  void *s1 = curve_dealer (ctx, endpoint, server_pub, &stranger, "stranger-1");
  send_hello (s1, "stranger-1");
  g_assert_true (tb_await_stderr (master, "refused a connection", 30));
  zmq_pollitem_t it1 = { s1, 0, ZMQ_POLLIN, 0 };
  g_assert_cmpint (zmq_poll (&it1, 1, 300), ==, 0);

  /* 2. The campaign's own key, but garbage on the wire: dropped. */
  g_autofree gchar *key_path = g_build_filename (dir, "keys", "agents", "default.key", NULL);
  DatcCurveKeypair issued;
  g_assert_true (datc_curve_keypair_load (&issued, key_path, &error));
  void *s2 = curve_dealer (ctx, endpoint, server_pub, &issued, "garbage-1");
  zmq_send (s2, "\xdd\xff\xff\xff\xff", 5, 0);
  g_assert_true (tb_await_stderr (master, "dropped after a bad frame", 30));
  /* Whatever it says next, it gets nothing: not even a reply to HELLO. */
  send_hello (s2, "garbage-1");
  zmq_pollitem_t it2 = { s2, 0, ZMQ_POLLIN, 0 };
  g_assert_cmpint (zmq_poll (&it2, 1, 300), ==, 0);

  /* 3. A real agent with the issued key is served and the campaign ends. */
  const char *agent_argv[]
      = { tb_agent (), "--connect", endpoint, "--server-key", server_pub, "--key-file",
          key_path,    "--slots",   "2",      "--site",       "tcp",      NULL };
  g_autoptr (TbProc) agent = tb_spawn (d, "agent", agent_argv);
  int status = tb_wait (master, 60);
  if (status != 0)
    {
      g_autofree gchar *err = tb_proc_stderr (master);
      g_printerr ("%s", err);
    }
  g_assert_cmpint (status, ==, 0);
  g_assert_cmpint (tb_wait (agent, 30), ==, 0);
  g_autoptr (GHashTable) res = tb_results (dir);
  g_assert_cmpuint (g_hash_table_size (res), ==, 3);
  GHashTableIter it;
  gpointer v;
  g_hash_table_iter_init (&it, res);
  while (g_hash_table_iter_next (&it, NULL, &v))
    g_assert_cmpstr (json_object_get_string_member (v, "site"), ==, "tcp");

  datc_curve_keypair_clear (&stranger);
  datc_curve_keypair_clear (&issued);
  zmq_close (s1);
  zmq_close (s2);
  zmq_ctx_term (ctx);
}

static void
test_secret_files_private (void)
{
  g_autoptr (TbDir) d = tb_dir_new ();
  g_autofree gchar *file = tb_write (d, "t.txt", "true\n");
  g_autofree gchar *dir = g_build_filename (d->path, "c", NULL);
  const char *argv[] = { tb_datc (), "run", "--dir", dir, file, NULL };
  g_assert_cmpint (tb_run (d, argv, 60, NULL), ==, 0);
  const char *secret[] = { "keys/master.key", "keys/agents/default.key", NULL };
  for (guint i = 0; secret[i]; i++)
    {
      g_autofree gchar *p = g_build_filename (dir, secret[i], NULL);
      GStatBuf st;
      g_assert_cmpint (g_stat (p, &st), ==, 0);
      g_assert_cmpint (st.st_mode & 0777, ==, 0600);
    }
  g_autofree gchar *keys = g_build_filename (dir, "keys", NULL);
  GStatBuf st;
  g_assert_cmpint (g_stat (keys, &st), ==, 0);
  g_assert_cmpint (st.st_mode & 0077, ==, 0);
}

/* ---- sockets no other user can take ---------------------------------- */

/* `datc run --listen` with anything but tcp:// would have no CURVE. */
static void
test_listen_only_tcp (void)
{
  g_autoptr (TbDir) d = tb_dir_new ();
  g_autofree gchar *file = tb_write (d, "t.txt", "true\n");
  g_autofree gchar *dir = g_build_filename (d->path, "c", NULL);
  g_autofree gchar *ep = g_strdup_printf ("ipc://%s/open.sock", d->path);
  const char *argv[]
      = { tb_datc (), "run", "--dir", dir, "--no-local", "--listen", ep, file, NULL };
  g_autofree gchar *err = NULL;
  g_assert_cmpint (tb_run (d, argv, 30, &err), ==, 2);
  g_assert_nonnull (strstr (err, ep));
  g_assert_nonnull (strstr (err, "only tcp://"));
  g_assert_false (g_file_test (dir, G_FILE_TEST_EXISTS));
}

/* A campaign path too long for a unix socket puts its sockets in
 * /tmp/datc-UID.  Each process here gets a /tmp of its own (a mount
 * namespace: FAKE is its /tmp, and the test's directory is bound back at
 * its own path), so what another user left there is planted in FAKE and
 * the real /tmp is never touched. */
typedef struct {
  TbDir *d, *fake;
  gchar *dir;  /* the campaign, its path too long for a socket */
  gchar *priv; /* FAKE/datc-UID: /tmp/datc-UID inside */
  gchar *file;
  gchar *base; /* the test directory's name, in /tmp and in FAKE */
} Fallback;

static void
fallback_init (Fallback *f)
{
  f->d = tb_dir_new ();
  f->fake = tb_dir_new ();
  f->base = g_path_get_basename (f->d->path);
  g_autofree gchar *mount_point = g_build_filename (f->fake->path, f->base, NULL);
  g_assert_cmpint (g_mkdir (mount_point, 0700), ==, 0);
  g_autofree gchar *deep = g_strnfill (100, 'l');
  f->dir = g_build_filename (f->d->path, deep, "c", NULL);
  g_assert_cmpuint (strlen (f->dir) + strlen ("/agents.sock"), >=, 108);
  f->priv = g_strdup_printf ("%s/datc-%u", f->fake->path, (unsigned) geteuid ());
  f->file = tb_write (f->d, "t.txt", "true\n");
}

static void
fallback_clear (Fallback *f)
{
  g_free (f->dir);
  g_free (f->priv);
  g_free (f->file);
  g_free (f->base);
  tb_dir_free (f->d);
  tb_dir_free (f->fake);
}

/* argv run with FAKE as /tmp (transfer full; the strings are borrowed). */
static const char **
in_fake_tmp (Fallback *f, const char *const *argv)
{
  GPtrArray *a = g_ptr_array_new ();
  const char *pre[] = { "unshare",
                        "--mount",
                        "--propagation",
                        "private",
                        "--",
                        "/bin/sh",
                        "-c",
                        "mount --bind \"$1\" \"$2/$3\" && mount --rbind \"$2\" /tmp && shift 3 "
                        "&& exec \"$@\"",
                        "sh",
                        f->d->path,
                        f->fake->path,
                        f->base };
  for (guint i = 0; i < G_N_ELEMENTS (pre); i++)
    g_ptr_array_add (a, (gpointer) pre[i]);
  for (guint i = 0; argv[i]; i++)
    g_ptr_array_add (a, (gpointer) argv[i]);
  g_ptr_array_add (a, NULL);
  return (const char **) g_ptr_array_free (a, FALSE);
}

static guint
entries (const char *path)
{
  g_autoptr (GDir) dir = g_dir_open (path, 0, NULL);
  guint n = 0;
  g_assert_nonnull (dir);
  while (g_dir_read_name (dir) != NULL)
    n++;
  return n;
}

/* With nothing there, the fallback is made 0700 and both sockets in it
 * are owner-only. */
static void
test_fallback_made_private (void)
{
  Fallback f;
  fallback_init (&f);
  const char *run[]
      = { tb_datc (), "run", "--dir", f.dir, "--open", "--local-slots", "1", f.file, NULL };
  g_autofree const char **run_ns = in_fake_tmp (&f, run);
  g_autoptr (TbProc) master = tb_spawn (f.d, "master", run_ns);
  g_autofree gchar *hash = g_compute_checksum_for_string (G_CHECKSUM_SHA256, f.dir, -1);
  g_autofree gchar *control = g_strdup_printf ("%s/%.24s.control", f.priv, hash);
  g_autofree gchar *agents = g_strdup_printf ("%s/%.24s.agents.sock", f.priv, hash);
  /* The control socket is bound first (once DIR is locked), the agents'
   * once the campaign is loaded. */
  g_assert_true (tb_await_file (control, 30));
  g_assert_true (tb_await_file (agents, 30));

  GStatBuf st;
  g_assert_cmpint (lstat (f.priv, &st), ==, 0);
  g_assert_true (S_ISDIR (st.st_mode));
  g_assert_cmpuint (st.st_uid, ==, geteuid ());
  g_assert_cmpint (st.st_mode & 07777, ==, 0700);
  const char *socks[] = { control, agents };
  for (guint i = 0; i < G_N_ELEMENTS (socks); i++)
    {
      g_assert_cmpint (g_stat (socks[i], &st), ==, 0);
      g_assert_true (S_ISSOCK (st.st_mode));
      g_assert_cmpint (st.st_mode & 0777, ==, 0600);
    }

  /* The owner's own commands reach it there. */
  const char *close_argv[] = { tb_datc (), "close", f.dir, NULL };
  g_autofree const char **close_ns = in_fake_tmp (&f, close_argv);
  g_assert_cmpint (tb_run (f.d, close_ns, 30, NULL), ==, 0);
  g_assert_cmpint (tb_wait (master, 60), ==, 0);
  fallback_clear (&f);
}

typedef enum { PLANT_OPEN_DIR, PLANT_OTHERS_DIR, PLANT_SYMLINK } Plant;

static void
test_fallback_planted (gconstpointer data)
{
  Plant plant = GPOINTER_TO_INT (data);
  Fallback f;
  fallback_init (&f);
  const char *reason = NULL;
  g_autofree gchar *target = g_build_filename (f.fake->path, "target", NULL);
  const char *watched = f.priv; /* where a socket would land */
  switch (plant)
    {
    case PLANT_OPEN_DIR:
      /* Another user's doing would look the same: root can bind anywhere. */
      g_assert_cmpint (g_mkdir (f.priv, 0700), ==, 0);
      g_assert_cmpint (chmod (f.priv, 0777), ==, 0);
      reason = "open to other users";
      break;
    case PLANT_OTHERS_DIR:
      g_assert_cmpint (g_mkdir (f.priv, 0700), ==, 0);
      g_assert_cmpint (chown (f.priv, 65534, 65534), ==, 0);
      reason = "owned by another user";
      break;
    case PLANT_SYMLINK:
      g_assert_cmpint (g_mkdir (target, 0700), ==, 0);
      g_assert_cmpint (symlink (target, f.priv), ==, 0);
      g_assert_cmpint (lchown (f.priv, 65534, 65534), ==, 0);
      watched = target;
      reason = "a symbolic link";
      break;
    }
  g_autofree gchar *where = g_strdup_printf ("/tmp/datc-%u: %s", (unsigned) geteuid (), reason);

  const char *run[] = { tb_datc (), "run", "--dir", f.dir, "--local-slots", "1", f.file, NULL };
  g_autofree const char **run_ns = in_fake_tmp (&f, run);
  g_autofree gchar *err = NULL;
  g_assert_cmpint (tb_run (f.d, run_ns, 60, &err), ==, 3);
  g_assert_nonnull (strstr (err, where));
  g_assert_cmpuint (entries (watched), ==, 0);
  g_autoptr (GArray) agents = tb_find_agents (f.d->path);
  g_assert_cmpuint (agents->len, ==, 0);

  /* A client does not connect there either: with the campaign's lock
   * held (a master seems to run), `datc status` refuses the directory
   * instead of talking to whatever socket sits in it. */
  g_autofree gchar *lock = g_build_filename (f.dir, "lock", NULL);
  int fd = open (lock, O_RDWR | O_CLOEXEC);
  g_assert_cmpint (fd, >=, 0);
  g_assert_cmpint (flock (fd, LOCK_EX), ==, 0);
  const char *status[] = { tb_datc (), "status", f.dir, NULL };
  g_autofree const char **status_ns = in_fake_tmp (&f, status);
  g_autofree gchar *status_err = NULL;
  int rc = tb_run (f.d, status_ns, 30, &status_err);
  close (fd);
  g_assert_cmpint (rc, !=, 0);
  g_assert_nonnull (strstr (status_err, where));
  fallback_clear (&f);
}

/* An agent told to connect to an ipc socket checks who holds it. */
static void
test_agent_refuses_others_socket (void)
{
  g_autoptr (TbDir) d = tb_dir_new ();
  g_assert_cmpint (chmod (d->path, 0755), ==, 0);
  g_autofree gchar *theirs = g_build_filename (d->path, "theirs", NULL);
  g_autofree gchar *ours = g_build_filename (d->path, "ours", NULL);
  g_assert_cmpint (g_mkdir (theirs, 0755), ==, 0);
  g_assert_cmpint (chown (theirs, 65534, 65534), ==, 0);
  g_assert_cmpint (g_mkdir (ours, 0700), ==, 0);
  g_autofree gchar *sock = g_build_filename (theirs, "m.sock", NULL);
  const char *listener_argv[] = { "setpriv",
                                  "--reuid=65534",
                                  "--regid=65534",
                                  "--clear-groups",
                                  "--",
                                  "/usr/bin/python3",
                                  "-c",
                                  "import socket,sys,time\n"
                                  "s=socket.socket(socket.AF_UNIX)\n"
                                  "s.bind(sys.argv[1])\n"
                                  "s.listen(8)\n"
                                  "time.sleep(600)\n",
                                  sock,
                                  NULL };
  g_autoptr (TbProc) listener = tb_spawn (d, "listener", listener_argv);
  g_assert_true (tb_await_file (sock, 30));

  /* 1. In another user's directory: refused before anything is sent. */
  g_autofree gchar *ep1 = g_strconcat ("ipc://", sock, NULL);
  const char *a1[]
      = { tb_agent (), "--connect", ep1, "--slots", "1", "--reconnect-timeout", "600", NULL };
  g_autofree gchar *err1 = NULL;
  g_assert_cmpint (tb_run (d, a1, 30, &err1), ==, 3);
  g_assert_nonnull (strstr (err1, theirs));
  g_assert_nonnull (strstr (err1, "refusing to connect"));

  /* 2. Their socket moved into a directory of ours: the kernel still
   * says who listens on it. */
  g_autofree gchar *moved = g_build_filename (ours, "agents.sock", NULL);
  g_assert_cmpint (rename (sock, moved), ==, 0);
  g_autofree gchar *ep2 = g_strconcat ("ipc://", moved, NULL);
  const char *a2[]
      = { tb_agent (), "--connect", ep2, "--slots", "1", "--reconnect-timeout", "600", NULL };
  g_autofree gchar *err2 = NULL;
  g_assert_cmpint (tb_run (d, a2, 30, &err2), ==, 3);
  g_assert_nonnull (strstr (err2, ep2));
  g_assert_nonnull (strstr (err2, "held by uid 65534"));

  g_assert_true (tb_proc_signal (listener, SIGKILL));
  tb_wait (listener, 30);
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  g_test_add_func ("/security/only-issued-keys-get-in-and-garbage-is-dropped",
                   test_keys_and_garbage);
  g_test_add_func ("/security/secret-keys-are-owner-only", test_secret_files_private);
  g_test_add_func ("/security/listen-accepts-only-tcp", test_listen_only_tcp);
  g_test_add_func ("/security/socket-fallback-dir-is-made-private", test_fallback_made_private);
  g_test_add_data_func ("/security/socket-fallback-dir-open-to-all-is-refused",
                        GINT_TO_POINTER (PLANT_OPEN_DIR), test_fallback_planted);
  g_test_add_data_func ("/security/socket-fallback-dir-of-another-user-is-refused",
                        GINT_TO_POINTER (PLANT_OTHERS_DIR), test_fallback_planted);
  g_test_add_data_func ("/security/socket-fallback-dir-as-a-symlink-is-refused",
                        GINT_TO_POINTER (PLANT_SYMLINK), test_fallback_planted);
  g_test_add_func ("/security/agent-refuses-an-ipc-socket-of-another-user",
                   test_agent_refuses_others_socket);
  return g_test_run ();
}
