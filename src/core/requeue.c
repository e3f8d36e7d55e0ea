/* requeue.c -- items from one queue to another, counts reset (requeue.h). */
#include "config.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "clock.h"
#include "log.h"
#include "ops.h"
#include "queues.h"
#include "requeue.h"
#include "session.h"

struct rq_copy {
	struct saker_item it;
	void *buf;
	size_t cap;
	bool oom;
};

static int
rq_copy_cb(void *arg, const struct saker_item *it)
{
	struct rq_copy *c = arg;

	c->it = *it;
	if (it->len > c->cap) {
		void *nb = realloc(c->buf, it->len);

		if (nb == NULL) {
			c->oom = true;
			return 1;	/* leaves the item where it is */
		}
		c->buf = nb;
		c->cap = it->len;
	}
	if (it->len > 0)
		memcpy(c->buf, it->data, it->len);
	c->it.data = c->buf;
	return 0;
}

int
op_requeue(struct session *s, const char *from, size_t flen, const char *to,
    size_t tlen, uint64_t max, uint64_t *moved, const char **msg)
{
	struct broker *b = s->b;
	struct rq_copy c;
	struct squeue *fq, *tq;
	int64_t now = saker_now_ms();
	int rc = SAKER_OK, r = OPR_OK;

	*moved = 0;
	if (!session_may(s, from, flen, PERM_READ))
		return op_denied(s, "requeue", from, flen, msg);
	if (!session_may(s, to, tlen, PERM_WRITE))
		return op_denied(s, "requeue", to, tlen, msg);
	if (b->status != STATUS_UP) {
		*msg = "server is read-only";
		return OPR_READONLY;
	}
	if (flen == tlen && memcmp(from, to, flen) == 0) {
		*msg = "requeue to the same queue";
		return OPR_CLIENT;
	}
	fq = queue_lookup(b, from, flen, false, &rc);
	if (fq == NULL)
		return OPR_OK;
	if ((tq = queue_lookup(b, to, tlen, true, &rc)) == NULL)
		return op_store_fail(b, rc, msg);
	memset(&c, 0, sizeof(c));
	while (*moved < max) {
		/* open, copy into the target, confirm: never in neither queue,
		 * and after the commit in exactly one */
		rc = saker_store_take(b->store, fq->h, SAKER_TAKE_OPEN, now, rq_copy_cb, &c);
		if (rc == SAKER_EEMPTY || (rc == 1 && c.oom))
			break;
		if (rc != SAKER_OK)
			break;
		broker_touch(b);
		c.it.deliveries = 0;
		c.it.due_ms = 0;
		c.it.state = SAKER_ITEM_READY;
		rc = saker_store_put(b->store, tq->h, &c.it, now);
		if (rc != SAKER_OK) {
			(void)saker_store_release(b->store, fq->h, c.it.id);
			break;
		}
		if ((rc = saker_store_confirm(b->store, fq->h, c.it.id)) != SAKER_OK)
			break;
		tq->enqueued++;
		fq->dequeued++;
		(*moved)++;
	}
	free(c.buf);
	if (c.oom && *moved == 0) {
		*msg = "out of memory";
		return OPR_NOMEM;
	}
	if (rc != SAKER_OK && rc != SAKER_EEMPTY && !c.oom) {
		*msg = op_store_error(b, rc, &r);
		if (*moved == 0)
			return r;
		/* the moves so far stand; the next requeue says what failed */
	}
	if (*moved > 0)
		log_info("requeue: %" PRIu64 " items from %s to %s", *moved,
		    fq->name, tq->name);
	return OPR_OK;
}
