/* registry.c: the one list of compiled-in drivers.
 *
 * A driver is a `const` table defined in its own .c and declared in
 * drivers-private.h; adding one is a line in the array below and a file in
 * meson.build.  Lookup is a linear scan: there are a handful of drivers and
 * a site looks its two up once, when it opens. */

#include "drivers-private.h"

#include <string.h>

/* Transports move commands and files: local and ssh. */
static const DatcTransportClass *const transports[] = {
  &datc_transport_local,
  &datc_transport_ssh,
};

/* Schedulers turn a proxy into a job: fork, then the batch systems. */
static const DatcSchedulerClass *const schedulers[] = {
  &datc_scheduler_fork, &datc_scheduler_slurm,  &datc_scheduler_sge,
  &datc_scheduler_pbs,  &datc_scheduler_condor, &datc_scheduler_lsf,
};

const DatcTransportClass *
datc_transport_lookup (const char *name)
{
  g_return_val_if_fail (name != NULL, NULL);

  for (gsize i = 0; i < G_N_ELEMENTS (transports); i++)
    if (strcmp (transports[i]->name, name) == 0)
      return transports[i];
  return NULL;
}

const DatcSchedulerClass *
datc_scheduler_lookup (const char *name)
{
  g_return_val_if_fail (name != NULL, NULL);

  for (gsize i = 0; i < G_N_ELEMENTS (schedulers); i++)
    if (strcmp (schedulers[i]->name, name) == 0)
      return schedulers[i];
  return NULL;
}

gchar *
datc_transport_known_names (void)
{
  GString *s = g_string_new (NULL);

  for (gsize i = 0; i < G_N_ELEMENTS (transports); i++)
    g_string_append_printf (s, "%s%s", i > 0 ? ", " : "", transports[i]->name);
  return g_string_free (s, FALSE);
}

gchar *
datc_scheduler_known_names (void)
{
  GString *s = g_string_new (NULL);

  for (gsize i = 0; i < G_N_ELEMENTS (schedulers); i++)
    g_string_append_printf (s, "%s%s", i > 0 ? ", " : "", schedulers[i]->name);
  return g_string_free (s, FALSE);
}

/* ---- what the rest of datc asks (driver.h) ---------------------------- */

void
datc_site_set_child_fd_limit (guint64 soft)
{
  datc_transport_local_set_child_fd_limit (soft);
}

gboolean
datc_transport_exists (const char *name)
{
  return name != NULL && datc_transport_lookup (name) != NULL;
}

gboolean
datc_scheduler_exists (const char *name)
{
  return name != NULL && datc_scheduler_lookup (name) != NULL;
}

static void
add_program (GPtrArray *out, const char *program)
{
  for (guint j = 0; j < out->len; j++)
    if (strcmp (out->pdata[j], program) == 0)
      return;
  g_ptr_array_add (out, g_strdup (program));
}

GStrv
datc_scheduler_programs (const char *name)
{
  const DatcSchedulerClass *k = name != NULL ? datc_scheduler_lookup (name) : NULL;
  if (k == NULL)
    return NULL;

  GPtrArray *out = g_ptr_array_new ();
  if (k->programs != NULL)
    for (const char *const *p = k->programs; *p != NULL; p++)
      add_program (out, *p);
  else
    {
      /* The argv[0] of what it runs, from commands built for a dummy job. */
      const char *ids[] = { "12345", NULL };
      DatcProxyRequest req
          = { .name = "datc-check", .slots = 1, .workdir = "/tmp", .agent_command = "true" };
      g_auto (GStrv) submit = k->submit_argv (&req, "/tmp/datc-check.sh");
      g_auto (GStrv) poll = k->poll_argv (ids);
      g_auto (GStrv) cancel = k->cancel_argv (ids);
      GStrv all[] = { submit, poll, cancel };

      for (gsize i = 0; i < G_N_ELEMENTS (all); i++)
        if (all[i] != NULL && all[i][0] != NULL)
          add_program (out, all[i][0]);
    }
  g_ptr_array_add (out, NULL);
  return (GStrv) g_ptr_array_free (out, FALSE);
}

gboolean
datc_scheduler_has_queues (const char *name, const char **why)
{
  const DatcSchedulerClass *k = name != NULL ? datc_scheduler_lookup (name) : NULL;

  if (why != NULL)
    *why = NULL;
  if (k == NULL)
    return FALSE;
  if (k->queue_argv != NULL)
    return TRUE;
  if (why != NULL)
    *why = k->no_queues != NULL ? k->no_queues : "the scheduler has no queues";
  return FALSE;
}

gboolean
datc_scheduler_can_exclude_hosts (const char *name, const char **why)
{
  const DatcSchedulerClass *k = name != NULL ? datc_scheduler_lookup (name) : NULL;

  if (why != NULL)
    *why = k == NULL ? "no such scheduler" : k->no_exclude;
  return k != NULL && k->no_exclude == NULL;
}

gboolean
datc_scheduler_takes_queue (const char *name, const char *queue)
{
  const DatcSchedulerClass *k = name != NULL ? datc_scheduler_lookup (name) : NULL;
  if (k == NULL)
    return FALSE;

  DatcProxyRequest req = {
    .name = "datc-check", .slots = 1, .workdir = "/tmp", .agent_command = "true", .queue = queue
  };
  g_autofree gchar *script = k->script (&req);
  return script != NULL;
}
