/* test-agentoutput.c: an agent's output file in a temporary directory:
 * stdout then stderr appended at the offsets the results point at, a
 * returning agent appending after what it wrote before, and a file that
 * cannot be opened an error that names it (the ledger then records
 * nothing). */
#include <glib.h>
#include <glib/gstdio.h>
#include <string.h>

#include "agentoutput.h"
#include "ledger.h"

typedef struct {
  gchar *dir;
  gchar *path; /* DIR/outputs/a-1.out */
} Fixture;

static void
setup (Fixture *f, gconstpointer data)
{
  g_autoptr (GError) error = NULL;
  f->dir = g_dir_make_tmp ("datc-output-XXXXXX", &error);
  g_assert_no_error (error);
  g_autofree gchar *outputs = g_build_filename (f->dir, "outputs", NULL);
  g_assert_cmpint (g_mkdir (outputs, 0700), ==, 0);
  f->path = g_build_filename (outputs, "a-1.out", NULL);
}

static void
teardown (Fixture *f, gconstpointer data)
{
  g_autofree gchar *cmd = g_strdup_printf ("rm -rf '%s'", f->dir);
  g_assert_cmpint (system (cmd), ==, 0);
  g_free (f->dir);
  g_free (f->path);
}

static gchar *
contents (Fixture *f)
{
  gchar *text = NULL;
  g_assert_true (g_file_get_contents (f->path, &text, NULL, NULL));
  return text;
}

static void
test_appends_at_the_offsets_it_says (Fixture *f, gconstpointer data)
{
  g_autoptr (DatcAgentOutput) o = datc_agent_output_new (f->dir, "a-1");
  g_autoptr (GBytes) out = g_bytes_new_static ("hello\n", 6);
  g_autoptr (GBytes) err = g_bytes_new_static ("oops", 4);
  g_autoptr (GError) error = NULL;
  guint64 out_off, err_off;

  g_assert_cmpstr (datc_agent_output_name (o), ==, "outputs/a-1.out");
  g_assert_false (g_file_test (f->path, G_FILE_TEST_EXISTS));
  /* Nothing to write still opens the file: the offsets are the file's. */
  g_assert_true (datc_agent_output_append (o, NULL, NULL, &out_off, &err_off, &error));
  g_assert_no_error (error);
  g_assert_true (g_file_test (f->path, G_FILE_TEST_EXISTS));
  g_assert_cmpuint (out_off, ==, 0);
  g_assert_cmpuint (err_off, ==, 0);

  g_assert_true (datc_agent_output_append (o, out, err, &out_off, &err_off, &error));
  g_assert_cmpuint (out_off, ==, 0);
  g_assert_cmpuint (err_off, ==, 6);
  g_assert_true (datc_agent_output_append (o, err, NULL, &out_off, &err_off, &error));
  g_assert_cmpuint (out_off, ==, 10);
  g_assert_cmpuint (err_off, ==, 14);
  g_assert_cmpuint (datc_agent_output_size (o), ==, 14);
  g_assert_true (datc_agent_output_sync (o, &error));
  g_assert_no_error (error);
  g_autofree gchar *text = contents (f);
  g_assert_cmpstr (text, ==, "hello\noopsoops");
}

/* An agent back after its entry was released writes after its old output. */
static void
test_a_returning_agent_appends (Fixture *f, gconstpointer data)
{
  g_assert_true (g_file_set_contents (f->path, "old", 3, NULL));
  g_autoptr (DatcAgentOutput) o = datc_agent_output_new (f->dir, "a-1");
  g_autoptr (GBytes) out = g_bytes_new_static ("new", 3);
  guint64 out_off, err_off;
  g_assert_cmpuint (datc_agent_output_size (o), ==, 0); /* not opened yet */
  g_assert_true (datc_agent_output_append (o, out, NULL, &out_off, &err_off, NULL));
  g_assert_cmpuint (out_off, ==, 3);
  g_assert_cmpuint (err_off, ==, 6);
  g_autofree gchar *text = contents (f);
  g_assert_cmpstr (text, ==, "oldnew");
}

static void
test_an_unopenable_file_is_named (Fixture *f, gconstpointer data)
{
  /* A directory where the file goes: open fails, even for root. */
  g_assert_cmpint (g_mkdir (f->path, 0700), ==, 0);
  g_autoptr (DatcAgentOutput) o = datc_agent_output_new (f->dir, "a-1");
  g_autoptr (GBytes) out = g_bytes_new_static ("x", 1);
  g_autoptr (GError) error = NULL;
  guint64 out_off, err_off;
  g_assert_false (datc_agent_output_append (o, out, NULL, &out_off, &err_off, &error));
  g_assert_error (error, DATC_LEDGER_ERROR, DATC_LEDGER_ERROR_IO);
  g_assert_true (g_str_has_prefix (error->message, f->path));
  g_clear_error (&error);
  /* Tried again once the way is clear. */
  g_assert_cmpint (g_rmdir (f->path), ==, 0);
  g_assert_true (datc_agent_output_append (o, out, NULL, &out_off, &err_off, &error));
  g_assert_no_error (error);
  g_assert_cmpuint (datc_agent_output_size (o), ==, 1);
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  g_test_add ("/agentoutput/appends-stdout-then-stderr-at-the-offsets-it-says", Fixture, NULL,
              setup, test_appends_at_the_offsets_it_says, teardown);
  g_test_add ("/agentoutput/a-returning-agent-appends-after-its-old-output", Fixture, NULL, setup,
              test_a_returning_agent_appends, teardown);
  g_test_add ("/agentoutput/a-file-that-cannot-be-opened-is-named", Fixture, NULL, setup,
              test_an_unopenable_file_is_named, teardown);
  return g_test_run ();
}
