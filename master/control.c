/* control.c: both ends of DIR/control.  The master binds a ROUTER (so
 * several clients may talk at once); clients use a REQ socket with a
 * timeout.  Whether a master runs is decided by DIR/lock, never by the
 * socket file, which a crashed master leaves behind. */
#include "control.h"

#include "bag.h"
#include "campaign.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zmq.h>

G_DEFINE_QUARK (datc-control-error-quark, datc_control_error)

/* Submitted task files travel in one request. */
#define CONTROL_FRAME_MAX (512 * 1024 * 1024)

typedef struct {
  GPtrArray *envelope; /* GBytes* frames before the body */
  gchar *reply;
} Pending;

struct DatcControl {
  /* Its own context, so its own I/O thread: the agents' context's thread
   * carries every agent's traffic (at 1,000 agents and 200,000 tasks/s a
   * control connection's handshake and reply waited behind it for tens of
   * ms), this one only `datc status` and the other commands. */
  void *ctx;
  void *sock;
  gchar *path;
  GPtrArray *pending;  /* Pending* */
  GPtrArray *deferred; /* GPtrArray* of frames: requests kept while loading */
  /* While the campaign loads, a thread serves `status` (see
   * datc_control_start_loading). */
  GThread *loader;
  gint loader_stop;
  DatcControlHandler loading;
  gpointer loading_data;
};

static gchar *
control_path (const char *dir, GError **error)
{
  return datc_campaign_socket_path (dir, "control", error);
}

static void
pending_free (gpointer p)
{
  Pending *x = p;
  g_ptr_array_unref (x->envelope);
  g_free (x->reply);
  g_free (x);
}

DatcControl *
datc_control_new (const char *dir, GError **error)
{
  g_autoptr (DatcControl) c = g_new0 (DatcControl, 1);
  int zero = 0;
  int64_t max = CONTROL_FRAME_MAX;
  c->pending = g_ptr_array_new_with_free_func (pending_free);
  c->deferred = g_ptr_array_new_with_free_func ((GDestroyNotify) g_ptr_array_unref);
  c->path = control_path (dir, error);
  if (c->path == NULL)
    return NULL;
  c->ctx = zmq_ctx_new ();
  c->sock = c->ctx != NULL ? zmq_socket (c->ctx, ZMQ_ROUTER) : NULL;
  if (c->sock == NULL)
    {
      g_set_error (error, DATC_CONTROL_ERROR, DATC_CONTROL_ERROR_FAILED, "%s: %s", c->path,
                   zmq_strerror (errno));
      return NULL;
    }
  zmq_setsockopt (c->sock, ZMQ_LINGER, &zero, sizeof zero);
  zmq_setsockopt (c->sock, ZMQ_MAXMSGSIZE, &max, sizeof max);
  unlink (c->path); /* a crashed master's; the lock says we own the dir */
  /* Created owner-only from the start, then made sure of. */
  mode_t old = umask (0077);
  g_autofree gchar *ep = g_strconcat ("ipc://", c->path, NULL);
  int rc = zmq_bind (c->sock, ep);
  umask (old);
  if (rc != 0 || chmod (c->path, 0600) != 0)
    {
      g_set_error (error, DATC_CONTROL_ERROR, DATC_CONTROL_ERROR_FAILED, "%s: %s", c->path,
                   rc != 0 ? zmq_strerror (errno) : g_strerror (errno));
      return NULL;
    }
  return g_steal_pointer (&c);
}

void
datc_control_free (DatcControl *c)
{
  if (c == NULL)
    return;
  datc_control_stop_loading (c);
  if (c->sock)
    zmq_close (c->sock);
  if (c->ctx)
    zmq_ctx_term (c->ctx);
  if (c->path)
    unlink (c->path);
  g_free (c->path);
  g_ptr_array_unref (c->pending);
  g_ptr_array_unref (c->deferred);
  g_free (c);
}

void
datc_control_poll_items (DatcControl *c, GArray *items)
{
  zmq_pollitem_t it = { c->sock, 0, ZMQ_POLLIN, 0 };
  g_array_append_val (items, it);
}

JsonNode *
datc_control_error_reply (const char *message)
{
  g_autoptr (JsonBuilder) b = json_builder_new ();
  json_builder_begin_object (b);
  json_builder_set_member_name (b, "error");
  json_builder_add_string_value (b, message);
  json_builder_end_object (b);
  return json_builder_get_root (b);
}

/* What each member a handler reads must be; others are left alone. */
static const struct {
  const char *name;
  GType type; /* of a value; G_TYPE_NONE: an array of integers */
  gboolean required;
} request_members[] = {
  { "cmd", G_TYPE_STRING, TRUE },     { "name", G_TYPE_STRING, FALSE },
  { "format", G_TYPE_STRING, FALSE }, { "data", G_TYPE_STRING, FALSE },
  { "ids", G_TYPE_NONE, FALSE },
};

static gboolean
member_is (JsonNode *node, GType type)
{
  if (type != G_TYPE_NONE)
    return JSON_NODE_HOLDS_VALUE (node) && json_node_get_value_type (node) == type;
  if (!JSON_NODE_HOLDS_ARRAY (node))
    return FALSE;
  JsonArray *a = json_node_get_array (node);
  for (guint i = 0; i < json_array_get_length (a); i++)
    {
      JsonNode *e = json_array_get_element (a, i);
      if (!JSON_NODE_HOLDS_VALUE (e) || json_node_get_value_type (e) != G_TYPE_INT64)
        return FALSE;
    }
  return TRUE;
}

/* A request is a chain of checks, the first failure is the reply: bytes,
 * UTF-8, strict JSON syntax (json-glib asserts on an empty text and
 * recurses without limit), an object, its members' types (json-glib's
 * getters assert on the wrong ones).  Returns a member of `parser`'s tree,
 * or NULL with *why (transfer full). */
static JsonObject *
decode_request (JsonParser *parser, const char *text, gsize len, gchar **why)
{
  const char *syntax, *bad;
  gsize at;
  g_autoptr (GError) error = NULL;
  if (len == 0)
    {
      *why = g_strdup ("an empty request: expected a JSON object");
      return NULL;
    }
  if (!g_utf8_validate (text, (gssize) len, &bad))
    {
      *why = g_strdup_printf ("a request is UTF-8 text (%s at byte %" G_GSIZE_FORMAT ")",
                              *bad == '\0' ? "NUL character" : "invalid UTF-8",
                              (gsize) (bad - text) + 1);
      return NULL;
    }
  if (!datc_bag_check_json (text, len, &syntax, &at))
    {
      *why = g_strdup_printf ("invalid JSON: %s at byte %" G_GSIZE_FORMAT, syntax, at + 1);
      return NULL;
    }
  if (!json_parser_load_from_data (parser, text, (gssize) len, &error))
    {
      *why = g_strdup_printf ("invalid JSON: %s", error->message);
      return NULL;
    }
  JsonNode *root = json_parser_get_root (parser);
  if (root == NULL || !JSON_NODE_HOLDS_OBJECT (root))
    {
      *why = g_strdup ("a request is a JSON object");
      return NULL;
    }
  JsonObject *o = json_node_get_object (root);
  for (guint i = 0; i < G_N_ELEMENTS (request_members); i++)
    {
      JsonNode *m = json_object_get_member (o, request_members[i].name);
      if (m == NULL && !request_members[i].required)
        continue;
      if (m == NULL || !member_is (m, request_members[i].type))
        {
          *why = g_strdup_printf (
              "\"%s\" must be %s", request_members[i].name,
              request_members[i].type == G_TYPE_STRING ? "a string" : "an array of task ids");
          return NULL;
        }
    }
  return o;
}

static void
send_one (DatcControl *c, const Pending *p)
{
  for (guint j = 0; j < p->envelope->len; j++)
    {
      gsize n;
      const void *d = g_bytes_get_data (p->envelope->pdata[j], &n);
      zmq_send (c->sock, d, n, ZMQ_SNDMORE | ZMQ_DONTWAIT);
    }
  zmq_send (c->sock, p->reply, strlen (p->reply), ZMQ_DONTWAIT);
}

/* One request's frames (the envelope, then the body), or NULL when none
 * waits. */
static GPtrArray *
read_request (DatcControl *c)
{
  g_autoptr (GPtrArray) frames = g_ptr_array_new_with_free_func ((GDestroyNotify) g_bytes_unref);
  int more = 1;
  while (more)
    {
      zmq_msg_t m;
      zmq_msg_init (&m);
      if (zmq_msg_recv (&m, c->sock, frames->len ? 0 : ZMQ_DONTWAIT) < 0)
        {
          zmq_msg_close (&m);
          break;
        }
      g_ptr_array_add (frames, g_bytes_new (zmq_msg_data (&m), zmq_msg_size (&m)));
      more = zmq_msg_more (&m);
      zmq_msg_close (&m);
    }
  return frames->len >= 2 ? g_steal_pointer (&frames) : NULL;
}

/* Answers one request (its frames: transfer full).  A refused request
 * and `status` (which counts what is committed: datc_ledger_counts_committed)
 * have nothing to wait for: they leave now.  Other replies wait for the
 * next commit.  With `status_only` set (while loading, or in the middle
 * of a turn), any request but `status` is kept for the loop's next
 * datc_control_receive (`deferred`). */
static void
serve (DatcControl *c, GPtrArray *frames, DatcControlHandler handler, gpointer user_data,
       gboolean status_only)
{
  g_autoptr (GPtrArray) envelope = frames;
  GBytes *body = envelope->pdata[envelope->len - 1];
  gsize len;
  const char *text = g_bytes_get_data (body, &len);
  g_autoptr (JsonParser) parser = json_parser_new ();
  g_autofree gchar *why = NULL;
  JsonObject *request = decode_request (parser, text, len, &why);
  gboolean status
      = request != NULL
        && g_str_equal (json_object_get_string_member_with_default (request, "cmd", ""), "status");
  gboolean at_once = request == NULL || status;
  if (status_only && !at_once)
    {
      g_ptr_array_add (c->deferred, g_steal_pointer (&envelope));
      return;
    }
  g_ptr_array_remove_index (envelope, envelope->len - 1);
  Pending *p = g_new0 (Pending, 1);
  p->envelope = g_steal_pointer (&envelope);
  if (request == NULL)
    {
      g_autoptr (JsonNode) refused = datc_control_error_reply (why);
      p->reply = json_to_string (refused, FALSE);
    }
  else
    p->reply = handler (request, user_data);
  if (at_once)
    {
      send_one (c, p);
      pending_free (p);
    }
  else
    g_ptr_array_add (c->pending, p);
}

/* The requests waiting on the socket, at most `max` (the caller comes
 * back). */
#define SERVE_AT_ONCE 64
static void
serve_waiting (DatcControl *c, DatcControlHandler handler, gpointer user_data, gboolean status_only,
               guint max)
{
  for (guint n = 0; n < max; n++)
    {
      GPtrArray *frames = read_request (c);
      if (frames == NULL)
        return;
      serve (c, frames, handler, user_data, status_only);
    }
}

void
datc_control_receive (DatcControl *c, DatcControlHandler handler, gpointer user_data)
{
  g_return_if_fail (c->loader == NULL);
  /* What came while the campaign loaded, in the order it came. */
  g_autoptr (GPtrArray) deferred = g_steal_pointer (&c->deferred);
  c->deferred = g_ptr_array_new_with_free_func ((GDestroyNotify) g_ptr_array_unref);
  g_ptr_array_set_free_func (deferred, NULL); /* each goes to serve */
  for (guint i = 0; i < deferred->len; i++)
    serve (c, deferred->pdata[i], handler, user_data, FALSE);
  serve_waiting (c, handler, user_data, FALSE, SERVE_AT_ONCE);
}

void
datc_control_answer_status (DatcControl *c, DatcControlHandler handler, gpointer user_data)
{
  g_return_if_fail (c->loader == NULL);
  serve_waiting (c, handler, user_data, TRUE, SERVE_AT_ONCE);
}

void
datc_control_answer_status_until (DatcControl *c, int fd, DatcControlHandler handler,
                                  gpointer user_data)
{
  g_return_if_fail (c->loader == NULL);
  zmq_pollitem_t items[] = { { c->sock, 0, ZMQ_POLLIN, 0 }, { NULL, fd, ZMQ_POLLIN, 0 } };
  if (zmq_poll (items, G_N_ELEMENTS (items), -1) <= 0 || !(items[0].revents & ZMQ_POLLIN))
    return;
  /* One at a time: the caller looks at `fd` between two (a burst of
   * `datc status` must not hold a commit that is done). */
  serve_waiting (c, handler, user_data, TRUE, 1);
}

gboolean
datc_control_requests_kept (DatcControl *c)
{
  return c->deferred->len > 0;
}

/* The loading thread: owns the socket until told to stop. */
static gpointer
serve_loading (gpointer data)
{
  DatcControl *c = data;
  zmq_pollitem_t it = { c->sock, 0, ZMQ_POLLIN, 0 };
  while (!g_atomic_int_get (&c->loader_stop))
    {
      if (zmq_poll (&it, 1, 20) > 0)
        serve_waiting (c, c->loading, c->loading_data, TRUE, SERVE_AT_ONCE);
    }
  return NULL;
}

void
datc_control_start_loading (DatcControl *c, DatcControlHandler loading, gpointer user_data)
{
  g_return_if_fail (c->loader == NULL);
  c->loading = loading;
  c->loading_data = user_data;
  g_atomic_int_set (&c->loader_stop, 0);
  c->loader = g_thread_new ("datc-control", serve_loading, c);
}

void
datc_control_stop_loading (DatcControl *c)
{
  if (c->loader == NULL)
    return;
  g_atomic_int_set (&c->loader_stop, 1);
  /* The join hands the socket back to this thread (ZeroMQ: a socket may
   * move between threads across a full memory barrier). */
  g_thread_join (g_steal_pointer (&c->loader));
}

gboolean
datc_control_replies_pending (DatcControl *c)
{
  return c->pending->len > 0;
}

void
datc_control_send_replies (DatcControl *c)
{
  for (guint i = 0; i < c->pending->len; i++)
    send_one (c, c->pending->pdata[i]);
  g_ptr_array_set_size (c->pending, 0);
}

/* ---- client -------------------------------------------------------- */

gboolean
datc_control_master_running (const char *dir)
{
  g_autofree gchar *lock = g_build_filename (dir, "lock", NULL);
  int fd = open (lock, O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    return FALSE;
  gboolean running = flock (fd, LOCK_SH | LOCK_NB) != 0 && errno == EWOULDBLOCK;
  close (fd);
  return running;
}

/* 0 when the socket at `path` may be used, else access()'s errno; a
 * socket still missing is waited for, within `timeout_ms`, while the master
 * runs: a master binds it just after it takes the lock. */
static int
socket_ready (const char *dir, const char *path, guint timeout_ms)
{
  gint64 deadline = g_get_monotonic_time () + (gint64) timeout_ms * 1000;
  for (;;)
    {
      if (access (path, R_OK | W_OK) == 0)
        return 0;
      int errsv = errno;
      if (errsv != ENOENT || g_get_monotonic_time () >= deadline
          || !datc_control_master_running (dir))
        return errsv;
      g_usleep (10 * 1000);
    }
}

JsonNode *
datc_control_call (const char *dir, JsonNode *request, guint timeout_ms, GError **error)
{
  if (!datc_control_master_running (dir))
    {
      g_set_error (error, DATC_CONTROL_ERROR, DATC_CONTROL_ERROR_NO_MASTER,
                   "%s: no master is running this campaign", dir);
      return NULL;
    }
  g_autofree gchar *path = control_path (dir, error);
  if (path == NULL)
    return NULL;
  int errsv = socket_ready (dir, path, timeout_ms);
  if (errsv == ENOENT && !datc_control_master_running (dir))
    {
      g_set_error (error, DATC_CONTROL_ERROR, DATC_CONTROL_ERROR_NO_MASTER,
                   "%s: no master is running this campaign", dir);
      return NULL;
    }
  if (errsv != 0)
    {
      g_set_error (error, DATC_CONTROL_ERROR, DATC_CONTROL_ERROR_FAILED, "%s: %s", path,
                   g_strerror (errsv));
      return NULL;
    }
  void *ctx = zmq_ctx_new ();
  void *s = zmq_socket (ctx, ZMQ_REQ);
  int zero = 0;
  zmq_setsockopt (s, ZMQ_LINGER, &zero, sizeof zero);
  g_autofree gchar *ep = g_strconcat ("ipc://", path, NULL);
  g_autofree gchar *text = json_to_string (request, FALSE);
  JsonNode *out = NULL;

  if (zmq_connect (s, ep) != 0 || zmq_send (s, text, strlen (text), 0) < 0)
    g_set_error (error, DATC_CONTROL_ERROR, DATC_CONTROL_ERROR_FAILED, "%s: %s", path,
                 zmq_strerror (errno));
  else
    {
      /* A master may end between our look at its lock and its answer
       * (it answers while it ends, but not after): looked at again every
       * 100 ms, so that the caller learns at once, not at the timeout. */
      zmq_pollitem_t it = { s, 0, ZMQ_POLLIN, 0 };
      gint64 deadline = g_get_monotonic_time () + (gint64) timeout_ms * 1000;
      int ready = 0;
      gboolean gone = FALSE;
      for (;;)
        {
          gint64 left_ms = (deadline - g_get_monotonic_time ()) / 1000;
          ready = zmq_poll (&it, 1, (long) CLAMP (left_ms, 0, 100));
          if (ready < 0 && errno == EINTR)
            continue;
          if (ready != 0 || left_ms <= 0)
            break;
          if (!datc_control_master_running (dir))
            {
              gone = TRUE;
              break;
            }
        }
      if (gone)
        g_set_error (error, DATC_CONTROL_ERROR, DATC_CONTROL_ERROR_NO_MASTER,
                     "%s: the master ended before it answered", dir);
      else if (ready <= 0)
        g_set_error (error, DATC_CONTROL_ERROR, DATC_CONTROL_ERROR_TIMEOUT,
                     "%s: the master did not answer within %u ms", dir, timeout_ms);
      else
        {
          zmq_msg_t m;
          zmq_msg_init (&m);
          if (zmq_msg_recv (&m, s, 0) >= 0)
            {
              g_autoptr (JsonParser) parser = json_parser_new ();
              if (json_parser_load_from_data (parser, zmq_msg_data (&m), (gssize) zmq_msg_size (&m),
                                              error))
                {
                  JsonNode *root = json_parser_get_root (parser);
                  if (JSON_NODE_HOLDS_OBJECT (root)
                      && json_object_has_member (json_node_get_object (root), "error"))
                    g_set_error (
                        error, DATC_CONTROL_ERROR, DATC_CONTROL_ERROR_REFUSED, "%s",
                        json_object_get_string_member (json_node_get_object (root), "error"));
                  else
                    out = json_node_copy (root);
                }
            }
          zmq_msg_close (&m);
        }
    }
  zmq_close (s);
  zmq_ctx_term (ctx);
  return out;
}
