/* test-cluster-bed.c: the cluster-shaped bed (tests/cluster.h) is what it
 * claims, per scheduler, checked from the outside: a job submitted over
 * SSH from the master's namespace runs in the compute namespace, cannot
 * reach the master and can reach the login node's cluster-facing address;
 * the master reaches the login node's sshd and nothing else there; a cut
 * session dies while sshd takes new ones; link A goes down and up.
 *
 * The bed comes up in this process for each case and goes down after it;
 * the body runs in a subprocess (g_test_trap_subprocess) that enters the
 * namespaces (setns) to open its sockets, so a failed assertion still
 * leaves nothing running.  The Grid Engine case takes /tmp/datc-sge.lock
 * (cl_sge_lock) unless the program runs under it already. */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cluster.h"
#include "harness.h"

/* ---- sockets in a namespace ------------------------------------------ */

/* Moves this thread (and so the sockets and processes it makes from now
 * on) into network namespace `ns`. */
static void
enter_netns (const char *ns)
{
  g_autofree gchar *path = g_strdup_printf ("/run/netns/%s", ns);
  int fd = open (path, O_RDONLY | O_CLOEXEC);
  g_assert_cmpint (fd, >=, 0);
  g_assert_cmpint (setns (fd, CLONE_NEWNET), ==, 0);
  close (fd);
}

static struct sockaddr_in
address (const char *addr, guint port)
{
  struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons (port) };
  g_assert_cmpint (inet_pton (AF_INET, addr, &sa.sin_addr), ==, 1);
  return sa;
}

/* A TCP listener on addr and a port the kernel picks (in *port). */
static int
listen_on (const char *addr, guint *port)
{
  struct sockaddr_in sa = address (addr, 0);
  socklen_t len = sizeof sa;
  int s = socket (AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  g_assert_cmpint (s, >=, 0);
  g_assert_cmpint (bind (s, (struct sockaddr *) &sa, sizeof sa), ==, 0);
  g_assert_cmpint (listen (s, 8), ==, 0);
  g_assert_cmpint (getsockname (s, (struct sockaddr *) &sa, &len), ==, 0);
  *port = ntohs (sa.sin_port);
  return s;
}

/* Connects to addr:port from this namespace within `timeout_ms`: 0 when
 * it did, else the errno (ETIMEDOUT when nothing answered in time). */
static int
try_connect (const char *addr, guint port, int timeout_ms)
{
  struct sockaddr_in sa = address (addr, port);
  int s = socket (AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  g_assert_cmpint (s, >=, 0);
  int err = 0;
  if (connect (s, (struct sockaddr *) &sa, sizeof sa) != 0)
    {
      err = errno;
      if (err == EINPROGRESS)
        {
          struct pollfd p = { .fd = s, .events = POLLOUT };
          int n = poll (&p, 1, timeout_ms);
          socklen_t len = sizeof err;
          if (n == 0)
            err = ETIMEDOUT;
          else
            g_assert_cmpint (getsockopt (s, SOL_SOCKET, SO_ERROR, &err, &len), ==, 0);
        }
    }
  close (s);
  return err;
}

/* Whether a connection waits on listener `s` (without waiting). */
static gboolean
pending (int s)
{
  struct pollfd p = { .fd = s, .events = POLLIN };
  return poll (&p, 1, 0) == 1;
}

/* ---- ssh from the master's namespace ---------------------------------- */

/* ssh to the login node as its user, running `command`. */
static GStrv
ssh_argv (ClBed *bed, const char *command)
{
  g_autofree gchar *port = g_strdup_printf ("%u", bed->login.port);
  g_autofree gchar *kh = g_strdup_printf ("UserKnownHostsFile=%s", bed->login.known_hosts);
  g_autofree gchar *to = g_strdup_printf ("%s@%s", bed->login.user, bed->login.addr);
  const char *argv[] = { "ssh",
                         "-F",
                         "/dev/null",
                         "-o",
                         "BatchMode=yes",
                         "-o",
                         "StrictHostKeyChecking=yes",
                         "-o",
                         kh,
                         "-o",
                         "ConnectTimeout=5",
                         "-i",
                         bed->login.identity,
                         "-p",
                         port,
                         to,
                         command,
                         NULL };
  return g_strdupv ((gchar **) argv);
}

/* Runs `command` on the login node; its stdout, or NULL with *error. */
static gchar *
ssh_run (ClBed *bed, const char *command, GError **error)
{
  g_auto (GStrv) argv = ssh_argv (bed, command);
  gchar *out = NULL;
  if (!ms_run ((const char *const *) argv, &out, error))
    return NULL;
  return out;
}

static gchar *
netns_id (const char *ns)
{
  g_autofree gchar *path = g_strdup_printf ("/run/netns/%s", ns);
  struct stat st;
  g_assert_cmpint (stat (path, &st), ==, 0);
  return g_strdup_printf ("net:[%llu]", (unsigned long long) st.st_ino);
}

/* ---- the checks ------------------------------------------------------- */

/* The job: where it ran, then whether it reaches the master's listener
 * and the login node's cluster-facing one (it writes a line there). */
static const char job_template[]
    = "#!/bin/sh\n"
      "out=%s/result\n"
      "{\n"
      "  echo \"host=$(hostname)\"\n"
      "  echo \"netns=$(readlink /proc/self/ns/net)\"\n"
      "  if timeout 5 bash -c 'exec 3<>/dev/tcp/%s/%u' 2>/dev/null; then echo master=open;"
      " else echo master=closed; fi\n"
      "  if timeout 5 bash -c 'exec 3<>/dev/tcp/%s/%u && echo from-the-job >&3' 2>/dev/null;"
      " then echo login=open; else echo login=closed; fi\n"
      "} >$out.tmp 2>&1\n"
      "mv $out.tmp $out\n";

static void
check_a_job (ClBed *bed, int master_listener, guint master_port, int login_listener,
             guint login_port)
{
  g_autofree gchar *job = g_build_filename (bed->login_remote_dir, "job.sh", NULL);
  g_autofree gchar *result = g_build_filename (bed->login_remote_dir, "result", NULL);
  g_autofree gchar *text = g_strdup_printf (job_template, bed->login_remote_dir, bed->master_addr,
                                            master_port, bed->login_cluster_addr, login_port);
  g_autoptr (GError) error = NULL;
  g_assert_true (g_file_set_contents (job, text, -1, &error));
  g_assert_cmpint (chmod (job, 0755), ==, 0);
  g_autofree gchar *submit
      = g_str_equal (bed->scheduler, "slurm")
            ? g_strdup_printf ("sbatch --parsable -o %s/job.out %s", bed->login_remote_dir, job)
            : g_strdup_printf ("qsub -o %s/job.out -e %s/job.err %s", bed->login_remote_dir,
                               bed->login_remote_dir, job);
  g_autofree gchar *said = ssh_run (bed, submit, &error);
  g_assert_no_error (error);
  g_printerr ("# %s said: %s", submit, said);
  g_assert_true (tb_await_file (result, 60));

  g_autofree gchar *got = NULL;
  g_assert_true (g_file_get_contents (result, &got, NULL, &error));
  g_autofree gchar *want_ns = netns_id (bed->ns_compute);
  g_autofree gchar *want = g_strdup_printf ("host=%s\nnetns=%s\nmaster=closed\nlogin=open\n",
                                            bed->compute_hostname, want_ns);
  g_assert_cmpstr (got, ==, want);

  /* The connection the job made came from the compute node's address, and
   * nothing ever reached the master. */
  struct sockaddr_in peer;
  socklen_t len = sizeof peer;
  g_assert_true (pending (login_listener));
  int c = accept (login_listener, (struct sockaddr *) &peer, &len);
  g_assert_cmpint (c, >=, 0);
  char from[INET_ADDRSTRLEN];
  g_assert_nonnull (inet_ntop (AF_INET, &peer.sin_addr, from, sizeof from));
  g_assert_cmpstr (from, ==, bed->compute_addr);
  char line[64] = { 0 };
  g_assert_cmpint (read (c, line, sizeof line - 1), >, 0);
  g_assert_cmpstr (line, ==, "from-the-job\n");
  close (c);
  g_assert_false (pending (master_listener));
}

/* A session held open (`cat` on the login node reading from this
 * process's pipe) is cut: the ssh client ends, the remote command sees
 * its input close and ends too, the listener stays and a new session
 * works. */
static void
check_cut_session (ClBed *bed)
{
  g_autoptr (GError) error = NULL;
  g_auto (GStrv) argv = ssh_argv (bed, "echo $$; exec cat");
  g_autoptr (TbProc) client = g_new0 (TbProc, 1);
  client->stderr_path = g_strdup ("/dev/null");
  client->stdout_path = g_strdup ("/dev/null");
  client->proc = g_subprocess_newv ((const char *const *) argv,
                                    G_SUBPROCESS_FLAGS_STDIN_PIPE | G_SUBPROCESS_FLAGS_STDOUT_PIPE
                                        | G_SUBPROCESS_FLAGS_STDERR_SILENCE,
                                    &error);
  g_assert_no_error (error);
  g_autoptr (GDataInputStream) out
      = g_data_input_stream_new (g_subprocess_get_stdout_pipe (client->proc));
  g_autofree gchar *pid_line = g_data_input_stream_read_line (out, NULL, NULL, &error);
  g_assert_no_error (error);
  g_assert_nonnull (pid_line);
  int remote = atoi (pid_line);
  g_assert_cmpint (remote, >, 1);
  g_autofree gchar *ns_path = g_strdup_printf ("/proc/%d/ns/net", remote);
  g_autofree gchar *remote_ns = g_file_read_link (ns_path, NULL);
  g_autofree gchar *login_ns = netns_id (bed->login.ns);
  g_assert_cmpstr (remote_ns, ==, login_ns);

  g_autofree gchar *sshd_env = g_build_filename (bed->login.sshd_dir, "sshd.env", NULL);
  g_autoptr (GHashTable) env = ms_env_read (sshd_env, &error);
  g_assert_no_error (error);
  int listener = atoi (g_hash_table_lookup (env, "SSHD_PID"));

  g_assert_true (cl_cut_session (bed, &error));
  g_assert_no_error (error);
  g_assert_cmpint (tb_wait (client, 15), ==, 255);
  gint64 deadline = g_get_monotonic_time () + 10 * G_USEC_PER_SEC;
  while (!tb_pid_gone (remote) && g_get_monotonic_time () < deadline)
    g_usleep (10000);
  if (!tb_pid_gone (remote))
    kill (remote, SIGKILL);
  g_assert_true (tb_pid_gone (remote));
  g_assert_false (tb_pid_gone (listener));

  /* Nothing left to cut now. */
  g_assert_false (cl_cut_session (bed, &error));
  g_assert_nonnull (error);
  g_clear_error (&error);
  g_autofree gchar *again = ssh_run (bed, "echo again", &error);
  g_assert_no_error (error);
  g_assert_cmpstr (again, ==, "again\n");
}

static void
check_link (ClBed *bed)
{
  g_autoptr (GError) error = NULL;
  g_assert_true (cl_link_set (bed, FALSE, &error));
  g_assert_no_error (error);
  /* The master's end keeps its address and route, but no carrier: packets
   * go nowhere. */
  g_assert_cmpint (try_connect (bed->login.addr, bed->login.port, 2000), ==, ETIMEDOUT);
  g_assert_true (cl_link_set (bed, TRUE, &error));
  g_assert_no_error (error);
  g_autofree gchar *back = ssh_run (bed, "hostname", &error);
  g_assert_no_error (error);
  g_autofree gchar *want = g_strdup_printf ("%s\n", bed->login_hostname);
  g_assert_cmpstr (back, ==, want);
}

static void
check_layout (void)
{
  g_autoptr (GError) error = NULL;
  g_autoptr (ClBed) bed = cl_bed_load (g_getenv ("DATC_CL_BED"), &error);
  g_assert_no_error (error);

  /* On the login node: a listener on each link.  The one on link A takes
   * connections there (so only a firewall can keep the master out). */
  enter_netns (bed->login.ns);
  guint port_b = 0, port_a = 0;
  int on_b = listen_on (bed->login_cluster_addr, &port_b);
  int on_a = listen_on (bed->login.addr, &port_a);
  g_assert_cmpint (try_connect (bed->login.addr, port_a, 2000), ==, 0);
  g_assert_true (pending (on_a));
  close (accept (on_a, NULL, NULL));
  g_autofree gchar *forward = NULL;
  g_assert_true (g_file_get_contents ("/proc/sys/net/ipv4/ip_forward", &forward, NULL, NULL));
  g_assert_cmpstr (forward, ==, "0\n");

  /* From the master: the sshd answers, the other port never does, link B
   * has no route. */
  enter_netns (bed->ns_master);
  guint port_m = 0;
  int on_m = listen_on (bed->master_addr, &port_m);
  g_assert_cmpint (try_connect (bed->login.addr, bed->login.port, 5000), ==, 0);
  g_assert_cmpint (try_connect (bed->login.addr, port_a, 2000), ==, ETIMEDOUT);
  g_assert_false (pending (on_a));
  g_assert_cmpint (try_connect (bed->login_cluster_addr, port_b, 2000), ==, ENETUNREACH);

  /* Over SSH: the login node's name, its cluster's environment. */
  g_autofree gchar *who = ssh_run (bed, "hostname; id -un", &error);
  g_assert_no_error (error);
  g_autofree gchar *want_who = g_strdup_printf ("%s\n%s\n", bed->login_hostname, bed->login.user);
  g_assert_cmpstr (who, ==, want_who);

  /* The scheduler answers on the login node, as the login node. */
  const char *const slurm_argv[] = { "sinfo", "-h", "-o", "%P", NULL };
  const char *const sge_argv[] = { "qstat", "-f", "-q", "all.q", NULL };
  gboolean slurm = g_str_equal (bed->scheduler, "slurm");
  g_autofree gchar *answer = NULL;
  cl_login_command (bed, bed->login.user, slurm ? slurm_argv : sge_argv, &answer, &error);
  g_assert_no_error (error);
  g_autofree gchar *queue = g_strdup_printf ("all.q@%s ", bed->compute_hostname);
  if (slurm)
    g_assert_cmpstr (answer, ==, "batch*\n");
  else
    g_assert_nonnull (strstr (answer, queue));

  check_a_job (bed, on_m, port_m, on_b, port_b);
  check_cut_session (bed);
  check_link (bed);
  close (on_a);
  close (on_b);
  close (on_m);
}

static void
layout (gconstpointer data)
{
  const char *scheduler = data;
  if (g_test_subprocess ())
    {
      check_layout ();
      return;
    }
  g_autoptr (GError) error = NULL;
  int lock = -1;
  if (g_str_equal (scheduler, "sge"))
    {
      g_assert_true (cl_sge_lock (600, &lock, &error));
      g_assert_no_error (error);
    }
  g_autofree gchar *dir
      = g_strdup_printf ("/tmp/datc-cluster-bed-%d-%s", (int) getpid (), scheduler);
  gint64 t0 = g_get_monotonic_time ();
  g_autoptr (ClBed) bed = cl_bed_up (dir, scheduler, &error);
  g_assert_no_error (error);
  g_printerr ("# %s cluster bed up in %.1f s (%s)\n", scheduler,
              (g_get_monotonic_time () - t0) / 1e6, dir);
  g_setenv ("DATC_CL_BED", dir, TRUE);
  g_test_trap_subprocess (NULL, 300 * G_USEC_PER_SEC, G_TEST_SUBPROCESS_INHERIT_STDERR);
  t0 = g_get_monotonic_time ();
  gboolean down = cl_bed_down (bed, &error);
  g_printerr ("# %s cluster bed down in %.1f s\n", scheduler, (g_get_monotonic_time () - t0) / 1e6);
  if (lock >= 0)
    close (lock);
  gboolean keep = g_getenv ("DATC_TEST_KEEP") != NULL || !g_test_trap_has_passed () || !down;
  if (!keep)
    {
      const char *rm[] = { "rm", "-rf", "--", dir, NULL };
      g_spawn_sync (NULL, (gchar **) rm, NULL, G_SPAWN_SEARCH_PATH, NULL, NULL, NULL, NULL, NULL,
                    NULL);
    }
  else
    g_printerr ("# kept %s\n", dir);
  g_assert_no_error (error);
  g_test_trap_assert_passed ();
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  g_test_add_data_func ("/cluster/slurm/layout", "slurm", layout);
  g_test_add_data_func ("/cluster/sge/layout", "sge", layout);
  return g_test_run ();
}
