/* layer.c -- the core's only way to the store (store.h, THE LAYER): one
 * function per store call, so the core and the tools never reach into a
 * driver's vtable and every rule about storage has one place to live. */
#include "config.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "saker/store.h"
#include "itemattr.h"
#include "layer.h"

/* ------------------------------------------------------------------ */
/* counters (store.h, COUNTERS) */


static struct saker_queue_base *
base(saker_queue *q)
{
	return (struct saker_queue_base *)(void *)q;
}

/* First change of q in this batch: remember the counters to restore. */
static void
touch(saker_store *s, struct saker_queue_base *b)
{
	if (b->touched)
		return;
	if (!b->gone)	/* a deleted queue's snapshot is from before */
		memcpy(b->snap, b->n, sizeof(b->snap));
	b->touched = true;
	b->touched_next = s->touched;
	s->touched = b;
}

/* never below 0: a shared store's counter may be behind what other
 * brokers took until the next count */
static void
sub(uint64_t *v, uint64_t d)
{
	*v = *v > d ? *v - d : 0;
}

/* The slot of n[] an item in `state` counts in (NONE: none). */
static const signed char slot_of[] = {
	[SAKER_ITEM_READY] = SAKER_N_ITEMS,
	[SAKER_ITEM_DELAYED] = SAKER_N_DELAYED,
	[SAKER_ITEM_OPEN] = SAKER_N_OPEN,
	[SAKER_ITEM_NONE] = -1
};

/* Both entry points in one body, inlined into each: every put and take
 * of a driver calls one (about a third fewer instructions than the
 * switch the wrapper called). */
static inline void
account(saker_store *s, saker_queue *q, saker_item_state from,
    saker_item_state to, uint64_t n, uint64_t bytes)
{
	struct saker_queue_base *b;

	if (from == to || q == NULL || n == 0 || (unsigned)from > SAKER_ITEM_NONE
	    || (unsigned)to > SAKER_ITEM_NONE)
		return;
	b = base(q);
	touch(s, b);
	if (from != SAKER_ITEM_NONE) {
		sub(&b->n[slot_of[from]], n);
		if (from == SAKER_ITEM_READY)
			sub(&b->n[SAKER_N_BYTES], bytes);
	}
	if (to != SAKER_ITEM_NONE) {
		b->n[slot_of[to]] += n;
		if (to == SAKER_ITEM_READY)
			b->n[SAKER_N_BYTES] += bytes;
	}
}

void
saker_store_account_n(saker_store *s, saker_queue *q, saker_item_state from,
    saker_item_state to, uint64_t n, uint64_t bytes)
{
	account(s, q, from, to, n, bytes);
}

void
saker_store_account(saker_store *s, saker_queue *q, saker_item_state from,
    saker_item_state to, size_t len)
{
	account(s, q, from, to, 1, len);
}

void
saker_store_queue_seed(saker_store *s, saker_queue *q,
    const struct saker_queue_stats *st)
{
	struct saker_queue_base *b = base(q);

	(void)s;
	b->n[SAKER_N_ITEMS] = st->items;
	b->n[SAKER_N_BYTES] = st->bytes;
	b->n[SAKER_N_DELAYED] = st->delayed_items;
	b->n[SAKER_N_OPEN] = st->open_items;
}

/* The batch ended: kept (commit succeeded) or lost (counters back). */
static void
batch_end(saker_store *s, bool lost)
{
	struct saker_queue_base *b;

	while ((b = s->touched) != NULL) {
		s->touched = b->touched_next;
		if (lost)
			memcpy(b->n, b->snap, sizeof(b->n));
		b->touched = false;
		b->gone = false;
		b->touched_next = NULL;
	}
}

/* The batch in flight ended: kept, or lost with the current batch (whose
 * counters go back first: the flight's snapshots are older). */
static void
flight_end(saker_store *s, bool lost)
{
	struct saker_queue_base *b;

	if (lost)
		batch_end(s, true);
	while ((b = s->flight) != NULL) {
		s->flight = b->flight_next;
		if (lost)
			memcpy(b->n, b->fsnap, sizeof(b->n));
		b->in_flight = false;
		b->flight_next = NULL;
	}
	s->inflight = false;
}

/* The current batch goes in flight: its snapshots with it. */
static void
flight_begin(saker_store *s)
{
	struct saker_queue_base *b;

	while ((b = s->touched) != NULL) {
		s->touched = b->touched_next;
		memcpy(b->fsnap, b->snap, sizeof(b->fsnap));
		b->gone = false;
		b->in_flight = true;
		b->flight_next = s->flight;
		s->flight = b;
		b->touched = false;
		b->touched_next = NULL;
	}
	s->inflight = true;
}

/* q leaves the store: off the batch's list before its handle is freed */
static void
untouch(saker_store *s, struct saker_queue_base *b)
{
	struct saker_queue_base **p;

	if (b->in_flight) {
		for (p = &s->flight; *p != NULL; p = &(*p)->flight_next)
			if (*p == b) {
				*p = b->flight_next;
				break;
			}
		b->in_flight = false;
	}
	if (!b->touched)
		return;
	for (p = &s->touched; *p != NULL; p = &(*p)->touched_next)
		if (*p == b) {
			*p = b->touched_next;
			break;
		}
	b->touched = false;
}

static int ids_known(saker_store *s, saker_queue *q);

/* ------------------------------------------------------------------ */
/* wake-ups (store.h, the notify contract) */

/* The driver's notify: q goes on the list once, whatever the driver
 * reports; the core hears of it when the outermost layer call ends. */
static void
layer_notify(void *arg, saker_queue *q, void *queue_ctx)
{
	saker_store *s = *(saker_store **)arg;
	struct saker_queue_base *b;

	if (s == NULL || q == NULL)	/* inside open(): see store.h */
		return;
	b = base(q);
	if (queue_ctx != NULL || !b->woken)
		b->wake_ctx = queue_ctx;
	if (b->woken)
		return;
	b->woken = true;
	b->wake_next = NULL;
	if (s->woken_tail != NULL)
		s->woken_tail->wake_next = b;
	else
		s->woken = b;
	s->woken_tail = b;
}

int
saker_layer_wake_open(struct saker_store_opts *o)
{
	if (o->notify == NULL)
		return SAKER_OK;	/* nobody to wake */
	if ((o->notify_arg = calloc(1, sizeof(saker_store *))) == NULL)
		return SAKER_ENOMEM;
	o->notify = layer_notify;
	return SAKER_OK;
}

void
saker_layer_wake_start(saker_store *s, const struct saker_store_opts *core,
    const struct saker_store_opts *o)
{
	s->notify = core->notify;
	s->notify_arg = core->notify_arg;
	s->woken = s->woken_tail = NULL;
	s->depth = 0;
	s->wake_cell = core->notify != NULL ? o->notify_arg : NULL;
	if (s->wake_cell != NULL)
		*s->wake_cell = s;
}

void
saker_layer_wake_fail(struct saker_store_opts *o, const struct
    saker_store_opts *core)
{
	if (core->notify != NULL)
		free(o->notify_arg);
}

void
saker_layer_wake_close(saker_store **cell)
{
	free(cell);
}

/* A layer call begins: nested ones (the layer's put inside a driver's
 * take) add to the outermost call's list.  errmsg() is the driver's
 * again until the layer refuses something. */
static void
enter(saker_store *s)
{
	s->depth++;
	s->lerr = NULL;
}

/* ... and ends: the outermost wakes each marked queue once, in the order
 * the driver first reported them.  Returns rc. */
static int
leave(saker_store *s, int rc)
{
	struct saker_queue_base *b;

	if (--s->depth > 0)
		return rc;
	while ((b = s->woken) != NULL) {
		s->woken = b->wake_next;
		if (s->woken == NULL)
			s->woken_tail = NULL;
		b->wake_next = NULL;
		b->woken = false;
		if (s->notify != NULL)
			s->notify(s->notify_arg, (saker_queue *)(void *)b,
			    b->wake_ctx);
	}
	return rc;
}

int
saker_layer_leave(saker_store *s, int rc)
{
	return leave(s, rc);
}

/* q is deleted: off the list before its handle is freed */
static void
unwake(saker_store *s, struct saker_queue_base *b)
{
	struct saker_queue_base **p, *prev = NULL;

	if (!b->woken)
		return;
	for (p = &s->woken; *p != NULL; prev = *p, p = &(*p)->wake_next)
		if (*p == b) {
			*p = b->wake_next;
			if (s->woken_tail == b)
				s->woken_tail = prev;
			break;
		}
	b->woken = false;
	b->wake_next = NULL;
}

/* ------------------------------------------------------------------ */
/* refusals (store.h, REFUSALS) */

int
saker_layer_opened(saker_store *s, const char *location, bool read_only)
{
	const char *drv = s->driver->name;
	size_t n;

	/* a secret (a connection string) is never shown */
	if (location == NULL || *location == '\0' ||
	    s->driver->location == SAKER_LOCATION_SECRET)
		location = NULL;
	n = strlen(drv) + (location != NULL ? 1 + strlen(location) : 0) + 1;
	if ((s->where = malloc(n)) == NULL)
		return SAKER_ENOMEM;
	snprintf(s->where, n, "%s%s%s", drv, location != NULL ? " " : "",
	    location != NULL ? location : "");
	/* what open() counted (a recovery) it committed itself */
	batch_end(s, false);
	if (read_only) {
		snprintf(s->rbuf, sizeof(s->rbuf), "%s: store opened read-only",
		    s->where);
		s->refusal = s->rbuf;
		s->refuse_rc = SAKER_EREADONLY;
	}
	return SAKER_OK;
}

/* "TYPE LOCATION", or the type alone for a store the registry did not
 * open (a test's shim) */
static const char *
where(const saker_store *s)
{
	return s->where != NULL ? s->where : s->driver->name;
}

void
saker_store_lose_batch(saker_store *s, int code)
{
	saker_store_lose_batch_why(s, code, NULL);
}

void
saker_store_lose_batch_why(saker_store *s, int code, const char *why)
{
	if (code == SAKER_OK)
		code = SAKER_EIO;
	batch_end(s, true);
	if (s->lost != 0)
		return;		/* the first loss says why */
	s->lost = code;
	snprintf(s->lostwhy, sizeof(s->lostwhy), "%s", why != NULL &&
	    *why != '\0' ? why : saker_strerror(code));
	snprintf(s->lostbuf, sizeof(s->lostbuf), "%s: this batch was rolled "
	    "back (%s); it ends at the next commit", where(s), s->lostwhy);
}

/* the state `rc` (stale: reads too) with "WHERE: HEAD: WHY" */
static void
refuse(saker_store *s, int rc, bool reads, const char *head,
    const char *fmt, va_list ap)
{
	char why[640];

	vsnprintf(why, sizeof(why), fmt, ap);
	snprintf(s->rbuf, sizeof(s->rbuf), "%s: %s: %s", where(s), head, why);
	s->refusal = s->rbuf;
	s->refuse_rc = rc;
	s->refuse_reads = reads;
}

void
saker_store_refuse_writes(saker_store *s, const char *fmt, ...)
{
	va_list ap;

	if (s->refusal != NULL)
		return;		/* read-only already, or worse: kept */
	va_start(ap, fmt);
	refuse(s, SAKER_EREADONLY, false, "store is read-only after a failed "
	    "write", fmt, ap);
	va_end(ap);
}

void
saker_store_refuse_all(saker_store *s, const char *fmt, ...)
{
	va_list ap;

	if (s->refuse_reads)
		return;		/* the first failure says why */
	va_start(ap, fmt);
	refuse(s, SAKER_EIO, true, "store failed and must be reopened", fmt,
	    ap);
	va_end(ap);
}

int
saker_store_refusal(saker_store *s, bool write)
{
	if (s->refusal != NULL && (write || s->refuse_reads)) {
		s->lerr = s->refusal;
		return s->refuse_rc;
	}
	if (write && s->lost != 0) {
		s->lerr = s->lostbuf;
		return s->lost;
	}
	return SAKER_OK;
}

bool
saker_store_refuses_writes(const saker_store *s)
{
	return s->refusal != NULL;
}

bool
saker_store_takes_writes(const saker_store *s)
{
	return s->refusal == NULL && s->lost == 0;
}

bool
saker_store_is_stale(const saker_store *s)
{
	return s->refuse_reads;
}

bool
saker_store_is_lost(const saker_store *s)
{
	return s->lost != 0;
}

/* enter(), for a call that only reads: refused when the store is stale */
static int
enter_read(saker_store *s)
{
	int rc;

	s->lerr = NULL;
	if ((rc = saker_store_refusal(s, false)) == SAKER_OK)
		enter(s);
	return rc;
}

/* enter(), for a call that writes: SAKER_OK, or the refusal (not
 * entered) */
static int
enter_write(saker_store *s)
{
	int rc = saker_layer_refuse(s);

	if (rc == SAKER_OK)
		enter(s);
	return rc;
}

/* ------------------------------------------------------------------ */
/* the calls */

const char *
saker_store_name(const saker_store *s)
{
	return s->driver->name;
}

const char *
saker_store_errmsg(saker_store *s)
{
	const char *e = s->lerr != NULL ? s->lerr : s->driver->errmsg(s);

	return e != NULL ? e : "";
}

int
saker_store_queue_open(saker_store *s, const char *name, size_t len,
    bool create, void *queue_ctx, saker_queue **out)
{
	int rc;

	if ((rc = enter_read(s)) != SAKER_OK)
		return rc;
	/* a read-only store opens the queues it has and makes none */
	rc = s->driver->queue_open(s, name, len, create && s->refusal == NULL,
	    queue_ctx, out);
	if (rc == SAKER_ENOTFOUND && create && s->refusal != NULL)
		rc = saker_layer_refuse(s);
	return leave(s, rc);
}

int
saker_store_queue_delete(saker_store *s, saker_queue *q)
{
	struct saker_queue_base *b = base(q);
	bool was = b->touched, flew = b->in_flight;
	int rc;

	if ((rc = saker_layer_refuse(s)) != SAKER_OK)
		return rc;
	/* off the lists before a driver frees the handle; one that keeps
	 * it until the commit brings the queue back when the batch fails
	 * and says so (saker_store_queue_restored()), so the counters of
	 * before the delete stay in snap */
	if (!was)
		memcpy(b->snap, b->n, sizeof(b->snap));
	b->gone = true;	/* for a driver that brings it back (restored) */
	untouch(s, b);
	unwake(s, b);
	enter(s);
	rc = leave(s, s->driver->queue_delete(s, q));
	if (rc != SAKER_OK)
		b->gone = false;
	if (rc != SAKER_OK && s->lost != 0) {
		/* the driver lost the batch in this call: batch_end() ran
		 * while q was off the list, so its counters go back here (snap
		 * is the batch's start either way) */
		memcpy(b->n, b->snap, sizeof(b->n));
	} else if (rc != SAKER_OK && was) {
		/* still there: back on the list, its snapshot kept */
		b->touched = true;
		b->touched_next = s->touched;
		s->touched = b;
	}
	if (rc != SAKER_OK && flew) {
		b->in_flight = true;
		b->flight_next = s->flight;
		s->flight = b;
	}
	return rc;
}

int
saker_store_queue_flush(saker_store *s, saker_queue *q)
{
	int rc;

	if ((rc = enter_write(s)) != SAKER_OK)
		return rc;
	rc = leave(s, s->driver->queue_flush(s, q));
	if (rc == SAKER_OK) {
		/* the items go; the queue's deduplication ids stay */
		touch(s, base(q));
		memset(base(q)->n, 0, SAKER_N_IDS * sizeof(base(q)->n[0]));
	}
	return rc;
}

int
saker_store_queues(saker_store *s, saker_queue_name_fn fn, void *arg)
{
	int rc;

	if ((rc = enter_read(s)) != SAKER_OK)
		return rc;
	return leave(s, s->driver->queues(s, fn, arg));
}

/*
 * The four counters are the layer's, O(1).  On a shared store other
 * brokers change the queue as well: a queue not changed in this batch is
 * counted in the store again when it was not since the last tick() (or a
 * driver asked saker_store_recount()), so a counter is behind by at most
 * what the others did in about a second (docs/scaling.md).
 */
int
saker_store_queue_counts(saker_store *s, saker_queue *q,
    struct saker_queue_stats *st)
{
	struct saker_queue_base *b = base(q);
	struct saker_queue_stats c;
	int rc;

	s->lerr = NULL;
	if (s->driver->queue_count != NULL && b->synced != s->tick + 1 &&
	    !b->touched) {
		memset(&c, 0, sizeof(c));
		if ((rc = s->driver->queue_count(s, q, &c)) != SAKER_OK)
			return rc;
		saker_store_queue_seed(s, q, &c);
		b->synced = s->tick + 1;
	}
	st->items = b->n[SAKER_N_ITEMS];
	st->bytes = b->n[SAKER_N_BYTES];
	st->delayed_items = b->n[SAKER_N_DELAYED];
	st->open_items = b->n[SAKER_N_OPEN];
	return SAKER_OK;
}

void
saker_store_queue_fresh(saker_store *s, saker_queue *q)
{
	struct saker_queue_base *b = base(q);

	/* a snapshot it has stays: a batch lost brings the deleted queue
	 * back (and the driver says so: saker_store_queue_restored) */
	memset(b->n, 0, sizeof(b->n));
	if (b->gone)	/* on the batch's list, to end `gone` with it */
		touch(s, b);
	b->ids_known = false;
	b->dedup_hits = 0;
	b->expired_to = 0;
	b->synced = 0;
}

void
saker_store_queue_restored(saker_store *s, saker_queue *q)
{
	struct saker_queue_base *b = base(q);

	(void)s;
	b->ids_known = false;
	if (b->gone) {	/* a delete undone: its counters come back */
		memcpy(b->n, b->snap, sizeof(b->n));
		b->gone = false;
	}
}

void
saker_store_recount(saker_store *s, saker_queue *q)
{
	(void)s;
	if (q != NULL)
		base(q)->synced = 0;
}

/* The driver fills what it keeps (total, expired, head age), the layer
 * the four counters. */
int
saker_store_queue_stats(saker_store *s, saker_queue *q,
    struct saker_queue_stats *st)
{
	int rc;

	s->lerr = NULL;
	if ((rc = s->driver->queue_stats(s, q, st)) != SAKER_OK)
		return rc;
	/* the ids a restart found are counted at the first look (once) */
	(void)ids_known(s, q);
	st->dedup_ids = base(q)->n[SAKER_N_IDS];
	st->dedup_hits = base(q)->dedup_hits;
	st->expired_to = base(q)->expired_to;	/* saker_store_expired() */
	return saker_store_queue_counts(s, q, st);
}

int
saker_store_take(saker_store *s, saker_queue *q, int mode, int64_t now_ms,
    saker_item_fn fn, void *arg)
{
	int rc;

	if (mode == SAKER_TAKE_PEEK) {
		if ((rc = enter_read(s)) != SAKER_OK)
			return rc;
	} else if ((rc = enter_write(s)) != SAKER_OK)
		return rc;
	return leave(s, s->driver->take(s, q, mode, now_ms, fn, arg));
}

int
saker_store_confirm(saker_store *s, saker_queue *q, uint64_t id)
{
	int rc;

	if ((rc = enter_write(s)) != SAKER_OK)
		return rc;
	return leave(s, s->driver->confirm(s, q, id));
}

int
saker_store_release(saker_store *s, saker_queue *q, uint64_t id)
{
	int rc;

	if ((rc = enter_write(s)) != SAKER_OK)
		return rc;
	return leave(s, s->driver->release(s, q, id));
}

int
saker_store_release_delayed(saker_store *s, saker_queue *q, uint64_t id,
    int64_t due_ms, int64_t now_ms)
{
	int rc;

	if ((rc = enter_write(s)) != SAKER_OK)
		return rc;
	return leave(s, s->driver->release_delayed(s, q, id, due_ms,
	    now_ms));
}

int
saker_store_move(saker_store *s, saker_queue *q, uint64_t id, saker_queue *to)
{
	int rc;

	if ((rc = enter_write(s)) != SAKER_OK)
		return rc;
	return leave(s, s->driver->move(s, q, id, to));
}

bool
saker_store_routes_expired(const saker_store *s)
{
	return s->driver->expire_to != NULL;
}

int
saker_store_expire_to(saker_store *s, saker_queue *q, const char *name,
    size_t len)
{
	int rc;

	if (s->driver->expire_to == NULL)
		return name == NULL ? SAKER_OK : SAKER_EINVAL;
	if ((rc = enter_read(s)) != SAKER_OK)
		return rc;
	return leave(s, s->driver->expire_to(s, q, name, len));
}

int
saker_store_promote(saker_store *s, int64_t now_ms, int64_t *next_due_ms)
{
	int rc;

	if ((rc = enter_read(s)) != SAKER_OK)
		return rc;
	return leave(s, s->driver->promote(s, now_ms, next_due_ms));
}

int
saker_store_flush_expired(saker_store *s, saker_queue *q, int64_t now_ms,
    uint64_t limit, uint64_t *removed)
{
	int rc;

	if ((rc = enter_read(s)) != SAKER_OK)
		return rc;
	return leave(s, s->driver->flush_expired(s, q, now_ms, limit,
	    removed));
}

int
saker_store_iterate(saker_store *s, saker_queue *q, saker_item_fn fn,
    void *arg)
{
	int rc;

	if ((rc = enter_read(s)) != SAKER_OK)
		return rc;
	return leave(s, s->driver->iterate(s, q, fn, arg));
}

/* A failed commit rolled the batch back (store.h): the counters too. */
int
saker_store_commit(saker_store *s)
{
	int rc;

	enter(s);
	if (s->inflight && (rc = saker_store_commit_finish(s)) != SAKER_OK)
		return leave(s, rc);	/* both batches rolled back */
	if (s->lost != 0) {
		/* the driver rolled the batch back already (REFUSALS) */
		rc = s->lost;
		s->lost = 0;
		batch_end(s, true);
		snprintf(s->lostbuf, sizeof(s->lostbuf), "%s: batch rolled "
		    "back: %s", where(s), s->lostwhy);
		s->lerr = s->lostbuf;
		return leave(s, rc);
	}
	rc = s->driver->commit(s);
	s->lost = 0;	/* a batch lost inside commit() ends with it */
	batch_end(s, rc != SAKER_OK);
	return leave(s, rc);
}

int
saker_store_commit_start(saker_store *s, bool *started)
{
	int rc;

	*started = false;
	if (s->driver->commit_start == NULL || s->inflight || s->lost != 0)
		return saker_store_commit(s);
	enter(s);
	rc = s->driver->commit_start(s, started);
	s->lost = 0;	/* as in saker_store_commit() */
	if (*started)
		flight_begin(s);
	else
		batch_end(s, rc != SAKER_OK);
	return leave(s, rc);
}

int
saker_store_commit_fd(saker_store *s)
{
	if (!s->inflight || s->driver->commit_fd == NULL)
		return -1;
	return s->driver->commit_fd(s);
}

int
saker_store_commit_finish(saker_store *s)
{
	int rc;

	if (!s->inflight)
		return SAKER_OK;
	enter(s);
	rc = s->driver->commit_finish(s);
	flight_end(s, rc != SAKER_OK);
	/* A failed flight ends the batch gathered on it with this call
	 * (store.h: the next call starts a new batch), lost or not: the core
	 * commits nothing more of it.  After a flight that succeeded, a
	 * batch the driver lost meanwhile stays lost: its own commit fails. */
	if (rc != SAKER_OK)
		s->lost = 0;
	return leave(s, rc);
}

bool
saker_store_commit_inflight(const saker_store *s)
{
	return s->inflight;
}

/* ------------------------------------------------------------------ */
/* deduplication ids (store.h, DEDUPLICATION) */

/* The layer counts q's ids from its first use since open (the driver's
 * dedup_count, or one pass over the records the store kept), then by
 * each record made or swept. */
static int
ids_known(saker_store *s, saker_queue *q)
{
	struct saker_queue_base *b = base(q);
	uint64_t n = 0;
	int rc;

	if (b->ids_known)
		return SAKER_OK;
	if ((rc = saker_store_dedup_count(s, q, &n)) != SAKER_OK)
		return rc;
	b->n[SAKER_N_IDS] = n;
	b->ids_known = true;
	return SAKER_OK;
}

static void
ids_add(saker_store *s, saker_queue *q, int64_t d)
{
	struct saker_queue_base *b = base(q);

	touch(s, b);
	if (d >= 0)
		b->n[SAKER_N_IDS] += (uint64_t)d;
	else
		sub(&b->n[SAKER_N_IDS], (uint64_t)-d);
}

int
saker_store_dedup_sweep(saker_store *s, saker_queue *q, int64_t now_ms,
    uint64_t limit, uint64_t *removed)
{
	uint64_t n = 0;
	int rc;

	s->lerr = NULL;
	if ((rc = ids_known(s, q)) != SAKER_OK)
		return rc;
	rc = s->driver->dedup_sweep(s, q, now_ms, limit, &n);
	if (n > 0)
		ids_add(s, q, -(int64_t)n);
	if (removed != NULL)
		*removed = n;
	return rc;
}

int
saker_store_dedup_iterate(saker_store *s, saker_queue *q, saker_dedup_fn fn,
    void *arg)
{
	s->lerr = NULL;
	if (s->driver->dedup_iterate == NULL)
		return SAKER_EINVAL;	/* as ids_known(): no ids */
	return s->driver->dedup_iterate(s, q, fn, arg);
}

static bool
key_ok(const void *key, size_t len)
{
	return key != NULL && len > 0 && len <= SAKER_DEDUP_KEY_MAX;
}

/* The driver's one question about an id: "record key on q until
 * expires_ms unless a live record is kept" (SAKER_EEXIST).  A new record
 * is counted here; a duplicate is its caller's to count (a load is not a
 * duplicate set). */
static int
id_record(saker_store *s, saker_queue *q, const void *key, size_t len,
    int64_t expires_ms, int64_t now_ms, bool *replaced)
{
	int rc;

	*replaced = false;
	if (!key_ok(key, len))
		return SAKER_EINVAL;
	if ((rc = ids_known(s, q)) != SAKER_OK)
		return rc;
	rc = s->driver->dedup_put(s, q, key, len, expires_ms, now_ms,
	    replaced);
	if (rc == SAKER_OK && !*replaced)
		ids_add(s, q, 1);
	return rc;
}

/* now_ms + window_ms, for a window that is one (> 0, no overflow) */
static int
window_end(int64_t now_ms, int64_t window_ms, int64_t *end)
{
	if (window_ms <= 0 || now_ms > INT64_MAX - window_ms)
		return SAKER_EINVAL;
	*end = now_ms + window_ms;
	return SAKER_OK;
}

int
saker_store_dedup_load(saker_store *s, saker_queue *q, const void *key,
    size_t len, int64_t expires_ms, int64_t now_ms)
{
	bool replaced;
	int rc;

	if ((rc = saker_layer_refuse(s)) != SAKER_OK)
		return rc;
	rc = id_record(s, q, key, len, expires_ms, now_ms, &replaced);
	return rc == SAKER_EEXIST ? SAKER_OK : rc;
}

int
saker_store_put_once(saker_store *s, saker_queue *q,
    const struct saker_item *item, const void *key, size_t len,
    int64_t window_ms, uint64_t max_ids, int64_t now_ms)
{
	unsigned char attrs[SAKER_ATTRS_MAX];
	struct saker_item it;
	bool replaced = false, full;
	int64_t end;
	size_t alen;
	int rc;

	if ((rc = saker_layer_refuse(s)) != SAKER_OK)
		return rc;
	if (!key_ok(key, len) || item == NULL ||
	    window_end(now_ms, window_ms, &end) != SAKER_OK)
		return SAKER_EINVAL;
	if ((rc = ids_known(s, q)) != SAKER_OK)
		return rc;
	/* make room from what has expired before looking at the limit */
	full = max_ids > 0 && base(q)->n[SAKER_N_IDS] >= max_ids;
	if (full && (rc = saker_store_dedup_sweep(s, q, now_ms, 0, NULL)) !=
	    SAKER_OK)
		return rc;
	full = max_ids > 0 && base(q)->n[SAKER_N_IDS] >= max_ids;
	alen = itemattr_set(attrs, sizeof(attrs), item->attrs,
	    item->attrs_len, ITEMATTR_ID, key, len);
	if (alen == 0)
		return SAKER_EINVAL;
	/* a retry is answered as one at the limit too */
	if ((rc = id_record(s, q, key, len, end, now_ms, &replaced)) !=
	    SAKER_OK) {
		if (rc == SAKER_EEXIST)
			base(q)->dedup_hits++;
		return rc;
	}
	if (full && !replaced) {
		/* a new id past the limit: take the record back */
		if (s->driver->dedup_del(s, q, key, len) == SAKER_OK)
			ids_add(s, q, -1);
		return SAKER_EFULL;
	}
	it = *item;
	it.attrs = attrs;
	it.attrs_len = alen;
	if ((rc = saker_store_put(s, q, &it, now_ms)) != SAKER_OK) {
		/* the put failed alone: the id must not outlive it (a
		 * retry would be taken for a duplicate of nothing) */
		if (s->driver->dedup_del(s, q, key, len) == SAKER_OK)
			ids_add(s, q, -1);
	}
	return rc;
}

int
saker_store_dedup_kept(saker_store *s, saker_queue *q, const void *key,
    size_t len, int64_t window_ms, int64_t now_ms)
{
	bool replaced;
	int64_t end;
	int rc;

	s->lerr = NULL;
	if (window_end(now_ms, window_ms, &end) != SAKER_OK)
		return SAKER_EINVAL;
	/* asked, and the record taken back when it was not kept (an
	 * expired record it replaced goes with it) */
	if ((rc = id_record(s, q, key, len, end, now_ms, &replaced)) !=
	    SAKER_OK) {
		if (rc == SAKER_EEXIST)
			base(q)->dedup_hits++;
		return rc;
	}
	if ((rc = s->driver->dedup_del(s, q, key, len)) != SAKER_OK)
		return rc;
	ids_add(s, q, -1);
	return SAKER_OK;
}
