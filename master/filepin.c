/* filepin.c: see filepin.h for why. */
#include "filepin.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

struct DatcFilePin {
  void *addr;
  gsize len;
  gboolean locked;
};

DatcFilePin *
datc_file_pin (const char *path, GError **error)
{
  g_return_val_if_fail (path != NULL, NULL);
  int fd = open (path, O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    {
      int errsv = errno;
      g_set_error (error, G_FILE_ERROR, g_file_error_from_errno (errsv), "%s: %s", path,
                   g_strerror (errsv));
      return NULL;
    }
  struct stat st;
  if (fstat (fd, &st) != 0)
    {
      int errsv = errno;
      close (fd);
      g_set_error (error, G_FILE_ERROR, g_file_error_from_errno (errsv), "%s: %s", path,
                   g_strerror (errsv));
      return NULL;
    }
  if (!S_ISREG (st.st_mode) || st.st_size <= 0)
    {
      close (fd);
      g_set_error (error, G_FILE_ERROR, G_FILE_ERROR_INVAL, "%s: %s", path,
                   S_ISREG (st.st_mode) ? "empty, nothing to keep in memory"
                                        : "not a regular file");
      return NULL;
    }
  gsize len = (gsize) st.st_size;
  void *addr = mmap (NULL, len, PROT_READ, MAP_SHARED | MAP_POPULATE, fd, 0);
  int errsv = errno;
  close (fd);
  if (addr == MAP_FAILED)
    {
      g_set_error (error, G_FILE_ERROR, g_file_error_from_errno (errsv), "%s: mmap: %s", path,
                   g_strerror (errsv));
      return NULL;
    }
  DatcFilePin *pin = g_new0 (DatcFilePin, 1);
  pin->addr = addr;
  pin->len = len;
  /* EPERM or ENOMEM past RLIMIT_MEMLOCK: mapped is still worth having. */
  pin->locked = mlock (addr, len) == 0;
  return pin;
}

gboolean
datc_file_pin_locked (const DatcFilePin *pin)
{
  g_return_val_if_fail (pin != NULL, FALSE);
  return pin->locked;
}

gsize
datc_file_pin_size (const DatcFilePin *pin)
{
  g_return_val_if_fail (pin != NULL, 0);
  return pin->len;
}

void
datc_file_pin_free (DatcFilePin *pin)
{
  if (pin == NULL)
    return;
  munmap (pin->addr, pin->len);
  g_free (pin);
}
