/* dump.c -- the dump stream format and `saker dump` / `saker load`. */
#include "config.h"

#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "saker/store.h"
#include "bytes.h"
#include "clock.h"
#include "dump.h"
#include "itemattr.h"
#include "migrate_copy.h"
#include "migrate_int.h"
#include "migrate_progress.h"
#include "qname.h"

static const unsigned char dump_magic[12] = {
	'S', 'A', 'K', 'E', 'R', 'D', 'M', 'P', 0x0d, 0x0a, 0x1a, 0x0a
};

#define DUMP_ITEM_HDR 38         /* flags, expires, due, created,
                                  * deliveries (version 2 on), attributes
                                  * length (version 3 on), len */
#define DUMP_ITEM_HDR_V2 36
#define DUMP_ITEM_HDR_V1 32

/* ------------------------------------------------------------------ */
/* writer */

static void
dump_out(struct dump_writer *w, const void *p, size_t len)
{
	if (len == 0)
		return;
	w->tsum = mig_fnv(w->tsum, p, len);
	if (w->in_queue)
		w->qsum = mig_fnv(w->qsum, p, len);
	if (!w->failed && fwrite(p, 1, len, w->fp) != len)
		w->failed = true;
}

void
dump_writer_start_version(struct dump_writer *w, FILE *fp, uint32_t version)
{
	unsigned char v[4];

	memset(w, 0, sizeof(*w));
	w->fp = fp;
	w->version = version;
	w->tsum = MIG_FNV_INIT;
	dump_out(w, dump_magic, sizeof(dump_magic));
	saker_put_be32(v, version);
	dump_out(w, v, sizeof(v));
}

void
dump_write_queue(struct dump_writer *w, const char *name, size_t len)
{
	unsigned char b[3];

	b[0] = 'Q';
	saker_put_be16(b + 1, (uint16_t)len);
	w->in_queue = true;
	w->qsum = MIG_FNV_INIT;
	w->qitems = 0;
	dump_out(w, b, sizeof(b));
	dump_out(w, name, len);
	w->nqueues++;
}

void
dump_write_item(struct dump_writer *w, const struct saker_item *it, int state)
{
	unsigned char b[1 + DUMP_ITEM_HDR];
	size_t n = 29, alen = w->version >= 3 ? it->attrs_len : 0;

	b[0] = state == MIG_DELAYED ? 'D' : 'R';
	saker_put_be32(b + 1, it->flags);
	saker_put_be64(b + 5, (uint64_t)it->expires_ms);
	saker_put_be64(b + 13, state == MIG_DELAYED ? (uint64_t)it->due_ms : 0);
	saker_put_be64(b + 21, (uint64_t)it->created_ms);
	if (w->version >= 2) {
		saker_put_be32(b + n, it->deliveries);
		n += 4;
	}
	if (w->version >= 3) {
		/* callers pass records of at most SAKER_ATTRS_MAX bytes */
		saker_put_be16(b + n, (uint16_t)alen);
		n += 2;
	}
	saker_put_be32(b + n, (uint32_t)it->len);
	dump_out(w, b, n + 4);
	dump_out(w, it->attrs, alen);
	dump_out(w, it->data, it->len);
	w->qitems++;
	w->nitems++;
}

void
dump_write_id(struct dump_writer *w, const void *key, size_t len,
    int64_t expires_ms)
{
	unsigned char b[11];

	if (w->version < 3)
		return;		/* older formats have no ids */
	b[0] = 'I';
	saker_put_be64(b + 1, (uint64_t)expires_ms);
	saker_put_be16(b + 9, (uint16_t)len);
	dump_out(w, b, sizeof(b));
	dump_out(w, key, len);
	w->nids++;
}

void
dump_write_queue_end(struct dump_writer *w)
{
	unsigned char b[17];

	b[0] = 'E';
	saker_put_be64(b + 1, w->qitems);
	saker_put_be64(b + 9, w->qsum);
	w->in_queue = false;
	dump_out(w, b, sizeof(b));
}

int
dump_writer_finish(struct dump_writer *w)
{
	unsigned char b[25];

	b[0] = 'Z';
	saker_put_be64(b + 1, w->nqueues);
	saker_put_be64(b + 9, w->nitems);
	saker_put_be64(b + 17, w->tsum);
	dump_out(w, b, sizeof(b));
	if (fflush(w->fp) != 0 || ferror(w->fp))
		w->failed = true;
	if (w->failed && errno == 0)
		errno = EIO;
	return w->failed ? -1 : 0;
}

/* ------------------------------------------------------------------ */
/* reader */

/* A read stopped short at byte `at`; a truncated dump ends `how` `what`. */
static int
dump_short(struct dump_reader *r, uint64_t at, const char *how,
    const char *what, struct mig_err *e)
{
	if (mig_interrupted != 0)
		mig_seterr(e, "interrupted");
	else if (ferror(r->fp))
		mig_seterr(e, "reading the dump failed at byte %" PRIu64 ": %s",
		    at, strerror(errno));
	else
		mig_seterr(e, "truncated dump: input ends at byte %" PRIu64 " %s %s",
		    at, how, what);
	return -1;
}

/* Read exactly len bytes into p; they count towards the checksums. */
static int
dump_in(struct dump_reader *r, void *p, size_t len, const char *what,
    struct mig_err *e)
{
	size_t got;

	if (len == 0)
		return 0;
	got = fread(p, 1, len, r->fp);
	if (got != len)
		return dump_short(r, r->off + got, "inside", what, e);
	r->off += len;
	r->tsum = mig_fnv(r->tsum, p, len);
	if (r->in_queue)
		r->qsum = mig_fnv(r->qsum, p, len);
	return 0;
}

int
dump_reader_start(struct dump_reader *r, FILE *fp, struct mig_err *e)
{
	unsigned char h[DUMP_HEADER_LEN];
	uint32_t version;
	size_t got;

	memset(r, 0, sizeof(*r));
	r->fp = fp;
	r->tsum = MIG_FNV_INIT;
	got = fread(h, 1, sizeof(h), fp);
	if (got >= 8 && memcmp(h, dump_magic, 8) == 0 && got < sizeof(h)) {
		mig_seterr(e, "truncated dump: input ends at byte %zu inside the header", got);
		return -1;
	}
	if (got < sizeof(h) || memcmp(h, dump_magic, 8) != 0) {
		mig_seterr(e, "not a saker dump (bad magic)");
		return -1;
	}
	if (memcmp(h + 8, dump_magic + 8, 4) != 0) {
		mig_seterr(e, "damaged saker dump header (line endings converted? "
		    "dumps are binary)");
		return -1;
	}
	version = saker_get_be32(h + 12);
	if (version < DUMP_VERSION_MIN || version > DUMP_VERSION) {
		mig_seterr(e, "dump format version %" PRIu32 " is not supported by "
		    "this saker (it reads versions %d to %d)", version,
		    DUMP_VERSION_MIN, DUMP_VERSION);
		return -1;
	}
	r->version = version;
	r->off = sizeof(h);
	r->tsum = mig_fnv(r->tsum, h, sizeof(h));
	return 0;
}

static int
dump_read_item(struct dump_reader *r, struct dump_rec *rec, int tag,
    struct mig_err *e)
{
	unsigned char b[DUMP_ITEM_HDR];
	size_t hlen = r->version >= 3 ? DUMP_ITEM_HDR : r->version >= 2 ?
	    DUMP_ITEM_HDR_V2 : DUMP_ITEM_HDR_V1;
	uint32_t len;
	size_t have = 0, alen = 0;

	if (!r->in_queue) {
		mig_seterr(e, "bad dump: item outside a queue at byte %" PRIu64, r->off - 1);
		return -1;
	}
	if (r->ids_seen) {
		mig_seterr(e, "bad dump: item after the queue's ids at byte %" PRIu64,
		    r->off - 1);
		return -1;
	}
	if (dump_in(r, b, hlen, "an item", e) < 0)
		return -1;
	memset(&rec->item, 0, sizeof(rec->item));
	rec->item.flags = saker_get_be32(b);
	rec->item.expires_ms = (int64_t)saker_get_be64(b + 4);
	rec->item.due_ms = (int64_t)saker_get_be64(b + 12);
	rec->item.created_ms = (int64_t)saker_get_be64(b + 20);
	if (r->version >= 2)
		rec->item.deliveries = saker_get_be32(b + 28);
	if (r->version >= 3)
		alen = saker_get_be16(b + 32);
	len = saker_get_be32(b + hlen - 4);
	if (alen > SAKER_ATTRS_MAX) {
		mig_seterr(e, "bad dump: item attributes of %zu bytes at byte %" PRIu64
		    " (limit %u)", alen, r->off, SAKER_ATTRS_MAX);
		return -1;
	}
	if (len > DUMP_MAX_ITEM) {
		mig_seterr(e, "bad dump: item of %" PRIu32 " bytes at byte %" PRIu64
		    " (limit %u)", len, r->off, DUMP_MAX_ITEM);
		return -1;
	}
	if ((tag == 'R' && rec->item.due_ms != 0) || (tag == 'D' && rec->item.due_ms <= 0)) {
		mig_seterr(e, "bad dump: bad due time at byte %" PRIu64, r->off);
		return -1;
	}
	if (dump_in(r, r->attrs, alen, "item attributes", e) < 0)
		return -1;
	if (!itemattr_valid(r->attrs, alen)) {
		mig_seterr(e, "bad dump: malformed item attributes at byte %" PRIu64,
		    r->off - alen);
		return -1;
	}
	/* Grow with the data actually read, so a damaged length on a short
	 * stream cannot make us allocate a gigabyte. */
	while (have < len) {
		size_t chunk = len - have > (1u << 20) ? (1u << 20) : len - have;
		if (have + chunk > r->cap) {
			size_t cap = r->cap > 0 ? r->cap : 4096;
			unsigned char *nb;
			while (cap < have + chunk)
				cap *= 2;
			if ((nb = realloc(r->buf, cap)) == NULL) {
				mig_seterr(e, "out of memory");
				return -1;
			}
			r->buf = nb;
			r->cap = cap;
		}
		if (dump_in(r, r->buf + have, chunk, "item data", e) < 0)
			return -1;
		have += chunk;
	}
	rec->item.len = len;
	rec->item.data = r->buf;
	rec->item.attrs_len = alen;
	rec->item.attrs = alen > 0 ? r->attrs : NULL;
	rec->state = tag == 'D' ? MIG_DELAYED : MIG_READY;
	rec->type = DUMP_REC_ITEM;
	r->qitems++;
	r->nitems++;
	return DUMP_REC_ITEM;
}

static int
dump_read_id(struct dump_reader *r, struct dump_rec *rec, struct mig_err *e)
{
	unsigned char b[10];
	size_t len;

	if (r->version < 3) {
		mig_seterr(e, "bad dump: unknown record type 0x%02x at byte %" PRIu64,
		    'I', r->off - 1);
		return -1;
	}
	if (!r->in_queue) {
		mig_seterr(e, "bad dump: id outside a queue at byte %" PRIu64, r->off - 1);
		return -1;
	}
	if (dump_in(r, b, sizeof(b), "an id", e) < 0)
		return -1;
	len = saker_get_be16(b + 8);
	if (len == 0 || len > SAKER_DEDUP_KEY_MAX) {
		mig_seterr(e, "bad dump: id of %zu bytes at byte %" PRIu64
		    " (1..%u)", len, r->off, SAKER_DEDUP_KEY_MAX);
		return -1;
	}
	if (dump_in(r, r->key, len, "an id", e) < 0)
		return -1;
	r->ids_seen = true;
	r->nids++;
	rec->type = DUMP_REC_ID;
	rec->key = r->key;
	rec->key_len = len;
	rec->expires_ms = (int64_t)saker_get_be64(b);
	return DUMP_REC_ID;
}

int
dump_read(struct dump_reader *r, struct dump_rec *rec, struct mig_err *e)
{
	unsigned char tag, b[24];
	uint64_t sum;

	if (r->ended) {
		mig_seterr(e, "read past the end of the dump");
		return -1;
	}
	/* The checksums cover the tag byte, except the 'E'/'Z' that carry them. */
	if (fread(&tag, 1, 1, r->fp) != 1)
		return dump_short(r, r->off, "without", "the end record", e);
	r->off++;
	if (tag == 'R' || tag == 'D' || tag == 'Q' || (tag == 'I' && r->version >= 3)) {
		r->tsum = mig_fnv(r->tsum, &tag, 1);
		if (r->in_queue || tag == 'Q')
			r->qsum = mig_fnv(tag == 'Q' ? MIG_FNV_INIT : r->qsum, &tag, 1);
	}
	switch (tag) {
	case 'Q': {
		size_t len;

		if (r->in_queue) {
			mig_seterr(e, "bad dump: queue inside a queue at byte %" PRIu64, r->off - 1);
			return -1;
		}
		r->in_queue = true;
		r->ids_seen = false;
		r->qitems = 0;
		if (dump_in(r, b, 2, "a queue name", e) < 0)
			return -1;
		len = (size_t)b[0] << 8 | b[1];
		if (len == 0 || len > SAKER_QNAME_MAX) {
			mig_seterr(e, "bad dump: queue name of %zu bytes at byte %" PRIu64,
			    len, r->off);
			return -1;
		}
		if (dump_in(r, r->name, len, "a queue name", e) < 0)
			return -1;
		if (!saker_qname_stored_ok(r->name, len)) {
			mig_seterr(e, "bad dump: invalid queue name at byte %" PRIu64, r->off - len);
			return -1;
		}
		r->name_len = len;
		r->nqueues++;
		rec->type = DUMP_REC_QUEUE;
		rec->name = r->name;
		rec->name_len = len;
		return DUMP_REC_QUEUE;
	}
	case 'R':
	case 'D':
		return dump_read_item(r, rec, tag, e);
	case 'I':
		return dump_read_id(r, rec, e);
	case 'E':
		if (!r->in_queue) {
			mig_seterr(e, "bad dump: queue end outside a queue at byte %" PRIu64,
			    r->off - 1);
			return -1;
		}
		sum = r->qsum;
		r->in_queue = false;
		/* The 'E' record goes into the stream sum only. */
		r->tsum = mig_fnv(r->tsum, &tag, 1);
		if (dump_in(r, b, 16, "a queue end", e) < 0)
			return -1;
		if (saker_get_be64(b) != r->qitems || saker_get_be64(b + 8) != sum) {
			mig_seterr(e, "bad dump: queue '%.*s' is damaged (count or checksum "
			    "mismatch at byte %" PRIu64 ")", (int)r->name_len, r->name, r->off);
			return -1;
		}
		rec->type = DUMP_REC_QUEUE_END;
		return DUMP_REC_QUEUE_END;
	case 'Z': {
		unsigned char extra;

		if (r->in_queue) {
			mig_seterr(e, "bad dump: stream ends inside a queue at byte %" PRIu64,
			    r->off - 1);
			return -1;
		}
		sum = r->tsum;
		if (dump_in(r, b, 24, "the end record", e) < 0)
			return -1;
		if (saker_get_be64(b) != r->nqueues || saker_get_be64(b + 8) != r->nitems ||
		    saker_get_be64(b + 16) != sum) {
			mig_seterr(e, "bad dump: end record does not match the stream "
			    "(count or checksum mismatch)");
			return -1;
		}
		if (fread(&extra, 1, 1, r->fp) == 1) {
			mig_seterr(e, "bad dump: data after the end record at byte %" PRIu64,
			    r->off);
			return -1;
		}
		r->ended = true;
		rec->type = DUMP_REC_END;
		return DUMP_REC_END;
	}
	default:
		mig_seterr(e, "bad dump: unknown record type 0x%02x at byte %" PRIu64,
		    tag, r->off - 1);
		return -1;
	}
}

void
dump_reader_free(struct dump_reader *r)
{
	free(r->buf);
	r->buf = NULL;
	r->cap = 0;
}

/* ------------------------------------------------------------------ */
/* saker dump */

struct dump_ctx {
	struct dump_writer w;
	struct mig_meter m;
	struct mig_err *e;
};

static int
dump_cb_queue(void *arg, const char *name, size_t len)
{
	struct dump_ctx *c = arg;

	dump_write_queue(&c->w, name, len);
	return 0;
}

static int
dump_cb_item(void *arg, const struct saker_item *it, int state, bool was_open)
{
	struct dump_ctx *c = arg;

	if (it->len > DUMP_MAX_ITEM) {
		mig_seterr(c->e, "an item of %zu bytes is larger than the dump "
		    "format allows", it->len);
		return 1;
	}
	dump_write_item(&c->w, it, state);
	mig_meter_add(&c->m, it->len);
	if (c->w.failed) {
		mig_seterr(c->e, "writing the dump failed: %s", strerror(errno));
		return 1;
	}
	return 0;
}

static int
dump_cb_queue_end(void *arg)
{
	struct dump_ctx *c = arg;

	dump_write_queue_end(&c->w);
	return 0;
}

static int
dump_cb_id(void *arg, const void *key, size_t len, int64_t expires_ms)
{
	struct dump_ctx *c = arg;

	dump_write_id(&c->w, key, len, expires_ms);
	if (c->w.failed) {
		mig_seterr(c->e, "writing the dump failed: %s", strerror(errno));
		return 1;
	}
	return 0;
}

static const struct mig_source_cb dump_cb = {
	dump_cb_queue, dump_cb_item, dump_cb_queue_end, dump_cb_id
};

static const char dump_usage[] =
	    "usage: saker dump [--progress|--quiet] [-o FILE] SPEC > FILE\n"
	    "\n"
	    "Write every queue of the store SPEC (TYPE:LOCATION) as a portable,\n"
	    "versioned binary stream (format: saker(1), DUMP FORMAT) to standard\n"
	    "output or FILE.  Items are written as a restart would show them, with\n"
	    "their attributes; each queue's live deduplication ids with their expiry.\n"
	    "Stop sakerd on the store first.\n"
	    "\n"
	    "  -o, --output FILE  write FILE (atomically: FILE.tmp-PID, then rename)\n"
	    "  --progress         progress line on stderr even when not a terminal\n"
	    "  -q, --quiet        no progress line, no summary\n"
	    "  -h, --help         this text\n"
	    "\n"
	    "Exit status: 0 written, 1 failure, 2 usage error.\n";

int
dump_main(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "output", required_argument, NULL, 'o' },
		{ "progress", no_argument, NULL, 'p' },
		{ "quiet", no_argument, NULL, 'q' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 }
	};
	static char obuf[1 << 20];
	enum mig_progress_mode mode = MIG_PROGRESS_AUTO;
	struct dump_ctx c;
	struct mig_err e;
	saker_store *src = NULL;
	const char *output = NULL;
	char tmp[4096] = "";
	FILE *fp = stdout;
	bool quiet = false;
	int ch, rc = 1;

	optind = 1;
	while ((ch = getopt_long(argc, argv, "o:qh", longopts, NULL)) != -1) {
		switch (ch) {
		case 'o': output = optarg; break;
		case 'p': mode = MIG_PROGRESS_ON; break;
		case 'q': quiet = true; mode = MIG_PROGRESS_OFF; break;
		case 'h': fputs(dump_usage, stdout); return 0;
		default:  fputs(dump_usage, stderr); return 2;
		}
	}
	if (argc - optind != 1) {
		fputs(dump_usage, stderr);
		return 2;
	}
	if (output == NULL && isatty(STDOUT_FILENO)) {
		fprintf(stderr, "saker dump: refusing to write a binary dump to a "
		    "terminal; redirect it to a file or use -o FILE\n");
		return 1;
	}
	mig_signals_install();
	if (mig_source_open(argv[optind], &src, &e) < 0) {
		fprintf(stderr, "saker dump: %s\n", e.msg);
		goto out;
	}
	if (output != NULL) {
		snprintf(tmp, sizeof(tmp), "%s.tmp-%ld", output, (long)getpid());
		/* not into fp at once: on failure `out` would fclose(NULL) */
		FILE *f = fopen(tmp, "wxe");

		if (f == NULL) {
			fprintf(stderr, "saker dump: cannot create %s: %s\n", tmp, strerror(errno));
			tmp[0] = '\0';
			goto out;
		}
		fp = f;
	}
	setvbuf(fp, obuf, _IOFBF, sizeof(obuf));
	memset(&c, 0, sizeof(c));
	c.e = &e;
	mig_meter_start(&c.m, mode);
	c.m.total_items = mig_source_totals(src);
	dump_writer_start_version(&c.w, fp, DUMP_VERSION);
	errno = 0;
	if (mig_source_each(src, saker_now_ms(), &dump_cb, &c, &e) < 0) {
		mig_meter_end(&c.m);
		fprintf(stderr, "saker dump: %s\n", e.msg);
		goto out;
	}
	if (dump_writer_finish(&c.w) < 0 || (fp != stdout && fsync(fileno(fp)) != 0)) {
		mig_meter_end(&c.m);
		fprintf(stderr, "saker dump: writing the dump failed: %s\n", strerror(errno));
		goto out;
	}
	mig_meter_end(&c.m);
	if (fp != stdout) {
		int failed = fclose(fp);
		fp = stdout;
		if (failed != 0 || rename(tmp, output) != 0) {
			fprintf(stderr, "saker dump: cannot write %s: %s\n", output, strerror(errno));
			goto out;
		}
		tmp[0] = '\0';
	}
	if (!quiet) {
		char b[32];
		mig_human_bytes(b, sizeof(b), c.m.bytes);
		fprintf(stderr, "dumped %" PRIu64 " items (%s) in %" PRIu64 " queues",
		    c.w.nitems, b, c.w.nqueues);
		if (c.w.nids > 0)
			fprintf(stderr, ", %" PRIu64 " deduplication ids", c.w.nids);
		fprintf(stderr, " from %s\n", argv[optind]);
	}
	rc = 0;
out:
	if (fp != stdout)
		fclose(fp);
	if (tmp[0] != '\0')
		unlink(tmp);
	saker_store_close(src);
	mig_signals_restore();
	return rc;
}

/* ------------------------------------------------------------------ */
/* saker load */

static const char load_usage[] =
	    "usage: saker load [--append] [--progress|--quiet] [-i FILE] SPEC < FILE\n"
	    "\n"
	    "Read a stream written by `saker dump` (any format version) from standard\n"
	    "input or FILE into the store SPEC (TYPE:LOCATION), created if it does\n"
	    "not exist; deduplication ids keep their expiry.  The\n"
	    "store is built beside its final place, verified and renamed into\n"
	    "place; on bad input, any failure or an interrupt it is left as it was.\n"
	    "A non-empty store is refused unless --append is given.\n"
	    "\n"
	    "  --append          add after the items of a non-empty store\n"
	    "  -i, --input FILE  read FILE instead of standard input\n"
	    "  --progress        progress line on stderr even when not a terminal\n"
	    "  -q, --quiet       no progress line, no summary\n"
	    "  -h, --help        this text\n"
	    "\n"
	    "Exit status: 0 loaded and verified, 1 failure, 2 usage error.\n";

/* Feed every record of r into t; 0 at the end record. */
static int
load_records(struct dump_reader *r, struct mig_target *t, int64_t now_ms,
    struct mig_err *e)
{
	struct dump_rec rec;

	for (;;) {
		switch (dump_read(r, &rec, e)) {
		case DUMP_REC_QUEUE:
			if (mig_target_queue(t, rec.name, rec.name_len, e) < 0)
				return -1;
			break;
		case DUMP_REC_ITEM:
			/* Fell due since the dump: a restart would promote it. */
			if (rec.state == MIG_DELAYED && rec.item.due_ms <= now_ms) {
				rec.state = MIG_READY;
				rec.item.due_ms = 0;
			}
			if (mig_target_put(t, &rec.item, rec.state, false, e) < 0)
				return -1;
			break;
		case DUMP_REC_ID:
			if (mig_target_id(t, rec.key, rec.key_len, rec.expires_ms,
			    e) < 0)
				return -1;
			break;
		case DUMP_REC_QUEUE_END:
			break;
		case DUMP_REC_END:
			return 0;
		default:
			return -1;
		}
	}
}

int
load_main(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "append", no_argument, NULL, 'a' },
		{ "input", required_argument, NULL, 'i' },
		{ "progress", no_argument, NULL, 'p' },
		{ "quiet", no_argument, NULL, 'q' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 }
	};
	static char ibuf[1 << 20];
	struct mig_opts opts;
	struct mig_err e;
	struct mig_target *t = NULL;
	struct dump_reader r;
	const char *input = NULL;
	FILE *fp = stdin;
	int64_t now_ms;
	int ch, rc = 1;

	memset(&opts, 0, sizeof(opts));
	memset(&r, 0, sizeof(r));
	optind = 1;
	while ((ch = getopt_long(argc, argv, "i:qh", longopts, NULL)) != -1) {
		switch (ch) {
		case 'a': opts.append = true; break;
		case 'i': input = optarg; break;
		case 'p': opts.progress = MIG_PROGRESS_ON; break;
		case 'q': opts.quiet = true; opts.progress = MIG_PROGRESS_OFF; break;
		case 'h': fputs(load_usage, stdout); return 0;
		default:  fputs(load_usage, stderr); return 2;
		}
	}
	if (argc - optind != 1) {
		fputs(load_usage, stderr);
		return 2;
	}
	if (mig_spec_driver(argv[optind], "destination", &e) == NULL) {
		fprintf(stderr, "saker load: %s\n", e.msg);
		return 1;
	}
	if (input != NULL && (fp = fopen(input, "rbe")) == NULL) {
		fprintf(stderr, "saker load: %s: %s\n", input, strerror(errno));
		return 1;
	}
	if (input == NULL && isatty(STDIN_FILENO)) {
		fprintf(stderr, "saker load: refusing to read a dump from a terminal; "
		    "redirect standard input from a file or use -i FILE\n");
		return 1;
	}
	setvbuf(fp, ibuf, _IOFBF, sizeof(ibuf));
	mig_signals_install();
	now_ms = saker_now_ms();
	/* Check the header before touching the destination at all. */
	if (dump_reader_start(&r, fp, &e) < 0 ||
	    mig_target_open(argv[optind], NULL, &opts, now_ms, &t, &e) < 0 ||
	    load_records(&r, t, now_ms, &e) < 0 || mig_target_finish(t, &e) < 0) {
		mig_target_free(t);
		t = NULL;
		fprintf(stderr, "saker load: %s; %s left as it was\n", e.msg, argv[optind]);
		goto out;
	}
	if (!opts.quiet)
		mig_target_summary(t, stdout, "loaded");
	rc = fflush(stdout) == 0 ? 0 : 1;
out:
	mig_target_free(t);
	dump_reader_free(&r);
	if (fp != stdin)
		fclose(fp);
	mig_signals_restore();
	return rc;
}
