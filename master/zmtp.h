/* zmtp.h: one request and its reply over a ZeroMQ REQ connection to an
 * ipc (Unix stream) socket, in plain C with libc alone: ZMTP 3.1 (rfc.zeromq.org
 * specs 23 and 37), NULL security, as libzmq's REQ socket speaks it to the
 * master's ROUTER on DIR/control.
 *
 * Why not libzmq.  `datc status` is a process started, run and ended in
 * a few milliseconds, often while the master keeps its cores busy: loading
 * libzmq and its 17 libraries costs 2 ms of CPU before main(), GLib and
 * json-glib as much again, and on a busy core every millisecond of CPU
 * is several of waiting (benchmarks/README.md, "A status that costs less").
 * The fast front (front.c) uses this; everything else keeps libzmq.
 *
 * No GLib here either, so errors are a static message (`why`), not a
 * GError.  The reader is a plain value record fed bytes as they come, so
 * its fuzz target and its table of malformed streams need no socket. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* The greeting each side sends first: signature, version 3.1, mechanism
 * NULL, not a server. */
#define DATC_ZMTP_GREETING_SIZE 64
/* Largest reply taken: a status text is some 160 bytes per agent listed,
 * so this holds about 100,000 (`--agents`); a larger one is left to
 * datc-full. */
#define DATC_ZMTP_REPLY_MAX (16u * 1024u * 1024u)

typedef enum {
  DATC_ZMTP_NEED_MORE, /* feed more bytes */
  DATC_ZMTP_DONE,      /* the reply is complete: reply, reply_len */
  DATC_ZMTP_FAILED,    /* the stream is not what a ROUTER sends: why */
} DatcZmtpStatus;

typedef struct {
  /* private: the parser's state */
  int state;
  uint8_t head[DATC_ZMTP_GREETING_SIZE]; /* the greeting, or a frame's header */
  size_t head_len;
  size_t head_want;
  uint8_t flags;  /* the current frame's */
  uint64_t size;  /* the current frame's body size */
  uint64_t taken; /* of the current reply frame's body */
  bool ready_seen;
  bool delimiter_seen;
  uint8_t command[256]; /* a command frame's body (READY, ERROR) */
  size_t command_len;
  /* public once DATC_ZMTP_DONE: the reply's body (its frames after the
   * empty delimiter, joined), owned by the reader */
  uint8_t *reply;
  size_t reply_len;
  size_t reply_max;
  const char *why; /* static, once DATC_ZMTP_FAILED */
} DatcZmtpReader;

/* Starts reading a reply of at most `reply_max` bytes. */
void datc_zmtp_reader_init (DatcZmtpReader *r, size_t reply_max);
/* Frees the reply; the reader may be initialised again. */
void datc_zmtp_reader_clear (DatcZmtpReader *r);
/* Feeds `len` bytes; *used says how many were taken (all, unless the
 * reply ended before them). */
DatcZmtpStatus datc_zmtp_reader_feed (DatcZmtpReader *r, const uint8_t *data, size_t len,
                                      size_t *used);

/* What a REQ client sends before its request: greeting and READY
 * (Socket-Type REQ).  Returns the bytes written into `out`, which must
 * hold DATC_ZMTP_HELLO_MAX. */
#define DATC_ZMTP_HELLO_MAX 96
size_t datc_zmtp_hello (uint8_t *out);
/* A request's frames, as REQ sends them: the empty delimiter, then the
 * body.  Returns the header bytes written into `head` (at most 11), the
 * body to follow them as is. */
size_t datc_zmtp_request_head (uint8_t *head, size_t body_len);

/* Connects to the ipc socket at `path`, sends `request` and reads the
 * reply within `timeout_ms`, calling `still_there` (may be NULL) every
 * 100 ms meanwhile: when it returns false the call gives up.  With
 * `still_there`, a socket missing or not listened on yet is waited for
 * (the peer is there, about to bind it); without, that fails at once
 * (ENOENT, ECONNREFUSED).  Returns
 * DATC_ZMTP_DONE with r's reply set, or DATC_ZMTP_FAILED with r->why
 * and *errno_out (0 when the peer, not the system, failed; ETIMEDOUT
 * after the timeout; ESRCH when still_there said no). */
DatcZmtpStatus datc_zmtp_call (const char *path, const char *request, size_t request_len,
                               int timeout_ms, bool (*still_there) (void *), void *data,
                               DatcZmtpReader *r, int *errno_out);
