/*
 * fuzz.h -- the fuzz entry points.  Each takes arbitrary bytes and returns
 * 0; a bug shows up as a crash, a sanitizer report or an abort() from a
 * failed invariant (FUZZ_CHECK).  libFuzzer, AFL++ and the corpus replay
 * test (tests/check_fuzz_replay.c) all call these same functions.
 */
#ifndef SAKER_FUZZ_H
#define SAKER_FUZZ_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "saker/store.h"

/* The protocol parser: the input is split into lines as conn.c frames
 * them, and every line goes through proto_parse_line(). */
int fuzz_proto(const uint8_t *data, size_t size);

/* The `saker load` reader: the input is a dump stream, loaded into a
 * memory store as far as it is valid. */
int fuzz_dump(const uint8_t *data, size_t size);

/* Store operations chosen by the input, over the memory store and the
 * example driver, checked against a model of the queues after every step. */
int fuzz_store(const uint8_t *data, size_t size);

/* A journal record of the SQLite driver (sqlite_redo.h) applied to a
 * small database; a no-op without SQLite. */
int fuzz_redo(const uint8_t *data, size_t size);

/* A client's bytes through the whole server in-process (conn.c framing,
 * the text, binary and meta protocols, the command layer) over the memory
 * store; the first byte chooses how the rest is split into writes. */
int fuzz_conn(const uint8_t *data, size_t size);

/* An HTTP client's bytes through the --http endpoint in-process
 * (libevent's request parser, the routes, Basic auth and its throttling,
 * the connection count), on the server fuzz_conn runs; the first byte
 * chooses how the rest is split into writes. */
int fuzz_http(const uint8_t *data, size_t size);

/* The files an operator gives sakerd: a --config file (first byte even)
 * or an --auth-file permissions field (odd), parsed and then queried. */
int fuzz_conf(const uint8_t *data, size_t size);

/* A client's bytes on a TLS connection of fuzz_conn's server (given a
 * certificate made at start), up to and during the handshake; the first
 * byte chooses how the rest is split into writes.  Does nothing when
 * built without OpenSSL. */
int fuzz_tls(const uint8_t *data, size_t size);

/* The in-process server fuzz_conn and fuzz_http share (set up once). */
void fuzz_server_setup(void);

/* Turn that server's loop until it is idle, reading and dropping what
 * arrives on `peer` (a client's socket; -1 for none). */
void fuzz_turns(int peer);

/* Write `size` bytes to `peer` in pieces of `chunk` (0: at once), turning
 * the loop after each and whenever the socket is full; stops early when
 * the server closes or stops reading. */
void fuzz_send(int peer, const uint8_t *data, size_t size, size_t chunk);

/* One client of that server on a socketpair (logged in or not, TLS or
 * not): fuzz_send() of `data`, then a hang-up. */
void fuzz_session(const uint8_t *data, size_t size, size_t chunk, bool authed,
    bool tls);

/* One logged-in client of that server that sends `bytes` at once and
 * hangs up (fuzz_http fills queues for the console's API with it). */
void fuzz_client(const char *bytes);

/* Close every connection and delete every queue of that server. */
void fuzz_reset(void);

/* How many bytes each write of an input carries, from its first byte:
 * 0 = all at once, else 1-64, raised so there are at most
 * fuzz_max_chunks. */
size_t fuzz_chunk(uint8_t first, size_t size);

/* The most pieces fuzz_chunk() makes (0: no limit, as the corpus replay
 * wants, so its 7-byte writes stay 7 bytes). */
extern size_t fuzz_max_chunks;

/* The same interpreter over any driver; `location` as for open(). */
int fuzz_store_driver(const struct saker_store_driver *drv,
    const char *location, const uint8_t *data, size_t size);

/* An invariant the fuzzers check.  Aborting is right here and only here:
 * it is how a fuzzer learns it found a bug. */
#define FUZZ_CHECK(cond) do {						\
	if (!(cond)) {							\
		fprintf(stderr, "%s:%d: invariant failed: %s\n",	\
		    __FILE__, __LINE__, #cond);				\
		abort();						\
	}								\
} while (0)

#endif
