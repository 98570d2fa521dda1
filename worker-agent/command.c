/* command.c: decides whether a task's shell line can be executed directly.
 *
 * Most task lines are "prog arg arg".  Running them through `/bin/sh -c`
 * costs a second exec (and a shell start-up) per task, which dominates for
 * short tasks.  Like make, we split a line on blanks and exec it ourselves
 * when, and only when, the shell would do nothing but split it on blanks:
 * no quoting, expansion, redirection, globbing, grouping, comments, and a
 * first word that is neither a builtin/keyword nor an assignment.  Anything
 * in doubt goes to the shell; being wrong that way only costs speed.
 *
 * '%' is deliberately NOT special: the shell gives it meaning only inside
 * ${...} (which needs '$') and as a job spec for job-control builtins (which
 * are in the builtin set, and a fresh `sh -c` has no jobs anyway).  Task
 * lines like `printf %s x` or `date +%s` therefore stay direct.  '=' is
 * special only in the first word, where it would make an assignment; in
 * later words (`dd if=x of=y`) the shell passes it through unchanged. */
#include "command.h"

#include <string.h>

/* Characters that make the shell do more than split words. */
static const char shell_special[] = "'\"$`\\;&|<>(){}[]*?~#!\n";

/* First words the shell interprets itself (builtins that affect the shell
 * or have no executable twin, and reserved words).  Programs that also
 * exist as executables (echo, printf, test, kill, true, false, pwd) behave
 * the same when exec'd, so they stay direct.  Bash-only builtins are listed
 * too: under a dash /bin/sh they would fail either way, and a shell is the
 * right place to fail. */
static const char *const shell_words[] = {
  ".",        ":",       "alias",   "bg",      "bind",     "break",    "builtin", "caller",
  "case",     "cd",      "command", "compgen", "complete", "continue", "coproc",  "declare",
  "dirs",     "disown",  "do",      "done",    "elif",     "else",     "enable",  "esac",
  "eval",     "exec",    "exit",    "export",  "fc",       "fg",       "fi",      "for",
  "function", "getopts", "hash",    "help",    "history",  "if",       "in",      "jobs",
  "let",      "local",   "logout",  "mapfile", "popd",     "pushd",    "read",    "readarray",
  "readonly", "return",  "select",  "set",     "shift",    "shopt",    "source",  "suspend",
  "then",     "time",    "times",   "trap",    "type",     "typeset",  "ulimit",  "umask",
  "unalias",  "unset",   "until",   "wait",    "while",
};

static gboolean
is_blank (char c)
{
  return c == ' ' || c == '\t';
}

static gboolean
is_shell_word (const char *word)
{
  /* A path is never one of them (and most task lines start with one). */
  if (strchr (word, '/') != NULL)
    return FALSE;
  for (gsize i = 0; i < G_N_ELEMENTS (shell_words); i++)
    if (strcmp (word, shell_words[i]) == 0)
      return TRUE;
  return FALSE;
}

/* Splits `line` into its blank-separated words, or returns NULL when the
 * shell is needed. */
static gchar **
split_plain (const char *line)
{
  if (line[strcspn (line, shell_special)] != '\0')
    return NULL;

  g_autoptr (GPtrArray) words = g_ptr_array_new_with_free_func (g_free);
  const char *p = line;
  for (;;)
    {
      while (is_blank (*p))
        p++;
      if (*p == '\0')
        break;
      const char *start = p;
      while (*p != '\0' && !is_blank (*p))
        p++;
      g_ptr_array_add (words, g_strndup (start, p - start));
    }

  if (words->len == 0)
    return NULL;
  const char *first = g_ptr_array_index (words, 0);
  if (strchr (first, '=') != NULL || is_shell_word (first))
    return NULL;

  g_ptr_array_add (words, NULL);
  return (gchar **) g_ptr_array_free (g_steal_pointer (&words), FALSE);
}

gchar **
datc_command_argv (const char *line, gboolean *direct)
{
  g_return_val_if_fail (line != NULL, NULL);

  gchar **argv = split_plain (line);
  if (direct != NULL)
    *direct = argv != NULL;
  if (argv != NULL)
    return argv;

  argv = g_new (gchar *, 4);
  argv[0] = g_strdup ("/bin/sh");
  argv[1] = g_strdup ("-c");
  argv[2] = g_strdup (line);
  argv[3] = NULL;
  return argv;
}
