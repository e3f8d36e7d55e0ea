/*
 * dump.h -- the portable dump stream (`saker dump` / `saker load`).
 *
 * FORMAT, version 3.  Binary-safe; every integer is big-endian.
 *
 *   header  8 bytes "SAKERDMP", 4 bytes 0d 0a 1a 0a (catches text-mode
 *           and line-ending damage), BE32 version = 3.
 *   then records, each starting with a one-byte tag:
 *   'Q'     queue start: BE16 name length (1..250), the name.
 *   'R'     ready item   } BE32 flags, BE64 expires_ms (0 = never),
 *   'D'     delayed item } BE64 due_ms (0 for 'R'), BE64 created_ms,
 *                          BE32 deliveries (version 2 on: the item's
 *                          delivery count), BE16 attributes length
 *                          (version 3 on; 0..SAKER_ATTRS_MAX), BE32 data
 *                          length, the attributes (version 3 on: the
 *                          item's attribute record, store.h ITEM
 *                          ATTRIBUTES, byte-exact), the data.
 *   'I'     deduplication id (version 3 on), after the queue's items:
 *           BE64 expires_ms, BE16 key length (1..SAKER_DEDUP_KEY_MAX),
 *           the key.  Ids of a queue appear sorted by key bytes; ids that
 *           had expired when the dump was taken are left out.
 *   'E'     queue end: BE64 items in the queue, BE64 FNV-1a-64 of every
 *           byte of the queue's records from its 'Q' up to this 'E'.
 *   'Z'     stream end: BE64 queues, BE64 items, BE64 FNV-1a-64 of every
 *           byte before this 'Z' (header included).  Nothing may follow.
 *
 * Queues appear sorted by name bytes; items in a queue in restart order
 * (ready FIFO, then delayed by due time): see migrate_copy.h, NORMALISED ITEMS.
 * Older versions are read too: version 2 is version 3 without attributes
 * and ids (its items have none), version 1 is version 2 without the
 * deliveries field (its items count 0 deliveries).
 * A reader refuses an unknown version, a bad tag, a bad checksum or count,
 * malformed item attributes, and a stream that ends before 'Z'.  Loading a
 * stream into an empty store and dumping it again gives the same bytes,
 * unless a delayed item fell due or an id expired in between.
 */
#ifndef SAKER_DUMP_H
#define SAKER_DUMP_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "saker/store.h"
#include "migrate_int.h"

#define DUMP_VERSION 3
#define DUMP_VERSION_MIN 1
#define DUMP_HEADER_LEN 16
#define DUMP_MAX_ITEM (1u << 30)   /* a reader refuses longer data */

struct dump_writer {
	FILE *fp;
	uint32_t version;
	uint64_t qsum, tsum;
	uint64_t qitems, nqueues, nitems, nids;
	bool in_queue;
	bool failed;
};

/* Start a stream of format `version` (DUMP_VERSION_MIN..DUMP_VERSION),
 * for a reader of that version: version 2 leaves item attributes and
 * ids out, version 1 the delivery counts too (tests of old readers). */
void dump_writer_start_version(struct dump_writer *w, FILE *fp,
    uint32_t version);
void dump_write_queue(struct dump_writer *w, const char *name, size_t len);
/* state: MIG_READY or MIG_DELAYED */
void dump_write_item(struct dump_writer *w, const struct saker_item *it, int state);
/* A deduplication id of the current queue, after its items (version 3). */
void dump_write_id(struct dump_writer *w, const void *key, size_t len,
    int64_t expires_ms);
void dump_write_queue_end(struct dump_writer *w);
/* Writes 'Z' and flushes; 0, or -1 (errno set) if any write failed. */
int dump_writer_finish(struct dump_writer *w);

enum dump_rec_type {
	DUMP_REC_QUEUE = 1,
	DUMP_REC_ITEM,
	DUMP_REC_QUEUE_END,
	DUMP_REC_END,
	DUMP_REC_ID
};

struct dump_rec {
	enum dump_rec_type type;
	const char *name;        /* DUMP_REC_QUEUE */
	size_t name_len;
	struct saker_item item;  /* DUMP_REC_ITEM; data valid until the next read */
	int state;               /* DUMP_REC_ITEM: MIG_READY or MIG_DELAYED */
	const void *key;         /* DUMP_REC_ID: the id, valid until the next read */
	size_t key_len;
	int64_t expires_ms;
};

struct dump_reader {
	FILE *fp;
	uint32_t version;
	uint64_t off;
	uint64_t qsum, tsum;
	uint64_t qitems, nqueues, nitems, nids;
	bool in_queue, ended;
	bool ids_seen;           /* the current queue had an 'I': no item may follow */
	char name[256];
	size_t name_len;
	unsigned char attrs[SAKER_ATTRS_MAX];
	unsigned char key[SAKER_DEDUP_KEY_MAX];
	unsigned char *buf;
	size_t cap;
};

/* Read and check the header.  0, or -1 with e set. */
int dump_reader_start(struct dump_reader *r, FILE *fp, struct mig_err *e);
/* The next record, or -1 with e set (bad or truncated input). */
int dump_read(struct dump_reader *r, struct dump_rec *rec, struct mig_err *e);
void dump_reader_free(struct dump_reader *r);

int dump_main(int argc, char **argv);
int load_main(int argc, char **argv);

#endif
