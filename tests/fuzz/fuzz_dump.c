/* fuzz_dump.c -- fuzz target: the `saker load` dump reader into a memory store. */
#include "config.h"

#include <stdbool.h>
#include <string.h>

#include "dump.h"
#include "fuzz.h"
#include "itemattr.h"
#include "migrate_int.h"

extern const struct saker_store_driver saker_store_memory;

#define NOW_MS ((int64_t)1700000000000LL)

int
fuzz_dump(const uint8_t *data, size_t size)
{
	const struct saker_store_driver *drv = &saker_store_memory;
	struct saker_store_opts opts;
	struct dump_reader r;
	struct dump_rec rec;
	struct mig_err e;
	saker_store *s = NULL;
	saker_queue *q = NULL;
	char err[256];
	uint64_t queues = 0, items = 0;
	FILE *fp;

	if (size == 0)
		return 0;
	/* fmemopen does not write to a "rb" buffer; the cast only drops
	 * const for its prototype. */
	if ((fp = fmemopen((void *)(uintptr_t)data, size, "rb")) == NULL)
		return 0;
	memset(&r, 0, sizeof(r));
	memset(&opts, 0, sizeof(opts));
	opts.create = true;
	FUZZ_CHECK(saker_store_open("memory,max-memory=64m", &opts, &s, err,
	    sizeof(err)) == SAKER_OK);
	if (dump_reader_start(&r, fp, &e) < 0) {
		FUZZ_CHECK(e.msg[0] != '\0');
		goto out;
	}
	for (;;) {
		memset(&rec, 0, sizeof(rec));
		if (dump_read(&r, &rec, &e) < 0) {
			FUZZ_CHECK(e.msg[0] != '\0');
			break;
		}
		if (rec.type == DUMP_REC_END) {
			/* A stream that says it ended checked its counts. */
			FUZZ_CHECK(r.ended);
			FUZZ_CHECK(queues == r.nqueues && items == r.nitems);
			break;
		}
		switch (rec.type) {
		case DUMP_REC_QUEUE:
			FUZZ_CHECK(rec.name_len >= 1 && rec.name_len <= 250);
			queues++;
			if (drv->queue_open(s, rec.name, rec.name_len, true, NULL,
			    &q) != SAKER_OK)
				q = NULL;
			break;
		case DUMP_REC_ITEM:
			FUZZ_CHECK(rec.state == MIG_READY ||
			    rec.state == MIG_DELAYED);
			FUZZ_CHECK(rec.item.len <= DUMP_MAX_ITEM);
			FUZZ_CHECK(rec.item.len == 0 || rec.item.data != NULL);
			items++;
			/* the reader hands on only well-formed attributes */
			FUZZ_CHECK(rec.item.attrs_len <= SAKER_ATTRS_MAX);
			FUZZ_CHECK(itemattr_valid(rec.item.attrs,
			    rec.item.attrs_len));
			if (q != NULL)
				(void)drv->put(s, q, &rec.item, NOW_MS);
			break;
		case DUMP_REC_ID: {
			bool replaced;

			FUZZ_CHECK(rec.key_len >= 1 &&
			    rec.key_len <= SAKER_DEDUP_KEY_MAX);
			if (q != NULL)
				(void)drv->dedup_put(s, q, rec.key, rec.key_len,
				    rec.expires_ms, NOW_MS, &replaced);
			break;
		}
		case DUMP_REC_QUEUE_END:
			q = NULL;
			break;
		default:
			FUZZ_CHECK(!"unknown record type");
		}
	}
	(void)saker_store_commit(s);
out:
	dump_reader_free(&r);
	/* the layer's close: it frees what its open made (the store's
	 * name for messages, the wake-up cell) and drops the lock */
	saker_store_close(s);
	fclose(fp);
	return 0;
}
