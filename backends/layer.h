/* layer.h -- what the registry (saker_store_open/close) asks of the
 * layer's wake-ups (layer.c; store.h, the notify contract).  Backend-local,
 * for registry.c and layer.c only: drivers never include it. */
#ifndef SAKER_BACKENDS_LAYER_H
#define SAKER_BACKENDS_LAYER_H

#include "saker/store.h"

/* Before open(): the driver's opts (o, a copy of the core's) get the
 * layer's notify, with a fresh argument.  SAKER_ENOMEM, o untouched. */
int saker_layer_wake_open(struct saker_store_opts *o);
/* open() succeeded: s keeps the core's callback (from `core`) and the
 * argument o carries now points to s. */
void saker_layer_wake_start(saker_store *s,
    const struct saker_store_opts *core, const struct saker_store_opts *o);
/* open() failed: the argument goes. */
void saker_layer_wake_fail(struct saker_store_opts *o,
    const struct saker_store_opts *core);
/* after close(): s->wake_cell goes (NULL-safe) */
void saker_layer_wake_close(saker_store **cell);

/* open() succeeded: the layer's messages name the store at `location`
 * (may be NULL) as "TYPE LOCATION", and a read-only store refuses writes
 * from now on (store.h, REFUSALS).  SAKER_ENOMEM. */
int saker_layer_opened(saker_store *s, const char *location, bool read_only);
/* The check of a layer call that writes: SAKER_OK, or the refusal (and
 * errmsg() says it).  Inline: every put and take asks it. */
static inline int
saker_layer_refuse(saker_store *s)
{
	s->lerr = NULL;
	if (s->refusal == NULL && s->lost == 0)
		return SAKER_OK;
	return saker_store_refusal(s, true);
}

/* The end of a layer call begun with s->depth++ (layer.c's leave()):
 * the outermost wakes the queues.  Returns rc. */
int saker_layer_leave(saker_store *s, int rc);

#endif /* SAKER_BACKENDS_LAYER_H */
