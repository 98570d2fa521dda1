/* agentoutput.c: see agentoutput.h.  Appends go through writev so that a
 * task's stdout and stderr cost one system call, and a short write (a full
 * disk, a signal) is taken up where it stopped. */
#include "agentoutput.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#include "ledger.h"

struct DatcAgentOutput {
  gchar *path; /* DIR/outputs/AGENT_ID.out */
  gchar *name; /* outputs/AGENT_ID.out */
  int fd;      /* -1 until first written */
  guint64 size;
};

DatcAgentOutput *
datc_agent_output_new (const char *dir, const char *agent_id)
{
  DatcAgentOutput *o = g_new0 (DatcAgentOutput, 1);
  o->name = g_strdup_printf ("outputs/%s.out", agent_id);
  o->path = g_build_filename (dir, o->name, NULL);
  o->fd = -1;
  return o;
}

void
datc_agent_output_free (DatcAgentOutput *o)
{
  if (o == NULL)
    return;
  if (o->fd >= 0)
    close (o->fd);
  g_free (o->path);
  g_free (o->name);
  g_free (o);
}

const char *
datc_agent_output_name (const DatcAgentOutput *o)
{
  return o->name;
}

guint64
datc_agent_output_size (const DatcAgentOutput *o)
{
  return o->size;
}

static gboolean
fail (DatcAgentOutput *o, int errsv, GError **error)
{
  g_set_error (error, DATC_LEDGER_ERROR, DATC_LEDGER_ERROR_IO, "%s: %s", o->path,
               g_strerror (errsv));
  return FALSE;
}

gboolean
datc_agent_output_append (DatcAgentOutput *o, GBytes *out, GBytes *err, guint64 *out_off,
                          guint64 *err_off, GError **error)
{
  gsize out_len = out ? g_bytes_get_size (out) : 0;
  gsize err_len = err ? g_bytes_get_size (err) : 0;

  if (o->fd < 0)
    {
      struct stat st;
      o->fd = open (o->path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
      if (o->fd < 0)
        return fail (o, errno, error);
      if (fstat (o->fd, &st) != 0)
        {
          int errsv = errno;
          close (o->fd);
          o->fd = -1;
          return fail (o, errsv, error);
        }
      o->size = (guint64) st.st_size;
    }
  *out_off = o->size;
  *err_off = o->size + out_len;
  if (out_len + err_len == 0)
    return TRUE;

  const char *out_data = out_len ? g_bytes_get_data (out, NULL) : NULL;
  const char *err_data = err_len ? g_bytes_get_data (err, NULL) : NULL;
  gsize total = out_len + err_len, done = 0;
  while (done < total)
    {
      ssize_t w;
      if (done < out_len)
        {
          struct iovec v[2]
              = { { (char *) out_data + done, out_len - done }, { (char *) err_data, err_len } };
          w = writev (o->fd, v, 2);
        }
      else
        w = write (o->fd, err_data + (done - out_len), total - done);
      if (w < 0 && errno == EINTR)
        continue;
      if (w < 0)
        {
          /* What reached the file stays there (O_APPEND): later offsets
           * must count it. */
          int errsv = errno;
          o->size += done;
          return fail (o, errsv, error);
        }
      done += (gsize) w;
    }
  o->size += total;
  return TRUE;
}

gboolean
datc_agent_output_sync (DatcAgentOutput *o, GError **error)
{
  if (o->fd >= 0 && fdatasync (o->fd) != 0)
    return fail (o, errno, error);
  return TRUE;
}
