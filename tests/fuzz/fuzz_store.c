/* fuzz_store.c -- fuzz target: store operations chosen by the input, checked against a model. */
#include "config.h"

#include <inttypes.h>
#include <stdbool.h>
#include <string.h>

#include "fuzz.h"

extern const struct saker_store_driver saker_store_memory;
extern const struct saker_store_driver saker_store_example;

/*
 * The input is a program: each operation is one byte (op % NOPS) followed
 * by the argument bytes it reads; a missing byte reads as 0.  The model
 * below is what store.h promises, written as plainly as possible: arrays,
 * linear scans.  After every operation the driver must agree with it.
 */

#define NQ		3
#define MAXITEMS	400	/* live items in the model; more puts are skipped */
#define MAXOPS		3000
#define BASE_MS		((int64_t)1700000000000LL)

enum { OP_PUT, OP_TAKE, OP_OPEN, OP_PEEK, OP_CONFIRM, OP_RELEASE,
	OP_PROMOTE, OP_FLUSH, OP_DELETE, OP_TIME, OP_FLUSH_EXPIRED,
	OP_COMMIT, OP_CHECK, OP_REOPEN, OP_RELEASE_DELAYED, OP_MOVE,
	OP_PUT_ONCE, OP_DEDUP_SWEEP, NOPS };

#define NKEYS		16	/* deduplication ids k0..k15 per queue */
#define MAXATTRS	48

struct mitem {
	uint64_t serial;	/* also in the first 8 data bytes */
	uint64_t arrival;
	uint64_t id;		/* open items: the id take() gave */
	uint32_t flags;
	int64_t expires, due, created;
	size_t len;
	size_t alen;		/* its attributes, handed back byte-exact */
	unsigned char attrs[MAXATTRS];
};

struct mqueue {
	bool exists;
	saker_queue *h;
	struct mitem ready[MAXITEMS], delayed[MAXITEMS], open[MAXITEMS];
	size_t nready, ndelayed, nopen;
	uint64_t total, expired;
	int notified;
	int64_t id_exp[NKEYS];	/* deduplication ids: 0 = none */
	uint64_t hits;
};

struct fz {
	const struct saker_store_driver *drv;
	saker_store *s;
	const uint8_t *p, *end;
	int64_t now;
	uint64_t serial, arrival, live;
	struct mqueue q[NQ];
	/* take callback */
	const struct mitem *want;
	bool reject, seen;
	uint64_t got_id;
	/* iterate callback */
	size_t iter_pos;
	struct mqueue *iter_q;
	unsigned char buf[9000];
	bool draining;		/* check_reachable() runs */
};

static const char *const qnames[NQ] = { "q0", "q1", "jobs+audit" };

static unsigned
next8(struct fz *f)
{
	return f->p < f->end ? *f->p++ : 0;
}

static uint32_t
next32(struct fz *f)
{
	uint32_t v = 0;
	int i;

	for (i = 0; i < 4; i++)
		v = v << 8 | next8(f);
	return v;
}

static bool
is_expired(const struct mitem *it, int64_t now)
{
	return it->expires != 0 && it->expires <= now;
}

/* The data of item `serial`: the serial, then bytes derived from it. */
static void
fill(unsigned char *b, uint64_t serial, size_t len)
{
	size_t i;

	memcpy(b, &serial, 8);
	for (i = 8; i < len; i++)
		b[i] = (unsigned char)(serial * 31 + i);
}

static void
check_item(struct fz *f, const struct saker_item *got, const struct mitem *m)
{
	uint64_t serial;

	fill(f->buf, m->serial, m->len);
	FUZZ_CHECK(got->len == m->len);
	FUZZ_CHECK(got->data != NULL);
	memcpy(&serial, got->data, 8);
	FUZZ_CHECK(serial == m->serial);
	FUZZ_CHECK(memcmp(got->data, f->buf, m->len) == 0);
	FUZZ_CHECK(got->flags == m->flags);
	FUZZ_CHECK(got->expires_ms == m->expires);
	FUZZ_CHECK(got->created_ms == m->created);
	FUZZ_CHECK(got->attrs_len == m->alen);
	FUZZ_CHECK(m->alen == 0 || memcmp(got->attrs, m->attrs, m->alen) == 0);
}

static void
notify_cb(void *arg, saker_queue *h, void *ctx)
{
	struct fz *f = arg;
	struct mqueue *mq = ctx;

	if (f->draining)
		return;
	FUZZ_CHECK(mq != NULL && mq->h == h);
	mq->notified++;
}

static void
clear_notified(struct fz *f)
{
	int i;

	for (i = 0; i < NQ; i++)
		f->q[i].notified = 0;
}

static void
insert_delayed(struct mqueue *mq, const struct mitem *it)
{
	size_t k = mq->ndelayed;

	/* (due, arrival) order; arrival grows, so after every equal due */
	while (k > 0 && mq->delayed[k - 1].due > it->due)
		k--;
	memmove(&mq->delayed[k + 1], &mq->delayed[k],
	    (mq->ndelayed - k) * sizeof(*it));
	mq->delayed[k] = *it;
	mq->ndelayed++;
}

static struct mqueue *
pick_queue(struct fz *f, bool create)
{
	struct mqueue *mq = &f->q[next8(f) % NQ];
	const char *name = qnames[mq - f->q];
	int rc;

	if (mq->exists || !create)
		return mq->exists ? mq : NULL;
	rc = saker_store_queue_open(f->s, name, strlen(name), true, mq, &mq->h);
	FUZZ_CHECK(rc == SAKER_OK && mq->h != NULL);
	mq->exists = true;
	mq->nready = mq->ndelayed = mq->nopen = 0;
	mq->total = mq->expired = 0;
	memset(mq->id_exp, 0, sizeof(mq->id_exp));
	mq->hits = 0;
	return mq;
}

static void
op_put(struct fz *f)
{
	struct mqueue *mq = pick_queue(f, true);
	struct saker_item in;
	struct mitem m;
	unsigned b = next8(f), lb = next8(f);
	int rc;

	memset(&m, 0, sizeof(m));
	m.flags = next32(f);
	m.len = 8 + (lb & 0x80 ? (lb & 0x7f) * 67 : lb & 0x3f);
	if (b & 1)
		m.due = f->now + (int64_t)next8(f) * 10 - 20;
	if (b & 2)
		m.expires = f->now + (int64_t)next8(f) * 10;
	m.created = (b & 4) ? f->now - 5 : f->now;
	if (f->live >= MAXITEMS)
		return;
	m.serial = ++f->serial;
	m.arrival = ++f->arrival;
	fill(f->buf, m.serial, m.len);
	/* opaque attributes of any shape (none for some items) */
	m.alen = m.serial % 5 == 0 ? 0 : m.serial % MAXATTRS;
	fill(m.attrs, m.serial * 7, m.alen);
	memset(&in, 0, sizeof(in));
	in.flags = m.flags;
	in.expires_ms = m.expires;
	in.due_ms = m.due;
	in.created_ms = (b & 4) ? m.created : 0;
	in.len = m.len;
	in.data = f->buf;
	in.id = 12345;		/* ignored on input */
	in.state = SAKER_ITEM_OPEN;
	in.attrs = m.attrs;
	in.attrs_len = m.alen;
	rc = saker_store_put(f->s, mq->h, &in, f->now);
	FUZZ_CHECK(rc == SAKER_OK);
	f->live++;
	mq->total++;
	if (m.due > f->now) {
		insert_delayed(mq, &m);
		FUZZ_CHECK(mq->notified == 0);
	} else {
		mq->ready[mq->nready++] = m;
		FUZZ_CHECK(mq->notified == 1);
	}
}

static int
take_cb(void *arg, const struct saker_item *item)
{
	struct fz *f = arg;

	FUZZ_CHECK(!f->seen);
	FUZZ_CHECK(f->want != NULL);
	f->seen = true;
	check_item(f, item, f->want);
	f->got_id = item->id;
	return f->reject ? 7 : 0;
}

static void
op_take(struct fz *f, int mode)
{
	struct mqueue *mq = pick_queue(f, false);
	int rc;

	f->reject = (next8(f) & 7) == 7;
	if (mq == NULL)
		return;
	/* expired items met at the head are dropped and counted */
	while (mq->nready > 0 && is_expired(&mq->ready[0], f->now)) {
		memmove(&mq->ready[0], &mq->ready[1],
		    --mq->nready * sizeof(mq->ready[0]));
		mq->expired++;
		f->live--;
	}
	f->want = mq->nready > 0 ? &mq->ready[0] : NULL;
	f->seen = false;
	rc = saker_store_take(f->s, mq->h, mode, f->now, take_cb, f);
	if (f->want == NULL) {
		FUZZ_CHECK(rc == SAKER_EEMPTY && !f->seen);
		return;
	}
	FUZZ_CHECK(f->seen);
	if (f->reject) {
		FUZZ_CHECK(rc == 7);
		return;
	}
	FUZZ_CHECK(rc == SAKER_OK);
	if (mode == SAKER_TAKE_PEEK)
		return;
	if (mode == SAKER_TAKE_OPEN) {
		struct mitem m = mq->ready[0];
		size_t k;

		m.id = f->got_id;
		for (k = 0; k < mq->nopen; k++)
			FUZZ_CHECK(mq->open[k].id != m.id);
		/* the open list is kept oldest (smallest id) first */
		k = mq->nopen;
		while (k > 0 && mq->open[k - 1].id > m.id)
			k--;
		memmove(&mq->open[k + 1], &mq->open[k],
		    (mq->nopen - k) * sizeof(m));
		mq->open[k] = m;
		mq->nopen++;
	} else
		f->live--;
	memmove(&mq->ready[0], &mq->ready[1], --mq->nready * sizeof(mq->ready[0]));
}

static void
op_confirm_release(struct fz *f, bool release)
{
	struct mqueue *mq = pick_queue(f, false);
	size_t k = next8(f);
	uint64_t id;
	int rc;

	if (mq == NULL)
		return;
	k %= mq->nopen + 1;
	if (k == mq->nopen) {
		/* an id that is not open in this queue */
		id = 0;
		for (k = 0; k < mq->nopen; k++)
			if (mq->open[k].id >= id)
				id = mq->open[k].id + 1;
		id += 1000;
		rc = release ? saker_store_release(f->s, mq->h, id) :
		    saker_store_confirm(f->s, mq->h, id);
		FUZZ_CHECK(rc == SAKER_ENOTFOUND);
		FUZZ_CHECK(mq->notified == 0);
		return;
	}
	id = mq->open[k].id;
	rc = release ? saker_store_release(f->s, mq->h, id) :
	    saker_store_confirm(f->s, mq->h, id);
	FUZZ_CHECK(rc == SAKER_OK);
	if (release) {
		memmove(&mq->ready[1], &mq->ready[0], mq->nready * sizeof(mq->ready[0]));
		mq->ready[0] = mq->open[k];
		mq->nready++;
		FUZZ_CHECK(mq->notified == 1);
	} else {
		f->live--;
		FUZZ_CHECK(mq->notified == 0);
	}
	memmove(&mq->open[k], &mq->open[k + 1], (mq->nopen - k - 1) * sizeof(mq->open[0]));
	mq->nopen--;
}

/* move(): an open item to the ready tail of another queue (made when
 * missing), the dead-letter move; its counters change in two queues. */
static void
op_move(struct fz *f)
{
	struct mqueue *mq = pick_queue(f, false), *to;
	size_t k = next8(f);
	uint64_t id;
	int rc;

	to = pick_queue(f, true);
	if (mq == NULL)
		return;
	k %= mq->nopen + 1;
	if (to == mq || k == mq->nopen) {
		/* the same queue, or an id that is not open in it */
		id = 1000000 + f->serial;
		if (to == mq && k < mq->nopen)
			id = mq->open[k].id;
		rc = saker_store_move(f->s, mq->h, id, to->h);
		FUZZ_CHECK(rc == (to == mq ? SAKER_EINVAL : SAKER_ENOTFOUND));
		FUZZ_CHECK(mq->notified == 0 && to->notified == 0);
		return;
	}
	rc = saker_store_move(f->s, mq->h, mq->open[k].id, to->h);
	FUZZ_CHECK(rc == SAKER_OK);
	FUZZ_CHECK(mq->notified == 0 && to->notified == 1);
	to->ready[to->nready++] = mq->open[k];
	to->total++;
	memmove(&mq->open[k], &mq->open[k + 1], (mq->nopen - k - 1) * sizeof(mq->open[0]));
	mq->nopen--;
}

/* release_delayed(): into the delayed set as if put now, or (due not
 * after now) a release */
static void
op_release_delayed(struct fz *f)
{
	struct mqueue *mq = pick_queue(f, false);
	size_t k = next8(f);
	int64_t due = f->now + (int64_t)next8(f) * 10 - 20;
	uint64_t id;
	int rc;

	if (mq == NULL)
		return;
	k %= mq->nopen + 1;
	if (k == mq->nopen) {
		id = 1000000 + f->serial;	/* ids of items never open */
		for (k = 0; k < mq->nopen; k++)
			FUZZ_CHECK(mq->open[k].id != id);
		rc = saker_store_release_delayed(f->s, mq->h, id, due, f->now);
		FUZZ_CHECK(rc == SAKER_ENOTFOUND);
		FUZZ_CHECK(mq->notified == 0);
		return;
	}
	rc = saker_store_release_delayed(f->s, mq->h, mq->open[k].id, due, f->now);
	FUZZ_CHECK(rc == SAKER_OK);
	if (due <= f->now) {
		memmove(&mq->ready[1], &mq->ready[0], mq->nready * sizeof(mq->ready[0]));
		mq->ready[0] = mq->open[k];
		mq->nready++;
		FUZZ_CHECK(mq->notified == 1);
	} else {
		struct mitem m = mq->open[k];

		m.due = due;
		m.arrival = ++f->arrival;
		insert_delayed(mq, &m);
		FUZZ_CHECK(mq->notified == 0);
	}
	memmove(&mq->open[k], &mq->open[k + 1], (mq->nopen - k - 1) * sizeof(mq->open[0]));
	mq->nopen--;
}

static void
op_promote(struct fz *f)
{
	int64_t next_due = -1, want_next = 0;
	bool gained[NQ] = { false, false, false };
	int i, rc;

	rc = saker_store_promote(f->s, f->now, &next_due);
	FUZZ_CHECK(rc == SAKER_OK);
	for (;;) {
		struct mqueue *best = NULL;

		/* the globally first due item, by (due, arrival) */
		for (i = 0; i < NQ; i++) {
			struct mqueue *mq = &f->q[i];

			if (!mq->exists || mq->ndelayed == 0 ||
			    mq->delayed[0].due > f->now)
				continue;
			if (best == NULL || mq->delayed[0].due < best->delayed[0].due ||
			    (mq->delayed[0].due == best->delayed[0].due &&
			    mq->delayed[0].arrival < best->delayed[0].arrival))
				best = mq;
		}
		if (best == NULL)
			break;
		if (is_expired(&best->delayed[0], f->now)) {
			best->expired++;
			f->live--;
		} else {
			best->ready[best->nready++] = best->delayed[0];
			gained[best - f->q] = true;
		}
		memmove(&best->delayed[0], &best->delayed[1],
		    --best->ndelayed * sizeof(best->delayed[0]));
	}
	for (i = 0; i < NQ; i++) {
		if (f->q[i].exists && f->q[i].ndelayed > 0 &&
		    (want_next == 0 || f->q[i].delayed[0].due < want_next))
			want_next = f->q[i].delayed[0].due;
		FUZZ_CHECK(f->q[i].notified == (gained[i] ? 1 : 0));
	}
	FUZZ_CHECK(next_due == want_next);
}

static size_t
key_of(char *k, unsigned i)
{
	return (size_t)snprintf(k, 8, "k%u", i);
}

static uint64_t
ids_of(const struct mqueue *mq)
{
	uint64_t n = 0;
	int i;

	for (i = 0; i < NKEYS; i++)
		n += mq->id_exp[i] != 0;
	return n;
}

/* drop expired ids, oldest expiry first, at most limit (0: all) */
static uint64_t
sweep_model(struct mqueue *mq, int64_t now, uint64_t limit)
{
	uint64_t n = 0;

	while (limit == 0 || n < limit) {
		int i, best = -1;

		for (i = 0; i < NKEYS; i++)
			if (mq->id_exp[i] != 0 && mq->id_exp[i] <= now &&
			    (best < 0 || mq->id_exp[i] < mq->id_exp[best]))
				best = i;
		if (best < 0)
			break;
		mq->id_exp[best] = 0;
		n++;
	}
	return n;
}

/* put_once(): the layer's rules over the driver's id records */
static void
op_put_once(struct fz *f)
{
	struct mqueue *mq = pick_queue(f, true);
	unsigned key = next8(f) % NKEYS, lb = next8(f);
	int64_t window = ((int64_t)next8(f) + 1) * 10;
	uint64_t max = lb & 1 ? 3 : 0;
	struct saker_item in;
	struct mitem m;
	char k[8];
	size_t klen = key_of(k, key);
	bool full;
	int rc, want;

	if (f->live >= MAXITEMS)
		return;
	memset(&m, 0, sizeof(m));
	m.len = 8 + (lb >> 1) % 32;
	m.created = f->now;
	m.serial = ++f->serial;
	m.arrival = ++f->arrival;
	fill(f->buf, m.serial, m.len);
	memset(&in, 0, sizeof(in));
	in.len = m.len;
	in.data = f->buf;
	rc = saker_store_put_once(f->s, mq->h, &in, k, klen, window, max,
	    f->now);
	/* at the limit the expired ids go first, a duplicate or not */
	full = max > 0 && ids_of(mq) >= max;
	if (full) {
		sweep_model(mq, f->now, 0);
		full = ids_of(mq) >= max;
	}
	if (mq->id_exp[key] > f->now) {
		want = SAKER_EEXIST;
		mq->hits++;
	} else
		want = full ? SAKER_EFULL : SAKER_OK;
	FUZZ_CHECK(rc == want);
	if (rc != SAKER_OK) {
		FUZZ_CHECK(mq->notified == 0);
		return;
	}
	mq->id_exp[key] = f->now + window;
	/* the layer's record: version 1, the id */
	m.alen = 4 + klen;
	m.attrs[0] = 1;
	m.attrs[1] = 1;
	m.attrs[2] = 0;
	m.attrs[3] = (unsigned char)klen;
	memcpy(m.attrs + 4, k, klen);
	f->live++;
	mq->total++;
	mq->ready[mq->nready++] = m;
	FUZZ_CHECK(mq->notified == 1);
}

struct idcheck {
	struct mqueue *mq;
	uint64_t n;
	int64_t seen[NKEYS];	/* what the driver listed */
};

static int
id_cb(void *arg, const void *key, size_t len, int64_t expires_ms)
{
	struct idcheck *c = arg;
	unsigned i;

	FUZZ_CHECK(len >= 2 && len <= 3 && ((const char *)key)[0] == 'k');
	i = (unsigned)(((const char *)key)[1] - '0');
	if (len == 3)
		i = i * 10 + (unsigned)(((const char *)key)[2] - '0');
	FUZZ_CHECK(i < NKEYS && c->mq->id_exp[i] == expires_ms);
	FUZZ_CHECK(c->seen[i] == 0);
	c->seen[i] = expires_ms;
	c->n++;
	return 0;
}

/* A bounded sweep removes the oldest expired ids; which of several with
 * one expiry time is the driver's choice, so the model learns it from
 * what is left and checks the order. */
static void
op_dedup_sweep(struct fz *f)
{
	struct mqueue *mq = pick_queue(f, false);
	uint64_t limit = next8(f) % 3, removed = 99, want = 0, gone = 0;
	struct idcheck c;
	int64_t newest_gone = 0, oldest_kept = INT64_MAX;
	int i;

	if (mq == NULL)
		return;
	for (i = 0; i < NKEYS; i++)
		want += mq->id_exp[i] != 0 && mq->id_exp[i] <= f->now;
	if (limit != 0 && want > limit)
		want = limit;
	FUZZ_CHECK(saker_store_dedup_sweep(f->s, mq->h, f->now, limit,
	    &removed) == SAKER_OK);
	FUZZ_CHECK(removed == want);
	memset(&c, 0, sizeof(c));
	c.mq = mq;
	FUZZ_CHECK(saker_store_dedup_iterate(f->s, mq->h, id_cb, &c) ==
	    SAKER_OK);
	for (i = 0; i < NKEYS; i++) {
		if (mq->id_exp[i] != 0 && c.seen[i] == 0) {
			FUZZ_CHECK(mq->id_exp[i] <= f->now);
			if (mq->id_exp[i] > newest_gone)
				newest_gone = mq->id_exp[i];
			gone++;
		} else if (c.seen[i] != 0 && c.seen[i] <= f->now &&
		    c.seen[i] < oldest_kept)
			oldest_kept = c.seen[i];
		mq->id_exp[i] = c.seen[i];
	}
	FUZZ_CHECK(gone == removed && newest_gone <= oldest_kept);
}

static void
op_flush(struct fz *f)
{
	struct mqueue *mq = pick_queue(f, false);

	if (mq == NULL)
		return;
	FUZZ_CHECK(saker_store_queue_flush(f->s, mq->h) == SAKER_OK);
	f->live -= mq->nready + mq->ndelayed + mq->nopen;
	mq->nready = mq->ndelayed = mq->nopen = 0;
}

static void
op_delete(struct fz *f)
{
	struct mqueue *mq = pick_queue(f, false);

	if (mq == NULL)
		return;
	FUZZ_CHECK(saker_store_queue_delete(f->s, mq->h) == SAKER_OK);
	f->live -= mq->nready + mq->ndelayed + mq->nopen;
	mq->exists = false;
	mq->h = NULL;
}

static void
op_flush_expired(struct fz *f)
{
	struct mqueue *mq = pick_queue(f, false);
	uint64_t limit = next8(f) % 4, removed = 99, n = 0;
	size_t k = 0;

	if (mq == NULL)
		return;
	FUZZ_CHECK(saker_store_flush_expired(f->s, mq->h, f->now, limit,
	    &removed) == SAKER_OK);
	/* store.h: at most `limit` ready items are looked at, from the head. */
	uint64_t seen = 0;

	while (k < mq->nready && (limit == 0 || seen < limit)) {
		seen++;
		if (!is_expired(&mq->ready[k], f->now)) {
			k++;
			continue;
		}
		memmove(&mq->ready[k], &mq->ready[k + 1],
		    (mq->nready - k - 1) * sizeof(mq->ready[0]));
		mq->nready--;
		n++;
	}
	mq->expired += n;
	f->live -= n;
	FUZZ_CHECK(removed == n);
}

static int
iter_cb(void *arg, const struct saker_item *item)
{
	struct fz *f = arg;
	struct mqueue *mq = f->iter_q;
	size_t i = f->iter_pos++;

	if (i < mq->nopen) {
		FUZZ_CHECK(item->state == SAKER_ITEM_OPEN);
		FUZZ_CHECK(item->id == mq->open[i].id);
		check_item(f, item, &mq->open[i]);
		return 0;
	}
	i -= mq->nopen;
	if (i < mq->nready) {
		FUZZ_CHECK(item->state == SAKER_ITEM_READY);
		check_item(f, item, &mq->ready[i]);
		return 0;
	}
	i -= mq->nready;
	FUZZ_CHECK(i < mq->ndelayed);
	FUZZ_CHECK(item->state == SAKER_ITEM_DELAYED);
	FUZZ_CHECK(item->due_ms == mq->delayed[i].due);
	check_item(f, item, &mq->delayed[i]);
	return 0;
}

static int
count_queue_cb(void *arg, const char *name, size_t len)
{
	int *n = arg;

	(void)name;
	(void)len;
	(*n)++;
	return 0;
}

/* What iterate() shows, by state: the store's items themselves. */
struct tally {
	uint64_t n[3], bytes;
};

static int
tally_cb(void *arg, const struct saker_item *item)
{
	struct tally *t = arg;

	if (item->state <= SAKER_ITEM_OPEN)
		t->n[item->state]++;
	if (item->state == SAKER_ITEM_READY)
		t->bytes += item->len;
	return 0;
}

static void
op_check(struct fz *f)
{
	struct saker_queue_stats st;
	int i, nq = 0, want_nq = 0;
	uint64_t bytes;
	size_t k;

	for (i = 0; i < NQ; i++) {
		struct mqueue *mq = &f->q[i];

		if (!mq->exists)
			continue;
		want_nq++;
		FUZZ_CHECK(saker_store_queue_stats(f->s, mq->h, &st) == SAKER_OK);
		for (bytes = 0, k = 0; k < mq->nready; k++)
			bytes += mq->ready[k].len;
		FUZZ_CHECK(st.items == mq->nready);
		FUZZ_CHECK(st.bytes == bytes);
		FUZZ_CHECK(st.delayed_items == mq->ndelayed);
		FUZZ_CHECK(st.open_items == mq->nopen);
		FUZZ_CHECK(st.total_items == mq->total);
		FUZZ_CHECK(st.expired_items == mq->expired);
		FUZZ_CHECK(st.head_created_ms == (mq->nready > 0 ?
		    mq->ready[0].created : 0));
		FUZZ_CHECK(st.dedup_ids == ids_of(mq));
		FUZZ_CHECK(st.dedup_hits == mq->hits);
		{
			struct idcheck c;

			memset(&c, 0, sizeof(c));
			c.mq = mq;
			FUZZ_CHECK(saker_store_dedup_iterate(f->s, mq->h,
			    id_cb, &c) == SAKER_OK);
			FUZZ_CHECK(c.n == ids_of(mq));
		}
		f->iter_q = mq;
		f->iter_pos = 0;
		FUZZ_CHECK(saker_store_iterate(f->s, mq->h, iter_cb, f) == 0);
		FUZZ_CHECK(f->iter_pos == mq->nopen + mq->nready + mq->ndelayed);
		/* the layer's counters against the items the driver holds */
		{
			struct tally ty = { { 0, 0, 0 }, 0 };

			FUZZ_CHECK(saker_store_iterate(f->s, mq->h, tally_cb, &ty) == 0);
			FUZZ_CHECK(st.items == ty.n[SAKER_ITEM_READY]);
			FUZZ_CHECK(st.bytes == ty.bytes);
			FUZZ_CHECK(st.delayed_items == ty.n[SAKER_ITEM_DELAYED]);
			FUZZ_CHECK(st.open_items == ty.n[SAKER_ITEM_OPEN]);
		}
	}
	FUZZ_CHECK(saker_store_queues(f->s, count_queue_cb, &nq) == 0);
	FUZZ_CHECK(nq == want_nq);
}

static void
op_reopen(struct fz *f)
{
	struct mqueue *mq = &f->q[next8(f) % NQ];
	const char *name = qnames[mq - f->q];
	saker_queue *h = NULL;
	int rc;

	rc = saker_store_queue_open(f->s, name, strlen(name), false, mq, &h);
	if (!mq->exists) {
		FUZZ_CHECK(rc == SAKER_ENOTFOUND);
		return;
	}
	FUZZ_CHECK(rc == SAKER_OK && h == mq->h);
}

/*
 * "What queue_stats() counts as items, gets can take" (issue 36), checked
 * without the model, on every queue the store lists (the model's and any
 * the driver made itself): the items it counts (ready, delayed, open) are
 * the items iterate() shows, state by state; released and promoted at a
 * time far ahead, each of them is either taken by take(REMOVE) or counted
 * as expired on the way; and then nothing is left anywhere.  It runs at
 * the end of an input, since it empties the store.
 */
#define FAR_MS		((int64_t)100 * 365 * 86400000)
#define MAXLISTED	16

struct listed {
	char name[MAXLISTED][256];
	size_t len[MAXLISTED];
	int n;
	struct reach {
		saker_queue *h;
		uint64_t counted, gone;	/* items stats counted; expired so far */
	} q[MAXLISTED];
	uint64_t *open_ids;		/* iterate(): the queue's open items */
	uint64_t nstate[3], nopen_ids, cap;
};

static int
list_cb(void *arg, const char *name, size_t len)
{
	struct listed *l = arg;

	FUZZ_CHECK(l->n < MAXLISTED && len < sizeof(l->name[0]));
	memcpy(l->name[l->n], name, len);
	l->len[l->n++] = len;
	return 0;
}

static int
state_cb(void *arg, const struct saker_item *item)
{
	struct listed *l = arg;

	FUZZ_CHECK(item->state <= SAKER_ITEM_OPEN);
	l->nstate[item->state]++;
	if (item->state == SAKER_ITEM_OPEN && l->nopen_ids < l->cap)
		l->open_ids[l->nopen_ids++] = item->id;
	return 0;
}

static int
count_cb(void *arg, const struct saker_item *item)
{
	(void)item;
	(*(uint64_t *)arg)++;
	return 0;
}

static void
check_reachable(struct fz *f)
{
	int64_t far = f->now + FAR_MS, next_due = -1;
	struct saker_queue_stats st;
	struct listed *l = calloc(1, sizeof(*l));
	uint64_t taken, left, dummy;
	int i, rc;
	size_t k;

	FUZZ_CHECK(l != NULL);
	f->draining = true;	/* queues get a NULL ctx: notify_cb knows */
	FUZZ_CHECK(saker_store_queues(f->s, list_cb, l) == SAKER_OK);
	for (i = 0; i < l->n; i++) {
		struct reach *r = &l->q[i];

		FUZZ_CHECK(saker_store_queue_open(f->s, l->name[i], l->len[i], false,
		    NULL, &r->h) == SAKER_OK);
		FUZZ_CHECK(saker_store_queue_stats(f->s, r->h, &st) == SAKER_OK);
		r->counted = st.items + st.delayed_items + st.open_items;
		r->gone = st.expired_items + st.expired_to;
		l->cap = st.open_items;
		l->open_ids = calloc(l->cap + 1, sizeof(uint64_t));
		FUZZ_CHECK(l->open_ids != NULL);
		memset(l->nstate, 0, sizeof(l->nstate));
		l->nopen_ids = 0;
		FUZZ_CHECK(saker_store_iterate(f->s, r->h, state_cb, l) == 0);
		FUZZ_CHECK(l->nstate[SAKER_ITEM_READY] == st.items);
		FUZZ_CHECK(l->nstate[SAKER_ITEM_DELAYED] == st.delayed_items);
		FUZZ_CHECK(l->nstate[SAKER_ITEM_OPEN] == st.open_items);
		for (k = 0; k < l->nopen_ids; k++)
			FUZZ_CHECK(saker_store_release(f->s, r->h, l->open_ids[k]) ==
			    SAKER_OK);
		free(l->open_ids);
	}
	/* every delayed item of the store is due by then */
	FUZZ_CHECK(saker_store_promote(f->s, far, &next_due) == SAKER_OK);
	FUZZ_CHECK(next_due == 0);
	for (i = 0; i < l->n; i++) {
		struct reach *r = &l->q[i];

		for (taken = 0; taken <= r->counted; taken++) {
			rc = saker_store_take(f->s, r->h, SAKER_TAKE_REMOVE, far,
			    count_cb, &dummy);
			if (rc == SAKER_EEMPTY)
				break;
			FUZZ_CHECK(rc == SAKER_OK);
		}
		FUZZ_CHECK(saker_store_queue_stats(f->s, r->h, &st) == SAKER_OK);
		/* counted = taken + dropped as expired: none unreachable,
		 * none made up */
		FUZZ_CHECK(taken + (st.expired_items + st.expired_to - r->gone) ==
		    r->counted);
		FUZZ_CHECK(st.items == 0 && st.delayed_items == 0 &&
		    st.open_items == 0 && st.bytes == 0);
		left = 0;
		FUZZ_CHECK(saker_store_iterate(f->s, r->h, count_cb, &left) == 0);
		FUZZ_CHECK(left == 0);
	}
	FUZZ_CHECK(saker_store_commit(f->s) == SAKER_OK);
	free(l);
}

int
fuzz_store_driver(const struct saker_store_driver *drv, const char *location,
    const uint8_t *data, size_t size)
{
	struct saker_store_opts opts;
	struct fz *f;
	char err[256], spec[600];
	int nops = 0;

	if ((f = calloc(1, sizeof(*f))) == NULL)
		return 0;
	f->drv = drv;
	f->p = data;
	f->end = data + size;
	f->now = BASE_MS;
	memset(&opts, 0, sizeof(opts));
	opts.create = true;
	opts.sync = SAKER_SYNC_NEVER;
	opts.notify = notify_cb;
	opts.notify_arg = f;
	/* through the layer, as the core opens it: the layer wakes the queues */
	snprintf(spec, sizeof(spec), "%s%s%s", drv->name,
	    location != NULL ? ":" : "", location != NULL ? location : "");
	FUZZ_CHECK(saker_store_open(spec, &opts, &f->s, err, sizeof(err)) ==
	    SAKER_OK);
	while (f->p < f->end && nops++ < MAXOPS) {
		clear_notified(f);
		switch (next8(f) % NOPS) {
		case OP_PUT:		op_put(f); break;
		case OP_TAKE:		op_take(f, SAKER_TAKE_REMOVE); break;
		case OP_OPEN:		op_take(f, SAKER_TAKE_OPEN); break;
		case OP_PEEK:		op_take(f, SAKER_TAKE_PEEK); break;
		case OP_CONFIRM:	op_confirm_release(f, false); break;
		case OP_RELEASE:	op_confirm_release(f, true); break;
		case OP_PROMOTE:	op_promote(f); break;
		case OP_FLUSH:		op_flush(f); break;
		case OP_DELETE:		op_delete(f); break;
		case OP_TIME:		f->now += (int64_t)next8(f) * (next8(f) + 1); break;
		case OP_FLUSH_EXPIRED:	op_flush_expired(f); break;
		case OP_COMMIT:		FUZZ_CHECK(saker_store_commit(f->s) == SAKER_OK); break;
		case OP_CHECK:		op_check(f); break;
		case OP_REOPEN:		op_reopen(f); break;
		case OP_RELEASE_DELAYED: op_release_delayed(f); break;
		case OP_MOVE:		op_move(f); break;
		case OP_PUT_ONCE:	op_put_once(f); break;
		case OP_DEDUP_SWEEP:	op_dedup_sweep(f); break;
		}
	}
	op_check(f);
	FUZZ_CHECK(saker_store_commit(f->s) == SAKER_OK);
	check_reachable(f);
	saker_store_close(f->s);
	free(f);
	return 0;
}

/* Every program over the memory driver and over docs/drivers.md's example
 * (backends/example.c): both are held to the one model. */
int
fuzz_store(const uint8_t *data, size_t size)
{
	fuzz_store_driver(&saker_store_memory, NULL, data, size);
	return fuzz_store_driver(&saker_store_example, NULL, data, size);
}
