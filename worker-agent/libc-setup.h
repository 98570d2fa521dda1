/* libc-setup.h: what the agent asks of the C library before anything
 * else runs.  Two implementations, one per way of linking: libc-shared.c
 * for datc-agent (the node's own glibc) and libc-static.c for
 * datc-agent-static (glibc inside the binary, which must never load the
 * node's modules). */
#pragma once

void datc_agent_libc_setup (void);
