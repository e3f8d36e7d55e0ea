/* deadletter.c -- poison items to the dead-letter queue (deadletter.h). */
#include "config.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "deadletter.h"
#include "log.h"
#include "qname.h"
#include "queues.h"
#include "retry.h"

/* the core's names and the store layer's rule for derived names agree */
_Static_assert(SAKER_QNAME_MAX == SAKER_STORE_QNAME_MAX,
    "queue name limits differ");

void
dl_name(struct broker *b, struct squeue *q, char *buf, size_t len)
{
	const struct queue_config *qc = queue_cfg(b, q);
	char name[SAKER_STORE_QNAME_MAX + 1];

	if (qc->dead_letter[0] != '\0') {
		snprintf(buf, len, "%s", qc->dead_letter);
		return;
	}
	/* the layer's rule, as for "<q>_damaged" */
	saker_store_derived_name(q->name, q->len, SAKER_SUFFIX_DEAD, name);
	snprintf(buf, len, "%s", name);
}

bool
dl_is_dead_letter(struct broker *b, const struct squeue *q)
{
	size_t sl = strlen(SAKER_SUFFIX_DEAD);
	const struct queue_config *src;

	if (config_names_dead_letter(b->config, q->name, q->len))
		return true;
	if (q->len <= sl || memcmp(q->name + q->len - sl, SAKER_SUFFIX_DEAD, sl) != 0)
		return false;
	/* "<Q>_dead" of a queue Q that sends its dead letters there (for a
	 * name cut to fit the suffix, the cut name stands for Q) */
	src = config_for(b->config, q->name, q->len - sl);
	return src->max_deliveries > 0 && src->dead_letter[0] == '\0';
}

bool
dl_spent(struct broker *b, struct squeue *q, uint32_t before)
{
	uint32_t max = queue_cfg(b, q)->max_deliveries;

	return max > 0 && before >= max &&
	    !dl_is_dead_letter(b, q);
}

int
dl_move(struct broker *b, struct squeue *q, uint64_t id, uint32_t deliveries)
{
	char name[SAKER_QNAME_MAX + 1];
	struct squeue *dq;
	int rc = SAKER_OK;

	dl_name(b, q, name, sizeof(name));
	dq = queue_lookup(b, name, strlen(name), true, &rc);
	if (dq == NULL || dq == q) {
		log_error("queue %s: cannot open its dead-letter queue %s: %s",
		    q->name, name, dq == q ? "it is the queue itself" :
		    rc == QUEUE_ETOOMANY ? "too many queues (--max-queues)" :
		    saker_strerror(rc));
		return dq == q ? SAKER_EINVAL : rc;
	}
	rc = saker_store_move(b->store, q->h, id, dq->h);
	if (rc != SAKER_OK) {
		if (rc != SAKER_ENOTFOUND)
			log_error("queue %s: moving an item to %s: %s", q->name,
			    name, saker_store_errmsg(b->store));
		return rc;
	}
	q->dead_lettered++;
	broker_touch(b);
	log_info("queue %s: an item delivered %" PRIu32 " times moved to "
	    "dead-letter queue %s (%" PRIu64 " so far)", q->name, deliveries,
	    name, q->dead_lettered);
	return SAKER_OK;
}

int
dl_give_back(struct broker *b, struct squeue *q, uint64_t id,
    uint32_t deliveries, int64_t delay_ms)
{
	if (q->h == NULL)
		return SAKER_ENOTFOUND;
	if (dl_spent(b, q, deliveries) &&
	    dl_move(b, q, id, deliveries) == SAKER_OK)
		return SAKER_OK;
	/* below the limit: back to q, at once or later (retry.h); the move
	 * failed: likewise rather than lost (it is caught again at its next
	 * hand-out) */
	return retry_give_back(b, q, id, deliveries, delay_ms);
}
