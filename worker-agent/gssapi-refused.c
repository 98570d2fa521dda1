/* gssapi-refused.c: linked into datc-agent-static only.  Debian's libzmq
 * is built with the GSSAPI security mechanism, so libzmq.a refers to
 * MIT Kerberos' gss_* functions, and Debian ships no static Kerberos
 * library (libkrb5-dev has no .a).  The agent authenticates with CURVE
 * only and never selects ZMQ_GSSAPI on a socket; libzmq creates a GSSAPI
 * mechanism object only for a socket that selected it (a peer cannot pick
 * it: a mechanism mismatch fails the ZMTP handshake before any mechanism
 * runs).  These definitions satisfy the linker and, were they ever
 * reached, fail with GSS_S_UNAVAILABLE ("operation unavailable") instead
 * of crashing.  Signatures come from the real <gssapi/gssapi.h>, so a
 * mismatch is a compile error. */
#include <gssapi/gssapi.h>
#include <stddef.h>

/* The name-type OIDs libzmq passes to gss_import_name: NULL (no OID), as
 * nothing can use them here. */
gss_OID GSS_C_NT_HOSTBASED_SERVICE = GSS_C_NO_OID;
gss_OID GSS_C_NT_USER_NAME = GSS_C_NO_OID;

static OM_uint32
refused (OM_uint32 *minor)
{
  if (minor != NULL)
    *minor = 0;
  return GSS_S_UNAVAILABLE;
}

/* Release functions succeed: nothing was ever allocated. */
static OM_uint32
released (OM_uint32 *minor)
{
  if (minor != NULL)
    *minor = 0;
  return GSS_S_COMPLETE;
}

OM_uint32 KRB5_CALLCONV
gss_acquire_cred (OM_uint32 *minor, gss_name_t name, OM_uint32 time_req, gss_OID_set mechs,
                  gss_cred_usage_t usage, gss_cred_id_t *cred, gss_OID_set *actual,
                  OM_uint32 *time_rec)
{
  if (cred != NULL)
    *cred = GSS_C_NO_CREDENTIAL;
  if (actual != NULL)
    *actual = GSS_C_NO_OID_SET;
  return refused (minor);
}

OM_uint32 KRB5_CALLCONV
gss_init_sec_context (OM_uint32 *minor, gss_cred_id_t cred, gss_ctx_id_t *ctx, gss_name_t target,
                      gss_OID mech, OM_uint32 flags, OM_uint32 time_req,
                      gss_channel_bindings_t bindings, gss_buffer_t input, gss_OID *actual_mech,
                      gss_buffer_t output, OM_uint32 *ret_flags, OM_uint32 *time_rec)
{
  if (output != NULL)
    {
      output->length = 0;
      output->value = NULL;
    }
  return refused (minor);
}

OM_uint32 KRB5_CALLCONV
gss_accept_sec_context (OM_uint32 *minor, gss_ctx_id_t *ctx, gss_cred_id_t cred, gss_buffer_t input,
                        gss_channel_bindings_t bindings, gss_name_t *src_name, gss_OID *mech,
                        gss_buffer_t output, OM_uint32 *ret_flags, OM_uint32 *time_rec,
                        gss_cred_id_t *delegated)
{
  if (output != NULL)
    {
      output->length = 0;
      output->value = NULL;
    }
  return refused (minor);
}

OM_uint32 KRB5_CALLCONV
gss_import_name (OM_uint32 *minor, gss_buffer_t input, gss_OID type, gss_name_t *output)
{
  if (output != NULL)
    *output = GSS_C_NO_NAME;
  return refused (minor);
}

OM_uint32 KRB5_CALLCONV
gss_display_name (OM_uint32 *minor, gss_name_t name, gss_buffer_t output, gss_OID *type)
{
  if (output != NULL)
    {
      output->length = 0;
      output->value = NULL;
    }
  return refused (minor);
}

OM_uint32 KRB5_CALLCONV
gss_wrap (OM_uint32 *minor, gss_ctx_id_t ctx, int conf_req, gss_qop_t qop, gss_buffer_t input,
          int *conf_state, gss_buffer_t output)
{
  return refused (minor);
}

OM_uint32 KRB5_CALLCONV
gss_unwrap (OM_uint32 *minor, gss_ctx_id_t ctx, gss_buffer_t input, gss_buffer_t output,
            int *conf_state, gss_qop_t *qop)
{
  return refused (minor);
}

OM_uint32 KRB5_CALLCONV
gss_delete_sec_context (OM_uint32 *minor, gss_ctx_id_t *ctx, gss_buffer_t output)
{
  if (ctx != NULL)
    *ctx = GSS_C_NO_CONTEXT;
  return released (minor);
}

OM_uint32 KRB5_CALLCONV
gss_release_buffer (OM_uint32 *minor, gss_buffer_t buffer)
{
  if (buffer != NULL)
    {
      buffer->length = 0;
      buffer->value = NULL;
    }
  return released (minor);
}

OM_uint32 KRB5_CALLCONV
gss_release_cred (OM_uint32 *minor, gss_cred_id_t *cred)
{
  if (cred != NULL)
    *cred = GSS_C_NO_CREDENTIAL;
  return released (minor);
}

OM_uint32 KRB5_CALLCONV
gss_release_name (OM_uint32 *minor, gss_name_t *name)
{
  if (name != NULL)
    *name = GSS_C_NO_NAME;
  return released (minor);
}
