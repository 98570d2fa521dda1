/* test-static-agent.c: datc-agent-static (-Dstatic_agent=true) is what
 * `agent = upload` sends to sites, so it must run on a node whatever its
 * libraries.  Proved three ways:
 *   - its ELF headers: no interpreter (PT_INTERP), no DT_NEEDED, ET_EXEC;
 *     the dynamic datc-agent read by the same code has both, so the check
 *     can fail;
 *   - a campaign whose fork site starts it in a mount namespace where
 *     /usr/lib is an empty tmpfs (on Debian 12 that hides /lib, /lib64 and
 *     the dynamic loader too) and nsswitch.conf names a missing module: it
 *     connects to the master over TCP with CURVE, by host name
 *     (`localhost`, from /etc/hosts), and runs statically linked tasks,
 *     while a dynamic task in the same agent cannot even start;
 *   - `agent = upload` on a fork site copies exactly datc-agent-static into
 *     the content-addressed cache and the campaign runs on it. */
#include <elf.h>
#include <sys/stat.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"

static const char *
env_path (const char *name)
{
  const char *p = g_getenv (name);
  if (p == NULL || !g_file_test (p, G_FILE_TEST_IS_EXECUTABLE))
    g_error ("%s is not set to an executable (meson sets it with -Dstatic_agent=true)", name);
  return p;
}

typedef struct {
  guint16 type;     /* e_type: ET_EXEC, ET_DYN */
  gboolean interp;  /* has a PT_INTERP: needs a dynamic loader */
  gboolean dynamic; /* has a PT_DYNAMIC */
  guint needed;     /* DT_NEEDED entries: shared libraries it names */
} Linkage;

/* Reads the linkage of an x86-64 ELF file from its program headers; every
 * offset is checked against the file's size before it is read. */
static Linkage
elf_linkage (const char *path)
{
  g_autofree gchar *data = NULL;
  gsize len = 0;
  g_autoptr (GError) error = NULL;
  g_assert_true (g_file_get_contents (path, &data, &len, &error));
  g_assert_no_error (error);
  Elf64_Ehdr eh;
  g_assert_cmpuint (len, >=, sizeof eh);
  memcpy (&eh, data, sizeof eh);
  g_assert_cmpint (memcmp (eh.e_ident, ELFMAG, SELFMAG), ==, 0);
  g_assert_cmpint (eh.e_ident[EI_CLASS], ==, ELFCLASS64);
  g_assert_cmpint (eh.e_machine, ==, EM_X86_64);
  g_assert_cmpuint (eh.e_phentsize, ==, sizeof (Elf64_Phdr));
  g_assert_cmpuint (eh.e_phoff, <=, len);
  g_assert_cmpuint ((guint64) eh.e_phnum * sizeof (Elf64_Phdr), <=, len - eh.e_phoff);
  Linkage l = { .type = eh.e_type };
  for (guint i = 0; i < eh.e_phnum; i++)
    {
      Elf64_Phdr ph;
      memcpy (&ph, data + eh.e_phoff + (gsize) i * sizeof ph, sizeof ph);
      if (ph.p_type == PT_INTERP)
        l.interp = TRUE;
      if (ph.p_type != PT_DYNAMIC)
        continue;
      l.dynamic = TRUE;
      g_assert_cmpuint (ph.p_offset, <=, len);
      g_assert_cmpuint (ph.p_filesz, <=, len - ph.p_offset);
      for (guint64 off = 0; off + sizeof (Elf64_Dyn) <= ph.p_filesz; off += sizeof (Elf64_Dyn))
        {
          Elf64_Dyn dyn;
          memcpy (&dyn, data + ph.p_offset + off, sizeof dyn);
          if (dyn.d_tag == DT_NULL)
            break;
          l.needed += dyn.d_tag == DT_NEEDED;
        }
    }
  return l;
}

static void
test_elf_is_static (void)
{
  Linkage s = elf_linkage (env_path ("DATC_AGENT_STATIC"));
  g_assert_false (s.interp);
  g_assert_cmpuint (s.needed, ==, 0);
  /* `file` says "statically linked" (a static-pie would be ET_DYN). */
  g_assert_cmpuint (s.type, ==, ET_EXEC);
  g_assert_false (s.dynamic);

  /* The same reader sees the dynamic agent for what it is. */
  Linkage d = elf_linkage (tb_agent ());
  g_assert_true (d.interp);
  g_assert_true (d.dynamic);
  g_assert_cmpuint (d.needed, >=, 3); /* libc, glib, zmq at least */
}

/* An agent wrapper that starts the static agent on a "node" unlike this
 * one, in a private mount namespace (the host never sees it) that ends
 * with the agent:
 *   - /usr/lib under an empty read-only tmpfs: no shared library and no
 *     dynamic loader at all;
 *   - an /etc/nsswitch.conf whose hosts line names only "nis", a module
 *     that is not there: glibc would fail every host lookup, so the agent
 *     resolves `localhost` only because it keeps to "files dns"
 *     (worker-agent/libc-static.c).
 * The exec chain keeps the proxy's pid, so the fork scheduler's poll and
 * cancel still see the agent. */
static gchar *
no_libs_wrapper (TbDir *d, const char *agent)
{
  g_autofree gchar *nss = tb_write (d, "nsswitch.conf", "hosts: nis\n");
  g_autofree gchar *q = g_shell_quote (agent);
  g_autofree gchar *qnss = g_shell_quote (nss);
  g_autofree gchar *inner = g_strdup_printf (
      "mount --bind %s /etc/nsswitch.conf"
      " && mount -t tmpfs -o ro,size=16k datc-no-libs /usr/lib && exec \"$0\" \"$@\"",
      qnss);
  g_autofree gchar *qinner = g_shell_quote (inner);
  g_autofree gchar *text = g_strdup_printf (
      "#!/bin/sh\nexec unshare --mount --propagation private %s /bin/sh -c %s %s \"$@\"\n",
      getuid () == 0 ? "" : "--map-root-user", qinner, q);
  gchar *path = tb_write (d, "no-libs-node.sh", text);
  g_assert_cmpint (chmod (path, 0755), ==, 0);
  return path;
}

/* Every proxy script in a site's work directory, concatenated. */
static gchar *
proxy_scripts (const char *wd)
{
  g_autoptr (GDir) dh = g_dir_open (wd, 0, NULL);
  g_assert_nonnull (dh);
  GString *all = g_string_new (NULL);
  const char *n;
  while ((n = g_dir_read_name (dh)) != NULL)
    if (g_str_has_suffix (n, ".sh"))
      {
        g_autofree gchar *p = g_build_filename (wd, n, NULL);
        g_autofree gchar *text = NULL;
        g_assert_true (g_file_get_contents (p, &text, NULL, NULL));
        g_string_append (all, text);
      }
  return g_string_free (all, FALSE);
}

#define STATIC_TASKS 24

static void
test_runs_on_a_node_without_libraries (void)
{
  g_autoptr (TbDir) d = tb_dir_new ();
  const char *task = env_path ("DATC_STATIC_TASK");
  g_autofree gchar *wrapper = no_libs_wrapper (d, env_path ("DATC_AGENT_STATIC"));
  g_autoptr (GString) lines = g_string_new (NULL);
  for (guint i = 1; i <= STATIC_TASKS; i++)
    g_string_append_printf (lines, "%s word%u\n", task, i);
  /* The control: a dynamically linked program cannot start there. */
  g_string_append (lines, "/bin/true\n");
  g_autofree gchar *tasks = tb_write (d, "t.txt", lines->str);
  g_autofree gchar *sites_text = g_strdup_printf (
      "[master]\nlisten = tcp://127.0.0.1:0\nadvertise = localhost\n\n"
      "[site bare]\nscheduler = fork\nslots_per_proxy = 3\nmax_proxies = 1\nagent = %s\n",
      wrapper);
  g_autofree gchar *sites = tb_write (d, "sites.ini", sites_text);
  g_autofree gchar *dir = g_build_filename (d->path, "c", NULL);
  const char *argv[]
      = { tb_datc (),          "run", "--dir", dir, "--sites", sites, "--no-progress",
          "--keep-site-files", tasks, NULL };
  g_autofree gchar *err = NULL;
  int status = tb_run (d, argv, 120, &err);
  if (status != 1)
    g_printerr ("%s", err);
  g_assert_cmpint (status, ==, 1); /* one task failed: the control */

  /* The agent was told a host name and the master's CURVE key. */
  g_autofree gchar *wd = g_build_filename (dir, "proxies", "bare", NULL);
  g_autofree gchar *scripts = proxy_scripts (wd);
  g_assert_nonnull (strstr (scripts, "--connect 'tcp://localhost:"));
  g_assert_nonnull (strstr (scripts, "--server-key"));

  g_autoptr (GHashTable) res = tb_results (dir);
  g_assert_cmpuint (g_hash_table_size (res), ==, STATIC_TASKS + 1);
  for (guint id = 1; id <= STATIC_TASKS + 1; id++)
    {
      gint64 key = id;
      JsonObject *o = g_hash_table_lookup (res, &key);
      g_assert_nonnull (o);
      g_assert_cmpstr (json_object_get_string_member (o, "site"), ==, "bare");
      const char *st = json_object_get_string_member (o, "status");
      gint64 code = json_object_get_int_member (o, "exit_code");
      if (id <= STATIC_TASKS)
        {
          g_assert_cmpstr (st, ==, "exited");
          g_assert_cmpint (code, ==, 0);
        }
      else
        {
          g_assert_cmpstr (st, ==, "spawn-failed");
          g_assert_cmpint (code, ==, 127);
        }
    }
  /* What a task printed came back through the agent. */
  const char *out_argv[] = { tb_datc (), "output", dir, "7", NULL };
  g_autoptr (TbProc) out = tb_spawn (d, "output", out_argv);
  g_assert_cmpint (tb_wait (out, 30), ==, 0);
  g_autofree gchar *text = tb_proc_stdout (out);
  g_assert_true (g_str_has_prefix (text, "static task word7 ran as pid "));
  g_autoptr (GArray) left = tb_find_agents (d->path);
  g_assert_cmpuint (left->len, ==, 0);
}

static void
test_upload_sends_the_static_agent (void)
{
  g_autoptr (TbDir) d = tb_dir_new ();
  const char *static_agent = env_path ("DATC_AGENT_STATIC");
  /* datc finds datc-agent-static beside the agent it was given. */
  g_autofree gchar *beside = g_path_get_dirname (tb_agent ());
  g_autofree gchar *expected = g_build_filename (beside, "datc-agent-static", NULL);
  g_assert_cmpstr (expected, ==, static_agent);

  g_autoptr (GString) lines = g_string_new (NULL);
  for (guint i = 0; i < 12; i++)
    g_string_append (lines, "true\n");
  g_autofree gchar *tasks = tb_write (d, "t.txt", lines->str);
  g_autofree gchar *work = g_build_filename (d->path, "work", NULL);
  g_autofree gchar *sites_text
      = g_strdup_printf ("[master]\nlisten = tcp://127.0.0.1:0\n\n"
                         "[site up]\nscheduler = fork\nslots_per_proxy = 2\nmax_proxies = 2\n"
                         "agent = upload\nworkdir = %s\n",
                         work);
  g_autofree gchar *sites = tb_write (d, "sites.ini", sites_text);
  g_autofree gchar *dir = g_build_filename (d->path, "c", NULL);
  const char *argv[]
      = { tb_datc (),          "run", "--dir", dir, "--sites", sites, "--no-progress",
          "--keep-site-files", tasks, NULL };
  g_autofree gchar *err = NULL;
  int status = tb_run (d, argv, 120, &err);
  if (status != 0)
    g_printerr ("%s", err);
  g_assert_cmpint (status, ==, 0);
  g_autoptr (GHashTable) res = tb_results (dir);
  g_assert_cmpuint (g_hash_table_size (res), ==, 12);

  /* The cache holds the static agent, named by its content hash. */
  g_autofree gchar *bytes = NULL;
  gsize len = 0;
  g_assert_true (g_file_get_contents (static_agent, &bytes, &len, NULL));
  g_autofree gchar *sum
      = g_compute_checksum_for_data (G_CHECKSUM_SHA256, (const guchar *) bytes, len);
  g_autofree gchar *name = g_strdup_printf ("datc-agent-%.16s", sum);
  g_autofree gchar *cached = g_build_filename (work, name, NULL);
  g_autofree gchar *copy = NULL;
  gsize copy_len = 0;
  g_assert_true (g_file_get_contents (cached, &copy, &copy_len, NULL));
  g_assert_cmpmem (copy, copy_len, bytes, len);
  /* And the proxies ran that copy. */
  g_autofree gchar *scripts = proxy_scripts (work);
  g_assert_nonnull (strstr (scripts, name));
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  g_test_add_func ("/static-agent/elf-has-no-interpreter-and-needs-no-library", test_elf_is_static);
  g_test_add_func ("/static-agent/runs-tasks-over-curve-on-a-node-without-libraries",
                   test_runs_on_a_node_without_libraries);
  g_test_add_func ("/static-agent/upload-sends-the-static-agent",
                   test_upload_sends_the_static_agent);
  return g_test_run ();
}
