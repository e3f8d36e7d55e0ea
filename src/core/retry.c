/* retry.c -- give an open item back later, with the queue's backoff
 * (retry.h). */
#include "config.h"

#include <inttypes.h>
#include <unistd.h>

#include "clock.h"
#include "log.h"
#include "queues.h"
#include "retry.h"

#define RETRY_TICK_MS 10

int64_t
retry_backoff(const struct queue_config *qc, uint32_t deliveries,
    uint64_t rnd)
{
	int64_t d = qc->retry_backoff_ms, max = qc->retry_backoff_max_ms;
	uint32_t i;

	if (d <= 0)
		return 0;
	if (max < d)
		max = d;
	/* doubling stops at the cap: no overflow, at most 32 steps */
	for (i = 1; i < deliveries && d < max; i++)
		d = d > max / 2 ? max : d * 2;
	if (d > max)
		d = max;
	return d - (int64_t)(rnd % (uint64_t)(d / 4 + 1));
}

uint64_t
retry_random(struct broker *b)
{
	uint64_t z;

	if (b->rng == 0)
		b->rng = (uint64_t)saker_now_us() ^ ((uint64_t)getpid() << 32);
	/* splitmix64 */
	z = (b->rng += UINT64_C(0x9e3779b97f4a7c15));
	z = (z ^ (z >> 30)) * UINT64_C(0xbf58476d1ce4e5b9);
	z = (z ^ (z >> 27)) * UINT64_C(0x94d049bb133111eb);
	return z ^ (z >> 31);
}

int
retry_give_back(struct broker *b, struct squeue *q, uint64_t id,
    uint32_t deliveries, int64_t delay_ms)
{
	int64_t now = saker_now_ms(), due;
	int rc;

	if (delay_ms == RETRY_BACKOFF)
		delay_ms = b->closing ? 0 : retry_backoff(queue_cfg(b, q),
		    deliveries, retry_random(b));
	if (delay_ms <= 0) {
		rc = saker_store_release(b->store, q->h, id);
		if (rc == SAKER_OK)
			broker_touch(b);
		return rc;
	}
	/* +1: never visible before delay_ms have really passed (as a set's
	 * /delay=, ops.c); then up to the next RETRY_TICK_MS, so the retries
	 * of a busy queue fall due together and one promote pass (one timer
	 * wake-up) serves them instead of one each: never early, at most
	 * RETRY_TICK_MS late */
	due = now + delay_ms + 1;
	due += (RETRY_TICK_MS - due % RETRY_TICK_MS) % RETRY_TICK_MS;
	rc = saker_store_release_delayed(b->store, q->h, id, due, now);
	if (rc != SAKER_OK)
		return rc;
	broker_touch(b);
	q->retries++;
	b->stats.retries_scheduled++;
	b->hooks->arm_promote(b, due);
	return SAKER_OK;
}
