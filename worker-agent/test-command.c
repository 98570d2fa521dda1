/* test-command.c: which task lines are executed directly, and how they are
 * split.  A line wrongly judged plain would run without its shell meaning,
 * so the shell cases are a table covering every special character. */
#include "command.h"

static void
assert_direct (const char *line, const char *const *want)
{
  gboolean direct = FALSE;
  g_auto (GStrv) argv = datc_command_argv (line, &direct);
  if (!direct)
    g_error ("expected \"%s\" to run directly", line);
  g_assert_cmpstrv (argv, want);
}

static void
assert_shell (const char *line)
{
  gboolean direct = TRUE;
  g_auto (GStrv) argv = datc_command_argv (line, &direct);
  if (direct)
    g_error ("expected \"%s\" to need the shell", line);
  const char *const want[] = { "/bin/sh", "-c", line, NULL };
  g_assert_cmpstrv (argv, want);
}

static void
test_plain_words_run_directly (void)
{
  assert_direct ("/bin/true", (const char *const[]) { "/bin/true", NULL });
  assert_direct ("echo hello world", (const char *const[]) { "echo", "hello", "world", NULL });
  assert_direct ("./sim --seed 42 -o out.dat",
                 (const char *const[]) { "./sim", "--seed", "42", "-o", "out.dat", NULL });
}

static void
test_splits_on_spaces_and_tabs (void)
{
  assert_direct ("  prog\ta  \t b\t", (const char *const[]) { "prog", "a", "b", NULL });
}

static void
test_shell_syntax_goes_to_shell (void)
{
  static const char *const lines[] = {
    "echo 'a b'",       "echo \"a b\"", "echo $HOME",     "echo `date`", "echo a\\ b",
    "true; false",      "sleep 1 &",    "a && b",         "ls | wc",     "wc < f",
    "echo > f",         "(cd /)",       "echo $(date)",   "{ a; }",      "echo {a,b}",
    "[ -f x ]",         "ls *.c",       "ls ?.c",         "ls ~",        "ls ~/x",
    "echo a # comment", "! true",       "echo a\necho b", "prog x[1]",
  };
  for (gsize i = 0; i < G_N_ELEMENTS (lines); i++)
    assert_shell (lines[i]);
}

static void
test_assignment_in_first_word_goes_to_shell (void)
{
  assert_shell ("FOO=bar prog");
  assert_shell ("FOO=bar");
}

static void
test_equals_in_later_words_stays_direct (void)
{
  assert_direct ("dd if=/dev/zero of=/dev/null count=1",
                 (const char *const[]) { "dd", "if=/dev/zero", "of=/dev/null", "count=1", NULL });
}

static void
test_percent_stays_direct (void)
{
  assert_direct ("date +%s", (const char *const[]) { "date", "+%s", NULL });
}

static void
test_builtins_and_keywords_go_to_shell (void)
{
  static const char *const lines[] = {
    ". ./env.sh", ": nothing", "cd /tmp", "export A",     "exit 3", "if",        "for",
    "while",      "until",     "case",    "source x",     "set -e", "ulimit -n", "umask 022",
    "exec prog",  "eval x",    "read x",  "trap x",       "wait",   "time prog", "alias",
    "unset A",    "shift",     "return",  "command -v x", "type x", "hash",      "local",
  };
  for (gsize i = 0; i < G_N_ELEMENTS (lines); i++)
    assert_shell (lines[i]);
}

static void
test_real_programs_named_like_builtins_stay_direct (void)
{
  assert_direct ("echo x", (const char *const[]) { "echo", "x", NULL });
  assert_direct ("test -d /", (const char *const[]) { "test", "-d", "/", NULL });
  assert_direct ("kill -0 1", (const char *const[]) { "kill", "-0", "1", NULL });
  assert_direct ("printf x", (const char *const[]) { "printf", "x", NULL });
}

static void
test_blank_line_goes_to_shell (void)
{
  assert_shell ("");
  assert_shell (" \t ");
}

static void
test_direct_flag_is_optional (void)
{
  g_auto (GStrv) argv = datc_command_argv ("prog", NULL);
  g_assert_cmpstr (argv[0], ==, "prog");
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  g_test_add_func ("/command/argv/plain-words-run-directly", test_plain_words_run_directly);
  g_test_add_func ("/command/argv/splits-on-spaces-and-tabs", test_splits_on_spaces_and_tabs);
  g_test_add_func ("/command/argv/shell-syntax-goes-to-shell", test_shell_syntax_goes_to_shell);
  g_test_add_func ("/command/argv/assignment-in-first-word-goes-to-shell",
                   test_assignment_in_first_word_goes_to_shell);
  g_test_add_func ("/command/argv/equals-in-later-words-stays-direct",
                   test_equals_in_later_words_stays_direct);
  g_test_add_func ("/command/argv/percent-stays-direct", test_percent_stays_direct);
  g_test_add_func ("/command/argv/builtins-and-keywords-go-to-shell",
                   test_builtins_and_keywords_go_to_shell);
  g_test_add_func ("/command/argv/real-programs-named-like-builtins-stay-direct",
                   test_real_programs_named_like_builtins_stay_direct);
  g_test_add_func ("/command/argv/blank-line-goes-to-shell", test_blank_line_goes_to_shell);
  g_test_add_func ("/command/argv/direct-flag-is-optional", test_direct_flag_is_optional);
  return g_test_run ();
}
