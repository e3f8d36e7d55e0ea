/* ops.c -- the broker's operations, the same for every protocol (set with
 * limits, fanout and delay; get with options, several keys and waiting;
 * delete; flush; monitor; confirm).  Replies are the protocols'. */
#include "config.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clock.h"
#include "deadletter.h"
#include "itemattr.h"
#include "log.h"
#include "ops.h"
#include "queues.h"
#include "reply.h"
#include "retry.h"

#define TEN_YEARS_MS (315360000000LL)
#define MEMCACHE_REL_MAX (2592000LL)   /* 30 days: larger exptimes are absolute */

_Static_assert(OP_ID_MAX == SAKER_DEDUP_KEY_MAX,
    "the protocol's id bound is the store's");


const char *
op_store_error(struct broker *b, int rc, int *result)
{
	const char *why;

	if (rc == QUEUE_ETOOMANY) {
		/* queue_lookup(..., create): --max-queues, not the store */
		*result = OPR_NOMEM;
		return "too many queues";
	}
	why = saker_store_errmsg(b->store);
	if (why == NULL || *why == '\0')
		why = saker_strerror(rc);
	if (rc == SAKER_EREADONLY || rc == SAKER_EIO || rc == SAKER_EFULL)
		broker_store_failed(b, why);
	*result = rc == SAKER_ENOMEM || rc == SAKER_EFULL ? OPR_NOMEM : OPR_SERVER;
	/* the client's SERVER_ERROR does not name the store's file */
	return broker_redact(b, why, b->scratch.error, sizeof(b->scratch.error));
}

int
op_store_fail(struct broker *b, int rc, const char **msg)
{
	int r;

	*msg = op_store_error(b, rc, &r);
	return r;
}

static void
remember_open(struct session *s, struct squeue *q, uint64_t id,
    uint32_t deliveries)
{
	struct broker *b = s->b;
	struct open_item *oi = calloc(1, sizeof(*oi));

	if (oi == NULL) {
		/* cannot track it: put it straight back rather than lose it */
		(void)dl_give_back(b, q, id, deliveries, 0);
		log_error("out of memory tracking an open item on %s", q->name);
		return;
	}
	oi->q = q;
	oi->id = id;
	oi->deliveries = deliveries;
	oi->batch = b->batch;
	oi->opened_ms = saker_now_ms();
	if (queue_cfg(b, q)->open_timeout_ms > 0) {
		oi->deadline_ms = oi->opened_ms + queue_cfg(b, q)->open_timeout_ms;
		b->hooks->arm_open_timeout(b, oi->deadline_ms);
	}
	TAILQ_INSERT_TAIL(&s->opens, oi, link);
	s->nopens++;
}

/*
 * The take callback: an item already handed out max_deliveries times (it
 * came back by a restart, a swept lease or a lowered limit, not through
 * dl_give_back) is not served.  An open take accepts it unseen (the caller
 * moves it to the dead-letter queue); a plain take leaves it (TAKE_SPENT)
 * for the caller to open and move.
 */
#define TAKE_SPENT 0x5350	/* not a saker_err */

struct take_ctx {
	struct hit_ctx *hc;
	saker_item_fn hit;
	struct broker *b;
	struct squeue *q;
	int mode;
	bool spent;
	uint64_t id;
	uint32_t deliveries;
};

static int
take_cb(void *arg, const struct saker_item *it)
{
	struct take_ctx *tc = arg;
	uint32_t before = it->deliveries;

	if (tc->mode == SAKER_TAKE_OPEN && before > 0)
		before--;	/* the view counts this hand-out */
	tc->id = it->id;
	tc->deliveries = it->deliveries;
	/* (an item never handed out is never spent: most takes stop at
	 * before > 0) */
	if (tc->mode != SAKER_TAKE_PEEK && before > 0 &&
	    dl_spent(tc->b, tc->q, before)) {
		tc->spent = true;
		return tc->mode == SAKER_TAKE_OPEN ? 0 : TAKE_SPENT;
	}
	return tc->hit(tc->hc, it);
}

/* Spent items met at the head: at most this many are moved per take. */
#define SPENT_MAX 64

/* Count a get (cmd_get) or a peek (cmd_peek) with these options. */
static void
count_get(struct broker *b, unsigned opts)
{
	if ((opts & OP_OPT_OPEN) == 0 && (opts & OP_OPT_PEEK) != 0)
		b->stats.cmd_peek++;
	else
		b->stats.cmd_get++;
}

/* Take one item from q for s with `opts`; s->gops writes it as the reply
 * for key k.  Returns SAKER_OK (hit), SAKER_EEMPTY, or an error. */
static int
take_for(struct session *s, struct squeue *q, unsigned opts, size_t k,
    const char *key, size_t key_len, int64_t now)
{
	struct broker *b = s->b;
	struct hit_ctx hc = { s, k, key, key_len, 0 };
	struct take_ctx tc = { &hc, s->gops->hit, b, q, 0, false, 0, 0 };
	size_t pend_len = evbuffer_get_length(s->pend);
	int mode = SAKER_TAKE_REMOVE, rc, spent = 0;

	if (opts & OP_OPT_OPEN)
		mode = SAKER_TAKE_OPEN;
	else if (opts & OP_OPT_PEEK)
		mode = SAKER_TAKE_PEEK;
	count_get(b, opts);
	/* a handle opened since the last reload learns its expire_to before
	 * the store meets an expired head */
	(void)queue_cfg(b, q);
	for (;;) {
		tc.mode = mode;
		tc.spent = false;
		rc = saker_store_take(b->store, q->h, mode, now, take_cb, &tc);
		if (rc == TAKE_SPENT) {
			/* open it, unseen, to move it */
			tc.mode = SAKER_TAKE_OPEN;
			tc.spent = false;
			rc = saker_store_take(b->store, q->h, SAKER_TAKE_OPEN, now,
			    take_cb, &tc);
			if (rc == SAKER_OK && !tc.spent) {
				/* another item came first (a shared store):
				 * give it back untouched by a consumer */
				(void)saker_store_release(b->store, q->h, tc.id);
				broker_touch(b);
				continue;
			}
		}
		if (rc != SAKER_OK || !tc.spent)
			break;
		broker_touch(b);
		if (dl_move(b, q, tc.id, tc.deliveries) != SAKER_OK) {
			/* cannot move it: back to the head, and no item */
			(void)saker_store_release(b->store, q->h, tc.id);
			rc = SAKER_EEMPTY;
			break;
		}
		if (++spent >= SPENT_MAX) {
			rc = SAKER_EEMPTY;
			break;
		}
	}
	if (rc != SAKER_OK && rc != SAKER_EEMPTY) {
		/* It may have failed after handing the item to the callback
		 * (out of memory marking it open, say): the item is still in
		 * the queue, so its reply must not go out. */
		reply_truncate(s, pend_len);
	}
	if (rc == SAKER_ECORRUPT) {
		/* the driver moved a damaged item aside in this batch
		 * (store.h, take()): commit that */
		broker_touch(b);
	}
	if (rc == SAKER_OK) {
		b->stats.get_hits++;
		if (mode != SAKER_TAKE_PEEK) {
			q->dequeued++;
			broker_touch(b);
		}
		if (mode == SAKER_TAKE_REMOVE)
			reply_keep(s, KEEP_IN_DOUBT);
		if (mode == SAKER_TAKE_OPEN)
			remember_open(s, q, hc.id, tc.deliveries);
		reply_schedule(s);
	}
	return rc;
}

/* --- set ---------------------------------------------------------------- */

static int64_t
expiry_ms(int64_t exptime, int64_t now)
{
	if (exptime == 0)
		return 0;
	if (exptime < 0)
		return 1;               /* already expired: never returned */
	if (exptime <= MEMCACHE_REL_MAX)
		return now + exptime * 1000;
	if (exptime > INT64_MAX / 1000)
		return 0;
	return exptime * 1000;
}

static int
discard_cb(void *arg, const struct saker_item *it)
{
	(void)arg;
	(void)it;
	return 0;
}

/* Is q over its limits with `extra` more items of `len` bytes? */
static bool
over_limits(const struct queue_config *qc, const struct saker_queue_stats *st,
    uint64_t extra, size_t len)
{
	return (qc->max_items > 0 &&
	    st->items + st->delayed_items + extra > qc->max_items) ||
	    (qc->max_bytes > 0 && st->bytes + len > qc->max_bytes);
}

/*
 * A set with an id into a full queue that discards its oldest items: the
 * id is looked at before anything goes, so a duplicate changes nothing.
 * The item is put first, then the oldest ready items go while the limits
 * want it -- at most as many as there were (the new one is never
 * discarded for itself).  `st` holds q's counts before.
 */
/* A full queue refuses a set (1: NOT_STORED), but a set it keeps the id
 * of is a retry and answered as one (SAKER_EEXIST). */
static int
refuse(struct broker *b, struct squeue *q, const char *id, size_t id_len,
    int64_t now)
{
	int rc;

	if (id == NULL)
		return 1;
	rc = saker_store_dedup_kept(b->store, q->h, id, id_len,
	    qconfig_dedup_window(queue_cfg(b, q)), now);
	return rc == SAKER_OK ? 1 : rc;
}

static int
put_once_discarding(struct broker *b, struct squeue *q,
    const struct saker_item *copy, const char *id, size_t id_len,
    const struct saker_queue_stats *st, int64_t now)
{
	const struct queue_config *qc = queue_cfg(b, q);
	/* a delayed new item is not in the ready bytes yet */
	size_t pending = copy->due_ms > now ? copy->len : 0;
	uint64_t n;
	int rc;

	if (st->items == 0)	/* full of delayed or open items */
		return refuse(b, q, id, id_len, now);
	rc = saker_store_put_once(b->store, q->h, copy, id, id_len,
	    qconfig_dedup_window(qc), qconfig_max_dedup_ids(qc), now);
	if (rc != SAKER_OK)
		return rc;	/* SAKER_EEXIST: nothing was discarded */
	for (n = 0; n < st->items; n++) {
		struct saker_queue_stats now_st = { 0 };

		rc = saker_store_queue_counts(b->store, q->h, &now_st);
		if (rc != SAKER_OK)
			return rc;
		if (!over_limits(qc, &now_st, 0, pending))
			break;
		rc = saker_store_take(b->store, q->h, SAKER_TAKE_REMOVE, now,
		    discard_cb, NULL);
		if (rc == SAKER_EEMPTY)
			break;
		if (rc != SAKER_OK)
			return rc;
		q->discarded++;
	}
	return SAKER_OK;
}

/* Put `it` into q within q's limits, and when id is not NULL once per id
 * in q's dedup_window.  Returns SAKER_OK, a store error (SAKER_EEXIST:
 * q keeps the id, nothing was put; SAKER_EFULL: storage or q's
 * max_dedup_ids), or 1 when the queue is full and configured to refuse
 * (NOT_STORED).  A full queue that refuses answers a set whose id it
 * keeps as the duplicate it is; one that discards looks at the id first
 * (put_once_discarding). */
static int
put_limited(struct broker *b, struct squeue *q, struct saker_item *it,
    const char *id, size_t id_len, int64_t now)
{
	const struct queue_config *qc = queue_cfg(b, q);
	struct saker_item copy = *it;
	int rc;

	if (qc->max_age_ms > 0) {
		int64_t limit = now + qc->max_age_ms;
		if (copy.expires_ms == 0 || copy.expires_ms > limit)
			copy.expires_ms = limit;
	}
	if (qc->max_items > 0 || qc->max_bytes > 0) {
		for (;;) {
			struct saker_queue_stats st = { 0 };

			rc = saker_store_queue_counts(b->store, q->h, &st);
			if (rc != SAKER_OK)
				return rc;
			if (!over_limits(qc, &st, 1, it->len))
				break;
			if (!qc->discard_old_when_full)
				return refuse(b, q, id, id_len, now);
			if (id != NULL) {
				rc = put_once_discarding(b, q, &copy, id,
				    id_len, &st, now);
				goto done;
			}
			rc = saker_store_take(b->store, q->h, SAKER_TAKE_REMOVE, now, discard_cb, NULL);
			if (rc == SAKER_EEMPTY)
				return 1;       /* full of delayed or open items */
			if (rc != SAKER_OK)
				return rc;
			q->discarded++;
		}
	}
	if (id != NULL)
		rc = saker_store_put_once(b->store, q->h, &copy, id, id_len,
		    qconfig_dedup_window(qc), qconfig_max_dedup_ids(qc), now);
	else
		rc = saker_store_put(b->store, q->h, &copy, now);
done:
	if (rc == SAKER_OK) {
		q->enqueued++;
		b->batch_put = true;
	}
	return rc;
}

int
op_denied(struct session *s, const char *what, const char *name, size_t len,
    const char **msg)
{
	session_denied(s, what, name, len);
	*msg = "permission denied";
	return OPR_DENIED;
}

/* A set refused at q's max_dedup_ids, or storage full?  The layer says
 * SAKER_EFULL for both; q's count of ids tells them apart. */
static int
set_full(struct broker *b, struct squeue *q, const char **msg)
{
	const struct queue_config *qc = queue_cfg(b, q);
	struct saker_queue_stats st = { 0 };

	if (saker_store_queue_stats(b->store, q->h, &st) != SAKER_OK ||
	    st.dedup_ids < qconfig_max_dedup_ids(qc))
		return op_store_fail(b, SAKER_EFULL, msg);
	snprintf(b->scratch.error, sizeof(b->scratch.error),
	    "queue %s keeps max_dedup_ids=%" PRIu64 " ids within its"
	    " dedup_window; retry later", q->name, qconfig_max_dedup_ids(qc));
	*msg = b->scratch.error;
	return OPR_NOMEM;
}

int
op_set(struct session *s, const struct op_key *k, uint32_t flags,
    int64_t exptime, int64_t delay_ms, int64_t at_s, const char *id,
    size_t id_len, const void *data, size_t len, const char **msg)
{
	struct broker *b = s->b;
	const struct queue_config *qc;
	unsigned char attrs[SAKER_ATTRS_MAX];
	struct saker_item it;
	struct squeue *q;
	int64_t now = saker_now_ms();
	size_t i;
	int rc;

	b->stats.cmd_set++;
	if (!session_may(s, k->name, k->name_len, PERM_WRITE))
		return op_denied(s, "set", k->name, k->name_len, msg);
	if (b->status != STATUS_UP) {
		*msg = "server is read-only";
		return OPR_READONLY;
	}
	memset(&it, 0, sizeof(it));
	it.flags = flags;
	it.expires_ms = expiry_ms(exptime, now);
	it.created_ms = now;
	it.len = len;
	it.data = data;
	if (delay_ms > 0) {
		/* `now` is truncated to the millisecond: +1 makes the item
		 * never visible before delay_ms have really passed (at most
		 * 1 ms late instead of up to 1 ms early). */
		it.due_ms = now + delay_ms + 1;
	} else if (at_s >= 0) {
		int64_t at = at_s * 1000;
		if (at - now > TEN_YEARS_MS)
			return OPR_FORMAT;
		it.due_ms = at > now ? at : 0;
	}
	q = queue_lookup(b, k->name, k->name_len, true, &rc);
	if (q == NULL)
		return op_store_fail(b, rc, msg);
	qc = queue_cfg(b, q);
	if (qc->max_item_size > 0 && len > qc->max_item_size)
		return OPR_TOO_LARGE;
	if (id != NULL) {
		/* the item carries its id (an mg flag returns it); fanout
		 * copies carry it too */
		it.attrs_len = itemattr_set(attrs, sizeof(attrs), NULL, 0,
		    ITEMATTR_ID, id, id_len);
		if (it.attrs_len == 0)
			return OPR_FORMAT;	/* the parser bounds ids */
		it.attrs = attrs;
	}
	rc = put_limited(b, q, &it, id, id_len, now);
	if (rc == 1)
		return OPR_NOT_STORED;
	if (rc == SAKER_EEXIST) {
		/* a retry of a set already stored: its answer again.  The
		 * batch may still have changed (a discard_old_when_full
		 * discard, the layer's sweep at max_dedup_ids): commit it
		 * as a set's would be. */
		b->stats.set_duplicates++;
		broker_touch(b);
		return OPR_OK;
	}
	if (rc == SAKER_EFULL && id != NULL) {
		broker_touch(b);	/* the layer may have swept ids first */
		return set_full(b, q, msg);
	}
	if (rc != SAKER_OK)
		return op_store_fail(b, rc, msg);
	broker_touch(b);
	/* fanout: every existing child gets its own copy, within its limits
	 * (the parent's id decided that this set is no duplicate) */
	for (i = 0; i < q->nchildren; i++) {
		struct squeue *ch = q->children[i];
		if (ch->h == NULL)
			continue;
		rc = put_limited(b, ch, &it, NULL, 0, now);
		if (rc < 0)
			log_error("fanout copy to %s failed: %s", ch->name, saker_store_errmsg(b->store));
	}
	if (it.due_ms > now)
		b->hooks->arm_promote(b, it.due_ms);
	return OPR_OK;
}


/* --- get ---------------------------------------------------------------- */

static unsigned
take_opts(unsigned opts)
{
	return opts & (OP_OPT_OPEN | OP_OPT_PEEK);
}

/* Does this key fetch an item (as opposed to only close/abort)? */
static bool
key_fetches(const struct op_key *k)
{
	return (k->opts & (OP_OPT_CLOSE | OP_OPT_ABORT | OP_OPT_TOUCH)) == 0 ||
	    (k->opts & OP_OPT_OPEN) != 0;
}

#define HIT_SET(h, k) ((h)[(k) >> 6] |= (uint64_t)1 << ((k) & 63))

/* A cleared bitmap for nkeys keys (one get runs at a time: b->scratch). */
static uint64_t *
hits_clear(struct broker *b, size_t nkeys)
{
	uint64_t *hits = b->scratch.hits;

	if (nkeys <= 64)
		hits[0] = 0;	/* most gets: no memset call */
	else
		memset(hits, 0, ((nkeys + 63) / 64) * sizeof(hits[0]));
	return hits;
}

/* Wait on every fetching key's queue at once.  The keys' raw bytes are
 * copied (base), so the reply can echo them however late it comes. */
static void
start_wait(struct session *s, const struct op_key *keys, size_t nkeys,
    struct squeue **qs, const char *base, size_t baselen, int64_t timeout_ms)
{
	size_t i;

	s->wait_line = malloc(baselen + 1);
	s->waits = calloc(nkeys, sizeof(*s->waits));
	if (s->wait_line == NULL || s->waits == NULL ||
	    !s->b->hooks->wait_start(s, timeout_ms)) {
		free(s->wait_line);
		free(s->waits);
		s->wait_line = NULL;
		s->waits = NULL;
		s->gops->error(s, 0, OPR_NOMEM, "out of memory");
		return;
	}
	memcpy(s->wait_line, base, baselen);
	s->wait_line[baselen] = '\0';
	for (i = 0; i < nkeys; i++) {
		const struct op_key *k = &keys[i];
		struct waiter *w = &s->waits[i];

		/* waits[i] belongs to key i, so a wake knows which key it answers */
		w->sess = s;
		w->raw_off = (uint32_t)(k->raw - base);
		w->raw_len = (uint32_t)k->raw_len;
		w->opts = take_opts(k->opts);
		if (key_fetches(k))
			waiter_link(w, qs[i]);
	}
	s->nwaits = nkeys;
	s->state = SESSION_WAITING;
}

void
op_wait_timeout(struct session *s)
{
	const struct get_ops *ops = s->gops;
	size_t n = s->nwaits;

	s->b->stats.get_misses++;
	session_end_wait(s);
	ops->end(s, hits_clear(s->b, n), n);
}

void
op_serve_waiters(struct broker *b, struct squeue *q)
{
	struct waiter *w;
	int64_t now = saker_now_ms();

	while (q->h != NULL && (w = TAILQ_FIRST(&q->waiters)) != NULL) {
		struct session *s = w->sess;
		const struct get_ops *ops = s->gops;
		size_t k = (size_t)(w - s->waits), n = s->nwaits;
		uint64_t *hits;
		const char *msg;
		int rc, r;

		/* Its replies wait for the batch in flight: an item handed
		 * out now would go out with them, before its own commit.
		 * The waiters behind it wait with it, in order; the flight's
		 * end serves them (broker_commit_finish()). */
		if (s->in_flight)
			break;
		if (!session_may(s, q->name, q->len, PERM_READ)) {
			/* a SIGHUP took the right away while it waited */
			session_denied(s, "get", q->name, q->len);
			session_end_wait(s);
			ops->error(s, k, OPR_DENIED, "permission denied");
			continue;
		}
		rc = take_for(s, q, w->opts, k, s->wait_line + w->raw_off, w->raw_len, now);
		s->wrote = true;	/* what it is handed is in this batch */
		/* a database out of reach: the waiters wait on, and miss on
		 * time unless it is back first */
		if (rc == SAKER_EEMPTY || (rc != SAKER_OK && broker_store_down(b)))
			break;
		if (rc != SAKER_OK) {
			log_error("handing an item of %s to a waiter: %s", q->name,
			    saker_store_errmsg(b->store));
			session_end_wait(s);
			msg = op_store_error(b, rc, &r);
			ops->error(s, k, r, msg);
			continue;
		}
		if (s->monitoring && (s->monitor_left < 0 || --s->monitor_left > 0) &&
		    !session_over_budget(s)) {
			/* (a monitor whose client does not read ends at the
			 * memory budget) */
			/* a monitor goes on: to the back of the line, per item */
			waiter_unlink(b, w);
			waiter_link(w, q);
			continue;
		}
		session_end_wait(s);
		hits = hits_clear(b, n);
		HIT_SET(hits, k);
		ops->end(s, hits, n);
	}
}

static size_t touch_held(struct session *s, struct squeue *q,
    int64_t lease_ms);

/* Clear pass 1's per-request counts on the queues of a get. */
static void
req_count_reset(struct squeue **qs, size_t n)
{
	size_t i;

	for (i = 0; i < n; i++)
		qs[i]->req_counted = false;
}

static void
get_run(struct session *s, const struct get_ops *ops, const struct op_key *keys,
    size_t nkeys, const char *base, size_t baselen)
{
	struct squeue **qs = s->b->scratch.qs;
	uint64_t *hits = hits_clear(s->b, nkeys);
	size_t nhits = 0;
	int64_t now = saker_now_ms(), timeout = -1;
	size_t i, misses = 0;
	bool fetches = false, may_wait = false;
	struct broker *b = s->b;
	const char *msg;
	int rc, r;

	s->gops = ops;
	/* Pass 0: the rights, before any queue is even created.  A get
	 * with one key the user may not read is refused as a whole. */
	for (i = 0; s->perms != NULL && i < nkeys; i++) {
		if (!perms_allow(s->perms, keys[i].name, keys[i].name_len, PERM_READ)) {
			session_denied(s, "get", keys[i].name, keys[i].name_len);
			ops->error(s, i, OPR_DENIED, "permission denied");
			return;
		}
	}
	if (b->status == STATUS_QUIESCENT) {
		ops->error(s, 0, OPR_READONLY, "server is quiescent");
		return;
	}
	/* A get that may wait needs an entry for each name to wait on. */
	for (i = 0; i < nkeys && !may_wait; i++)
		may_wait = key_fetches(&keys[i]) && keys[i].timeout_ms > 0;
	/* Pass 1: find the queues and refuse bad requests before any item
	 * moves, so an error never costs an item. */
	for (i = 0; i < nkeys; i++) {
		const struct op_key *k = &keys[i];
		size_t held;

		/* a read never creates a queue: a missing one is only in
		 * memory, for a wait or an open, until the get is over; a
		 * plain get that cannot wait remembers nothing of it */
		qs[i] = queue_for_read(b, k->name, k->name_len, may_wait ||
		    (k->opts & ~OP_OPT_PEEK) != 0);
		if (qs[i] == NULL) {
			ops->error(s, i, OPR_NOMEM, "out of memory");
			goto refused;
		}
		held = session_count_open(s, qs[i]);
		if (k->opts == 0 && held > 0) {
			ops->error(s, i, OPR_CLIENT, "close or abort the open item first");
			goto refused;
		}
		/* max_open counts the items the earlier keys of this request
		 * open or close on the same queue (req_held), not only those
		 * held before it */
		if (!qs[i]->req_counted) {
			qs[i]->req_counted = true;
			qs[i]->req_held = held;
		}
		if ((k->opts & OP_OPT_TOUCH) != 0 && qs[i]->req_held == 0) {
			/* a touch of an item not held is an error, not a
			 * silent no-op: the worker's job is no longer its own */
			ops->error(s, i, OPR_CLIENT,
			    "no open item on the queue to touch");
			goto refused;
		}
		if ((k->opts & (OP_OPT_CLOSE | OP_OPT_ABORT)) != 0 &&
		    qs[i]->req_held > 0)
			qs[i]->req_held--;
		if ((k->opts & OP_OPT_OPEN) != 0) {
			if (qs[i]->req_held >= queue_cfg(b, qs[i])->max_open) {
				ops->error(s, i, OPR_CLIENT, "too many open items");
				goto refused;
			}
			qs[i]->req_held++;
		}
		if (key_fetches(k)) {
			fetches = true;
			if (k->timeout_ms > timeout)
				timeout = k->timeout_ms;
		}
	}
	req_count_reset(qs, nkeys);
	/* Pass 2: close/abort, then fetch. */
	for (i = 0; i < nkeys; i++) {
		const struct op_key *k = &keys[i];
		struct open_item *oi;

		if ((k->opts & (OP_OPT_CLOSE | OP_OPT_ABORT)) != 0 &&
		    qs[i]->h != NULL &&
		    (oi = session_oldest_open(s, qs[i])) != NULL) {
			if (k->opts & OP_OPT_CLOSE)
				rc = saker_store_confirm(b->store, qs[i]->h, oi->id);
			else
				rc = dl_give_back(b, qs[i], oi->id,
				    oi->deliveries, k->delay_ms >= 0 ?
				    k->delay_ms : RETRY_BACKOFF);
			if (rc != SAKER_OK && rc != SAKER_ENOTFOUND) {
				msg = op_store_error(b, rc, &r);
				ops->error(s, i, r, msg);
				return;
			}
			session_forget_open(s, oi);
			broker_touch(b);
		}
		if ((k->opts & OP_OPT_TOUCH) != 0)
			(void)touch_held(s, qs[i], -1);
		if (!key_fetches(k))
			continue;
		if (nhits > 0 && session_over_budget(s)) {
			/* the reply reached the connection's memory budget: the
			 * remaining keys miss and their items stay queued (the
			 * first hit needs no look: the carrier looked before
			 * running the command) */
			misses++;
			continue;
		}
		if (qs[i]->h == NULL) {
			/* no such queue: a miss, counted as take_for() would */
			count_get(b, k->opts);
			misses++;
			continue;
		}
		rc = take_for(s, qs[i], take_opts(k->opts), i, k->raw, k->raw_len, now);
		if (rc == SAKER_OK) {
			HIT_SET(hits, i);
			nhits++;
		} else if (rc == SAKER_EEMPTY) {
			misses++;
		} else if (timeout > 0 && broker_store_down(b)) {
			/* a get that would wait waits, and misses on time
			 * unless the database is back first: its client
			 * neither spins nor hangs */
			misses++;
		} else if (nhits == 0) {
			/* nothing handed out yet: the error is the reply;
			 * logged once while the store fails for that reason
			 * (a store that is down fails every get) */
			bool said = b->store_failed &&
			    strncmp(b->store_error, saker_store_errmsg(b->store),
			    sizeof(b->store_error) - 1) == 0;

			msg = op_store_error(b, rc, &r);
			if (!said)
				log_error("get from %s: %s", qs[i]->name, msg);
			ops->error(s, i, r, msg);
			return;
		} else {
			/* replies already written for earlier keys stay valid */
			log_error("get from %s: %s", qs[i]->name, saker_store_errmsg(b->store));
		}
	}
	if (nhits == 0 && fetches && timeout > 0) {
		/* counted as a miss only if the wait times out */
		start_wait(s, keys, nkeys, qs, base, baselen, timeout);
		return;
	}
	b->stats.get_misses += misses;
	ops->end(s, hits, nkeys);
	return;
refused:
	/* qs[i] may be NULL: the keys up to it were looked up */
	req_count_reset(qs, qs[i] != NULL ? i + 1 : i);
}

void
op_get(struct session *s, const struct get_ops *ops, const struct op_key *keys,
    size_t nkeys, const char *base, size_t baselen)
{
	get_run(s, ops, keys, nkeys, base, baselen);
	/* the missing queues it named, unless it waits on them */
	queues_drop_stubs(s->b);
}

/* --- touch ------------------------------------------------------------- */

#define LEASE_MAX_S 315360000LL		/* 10 years */
#define LEASE_CEIL_MS (3600LL * 1000)	/* what one touch may hold */

int
op_touch(struct session *s, const char *name, size_t len, int64_t exptime,
    const char **msg)
{
	struct squeue *q;
	int64_t lease_ms = -1, now = saker_now_ms();
	int rc;

	if (exptime < 0)
		return OPR_FORMAT;
	if (exptime > MEMCACHE_REL_MAX) {
		/* an absolute time: at least 1 ms from now (one in the past
		 * lets the next sweep return the item) */
		if (exptime - now / 1000 > LEASE_MAX_S)
			return OPR_FORMAT;
		lease_ms = exptime * 1000 - now;
		if (lease_ms < 1)
			lease_ms = 1;
	} else if (exptime > 0) {
		lease_ms = exptime * 1000;
	}
	if (!session_may(s, name, len, PERM_READ))
		return op_denied(s, "touch", name, len, msg);
	q = queue_lookup(s->b, name, len, false, &rc);
	if (q == NULL || touch_held(s, q, lease_ms) == 0) {
		*msg = "no open item on the queue to touch";
		return OPR_NOT_FOUND;
	}
	return OPR_OK;
}

/* Push the open_timeout deadline of every item s holds open on q to
 * now + lease_ms (lease_ms < 0: the queue's open_timeout again from now;
 * with none configured the items keep no deadline).  How many items s
 * holds open there (0: nothing changed). */
static size_t
touch_held(struct session *s, struct squeue *q, int64_t lease_ms)
{
	struct broker *b = s->b;
	struct open_item *oi;
	int64_t deadline;
	size_t n = 0;

	if (lease_ms < 0)
		lease_ms = queue_cfg(b, q)->open_timeout_ms;
	/* one touch holds an item at most LEASE_CEIL_MS (or the queue's
	 * open_timeout, when longer): a touch of 10 years kept an item
	 * from a queue whose open_timeout is 2 s (issue 45); a longer job
	 * touches again */
	if (lease_ms > LEASE_CEIL_MS && lease_ms > queue_cfg(b, q)->open_timeout_ms)
		lease_ms = queue_cfg(b, q)->open_timeout_ms > LEASE_CEIL_MS ?
		    queue_cfg(b, q)->open_timeout_ms : LEASE_CEIL_MS;
	deadline = lease_ms > 0 ? saker_now_ms() + lease_ms : 0;
	TAILQ_FOREACH(oi, &s->opens, link) {
		if (oi->q != q)
			continue;
		oi->deadline_ms = deadline;
		n++;
	}
	if (n == 0)
		return 0;
	if (deadline > 0)
		b->hooks->arm_open_timeout(b, deadline);
	b->stats.touches++;
	log_debug("touch: %zu open items of %s held until %" PRId64, n,
	    q->name, deadline);
	return n;
}

/* --- queue administration ----------------------------------------------- */

int
op_delete(struct session *s, const char *name, size_t len, const char **msg)
{
	struct broker *b = s->b;
	struct squeue *q;
	int rc;

	if (!session_may(s, name, len, PERM_WRITE))
		return op_denied(s, "delete", name, len, msg);
	q = queue_lookup(b, name, len, false, &rc);
	if (q == NULL)
		return OPR_NOT_FOUND;
	/* no session holds items of a deleted queue open */
	sessions_forget_queue(b, q);
	rc = queue_delete(b, q);
	if (rc != SAKER_OK)
		return op_store_fail(b, rc, msg);
	return OPR_OK;
}

static int
flush_one(struct broker *b, struct squeue *q)
{
	int rc = saker_store_queue_flush(b->store, q->h);

	if (rc == SAKER_OK) {
		sessions_forget_queue(b, q);
		broker_touch(b);
	}
	return rc;
}

int
op_flush(struct session *s, const char *name, size_t len, const char **msg)
{
	struct broker *b = s->b;
	struct squeue *q;
	int rc = SAKER_OK;

	if (!session_may(s, name, len, PERM_WRITE))
		return op_denied(s, "flush", name, len, msg);
	/* flush is a write: a missing queue is created, empty (how a fanout
	 * child starts its feed without an item); not while writes are
	 * refused */
	q = queue_lookup(b, name, len, b->status == STATUS_UP, &rc);
	if (q == NULL && rc != SAKER_ENOTFOUND)
		return op_store_fail(b, rc, msg);
	if (q != NULL)
		rc = flush_one(b, q);
	if (rc != SAKER_OK && rc != SAKER_ENOTFOUND)
		return op_store_fail(b, rc, msg);
	return OPR_OK;
}

struct flush_all_ctx {
	struct broker *b;
	int rc;
};

static int
flush_all_cb(void *arg, struct squeue *q)
{
	struct flush_all_ctx *fa = arg;

	fa->rc = flush_one(fa->b, q);
	return fa->rc != SAKER_OK;
}

int
op_flush_all(struct session *s, const char **msg)
{
	struct flush_all_ctx fa = { s->b, SAKER_OK };
	struct broker *b = s->b;

	if (!session_admin(s))
		return op_denied(s, "flush_all", NULL, 0, msg);
	(void)queues_walk(b, flush_all_cb, &fa);
	if (fa.rc != SAKER_OK)
		return op_store_fail(b, fa.rc, msg);
	return OPR_OK;
}

int
op_flush_expired(struct session *s, const char *name, size_t len,
    uint64_t *removed, const char **msg)
{
	struct broker *b = s->b;
	struct squeue *q;
	int rc;

	*removed = 0;
	if (!session_may(s, name, len, PERM_WRITE))
		return op_denied(s, "flush_expired", name, len, msg);
	q = queue_lookup(b, name, len, false, &rc);
	if (q == NULL)
		return OPR_OK;
	rc = saker_store_flush_expired(b->store, q->h, saker_now_ms(), 0, removed);
	if (rc != SAKER_OK)
		return op_store_fail(b, rc, msg);
	if (*removed > 0)
		broker_touch(b);
	return OPR_OK;
}

static void
monitor_run(struct session *s, const struct get_ops *ops,
    const struct op_key *k, int64_t seconds, int64_t max, const char *base,
    size_t baselen)
{
	static const uint64_t none[2] = { 0, 0 };
	struct broker *b = s->b;
	struct squeue *q;
	int64_t now = saker_now_ms(), n;
	int rc;

	s->gops = ops;
	if (!session_may(s, k->name, k->name_len, PERM_READ)) {
		session_denied(s, "monitor", k->name, k->name_len);
		ops->error(s, 0, OPR_DENIED, "permission denied");
		return;
	}
	if (b->status == STATUS_QUIESCENT) {
		ops->error(s, 0, OPR_READONLY, "server is quiescent");
		return;
	}
	/* a read: a missing queue is waited on in memory only */
	q = queue_for_read(b, k->name, k->name_len, true);
	if (q == NULL) {
		ops->error(s, 0, OPR_NOMEM, "out of memory");
		return;
	}
	if (q->h == NULL)
		count_get(b, OP_OPT_OPEN);      /* a miss, as take_for() counts */
	for (n = 0; q->h != NULL && (max < 0 || n < max); n++) {
		if (session_over_budget(s))
			break;          /* the rest another time (memory budget) */
		rc = take_for(s, q, OP_OPT_OPEN, 0, k->raw, k->raw_len, now);
		if (rc != SAKER_OK)
			break;
	}
	if ((max < 0 || n < max) && seconds > 0 && !session_over_budget(s)) {
		/* stream items that arrive during the monitor period */
		start_wait(s, k, 1, &q, base, baselen, seconds * 1000);
		if (s->state == SESSION_WAITING) {
			s->monitoring = true;
			s->monitor_left = max < 0 ? -1 : max - n;
			s->waits[0].opts = OP_OPT_OPEN;
		}
		return;
	}
	ops->end(s, none, 1);
}

void
op_monitor(struct session *s, const struct get_ops *ops,
    const struct op_key *k, int64_t seconds, int64_t max, const char *base,
    size_t baselen)
{
	monitor_run(s, ops, k, seconds, max, base, baselen);
	queues_drop_stubs(s->b);
}

int
op_confirm(struct session *s, const char *name, size_t len, int64_t n,
    const char **msg)
{
	struct broker *b = s->b;
	struct squeue *q;
	int64_t i;
	int rc;

	if (!session_may(s, name, len, PERM_READ))
		return op_denied(s, "confirm", name, len, msg);
	q = queue_lookup(b, name, len, false, &rc);
	if (q == NULL || (int64_t)session_count_open(s, q) < n)
		return OPR_NOT_FOUND;
	for (i = 0; i < n; i++) {
		struct open_item *oi = session_oldest_open(s, q);
		rc = saker_store_confirm(b->store, q->h, oi->id);
		if (rc != SAKER_OK && rc != SAKER_ENOTFOUND)
			return op_store_fail(b, rc, msg);
		session_forget_open(s, oi);
		broker_touch(b);
	}
	return OPR_OK;
}
