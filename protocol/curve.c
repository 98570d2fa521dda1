/* curve.c: per-campaign CurveZMQ keys on disk.
 *
 * Key files are tiny and hold secrets, so they are read and written through
 * fixed buffers on the stack (never a heap string that could be freed
 * unwiped; the one copy that must outlive a call, an agent key on its way
 * to a site, is a GBytes whose free wipes it), and every buffer that held
 * a secret is wiped on every path out.
 * A secret file is created with O_EXCL | O_NOFOLLOW, so an existing file or
 * a planted symlink is refused rather than written through, and its mode is
 * 0600 from the first byte.  Loading refuses a secret file that anyone but
 * its owner may read or write, and checks the two halves belong together.
 * Files are opened O_NONBLOCK and must be regular, so a FIFO cannot hang us. */

#include "curve.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zmq.h>

G_DEFINE_QUARK (datc-curve-error-quark, datc_curve_error)

/* A secret key file is 82 bytes; anything longer than this is not one. */
#define KEY_FILE_MAX 128

static const char z85_alphabet[]
    = "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ.-:+=^!/*?&<>()[]{}@%$#";

gboolean
datc_curve_z85_valid (const char *z85)
{
  if (z85 == NULL)
    return FALSE;

  /* 40 characters are 8 groups of 5; each group is a base-85 number that
   * must fit in the 32 bits it stands for. */
  for (guint i = 0; i < DATC_CURVE_Z85_LEN; i += 5)
    {
      guint64 value = 0;
      for (guint j = 0; j < 5; j++)
        {
          char c = z85[i + j];
          const char *at = c != '\0' ? strchr (z85_alphabet, c) : NULL;
          if (at == NULL)
            return FALSE;
          value = value * 85 + (guint64) (at - z85_alphabet);
        }
      if (value > G_MAXUINT32)
        return FALSE;
    }
  return z85[DATC_CURVE_Z85_LEN] == '\0';
}

void
datc_curve_keypair_clear (DatcCurveKeypair *kp)
{
  if (kp == NULL)
    return;
  explicit_bzero (kp->secret_z85, sizeof kp->secret_z85);
}

gboolean
datc_curve_keypair_generate (DatcCurveKeypair *kp, GError **error)
{
  g_return_val_if_fail (kp != NULL, FALSE);

  if (zmq_curve_keypair (kp->public_z85, kp->secret_z85) != 0)
    {
      int saved = errno;
      datc_curve_keypair_clear (kp);
      g_set_error (error, DATC_CURVE_ERROR, DATC_CURVE_ERROR_FAILED,
                   "libzmq could not make a CURVE keypair: %s", zmq_strerror (saved));
      return FALSE;
    }
  return TRUE;
}

/* ------------------------------------------------------------- writing */

static gboolean
write_all (int fd, const char *data, gsize len)
{
  while (len > 0)
    {
      ssize_t n = write (fd, data, len);
      if (n < 0 && errno == EINTR)
        continue;
      if (n == 0)
        errno = EIO;
      if (n <= 0)
        return FALSE;
      data += n;
      len -= (gsize) n;
    }
  return TRUE;
}

/* Writes `data` to `path` with `mode`.  Exclusive: create it or fail, and
 * remove it again on a later failure.  Otherwise: create or truncate it and
 * set `mode` exactly. */
static gboolean
write_key_file (const char *path, mode_t mode, gboolean exclusive, const char *data, gsize len,
                GError **error)
{
  int flags
      = O_WRONLY | O_CREAT | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK | (exclusive ? O_EXCL : O_TRUNC);
  int fd = open (path, flags, mode);
  if (fd < 0)
    {
      int saved = errno;
      g_set_error (error, DATC_CURVE_ERROR, DATC_CURVE_ERROR_IO, "%s: could not create: %s", path,
                   saved == EEXIST ? "it exists already (load it instead)" : g_strerror (saved));
      return FALSE;
    }

  struct stat st;
  if (fstat (fd, &st) != 0 || !S_ISREG (st.st_mode))
    {
      close (fd);
      g_set_error (error, DATC_CURVE_ERROR, DATC_CURVE_ERROR_IO, "%s: not a regular file", path);
      return FALSE;
    }

  const char *failed = NULL;
  if (!exclusive && fchmod (fd, mode) != 0)
    failed = "chmod";
  else if (!write_all (fd, data, len))
    failed = "write";
  else if (fsync (fd) != 0)
    failed = "fsync";
  int saved = errno;
  if (close (fd) != 0 && failed == NULL)
    {
      failed = "close";
      saved = errno;
    }

  if (failed != NULL)
    {
      if (exclusive)
        unlink (path);
      g_set_error (error, DATC_CURVE_ERROR, DATC_CURVE_ERROR_IO, "%s: %s failed: %s", path, failed,
                   g_strerror (saved));
      return FALSE;
    }
  return TRUE;
}

gboolean
datc_curve_keypair_save (const DatcCurveKeypair *kp, const char *path, GError **error)
{
  g_return_val_if_fail (kp != NULL, FALSE);
  g_return_val_if_fail (path != NULL, FALSE);

  if (!datc_curve_z85_valid (kp->public_z85) || !datc_curve_z85_valid (kp->secret_z85))
    {
      g_set_error (error, DATC_CURVE_ERROR, DATC_CURVE_ERROR_INVALID,
                   "%s: refusing to save a keypair that is not two Z85 keys", path);
      return FALSE;
    }

  char secret_file[2 * (DATC_CURVE_Z85_LEN + 1)];
  memcpy (secret_file, kp->public_z85, DATC_CURVE_Z85_LEN);
  secret_file[DATC_CURVE_Z85_LEN] = '\n';
  memcpy (secret_file + DATC_CURVE_Z85_LEN + 1, kp->secret_z85, DATC_CURVE_Z85_LEN);
  secret_file[sizeof secret_file - 1] = '\n';
  gboolean ok = write_key_file (path, 0600, TRUE, secret_file, sizeof secret_file, error);
  explicit_bzero (secret_file, sizeof secret_file);
  if (!ok)
    return FALSE;

  char public_file[DATC_CURVE_Z85_LEN + 1];
  memcpy (public_file, kp->public_z85, DATC_CURVE_Z85_LEN);
  public_file[DATC_CURVE_Z85_LEN] = '\n';
  g_autofree char *pub_path = g_strconcat (path, ".pub", NULL);
  if (!write_key_file (pub_path, 0644, FALSE, public_file, sizeof public_file, error))
    {
      /* Leave nothing half-made: a retry must be able to create `path`. */
      unlink (path);
      return FALSE;
    }
  return TRUE;
}

/* ------------------------------------------------------------- reading */

/* Reads all of `path` into buf[KEY_FILE_MAX].  `secret`: do not follow a
 * symlink, and refuse a file with any group or other permission.  On
 * failure buf is wiped. */
static gboolean
read_key_file (const char *path, gboolean secret, char *buf, gsize *len_out, GError **error)
{
  int fd = open (path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | (secret ? O_NOFOLLOW : 0));
  if (fd < 0)
    {
      int saved = errno;
      g_set_error (error, DATC_CURVE_ERROR, DATC_CURVE_ERROR_IO, "%s: could not open: %s", path,
                   g_strerror (saved));
      return FALSE;
    }

  struct stat st;
  if (fstat (fd, &st) != 0 || !S_ISREG (st.st_mode))
    {
      close (fd);
      g_set_error (error, DATC_CURVE_ERROR, DATC_CURVE_ERROR_IO, "%s: not a regular file", path);
      return FALSE;
    }
  if (secret && (st.st_mode & 077) != 0)
    {
      close (fd);
      g_set_error (error, DATC_CURVE_ERROR, DATC_CURVE_ERROR_MODE,
                   "%s: mode %04o lets others at a secret key (chmod 600 it)", path,
                   (unsigned) (st.st_mode & 07777));
      return FALSE;
    }

  gsize len = 0;
  for (;;)
    {
      /* One byte past the limit tells an overlong file from a full one. */
      ssize_t n = read (fd, buf + len, KEY_FILE_MAX + 1 - len);
      if (n < 0 && errno == EINTR)
        continue;
      if (n < 0)
        {
          int saved = errno;
          close (fd);
          explicit_bzero (buf, KEY_FILE_MAX + 1);
          g_set_error (error, DATC_CURVE_ERROR, DATC_CURVE_ERROR_IO, "%s: read failed: %s", path,
                       g_strerror (saved));
          return FALSE;
        }
      if (n == 0)
        break;
      len += (gsize) n;
      if (len > KEY_FILE_MAX)
        {
          close (fd);
          explicit_bzero (buf, KEY_FILE_MAX + 1);
          g_set_error (error, DATC_CURVE_ERROR, DATC_CURVE_ERROR_INVALID,
                       "%s: too long to be a key file", path);
          return FALSE;
        }
    }
  close (fd);
  *len_out = len;
  return TRUE;
}

/* A line of exactly 40 Z85 characters at buf[0..], ending at `end` or '\n'. */
static gboolean
take_key_line (const char *buf, gsize len, char out[DATC_CURVE_Z85_LEN + 1])
{
  if (len < DATC_CURVE_Z85_LEN || (len > DATC_CURVE_Z85_LEN && buf[DATC_CURVE_Z85_LEN] != '\n'))
    return FALSE;
  memcpy (out, buf, DATC_CURVE_Z85_LEN);
  out[DATC_CURVE_Z85_LEN] = '\0';
  return datc_curve_z85_valid (out);
}

static gboolean
parse_keypair (const char *buf, gsize len, DatcCurveKeypair *kp, const char *path, GError **error)
{
  const gsize line = DATC_CURVE_Z85_LEN + 1;

  /* public '\n' secret, with or without the final '\n'. */
  if (len < line || len > 2 * line || !take_key_line (buf, len, kp->public_z85)
      || !take_key_line (buf + line, len - line, kp->secret_z85))
    {
      g_set_error (error, DATC_CURVE_ERROR, DATC_CURVE_ERROR_INVALID,
                   "%s: not a secret key file (two lines of 40 Z85 characters)", path);
      return FALSE;
    }

  char derived[DATC_CURVE_Z85_LEN + 1];
  if (zmq_curve_public (derived, kp->secret_z85) != 0)
    {
      int saved = errno;
      g_set_error (error, DATC_CURVE_ERROR, DATC_CURVE_ERROR_FAILED,
                   "%s: libzmq could not derive the public key: %s", path, zmq_strerror (saved));
      return FALSE;
    }
  if (strcmp (derived, kp->public_z85) != 0)
    {
      g_set_error (error, DATC_CURVE_ERROR, DATC_CURVE_ERROR_INVALID,
                   "%s: the public key is not the secret key's", path);
      return FALSE;
    }
  return TRUE;
}

gboolean
datc_curve_keypair_load (DatcCurveKeypair *kp, const char *path, GError **error)
{
  g_return_val_if_fail (kp != NULL, FALSE);
  g_return_val_if_fail (path != NULL, FALSE);

  char buf[KEY_FILE_MAX + 1];
  gsize len = 0;
  gboolean ok
      = read_key_file (path, TRUE, buf, &len, error) && parse_keypair (buf, len, kp, path, error);
  explicit_bzero (buf, sizeof buf);
  if (!ok)
    {
      datc_curve_keypair_clear (kp);
      kp->public_z85[0] = '\0';
    }
  return ok;
}

gboolean
datc_curve_public_load (char out[DATC_CURVE_Z85_LEN + 1], const char *path, GError **error)
{
  g_return_val_if_fail (out != NULL, FALSE);
  g_return_val_if_fail (path != NULL, FALSE);

  char buf[KEY_FILE_MAX + 1];
  gsize len = 0;
  if (!read_key_file (path, FALSE, buf, &len, error))
    return FALSE;

  /* The file may be a secret key file: its second line is wiped unread. */
  gboolean ok = take_key_line (buf, len, out);
  explicit_bzero (buf, sizeof buf);
  if (!ok)
    {
      out[0] = '\0';
      g_set_error (error, DATC_CURVE_ERROR, DATC_CURVE_ERROR_INVALID,
                   "%s: the first line is not a public key (40 Z85 characters)", path);
      return FALSE;
    }
  return TRUE;
}

static void
wipe_and_free (gpointer p)
{
  explicit_bzero (p, KEY_FILE_MAX + 1);
  g_free (p);
}

GBytes *
datc_curve_secret_file_read (const char *path, GError **error)
{
  g_return_val_if_fail (path != NULL, NULL);

  char *buf = g_malloc (KEY_FILE_MAX + 1);
  gsize len = 0;
  DatcCurveKeypair kp;
  gboolean ok
      = read_key_file (path, TRUE, buf, &len, error) && parse_keypair (buf, len, &kp, path, error);
  datc_curve_keypair_clear (&kp);
  if (!ok)
    {
      wipe_and_free (buf);
      return NULL;
    }
  return g_bytes_new_with_free_func (buf, len, wipe_and_free, buf);
}
