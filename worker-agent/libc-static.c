/* libc-static.c: datc-agent-static carries glibc 2.36 inside the binary.
 * A static glibc can still dlopen the node's shared modules (NSS modules
 * named in /etc/nsswitch.conf, gconv modules for a locale's charset,
 * locale files), and those belong to the node's glibc version, not ours:
 * loading them into this process is undefined.  So:
 *
 * - host names (an `--connect tcp://NAME:PORT`) are looked up only by the
 *   "files" and "dns" services, which static glibc 2.34+ has built in:
 *   /etc/hosts, then the resolvers of /etc/resolv.conf.  A site whose
 *   nsswitch.conf adds sss, ldap, mdns, myhostname or nis for hosts is
 *   not asked through those; a master known only that way must be given
 *   by address (`advertise = ADDRESS` in SITES.ini).
 * - the other databases the linked code can reach (glib's user lookup,
 *   libzmq's ipc filter, OpenPGM's protocol and network names; the agent
 *   calls none of them today) read only their /etc files.
 * - the locale stays "C": messages are ASCII anyway, and no charset
 *   conversion module is ever loaded.
 *
 * Nothing here touches the environment, so tasks still get the user's
 * locale and run with their own (dynamic) C library. */
#include "libc-setup.h"

#include <nss.h>

void
datc_agent_libc_setup (void)
{
  /* Each call replaces one line of /etc/nsswitch.conf, for this process
   * only.  It fails only for an unknown database name: not the case. */
  static const char *const databases[][2] = {
    { "hosts", "files dns" }, { "passwd", "files" },   { "group", "files" },
    { "protocols", "files" }, { "networks", "files" },
  };
  for (unsigned i = 0; i < sizeof databases / sizeof databases[0]; i++)
    __nss_configure_lookup (databases[i][0], databases[i][1]);
}
