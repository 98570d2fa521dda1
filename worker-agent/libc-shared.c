/* libc-shared.c: datc-agent, linked against the node's glibc, takes the
 * user's locale for its messages. */
#include "libc-setup.h"

#include <locale.h>

void
datc_agent_libc_setup (void)
{
  setlocale (LC_ALL, "");
}
