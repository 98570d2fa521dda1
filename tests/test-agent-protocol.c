/* test-agent-protocol.c: the real datc-agent against a master played by
 * the test: a ZMQ ROUTER on an ipc socket in a private directory, which
 * sends the agent exactly the frames a case needs, in an order a real
 * master produces only by chance.
 *
 *  - Dismissed means gone: a BYE from the master, then (in the same batch
 *    of frames) a HEARTBEAT asking it to say HELLO again, as the master
 *    sends to a peer it no longer knows when a frame of the agent's
 *    crossed its BYE.  The agent leaves without a second HELLO, which the
 *    master would take for a new agent (`agent_connected` right after
 *    `agent_exited`, seen in a multi-site trace).
 *  - A lost CREDIT is asked again: ZeroMQ drops what is queued on a
 *    connection that breaks, so a master can keep talking to an agent
 *    whose request it never got; the agent, its slot waiting, sends the
 *    same cumulative credit again after a heartbeat.  And its first
 *    request is for its slots alone (no task has run: their length is
 *    unknown, and a bag of long tasks is not taken whole by one agent).
 *  - Credit goes with results: a result that leaves after its linger
 *    takes along whatever credit is wanted, under the batch or not, so
 *    the master is woken once for both.
 *  - The agent preempts its tasks: it runs with a short time slice of
 *    its own (Linux 6.12), which its tasks do not inherit. */
#include <linux/sched.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>
#include <zmq.h>
#include <glib/gstdio.h>

#include "harness.h"
#include "datc-limits.h"
#include "message.h"

typedef struct {
  void *ctx, *router;
  GBytes *peer; /* the agent's routing id, once it spoke */
} FakeMaster;

static void
fake_open (FakeMaster *f, const char *endpoint)
{
  f->ctx = zmq_ctx_new ();
  f->router = zmq_socket (f->ctx, ZMQ_ROUTER);
  int zero = 0;
  zmq_setsockopt (f->router, ZMQ_LINGER, &zero, sizeof zero);
  g_assert_cmpint (zmq_bind (f->router, endpoint), ==, 0);
  f->peer = NULL;
}

static void
fake_close (FakeMaster *f)
{
  g_clear_pointer (&f->peer, g_bytes_unref);
  zmq_close (f->router);
  zmq_ctx_term (f->ctx);
}

/* The next message from the agent within `timeout_ms`, or NULL. */
static DatcMsg *
fake_next (FakeMaster *f, int timeout_ms)
{
  zmq_pollitem_t item = { f->router, 0, ZMQ_POLLIN, 0 };
  if (zmq_poll (&item, 1, timeout_ms) <= 0)
    return NULL;
  zmq_msg_t id, body;
  zmq_msg_init (&id);
  zmq_msg_init (&body);
  g_assert_cmpint (zmq_msg_recv (&id, f->router, 0), >=, 0);
  g_assert_true (zmq_msg_more (&id));
  g_assert_cmpint (zmq_msg_recv (&body, f->router, 0), >=, 0);
  if (f->peer == NULL)
    f->peer = g_bytes_new (zmq_msg_data (&id), zmq_msg_size (&id));
  g_autoptr (GError) error = NULL;
  DatcMsg *m = datc_msg_decode (zmq_msg_data (&body), zmq_msg_size (&body), DATC_FRAME_MAX, &error);
  g_assert_no_error (error);
  zmq_msg_close (&id);
  zmq_msg_close (&body);
  return m;
}

/* The next message of `type`, skipping others (CREDIT, HEARTBEAT). */
static DatcMsg *
fake_await (FakeMaster *f, DatcMsgType type, int timeout_ms)
{
  gint64 deadline = g_get_monotonic_time () + (gint64) timeout_ms * 1000;
  while (g_get_monotonic_time () < deadline)
    {
      DatcMsg *m = fake_next (f, 100);
      if (m != NULL && m->type == type)
        return m;
      if (m != NULL)
        datc_msg_free (m);
    }
  return NULL;
}

static void
fake_send (FakeMaster *f, const DatcMsg *m)
{
  g_autoptr (GByteArray) frame = g_byte_array_new ();
  datc_msg_encode (m, frame);
  gsize len;
  const void *id = g_bytes_get_data (f->peer, &len);
  g_assert_cmpint (zmq_send (f->router, id, len, ZMQ_SNDMORE), ==, (int) len);
  g_assert_cmpint (zmq_send (f->router, frame->data, frame->len, 0), ==, (int) frame->len);
}

/* A fake master in a private directory of `d`, and the real agent with
 * `slots` (and `prefetch`, or NULL for its own) connected to it, welcomed
 * (epoch 7, heartbeats every `heartbeat_ms`): returns its HELLO, leaves
 * its first CREDIT in *credit. */
static DatcMsg *
fake_welcome_agent (TbDir *d, FakeMaster *f, const char *slots, const char *prefetch,
                    guint heartbeat_ms, TbProc **agent, DatcMsg **credit)
{
  g_autofree gchar *sockdir = g_build_filename (d->path, "s", NULL);
  g_assert_cmpint (g_mkdir (sockdir, 0700), ==, 0);
  g_autofree gchar *endpoint = g_strdup_printf ("ipc://%s/m.sock", sockdir);
  fake_open (f, endpoint);
  const char *argv[] = { tb_agent (), "--connect", endpoint, "--slots", slots, "--site",
                         "here",      "--proxy",   "p1",     NULL,      NULL,  NULL };
  if (prefetch != NULL)
    {
      argv[9] = "--prefetch";
      argv[10] = prefetch;
    }
  *agent = tb_spawn (d, "agent", argv);
  DatcMsg *hello = fake_await (f, DATC_MSG_HELLO, 10000);
  g_assert_nonnull (hello);
  g_autoptr (DatcMsg) welcome = datc_msg_new (DATC_MSG_WELCOME);
  welcome->u.welcome.epoch = 7;
  welcome->u.welcome.session = hello->u.hello.session;
  welcome->u.welcome.heartbeat_ms = heartbeat_ms;
  welcome->u.welcome.timeout_ms = 10000;
  fake_send (f, welcome);
  /* Welcomed: it asks for work. */
  *credit = fake_await (f, DATC_MSG_CREDIT, 10000);
  g_assert_nonnull (*credit);
  return hello;
}

static void
test_dismissed_agent_does_not_come_back (void)
{
  g_autoptr (TbDir) d = tb_dir_new ();
  FakeMaster f;
  g_autoptr (TbProc) agent = NULL;
  g_autoptr (DatcMsg) credit = NULL;
  g_autoptr (DatcMsg) hello = fake_welcome_agent (d, &f, "1", NULL, 1000, &agent, &credit);

  /* BYE, then at once the request a master sends a peer it does not know. */
  g_autoptr (DatcMsg) bye = datc_msg_new (DATC_MSG_BYE);
  bye->u.reason = g_strdup ("no work left");
  fake_send (&f, bye);
  g_autoptr (DatcMsg) again = datc_msg_new (DATC_MSG_HEARTBEAT);
  again->u.heartbeat.epoch = 7;
  again->u.heartbeat.rehello = TRUE;
  fake_send (&f, again);

  /* It leaves (its own BYE), and says no HELLO on the way. */
  gboolean said_bye = FALSE, said_hello = FALSE;
  DatcMsg *m;
  while ((m = fake_next (&f, 3000)) != NULL)
    {
      said_hello |= m->type == DATC_MSG_HELLO;
      said_bye |= m->type == DATC_MSG_BYE;
      datc_msg_free (m);
    }
  g_assert_false (said_hello);
  g_assert_true (said_bye);
  g_assert_cmpint (tb_wait (agent, 10), ==, 0);
  fake_close (&f);
}

static void
test_lost_credit_is_asked_again (void)
{
  g_autoptr (TbDir) d = tb_dir_new ();
  FakeMaster f;
  g_autoptr (TbProc) agent = NULL;
  g_autoptr (DatcMsg) credit = NULL;
  g_autoptr (DatcMsg) hello = fake_welcome_agent (d, &f, "3", NULL, 300, &agent, &credit);
  g_assert_cmpuint (credit->u.credit.limit, ==, 3);

  /* That one is "lost": the master sends no task, only heartbeats (so the
   * agent's lease holds and it has no reason to say HELLO again). */
  g_autoptr (DatcMsg) beat = datc_msg_new (DATC_MSG_HEARTBEAT);
  beat->u.heartbeat.epoch = 7;
  beat->u.heartbeat.session = hello->u.hello.session;
  gint64 deadline = g_get_monotonic_time () + 5 * G_USEC_PER_SEC;
  DatcMsg *again = NULL;
  while (again == NULL && g_get_monotonic_time () < deadline)
    {
      fake_send (&f, beat);
      DatcMsg *m = fake_next (&f, 100);
      if (m != NULL && m->type == DATC_MSG_CREDIT)
        again = m;
      else if (m != NULL)
        {
          g_assert_cmpint (m->type, !=, DATC_MSG_HELLO);
          datc_msg_free (m);
        }
    }
  g_assert_nonnull (again);
  g_assert_cmpuint (again->u.credit.session, ==, hello->u.hello.session);
  g_assert_cmpuint (again->u.credit.limit, ==, 3);
  datc_msg_free (again);
  g_assert_true (tb_proc_signal (agent, SIGTERM));
  tb_wait (agent, 10);
  fake_close (&f);
}

/* TASKS of the session of `hello`, each task running argv. */
static void
fake_send_tasks (FakeMaster *f, const DatcMsg *hello, guint64 first_id, guint n,
                 const char *const *argv)
{
  g_autoptr (DatcMsg) tasks = datc_msg_new (DATC_MSG_TASKS);
  tasks->u.tasks.session = hello->u.hello.session;
  for (guint i = 0; i < n; i++)
    {
      DatcTask *t = g_new0 (DatcTask, 1);
      t->id = first_id + i;
      t->attempt = 1;
      t->spec.argv = g_strdupv ((gchar **) argv);
      g_ptr_array_add (tasks->u.tasks.tasks, t);
    }
  fake_send (f, tasks);
}

/* The next message that is not a HEARTBEAT, or NULL. */
static DatcMsg *
fake_next_not_heartbeat (FakeMaster *f, int timeout_ms)
{
  gint64 deadline = g_get_monotonic_time () + (gint64) timeout_ms * 1000;
  while (g_get_monotonic_time () < deadline)
    {
      DatcMsg *m = fake_next (f, 100);
      if (m != NULL && m->type != DATC_MSG_HEARTBEAT)
        return m;
      if (m != NULL)
        datc_msg_free (m);
    }
  return NULL;
}

static void
test_credit_goes_with_results (void)
{
  g_autoptr (TbDir) d = tb_dir_new ();
  FakeMaster f;
  g_autoptr (TbProc) agent = NULL;
  g_autoptr (DatcMsg) credit = NULL;
  g_autoptr (DatcMsg) hello = fake_welcome_agent (d, &f, "1", "10", 1000, &agent, &credit);
  g_assert_cmpuint (credit->u.credit.limit, ==, 11); /* slots + prefetch */

  /* Two of the eleven: the first ends while the second runs, so its
   * result waits out its linger; the one more task the agent may then
   * ask for is under its batch (half the prefetch). */
  const char *sleep_argv[] = { "sleep", "0.3", NULL };
  fake_send_tasks (&f, hello, 1, 2, sleep_argv);
  g_autoptr (DatcMsg) result = fake_await (&f, DATC_MSG_RESULT, 10000);
  g_assert_nonnull (result);
  g_assert_cmpuint (result->u.results.results->len, ==, 1);
  g_assert_cmpuint (((DatcResult *) result->u.results.results->pdata[0])->id, ==, 1);
  /* The credit goes with it, not with some later result. */
  g_autoptr (DatcMsg) next = fake_next_not_heartbeat (&f, 5000);
  g_assert_nonnull (next);
  g_assert_cmpstr (datc_msg_type_name (next->type), ==, "CREDIT");
  g_assert_cmpuint (next->u.credit.limit, ==, 12);

  g_assert_true (tb_proc_signal (agent, SIGTERM));
  tb_wait (agent, 10);
  fake_close (&f);
}

/* The se.slice line of a /proc/PID/sched text, in ns; -1 if none. */
static gint64
slice_in (const char *sched)
{
  const char *line = sched != NULL ? strstr (sched, "se.slice") : NULL;
  if (line == NULL)
    return -1;
  const char *colon = strchr (line, ':');
  return colon != NULL ? g_ascii_strtoll (colon + 1, NULL, 10) : -1;
}

static gint64
slice_of (const char *pid)
{
  g_autofree gchar *path = g_strdup_printf ("/proc/%s/sched", pid);
  g_autofree gchar *text = NULL;
  g_file_get_contents (path, &text, NULL, NULL);
  return slice_in (text);
}

/* Whether this kernel gives a thread the slice it asks for (Linux 6.12):
 * asked in a child, so that nothing here (and no agent started from here)
 * inherits it. */
static gboolean
kernel_takes_slices (void)
{
  pid_t pid = fork ();
  if (pid == 0)
    {
      struct {
        guint32 size, policy;
        guint64 flags;
        gint32 nice;
        guint32 priority;
        guint64 runtime, deadline, period;
      } attr = { .size = sizeof attr, .policy = SCHED_NORMAL, .runtime = 200 * 1000 };
      _exit (syscall (SYS_sched_setattr, 0, &attr, 0) == 0 && slice_of ("self") == 200 * 1000 ? 0
                                                                                              : 1);
    }
  int status = 0;
  g_assert_cmpint (waitpid (pid, &status, 0), ==, pid);
  return WIFEXITED (status) && WEXITSTATUS (status) == 0;
}

static void
test_agent_preempts_its_tasks (void)
{
  gint64 own = slice_of ("self");
  if (own < 0 || !kernel_takes_slices ())
    {
      g_test_skip ("this kernel shows no se.slice or takes no slice of one's own (Linux < 6.12)");
      return;
    }
  g_autoptr (TbDir) d = tb_dir_new ();
  FakeMaster f;
  g_autoptr (TbProc) agent = NULL;
  g_autoptr (DatcMsg) credit = NULL;
  g_autoptr (DatcMsg) hello = fake_welcome_agent (d, &f, "1", NULL, 1000, &agent, &credit);

  /* The agent's own slice is short... */
  g_autofree gchar *pid = g_strdup_printf ("%d", tb_proc_pid (agent));
  g_assert_cmpint (slice_of (pid), ==, 100 * 1000);
  /* ...and its tasks do not inherit it: they get the default, as we have. */
  const char *cat_argv[] = { "cat", "/proc/self/sched", NULL };
  fake_send_tasks (&f, hello, 1, 1, cat_argv);
  g_autoptr (DatcMsg) result = fake_await (&f, DATC_MSG_RESULT, 10000);
  g_assert_nonnull (result);
  DatcResult *r = result->u.results.results->pdata[0];
  g_autofree gchar *out = g_strndup (g_bytes_get_data (r->out, NULL), g_bytes_get_size (r->out));
  g_assert_cmpint (slice_in (out), ==, own);

  g_assert_true (tb_proc_signal (agent, SIGTERM));
  tb_wait (agent, 10);
  fake_close (&f);
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  g_test_add_func ("/agent-protocol/dismissed-agent-says-no-hello-again",
                   test_dismissed_agent_does_not_come_back);
  g_test_add_func ("/agent-protocol/a-lost-credit-is-asked-again", test_lost_credit_is_asked_again);
  g_test_add_func ("/agent-protocol/credit-goes-with-results", test_credit_goes_with_results);
  g_test_add_func ("/agent-protocol/agent-preempts-its-tasks", test_agent_preempts_its_tasks);
  return g_test_run ();
}
