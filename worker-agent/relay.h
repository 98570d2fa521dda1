/* relay.h: `datc-agent relay`, which runs on a login node for a site in
 * relay mode (site-drivers/README.md, "Relay mode").  Compute nodes that
 * cannot reach the master connect to it; it carries each connection's
 * bytes (CurveZMQ: it holds no key and sees ciphertext only) over its
 * stdin and stdout, which are the master's SSH session, in the frames of
 * protocol/relayframe.h. */
#pragma once

#include <glib.h>

G_BEGIN_DECLS

/* argv[0] is "relay".  Returns the exit status: 0 when the master said
 * BYE or a signal ended it, 1 when its session was lost (stdin ended, or
 * no word from the master for --idle-timeout), 2 for bad options or a
 * port it could not listen on. */
int datc_relay_main (int argc, char **argv);

G_END_DECLS
