/* test-submit-recovery.c: a submit that fails in transit is looked up by
 * its job name before it is reported as failed, so a proxy that did reach
 * the scheduler is kept (and never submitted twice), and one that did not
 * is reported.  The scheduler is slurm; sbatch and squeue are stubs at the
 * front of PATH; the transport is the real local one with a short command
 * timeout standing for a connection that broke mid-command. */
#include <glib/gstdio.h>
#include <string.h>

#include "driver.h"

static gchar *stubs, *work;

static void
write_stub (const char *name, const char *body)
{
  g_autofree gchar *path = g_build_filename (stubs, name, NULL);
  g_autofree gchar *text = g_strdup_printf ("#!/bin/sh\n%s\n", body);
  g_assert_true (g_file_set_contents (path, text, -1, NULL));
  g_assert_cmpint (g_chmod (path, 0755), ==, 0);
}

static DatcSite *
slurm_site (void)
{
  g_autoptr (GError) error = NULL;
  DatcSite *site = datc_site_new ("rec", "local", "slurm", NULL, NULL, &error);
  g_assert_no_error (error);
  datc_site_set_command_timeout (site, 400);
  return site;
}

static DatcProxyRequest
request (void)
{
  DatcProxyRequest req = {
    .name = "datc-rec-1", .slots = 1, .walltime_s = 0, .workdir = work, .agent_command = "true"
  };
  return req;
}

static void
test_went_through (void)
{
  g_autofree gchar *marker = g_build_filename (work, "submitted", NULL);
  g_unlink (marker);
  /* sbatch queues the job, then hangs: the answer never arrives. */
  g_autofree gchar *sbatch = g_strdup_printf ("touch %s; exec sleep 30", marker);
  g_autofree gchar *squeue = g_strdup_printf ("[ -e %s ] && echo 4242; exit 0", marker);
  write_stub ("sbatch", sbatch);
  write_stub ("squeue", squeue);
  g_autoptr (DatcSite) site = slurm_site ();
  DatcProxyRequest req = request ();
  g_autofree gchar *id = NULL;
  g_autoptr (GError) error = NULL;
  g_assert_true (datc_site_submit (site, &req, "p1.sh", &id, &error));
  g_assert_no_error (error);
  g_assert_cmpstr (id, ==, "4242");
}

static void
test_did_not_go_through (void)
{
  write_stub ("sbatch", "exec sleep 30");
  write_stub ("squeue", "exit 0");
  g_autoptr (DatcSite) site = slurm_site ();
  DatcProxyRequest req = request ();
  g_autofree gchar *id = NULL;
  g_autoptr (GError) error = NULL;
  g_assert_false (datc_site_submit (site, &req, "p2.sh", &id, &error));
  g_assert_error (error, DATC_SITE_ERROR, DATC_SITE_ERROR_TIMEOUT);
  g_assert_nonnull (strstr (error->message, "site rec: submitting"));
  g_assert_null (id);
}

static void
test_plain_submit_needs_no_lookup (void)
{
  /* squeue leaves a mark: a lookup that ran would show, whatever it answered. */
  g_autofree gchar *marker = g_build_filename (work, "looked-up", NULL);
  g_autofree gchar *squeue = g_strdup_printf ("touch %s; exit 3", marker);
  g_unlink (marker);
  write_stub ("sbatch", "echo 77");
  write_stub ("squeue", squeue);
  g_autoptr (DatcSite) site = slurm_site ();
  DatcProxyRequest req = request ();
  g_autofree gchar *id = NULL;
  g_autoptr (GError) error = NULL;
  g_assert_true (datc_site_submit (site, &req, "p3.sh", &id, &error));
  g_assert_no_error (error);
  g_assert_cmpstr (id, ==, "77");
  g_assert_false (g_file_test (marker, G_FILE_TEST_EXISTS));
  /* The premise: the site's lookup does run this squeue and leave the mark. */
  g_clear_pointer (&id, g_free);
  g_assert_false (datc_site_lookup (site, req.name, &id, &error));
  g_assert_true (g_file_test (marker, G_FILE_TEST_EXISTS));
}

static void
test_lookup (void)
{
  write_stub ("squeue", "echo 9; exit 0");
  g_autoptr (DatcSite) site = slurm_site ();
  g_autofree gchar *id = NULL;
  g_autoptr (GError) error = NULL;
  g_assert_true (datc_site_lookup (site, "datc-x", &id, &error));
  g_assert_cmpstr (id, ==, "9");
  g_clear_pointer (&id, g_free);
  g_assert_false (datc_site_lookup (site, "bad name;rm", &id, &error));
  g_assert_error (error, DATC_SITE_ERROR, DATC_SITE_ERROR_CONFIG);
}

/* An array whose answer was lost is found by the array's name: the ids of
 * its elements come back, and it is not submitted again. */
static void
test_array_went_through (void)
{
  g_autofree gchar *marker = g_build_filename (work, "array-submitted", NULL);
  g_unlink (marker);
  g_autofree gchar *sbatch = g_strdup_printf ("touch %s; exec sleep 30", marker);
  /* squeue -r --name=... -o %F: the base id once per element. */
  g_autofree gchar *squeue
      = g_strdup_printf ("[ -e %s ] && printf '515\\n515\\n515\\n'; exit 0", marker);
  write_stub ("sbatch", sbatch);
  write_stub ("squeue", squeue);
  g_autoptr (DatcSite) site = slurm_site ();
  DatcProxyRequest req = request ();
  g_auto (GStrv) ids = NULL;
  g_autoptr (GError) error = NULL;
  const char *want[] = { "515_1", "515_2", "515_3", NULL };
  g_assert_true (datc_site_scheduler_has_arrays (site));
  g_assert_true (datc_site_submit_array (site, &req, 3, "a1.sh", &ids, &error));
  g_assert_no_error (error);
  g_assert_cmpstrv (ids, want);

  /* Not gone through: the timeout, and no ids. */
  g_unlink (marker);
  write_stub ("sbatch", "exec sleep 30");
  g_clear_pointer (&ids, g_strfreev);
  g_assert_false (datc_site_submit_array (site, &req, 3, "a2.sh", &ids, &error));
  g_assert_error (error, DATC_SITE_ERROR, DATC_SITE_ERROR_TIMEOUT);
  g_assert_null (ids);
  g_clear_error (&error);

  /* Sizes out of range, and a scheduler without arrays, are refused
   * before anything runs. */
  g_assert_false (datc_site_submit_array (site, &req, 1, "a3.sh", &ids, &error));
  g_assert_error (error, DATC_SITE_ERROR, DATC_SITE_ERROR_CONFIG);
  g_clear_error (&error);
  g_autoptr (DatcSite) fork = datc_site_new ("f", "local", "fork", NULL, NULL, &error);
  g_assert_no_error (error);
  g_assert_false (datc_site_scheduler_has_arrays (fork));
  g_assert_false (datc_site_submit_array (fork, &req, 3, "a4.sh", &ids, &error));
  g_assert_error (error, DATC_SITE_ERROR, DATC_SITE_ERROR_CONFIG);
  g_assert_null (ids);
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  stubs = g_dir_make_tmp ("datc-stubs-XXXXXX", NULL);
  work = g_dir_make_tmp ("datc-work-XXXXXX", NULL);
  g_autofree gchar *path = g_strconcat (stubs, ":", g_getenv ("PATH"), NULL);
  g_setenv ("PATH", path, TRUE);
  g_test_add_func ("/site/submit/in-transit-but-queued-is-kept", test_went_through);
  g_test_add_func ("/site/submit/in-transit-and-not-queued-is-an-error", test_did_not_go_through);
  g_test_add_func ("/site/submit/answered-needs-no-lookup", test_plain_submit_needs_no_lookup);
  g_test_add_func ("/site/lookup/finds-a-job-by-name", test_lookup);
  g_test_add_func ("/site/submit-array/in-transit-but-queued-is-kept", test_array_went_through);
  int rc = g_test_run ();
  const char *rm[] = { "/bin/rm", "-rf", stubs, work, NULL };
  g_spawn_sync (NULL, (gchar **) rm, NULL, 0, NULL, NULL, NULL, NULL, NULL, NULL);
  return rc;
}
