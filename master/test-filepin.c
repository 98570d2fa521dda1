/* test-filepin.c: a pinned file's pages stay in the page cache when the
 * kernel is asked to drop them.  POSIX_FADV_DONTNEED drops a file's clean
 * pages that no process maps, as reclaim of unmapped cache does (filepin.h):
 * each check first shows, on the same file, that the drop does take its
 * pages when it is not pinned, so "still resident" means the pin kept them.
 * Residency is read with mincore over a mapping that never touches them. */
#include "filepin.h"
#include "test-sanitizer.h"

#include <fcntl.h>
#include <glib/gstdio.h>
#include <linux/capability.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#define FILE_BYTES ((gsize) 1 << 20)

typedef struct {
  gchar *dir;
  gchar *path;
} Fixture;

static void
fixture_set_up (Fixture *f, gconstpointer data)
{
  (void) data;
  f->dir = g_dir_make_tmp ("datc-filepin-XXXXXX", NULL);
  g_assert_nonnull (f->dir);
  f->path = g_build_filename (f->dir, "front", NULL);
  g_autofree guint8 *bytes = g_malloc (FILE_BYTES);
  for (gsize i = 0; i < FILE_BYTES; i++)
    bytes[i] = (guint8) (i * 131 + 7);
  int fd = open (f->path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0755);
  g_assert_cmpint (fd, >=, 0);
  g_assert_cmpint (write (fd, bytes, FILE_BYTES), ==, (gssize) FILE_BYTES);
  /* Written back, so the pages are clean: only clean pages can be dropped. */
  g_assert_cmpint (fsync (fd), ==, 0);
  g_assert_cmpint (close (fd), ==, 0);
}

static void
fixture_tear_down (Fixture *f, gconstpointer data)
{
  (void) data;
  g_unlink (f->path);
  g_rmdir (f->dir);
  g_free (f->path);
  g_free (f->dir);
}

/* Pages of PATH in the page cache, by mincore over a mapping of our own
 * that is never read. */
static gsize
resident_pages (const char *path)
{
  int fd = open (path, O_RDONLY | O_CLOEXEC);
  g_assert_cmpint (fd, >=, 0);
  void *addr = mmap (NULL, FILE_BYTES, PROT_READ, MAP_SHARED, fd, 0);
  g_assert_true (addr != MAP_FAILED);
  close (fd);
  gsize pages = FILE_BYTES / (gsize) sysconf (_SC_PAGESIZE);
  g_autofree unsigned char *vec = g_malloc (pages);
  g_assert_cmpint (mincore (addr, FILE_BYTES, vec), ==, 0);
  munmap (addr, FILE_BYTES);
  gsize n = 0;
  for (gsize i = 0; i < pages; i++)
    n += vec[i] & 1;
  return n;
}

static void
read_all (const char *path)
{
  g_autofree gchar *contents = NULL;
  gsize len = 0;
  g_assert_true (g_file_get_contents (path, &contents, &len, NULL));
  g_assert_cmpuint (len, ==, FILE_BYTES);
}

static void
drop (const char *path)
{
  int fd = open (path, O_RDONLY | O_CLOEXEC);
  g_assert_cmpint (fd, >=, 0);
  g_assert_cmpint (posix_fadvise (fd, 0, 0, POSIX_FADV_DONTNEED), ==, 0);
  close (fd);
}

static void
test_pinned_pages_survive_a_drop (Fixture *f, gconstpointer data)
{
  (void) data;
  gsize all = FILE_BYTES / (gsize) sysconf (_SC_PAGESIZE);

  /* Unpinned, the drop takes them. */
  read_all (f->path);
  g_assert_cmpuint (resident_pages (f->path), ==, all);
  drop (f->path);
  gsize unpinned = resident_pages (f->path);
  if (unpinned == all)
    {
      g_test_skip ("POSIX_FADV_DONTNEED dropped nothing here: nothing to compare with");
      return;
    }
  g_assert_cmpuint (unpinned, <, all / 2);

  /* Pinned: the pin reads them in itself, and the drop leaves them. */
  g_autoptr (GError) error = NULL;
  g_autoptr (DatcFilePin) pin = datc_file_pin (f->path, &error);
  g_assert_no_error (error);
  g_assert_cmpuint (datc_file_pin_size (pin), ==, FILE_BYTES);
  g_assert_cmpuint (resident_pages (f->path), ==, all);
  drop (f->path);
  g_assert_cmpuint (resident_pages (f->path), ==, all);
  g_test_message ("%zu of %zu pages left by a drop unpinned, %zu pinned (%s)", unpinned, all,
                  resident_pages (f->path), datc_file_pin_locked (pin) ? "locked" : "mapped");

  /* Released, the drop takes them again. */
  g_clear_pointer (&pin, datc_file_pin_free);
  drop (f->path);
  g_assert_cmpuint (resident_pages (f->path), <, all / 2);
}

/* Under RLIMIT_MEMLOCK (a limit of zero, and root's CAP_IPC_LOCK taken out
 * of its effective set, since it locks past any limit) the pin is made
 * mapped only, says so, and still keeps the pages through a drop.  In a
 * subprocess: neither can be given back. */
static void
test_over_the_lock_limit_it_maps (Fixture *f, gconstpointer data)
{
  (void) data;
  if (!g_test_subprocess ())
    {
      g_test_trap_subprocess (NULL, 0, G_TEST_SUBPROCESS_INHERIT_STDERR);
      g_test_trap_assert_passed ();
      return;
    }
  struct __user_cap_header_struct hdr = { .version = _LINUX_CAPABILITY_VERSION_3 };
  struct __user_cap_data_struct caps[_LINUX_CAPABILITY_U32S_3];
  g_assert_cmpint (syscall (SYS_capget, &hdr, caps), ==, 0);
  caps[CAP_TO_INDEX (CAP_IPC_LOCK)].effective &= ~CAP_TO_MASK (CAP_IPC_LOCK);
  g_assert_cmpint (syscall (SYS_capset, &hdr, caps), ==, 0);
  struct rlimit none = { 0, 0 };
  g_assert_cmpint (setrlimit (RLIMIT_MEMLOCK, &none), ==, 0);

  gsize all = FILE_BYTES / (gsize) sysconf (_SC_PAGESIZE);
  read_all (f->path);
  drop (f->path);
  if (resident_pages (f->path) == all)
    {
      g_test_skip ("POSIX_FADV_DONTNEED dropped nothing here: nothing to compare with");
      return;
    }
  g_autoptr (GError) error = NULL;
  g_autoptr (DatcFilePin) pin = datc_file_pin (f->path, &error);
  g_assert_no_error (error);
  /* Under AddressSanitizer mlock is a no-op that says yes. */
  if (!DATC_TEST_UNDER_ASAN)
    g_assert_false (datc_file_pin_locked (pin));
  drop (f->path);
  g_assert_cmpuint (resident_pages (f->path), ==, all);
}

static void
test_says_what_it_cannot_pin (Fixture *f, gconstpointer data)
{
  (void) data;
  g_autoptr (GError) error = NULL;
  g_autofree gchar *missing = g_build_filename (f->dir, "missing", NULL);
  g_assert_null (datc_file_pin (missing, &error));
  g_assert_error (error, G_FILE_ERROR, G_FILE_ERROR_NOENT);
  g_assert_nonnull (strstr (error->message, missing));
  g_clear_error (&error);

  g_assert_null (datc_file_pin (f->dir, &error));
  g_assert_error (error, G_FILE_ERROR, G_FILE_ERROR_INVAL);
  g_assert_nonnull (strstr (error->message, "not a regular file"));
  g_clear_error (&error);

  g_autofree gchar *empty = g_build_filename (f->dir, "empty", NULL);
  g_assert_true (g_file_set_contents (empty, "", 0, NULL));
  g_assert_null (datc_file_pin (empty, &error));
  g_assert_error (error, G_FILE_ERROR, G_FILE_ERROR_INVAL);
  g_assert_nonnull (strstr (error->message, "empty"));
  g_unlink (empty);
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  g_test_add ("/filepin/pinned-pages-survive-a-drop", Fixture, NULL, fixture_set_up,
              test_pinned_pages_survive_a_drop, fixture_tear_down);
  g_test_add ("/filepin/over-the-lock-limit-it-maps", Fixture, NULL, fixture_set_up,
              test_over_the_lock_limit_it_maps, fixture_tear_down);
  g_test_add ("/filepin/says-what-it-cannot-pin", Fixture, NULL, fixture_set_up,
              test_says_what_it_cannot_pin, fixture_tear_down);
  return g_test_run ();
}
