/* pg_queue.c -- the PostgreSQL driver's queues in memory: finding them,
 * the lists a batch keeps of them, waking their waiters. */
#include "config.h"

#include "pg_int.h"

void
pg_notify_local(struct pg_store *s, struct saker_queue *q)
{
	if (q != NULL)
		q->empty_gen = s->txn_gen - 1;
	if (s->notify != NULL && q != NULL && !q->dead)
		s->notify(s->notify_arg, q, q->ctx);
}

/* Tell local waiters and, at commit, the other brokers. */
void
pg_gained(struct pg_store *s, struct saker_queue *q)
{
	if (q->hint_gen == s->txn_gen)
		q->hint_gen--;	/* a released item may sit before the hint */
	pg_notify_local(s, q);
	if (!q->pend) {
		LIST_INSERT_HEAD(&s->pend, q, pend_link);
		q->pend = true;
	}
}

/* After a reconnect notifications may have been missed: look at every
 * queue again. */
void
pg_notify_all(struct pg_store *s)
{
	struct kit_qent *e;
	size_t i = 0;

	for (e = kit_qtab_next(&s->qt, &i, NULL); e != NULL;
	    e = kit_qtab_next(&s->qt, &i, e))
		pg_notify_local(s, PG_Q(e));
}
