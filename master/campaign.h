/* campaign.h: the campaign directory.  Creating one writes campaign.json
 * (what was asked), keys/ (mode 0700: the master's CURVE key, the key for
 * agents started by hand, and one key per site under keys/sites/) and
 * outputs/.  Opening an existing one checks
 * that the task file is the same one (by SHA-256) and takes DIR/lock so two
 * masters never run one campaign. */
#pragma once

#include <glib.h>

#include "bag.h"
#include "ledger.h"

G_BEGIN_DECLS

#define DATC_CAMPAIGN_ERROR (datc_campaign_error_quark ())
GQuark datc_campaign_error_quark (void);

typedef enum {
  DATC_CAMPAIGN_ERROR_IO,
  DATC_CAMPAIGN_ERROR_BUSY,     /* another master holds the lock */
  DATC_CAMPAIGN_ERROR_MISMATCH, /* a different task file */
  DATC_CAMPAIGN_ERROR_INVALID,  /* campaign.json unreadable */
  DATC_CAMPAIGN_ERROR_UNSAFE,   /* another user could replace its sockets */
} DatcCampaignError;

typedef struct DatcCampaign DatcCampaign;

/* Creates DIR (or reopens it) and takes its lock: this process is its
 * master from here (DATC_CAMPAIGN_ERROR_BUSY when another is). */
DatcCampaign *datc_campaign_lock (const char *dir, GError **error);
/* Then, once the task file is read: makes DIR the campaign of `task_file`
 * (its `sha256`) or checks that it is (DATC_CAMPAIGN_ERROR_MISMATCH), and
 * makes its keys. */
gboolean datc_campaign_bind (DatcCampaign *c, const char *task_file, const char *sha256,
                             const char *format, const char *mode, GError **error);
/* A run that stopped before binding (its task file refused): a DIR that
 * datc_campaign_lock made is removed again, lock and all, when it holds
 * nothing else.  Call before datc_campaign_free. */
void datc_campaign_abandon (DatcCampaign *c);
void datc_campaign_free (DatcCampaign *c);
G_DEFINE_AUTOPTR_CLEANUP_FUNC (DatcCampaign, datc_campaign_free)

gboolean datc_campaign_resumed (DatcCampaign *c);
const char *datc_campaign_dir (DatcCampaign *c);
/* keys/master.key (secret) and keys/agents/default.key (secret, for
 * agents started by hand: given by file, never on a command line). */
const char *datc_campaign_master_key (DatcCampaign *c);
const char *datc_campaign_agent_key (DatcCampaign *c);
/* Public keys of every agent key under keys/agents/: the keys of agents
 * started by hand, which may name any site but one that has its own key
 * (transfer full). */
GStrv datc_campaign_agent_publics (DatcCampaign *c, GError **error);
/* keys/sites/SITE.key, the key pair of the agents of one site, made the
 * first time the site is used and kept for the campaign's life (agents
 * an earlier master started still hold it); transfer full. */
gchar *datc_campaign_site_key (DatcCampaign *c, const char *site, GError **error);
/* The public keys under keys/sites/, and in *sites (transfer full) the
 * site each one is of, in the same order. */
GStrv datc_campaign_site_publics (DatcCampaign *c, GStrv *sites, GError **error);
/* An ipc:// endpoint inside DIR (or under /tmp when DIR's path is too long
 * for a unix socket), transfer full; NULL when that directory is unsafe
 * (see datc_campaign_socket_path). */
gchar *datc_campaign_ipc_endpoint (DatcCampaign *c, GError **error);

/* Reads campaign.json of an existing DIR: the task file path (transfer full). */
gchar *datc_campaign_read_task_file (const char *dir, GError **error);

/* For commands that work with no master running: loads the campaign's task
 * file into `bag` in the format it was run with, and opens its ledger with
 * `options` (read_only for a look, or holding DIR/lock to change it). */
DatcLedger *datc_campaign_open_ledger (const char *dir, DatcBag *bag,
                                       const DatcLedgerOptions *options, GError **error);

/* Where a campaign's unix socket `name` lives: inside DIR, or, when that
 * path is too long for a socket, in a private /tmp/datc-UID directory under
 * a name derived from DIR (transfer full).  The directory is checked first:
 * ours, not a symlink, writable by no one else (the /tmp one: created 0700
 * and exactly that); otherwise NULL with DATC_CAMPAIGN_ERROR_UNSAFE naming
 * it, since whoever can write there can put their socket in place of ours. */
gchar *datc_campaign_socket_path (const char *dir, const char *name, GError **error);

G_END_DECLS
