/* test-batch.c: one campaign across a real Slurm cluster, a real Grid
 * Engine and a fork site (tests/testbed/ brings the daemons up): proxies
 * are real batch jobs whose agents connect back over TCP with CURVE and
 * pull tasks; afterwards squeue and qstat show nothing of the campaign.
 * And `datc sites check` on the same clusters: each scheduler is asked
 * about its site's queue, and a missing one fails in the scheduler's words.
 *
 * The test bodies run in a subprocess (g_test_trap_subprocess) while this
 * process brings the test beds up before and down after, so a failed
 * assertion still stops every daemon by PID.  A test bed that cannot come
 * up fails the test loudly. */
#include <string.h>
#include <unistd.h>

#include "harness.h"
#include "testbed.h"

static gchar *slurm_dir, *sge_dir;

static void
campaign_across_clusters (void)
{
  g_assert_true (tb_env_load (slurm_dir));
  g_assert_true (tb_env_load (sge_dir));
  g_autoptr (TbDir) d = tb_dir_new ();
  g_autoptr (GString) tasks = g_string_new (NULL);
  for (guint i = 1; i <= 120; i++)
    g_string_append_printf (tasks, "sh -c 'sleep 0.2; echo $SLURM_JOB_ID$JOB_ID'\n");
  g_autofree gchar *file = tb_write (d, "t.txt", tasks->str);
  g_autofree gchar *sites = tb_write (d, "sites.ini",
                                      "[master]\nlisten = tcp://127.0.0.1:0\n\n"
                                      "[site slurm]\nscheduler = slurm\nslots_per_proxy = 2\n"
                                      "max_proxies = 2\nwalltime = 10m\n\n"
                                      "[site sge]\nscheduler = sge\nslots_per_proxy = 2\n"
                                      "max_proxies = 2\nwalltime = 10m\n\n"
                                      "[site here]\nscheduler = fork\nslots_per_proxy = 1\n");
  g_autofree gchar *dir = g_build_filename (d->path, "c", NULL);
  const char *argv[] = { tb_datc (), "run", "--dir", dir, "--sites", sites, file, NULL };
  g_autofree gchar *err = NULL;
  int status = tb_run (d, argv, 240, &err);
  if (status != 0)
    g_printerr ("%s", err);
  g_assert_cmpint (status, ==, 0);

  g_autoptr (GHashTable) res = tb_results (dir);
  g_assert_cmpuint (g_hash_table_size (res), ==, 120);
  g_autoptr (GHashTable) per_site = g_hash_table_new (g_str_hash, g_str_equal);
  GHashTableIter it;
  gpointer v;
  g_hash_table_iter_init (&it, res);
  while (g_hash_table_iter_next (&it, NULL, &v))
    {
      const char *site = json_object_get_string_member (v, "site");
      g_assert_cmpint (json_object_get_int_member (v, "exit_code"), ==, 0);
      g_hash_table_replace (
          per_site, (gpointer) site,
          GUINT_TO_POINTER (GPOINTER_TO_UINT (g_hash_table_lookup (per_site, site)) + 1));
    }
  /* Every cluster contributed. */
  g_assert_cmpuint (GPOINTER_TO_UINT (g_hash_table_lookup (per_site, "slurm")), >, 0);
  g_assert_cmpuint (GPOINTER_TO_UINT (g_hash_table_lookup (per_site, "sge")), >, 0);
  g_assert_cmpuint (GPOINTER_TO_UINT (g_hash_table_lookup (per_site, "here")), >, 0);

  /* A task on the Slurm site ran inside a Slurm job: it printed its job id. */
  g_hash_table_iter_init (&it, res);
  while (g_hash_table_iter_next (&it, NULL, &v))
    if (g_str_equal (json_object_get_string_member (v, "site"), "slurm"))
      {
        g_autofree gchar *id
            = g_strdup_printf ("%" G_GINT64_FORMAT, json_object_get_int_member (v, "id"));
        const char *out_argv[] = { tb_datc (), "output", dir, id, NULL };
        g_autoptr (TbProc) p = tb_spawn (d, "output", out_argv);
        g_assert_cmpint (tb_wait (p, 30), ==, 0);
        g_autofree gchar *out = tb_proc_stdout (p);
        g_assert_cmpuint (strlen (g_strstrip (out)), >, 0);
        g_assert_true (g_ascii_isdigit (out[0]));
        break;
      }

  /* Nothing of the campaign is left queued or running anywhere. */
  int sq_status, qs_status;
  const char *squeue[] = { "squeue", "-h", "-o", "%j %T", NULL };
  g_autofree gchar *sq = tb_capture (squeue, &sq_status);
  g_assert_cmpint (sq_status, ==, 0);
  g_assert_null (strstr (sq, "datc-"));
  const char *qstat[] = { "qstat", "-u", "*", NULL };
  g_autofree gchar *qs = tb_capture (qstat, &qs_status);
  g_assert_cmpint (qs_status, ==, 0);
  g_assert_cmpstr (g_strstrip (qs), ==, "");
  g_autoptr (GArray) left = tb_find_agents (dir);
  g_assert_cmpuint (left->len, ==, 0);
}

/* `datc sites check` asks each scheduler about its site's queue: a queue
 * the cluster has passes with what the scheduler says about it, one it
 * does not have fails naming the site, the queue and the scheduler's own
 * answer; the fork site has no queue to ask about. */
static void
sites_check_queues (void)
{
  g_assert_true (tb_env_load (slurm_dir));
  g_assert_true (tb_env_load (sge_dir));
  g_autoptr (TbDir) d = tb_dir_new ();
  g_autofree gchar *sites = tb_write (d, "sites.ini",
                                      "[master]\nlisten = tcp://127.0.0.1:0\n\n"
                                      "[site slurm-ok]\nscheduler = slurm\nqueue = batch\n\n"
                                      "[site slurm-gone]\nscheduler = slurm\nqueue = nosuch\n\n"
                                      "[site sge-ok]\nscheduler = sge\nqueue = all.q\n\n"
                                      "[site sge-gone]\nscheduler = sge\nqueue = nosuch.q\n\n"
                                      "[site here]\nscheduler = fork\n");
  const char *argv[] = { tb_datc (), "sites", "check", sites, NULL };
  g_autoptr (TbProc) p = tb_spawn (d, "check", argv);
  g_assert_cmpint (tb_wait (p, 60), ==, 1);
  g_autofree gchar *out = tb_proc_stdout (p);
  g_test_message ("%s", out);
  g_auto (GStrv) lines = g_strsplit (out, "\n", -1);
  const char *want[][3] = {
    { "slurm-ok ", " ok ", "batch: State=UP" },
    { "slurm-gone ", " FAIL ", "no queue nosuch: slurm says: Partition nosuch not found" },
    { "sge-ok ", " ok ", "all.q: slots 8" },
    { "sge-gone ", " FAIL ",
      "no queue nosuch.q: sge says: No cluster queue or queue instance matches the phrase "
      "\"nosuch.q\"" },
    { "here ", " ok ", "not applicable: fork has no queues" },
  };
  for (guint w = 0; w < G_N_ELEMENTS (want); w++)
    {
      gboolean seen = FALSE;
      for (guint i = 0; lines[i] && !seen; i++)
        seen = g_str_has_prefix (lines[i], want[w][0]) && strstr (lines[i], " queue exists ")
               && strstr (lines[i], want[w][1]) && strstr (lines[i], want[w][2]);
      if (!seen)
        g_printerr ("# no line for %s with%s%s\n", want[w][0], want[w][1], want[w][2]);
      g_assert_true (seen);
    }
  /* Nothing else failed: the schedulers' commands are there, the agent too. */
  g_assert_nonnull (strstr (out, "\n2 checks failed\n"));
}

static void
test_sites_check_queues (void)
{
  if (g_test_subprocess ())
    {
      sites_check_queues ();
      return;
    }
  g_test_trap_subprocess (NULL, 120 * G_USEC_PER_SEC, G_TEST_SUBPROCESS_INHERIT_STDERR);
  g_test_trap_assert_passed ();
}

static void
test_across_clusters (void)
{
  if (g_test_subprocess ())
    {
      campaign_across_clusters ();
      return;
    }
  g_test_trap_subprocess (NULL, 300 * G_USEC_PER_SEC, G_TEST_SUBPROCESS_INHERIT_STDERR);
  g_test_trap_assert_passed ();
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  gboolean parent = !g_test_subprocess ();
  /* A failed test body must not abort this process: it still has to bring
   * the clusters down.  (Bodies run in subprocesses, where assertions stay
   * fatal.) */
  if (parent)
    g_test_set_nonfatal_assertions ();
  slurm_dir = g_strdup_printf ("/var/lib/datc-testbed/batch-test-slurm");
  sge_dir = g_strdup_printf ("/var/lib/datc-testbed/batch-test-sge");
  if (parent)
    {
      const char *s_args[] = { "--cluster", "datcbatch", slurm_dir, NULL };
      const char *g_args[] = { "--wait", "120", sge_dir, NULL };
      if (!tb_script ("slurm-up.sh", s_args, NULL) || !tb_script ("sge-up.sh", g_args, NULL))
        {
          const char *down_s[] = { slurm_dir, NULL }, *down_g[] = { sge_dir, NULL };
          tb_script ("slurm-down.sh", down_s, NULL);
          tb_script ("sge-down.sh", down_g, NULL);
          g_error ("the Slurm or Grid Engine test bed did not come up");
        }
    }
  g_test_add_func ("/batch/one-campaign-across-slurm-grid-engine-and-fork", test_across_clusters);
  g_test_add_func ("/batch/sites-check-asks-each-scheduler-about-its-queue",
                   test_sites_check_queues);
  int rc = g_test_run ();
  if (parent)
    {
      const char *down_s[] = { slurm_dir, NULL }, *down_g[] = { sge_dir, NULL };
      if (!tb_script ("slurm-down.sh", down_s, NULL) || !tb_script ("sge-down.sh", down_g, NULL))
        rc = 1;
    }
  return rc;
}
