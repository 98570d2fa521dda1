/* workdir.c: see workdir.h.  One sh script does the work on the site, so
 * ssh and local sites are checked by the same lines, where the owners and
 * modes are; the path is made plain here first (no "." or "..", no empty
 * component, no control character), so the walk up the parents cannot
 * be led around by the name. */

#include "workdir.h"

#include "drivers-private.h"

#include <string.h>

/* $1: the workdir (absolute, "~" or "~/..."), $2: make | check.  Prints
 * one line and exits 0 (make: the absolute workdir; check: what was
 * found) or 1 (what is wrong, naming the directory).  `mine`: a real
 * directory of the login user; `closed`: writable by no one else;
 * `parents`: from a directory up to the home directory (the user's or
 * root's, closed) or to the first of root's (the system's: closed, or
 * sticky like /tmp, where no one else can rename what is ours).  For
 * root every directory is root's, so the walk stops at the first parent
 * datc did not make. */
static const char workdir_script[]
    = "set -f\n"
      "d=$1 mode=$2\n"
      "bad() { echo \"$*\"; exit 1; }\n"
      "me=$(id -u) || exit 2\n"
      "h=$(cd \"${HOME:-/nonexistent}\" 2>/dev/null && pwd -P) || h=\n"
      "case $d in\n"
      "  \"~\"|\"~/\"*)\n"
      "    [ -n \"$h\" ] || bad \"cannot resolve $d: no home directory (HOME=${HOME-})\"\n"
      "    d=${h%/}${d#\"~\"}; [ -n \"$d\" ] || d=/ ;;\n"
      "  /*) ;;\n"
      "  *) bad \"$d is not an absolute path (nor ~/...)\" ;;\n"
      "esac\n"
      "stat_of() {\n"
      "  l=$(ls $1 \"$2\" 2>&1) || bad \"cannot look at $2: $l\"\n"
      "  set -- $l\n"
      "  m=$(printf %.10s \"$1\") u=$3\n"
      "}\n"
      "mine() {\n"
      "  [ -L \"$1\" ] && bad \"$1 is a symbolic link\"\n"
      "  [ -d \"$1\" ] || bad \"$1 is not a directory\"\n"
      "  stat_of -ldn \"$1\"\n"
      "  [ \"$u\" = \"$me\" ] || bad \"$1 belongs to another user (uid $u, not $me)\"\n"
      "}\n"
      "closed() {\n"
      "  case $m in\n"
      "    ?????w*) bad \"$1 is $m, writable by its group: chmod g-w it\" ;;\n"
      "    ????????w*) bad \"$1 is $m, writable by other users: chmod o-w it\" ;;\n"
      "  esac\n"
      "}\n"
      "workdir() {\n"
      "  mine \"$1\"\n"
      "  case $m in d\?\?\?------) ;; *) bad \"$1 is $m, open to other users: chmod 700 it\" ;; "
      "esac\n"
      "}\n"
      "parents() {\n"
      "  a=$1\n"
      "  while :; do\n"
      "    if { [ -n \"$h\" ] && [ \"$a\" = \"$h\" ]; } || [ \"$a\" = \"${HOME-}\" ]; then\n"
      "      [ -d \"$a\" ] || bad \"$a is not a directory\"\n"
      "      stat_of -ldLn \"$a\"\n"
      "      [ \"$u\" = \"$me\" ] || [ \"$u\" = 0 ] || bad \"$a belongs to another user (uid $u, "
      "not $me)\"\n"
      "      closed \"$a\"; return\n"
      "    fi\n"
      "    stat_of -ldn \"$a\"\n"
      "    if [ \"$u\" = 0 ]; then\n"
      "      stat_of -ldLn \"$a\"\n"
      "      [ -d \"$a\" ] || bad \"$a is not a directory\"\n"
      "      case $m in ?????????[tT]) ;; *) closed \"$a\" ;; esac\n"
      "      return\n"
      "    fi\n"
      "    mine \"$a\"; closed \"$a\"\n"
      "    [ \"$a\" != / ] || return\n"
      "    a=$(dirname \"$a\")\n"
      "  done\n"
      "}\n"
      "p=$d\n"
      "while [ ! -e \"$p\" ] && [ ! -L \"$p\" ]; do p=$(dirname \"$p\"); done\n"
      "if [ \"$p\" = \"$d\" ]; then\n"
      "  workdir \"$d\"\n"
      "  [ \"$d\" = / ] || parents \"$(dirname \"$d\")\"\n"
      "  if [ \"$mode\" = check ]; then\n"
      "    t=$(mktemp \"$d/.datc-check.XXXXXX\" 2>&1) || bad \"cannot write in $d: $t\"\n"
      "    rm -f \"$t\"\n"
      "    echo \"$d: yours, 0700, writable\"; exit 0\n"
      "  fi\n"
      "  echo \"$d\"; exit 0\n"
      "fi\n"
      "[ -d \"$p\" ] || bad \"cannot create $d: $p is not a directory\"\n"
      "parents \"$p\"\n"
      "if [ \"$mode\" = check ]; then\n"
      "  t=$(mktemp -d \"$p/.datc-check.XXXXXX\" 2>&1) || bad \"cannot create $d: $t\"\n"
      "  rmdir \"$t\"\n"
      "  echo \"$d: can be created (0700) in $p\"; exit 0\n"
      "fi\n"
      "c=${p%/} rest=${d#\"${p%/}\"}\n"
      "while [ -n \"$rest\" ]; do\n"
      "  rest=${rest#/} n=${rest%%/*}; rest=${rest#\"$n\"}\n"
      "  c=$c/$n\n"
      "  if e=$(mkdir -m 700 \"$c\" 2>&1); then\n"
      "    mine \"$c\"\n"
      "    [ \"$m\" = drwx------ ] || bad \"$c was made $m, not drwx------\"\n"
      "  elif [ -e \"$c\" ] || [ -L \"$c\" ]; then\n"
      "    mine \"$c\"; closed \"$c\"\n"
      "  else\n"
      "    bad \"cannot create $c: $e\"\n"
      "  fi\n"
      "done\n"
      "workdir \"$d\"\n"
      "echo \"$d\"\n";

/* `workdir` without empty, "." or ".." components or a trailing '/'
 * (transfer full), or NULL and an error naming it. */
static gchar *
plain_workdir (const char *site_name, const char *workdir, GError **error)
{
  gboolean home = workdir[0] == '~' && (workdir[1] == '\0' || workdir[1] == '/');
  const char *why = NULL;

  if (!home && workdir[0] != '/')
    why = "not an absolute path (nor ~/...)";
  for (const char *c = workdir; why == NULL && *c != '\0'; c++)
    if (g_ascii_iscntrl (*c))
      why = "a control character in it";
  g_auto (GStrv) parts = why == NULL ? g_strsplit (workdir + 1, "/", -1) : NULL;
  GString *out = g_string_new (home ? "~" : "");
  for (guint i = 0; why == NULL && parts[i] != NULL; i++)
    {
      if (strcmp (parts[i], ".") == 0 || strcmp (parts[i], "..") == 0)
        why = "'.' or '..' in it";
      else if (parts[i][0] != '\0')
        g_string_append_printf (out, "/%s", parts[i]);
    }
  if (why != NULL)
    {
      g_autofree gchar *escaped = g_strescape (workdir, NULL);
      g_set_error (error, DATC_SITE_ERROR, DATC_SITE_ERROR_CONFIG, "site %s: workdir '%s': %s",
                   site_name, escaped, why);
      g_string_free (out, TRUE);
      return NULL;
    }
  if (out->len == 0)
    g_string_append_c (out, '/');
  return g_string_free (out, FALSE);
}

/* Runs the script; *ok, and *line (transfer full) its one line. */
static gboolean
run_script (DatcSite *site, const char *workdir, const char *mode, gboolean *ok, gchar **line,
            GError **error)
{
  g_autofree gchar *plain = plain_workdir (datc_site_name (site), workdir, error);
  if (plain == NULL)
    return FALSE;

  const char *argv[] = { "/bin/sh", "-c", workdir_script, "datc-workdir", plain, mode, NULL };
  g_auto (DatcCommandResult) res = { 0 };
  g_autofree gchar *out = NULL;
  if (!datc_site_run (site, argv, &res, error))
    {
      g_prefix_error (error, "workdir %s: ", plain);
      return FALSE;
    }
  if (res.exit_status != 0 && res.exit_status != 1)
    {
      datc_site_set_command_error (error, "the workdir check", &res);
      g_prefix_error (error, "site %s: workdir %s: ", datc_site_name (site), plain);
      return FALSE;
    }
  if (!datc_site_answer_text (res.out, "the workdir check's stdout", &out, error))
    {
      g_prefix_error (error, "site %s: workdir %s: ", datc_site_name (site), plain);
      return FALSE;
    }
  gsize n = strcspn (out, "\n");
  if (n == 0)
    {
      g_autofree gchar *quoted = datc_site_quote_output (res.err);
      g_set_error (error, DATC_SITE_ERROR, DATC_SITE_ERROR_PARSE,
                   "site %s: workdir %s: the check said nothing (stderr: %s)",
                   datc_site_name (site), plain, quoted);
      return FALSE;
    }
  *ok = res.exit_status == 0;
  *line = g_utf8_make_valid (out, (gssize) n);
  return TRUE;
}

gboolean
datc_site_make_workdir (DatcSite *site, const char *workdir, gchar **resolved, GError **error)
{
  g_return_val_if_fail (site != NULL && workdir != NULL && resolved != NULL, FALSE);
  g_return_val_if_fail (error == NULL || *error == NULL, FALSE);

  gboolean ok = FALSE;
  g_autofree gchar *line = NULL;
  if (!run_script (site, workdir, "make", &ok, &line, error))
    return FALSE;
  if (!ok)
    {
      g_set_error (error, DATC_SITE_ERROR, DATC_SITE_ERROR_CONFIG, "site %s: workdir %s: %s",
                   datc_site_name (site), workdir, line);
      return FALSE;
    }
  if (!g_path_is_absolute (line))
    {
      g_set_error (error, DATC_SITE_ERROR, DATC_SITE_ERROR_PARSE,
                   "site %s: workdir %s: the check answered '%s', not an absolute path",
                   datc_site_name (site), workdir, line);
      return FALSE;
    }
  *resolved = g_steal_pointer (&line);
  return TRUE;
}

gboolean
datc_site_check_workdir (DatcSite *site, const char *workdir, gboolean *ok, gchar **detail,
                         GError **error)
{
  g_return_val_if_fail (site != NULL && workdir != NULL && ok != NULL && detail != NULL, FALSE);
  g_return_val_if_fail (error == NULL || *error == NULL, FALSE);

  return run_script (site, workdir, "check", ok, detail, error);
}
