/* test-curve.c: CURVE key files: generate, save, load and check, in a
 * fresh temporary directory per test (a fixture), including the files we
 * must refuse: readable by others, symlinked, garbage, mismatched halves. */

#include "curve.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

typedef struct {
  char *dir;
  char *path; /* dir/campaign.key, not yet created */
} Fixture;

static void
fixture_set_up (Fixture *fx, gconstpointer data)
{
  g_autoptr (GError) error = NULL;

  fx->dir = g_dir_make_tmp ("test-curve-XXXXXX", &error);
  g_assert_no_error (error);
  fx->path = g_build_filename (fx->dir, "campaign.key", NULL);
}

static void
remove_tree (const char *dir)
{
  g_autoptr (GDir) d = g_dir_open (dir, 0, NULL);
  const char *name;

  while (d != NULL && (name = g_dir_read_name (d)) != NULL)
    {
      g_autofree char *path = g_build_filename (dir, name, NULL);
      g_assert_cmpint (unlink (path), ==, 0);
    }
  g_assert_cmpint (rmdir (dir), ==, 0);
}

static void
fixture_tear_down (Fixture *fx, gconstpointer data)
{
  remove_tree (fx->dir);
  g_free (fx->path);
  g_free (fx->dir);
}

static mode_t
file_mode (const char *path)
{
  struct stat st;

  g_assert_cmpint (lstat (path, &st), ==, 0);
  return st.st_mode & 07777;
}

static void
write_file (const char *path, const char *contents, mode_t mode)
{
  g_autoptr (GError) error = NULL;

  g_file_set_contents (path, contents, -1, &error);
  g_assert_no_error (error);
  g_assert_cmpint (chmod (path, mode), ==, 0);
}

static void
generate (DatcCurveKeypair *kp)
{
  g_autoptr (GError) error = NULL;

  g_assert_true (datc_curve_keypair_generate (kp, &error));
  g_assert_no_error (error);
}

static void
test_generate_makes_valid_z85 (void)
{
  DatcCurveKeypair a, b;

  generate (&a);
  generate (&b);
  g_assert_cmpuint (strlen (a.public_z85), ==, DATC_CURVE_Z85_LEN);
  g_assert_cmpuint (strlen (a.secret_z85), ==, DATC_CURVE_Z85_LEN);
  g_assert_true (datc_curve_z85_valid (a.public_z85));
  g_assert_true (datc_curve_z85_valid (a.secret_z85));
  g_assert_cmpstr (a.public_z85, !=, b.public_z85);
  g_assert_cmpstr (a.secret_z85, !=, b.secret_z85);
  datc_curve_keypair_clear (&a);
  datc_curve_keypair_clear (&b);
}

static void
test_save_load_round_trip (Fixture *fx, gconstpointer data)
{
  g_autoptr (GError) error = NULL;
  DatcCurveKeypair kp, loaded;

  generate (&kp);
  g_assert_true (datc_curve_keypair_save (&kp, fx->path, &error));
  g_assert_no_error (error);

  g_assert_true (datc_curve_keypair_load (&loaded, fx->path, &error));
  g_assert_no_error (error);
  g_assert_cmpstr (loaded.public_z85, ==, kp.public_z85);
  g_assert_cmpstr (loaded.secret_z85, ==, kp.secret_z85);

  /* The file is exactly "public\nsecret\n". */
  g_autofree char *contents = NULL;
  g_file_get_contents (fx->path, &contents, NULL, &error);
  g_assert_no_error (error);
  g_autofree char *expected = g_strdup_printf ("%s\n%s\n", kp.public_z85, kp.secret_z85);
  g_assert_cmpstr (contents, ==, expected);
  explicit_bzero (contents, strlen (contents));
  explicit_bzero (expected, strlen (expected));

  datc_curve_keypair_clear (&kp);
  datc_curve_keypair_clear (&loaded);
}

static void
test_save_sets_modes (Fixture *fx, gconstpointer data)
{
  g_autoptr (GError) error = NULL;
  DatcCurveKeypair kp;
  mode_t old_umask = umask (0);

  generate (&kp);
  g_assert_true (datc_curve_keypair_save (&kp, fx->path, &error));
  umask (old_umask);
  g_assert_no_error (error);

  g_autofree char *pub = g_strconcat (fx->path, ".pub", NULL);
  g_assert_cmpint (file_mode (fx->path), ==, 0600);
  g_assert_cmpint (file_mode (pub), ==, 0644);
  datc_curve_keypair_clear (&kp);
}

static void
test_public_loads_from_either_file (Fixture *fx, gconstpointer data)
{
  g_autoptr (GError) error = NULL;
  DatcCurveKeypair kp;
  char pub_key[DATC_CURVE_Z85_LEN + 1];

  generate (&kp);
  g_assert_true (datc_curve_keypair_save (&kp, fx->path, &error));
  g_assert_no_error (error);

  g_autofree char *pub = g_strconcat (fx->path, ".pub", NULL);
  g_assert_true (datc_curve_public_load (pub_key, pub, &error));
  g_assert_no_error (error);
  g_assert_cmpstr (pub_key, ==, kp.public_z85);

  g_assert_true (datc_curve_public_load (pub_key, fx->path, &error));
  g_assert_no_error (error);
  g_assert_cmpstr (pub_key, ==, kp.public_z85);

  /* A .pub file written by hand without the final newline is fine too. */
  g_autofree char *bare = g_build_filename (fx->dir, "bare.pub", NULL);
  write_file (bare, kp.public_z85, 0644);
  g_assert_true (datc_curve_public_load (pub_key, bare, &error));
  g_assert_no_error (error);
  g_assert_cmpstr (pub_key, ==, kp.public_z85);
  datc_curve_keypair_clear (&kp);
}

static void
test_save_refuses_an_existing_file (Fixture *fx, gconstpointer data)
{
  g_autoptr (GError) error = NULL;
  DatcCurveKeypair first, second, loaded;

  generate (&first);
  generate (&second);
  g_assert_true (datc_curve_keypair_save (&first, fx->path, &error));
  g_assert_no_error (error);

  g_assert_false (datc_curve_keypair_save (&second, fx->path, &error));
  g_assert_error (error, DATC_CURVE_ERROR, DATC_CURVE_ERROR_IO);
  g_assert_nonnull (strstr (error->message, "exists already"));
  g_clear_error (&error);

  /* The first key is intact, both halves. */
  g_assert_true (datc_curve_keypair_load (&loaded, fx->path, &error));
  g_assert_no_error (error);
  g_assert_cmpstr (loaded.secret_z85, ==, first.secret_z85);
  char pub_key[DATC_CURVE_Z85_LEN + 1];
  g_autofree char *pub = g_strconcat (fx->path, ".pub", NULL);
  g_assert_true (datc_curve_public_load (pub_key, pub, &error));
  g_assert_cmpstr (pub_key, ==, first.public_z85);
  datc_curve_keypair_clear (&first);
  datc_curve_keypair_clear (&second);
  datc_curve_keypair_clear (&loaded);
}

static void
test_save_refuses_a_symlink (Fixture *fx, gconstpointer data)
{
  g_autoptr (GError) error = NULL;
  DatcCurveKeypair kp;
  g_autofree char *target = g_build_filename (fx->dir, "elsewhere", NULL);

  /* A dangling link: following it would create `target`. */
  g_assert_cmpint (symlink (target, fx->path), ==, 0);
  generate (&kp);
  g_assert_false (datc_curve_keypair_save (&kp, fx->path, &error));
  g_assert_error (error, DATC_CURVE_ERROR, DATC_CURVE_ERROR_IO);
  g_assert_false (g_file_test (target, G_FILE_TEST_EXISTS));
  datc_curve_keypair_clear (&kp);
}

static void
test_save_cleans_up_when_pub_fails (Fixture *fx, gconstpointer data)
{
  g_autoptr (GError) error = NULL;
  DatcCurveKeypair kp;
  g_autofree char *pub = g_strconcat (fx->path, ".pub", NULL);
  g_autofree char *target = g_build_filename (fx->dir, "elsewhere", NULL);

  g_assert_cmpint (symlink (target, pub), ==, 0);
  generate (&kp);
  g_assert_false (datc_curve_keypair_save (&kp, fx->path, &error));
  g_assert_error (error, DATC_CURVE_ERROR, DATC_CURVE_ERROR_IO);
  g_assert_false (g_file_test (fx->path, G_FILE_TEST_EXISTS));
  g_assert_false (g_file_test (target, G_FILE_TEST_EXISTS));
  datc_curve_keypair_clear (&kp);
}

static void
test_save_refuses_an_invalid_keypair (Fixture *fx, gconstpointer data)
{
  g_autoptr (GError) error = NULL;
  DatcCurveKeypair kp;

  generate (&kp);
  datc_curve_keypair_clear (&kp);
  g_assert_false (datc_curve_keypair_save (&kp, fx->path, &error));
  g_assert_error (error, DATC_CURVE_ERROR, DATC_CURVE_ERROR_INVALID);
  g_assert_false (g_file_test (fx->path, G_FILE_TEST_EXISTS));
}

static void
assert_load_refused (const char *path, DatcCurveError code, const char *reason)
{
  g_autoptr (GError) error = NULL;
  DatcCurveKeypair kp;

  memset (&kp, 'x', sizeof kp);
  g_assert_false (datc_curve_keypair_load (&kp, path, &error));
  g_assert_error (error, DATC_CURVE_ERROR, (gint) code);
  g_test_message ("%s", error->message);
  g_assert_nonnull (strstr (error->message, reason));
  /* Nothing half-loaded is left behind. */
  g_assert_cmpstr (kp.public_z85, ==, "");
  for (guint i = 0; i < sizeof kp.secret_z85; i++)
    g_assert_cmpint (kp.secret_z85[i], ==, 0);
}

static void
test_load_refuses_a_readable_secret (Fixture *fx, gconstpointer data)
{
  g_autoptr (GError) error = NULL;
  DatcCurveKeypair kp;

  generate (&kp);
  g_assert_true (datc_curve_keypair_save (&kp, fx->path, &error));
  g_assert_no_error (error);

  const mode_t too_open[] = { 0644, 0604, 0640, 0660, 0602 };
  for (guint i = 0; i < G_N_ELEMENTS (too_open); i++)
    {
      g_assert_cmpint (chmod (fx->path, too_open[i]), ==, 0);
      assert_load_refused (fx->path, DATC_CURVE_ERROR_MODE, "chmod 600");
    }

  /* 0400 is fine: only the owner can read it. */
  g_assert_cmpint (chmod (fx->path, 0400), ==, 0);
  DatcCurveKeypair loaded;
  g_assert_true (datc_curve_keypair_load (&loaded, fx->path, &error));
  g_assert_no_error (error);
  g_assert_cmpstr (loaded.secret_z85, ==, kp.secret_z85);
  g_assert_cmpint (chmod (fx->path, 0600), ==, 0);
  datc_curve_keypair_clear (&kp);
  datc_curve_keypair_clear (&loaded);
}

static void
test_load_refuses_garbage (Fixture *fx, gconstpointer data)
{
  DatcCurveKeypair kp, other;

  generate (&kp);
  generate (&other);

  const char *const garbage[] = {
    "",
    "hello\n",
    "not a key file at all, just some words that go on and on\nand on\n",
  };
  for (guint i = 0; i < G_N_ELEMENTS (garbage); i++)
    {
      write_file (fx->path, garbage[i], 0600);
      assert_load_refused (fx->path, DATC_CURVE_ERROR_INVALID, "not a secret key file");
    }

  g_autofree char *public_only = g_strdup_printf ("%s\n", kp.public_z85);
  g_autofree char *no_newline = g_strdup_printf ("%s%s\n", kp.public_z85, kp.secret_z85);
  g_autofree char *crlf = g_strdup_printf ("%s\r\n%s\r\n", kp.public_z85, kp.secret_z85);
  g_autofree char *extra = g_strdup_printf ("%s\n%s\nmore\n", kp.public_z85, kp.secret_z85);
  g_autofree char *short_secret = g_strdup_printf ("%s\n%.39s\n", kp.public_z85, kp.secret_z85);
  g_autofree char *bad_char = g_strdup_printf ("%s\n%s\n", kp.public_z85, kp.secret_z85);
  bad_char[DATC_CURVE_Z85_LEN + 5] = '"';
  const char *const wrong[] = { public_only, no_newline, crlf, extra, short_secret, bad_char };
  for (guint i = 0; i < G_N_ELEMENTS (wrong); i++)
    {
      write_file (fx->path, wrong[i], 0600);
      assert_load_refused (fx->path, DATC_CURVE_ERROR_INVALID, "not a secret key file");
    }

  /* Two good halves that do not belong together. */
  g_autofree char *mismatched = g_strdup_printf ("%s\n%s\n", other.public_z85, kp.secret_z85);
  write_file (fx->path, mismatched, 0600);
  assert_load_refused (fx->path, DATC_CURVE_ERROR_INVALID, "not the secret key's");

  /* Far too long to be a key file. */
  g_autofree char *long_file = g_strnfill (100000, 'a');
  write_file (fx->path, long_file, 0600);
  assert_load_refused (fx->path, DATC_CURVE_ERROR_INVALID, "too long");

  explicit_bzero (no_newline, strlen (no_newline));
  explicit_bzero (crlf, strlen (crlf));
  explicit_bzero (extra, strlen (extra));
  explicit_bzero (short_secret, strlen (short_secret));
  explicit_bzero (bad_char, strlen (bad_char));
  explicit_bzero (mismatched, strlen (mismatched));
  datc_curve_keypair_clear (&kp);
  datc_curve_keypair_clear (&other);
}

static void
test_load_refuses_what_is_not_a_file (Fixture *fx, gconstpointer data)
{
  /* Missing. */
  assert_load_refused (fx->path, DATC_CURVE_ERROR_IO, "could not open");

  /* A symlink to a good key. */
  g_autoptr (GError) error = NULL;
  DatcCurveKeypair kp;
  g_autofree char *real = g_build_filename (fx->dir, "real.key", NULL);
  generate (&kp);
  g_assert_true (datc_curve_keypair_save (&kp, real, &error));
  g_assert_no_error (error);
  g_assert_cmpint (symlink (real, fx->path), ==, 0);
  assert_load_refused (fx->path, DATC_CURVE_ERROR_IO, "could not open");
  g_assert_cmpint (unlink (fx->path), ==, 0);

  /* A FIFO: must not block. */
  g_assert_cmpint (mkfifo (fx->path, 0600), ==, 0);
  assert_load_refused (fx->path, DATC_CURVE_ERROR_IO, "not a regular file");

  char pub_key[DATC_CURVE_Z85_LEN + 1];
  g_assert_false (datc_curve_public_load (pub_key, fx->path, &error));
  g_assert_error (error, DATC_CURVE_ERROR, DATC_CURVE_ERROR_IO);
  g_clear_error (&error);

  /* A directory. */
  g_assert_false (datc_curve_public_load (pub_key, fx->dir, &error));
  g_assert_error (error, DATC_CURVE_ERROR, DATC_CURVE_ERROR_IO);
  datc_curve_keypair_clear (&kp);
}

static void
test_public_load_refuses_garbage (Fixture *fx, gconstpointer data)
{
  g_autoptr (GError) error = NULL;
  char pub_key[DATC_CURVE_Z85_LEN + 1];
  DatcCurveKeypair kp;

  generate (&kp);
  g_autofree char *long_line = g_strdup_printf ("%sX\n", kp.public_z85);
  g_autofree char *crlf = g_strdup_printf ("%s\r\n", kp.public_z85);
  const char *const garbage[] = { "", "short\n", long_line, crlf };
  for (guint i = 0; i < G_N_ELEMENTS (garbage); i++)
    {
      write_file (fx->path, garbage[i], 0644);
      g_assert_false (datc_curve_public_load (pub_key, fx->path, &error));
      g_assert_error (error, DATC_CURVE_ERROR, DATC_CURVE_ERROR_INVALID);
      g_assert_cmpstr (pub_key, ==, "");
      g_clear_error (&error);
    }
  /* A line of 40 characters that are not all Z85. */
  write_file (fx->path, "01234567890123456789012345678901234567\"~\n", 0644);
  g_assert_false (datc_curve_public_load (pub_key, fx->path, &error));
  g_assert_error (error, DATC_CURVE_ERROR, DATC_CURVE_ERROR_INVALID);
  datc_curve_keypair_clear (&kp);
}

static void
test_z85_valid (void)
{
  DatcCurveKeypair kp;

  generate (&kp);
  g_assert_true (datc_curve_z85_valid (kp.public_z85));
  /* The largest group that fits 32 bits is "%nSc0" (0xffffffff). */
  g_assert_true (datc_curve_z85_valid ("%nSc0%nSc0%nSc0%nSc0%nSc0%nSc0%nSc0%nSc0"));
  g_assert_true (datc_curve_z85_valid ("0000000000000000000000000000000000000000"));

  g_assert_false (datc_curve_z85_valid (NULL));
  g_assert_false (datc_curve_z85_valid (""));
  g_assert_false (datc_curve_z85_valid ("000000000000000000000000000000000000000"));   /* 39 */
  g_assert_false (datc_curve_z85_valid ("00000000000000000000000000000000000000000")); /* 41 */
  /* Not in the alphabet: space, quote, comma, backslash, tilde, a high byte. */
  g_assert_false (datc_curve_z85_valid ("000000000000000000000000000000000000000 "));
  g_assert_false (datc_curve_z85_valid ("\"000000000000000000000000000000000000000"));
  g_assert_false (datc_curve_z85_valid ("0000000000000000000,00000000000000000000"));
  g_assert_false (datc_curve_z85_valid ("0000000000000000000\\00000000000000000000"));
  g_assert_false (datc_curve_z85_valid ("~000000000000000000000000000000000000000"));
  g_assert_false (datc_curve_z85_valid ("\xc3\xa9"
                                        "00000000000000000000000000000000000000"));
  /* Groups over 32 bits: "%nSc1" is 0x100000000, "#####" is 85^5 - 1. */
  g_assert_false (datc_curve_z85_valid ("%nSc1000000000000000000000000000000000000"));
  g_assert_false (datc_curve_z85_valid ("00000000000000000000000000000000000#####"));
  datc_curve_keypair_clear (&kp);
}

static void
test_clear_wipes_the_secret (void)
{
  DatcCurveKeypair kp;

  generate (&kp);
  g_autofree char *public_before = g_strdup (kp.public_z85);
  datc_curve_keypair_clear (&kp);
  for (guint i = 0; i < sizeof kp.secret_z85; i++)
    g_assert_cmpint (kp.secret_z85[i], ==, 0);
  g_assert_cmpstr (kp.public_z85, ==, public_before);
  datc_curve_keypair_clear (NULL);
}

/* The copy of a secret file the master sends to sites is checked like a
 * load: the whole file, exactly, only from an owner-only file holding a
 * matching pair. */
static void
test_secret_file_read (Fixture *fx, gconstpointer data)
{
  g_autoptr (GError) error = NULL;
  DatcCurveKeypair kp;

  generate (&kp);
  g_assert_true (datc_curve_keypair_save (&kp, fx->path, &error));
  g_autoptr (GBytes) bytes = datc_curve_secret_file_read (fx->path, &error);
  g_assert_no_error (error);
  g_autofree char *expected = g_strdup_printf ("%s\n%s\n", kp.public_z85, kp.secret_z85);
  gsize len = 0;
  const char *got = g_bytes_get_data (bytes, &len);
  g_assert_cmpmem (got, len, expected, strlen (expected));
  explicit_bzero (expected, strlen (expected));

  g_assert_cmpint (chmod (fx->path, 0644), ==, 0);
  g_assert_null (datc_curve_secret_file_read (fx->path, &error));
  g_assert_error (error, DATC_CURVE_ERROR, DATC_CURVE_ERROR_MODE);
  g_clear_error (&error);

  write_file (fx->path, "hello\n", 0600);
  g_assert_null (datc_curve_secret_file_read (fx->path, &error));
  g_assert_error (error, DATC_CURVE_ERROR, DATC_CURVE_ERROR_INVALID);
  datc_curve_keypair_clear (&kp);
}

#define ADD(path, fn) g_test_add (path, Fixture, NULL, fixture_set_up, fn, fixture_tear_down)

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);

  g_test_add_func ("/curve/keypair/generates-valid-z85", test_generate_makes_valid_z85);
  g_test_add_func ("/curve/keypair/clear-wipes-the-secret", test_clear_wipes_the_secret);
  ADD ("/curve/keypair/save-then-load-round-trips", test_save_load_round_trip);
  ADD ("/curve/keypair/save-makes-secret-0600-and-pub-0644", test_save_sets_modes);
  ADD ("/curve/keypair/save-refuses-an-existing-file", test_save_refuses_an_existing_file);
  ADD ("/curve/keypair/save-refuses-a-symlink", test_save_refuses_a_symlink);
  ADD ("/curve/keypair/save-leaves-nothing-when-pub-fails", test_save_cleans_up_when_pub_fails);
  ADD ("/curve/keypair/save-refuses-an-invalid-keypair", test_save_refuses_an_invalid_keypair);
  ADD ("/curve/keypair/load-refuses-a-secret-others-can-read", test_load_refuses_a_readable_secret);
  ADD ("/curve/keypair/load-refuses-garbage", test_load_refuses_garbage);
  ADD ("/curve/keypair/load-refuses-what-is-not-a-regular-file",
       test_load_refuses_what_is_not_a_file);
  ADD ("/curve/secret-file/read-whole-only-when-owner-only-and-valid", test_secret_file_read);
  ADD ("/curve/public/loads-from-pub-or-secret-file", test_public_loads_from_either_file);
  ADD ("/curve/public/load-refuses-garbage", test_public_load_refuses_garbage);
  g_test_add_func ("/curve/z85/validates-alphabet-length-and-range", test_z85_valid);

  return g_test_run ();
}
