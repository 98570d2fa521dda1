/* test-security.c: a TCP master admits only agents holding a key this
 * campaign issued, and a peer that sends garbage is dropped while the
 * others are served. */
#include <signal.h>
#include <string.h>
#include <unistd.h>
#include <zmq.h>
#include <glib/gstdio.h>

#include "curve.h"
#include "harness.h"
#include "message.h"

typedef struct {
  TbProc *proc;
  const char *needle;
} LogWait;

static gboolean
log_has (gpointer p)
{
  LogWait *w = p;
  g_autofree gchar *err = tb_proc_stderr (w->proc);
  return strstr (err, w->needle) != NULL;
}

static gboolean
file_exists (gpointer p)
{
  return g_file_test (p, G_FILE_TEST_EXISTS);
}

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
  const char *argv[] = { tb_datc (), "run", "--dir", dir, "--no-local", "--listen",
                         "tcp://127.0.0.1:0", file, NULL };
  g_autoptr (TbProc) master = tb_spawn (d, "master", argv);
  g_assert_true (tb_await (file_exists, ep_file, 30));

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
  LogWait w1 = { master, "refused a connection" };
  g_assert_true (tb_await (log_has, &w1, 30));
  zmq_pollitem_t it1 = { s1, 0, ZMQ_POLLIN, 0 };
  g_assert_cmpint (zmq_poll (&it1, 1, 300), ==, 0);

  /* 2. The campaign's own key, but garbage on the wire: dropped. */
  g_autofree gchar *key_path = g_build_filename (dir, "keys", "agents", "default.key", NULL);
  DatcCurveKeypair issued;
  g_assert_true (datc_curve_keypair_load (&issued, key_path, &error));
  void *s2 = curve_dealer (ctx, endpoint, server_pub, &issued, "garbage-1");
  zmq_send (s2, "\xdd\xff\xff\xff\xff", 5, 0);
  LogWait w2 = { master, "dropped after a bad frame" };
  g_assert_true (tb_await (log_has, &w2, 30));
  /* Whatever it says next, it gets nothing: not even a reply to HELLO. */
  send_hello (s2, "garbage-1");
  zmq_pollitem_t it2 = { s2, 0, ZMQ_POLLIN, 0 };
  g_assert_cmpint (zmq_poll (&it2, 1, 300), ==, 0);

  /* 3. A real agent with the issued key is served and the campaign ends. */
  const char *agent_argv[] = { tb_agent (), "--connect", endpoint, "--server-key", server_pub,
                               "--key-file", key_path, "--slots", "2", "--site", "tcp", NULL };
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

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  g_test_add_func ("/security/only-issued-keys-get-in-and-garbage-is-dropped",
                   test_keys_and_garbage);
  g_test_add_func ("/security/secret-keys-are-owner-only", test_secret_files_private);
  return g_test_run ();
}
