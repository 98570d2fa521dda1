/* test-control.c: the control socket's server in this process, clients on
 * REQ sockets: in the middle of a turn (datc_control_answer_status) a
 * `status` is answered at once while a request that changes the campaign
 * is kept, unanswered and not handled, for the next datc_control_receive,
 * which handles it and keeps its reply until the commit; while the loop
 * waits for a fd (a commit's fdatasync: datc_control_answer_status_until)
 * the same, and the wait ends when the fd is readable. */
#include <glib.h>
#include <glib/gstdio.h>
#include <json-glib/json-glib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>
#include <zmq.h>

#include "control.h"

typedef struct {
  GPtrArray *seen; /* the "cmd" of each request handled, in order */
} Handled;

static gchar *
handler (JsonObject *request, gpointer data)
{
  Handled *h = data;
  const char *cmd = json_object_get_string_member (request, "cmd");
  g_ptr_array_add (h->seen, g_strdup (cmd));
  return g_strdup_printf ("{\"said\":\"%s\"}", cmd);
}

static void *
client (void *ctx, const char *dir, const char *request)
{
  void *s = zmq_socket (ctx, ZMQ_REQ);
  int zero = 0;
  zmq_setsockopt (s, ZMQ_LINGER, &zero, sizeof zero);
  g_autofree gchar *ep = g_strconcat ("ipc://", dir, "/control", NULL);
  g_assert_cmpint (zmq_connect (s, ep), ==, 0);
  g_assert_cmpint (zmq_send (s, request, strlen (request), 0), ==, (int) strlen (request));
  return s;
}

/* The reply waiting on `s`, or NULL when none came within `ms`. */
static gchar *
reply_of (void *s, int ms)
{
  zmq_pollitem_t it = { s, 0, ZMQ_POLLIN, 0 };
  if (zmq_poll (&it, 1, ms) <= 0)
    return NULL;
  char buf[256];
  int n = zmq_recv (s, buf, sizeof buf - 1, 0);
  g_assert_cmpint (n, >=, 0);
  return g_strndup (buf, (gsize) n);
}

/* Until the server's socket shows a request (ipc connects in the
 * background), at most 10 s. */
static void
await_request (DatcControl *c)
{
  g_autoptr (GArray) items = g_array_new (FALSE, FALSE, sizeof (zmq_pollitem_t));
  datc_control_poll_items (c, items);
  g_assert_cmpint (zmq_poll ((zmq_pollitem_t *) items->data, 1, 10000), ==, 1);
}

/* A control socket in a fresh directory, a client context beside it. */
typedef struct {
  gchar *dir;
  void *ctx;
  DatcControl *c;
  Handled h;
} Server;

static void
server_up (Server *sv)
{
  g_autoptr (GError) error = NULL;
  sv->dir = g_dir_make_tmp ("datc-control-XXXXXX", &error);
  g_assert_no_error (error);
  sv->ctx = zmq_ctx_new ();
  sv->c = datc_control_new (sv->dir, &error);
  g_assert_no_error (error);
  sv->h.seen = g_ptr_array_new_with_free_func (g_free);
}

static void
server_down (Server *sv)
{
  datc_control_free (sv->c);
  zmq_ctx_term (sv->ctx);
  g_ptr_array_unref (sv->h.seen);
  g_assert_cmpint (g_rmdir (sv->dir), ==, 0);
  g_free (sv->dir);
}

static void
test_status_now_the_rest_later (void)
{
  Server sv;
  server_up (&sv);

  void *submit = client (sv.ctx, sv.dir, "{\"cmd\":\"submit\",\"data\":\"true\"}");
  await_request (sv.c);
  void *status = client (sv.ctx, sv.dir, "{\"cmd\":\"status\"}");
  /* Both read in the middle of a turn: the status answered, the submit
   * kept. */
  gint64 deadline = g_get_monotonic_time () + 10 * G_USEC_PER_SEC;
  g_autofree gchar *said = NULL;
  while (said == NULL && g_get_monotonic_time () < deadline)
    {
      datc_control_answer_status (sv.c, handler, &sv.h);
      said = reply_of (status, 10);
    }
  g_assert_cmpstr (said, ==, "{\"said\":\"status\"}");
  g_assert_cmpuint (sv.h.seen->len, ==, 1);
  g_assert_cmpstr (sv.h.seen->pdata[0], ==, "status");
  g_assert_true (datc_control_requests_kept (sv.c));
  g_assert_null (reply_of (submit, 50));

  /* The turn's end: handled now, answered after the commit. */
  datc_control_receive (sv.c, handler, &sv.h);
  g_assert_false (datc_control_requests_kept (sv.c));
  g_assert_cmpuint (sv.h.seen->len, ==, 2);
  g_assert_cmpstr (sv.h.seen->pdata[1], ==, "submit");
  g_assert_true (datc_control_replies_pending (sv.c));
  g_assert_null (reply_of (submit, 50));
  datc_control_send_replies (sv.c);
  g_autofree gchar *submitted = reply_of (submit, 10000);
  g_assert_cmpstr (submitted, ==, "{\"said\":\"submit\"}");

  zmq_close (submit);
  zmq_close (status);
  server_down (&sv);
}

static void
test_status_while_waiting_for_a_fd (void)
{
  Server sv;
  server_up (&sv);
  int done = eventfd (0, EFD_CLOEXEC | EFD_NONBLOCK);
  g_assert_cmpint (done, >=, 0);

  /* Not done: each call returns once something came, having answered a
   * status (called again only while the status is not handled: with
   * nothing coming and the fd never readable it would not return). */
  void *status = client (sv.ctx, sv.dir, "{\"cmd\":\"status\"}");
  while (sv.h.seen->len == 0)
    datc_control_answer_status_until (sv.c, done, handler, &sv.h);
  g_autofree gchar *said = reply_of (status, 10000);
  g_assert_cmpstr (said, ==, "{\"said\":\"status\"}");
  void *submit = client (sv.ctx, sv.dir, "{\"cmd\":\"submit\",\"data\":\"true\"}");
  while (!datc_control_requests_kept (sv.c))
    datc_control_answer_status_until (sv.c, done, handler, &sv.h);
  g_assert_cmpuint (sv.h.seen->len, ==, 1); /* the submit kept, not handled */
  g_assert_null (reply_of (submit, 50));

  /* Done: returns at once, nothing waiting on the socket. */
  g_assert_cmpint (eventfd_write (done, 1), ==, 0);
  datc_control_answer_status_until (sv.c, done, handler, &sv.h);
  g_assert_cmpuint (sv.h.seen->len, ==, 1);
  datc_control_receive (sv.c, handler, &sv.h);
  g_assert_cmpstr (sv.h.seen->pdata[1], ==, "submit");

  close (done);
  zmq_close (submit);
  zmq_close (status);
  server_down (&sv);
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  g_test_add_func ("/control/status-now-the-rest-after-the-turn", test_status_now_the_rest_later);
  g_test_add_func ("/control/status-while-waiting-for-a-fd", test_status_while_waiting_for_a_fd);
  return g_test_run ();
}
