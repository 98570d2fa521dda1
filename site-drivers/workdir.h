/* workdir.h: a site's workdir, made and checked where it is.
 *
 * Proxy scripts, their logs, the uploaded agent and the agent's key live
 * in the workdir, so no one but the login user may be able to change it or
 * swap it for something else.  The check runs on the site itself (one sh
 * command through the site's transport: ssh and local alike), since only
 * there can it see owners, modes and links, and learn the login user's
 * home. */
#pragma once

#include "driver.h"

G_BEGIN_DECLS

/* Resolves `workdir` on the site (absolute; `~` or `~/...`: under the
 * login user's home, its physical path), makes the directories missing
 * from it one by one with mode 0700, and checks every directory it uses:
 * the workdir and each of its parents up to the home directory, or up to
 * the first that belongs to root (the system's: it must not be writable
 * by others unless sticky, like /tmp).  Each of those must be a real
 * directory (not a symbolic link) of the login user that no one else may
 * write; the workdir itself no one else may even read; the ones made here
 * are exactly 0700.  The first that is not fails with
 * DATC_SITE_ERROR_CONFIG naming it and what is wrong.  *resolved (transfer
 * full): the absolute workdir.  Run it before anything is put there. */
gboolean datc_site_make_workdir (DatcSite *site, const char *workdir, gchar **resolved,
                                 GError **error);

/* The same check, making nothing (`datc sites check`): a missing workdir
 * must be creatable in its nearest existing parent, an existing one
 * writable.  *ok and *detail (transfer full: one line, what was found or
 * what is wrong, naming the directory) when the check ran; an error when
 * it could not run. */
gboolean datc_site_check_workdir (DatcSite *site, const char *workdir, gboolean *ok, gchar **detail,
                                  GError **error);

G_END_DECLS
