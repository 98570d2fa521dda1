/* curve.h: per-campaign CurveZMQ keys.  A key file holds the Z85 public key
 * on its first line and, for a secret key file, the Z85 secret key on the
 * second.  Secret files are created with mode 0600 (never widened later),
 * and secrets are wiped before their memory is released. */
#pragma once

#include <glib.h>

G_BEGIN_DECLS

#define DATC_CURVE_ERROR (datc_curve_error_quark ())
GQuark datc_curve_error_quark (void);

typedef enum {
  DATC_CURVE_ERROR_FAILED,  /* libzmq could not make a key */
  DATC_CURVE_ERROR_IO,      /* could not read or write the file */
  DATC_CURVE_ERROR_INVALID, /* not a key file, or a key that is not Z85 of 32 bytes */
  DATC_CURVE_ERROR_MODE,    /* a secret key file readable by others */
} DatcCurveError;

#define DATC_CURVE_Z85_LEN 40

typedef struct {
  char public_z85[DATC_CURVE_Z85_LEN + 1];
  char secret_z85[DATC_CURVE_Z85_LEN + 1]; /* "" when only the public half is known */
} DatcCurveKeypair;

gboolean datc_curve_keypair_generate (DatcCurveKeypair *kp, GError **error);
/* Writes `path` (public + secret, mode 0600, created exclusively unless it
 * does not exist yet) and `path`.pub (public only, mode 0644). */
gboolean datc_curve_keypair_save (const DatcCurveKeypair *kp, const char *path, GError **error);
/* Reads a secret key file; refuses one whose mode lets group or others read. */
gboolean datc_curve_keypair_load (DatcCurveKeypair *kp, const char *path, GError **error);
/* Reads a secret key file whole, checked as datc_curve_keypair_load does,
 * for copying it elsewhere (transfer full): the bytes are wiped when the
 * last reference goes. */
GBytes *datc_curve_secret_file_read (const char *path, GError **error);
/* Reads the first line of a key file (.pub or secret) as a public key. */
gboolean datc_curve_public_load (char out[DATC_CURVE_Z85_LEN + 1], const char *path,
                                 GError **error);
/* True when `z85` is 40 characters of Z85 that decode to 32 bytes. */
gboolean datc_curve_z85_valid (const char *z85);
/* Wipes the secret half. */
void datc_curve_keypair_clear (DatcCurveKeypair *kp);

G_END_DECLS
