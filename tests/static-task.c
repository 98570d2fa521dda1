/* static-task.c: a task for test-static-agent.c, linked statically so it
 * runs where the test hides every shared library (a node with no dynamic
 * loader at all).  Prints its argument and pid, exits 0. */
#include <stdio.h>
#include <unistd.h>

int
main (int argc, char **argv)
{
  if (argc != 2)
    {
      fprintf (stderr, "usage: static-task WORD\n");
      return 2;
    }
  printf ("static task %s ran as pid %ld\n", argv[1], (long) getpid ());
  return 0;
}
