/* test-message.c: the wire codec against its contract.
 *
 * Every message type round-trips with typical and edge values; the
 * streaming TASKS encoder writes the same bytes as datc_msg_encode(); a
 * table of hand-built malformed frames fails with the expected code and a
 * reason naming what was wrong; every truncation of every sample frame is
 * refused; and seeded random mutations never crash, and when they decode,
 * they round-trip. */

#include "message.h"
#include "datc-limits.h"

#include <msgpack.h>
#include <string.h>

/* ------------------------------------------------------------- helpers */

static GBytes *
encode (const DatcMsg *msg)
{
  GByteArray *out = g_byte_array_new ();

  datc_msg_encode (msg, out);
  return g_byte_array_free_to_bytes (out);
}

static DatcMsg *
decode_bytes (GBytes *frame, gsize max_size, GError **error)
{
  gsize len = 0;
  const guint8 *data = g_bytes_get_data (frame, &len);

  return datc_msg_decode (data, len, max_size, error);
}

static DatcMsg *
decode_ok (GBytes *frame)
{
  g_autoptr (GError) error = NULL;
  DatcMsg *msg = decode_bytes (frame, DATC_FRAME_MAX, &error);

  g_assert_no_error (error);
  g_assert_nonnull (msg);
  return msg;
}

static void
add_key (GArray *keys, guint64 id, guint32 attempt)
{
  DatcTaskKey key = { .id = id, .attempt = attempt };

  g_array_append_val (keys, key);
}

static void
assert_strv_equal (char **a, char **b)
{
  if (a == NULL || b == NULL)
    g_assert_true (a == b);
  else
    g_assert_cmpstrv (a, b);
}

/* NULL GBytes encode as empty bin, so they compare equal to empty ones. */
static void
assert_bin_equal (GBytes *a, GBytes *b)
{
  gsize alen = 0, blen = 0;
  const guint8 *ap = a != NULL ? g_bytes_get_data (a, &alen) : NULL;
  const guint8 *bp = b != NULL ? g_bytes_get_data (b, &blen) : NULL;

  g_assert_cmpmem (ap, alen, bp, blen);
}

static void
assert_keys_equal (GArray *a, GArray *b)
{
  guint alen = a != NULL ? a->len : 0;
  guint blen = b != NULL ? b->len : 0;

  g_assert_cmpuint (alen, ==, blen);
  for (guint i = 0; i < alen; i++)
    {
      g_assert_cmpuint (g_array_index (a, DatcTaskKey, i).id, ==,
                        g_array_index (b, DatcTaskKey, i).id);
      g_assert_cmpuint (g_array_index (a, DatcTaskKey, i).attempt, ==,
                        g_array_index (b, DatcTaskKey, i).attempt);
    }
}

static void
assert_spec_equal (const DatcTaskSpec *a, const DatcTaskSpec *b)
{
  assert_strv_equal (a->argv, b->argv);
  g_assert_cmpstr (a->sh, ==, b->sh);
  assert_strv_equal (a->env, b->env);
  g_assert_cmpstr (a->cwd, ==, b->cwd);
  g_assert_cmpuint (a->timeout_ms, ==, b->timeout_ms);
  g_assert_cmpuint (a->est_runtime_ms, ==, b->est_runtime_ms);
}

static void
assert_result_equal (const DatcResult *a, const DatcResult *b)
{
  g_assert_cmpuint (a->id, ==, b->id);
  g_assert_cmpuint (a->attempt, ==, b->attempt);
  g_assert_cmpint (a->status, ==, b->status);
  g_assert_cmpint (a->exit_code, ==, b->exit_code);
  g_assert_cmpint (a->signal, ==, b->signal);
  g_assert_cmpint (a->started_us, ==, b->started_us);
  g_assert_cmpint (a->finished_us, ==, b->finished_us);
  assert_bin_equal (a->out, b->out);
  assert_bin_equal (a->err, b->err);
  g_assert_cmpuint (a->out_dropped, ==, b->out_dropped);
  g_assert_cmpuint (a->err_dropped, ==, b->err_dropped);
  g_assert_cmpstr (a->message, ==, b->message);
  g_assert_cmpstr (a->oom_evidence, ==, b->oom_evidence);
}

static void
assert_msg_equal (const DatcMsg *a, const DatcMsg *b)
{
  g_assert_cmpint (a->type, ==, b->type);
  switch (a->type)
    {
    case DATC_MSG_HELLO:
      g_assert_cmpstr (a->u.hello.agent_id, ==, b->u.hello.agent_id);
      g_assert_cmpstr (a->u.hello.site, ==, b->u.hello.site);
      g_assert_cmpstr (a->u.hello.proxy, ==, b->u.hello.proxy);
      g_assert_cmpstr (a->u.hello.host, ==, b->u.hello.host);
      g_assert_cmpuint (a->u.hello.pid, ==, b->u.hello.pid);
      g_assert_cmpuint (a->u.hello.slots, ==, b->u.hello.slots);
      g_assert_cmpint (a->u.hello.walltime_end_us, ==, b->u.hello.walltime_end_us);
      g_assert_cmpuint (a->u.hello.session, ==, b->u.hello.session);
      assert_keys_equal (a->u.hello.held, b->u.hello.held);
      break;
    case DATC_MSG_WELCOME:
      g_assert_cmpuint (a->u.welcome.epoch, ==, b->u.welcome.epoch);
      g_assert_cmpuint (a->u.welcome.session, ==, b->u.welcome.session);
      g_assert_cmpuint (a->u.welcome.heartbeat_ms, ==, b->u.welcome.heartbeat_ms);
      g_assert_cmpuint (a->u.welcome.timeout_ms, ==, b->u.welcome.timeout_ms);
      break;
    case DATC_MSG_CREDIT:
      g_assert_cmpuint (a->u.credit.session, ==, b->u.credit.session);
      g_assert_cmpuint (a->u.credit.limit, ==, b->u.credit.limit);
      break;
    case DATC_MSG_TASKS:
      g_assert_cmpuint (a->u.tasks.session, ==, b->u.tasks.session);
      g_assert_cmpuint (a->u.tasks.tasks->len, ==, b->u.tasks.tasks->len);
      for (guint i = 0; i < a->u.tasks.tasks->len; i++)
        {
          const DatcTask *ta = g_ptr_array_index (a->u.tasks.tasks, i);
          const DatcTask *tb = g_ptr_array_index (b->u.tasks.tasks, i);
          g_assert_cmpuint (ta->id, ==, tb->id);
          g_assert_cmpuint (ta->attempt, ==, tb->attempt);
          assert_spec_equal (&ta->spec, &tb->spec);
        }
      break;
    case DATC_MSG_RESULT:
      g_assert_cmpuint (a->u.results.results->len, ==, b->u.results.results->len);
      for (guint i = 0; i < a->u.results.results->len; i++)
        assert_result_equal (g_ptr_array_index (a->u.results.results, i),
                             g_ptr_array_index (b->u.results.results, i));
      break;
    case DATC_MSG_ACK:
    case DATC_MSG_CANCEL:
      assert_keys_equal (a->u.keys, b->u.keys);
      break;
    case DATC_MSG_HEARTBEAT:
      g_assert_cmpuint (a->u.heartbeat.epoch, ==, b->u.heartbeat.epoch);
      g_assert_cmpuint (a->u.heartbeat.session, ==, b->u.heartbeat.session);
      g_assert_cmpuint (a->u.heartbeat.received, ==, b->u.heartbeat.received);
      g_assert_cmpuint (a->u.heartbeat.running, ==, b->u.heartbeat.running);
      g_assert_cmpint (!!a->u.heartbeat.rehello, ==, !!b->u.heartbeat.rehello);
      break;
    case DATC_MSG_RETIRE:
    case DATC_MSG_BYE:
      g_assert_cmpstr (a->u.reason, ==, b->u.reason);
      break;
    }
}

/* decode(encode(msg)) equals msg, and encoding is canonical: encoding the
 * decoded message gives the same bytes again. */
static void
assert_round_trips (const DatcMsg *msg)
{
  g_autoptr (GBytes) frame = encode (msg);
  g_autoptr (DatcMsg) decoded = decode_ok (frame);
  assert_msg_equal (msg, decoded);

  g_autoptr (GBytes) again = encode (decoded);
  g_assert_true (g_bytes_equal (frame, again));
}

static char *
repeat (const char *unit, guint times)
{
  GString *s = g_string_new (NULL);

  for (guint i = 0; i < times; i++)
    g_string_append (s, unit);
  return g_string_free (s, FALSE);
}

/* ------------------------------------------------------------- samples */

static DatcTask *
task_sh (guint64 id, guint32 attempt, const char *sh)
{
  DatcTask *task = g_new0 (DatcTask, 1);

  task->id = id;
  task->attempt = attempt;
  task->spec.sh = g_strdup (sh);
  return task;
}

static DatcTask *
task_argv (guint64 id, guint32 attempt, const char *const *argv, const char *const *env,
           const char *cwd, guint32 timeout_ms, guint32 est_runtime_ms)
{
  DatcTask *task = g_new0 (DatcTask, 1);

  task->id = id;
  task->attempt = attempt;
  task->spec.argv = g_strdupv ((gchar **) argv);
  task->spec.env = g_strdupv ((gchar **) env);
  task->spec.cwd = g_strdup (cwd);
  task->spec.timeout_ms = timeout_ms;
  task->spec.est_runtime_ms = est_runtime_ms;
  return task;
}

static DatcResult *
result_with_output (guint64 id, guint32 attempt, DatcTaskStatus status, gint32 exit_code,
                    gint32 sig, const char *out, gsize out_len, const char *message)
{
  DatcResult *r = datc_result_new (id, attempt);

  r->status = status;
  r->exit_code = exit_code;
  r->signal = sig;
  r->started_us = G_GINT64_CONSTANT (1763740800000000);
  r->finished_us = r->started_us + 1234567;
  r->out = g_bytes_new (out, out_len);
  r->err = g_bytes_new ("warning\n", 8);
  r->message = g_strdup (message);
  return r;
}

static DatcMsg *
sample_hello (void)
{
  DatcMsg *msg = datc_msg_new (DATC_MSG_HELLO);

  msg->u.hello.agent_id = g_strdup ("agent-7f3a9c");
  msg->u.hello.site = g_strdup ("hpc1 — Grenoble ☃");
  msg->u.hello.proxy = g_strdup ("4242.batch");
  msg->u.hello.host = g_strdup ("node-0042.cluster");
  msg->u.hello.pid = 31337;
  msg->u.hello.slots = 16;
  msg->u.hello.walltime_end_us = G_MININT64;
  msg->u.hello.session = 2;
  add_key (msg->u.hello.held, 1, 0);
  add_key (msg->u.hello.held, 1000, 3);
  add_key (msg->u.hello.held, G_MAXUINT64, G_MAXUINT32);
  return msg;
}

static DatcMsg *
sample_hello_edge (void)
{
  DatcMsg *msg = datc_msg_new (DATC_MSG_HELLO);

  msg->u.hello.agent_id = repeat ("é", DATC_NAME_MAX / 2); /* exactly the limit, in bytes */
  msg->u.hello.site = repeat ("s", DATC_NAME_MAX);
  msg->u.hello.proxy = g_strdup ("");
  msg->u.hello.host = g_strdup ("");
  msg->u.hello.pid = 0;
  msg->u.hello.slots = G_MAXUINT32;
  msg->u.hello.walltime_end_us = G_MAXINT64;
  msg->u.hello.session = G_MAXUINT32;
  return msg;
}

static DatcMsg *
sample_welcome (void)
{
  DatcMsg *msg = datc_msg_new (DATC_MSG_WELCOME);

  msg->u.welcome.epoch = 1763740800;
  msg->u.welcome.session = 1;
  msg->u.welcome.heartbeat_ms = 5000;
  msg->u.welcome.timeout_ms = 30000;
  return msg;
}

static DatcMsg *
sample_welcome_edge (void)
{
  DatcMsg *msg = datc_msg_new (DATC_MSG_WELCOME);

  msg->u.welcome.epoch = G_MAXUINT64;
  msg->u.welcome.session = G_MAXUINT32;
  msg->u.welcome.heartbeat_ms = 0;
  msg->u.welcome.timeout_ms = G_MAXUINT32;
  return msg;
}

static DatcMsg *
sample_credit (void)
{
  DatcMsg *msg = datc_msg_new (DATC_MSG_CREDIT);

  msg->u.credit.session = 7;
  msg->u.credit.limit = 130;
  return msg;
}

static DatcMsg *
sample_credit_edge (void)
{
  DatcMsg *msg = datc_msg_new (DATC_MSG_CREDIT);

  msg->u.credit.session = G_MAXUINT32;
  msg->u.credit.limit = G_MAXUINT64;
  return msg;
}

static DatcMsg *
sample_tasks (void)
{
  static const char *const argv1[] = { "/usr/bin/env", "python3", "-c", "print(1)", NULL };
  static const char *const env1[] = { "OMP_NUM_THREADS=4", "OPTS=a=b=c", "EMPTY=", NULL };
  static const char *const argv2[] = { "./sim", "", "--name=ünïcødé", NULL };
  DatcMsg *msg = datc_msg_new (DATC_MSG_TASKS);

  msg->u.tasks.session = 3;
  g_ptr_array_add (msg->u.tasks.tasks, task_sh (1, 0, "echo hello > out.$RANDOM"));
  g_ptr_array_add (msg->u.tasks.tasks,
                   task_argv (2, 1, argv1, env1, "/scratch/run 2", 60000, 1500));
  g_ptr_array_add (msg->u.tasks.tasks, task_argv (3, 0, argv2, NULL, NULL, 0, 0));
  g_ptr_array_add (msg->u.tasks.tasks, task_sh (128, 70000, "sleep 1; exit 3"));
  return msg;
}

static DatcMsg *
sample_tasks_edge (void)
{
  static const char *const argv1[] = { "a", NULL };
  static const char *const no_env[] = { NULL };
  DatcMsg *msg = datc_msg_new (DATC_MSG_TASKS);

  msg->u.tasks.session = G_MAXUINT32;
  g_ptr_array_add (msg->u.tasks.tasks, task_sh (G_MAXUINT64, G_MAXUINT32, ""));
  g_ptr_array_add (msg->u.tasks.tasks,
                   task_argv (0, 0, argv1, no_env, "", G_MAXUINT32, G_MAXUINT32));
  return msg;
}

static DatcMsg *
sample_tasks_empty (void)
{
  return datc_msg_new (DATC_MSG_TASKS);
}

static DatcMsg *
sample_result (void)
{
  static const char binary[] = { 'o', 'k', '\0', '\xff', '\xc3', '\n' };
  DatcMsg *msg = datc_msg_new (DATC_MSG_RESULT);
  GPtrArray *results = msg->u.results.results;

  g_ptr_array_add (results,
                   result_with_output (1, 0, DATC_STATUS_EXITED, 0, 0, "hello\n", 6, NULL));
  g_ptr_array_add (
      results, result_with_output (2, 1, DATC_STATUS_SIGNALED, -1, 9, binary, sizeof binary, NULL));
  g_ptr_array_add (results, result_with_output (3, 0, DATC_STATUS_SPAWN_FAILED, 127, 0, "", 0,
                                                "execvp ./sim: No such file"));
  DatcResult *r = result_with_output (4, 2, DATC_STATUS_TIMEOUT, 0, 15, "x", 1, "timed out");
  r->out_dropped = 1 << 20;
  r->err_dropped = 17;
  g_ptr_array_add (results, r);
  r = result_with_output (5, 0, DATC_STATUS_SIGNALED, 137, 9, "", 0, NULL);
  r->oom_evidence = g_strdup ("memory.oom_control oom_kill 0 -> 1 in /sys/fs/cgroup/memory/job");
  g_ptr_array_add (results, r);
  return msg;
}

static DatcMsg *
sample_result_edge (void)
{
  DatcMsg *msg = datc_msg_new (DATC_MSG_RESULT);
  DatcResult *r = datc_result_new (G_MAXUINT64, G_MAXUINT32);

  r->status = DATC_STATUS_LAST;
  r->exit_code = G_MININT32;
  r->signal = G_MAXINT32;
  r->started_us = G_MININT64;
  r->finished_us = G_MAXINT64;
  r->out = g_bytes_new (NULL, 0);
  r->err = g_bytes_new (NULL, 0);
  r->out_dropped = G_MAXUINT64;
  r->err_dropped = G_MAXUINT64;
  r->message = g_strdup ("");
  g_ptr_array_add (msg->u.results.results, r);

  r = datc_result_new (0, 0);
  r->status = DATC_STATUS_REFUSED;
  r->exit_code = G_MAXINT32;
  r->signal = G_MININT32;
  r->out = g_bytes_new (NULL, 0);
  r->err = g_bytes_new (NULL, 0);
  r->message = repeat ("m", DATC_REASON_MAX);
  g_ptr_array_add (msg->u.results.results, r);
  return msg;
}

static DatcMsg *
sample_result_empty (void)
{
  return datc_msg_new (DATC_MSG_RESULT);
}

static DatcMsg *
sample_ack (void)
{
  DatcMsg *msg = datc_msg_new (DATC_MSG_ACK);

  add_key (msg->u.keys, 1, 0);
  add_key (msg->u.keys, 2, 1);
  add_key (msg->u.keys, G_MAXUINT64, G_MAXUINT32);
  return msg;
}

static DatcMsg *
sample_ack_empty (void)
{
  return datc_msg_new (DATC_MSG_ACK);
}

static DatcMsg *
sample_heartbeat (void)
{
  DatcMsg *msg = datc_msg_new (DATC_MSG_HEARTBEAT);

  msg->u.heartbeat.epoch = 0;
  msg->u.heartbeat.session = 4;
  msg->u.heartbeat.received = 123456;
  msg->u.heartbeat.running = 16;
  msg->u.heartbeat.rehello = FALSE;
  return msg;
}

static DatcMsg *
sample_heartbeat_rehello (void)
{
  DatcMsg *msg = datc_msg_new (DATC_MSG_HEARTBEAT);

  msg->u.heartbeat.epoch = G_MAXUINT64;
  msg->u.heartbeat.session = G_MAXUINT32;
  msg->u.heartbeat.received = G_MAXUINT64;
  msg->u.heartbeat.running = G_MAXUINT32;
  msg->u.heartbeat.rehello = TRUE;
  return msg;
}

static DatcMsg *
sample_cancel (void)
{
  DatcMsg *msg = datc_msg_new (DATC_MSG_CANCEL);

  add_key (msg->u.keys, 77, 1);
  return msg;
}

static DatcMsg *
sample_retire (void)
{
  DatcMsg *msg = datc_msg_new (DATC_MSG_RETIRE);

  msg->u.reason = g_strdup ("walltime ends in 120 s");
  return msg;
}

static DatcMsg *
sample_bye (void)
{
  DatcMsg *msg = datc_msg_new (DATC_MSG_BYE);

  msg->u.reason = g_strdup ("bag empty — merci");
  return msg;
}

static DatcMsg *
sample_bye_edge (void)
{
  DatcMsg *msg = datc_msg_new (DATC_MSG_BYE);

  msg->u.reason = repeat ("r", DATC_REASON_MAX);
  return msg;
}

static DatcMsg *
sample_bye_empty (void)
{
  DatcMsg *msg = datc_msg_new (DATC_MSG_BYE);

  msg->u.reason = g_strdup ("");
  return msg;
}

typedef struct {
  const char *name;
  DatcMsg *(*make) (void);
} Sample;

static const Sample samples[] = {
  { "hello", sample_hello },
  { "hello-edge", sample_hello_edge },
  { "welcome", sample_welcome },
  { "welcome-edge", sample_welcome_edge },
  { "credit", sample_credit },
  { "credit-edge", sample_credit_edge },
  { "tasks", sample_tasks },
  { "tasks-edge", sample_tasks_edge },
  { "tasks-empty", sample_tasks_empty },
  { "result", sample_result },
  { "result-edge", sample_result_edge },
  { "result-empty", sample_result_empty },
  { "ack", sample_ack },
  { "ack-empty", sample_ack_empty },
  { "heartbeat", sample_heartbeat },
  { "heartbeat-rehello", sample_heartbeat_rehello },
  { "cancel", sample_cancel },
  { "retire", sample_retire },
  { "bye", sample_bye },
  { "bye-edge", sample_bye_edge },
  { "bye-empty", sample_bye_empty },
};

static void
test_round_trip (gconstpointer data)
{
  const Sample *sample = data;
  g_autoptr (DatcMsg) msg = sample->make ();

  assert_round_trips (msg);
}

/* ----------------------------------------------------------- encoding */

/* A result without OOM evidence is the version-1 shape (12 fields), so an
 * older master reads it; one with evidence has a 13th field. */
static void
test_result_oom_evidence_is_optional (void)
{
  g_autoptr (DatcMsg) msg = datc_msg_new (DATC_MSG_RESULT);
  g_ptr_array_add (msg->u.results.results,
                   result_with_output (1, 0, DATC_STATUS_SIGNALED, 137, 9, "", 0, NULL));
  g_autoptr (GByteArray) out = g_byte_array_new ();
  datc_msg_encode (msg, out);
  /* [1, 5, [[result]]]: the result's array header is the 6th byte */
  g_assert_cmpuint (out->len, >, 5);
  g_assert_cmphex (out->data[5], ==, 0x9c);

  DatcResult *r = g_ptr_array_index (msg->u.results.results, 0);
  r->oom_evidence = g_strdup ("dmesg: Killed process 42 (sim)");
  g_byte_array_set_size (out, 0);
  datc_msg_encode (msg, out);
  g_assert_cmphex (out->data[5], ==, 0x9d);
  g_autoptr (GError) error = NULL;
  g_autoptr (DatcMsg) back = datc_msg_decode (out->data, out->len, DATC_FRAME_MAX, &error);
  g_assert_no_error (error);
  assert_msg_equal (msg, back);
}

static void
test_every_type_has_a_sample (void)
{
  for (guint type = DATC_MSG_HELLO; type <= DATC_MSG_BYE; type++)
    {
      gboolean found = FALSE;
      for (guint i = 0; i < G_N_ELEMENTS (samples); i++)
        {
          g_autoptr (DatcMsg) msg = samples[i].make ();
          found = found || msg->type == type;
        }
      g_assert_true (found);
    }
}

static void
stream_tasks (const DatcTasks *tasks, gboolean lines_as_lines, GByteArray *out)
{
  datc_tasks_encode_begin (out, tasks->session, tasks->tasks->len);
  for (guint i = 0; i < tasks->tasks->len; i++)
    {
      const DatcTask *t = g_ptr_array_index (tasks->tasks, i);
      const DatcTaskSpec *s = &t->spec;
      gboolean plain = s->argv == NULL && s->env == NULL && s->cwd == NULL && s->timeout_ms == 0
                       && s->est_runtime_ms == 0;

      if (plain && lines_as_lines)
        {
          datc_tasks_encode_add_line (out, t->id, t->attempt, s->sh, strlen (s->sh));
          continue;
        }
      g_autoptr (GByteArray) spec = g_byte_array_new ();
      datc_task_spec_encode (s, spec);
      datc_tasks_encode_add_spec (out, t->id, t->attempt, spec->data, spec->len);
    }
}

static void
test_tasks_stream_matches_msg_encode (void)
{
  DatcMsg *(*makers[]) (void) = { sample_tasks, sample_tasks_edge, sample_tasks_empty };

  for (guint m = 0; m < G_N_ELEMENTS (makers); m++)
    {
      g_autoptr (DatcMsg) msg = makers[m]();
      g_autoptr (GBytes) expected = encode (msg);

      for (int lines = 0; lines <= 1; lines++)
        {
          /* Appends: whatever is in the buffer already stays. */
          g_autoptr (GByteArray) out = g_byte_array_new ();
          g_byte_array_append (out, (const guint8 *) "pre", 3);
          stream_tasks (&msg->u.tasks, lines, out);
          g_assert_cmpmem (out->data, 3, "pre", 3);
          g_assert_cmpmem (out->data + 3, out->len - 3, g_bytes_get_data (expected, NULL),
                           g_bytes_get_size (expected));
        }
    }
}

static void
test_tasks_stream_of_many_lines_decodes (void)
{
  g_autoptr (GByteArray) out = g_byte_array_new ();
  const guint n = 10000;

  datc_tasks_encode_begin (out, 9, n);
  for (guint i = 0; i < n; i++)
    {
      g_autofree char *line = g_strdup_printf ("./run --case %u", i);
      datc_tasks_encode_add_line (out, (guint64) i + 1, i % 3, line, strlen (line));
    }

  g_autoptr (GBytes) frame = g_bytes_new (out->data, out->len);
  g_autoptr (DatcMsg) msg = decode_ok (frame);
  g_assert_cmpuint (msg->u.tasks.session, ==, 9);
  g_assert_cmpuint (msg->u.tasks.tasks->len, ==, n);
  const DatcTask *last = g_ptr_array_index (msg->u.tasks.tasks, n - 1);
  g_assert_cmpuint (last->id, ==, n);
  g_assert_cmpuint (last->attempt, ==, (n - 1) % 3);
  g_assert_cmpstr (last->spec.sh, ==, "./run --case 9999");
  g_assert_null (last->spec.argv);
}

static void
test_null_fields_travel_as_empty (void)
{
  g_autoptr (DatcMsg) hello = datc_msg_new (DATC_MSG_HELLO);
  g_clear_pointer (&hello->u.hello.held, g_array_unref);
  g_autoptr (GBytes) hello_frame = encode (hello);
  g_autoptr (DatcMsg) hello2 = decode_ok (hello_frame);
  g_assert_cmpstr (hello2->u.hello.agent_id, ==, "");
  g_assert_cmpstr (hello2->u.hello.host, ==, "");
  g_assert_nonnull (hello2->u.hello.held);
  g_assert_cmpuint (hello2->u.hello.held->len, ==, 0);

  g_autoptr (DatcMsg) result = datc_msg_new (DATC_MSG_RESULT);
  g_ptr_array_add (result->u.results.results, datc_result_new (5, 1));
  g_autoptr (GBytes) result_frame = encode (result);
  g_autoptr (DatcMsg) result2 = decode_ok (result_frame);
  const DatcResult *r = g_ptr_array_index (result2->u.results.results, 0);
  g_assert_cmpuint (r->id, ==, 5);
  g_assert_nonnull (r->out);
  g_assert_nonnull (r->err);
  g_assert_cmpuint (g_bytes_get_size (r->out), ==, 0);
  g_assert_null (r->message);

  g_autoptr (DatcMsg) bye = datc_msg_new (DATC_MSG_BYE);
  g_autoptr (GBytes) bye_frame = encode (bye);
  g_autoptr (DatcMsg) bye2 = decode_ok (bye_frame);
  g_assert_cmpstr (bye2->u.reason, ==, "");

  /* Any non-zero gboolean is true on the wire. */
  g_autoptr (DatcMsg) hb = datc_msg_new (DATC_MSG_HEARTBEAT);
  hb->u.heartbeat.rehello = 2;
  g_autoptr (GBytes) hb_frame = encode (hb);
  g_autoptr (DatcMsg) hb2 = decode_ok (hb_frame);
  g_assert_true (hb2->u.heartbeat.rehello == TRUE);
}

static void
test_new_makes_empty_containers (void)
{
  for (guint type = DATC_MSG_HELLO; type <= DATC_MSG_BYE; type++)
    {
      g_autoptr (DatcMsg) msg = datc_msg_new (type);
      g_assert_cmpint (msg->type, ==, type);
      if (type == DATC_MSG_HELLO)
        g_assert_cmpuint (msg->u.hello.held->len, ==, 0);
      if (type == DATC_MSG_TASKS)
        g_assert_cmpuint (msg->u.tasks.tasks->len, ==, 0);
      if (type == DATC_MSG_RESULT)
        g_assert_cmpuint (msg->u.results.results->len, ==, 0);
      if (type == DATC_MSG_ACK || type == DATC_MSG_CANCEL)
        g_assert_cmpuint (msg->u.keys->len, ==, 0);
      g_autoptr (GBytes) frame = encode (msg);
      g_autoptr (DatcMsg) decoded = decode_ok (frame);
      g_assert_cmpint (decoded->type, ==, type);
    }
}

static void
test_free_accepts_null (void)
{
  datc_msg_free (NULL);
  datc_result_free (NULL);
  datc_task_free (NULL);
  datc_task_spec_clear (NULL);

  DatcTaskSpec spec = { 0 };
  spec.sh = g_strdup ("true");
  spec.timeout_ms = 5;
  datc_task_spec_clear (&spec);
  g_assert_null (spec.sh);
  g_assert_cmpuint (spec.timeout_ms, ==, 0);
}

static void
test_names (void)
{
  g_assert_cmpstr (datc_msg_type_name (DATC_MSG_HELLO), ==, "HELLO");
  g_assert_cmpstr (datc_msg_type_name (DATC_MSG_HEARTBEAT), ==, "HEARTBEAT");
  g_assert_cmpstr (datc_msg_type_name (DATC_MSG_BYE), ==, "BYE");
  g_assert_cmpstr (datc_msg_type_name (0), ==, "UNKNOWN");
  g_assert_cmpstr (datc_msg_type_name (11), ==, "UNKNOWN");
  g_assert_cmpstr (datc_task_status_name (DATC_STATUS_EXITED), ==, "exited");
  g_assert_cmpstr (datc_task_status_name (DATC_STATUS_SPAWN_FAILED), ==, "spawn-failed");
  g_assert_cmpstr (datc_task_status_name (DATC_STATUS_REFUSED), ==, "refused");
  g_assert_cmpstr (datc_task_status_name (DATC_STATUS_LAST + 1), ==, "unknown");
}

/* ------------------------------------------------ decoding: accepted */

#define LIT(s) g_bytes_new_static (s, sizeof (s) - 1)

/* The smallest valid frame of each type, written by hand: the malformed
 * table below is built from these, so they must decode. */
static const struct {
  DatcMsgType type;
  const char *bytes;
  gsize len;
} minimal[] = {
#define MIN_FRAME(t, s) { t, s, sizeof (s) - 1 }
  MIN_FRAME (DATC_MSG_HELLO,
             "\x93\x01\x01\x99\xa1\x61\xa1\x73\xa1\x70\xa1\x68\x01\x01\x00\x00\x90"),
  MIN_FRAME (DATC_MSG_WELCOME, "\x93\x01\x02\x94\x00\x00\x00\x00"),
  MIN_FRAME (DATC_MSG_CREDIT, "\x93\x01\x03\x92\x00\x00"),
  MIN_FRAME (DATC_MSG_TASKS,
             "\x93\x01\x04\x92\x00\x91\x93\x01\x01\x96\xc0\xa1\x78\xc0\xc0\x00\x00"),
  MIN_FRAME (DATC_MSG_RESULT,
             "\x93\x01\x05\x91\x91\x9c\x01\x01\x00\x00\x00\x00\x00\xc4\x00\xc4\x00\x00\x00\xc0"),
  MIN_FRAME (DATC_MSG_ACK, "\x93\x01\x06\x91\x91\x92\x01\x01"),
  MIN_FRAME (DATC_MSG_HEARTBEAT, "\x93\x01\x07\x95\x00\x00\x00\x00\xc2"),
  MIN_FRAME (DATC_MSG_CANCEL, "\x93\x01\x08\x91\x90"),
  MIN_FRAME (DATC_MSG_RETIRE, "\x93\x01\x09\x91\xa0"),
  MIN_FRAME (DATC_MSG_BYE, "\x93\x01\x0a\x91\xa0"),
#undef MIN_FRAME
};

static void
test_accepts_minimal_frames (void)
{
  for (guint i = 0; i < G_N_ELEMENTS (minimal); i++)
    {
      g_autoptr (GBytes) frame = g_bytes_new_static (minimal[i].bytes, minimal[i].len);
      g_autoptr (DatcMsg) msg = decode_ok (frame);
      g_assert_cmpint (msg->type, ==, minimal[i].type);
      /* They are canonical too. */
      g_autoptr (GBytes) again = encode (msg);
      g_assert_true (g_bytes_equal (frame, again));
    }
}

static void
test_accepts_any_integer_encoding_in_range (void)
{
  /* CREDIT session as int64, limit as int8: both non-negative. */
  g_autoptr (GBytes) credit = LIT ("\x93\x01\x03\x92\xd3\x00\x00\x00\x00\x00\x00\x00\x05\xd0\x07");
  g_autoptr (DatcMsg) c = decode_ok (credit);
  g_assert_cmpuint (c->u.credit.session, ==, 5);
  g_assert_cmpuint (c->u.credit.limit, ==, 7);

  /* RESULT exit_code as uint64, signal as int16, started_us as uint64 at
   * INT64_MAX, finished_us as int64 negative, id as uint8 in a uint16. */
  g_autoptr (GBytes) result = LIT ("\x93\x01\x05\x91\x91\x9c\xcd\x00\x01\x01\x00"
                                   "\xcf\x00\x00\x00\x00\x00\x00\x00\x7f"
                                   "\xd1\x00\x09"
                                   "\xcf\x7f\xff\xff\xff\xff\xff\xff\xff"
                                   "\xd3\xff\xff\xff\xff\xff\xff\xff\xfe"
                                   "\xc4\x00\xc4\x00\x00\x00\xc0");
  g_autoptr (DatcMsg) r = decode_ok (result);
  const DatcResult *row = g_ptr_array_index (r->u.results.results, 0);
  g_assert_cmpuint (row->id, ==, 1);
  g_assert_cmpint (row->exit_code, ==, 127);
  g_assert_cmpint (row->signal, ==, 9);
  g_assert_cmpint (row->started_us, ==, G_MAXINT64);
  g_assert_cmpint (row->finished_us, ==, -2);

  /* Wide headers for small things: array16, str8, bin16, map16. */
  g_autoptr (GBytes) tasks = LIT ("\x93\x01\x04\xdc\x00\x02\x00\x91\x93\x01\x01"
                                  "\x96\xc0\xd9\x01\x78\xde\x00\x01\xa1\x4b\xa1\x56\xc0\x00\x00");
  g_autoptr (DatcMsg) t = decode_ok (tasks);
  const DatcTask *task = g_ptr_array_index (t->u.tasks.tasks, 0);
  g_assert_cmpstr (task->spec.sh, ==, "x");
  g_assert_cmpstr (task->spec.env[0], ==, "K=V");
  g_assert_null (task->spec.env[1]);

  g_autoptr (GBytes) bin16 = LIT ("\x93\x01\x05\x91\x91\x9c\x01\x01\x00\x00\x00\x00\x00"
                                  "\xc5\x00\x02\x00\xff\xc4\x00\x00\x00\xc0");
  g_autoptr (DatcMsg) b = decode_ok (bin16);
  row = g_ptr_array_index (b->u.results.results, 0);
  g_assert_cmpmem (g_bytes_get_data (row->out, NULL), g_bytes_get_size (row->out), "\0\xff", 2);
}

/* A few builders for frames too big to write out. */

typedef void (*PackFunc) (msgpack_packer *pk);

static GBytes *
pack_with (PackFunc fn)
{
  msgpack_sbuffer sbuf;
  msgpack_packer pk;

  msgpack_sbuffer_init (&sbuf);
  msgpack_packer_init (&pk, &sbuf, msgpack_sbuffer_write);
  fn (&pk);
  GBytes *frame = g_bytes_new (sbuf.data, sbuf.size);
  msgpack_sbuffer_destroy (&sbuf);
  return frame;
}

static void
pack_header (msgpack_packer *pk, DatcMsgType type)
{
  msgpack_pack_array (pk, 3);
  msgpack_pack_uint8 (pk, DATC_PROTOCOL_VERSION);
  msgpack_pack_uint8 (pk, type);
}

static void
pack_filled_str (msgpack_packer *pk, char c, gsize n)
{
  g_autofree char *s = g_malloc (n + 1);

  memset (s, c, n);
  msgpack_pack_str_with_body (pk, s, n);
}

static void
pack_filled_bin (msgpack_packer *pk, gsize n)
{
  g_autofree guint8 *b = g_malloc0 (n + 1);

  msgpack_pack_bin_with_body (pk, b, n);
}

static void
pack_hello (msgpack_packer *pk, gsize name_len, guint held, guint64 held_id)
{
  pack_header (pk, DATC_MSG_HELLO);
  msgpack_pack_array (pk, 9);
  pack_filled_str (pk, 'a', name_len);
  msgpack_pack_str_with_body (pk, "s", 1);
  msgpack_pack_str_with_body (pk, "p", 1);
  msgpack_pack_str_with_body (pk, "h", 1);
  msgpack_pack_uint32 (pk, 1);
  msgpack_pack_uint32 (pk, 1);
  msgpack_pack_int64 (pk, 0);
  msgpack_pack_uint32 (pk, 0);
  msgpack_pack_array (pk, held);
  for (guint i = 0; i < held; i++)
    {
      msgpack_pack_array (pk, 2);
      msgpack_pack_uint64 (pk, held_id);
      msgpack_pack_uint32 (pk, 0);
    }
}

static void
pack_keys (msgpack_packer *pk, guint n)
{
  pack_header (pk, DATC_MSG_ACK);
  msgpack_pack_array (pk, 1);
  msgpack_pack_array (pk, n);
  for (guint i = 0; i < n; i++)
    {
      msgpack_pack_array (pk, 2);
      msgpack_pack_uint32 (pk, i);
      msgpack_pack_uint32 (pk, 0);
    }
}

static void
pack_reason (msgpack_packer *pk, DatcMsgType type, gsize len)
{
  pack_header (pk, type);
  msgpack_pack_array (pk, 1);
  pack_filled_str (pk, 'r', len);
}

static void
pack_result (msgpack_packer *pk, guint n, gsize out_len, gsize err_len, gsize message_len)
{
  pack_header (pk, DATC_MSG_RESULT);
  msgpack_pack_array (pk, 1);
  msgpack_pack_array (pk, n);
  for (guint i = 0; i < n; i++)
    {
      msgpack_pack_array (pk, 12);
      msgpack_pack_uint32 (pk, i);
      for (guint j = 0; j < 6; j++)
        msgpack_pack_uint32 (pk, 0);
      pack_filled_bin (pk, out_len);
      pack_filled_bin (pk, err_len);
      msgpack_pack_uint32 (pk, 0);
      msgpack_pack_uint32 (pk, 0);
      if (message_len > 0)
        pack_filled_str (pk, 'm', message_len);
      else
        msgpack_pack_nil (pk);
    }
}

/* One TASKS frame of `n` tasks; the first has `argc` argv items (sh when 0),
 * `envc` env entries and a cwd of `cwd_len` bytes. */
static void
pack_tasks (msgpack_packer *pk, guint n, guint argc, guint envc, gsize cwd_len)
{
  pack_header (pk, DATC_MSG_TASKS);
  msgpack_pack_array (pk, 2);
  msgpack_pack_uint32 (pk, 1);
  msgpack_pack_array (pk, n);
  for (guint i = 0; i < n; i++)
    {
      msgpack_pack_array (pk, 3);
      msgpack_pack_uint32 (pk, i + 1);
      msgpack_pack_uint32 (pk, 0);
      msgpack_pack_array (pk, 6);
      if (i == 0 && argc > 0)
        {
          msgpack_pack_array (pk, argc);
          for (guint a = 0; a < argc; a++)
            msgpack_pack_str_with_body (pk, "x", 1);
          msgpack_pack_nil (pk);
        }
      else
        {
          msgpack_pack_nil (pk);
          msgpack_pack_str_with_body (pk, "x", 1);
        }
      if (i == 0 && envc > 0)
        {
          msgpack_pack_map (pk, envc);
          for (guint e = 0; e < envc; e++)
            {
              char key[16];
              g_snprintf (key, sizeof key, "K%u", e);
              msgpack_pack_str_with_body (pk, key, strlen (key));
              msgpack_pack_str_with_body (pk, "v", 1);
            }
        }
      else
        msgpack_pack_nil (pk);
      if (i == 0 && cwd_len > 0)
        pack_filled_str (pk, '/', cwd_len);
      else
        msgpack_pack_nil (pk);
      msgpack_pack_uint32 (pk, 0);
      msgpack_pack_uint32 (pk, 0);
    }
}

static void
build_hello_at_name_limit (msgpack_packer *pk)
{
  pack_hello (pk, DATC_NAME_MAX, DATC_BATCH_MAX, 1);
}
static void
build_keys_at_batch_limit (msgpack_packer *pk)
{
  pack_keys (pk, DATC_BATCH_MAX);
}
static void
build_reason_at_limit (msgpack_packer *pk)
{
  pack_reason (pk, DATC_MSG_RETIRE, DATC_REASON_MAX);
}
static void
build_result_at_output_limit (msgpack_packer *pk)
{
  pack_result (pk, 1, DATC_OUTPUT_MAX, DATC_OUTPUT_MAX, DATC_REASON_MAX);
}
static void
build_results_at_batch_limit (msgpack_packer *pk)
{
  pack_result (pk, DATC_BATCH_MAX, 0, 0, 0);
}
static void
build_tasks_at_argv_env_string_limit (msgpack_packer *pk)
{
  pack_tasks (pk, 2, DATC_ARGV_MAX, DATC_ENV_MAX, DATC_STRING_MAX);
}
static void
build_tasks_at_batch_limit (msgpack_packer *pk)
{
  pack_tasks (pk, DATC_BATCH_MAX, 0, 0, 0);
}
static void
build_elements_at_limit (msgpack_packer *pk)
{
  msgpack_pack_array (pk, DATC_ELEMENTS_MAX);
  for (guint i = 0; i < DATC_ELEMENTS_MAX; i++)
    msgpack_pack_nil (pk);
}

static void
test_accepts_values_at_every_limit (void)
{
  struct {
    PackFunc build;
    DatcMsgType type;
  } at_limit[] = {
    { build_hello_at_name_limit, DATC_MSG_HELLO },
    { build_keys_at_batch_limit, DATC_MSG_ACK },
    { build_reason_at_limit, DATC_MSG_RETIRE },
    { build_result_at_output_limit, DATC_MSG_RESULT },
    { build_results_at_batch_limit, DATC_MSG_RESULT },
    { build_tasks_at_argv_env_string_limit, DATC_MSG_TASKS },
    { build_tasks_at_batch_limit, DATC_MSG_TASKS },
  };

  for (guint i = 0; i < G_N_ELEMENTS (at_limit); i++)
    {
      g_autoptr (GBytes) frame = pack_with (at_limit[i].build);
      g_autoptr (DatcMsg) msg = decode_ok (frame);
      g_assert_cmpint (msg->type, ==, at_limit[i].type);
      g_autoptr (GBytes) again = encode (msg);
      g_assert_true (g_bytes_equal (frame, again));
    }

  /* Exactly DATC_ELEMENTS_MAX declared elements pass the pre-scan: the
   * frame is then refused for what it is (nil is no version), not for size. */
  g_autoptr (GBytes) elements = pack_with (build_elements_at_limit);
  g_autoptr (GError) error = NULL;
  g_autoptr (DatcMsg) none = decode_bytes (elements, DATC_FRAME_MAX, &error);
  g_assert_null (none);
  g_assert_error (error, DATC_WIRE_ERROR, DATC_WIRE_ERROR_VERSION);
}

static void
test_hello_fits_the_hello_cap (void)
{
  g_autoptr (DatcMsg) msg = sample_hello ();
  g_autoptr (GBytes) frame = encode (msg);
  g_autoptr (GError) error = NULL;
  g_autoptr (DatcMsg) decoded = decode_bytes (frame, DATC_HELLO_FRAME_MAX, &error);

  g_assert_no_error (error);
  assert_msg_equal (msg, decoded);
}

/* ------------------------------------------------ decoding: refused */

static void
build_depth_bomb (msgpack_packer *pk)
{
  for (guint i = 0; i < 1000; i++)
    msgpack_pack_array (pk, 1);
  msgpack_pack_nil (pk);
}
static void
build_str_over_limit (msgpack_packer *pk)
{
  pack_tasks (pk, 1, 0, 0, DATC_STRING_MAX + 1);
}
static void
build_bin_over_limit (msgpack_packer *pk)
{
  pack_result (pk, 1, DATC_OUTPUT_MAX + 1, 0, 0);
}
static void
build_elements_over_limit (msgpack_packer *pk)
{
  msgpack_pack_array (pk, DATC_ELEMENTS_MAX + 1);
  for (guint i = 0; i < DATC_ELEMENTS_MAX + 1; i++)
    msgpack_pack_nil (pk);
}
static void
build_name_over_limit (msgpack_packer *pk)
{
  pack_hello (pk, DATC_NAME_MAX + 1, 0, 0);
}
static void
build_held_over_batch (msgpack_packer *pk)
{
  pack_hello (pk, 1, DATC_BATCH_MAX + 1, 1);
}
static void
build_hello_over_hello_cap (msgpack_packer *pk)
{
  /* ~19 bytes per held key of the largest ids: past the 2 MiB cap. */
  pack_hello (pk, 1, 300000, G_MAXUINT64);
}
static void
build_reason_over_limit (msgpack_packer *pk)
{
  pack_reason (pk, DATC_MSG_BYE, DATC_REASON_MAX + 1);
}
static void
build_message_over_limit (msgpack_packer *pk)
{
  pack_result (pk, 1, 0, 0, DATC_REASON_MAX + 1);
}
static void
build_keys_over_batch (msgpack_packer *pk)
{
  pack_keys (pk, DATC_BATCH_MAX + 1);
}
static void
build_tasks_over_batch (msgpack_packer *pk)
{
  pack_tasks (pk, DATC_BATCH_MAX + 1, 0, 0, 0);
}
static void
build_results_over_batch (msgpack_packer *pk)
{
  pack_result (pk, DATC_BATCH_MAX + 1, 0, 0, 0);
}
static void
build_argv_over_limit (msgpack_packer *pk)
{
  pack_tasks (pk, 1, DATC_ARGV_MAX + 1, 0, 0);
}
static void
build_env_over_limit (msgpack_packer *pk)
{
  pack_tasks (pk, 1, 0, DATC_ENV_MAX + 1, 0);
}

typedef struct {
  const char *name;  /* the test is /wire/decode/rejects-NAME */
  const char *bytes; /* hand-built frame ... */
  gsize len;
  PackFunc build; /* ... or one too big to write out */
  gsize max_size; /* 0: DATC_FRAME_MAX */
  DatcWireError code;
  const char *reason; /* a substring of the message */
} BadFrame;

#define BYTES(s) .bytes = (s), .len = sizeof (s) - 1

/* Pieces of the minimal frames above. */
#define HELLO_NAMES "\xa1\x61\xa1\x73\xa1\x70\xa1\x68"
#define TASK_HEAD "\x93\x01\x04\x92\x00\x91\x93\x01\x01" /* up to the spec */
#define RESULT_HEAD "\x93\x01\x05\x91\x91\x9c\x01\x01"   /* up to status */
#define RESULT_REST "\xc4\x00\xc4\x00\x00\x00\xc0"       /* stdout .. message */
#define UINT64_2_32 "\xcf\x00\x00\x00\x01\x00\x00\x00\x00"

static const BadFrame bad_frames[] = {
  /* 1. size cap */
  { "empty-frame", BYTES (""), .code = DATC_WIRE_ERROR_MALFORMED, .reason = "empty frame" },
  { "frame-over-the-cap", BYTES ("\x93\x01\x0a\x91\xa0"), .max_size = 4,
    .code = DATC_WIRE_ERROR_TOO_BIG, .reason = "5 bytes is over the cap of 4" },
  { "hello-over-the-hello-cap", .build = build_hello_over_hello_cap,
    .max_size = DATC_HELLO_FRAME_MAX, .code = DATC_WIRE_ERROR_TOO_BIG,
    .reason = "over the cap of 2097152" },

  /* 2. pre-scan */
  { "byte-0xc1", BYTES ("\xc1"), .code = DATC_WIRE_ERROR_MALFORMED, .reason = "0xc1" },
  { "truncated-header", BYTES ("\x93\x01\xcd\x00"), .code = DATC_WIRE_ERROR_MALFORMED,
    .reason = "truncated inside a number" },
  { "truncated-length", BYTES ("\x93\x01\x0a\x91\xdb\x00\x00"), .code = DATC_WIRE_ERROR_MALFORMED,
    .reason = "truncated inside a header" },
  { "truncated-frame", BYTES ("\x93\x01\x0a\x91"), .code = DATC_WIRE_ERROR_MALFORMED,
    .reason = "at byte 3: array declares 1 elements, only 0 bytes follow" },
  { "missing-sibling", BYTES ("\x93\x01\x06\x91\x92\x92\x01\x01"),
    .code = DATC_WIRE_ERROR_MALFORMED, .reason = "truncated" },
  { "huge-array-count-in-tiny-frame", BYTES ("\xdd\xff\xff\xff\xff\x01\x0a\x91\xa0\x00"),
    .code = DATC_WIRE_ERROR_MALFORMED,
    .reason = "at byte 0: array declares 4294967295 elements, only 5 bytes follow" },
  { "huge-map-count-in-tiny-frame", BYTES ("\xdf\xff\xff\xff\xff\xc0\xc0"),
    .code = DATC_WIRE_ERROR_MALFORMED, .reason = "map declares 4294967295 pairs" },
  { "map-count-past-end-in-spec",
    BYTES (TASK_HEAD "\x96\xc0\xa1\x78\xdf\x00\x01\x00\x00\xc0\x00\x00"),
    .code = DATC_WIRE_ERROR_MALFORMED, .reason = "map declares 65536 pairs" },
  { "array16-count-past-end", BYTES ("\x93\x01\x06\x91\xdc\xff\xff\x90"),
    .code = DATC_WIRE_ERROR_MALFORMED, .reason = "array declares 65535 elements" },
  { "declared-length-past-end", BYTES ("\x93\x01\x0a\x91\xdb\xff\xff\xff\xff\x61"),
    .code = DATC_WIRE_ERROR_MALFORMED, .reason = "str declares 4294967295 bytes, only 1" },
  { "declared-str16-past-end", BYTES ("\x93\x01\x0a\x91\xda\x01\x00\x61"),
    .code = DATC_WIRE_ERROR_MALFORMED, .reason = "str declares 256 bytes" },
  { "declared-fixstr-past-end", BYTES ("\x93\x01\x0a\x91\xbf\x61"),
    .code = DATC_WIRE_ERROR_MALFORMED, .reason = "str declares 31 bytes" },
  { "declared-bin-past-end", BYTES (RESULT_HEAD "\x00\x00\x00\x00\x00\xc6\x7f\xff\xff\xff"),
    .code = DATC_WIRE_ERROR_MALFORMED, .reason = "bin declares 2147483647 bytes" },
  { "depth-bomb", BYTES ("\x91\x91\x91\x91\x91\x91\x91\xc0"), .code = DATC_WIRE_ERROR_LIMIT,
    .reason = "at byte 6: containers nested deeper than 6" },
  { "deep-depth-bomb", .build = build_depth_bomb, .code = DATC_WIRE_ERROR_LIMIT,
    .reason = "nested deeper than 6" },
  { "argv-item-nested-too-deep", BYTES (TASK_HEAD "\x96\x91\x91\xa0\xc0\xc0\xc0\x00\x00"),
    .code = DATC_WIRE_ERROR_LIMIT, .reason = "nested deeper" },
  { "too-many-declared-elements", .build = build_elements_over_limit, .code = DATC_WIRE_ERROR_LIMIT,
    .reason = "more than 1048576 declared elements" },
  { "str-over-the-string-limit", .build = build_str_over_limit, .code = DATC_WIRE_ERROR_LIMIT,
    .reason = "str of 1048577 bytes, over the limit" },
  { "bin-over-the-output-limit", .build = build_bin_over_limit, .code = DATC_WIRE_ERROR_LIMIT,
    .reason = "bin of 3145729 bytes, over the limit" },
  { "trailing-bytes", BYTES ("\x93\x01\x0a\x91\xa0\xc0"), .code = DATC_WIRE_ERROR_MALFORMED,
    .reason = "at byte 5: 1 trailing bytes" },
  { "two-messages-in-one-frame", BYTES ("\x93\x01\x0a\x91\xa0\x93\x01\x0a\x91\xa0"),
    .code = DATC_WIRE_ERROR_MALFORMED, .reason = "5 trailing bytes" },
  { "ext-type", BYTES ("\xd4\x01\x00"), .code = DATC_WIRE_ERROR_MALFORMED, .reason = "ext types" },
  { "ext-in-body", BYTES ("\x93\x01\x0a\x91\xc7\x01\x05\x00"), .code = DATC_WIRE_ERROR_MALFORMED,
    .reason = "at byte 4: msgpack ext types" },

  /* frame: [version, type, body] */
  { "frame-not-an-array", BYTES ("\xc0"), .code = DATC_WIRE_ERROR_MALFORMED,
    .reason = "expected a [version, type, body] array, got nil" },
  { "frame-empty-array", BYTES ("\x90"), .code = DATC_WIRE_ERROR_MALFORMED,
    .reason = "got an empty array" },
  { "frame-of-two", BYTES ("\x92\x01\x0a"), .code = DATC_WIRE_ERROR_MALFORMED,
    .reason = "frame has 2 elements, expected 3" },
  { "frame-of-four", BYTES ("\x94\x01\x0a\x91\xa0\xc0"), .code = DATC_WIRE_ERROR_MALFORMED,
    .reason = "frame has 4 elements" },
  { "version-2", BYTES ("\x93\x02\x0a\x91\xa0"), .code = DATC_WIRE_ERROR_VERSION,
    .reason = "version 2 is not spoken here (this side speaks 1)" },
  { "version-0", BYTES ("\x93\x00\x0a\x91\xa0"), .code = DATC_WIRE_ERROR_VERSION,
    .reason = "version 0" },
  { "version-huge", BYTES ("\x93\xcf\xff\xff\xff\xff\xff\xff\xff\xff\x0a\x91\xa0"),
    .code = DATC_WIRE_ERROR_VERSION, .reason = "version 18446744073709551615" },
  { "version-negative", BYTES ("\x93\xff\x0a\x91\xa0"), .code = DATC_WIRE_ERROR_VERSION,
    .reason = "version -1" },
  { "version-not-an-integer", BYTES ("\x93\xa1\x31\x0a\x91\xa0"), .code = DATC_WIRE_ERROR_VERSION,
    .reason = "version: expected uint, got str" },
  { "version-2-before-arity", BYTES ("\x92\x02\x00"), .code = DATC_WIRE_ERROR_VERSION,
    .reason = "version 2" },
  { "unknown-type", BYTES ("\x93\x01\x0b\x91\xa0"), .code = DATC_WIRE_ERROR_TYPE,
    .reason = "unknown message type 11" },
  { "type-0", BYTES ("\x93\x01\x00\x91\xa0"), .code = DATC_WIRE_ERROR_TYPE,
    .reason = "unknown message type 0" },
  { "type-huge", BYTES ("\x93\x01\xcf\x00\x00\x00\x01\x00\x00\x00\x01\x91\xa0"),
    .code = DATC_WIRE_ERROR_TYPE, .reason = "unknown message type 4294967297" },
  { "type-negative", BYTES ("\x93\x01\xf6\x91\xa0"), .code = DATC_WIRE_ERROR_TYPE,
    .reason = "unknown message type -10" },
  { "type-not-an-integer", BYTES ("\x93\x01\xc3\x91\xa0"), .code = DATC_WIRE_ERROR_TYPE,
    .reason = "message type: expected uint, got bool" },
  { "body-not-an-array", BYTES ("\x93\x01\x0a\x81\xa0\xa0"), .code = DATC_WIRE_ERROR_SHAPE,
    .reason = "BYE: expected array, got map" },

  /* wrong arity, per type and per nested record */
  { "hello-of-8-fields", BYTES ("\x93\x01\x01\x98" HELLO_NAMES "\x01\x01\x00\x00"),
    .code = DATC_WIRE_ERROR_SHAPE, .reason = "HELLO: expected 9 fields, got 8" },
  { "welcome-of-3-fields", BYTES ("\x93\x01\x02\x93\x00\x00\x00"), .code = DATC_WIRE_ERROR_SHAPE,
    .reason = "WELCOME: expected 4 fields, got 3" },
  { "credit-of-3-fields", BYTES ("\x93\x01\x03\x93\x00\x00\x00"), .code = DATC_WIRE_ERROR_SHAPE,
    .reason = "CREDIT: expected 2 fields, got 3" },
  { "tasks-of-1-field", BYTES ("\x93\x01\x04\x91\x00"), .code = DATC_WIRE_ERROR_SHAPE,
    .reason = "TASKS: expected 2 fields, got 1" },
  { "result-of-0-fields", BYTES ("\x93\x01\x05\x90"), .code = DATC_WIRE_ERROR_SHAPE,
    .reason = "RESULT: expected 1 field, got 0" },
  { "ack-of-2-fields", BYTES ("\x93\x01\x06\x92\x90\x90"), .code = DATC_WIRE_ERROR_SHAPE,
    .reason = "ACK: expected 1 field, got 2" },
  { "heartbeat-of-4-fields", BYTES ("\x93\x01\x07\x94\x00\x00\x00\x00"),
    .code = DATC_WIRE_ERROR_SHAPE, .reason = "HEARTBEAT: expected 5 fields, got 4" },
  { "cancel-of-0-fields", BYTES ("\x93\x01\x08\x90"), .code = DATC_WIRE_ERROR_SHAPE,
    .reason = "CANCEL: expected 1 field, got 0" },
  { "retire-of-2-fields", BYTES ("\x93\x01\x09\x92\xa0\xa0"), .code = DATC_WIRE_ERROR_SHAPE,
    .reason = "RETIRE: expected 1 field, got 2" },
  { "bye-of-0-fields", BYTES ("\x93\x01\x0a\x90"), .code = DATC_WIRE_ERROR_SHAPE,
    .reason = "BYE: expected 1 field, got 0" },
  { "task-of-2-fields", BYTES ("\x93\x01\x04\x92\x00\x91\x92\x01\x01"),
    .code = DATC_WIRE_ERROR_SHAPE, .reason = "TASKS: task 0: expected 3 fields, got 2" },
  { "spec-of-5-fields", BYTES (TASK_HEAD "\x95\xc0\xa1\x78\xc0\xc0\x00"),
    .code = DATC_WIRE_ERROR_SHAPE,
    .reason = "TASKS: task 0: field spec: expected 6 fields, got 5" },
  { "result-of-11-fields",
    BYTES ("\x93\x01\x05\x91\x91\x9b\x01\x01\x00\x00\x00\x00\x00"
           "\xc4\x00\xc4\x00\x00\x00"),
    .code = DATC_WIRE_ERROR_SHAPE, .reason = "RESULT: result 0: expected 12 to 13 fields, got 11" },
  { "result-of-14-fields",
    BYTES ("\x93\x01\x05\x91\x91\x9e\x01\x01\x00\x00\x00\x00\x00"
           "\xc4\x00\xc4\x00\x00\x00\xc0\xc0\xc0"),
    .code = DATC_WIRE_ERROR_SHAPE, .reason = "RESULT: result 0: expected 12 to 13 fields, got 14" },
  { "result-oom-evidence-int",
    BYTES ("\x93\x01\x05\x91\x91\x9d\x01\x01\x00\x00\x00\x00\x00"
           "\xc4\x00\xc4\x00\x00\x00\xc0\x07"),
    .code = DATC_WIRE_ERROR_SHAPE, .reason = "field oom_evidence: expected str or nil, got uint" },
  { "key-of-1-field", BYTES ("\x93\x01\x06\x91\x91\x91\x01"), .code = DATC_WIRE_ERROR_SHAPE,
    .reason = "ACK: key 0: expected 2 fields, got 1" },

  /* wrong field types */
  { "credit-session-str", BYTES ("\x93\x01\x03\x92\xa1\x31\x00"), .code = DATC_WIRE_ERROR_SHAPE,
    .reason = "CREDIT: field session: expected uint, got str" },
  { "result-stdout-str",
    BYTES ("\x93\x01\x05\x91\x92\x9c\x01\x01\x00\x00\x00\x00\x00" RESULT_REST
           "\x9c\x02\x01\x00\x00\x00\x00\x00\xa0\xc4\x00\x00\x00\xc0"),
    .code = DATC_WIRE_ERROR_SHAPE,
    .reason = "RESULT: result 1: field stdout: expected bin, got str" },
  { "result-message-int", BYTES (RESULT_HEAD "\x00\x00\x00\x00\x00\xc4\x00\xc4\x00\x00\x00\x05"),
    .code = DATC_WIRE_ERROR_SHAPE, .reason = "field message: expected str or nil, got uint" },
  { "result-exit-code-bool", BYTES (RESULT_HEAD "\x00\xc3\x00\x00\x00" RESULT_REST),
    .code = DATC_WIRE_ERROR_SHAPE, .reason = "field exit_code: expected int, got bool" },
  { "results-not-an-array", BYTES ("\x93\x01\x05\x91\xc0"), .code = DATC_WIRE_ERROR_SHAPE,
    .reason = "RESULT: field results: expected array, got nil" },
  { "result-not-an-array", BYTES ("\x93\x01\x05\x91\x91\x01"), .code = DATC_WIRE_ERROR_SHAPE,
    .reason = "RESULT: result 0: expected array, got uint" },
  { "heartbeat-rehello-int", BYTES ("\x93\x01\x07\x95\x00\x00\x00\x00\x01"),
    .code = DATC_WIRE_ERROR_SHAPE, .reason = "HEARTBEAT: field rehello: expected bool, got uint" },
  { "welcome-epoch-float",
    BYTES ("\x93\x01\x02\x94\xcb\x3f\xf0\x00\x00\x00\x00\x00\x00\x00\x00\x00"),
    .code = DATC_WIRE_ERROR_SHAPE, .reason = "WELCOME: field epoch: expected uint, got float" },
  { "hello-walltime-float",
    BYTES ("\x93\x01\x01\x99" HELLO_NAMES "\x01\x01\xca\x00\x00\x00\x00\x00\x90"),
    .code = DATC_WIRE_ERROR_SHAPE, .reason = "field walltime_end_us: expected int, got float" },
  { "hello-agent-id-nil",
    BYTES ("\x93\x01\x01\x99\xc0\xa1\x73\xa1\x70\xa1\x68\x01\x01\x00\x00\x90"),
    .code = DATC_WIRE_ERROR_SHAPE, .reason = "HELLO: field agent_id: expected str, got nil" },
  { "hello-held-map", BYTES ("\x93\x01\x01\x99" HELLO_NAMES "\x01\x01\x00\x00\x80"),
    .code = DATC_WIRE_ERROR_SHAPE, .reason = "HELLO: field held: expected array, got map" },
  { "cancel-keys-str", BYTES ("\x93\x01\x08\x91\xa0"), .code = DATC_WIRE_ERROR_SHAPE,
    .reason = "CANCEL: field keys: expected array, got str" },
  { "ack-third-key-attempt-str", BYTES ("\x93\x01\x06\x91\x93\x92\x01\x01\x92\x02\x01\x92\x03\xa0"),
    .code = DATC_WIRE_ERROR_SHAPE, .reason = "ACK: key 2: field attempt: expected uint, got str" },
  { "tasks-not-an-array", BYTES ("\x93\x01\x04\x92\x00\x80"), .code = DATC_WIRE_ERROR_SHAPE,
    .reason = "TASKS: field tasks: expected array, got map" },
  { "task-id-str",
    BYTES ("\x93\x01\x04\x92\x00\x91\x93\xa1\x31\x01\x96\xc0\xa1\x78\xc0\xc0\x00\x00"),
    .code = DATC_WIRE_ERROR_SHAPE, .reason = "TASKS: task 0: field id: expected uint, got str" },
  { "spec-nil", BYTES (TASK_HEAD "\xc0"), .code = DATC_WIRE_ERROR_SHAPE,
    .reason = "task 0: field spec: expected array, got nil" },
  { "argv-not-an-array", BYTES (TASK_HEAD "\x96\xa1\x78\xc0\xc0\xc0\x00\x00"),
    .code = DATC_WIRE_ERROR_SHAPE, .reason = "field argv: expected array or nil, got str" },
  { "argv-item-int", BYTES (TASK_HEAD "\x96\x91\x01\xc0\xc0\xc0\x00\x00"),
    .code = DATC_WIRE_ERROR_SHAPE, .reason = "field argv: item 0: expected str, got uint" },
  { "cwd-int", BYTES (TASK_HEAD "\x96\xc0\xa1\x78\xc0\x07\x00\x00"), .code = DATC_WIRE_ERROR_SHAPE,
    .reason = "field cwd: expected str or nil, got uint" },
  { "env-not-a-map", BYTES (TASK_HEAD "\x96\xc0\xa1\x78\x90\xc0\x00\x00"),
    .code = DATC_WIRE_ERROR_SHAPE, .reason = "field env: expected map or nil, got array" },
  { "env-key-int", BYTES (TASK_HEAD "\x96\xc0\xa1\x78\x81\x01\xa1\x76\xc0\x00\x00"),
    .code = DATC_WIRE_ERROR_SHAPE, .reason = "field env: entry 0: key: expected str, got uint" },
  { "env-value-int", BYTES (TASK_HEAD "\x96\xc0\xa1\x78\x81\xa1\x41\x05\xc0\x00\x00"),
    .code = DATC_WIRE_ERROR_SHAPE, .reason = "field env: entry 0: value: expected str, got uint" },
  { "bye-reason-bin", BYTES ("\x93\x01\x0a\x91\xc4\x01\x61"), .code = DATC_WIRE_ERROR_SHAPE,
    .reason = "BYE: field reason: expected str, got bin" },
  { "retire-reason-nil", BYTES ("\x93\x01\x09\x91\xc0"), .code = DATC_WIRE_ERROR_SHAPE,
    .reason = "RETIRE: field reason: expected str, got nil" },

  /* integers out of the range of their C field */
  { "credit-session-over-uint32", BYTES ("\x93\x01\x03\x92" UINT64_2_32 "\x00"),
    .code = DATC_WIRE_ERROR_SHAPE,
    .reason = "CREDIT: field session: 4294967296 is out of range for uint32" },
  { "welcome-heartbeat-over-uint32", BYTES ("\x93\x01\x02\x94\x00\x00" UINT64_2_32 "\x00"),
    .code = DATC_WIRE_ERROR_SHAPE, .reason = "field heartbeat_ms: 4294967296 is out of range" },
  { "heartbeat-running-over-uint32", BYTES ("\x93\x01\x07\x95\x00\x00\x00" UINT64_2_32 "\xc2"),
    .code = DATC_WIRE_ERROR_SHAPE, .reason = "field running: 4294967296 is out of range" },
  { "key-attempt-over-uint32", BYTES ("\x93\x01\x06\x91\x91\x92\x01" UINT64_2_32),
    .code = DATC_WIRE_ERROR_SHAPE,
    .reason = "ACK: key 0: field attempt: 4294967296 is out of range for uint32" },
  { "timeout-over-uint32", BYTES (TASK_HEAD "\x96\xc0\xa1\x78\xc0\xc0" UINT64_2_32 "\x00"),
    .code = DATC_WIRE_ERROR_SHAPE, .reason = "field timeout_ms: 4294967296 is out of range" },
  { "exit-code-over-int32", BYTES (RESULT_HEAD "\x00\xce\x80\x00\x00\x00\x00\x00\x00" RESULT_REST),
    .code = DATC_WIRE_ERROR_SHAPE,
    .reason = "field exit_code: 2147483648 is out of range for int32" },
  { "signal-under-int32",
    BYTES (RESULT_HEAD "\x00\x00\xd3\xff\xff\xff\xff\x7f\xff\xff\xff\x00\x00" RESULT_REST),
    .code = DATC_WIRE_ERROR_SHAPE,
    .reason = "field signal: -2147483649 is out of range for int32" },
  { "started-over-int64",
    BYTES (RESULT_HEAD "\x00\x00\x00\xcf\xff\xff\xff\xff\xff\xff\xff\xff\x00" RESULT_REST),
    .code = DATC_WIRE_ERROR_SHAPE,
    .reason = "field started_us: 18446744073709551615 is out of range for int64" },
  { "status-unknown", BYTES (RESULT_HEAD "\x07\x00\x00\x00\x00" RESULT_REST),
    .code = DATC_WIRE_ERROR_SHAPE, .reason = "field status: 7 is not a known status" },
  { "status-huge",
    BYTES (RESULT_HEAD "\xcf\xff\xff\xff\xff\xff\xff\xff\xff\x00\x00\x00\x00" RESULT_REST),
    .code = DATC_WIRE_ERROR_SHAPE, .reason = "18446744073709551615 is not a known status" },

  /* negative where unsigned */
  { "ack-id-negative", BYTES ("\x93\x01\x06\x91\x91\x92\xff\x01"), .code = DATC_WIRE_ERROR_SHAPE,
    .reason = "ACK: key 0: field id: expected uint, got negative int" },
  { "hello-pid-negative", BYTES ("\x93\x01\x01\x99" HELLO_NAMES "\xfb\x01\x00\x00\x90"),
    .code = DATC_WIRE_ERROR_SHAPE, .reason = "HELLO: field pid: expected uint, got negative int" },
  { "held-attempt-negative",
    BYTES ("\x93\x01\x01\x99" HELLO_NAMES "\x01\x01\x00\x00\x91\x92\x01\xff"),
    .code = DATC_WIRE_ERROR_SHAPE,
    .reason = "HELLO: held key 0: field attempt: expected uint, got negative int" },
  { "credit-limit-negative", BYTES ("\x93\x01\x03\x92\x00\xd3\x80\x00\x00\x00\x00\x00\x00\x00"),
    .code = DATC_WIRE_ERROR_SHAPE, .reason = "field limit: expected uint, got negative int" },
  { "timeout-negative", BYTES (TASK_HEAD "\x96\xc0\xa1\x78\xc0\xc0\xff\x00"),
    .code = DATC_WIRE_ERROR_SHAPE, .reason = "field timeout_ms: expected uint, got negative int" },
  { "dropped-negative", BYTES (RESULT_HEAD "\x00\x00\x00\x00\x00\xc4\x00\xc4\x00\xff\x00\xc0"),
    .code = DATC_WIRE_ERROR_SHAPE,
    .reason = "field stdout_dropped: expected uint, got negative int" },

  /* strings: UTF-8 and NUL */
  { "reason-invalid-utf8", BYTES ("\x93\x01\x0a\x91\xa1\xff"), .code = DATC_WIRE_ERROR_SHAPE,
    .reason = "BYE: field reason: not valid UTF-8" },
  { "reason-truncated-utf8", BYTES ("\x93\x01\x0a\x91\xa2\x61\xe2"), .code = DATC_WIRE_ERROR_SHAPE,
    .reason = "not valid UTF-8" },
  { "site-overlong-utf8",
    BYTES ("\x93\x01\x01\x99\xa1\x61\xa2\xc0\xaf\xa1\x70\xa1\x68\x01\x01\x00\x00\x90"),
    .code = DATC_WIRE_ERROR_SHAPE, .reason = "HELLO: field site: not valid UTF-8" },
  { "host-utf8-surrogate",
    BYTES ("\x93\x01\x01\x99\xa1\x61\xa1\x73\xa1\x70\xa3\xed\xa0\x80\x01\x01\x00\x00\x90"),
    .code = DATC_WIRE_ERROR_SHAPE, .reason = "HELLO: field host: not valid UTF-8" },
  { "sh-invalid-utf8", BYTES (TASK_HEAD "\x96\xc0\xa2\xc3\x28\xc0\xc0\x00\x00"),
    .code = DATC_WIRE_ERROR_SHAPE, .reason = "field sh: not valid UTF-8" },
  { "env-key-invalid-utf8", BYTES (TASK_HEAD "\x96\xc0\xa1\x78\x81\xa1\x80\xa1\x76\xc0\x00\x00"),
    .code = DATC_WIRE_ERROR_SHAPE, .reason = "entry 0: key: not valid UTF-8" },
  { "reason-with-nul", BYTES ("\x93\x01\x09\x91\xa3\x61\x00\x62"), .code = DATC_WIRE_ERROR_SHAPE,
    .reason = "RETIRE: field reason: contains a NUL byte" },
  { "argv-item-with-nul", BYTES (TASK_HEAD "\x96\x91\xa2\x61\x00\xc0\xc0\xc0\x00\x00"),
    .code = DATC_WIRE_ERROR_SHAPE, .reason = "field argv: item 0: contains a NUL byte" },
  { "env-value-with-nul", BYTES (TASK_HEAD "\x96\xc0\xa1\x78\x81\xa1\x41\xa2\x76\x00\xc0\x00\x00"),
    .code = DATC_WIRE_ERROR_SHAPE, .reason = "entry 0: value: contains a NUL byte" },
  { "cwd-with-nul", BYTES (TASK_HEAD "\x96\xc0\xa1\x78\xc0\xa1\x00\x00\x00"),
    .code = DATC_WIRE_ERROR_SHAPE, .reason = "field cwd: contains a NUL byte" },
  { "message-with-nul", BYTES (RESULT_HEAD "\x00\x00\x00\x00\x00\xc4\x00\xc4\x00\x00\x00\xa1\x00"),
    .code = DATC_WIRE_ERROR_SHAPE, .reason = "field message: contains a NUL byte" },

  /* spec rules */
  { "spec-with-both-argv-and-sh", BYTES (TASK_HEAD "\x96\x91\xa1\x78\xa1\x78\xc0\xc0\x00\x00"),
    .code = DATC_WIRE_ERROR_SHAPE, .reason = "exactly one of argv and sh must be set, got both" },
  { "spec-with-neither-argv-nor-sh", BYTES (TASK_HEAD "\x96\xc0\xc0\xc0\xc0\x00\x00"),
    .code = DATC_WIRE_ERROR_SHAPE,
    .reason = "task 0: field spec: exactly one of argv and sh must be set, got neither" },
  { "empty-argv", BYTES (TASK_HEAD "\x96\x90\xc0\xc0\xc0\x00\x00"), .code = DATC_WIRE_ERROR_SHAPE,
    .reason = "field argv: empty argv" },
  { "env-key-with-equals",
    BYTES (TASK_HEAD "\x96\xc0\xa1\x78\x81\xa3\x41\x3d\x42\xa1\x76\xc0\x00\x00"),
    .code = DATC_WIRE_ERROR_SHAPE, .reason = "field env: entry 0: key contains '='" },
  { "env-key-empty", BYTES (TASK_HEAD "\x96\xc0\xa1\x78\x81\xa0\xa1\x76\xc0\x00\x00"),
    .code = DATC_WIRE_ERROR_SHAPE, .reason = "field env: entry 0: empty key" },

  /* counts and lengths over their limits */
  { "name-over-the-limit", .build = build_name_over_limit, .code = DATC_WIRE_ERROR_LIMIT,
    .reason = "HELLO: field agent_id: 257 bytes, over the limit of 256" },
  { "reason-over-the-limit", .build = build_reason_over_limit, .code = DATC_WIRE_ERROR_LIMIT,
    .reason = "BYE: field reason: 4097 bytes, over the limit of 4096" },
  { "message-over-the-limit", .build = build_message_over_limit, .code = DATC_WIRE_ERROR_LIMIT,
    .reason = "result 0: field message: 4097 bytes" },
  { "oversize-ack-batch", .build = build_keys_over_batch, .code = DATC_WIRE_ERROR_LIMIT,
    .reason = "ACK: field keys: 65537 entries, over the limit of 65536" },
  { "oversize-held-batch", .build = build_held_over_batch, .code = DATC_WIRE_ERROR_LIMIT,
    .reason = "HELLO: field held: 65537 entries" },
  { "oversize-tasks-batch", .build = build_tasks_over_batch, .code = DATC_WIRE_ERROR_LIMIT,
    .reason = "TASKS: field tasks: 65537 entries" },
  { "oversize-result-batch", .build = build_results_over_batch, .code = DATC_WIRE_ERROR_LIMIT,
    .reason = "RESULT: field results: 65537 entries" },
  { "argv-over-the-limit", .build = build_argv_over_limit, .code = DATC_WIRE_ERROR_LIMIT,
    .reason = "task 0: field spec: field argv: 4097 items, over the limit of 4096" },
  { "env-over-the-limit", .build = build_env_over_limit, .code = DATC_WIRE_ERROR_LIMIT,
    .reason = "field env: 4097 entries, over the limit of 4096" },
};

static void
test_rejects (gconstpointer data)
{
  const BadFrame *bad = data;
  g_autoptr (GBytes) frame
      = bad->build != NULL ? pack_with (bad->build) : g_bytes_new_static (bad->bytes, bad->len);
  gsize max_size = bad->max_size != 0 ? bad->max_size : DATC_FRAME_MAX;
  g_autoptr (GError) error = NULL;
  g_autoptr (DatcMsg) msg = decode_bytes (frame, max_size, &error);

  g_assert_null (msg);
  g_assert_error (error, DATC_WIRE_ERROR, (gint) bad->code);
  g_test_message ("%s", error->message);
  /* Shows both strings when the reason is not found. */
  const char *found = strstr (error->message, bad->reason) != NULL ? bad->reason : error->message;
  g_assert_cmpstr (found, ==, bad->reason);
}

/* --------------------------------------- truncations and mutations */

static GPtrArray *
sample_frames (void)
{
  GPtrArray *frames = g_ptr_array_new_with_free_func ((GDestroyNotify) g_bytes_unref);

  for (guint i = 0; i < G_N_ELEMENTS (samples); i++)
    {
      g_autoptr (DatcMsg) msg = samples[i].make ();
      g_ptr_array_add (frames, encode (msg));
    }
  for (guint i = 0; i < G_N_ELEMENTS (minimal); i++)
    g_ptr_array_add (frames, g_bytes_new_static (minimal[i].bytes, minimal[i].len));
  return frames;
}

static void
test_rejects_every_truncation (void)
{
  g_autoptr (GPtrArray) frames = sample_frames ();
  guint tried = 0;

  for (guint f = 0; f < frames->len; f++)
    {
      gsize len = 0;
      const guint8 *data = g_bytes_get_data (g_ptr_array_index (frames, f), &len);

      for (gsize cut = 0; cut < len; cut++)
        {
          g_autoptr (GError) error = NULL;
          g_autoptr (DatcMsg) msg = datc_msg_decode (data, cut, DATC_FRAME_MAX, &error);
          g_assert_null (msg);
          g_assert_error (error, DATC_WIRE_ERROR, DATC_WIRE_ERROR_MALFORMED);
          tried++;
        }
    }
  g_test_message ("%u truncations refused", tried);
}

static const guint8 interesting_bytes[] = {
  0x00, 0x01, 0x7f, 0x80, 0x8f, 0x90, 0x9f, 0xa0, 0xbf, 0xc0, 0xc1, 0xc2, 0xc3, 0xc4, 0xc6, 0xc7,
  0xca, 0xcb, 0xcc, 0xcf, 0xd0, 0xd3, 0xd4, 0xd9, 0xdb, 0xdc, 0xdd, 0xde, 0xdf, 0xe0, 0xff,
};

static void
mutate (GRand *rand, GByteArray *b)
{
  guint op = g_rand_int_range (rand, 0, 8);
  guint pos = b->len > 0 ? g_rand_int_range (rand, 0, (gint32) b->len) : 0;
  guint8 byte = (guint8) g_rand_int_range (rand, 0, 256);

  if (b->len == 0)
    op = 3;
  switch (op)
    {
    case 0:
      b->data[pos] ^= (guint8) (1u << g_rand_int_range (rand, 0, 8));
      break;
    case 1:
      b->data[pos] = byte;
      break;
    case 2:
      b->data[pos] = interesting_bytes[byte % G_N_ELEMENTS (interesting_bytes)];
      break;
    case 3:
      {
        guint8 value = interesting_bytes[byte % G_N_ELEMENTS (interesting_bytes)];
        g_array_insert_vals ((GArray *) b, pos, &value, 1);
        break;
      }
    case 4:
      g_byte_array_remove_index (b, pos);
      break;
    case 5:
      g_byte_array_set_size (b, pos);
      break;
    case 6:
      {
        /* Duplicate a chunk: repeated records, doubled headers. */
        guint want = (guint) g_rand_int_range (rand, 1, 17);
        guint n = MIN (b->len - pos, want);
        g_autofree guint8 *chunk = g_memdup2 (b->data + pos, n);
        g_array_insert_vals ((GArray *) b, pos, chunk, n);
        break;
      }
    case 7:
      /* Big lengths and counts. */
      for (guint i = pos; i < MIN (b->len, pos + 4); i++)
        b->data[i] = 0xff;
      break;
    }
}

static void
test_survives_random_mutations (void)
{
  g_autoptr (GPtrArray) frames = sample_frames ();
  g_autoptr (GRand) rand = g_rand_new_with_seed (20261121);
  const guint per_frame = 400;
  guint decoded = 0, refused = 0;
  guint by_code[DATC_WIRE_ERROR_SHAPE + 1] = { 0 };

  for (guint f = 0; f < frames->len; f++)
    {
      GBytes *frame = g_ptr_array_index (frames, f);
      for (guint k = 0; k < per_frame; k++)
        {
          g_autoptr (GByteArray) b = g_byte_array_new ();
          g_byte_array_append (b, g_bytes_get_data (frame, NULL), (guint) g_bytes_get_size (frame));
          guint ops = (guint) g_rand_int_range (rand, 1, 5);
          for (guint o = 0; o < ops; o++)
            mutate (rand, b);

          g_autoptr (GError) error = NULL;
          g_autoptr (DatcMsg) msg = datc_msg_decode (b->data, b->len, DATC_FRAME_MAX, &error);
          if (msg == NULL)
            {
              g_assert_nonnull (error);
              g_assert_true (error->domain == DATC_WIRE_ERROR);
              g_assert_cmpint (error->code, >=, 0);
              g_assert_cmpint (error->code, <=, DATC_WIRE_ERROR_SHAPE);
              g_assert_cmpstr (error->message, !=, "");
              by_code[error->code]++;
              refused++;
              continue;
            }
          /* What decodes must round-trip. */
          assert_round_trips (msg);
          decoded++;
        }
    }
  g_test_message ("%u mutants decoded and round-tripped, %u refused "
                  "(too-big %u, malformed %u, limit %u, version %u, type %u, shape %u)",
                  decoded, refused, by_code[0], by_code[1], by_code[2], by_code[3], by_code[4],
                  by_code[5]);
  g_assert_cmpuint (decoded, >, 0);
  g_assert_cmpuint (refused, >, 0);
}

/* ---------------------------------------------------------------- main */

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  g_autoptr (GPtrArray) paths = g_ptr_array_new_with_free_func (g_free);

  for (guint i = 0; i < G_N_ELEMENTS (samples); i++)
    {
      char *path = g_strdup_printf ("/wire/roundtrip/%s", samples[i].name);
      g_ptr_array_add (paths, path);
      g_test_add_data_func (path, &samples[i], test_round_trip);
    }
  g_test_add_func ("/wire/roundtrip/every-type-has-a-sample", test_every_type_has_a_sample);
  g_test_add_func ("/wire/encode/tasks-stream-matches-msg-encode",
                   test_tasks_stream_matches_msg_encode);
  g_test_add_func ("/wire/encode/tasks-stream-of-many-lines-decodes",
                   test_tasks_stream_of_many_lines_decodes);
  g_test_add_func ("/wire/encode/null-fields-travel-as-empty", test_null_fields_travel_as_empty);
  g_test_add_func ("/wire/msg/new-makes-empty-containers", test_new_makes_empty_containers);
  g_test_add_func ("/wire/msg/free-accepts-null", test_free_accepts_null);
  g_test_add_func ("/wire/msg/names", test_names);
  g_test_add_func ("/wire/encode/result-without-oom-evidence-is-the-version-1-shape",
                   test_result_oom_evidence_is_optional);
  g_test_add_func ("/wire/decode/accepts-minimal-frames", test_accepts_minimal_frames);
  g_test_add_func ("/wire/decode/accepts-any-integer-encoding-in-range",
                   test_accepts_any_integer_encoding_in_range);
  g_test_add_func ("/wire/decode/accepts-values-at-every-limit",
                   test_accepts_values_at_every_limit);
  g_test_add_func ("/wire/decode/hello-fits-the-hello-cap", test_hello_fits_the_hello_cap);
  for (guint i = 0; i < G_N_ELEMENTS (bad_frames); i++)
    {
      char *path = g_strdup_printf ("/wire/decode/rejects-%s", bad_frames[i].name);
      g_ptr_array_add (paths, path);
      g_test_add_data_func (path, &bad_frames[i], test_rejects);
    }
  g_test_add_func ("/wire/decode/rejects-every-truncation", test_rejects_every_truncation);
  g_test_add_func ("/wire/decode/survives-random-mutations", test_survives_random_mutations);

  return g_test_run ();
}
