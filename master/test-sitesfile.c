/* test-sitesfile.c: SITES.ini parsing, each problem with its FILE:LINE. */
#include <glib/gstdio.h>
#include <string.h>
#include <unistd.h>

#include "sitesfile.h"

static gchar *
write_tmp (const char *content)
{
  g_autoptr (GError) error = NULL;
  gchar *path = NULL;
  int fd = g_file_open_tmp ("sites-XXXXXX.ini", &path, &error);
  g_assert_no_error (error);
  close (fd);
  g_file_set_contents (path, content, -1, &error);
  g_assert_no_error (error);
  return path;
}

static void
test_valid (void)
{
  g_autofree gchar *path = write_tmp ("# two clusters\n"
                                      "; also a comment\n"
                                      "[master]\n"
                                      "listen = tcp://0.0.0.0:0\n"
                                      "advertise = 10.1.2.3\n"
                                      "give_up_after = 10m\n"
                                      "\n"
                                      "[site hpc1]\n"
                                      "transport = local\n"
                                      "scheduler = fork\n"
                                      "slots_per_proxy = 16\n"
                                      "max_proxies = 8\n"
                                      "walltime = 1h30m\n"
                                      "submit_args = --account=abc\n"
                                      "\n"
                                      "[site hpc2]\n"
                                      "scheduler = fork\n");
  g_autoptr (GError) error = NULL;
  g_autoptr (DatcSitesFile) f = datc_sites_file_load (path, &error);
  g_assert_no_error (error);
  g_assert_cmpstr (f->listen, ==, "tcp://0.0.0.0:0");
  g_assert_cmpstr (f->advertise, ==, "10.1.2.3");
  g_assert_cmpuint (f->give_up_s, ==, 600);
  g_assert_cmpuint (f->sites->len, ==, 2);
  DatcSiteConfig *a = f->sites->pdata[0], *b = f->sites->pdata[1];
  g_assert_cmpstr (a->name, ==, "hpc1");
  g_assert_cmpuint (a->slots_per_proxy, ==, 16);
  g_assert_cmpuint (a->max_proxies, ==, 8);
  g_assert_cmpuint (a->walltime_s, ==, 5400);
  g_assert_cmpstr (a->submit_args, ==, "--account=abc");
  g_assert_cmpstr (b->transport, ==, "local");
  g_assert_cmpuint (b->slots_per_proxy, ==, 1);
  g_assert_cmpuint (b->walltime_s, ==, 0);
  g_assert_cmpstr (b->agent, ==, "datc-agent");
  g_unlink (path);
}

/* Two copies unless the file says; 1 turns replication off. */
static void
test_max_replicas (void)
{
  const struct {
    const char *text;
    guint n;
  } cases[] = {
    { "[site a]\nscheduler = fork\n", 2 },
    { "[master]\nmax_replicas = 1\n[site a]\nscheduler = fork\n", 1 },
    { "[master]\nmax_replicas = 3\n[site a]\nscheduler = fork\n", 3 },
  };
  for (guint i = 0; i < G_N_ELEMENTS (cases); i++)
    {
      g_autofree gchar *path = write_tmp (cases[i].text);
      g_autoptr (GError) error = NULL;
      g_autoptr (DatcSitesFile) f = datc_sites_file_load (path, &error);
      g_assert_no_error (error);
      g_assert_cmpuint (f->max_replicas, ==, cases[i].n);
      g_unlink (path);
    }
}

/* Compaction's thresholds: not given (0: the ledger's defaults), a size,
 * never. */
static void
test_compact_keys (void)
{
  const struct {
    const char *text;
    guint64 bytes;
    guint factor;
  } cases[] = {
    { "[site a]\nscheduler = fork\n", 0, 0 },
    { "[master]\ncompact_min_bytes = 4096\ncompact_factor = 2\n[site a]\nscheduler = fork\n", 4096,
      2 },
    { "[master]\ncompact_min_bytes = never\n[site a]\nscheduler = fork\n", G_MAXUINT64, 0 },
  };
  for (guint i = 0; i < G_N_ELEMENTS (cases); i++)
    {
      g_autofree gchar *path = write_tmp (cases[i].text);
      g_autoptr (GError) error = NULL;
      g_autoptr (DatcSitesFile) f = datc_sites_file_load (path, &error);
      g_assert_no_error (error);
      g_assert_cmpuint (f->compact_min_bytes, ==, cases[i].bytes);
      g_assert_cmpuint (f->compact_factor, ==, cases[i].factor);
      g_unlink (path);
    }
}

/* Five minutes unless the file says; 0 is never. */
static void
test_give_up_after (void)
{
  const struct {
    const char *text;
    guint s;
  } cases[] = {
    { "[site a]\nscheduler = fork\n", DATC_GIVE_UP_DEFAULT_S },
    { "[master]\ngive_up_after = 0\n[site a]\nscheduler = fork\n", 0 },
    { "[master]\ngive_up_after = 90\n[site a]\nscheduler = fork\n", 90 },
  };
  g_assert_cmpuint (DATC_GIVE_UP_DEFAULT_S, ==, 300);
  for (guint i = 0; i < G_N_ELEMENTS (cases); i++)
    {
      g_autofree gchar *path = write_tmp (cases[i].text);
      g_autoptr (GError) error = NULL;
      g_autoptr (DatcSitesFile) f = datc_sites_file_load (path, &error);
      g_assert_no_error (error);
      g_assert_cmpuint (f->give_up_s, ==, cases[i].s);
      g_unlink (path);
    }
}

typedef struct {
  const char *name, *content, *expect;
} Bad;

static const Bad bad[] = {
  { "unknown-key", "[site a]\nscheduler = fork\ncolour = red\n",
    ":3: unknown key \"colour\" in [site a]" },
  { "unknown-key-near-a-known-one", "[site a]\nscheduler = fork\nslot_per_proxy = 2\n",
    ":3: unknown key \"slot_per_proxy\" in [site a]: did you mean slots_per_proxy?" },
  { "swapped-letters-in-a-key", "[site a]\nscheduler = fork\nhsot = x\n",
    ":3: unknown key \"hsot\" in [site a]: did you mean host?" },
  { "unknown-master-key-near-a-known-one",
    "[master]\nlistne = tcp://*:1\n[site a]\nscheduler = fork\n",
    ":2: unknown key \"listne\" in [master]: did you mean listen?" },
  { "unknown-group", "[sites]\nx = 1\n", ":1: unknown group [sites]" },
  { "missing-scheduler", "[site a]\nqueue = q\n", ":1: [site a] needs scheduler" },
  { "unknown-scheduler", "[site a]\nscheduler = moab\n", ":2: unknown scheduler \"moab\"" },
  { "unknown-transport", "[site a]\ntransport = rsh\nscheduler = fork\n",
    ":2: unknown transport \"rsh\"" },
  { "slots-not-a-number", "[site a]\nscheduler = fork\nslots_per_proxy = many\n",
    ":3: slots_per_proxy must be a whole number" },
  { "slots-zero", "[site a]\nscheduler = fork\nslots_per_proxy = 0\n", ":3: slots_per_proxy" },
  { "bad-walltime", "[site a]\nscheduler = fork\nwalltime = 2 days\n", ":3: walltime \"2 days\"" },
  { "ambiguous-walltime", "[site a]\nscheduler = fork\nwalltime = 1h30\n", ":3: walltime" },
  { "duplicate-key", "[site a]\nscheduler = fork\nscheduler = fork\n",
    ":3: scheduler is given twice" },
  { "duplicate-group", "[site a]\nscheduler = fork\n[site a]\nqueue = x\n",
    ":3: [site a] is given twice" },
  { "bad-site-name", "[site a/b]\nscheduler = fork\n", ":1: site name \"a/b\"" },
  { "local-is-reserved", "[site local]\nscheduler = fork\n", ":1: \"local\" is the embedded site" },
  { "bad-give-up-after", "[master]\ngive_up_after = soon\n[site a]\nscheduler = fork\n",
    ":2: give_up_after \"soon\": expected a duration" },
  { "bad-max-replicas", "[master]\nmax_replicas = 0\n[site a]\nscheduler = fork\n",
    ":2: max_replicas \"0\": expected a whole number from 1 (no replication) to 16" },
  { "max-replicas-not-a-number", "[master]\nmax_replicas = two\n[site a]\nscheduler = fork\n",
    ":2: max_replicas \"two\": expected a whole number" },
  { "bad-compact-min-bytes", "[master]\ncompact_min_bytes = 64M\n[site a]\nscheduler = fork\n",
    ":2: compact_min_bytes \"64M\": expected a whole number of bytes from 1, or never" },
  { "bad-compact-factor", "[master]\ncompact_factor = 1\n[site a]\nscheduler = fork\n",
    ":2: compact_factor \"1\": expected a whole number from 2 to 1000" },
  { "listen-not-tcp", "[master]\nlisten = ipc:///tmp/x\n[site a]\nscheduler = fork\n",
    ":2: listen must be tcp" },
  { "key-before-group", "scheduler = fork\n[site a]\nscheduler = fork\n",
    ":1: a key before any [group]" },
  { "not-key-value", "[site a]\nscheduler fork\n", ":2: expected KEY = VALUE" },
  { "no-sites", "[master]\nlisten = tcp://0.0.0.0:0\n", ":1: no [site NAME] group" },
  { "not-utf8", "[site a]\nscheduler = fork\nqueue = caf\xe9\n", ":3: invalid UTF-8 at byte 12" },
  { "text-after-group", "[site a] x\nscheduler = fork\n", ":1: nothing may follow ]" },
  { "empty-group-name", "[site a]\nscheduler = fork\n[]\n", ":3: Invalid group name" },
  { "invalid-key-name", "[site a]\nscheduler = fork\nqueue[x y] = q\n", ":3: Invalid key name" },
  { "unbalanced-quotes", "[site a]\nscheduler = fork\nsubmit_args = --name 'x\n",
    ":3: submit_args: unbalanced quotes" },
  { "bad-connect-wait", "[site a]\nscheduler = fork\nconnect_wait = 0\n",
    ":3: connect_wait \"0\"" },
  /* Remote agents would be told this host's name, or an ipc:// socket here. */
  { "wildcard-listen-without-advertise-for-an-ssh-site",
    "[master]\nlisten = tcp://0.0.0.0:0\n\n[site hpc]\ntransport = ssh\nhost = login\nscheduler = "
    "slurm\n",
    ":2: listen = tcp://0.0.0.0:0 is every address of this machine, and site hpc (line 5) is on "
    "another machine (transport ssh)" },
  { "ipv6-wildcard-listen-without-advertise-for-an-ssh-site",
    "[site hpc]\nscheduler = slurm\ntransport = ssh\nhost = login\n[master]\nlisten = "
    "tcp://[::]:7000\n",
    ":6: listen = tcp://[::]:7000 is every address" },
  { "star-listen-without-advertise-for-an-ssh-site",
    "[master]\nlisten = tcp://*:0\n[site hpc]\ntransport = ssh\nhost = login\nscheduler = slurm\n",
    ":2: listen = tcp://*:0 is every address" },
  { "ssh-site-without-a-listen", "[site hpc]\nscheduler = slurm\ntransport = ssh\nhost = login\n",
    ":3: site hpc is on another machine (transport ssh), but [master] has no listen" },
  { "ssh-site-with-a-master-but-no-listen",
    "[master]\nadvertise = 10.1.2.3\n[site hpc]\ntransport = ssh\nhost = login\nscheduler = "
    "slurm\n",
    ":4: site hpc is on another machine (transport ssh), but [master] has no listen: its agents "
    "would be told a socket on this machine; add [master] with listen = tcp://0.0.0.0:0 and "
    "advertise = HOST the nodes can reach" },
};

static void
test_bad (gconstpointer data)
{
  const Bad *c = data;
  g_autofree gchar *path = write_tmp (c->content);
  g_autoptr (GError) error = NULL;
  g_autoptr (DatcSitesFile) f = datc_sites_file_load (path, &error);
  g_assert_null (f);
  g_assert_error (error, DATC_SITES_ERROR, DATC_SITES_ERROR_INVALID);
  g_autofree gchar *want = g_strconcat (path, c->expect, NULL);
  if (strstr (error->message, want) == NULL)
    g_error ("expected \"%s\" in \"%s\"", want, error->message);
  g_unlink (path);
}

static void
test_all_problems_at_once (void)
{
  g_autofree gchar *path = write_tmp ("[site a]\ncolour = red\nslots_per_proxy = -1\n");
  g_autoptr (GError) error = NULL;
  g_autoptr (DatcSitesFile) f = datc_sites_file_load (path, &error);
  g_assert_null (f);
  g_assert_nonnull (strstr (error->message, ":2: unknown key"));
  g_assert_nonnull (strstr (error->message, ":3: slots_per_proxy"));
  g_assert_nonnull (strstr (error->message, ":1: [site a] needs scheduler"));
  g_unlink (path);
}

/* GKeyFile stops at the first syntax error: the lines after it must still
 * be read and their problems reported with the syntax error. */
static void
test_syntax_error_hides_nothing (void)
{
  g_autofree gchar *path = write_tmp ("[site a]\n"
                                      "scheduler = fork\n"
                                      "oops\n"
                                      "colour = red\n"
                                      "[site b\n"
                                      "queue = q\n"
                                      "[site c]\n"
                                      "scheduler = moab\n");
  g_autoptr (GError) error = NULL;
  g_autoptr (DatcSitesFile) f = datc_sites_file_load (path, &error);
  g_assert_null (f);
  g_assert_error (error, DATC_SITES_ERROR, DATC_SITES_ERROR_INVALID);
  const char *want[] = { ":3: expected KEY = VALUE", ":4: unknown key \"colour\"",
                         ":5: a group header needs a closing ]", ":8: unknown scheduler \"moab\"" };
  for (guint i = 0; i < G_N_ELEMENTS (want); i++)
    {
      g_autofree gchar *w = g_strconcat (path, want[i], NULL);
      if (strstr (error->message, w) == NULL)
        g_error ("expected \"%s\" in \"%s\"", w, error->message);
    }
  /* The key under the broken header belongs to no known group: not blamed. */
  g_assert_null (strstr (error->message, ":6:"));
  g_unlink (path);
}

/* A NUL byte is not text either, and the line holding it is named. */
static void
test_nul_byte_names_its_line (void)
{
  static const char content[] = "[site a]\nscheduler = fork\n\nqueue = a\0b\n";
  g_autoptr (GError) error = NULL;
  g_autofree gchar *path = write_tmp ("");
  g_file_set_contents (path, content, sizeof content - 1, &error);
  g_assert_no_error (error);
  g_autoptr (DatcSitesFile) f = datc_sites_file_load (path, &error);
  g_assert_null (f);
  g_assert_error (error, DATC_SITES_ERROR, DATC_SITES_ERROR_INVALID);
  g_autofree gchar *want = g_strconcat (path, ":4: NUL character at byte 10", NULL);
  if (strstr (error->message, want) == NULL)
    g_error ("expected \"%s\" in \"%s\"", want, error->message);
  g_unlink (path);
}

/* The refusal of a wildcard listen says what agents would be told and
 * what to set instead. */
static void
test_wildcard_listen_names_the_fix (void)
{
  g_autofree gchar *path
      = write_tmp ("[master]\nlisten = tcp://0.0.0.0:0\n"
                   "[site hpc]\ntransport = ssh\nhost = login\nscheduler = slurm\n");
  g_autoptr (GError) error = NULL;
  g_autoptr (DatcSitesFile) f = datc_sites_file_load (path, &error);
  g_assert_null (f);
  g_autofree gchar *name
      = g_strdup_printf ("would be told this host's name (%s)", g_get_host_name ());
  g_assert_nonnull (strstr (error->message, name));
  g_assert_true (g_str_has_suffix (error->message, "; set advertise = HOST the nodes can reach"));
  g_unlink (path);
}

/* What stays allowed: a wildcard listen for local sites only (their agents
 * run here), or with advertise; an ssh site with a listen that names an
 * address. */
static void
test_reachable_listens (void)
{
  const char *ok[] = {
    "[master]\nlisten = tcp://0.0.0.0:0\n[site a]\nscheduler = fork\n",
    "[master]\nlisten = tcp://0.0.0.0:0\nadvertise = 10.1.2.3\n"
    "[site hpc]\ntransport = ssh\nhost = login\nscheduler = slurm\n",
    "[master]\nlisten = tcp://10.1.2.3:0\n[site hpc]\ntransport = ssh\nhost = login\n"
    "scheduler = slurm\nconnect_wait = 5m\n",
    "[site a]\nscheduler = fork\n",
  };
  for (guint i = 0; i < G_N_ELEMENTS (ok); i++)
    {
      g_autofree gchar *path = write_tmp (ok[i]);
      g_autoptr (GError) error = NULL;
      g_autoptr (DatcSitesFile) f = datc_sites_file_load (path, &error);
      g_assert_no_error (error);
      g_assert_nonnull (f);
      if (i == 2)
        g_assert_cmpuint (((DatcSiteConfig *) f->sites->pdata[0])->connect_wait_s, ==, 300);
      g_unlink (path);
    }
}

static void
test_durations (void)
{
  struct {
    const char *text;
    guint s;
    gboolean ok;
  } cases[] = {
    { "90", 90, TRUE },      { "90s", 90, TRUE },
    { "30m", 1800, TRUE },   { "2h", 7200, TRUE },
    { "1h30m", 5400, TRUE }, { "1:30:00", 5400, TRUE },
    { "30:00", 1800, TRUE }, { "", 0, FALSE },
    { "1h30", 0, FALSE },    { "-5", 0, FALSE },
    { "1:60", 0, FALSE },    { "1d", 0, FALSE },
    { "1:2:3:4", 0, FALSE }, { "99999999999", 0, FALSE },
  };
  for (guint i = 0; i < G_N_ELEMENTS (cases); i++)
    {
      guint s = 0;
      g_assert_cmpint (datc_parse_duration (cases[i].text, &s), ==, cases[i].ok);
      if (cases[i].ok)
        g_assert_cmpuint (s, ==, cases[i].s);
    }
}

static void
test_missing_file (void)
{
  g_autoptr (GError) error = NULL;
  g_autoptr (DatcSitesFile) f = datc_sites_file_load ("/nonexistent/sites.ini", &error);
  g_assert_null (f);
  g_assert_error (error, DATC_SITES_ERROR, DATC_SITES_ERROR_IO);
  g_assert_cmpstr (error->message, ==, "sites file /nonexistent/sites.ini: no such file");
}

/* A key far from every known one gets no guess: a wrong hint is worse
 * than none. */
static void
test_no_far_fetched_suggestion (void)
{
  const char *keys[] = { "colour", "slots", "agnet_path", "walltimes_per_proxy" };
  for (guint i = 0; i < G_N_ELEMENTS (keys); i++)
    {
      g_autofree gchar *content = g_strdup_printf ("[site a]\nscheduler = fork\n%s = 1\n", keys[i]);
      g_autofree gchar *path = write_tmp (content);
      g_autoptr (GError) error = NULL;
      g_autoptr (DatcSitesFile) f = datc_sites_file_load (path, &error);
      g_assert_null (f);
      g_autofree gchar *want = g_strdup_printf ("unknown key \"%s\" in [site a]", keys[i]);
      g_assert_nonnull (strstr (error->message, want));
      g_assert_null (strstr (error->message, "did you mean"));
      g_unlink (path);
    }
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  g_test_add_func ("/sites/parse/reads-master-and-sites", test_valid);
  g_test_add_func ("/sites/parse/give-up-after-defaults-to-5-minutes-0-is-never",
                   test_give_up_after);
  g_test_add_func ("/sites/parse/max-replicas-defaults-to-2-1-is-off", test_max_replicas);
  g_test_add_func ("/sites/parse/compact-thresholds-or-never", test_compact_keys);
  for (guint i = 0; i < G_N_ELEMENTS (bad); i++)
    {
      g_autofree gchar *p = g_strdup_printf ("/sites/parse/rejects-%s", bad[i].name);
      g_test_add_data_func (p, &bad[i], test_bad);
    }
  g_test_add_func ("/sites/parse/reports-every-problem-at-once", test_all_problems_at_once);
  g_test_add_func ("/sites/parse/a-syntax-error-hides-no-other-problem",
                   test_syntax_error_hides_nothing);
  g_test_add_func ("/sites/parse/names-the-line-with-a-nul-byte", test_nul_byte_names_its_line);
  g_test_add_func ("/sites/parse/allows-listens-agents-can-reach", test_reachable_listens);
  g_test_add_func ("/sites/parse/a-wildcard-listen-names-the-fix",
                   test_wildcard_listen_names_the_fix);
  g_test_add_func ("/sites/duration/reads-the-usual-forms", test_durations);
  g_test_add_func ("/sites/parse/names-a-missing-file", test_missing_file);
  g_test_add_func ("/sites/parse/suggests-no-far-fetched-key", test_no_far_fetched_suggestion);
  return g_test_run ();
}
