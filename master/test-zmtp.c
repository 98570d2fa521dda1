/* test-zmtp.c: the fast `datc status`'s wire, in libc (zmtp.c,
 * textreply.c), against a real libzmq ROUTER like the master's, and the
 * reader and the {"text"} decoder against tables of malformed input. */
#include <errno.h>
#include <glib.h>
#include <glib/gstdio.h>
#include <json-glib/json-glib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>
#include <zmq.h>

#include "status.h"
#include "textreply.h"
#include "zmtp.h"

/* ---- a ROUTER on its own thread, answering one request ---- */

typedef struct {
  gchar *endpoint;
  gchar *reply; /* what it answers (NULL: nothing, ever) */
  gsize reply_len;
  GAsyncQueue *bound;  /* the thread says it listens */
  GByteArray *request; /* what it was asked */
  gboolean stop;
} Router;

static gpointer
router_main (gpointer data)
{
  Router *rt = data;
  void *ctx = zmq_ctx_new ();
  void *sock = zmq_socket (ctx, ZMQ_ROUTER);
  int zero = 0;
  zmq_setsockopt (sock, ZMQ_LINGER, &zero, sizeof zero);
  g_assert_cmpint (zmq_bind (sock, rt->endpoint), ==, 0);
  g_async_queue_push (rt->bound, GINT_TO_POINTER (1));
  GPtrArray *frames = g_ptr_array_new_with_free_func ((GDestroyNotify) g_bytes_unref);
  while (!g_atomic_int_get (&rt->stop))
    {
      zmq_pollitem_t it = { sock, 0, ZMQ_POLLIN, 0 };
      if (zmq_poll (&it, 1, 20) <= 0)
        continue;
      zmq_msg_t m;
      zmq_msg_init (&m);
      g_assert_cmpint (zmq_msg_recv (&m, sock, 0), >=, 0);
      g_ptr_array_add (frames, g_bytes_new (zmq_msg_data (&m), zmq_msg_size (&m)));
      gboolean more = zmq_msg_more (&m);
      zmq_msg_close (&m);
      if (more)
        continue;
      /* [identity][empty][body] */
      g_assert_cmpuint (frames->len, ==, 3);
      g_assert_cmpuint (g_bytes_get_size (frames->pdata[1]), ==, 0);
      gsize n;
      const guint8 *body = g_bytes_get_data (frames->pdata[2], &n);
      g_byte_array_append (rt->request, body, (guint) n);
      if (rt->reply != NULL)
        {
          const void *id = g_bytes_get_data (frames->pdata[0], &n);
          zmq_send (sock, id, n, ZMQ_SNDMORE);
          zmq_send (sock, "", 0, ZMQ_SNDMORE);
          zmq_send (sock, rt->reply, rt->reply_len, 0);
        }
      g_ptr_array_set_size (frames, 0);
    }
  g_ptr_array_unref (frames);
  zmq_close (sock);
  zmq_ctx_term (ctx);
  return NULL;
}

typedef struct {
  gchar *tmp;
  gchar *path;
  Router rt;
  GThread *thread;
} Fixture;

static void
fixture_set_up (Fixture *f, gconstpointer data)
{
  (void) data;
  f->tmp = g_dir_make_tmp ("test-zmtp-XXXXXX", NULL);
  g_assert_nonnull (f->tmp);
  f->path = g_build_filename (f->tmp, "control", NULL);
  f->rt.endpoint = g_strconcat ("ipc://", f->path, NULL);
  f->rt.bound = g_async_queue_new ();
  f->rt.request = g_byte_array_new ();
}

static void
router_start (Fixture *f, const char *reply, gsize reply_len)
{
  f->rt.reply = reply != NULL ? g_memdup2 (reply, reply_len) : NULL;
  f->rt.reply_len = reply_len;
  f->thread = g_thread_new ("router", router_main, &f->rt);
  g_async_queue_pop (f->rt.bound);
}

static void
fixture_tear_down (Fixture *f, gconstpointer data)
{
  (void) data;
  if (f->thread != NULL)
    {
      g_atomic_int_set (&f->rt.stop, TRUE);
      g_thread_join (f->thread);
    }
  g_unlink (f->path);
  g_rmdir (f->tmp);
  g_free (f->rt.endpoint);
  g_free (f->rt.reply);
  g_async_queue_unref (f->rt.bound);
  g_byte_array_unref (f->rt.request);
  g_free (f->path);
  g_free (f->tmp);
}

static bool
always (void *data)
{
  (void) data;
  return true;
}

static bool
gone (void *data)
{
  (void) data;
  return false;
}

static void
call_and_check (Fixture *f, const char *request, const char *reply, gsize reply_len)
{
  router_start (f, reply, reply_len);
  DatcZmtpReader r;
  datc_zmtp_reader_init (&r, DATC_ZMTP_REPLY_MAX);
  int errsv = -1;
  DatcZmtpStatus st
      = datc_zmtp_call (f->path, request, strlen (request), 10000, always, NULL, &r, &errsv);
  if (st != DATC_ZMTP_DONE)
    g_error ("the call failed: %s (%s)", r.why, g_strerror (errsv));
  g_assert_cmpmem (r.reply, r.reply_len, reply, reply_len);
  g_assert_cmpmem (f->rt.request->data, f->rt.request->len, request, strlen (request));
  datc_zmtp_reader_clear (&r);
}

static void
test_short_request_and_reply (Fixture *f, gconstpointer data)
{
  (void) data;
  const char *reply = "{\"text\":\"hello\\n\"}";
  call_and_check (f, "{\"cmd\":\"status\",\"format\":\"text\"}", reply, strlen (reply));
}

/* Over 255 bytes, both ways: the LONG frames, and a reply read in many
 * pieces. */
static void
test_long_request_and_reply (Fixture *f, gconstpointer data)
{
  (void) data;
  g_autoptr (GString) request = g_string_new ("{\"cmd\":\"status\",\"pad\":\"");
  for (int i = 0; i < 300; i++)
    g_string_append_c (request, (char) ('a' + i % 26));
  g_string_append (request, "\"}");
  gsize len = 300000;
  g_autofree gchar *reply = g_malloc (len);
  for (gsize i = 0; i < len; i++)
    reply[i] = (char) (i * 7);
  call_and_check (f, request->str, reply, len);
}

/* One call to f's socket that must fail with `want` (an errno). */
static void
call_fails_with (Fixture *f, int timeout_ms, bool (*still_there) (void *), int want)
{
  DatcZmtpReader r;
  datc_zmtp_reader_init (&r, DATC_ZMTP_REPLY_MAX);
  int errsv = 0;
  g_assert_cmpint (datc_zmtp_call (f->path, "{}", 2, timeout_ms, still_there, NULL, &r, &errsv), ==,
                   DATC_ZMTP_FAILED);
  g_assert_cmpint (errsv, ==, want);
  datc_zmtp_reader_clear (&r);
}

/* A socket file left by a listener that is gone: connect says
 * ECONNREFUSED. */
static void
make_stale_socket (const char *path)
{
  int fd = socket (AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  struct sockaddr_un sun = { .sun_family = AF_UNIX };
  g_strlcpy (sun.sun_path, path, sizeof sun.sun_path);
  g_assert_cmpint (bind (fd, (struct sockaddr *) &sun, sizeof sun), ==, 0);
  close (fd);
  g_assert_true (g_file_test (path, G_FILE_TEST_EXISTS));
}

/* With no one to say the peer lives, a missing socket and one nobody
 * listens on fail at once, as what they are. */
static void
test_no_listener_without_a_peer_is_a_system_error (Fixture *f, gconstpointer data)
{
  (void) data;
  call_fails_with (f, 60000, NULL, ENOENT);
  make_stale_socket (f->path);
  call_fails_with (f, 60000, NULL, ECONNREFUSED);
}

/* A peer that is there but has not bound yet (a master between taking
 * its campaign's lock and binding the control socket): waited for while
 * `still_there` says so, within the timeout; given up when it says the
 * peer is gone. */
typedef struct {
  Fixture *f;
  guint asked;
} LateBind;

static bool
bind_when_asked (void *data)
{
  LateBind *lb = data;
  if (lb->asked++ == 0)
    router_start (lb->f, "{\"text\":\"late\\n\"}", strlen ("{\"text\":\"late\\n\"}"));
  return true;
}

static void
late_bind_is_waited_for (Fixture *f, gboolean stale)
{
  if (stale)
    make_stale_socket (f->path);
  call_fails_with (f, 150, always, ETIMEDOUT);
  call_fails_with (f, 60000, gone, ESRCH);
  LateBind lb = { f, 0 };
  DatcZmtpReader r;
  datc_zmtp_reader_init (&r, DATC_ZMTP_REPLY_MAX);
  int errsv = 0;
  DatcZmtpStatus st = datc_zmtp_call (f->path, "{}", 2, 60000, bind_when_asked, &lb, &r, &errsv);
  if (st != DATC_ZMTP_DONE)
    g_error ("the call failed: %s (%s)", r.why, g_strerror (errsv));
  g_assert_cmpuint (lb.asked, >=, 1);
  g_assert_cmpmem (r.reply, r.reply_len, "{\"text\":\"late\\n\"}",
                   strlen ("{\"text\":\"late\\n\"}"));
  datc_zmtp_reader_clear (&r);
}

static void
test_a_socket_not_there_yet_is_waited_for (Fixture *f, gconstpointer data)
{
  (void) data;
  late_bind_is_waited_for (f, FALSE);
}

static void
test_a_socket_not_listened_on_yet_is_waited_for (Fixture *f, gconstpointer data)
{
  (void) data;
  late_bind_is_waited_for (f, TRUE);
}

/* A ROUTER that never answers: the call ends when told the peer is gone,
 * and at its timeout otherwise. */
static void
test_silence_ends_in_time (Fixture *f, gconstpointer data)
{
  (void) data;
  router_start (f, NULL, 0);
  call_fails_with (f, 60000, gone, ESRCH);
  call_fails_with (f, 150, always, ETIMEDOUT);
}

/* A listener that accepts nothing, its queue full (a stopped master, and
 * callers that gave up on it): the call still ends at its timeout, and
 * when told the peer is gone, instead of blocking in connect. */
static void
test_full_accept_queue_ends_in_time (Fixture *f, gconstpointer data)
{
  (void) data;
  int listener = socket (AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  struct sockaddr_un sun = { .sun_family = AF_UNIX };
  g_strlcpy (sun.sun_path, f->path, sizeof sun.sun_path);
  g_assert_cmpint (bind (listener, (struct sockaddr *) &sun, sizeof sun), ==, 0);
  g_assert_cmpint (listen (listener, 0), ==, 0);
  GArray *queued = g_array_new (FALSE, FALSE, sizeof (int));
  for (;;)
    {
      int c = socket (AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
      if (connect (c, (struct sockaddr *) &sun, sizeof sun) != 0)
        {
          g_assert_cmpint (errno, ==, EAGAIN);
          close (c);
          break;
        }
      g_array_append_val (queued, c);
      g_assert_cmpuint (queued->len, <, 1000);
    }
  gint64 t0 = g_get_monotonic_time ();
  call_fails_with (f, 300, always, ETIMEDOUT);
  g_assert_cmpint (g_get_monotonic_time () - t0, <, 10 * G_USEC_PER_SEC);
  call_fails_with (f, 60000, gone, ESRCH);
  for (guint i = 0; i < queued->len; i++)
    close (g_array_index (queued, int, i));
  g_array_unref (queued);
  close (listener);
}

/* ---- the reader, on streams built by hand ---- */

static void
put_greeting (GByteArray *s, guint8 major, const char *mechanism)
{
  guint8 g[DATC_ZMTP_GREETING_SIZE] = { 0 };
  g[0] = 0xFF;
  g[9] = 0x7F;
  g[10] = major;
  memcpy (g + 12, mechanism, strlen (mechanism));
  g_byte_array_append (s, g, sizeof g);
}

static void
put_frame (GByteArray *s, guint8 flags, const void *body, gsize len)
{
  if (len > 255)
    {
      flags |= 0x02;
      g_byte_array_append (s, &flags, 1);
      for (int i = 7; i >= 0; i--)
        {
          guint8 b = (guint8) ((guint64) len >> (8 * i));
          g_byte_array_append (s, &b, 1);
        }
    }
  else
    {
      guint8 head[2] = { flags, (guint8) len };
      g_byte_array_append (s, head, 2);
    }
  g_byte_array_append (s, body, (guint) len);
}

/* A command: name, then properties given as name, value, ..., NULL. */
static void
put_command (GByteArray *s, const char *name, ...)
{
  g_autoptr (GByteArray) body = g_byte_array_new ();
  guint8 n = (guint8) strlen (name);
  g_byte_array_append (body, &n, 1);
  g_byte_array_append (body, (const guint8 *) name, n);
  va_list ap;
  va_start (ap, name);
  const char *prop;
  while ((prop = va_arg (ap, const char *)) != NULL)
    {
      const char *value = va_arg (ap, const char *);
      guint8 pn = (guint8) strlen (prop);
      guint32 vn = GUINT32_TO_BE ((guint32) strlen (value));
      g_byte_array_append (body, &pn, 1);
      g_byte_array_append (body, (const guint8 *) prop, pn);
      g_byte_array_append (body, (const guint8 *) &vn, 4);
      g_byte_array_append (body, (const guint8 *) value, (guint) strlen (value));
    }
  va_end (ap);
  put_frame (s, 0x04, body->data, body->len);
}

/* What a ROUTER sends before its reply. */
static GByteArray *
router_prefix (void)
{
  GByteArray *s = g_byte_array_new ();
  put_greeting (s, 3, "NULL");
  put_command (s, "READY", "Socket-Type", "ROUTER", "Identity", "", NULL);
  return s;
}

static DatcZmtpStatus
feed_all (DatcZmtpReader *r, GByteArray *s, gsize step)
{
  DatcZmtpStatus st = DATC_ZMTP_NEED_MORE;
  for (gsize at = 0; at < s->len && st == DATC_ZMTP_NEED_MORE;)
    {
      gsize n = MIN (step, s->len - at);
      size_t used = 0;
      st = datc_zmtp_reader_feed (r, s->data + at, n, &used);
      at += used;
    }
  return st;
}

static void
test_reader_takes_a_stream_in_any_pieces (void)
{
  g_autoptr (GByteArray) s = router_prefix ();
  put_frame (s, 0x01, "", 0);
  put_frame (s, 0x01, "{\"text\":", 8);
  g_autofree gchar *big = g_strnfill (1000, 'x');
  put_frame (s, 0x01, big, 1000);
  put_frame (s, 0x00, "\"}", 2);
  g_autofree gchar *want = g_strconcat ("{\"text\":", big, "\"}", NULL);
  for (gsize step = 1; step <= s->len; step = step * 3 + 1)
    {
      DatcZmtpReader r;
      datc_zmtp_reader_init (&r, DATC_ZMTP_REPLY_MAX);
      g_assert_cmpint (feed_all (&r, s, step), ==, DATC_ZMTP_DONE);
      g_assert_cmpmem (r.reply, r.reply_len, want, strlen (want));
      datc_zmtp_reader_clear (&r);
    }
}

typedef struct {
  const char *name;
  const char *why; /* a part of the reason */
} Malformed;

static GByteArray *
malformed_stream (const char *name)
{
  GByteArray *s = g_byte_array_new ();
  if (g_str_equal (name, "no signature"))
    {
      put_greeting (s, 3, "NULL");
      s->data[9] = 0;
      return s;
    }
  if (g_str_equal (name, "ZMTP 2"))
    {
      put_greeting (s, 1, "NULL");
      return s;
    }
  if (g_str_equal (name, "CURVE"))
    {
      put_greeting (s, 3, "CURVE");
      return s;
    }
  put_greeting (s, 3, "NULL");
  if (g_str_equal (name, "reserved flags"))
    put_frame (s, 0x44, "", 0);
  else if (g_str_equal (name, "command with more"))
    put_frame (s, 0x05, "\x05READY", 6);
  else if (g_str_equal (name, "long command"))
    {
      g_autofree gchar *body = g_strnfill (300, 'x');
      put_frame (s, 0x04, body, 300);
    }
  else if (g_str_equal (name, "message before READY"))
    put_frame (s, 0x01, "", 0);
  else if (g_str_equal (name, "command before READY"))
    put_command (s, "PING", NULL);
  else if (g_str_equal (name, "name past its frame"))
    put_frame (s, 0x04, "\x09READY", 6);
  else if (g_str_equal (name, "property past its command"))
    put_frame (s, 0x04, "\x05READY\x0bSocket-Type\x00\x00\x00\x09ROUTER", 29);
  else if (g_str_equal (name, "no socket type"))
    put_command (s, "READY", "Identity", "", NULL);
  else if (g_str_equal (name, "a PUB peer"))
    put_command (s, "READY", "Socket-Type", "PUB", NULL);
  else if (g_str_equal (name, "ERROR"))
    put_command (s, "ERROR", NULL);
  else
    {
      put_command (s, "READY", "Socket-Type", "ROUTER", NULL);
      if (g_str_equal (name, "second READY"))
        put_command (s, "READY", "Socket-Type", "ROUTER", NULL);
      else if (g_str_equal (name, "no delimiter"))
        put_frame (s, 0x00, "{}", 2);
      else if (g_str_equal (name, "delimiter alone"))
        put_frame (s, 0x00, "", 0);
      else if (g_str_equal (name, "over the limit"))
        {
          put_frame (s, 0x01, "", 0);
          g_autofree gchar *body = g_strnfill (2000, 'x');
          put_frame (s, 0x00, body, 2000);
        }
      else
        g_assert_not_reached ();
    }
  return s;
}

static void
test_reader_refuses_malformed_streams (void)
{
  static const Malformed table[] = {
    { "no signature", "no ZMTP signature" },
    { "ZMTP 2", "older than 3.0" },
    { "CURVE", "other than NULL" },
    { "reserved flags", "reserved flag bits" },
    { "command with more", "command frame says more" },
    { "long command", "over 255 bytes" },
    { "message before READY", "a message frame before READY" },
    { "command before READY", "a command other than READY before READY" },
    { "name past its frame", "name runs past" },
    { "property past its command", "runs past its command" },
    { "no socket type", "no Socket-Type" },
    { "a PUB peer", "not a ROUTER or REP" },
    { "ERROR", "refused the connection" },
    { "second READY", "second READY" },
    { "no delimiter", "the reply does not start with REQ's empty delimiter" },
    { "delimiter alone", "the reply does not start with REQ's empty delimiter" },
    { "over the limit", "larger than" },
  };
  for (gsize i = 0; i < G_N_ELEMENTS (table); i++)
    {
      g_autoptr (GByteArray) s = malformed_stream (table[i].name);
      DatcZmtpReader r;
      datc_zmtp_reader_init (&r, 1024);
      DatcZmtpStatus st = feed_all (&r, s, s->len);
      if (st != DATC_ZMTP_FAILED || strstr (r.why, table[i].why) == NULL)
        g_error ("%s: status %d, why \"%s\"", table[i].name, st, r.why ? r.why : "");
      datc_zmtp_reader_clear (&r);
    }
}

/* ---- {"text"} ---- */

/* What the master writes is what the front prints: datc_status_reply
 * against datc_status_print, on a status with every kind of character. */
static void
test_text_reply_round_trips_the_masters_text (void)
{
  g_autoptr (GString) dir = g_string_new ("/tmp/c \"quoted\" \\ tab\t é 😀 ");
  for (int c = 1; c < 0x20; c++)
    g_string_append_c (dir, (char) c);
  g_autoptr (JsonBuilder) b = json_builder_new ();
  json_builder_begin_object (b);
  json_builder_set_member_name (b, "dir");
  json_builder_add_string_value (b, dir->str);
  json_builder_set_member_name (b, "master");
  json_builder_begin_object (b);
  json_builder_set_member_name (b, "running");
  json_builder_add_boolean_value (b, TRUE);
  json_builder_end_object (b);
  json_builder_set_member_name (b, "tasks");
  json_builder_begin_object (b);
  json_builder_set_member_name (b, "total");
  json_builder_add_int_value (b, 7);
  json_builder_end_object (b);
  const char *const lists[] = { "sites", "agents" };
  for (gsize i = 0; i < G_N_ELEMENTS (lists); i++)
    {
      json_builder_set_member_name (b, lists[i]);
      json_builder_begin_array (b);
      json_builder_end_array (b);
    }
  json_builder_end_object (b);
  g_autoptr (JsonNode) st = json_builder_get_root (b);
  g_autofree gchar *json = json_to_string (st, FALSE);

  g_autofree char *printed = NULL;
  size_t printed_len = 0;
  FILE *out = open_memstream (&printed, &printed_len);
  datc_status_print (json_node_get_object (st), out);
  fclose (out);
  g_assert_nonnull (strstr (printed, "😀"));

  g_autoptr (JsonNode) req = json_from_string ("{\"cmd\":\"status\",\"format\":\"text\"}", NULL);
  g_autofree gchar *reply = datc_status_reply (json_node_get_object (req), g_strdup (json));
  char *text = NULL;
  size_t text_len = 0;
  const char *why = NULL;
  g_assert_true (datc_text_reply_decode (reply, strlen (reply), &text, &text_len, &why));
  g_assert_cmpmem (text, text_len, printed, printed_len);
  free (text);
}

static void
test_text_reply_decodes_every_escape (void)
{
  const char *reply = "{\"text\":\"a\\\"b\\\\c\\/d\\b\\f\\n\\r\\t\\u00e9\\u20AC\\ud83d\\ude00\"}";
  char *text = NULL;
  size_t len = 0;
  const char *why = NULL;
  g_assert_true (datc_text_reply_decode (reply, strlen (reply), &text, &len, &why));
  g_assert_cmpstr (text, ==, "a\"b\\c/d\b\f\n\r\té€😀");
  free (text);
}

static void
test_text_reply_refuses_malformed_replies (void)
{
  static const char *const table[][2] = {
    { "", "not a {\"text\"" },
    { "{}", "not a {\"text\"" },
    { "{\"status\":\"x\"}", "not a {\"text\"" },
    { "{ \"text\":\"x\"}", "not a {\"text\"" },
    { "{\"text\":\"x\",\"more\":\"y\"}", "unescaped quote" },
    { "{\"text\":\"\\x\"}", "invalid escape" },
    { "{\"text\":\"\\u12\"}", "invalid escape" },
    { "{\"text\":\"\\u00zz\"}", "invalid escape" },
    { "{\"text\":\"\\u0000\"}", "invalid escape" },
    { "{\"text\":\"\\ud83d\"}", "invalid escape" },
    { "{\"text\":\"\\ud83d\\u0041\"}", "invalid escape" },
    { "{\"text\":\"\\ude00\"}", "invalid escape" },
    { "{\"text\":\"a\\\"}", "invalid escape" },
  };
  for (gsize i = 0; i < G_N_ELEMENTS (table); i++)
    {
      char *text = NULL;
      size_t len = 0;
      const char *why = NULL;
      if (datc_text_reply_decode (table[i][0], strlen (table[i][0]), &text, &len, &why)
          || strstr (why, table[i][1]) == NULL)
        g_error ("%s: %s", table[i][0], why ? why : "accepted");
    }
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  g_test_add ("/zmtp/call/a-real-router-answers-a-short-request", Fixture, NULL, fixture_set_up,
              test_short_request_and_reply, fixture_tear_down);
  g_test_add ("/zmtp/call/long-frames-both-ways", Fixture, NULL, fixture_set_up,
              test_long_request_and_reply, fixture_tear_down);
  g_test_add ("/zmtp/call/no-listener-without-a-peer-is-a-system-error", Fixture, NULL,
              fixture_set_up, test_no_listener_without_a_peer_is_a_system_error, fixture_tear_down);
  g_test_add ("/zmtp/call/a-socket-not-there-yet-is-waited-for", Fixture, NULL, fixture_set_up,
              test_a_socket_not_there_yet_is_waited_for, fixture_tear_down);
  g_test_add ("/zmtp/call/a-socket-not-listened-on-yet-is-waited-for", Fixture, NULL,
              fixture_set_up, test_a_socket_not_listened_on_yet_is_waited_for, fixture_tear_down);
  g_test_add ("/zmtp/call/silence-ends-when-the-peer-is-gone-or-at-the-timeout", Fixture, NULL,
              fixture_set_up, test_silence_ends_in_time, fixture_tear_down);
  g_test_add ("/zmtp/call/a-full-accept-queue-ends-at-the-timeout-too", Fixture, NULL,
              fixture_set_up, test_full_accept_queue_ends_in_time, fixture_tear_down);
  g_test_add_func ("/zmtp/reader/takes-a-stream-in-any-pieces",
                   test_reader_takes_a_stream_in_any_pieces);
  g_test_add_func ("/zmtp/reader/refuses-malformed-streams", test_reader_refuses_malformed_streams);
  g_test_add_func ("/textreply/round-trips-the-masters-text",
                   test_text_reply_round_trips_the_masters_text);
  g_test_add_func ("/textreply/decodes-every-escape", test_text_reply_decodes_every_escape);
  g_test_add_func ("/textreply/refuses-malformed-replies",
                   test_text_reply_refuses_malformed_replies);
  return g_test_run ();
}
