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
  &datc_scheduler_fork,
  &datc_scheduler_slurm,
  &datc_scheduler_sge,
  &datc_scheduler_pbs,
  &datc_scheduler_condor,
  &datc_scheduler_lsf,
};

const DatcTransportClass *
datc_transport_lookup(const char *name)
{
  g_return_val_if_fail(name != NULL, NULL);

  for (gsize i = 0; i < G_N_ELEMENTS(transports); i++)
    if (strcmp(transports[i]->name, name) == 0)
      return transports[i];
  return NULL;
}

const DatcSchedulerClass *
datc_scheduler_lookup(const char *name)
{
  g_return_val_if_fail(name != NULL, NULL);

  for (gsize i = 0; i < G_N_ELEMENTS(schedulers); i++)
    if (strcmp(schedulers[i]->name, name) == 0)
      return schedulers[i];
  return NULL;
}

gchar *
datc_transport_known_names(void)
{
  GString *s = g_string_new(NULL);

  for (gsize i = 0; i < G_N_ELEMENTS(transports); i++)
    g_string_append_printf(s, "%s%s", i > 0 ? ", " : "", transports[i]->name);
  return g_string_free(s, FALSE);
}

gchar *
datc_scheduler_known_names(void)
{
  GString *s = g_string_new(NULL);

  for (gsize i = 0; i < G_N_ELEMENTS(schedulers); i++)
    g_string_append_printf(s, "%s%s", i > 0 ? ", " : "", schedulers[i]->name);
  return g_string_free(s, FALSE);
}
