/* policy.c -- the broker's rules about storage, once over every driver
 * (store.h, THE LAYER): the delivery-count clamp and increment, the quarantine of
 * damaged items and the expire_to target.  The lock file is lock.c's. */
#include "config.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "saker/store.h"
#include "layer.h"

int
saker_store_put(saker_store *s, saker_queue *q, const struct saker_item *item,
    int64_t now_ms)
{
	struct saker_item it;
	int rc;

	if ((rc = saker_layer_refuse(s)) != SAKER_OK)
		return rc;
	/* what no driver could store, refused once for all of them */
	if (item == NULL)
		s->lerr = "bad item: none given";
	else if (item->len > 0 && item->data == NULL)
		s->lerr = "bad item: no data";
	else if (item->attrs_len > 0 && item->attrs == NULL)
		s->lerr = "bad item: no attributes";
	else if (item->attrs_len > SAKER_ATTRS_MAX) {
		snprintf(s->lbuf, sizeof(s->lbuf), "bad item: attributes of"
		    " %zu bytes (at most %u)", item->attrs_len,
		    SAKER_ATTRS_MAX);
		s->lerr = s->lbuf;
	}
	if (s->lerr != NULL)
		return SAKER_EINVAL;
	s->depth++;	/* a layer call: the put's wake-up comes at its end */
	if (item->deliveries <= SAKER_DELIVERIES_MAX)
		rc = s->driver->put(s, q, item, now_ms);
	else {
		it = *item;
		it.deliveries = SAKER_DELIVERIES_MAX;
		rc = s->driver->put(s, q, &it, now_ms);
	}
	return saker_layer_leave(s, rc);
}

/*
 * *out = *in with its bytes (data and attributes) copied: they may be the
 * driver's own (a cursor's page, a statement's column) and die with its
 * next write, which the put of the copy is.  Expiry and due time are
 * cleared (a moved item must not vanish or wait).  The data goes to
 * *copy (free it; NULL when there is none), the attributes to attrs;
 * attributes too long to be any are damage, left out (every put refuses
 * them).  SAKER_ENOMEM, nothing to free.
 */
static int
copy_bytes(const struct saker_item *in, struct saker_item *out,
    unsigned char attrs[SAKER_ATTRS_MAX], void **copy)
{
	*out = *in;
	*copy = NULL;
	if (out->len > 0) {
		if ((*copy = malloc(out->len)) == NULL)
			return SAKER_ENOMEM;
		out->data = memcpy(*copy, in->data, out->len);
	}
	if (out->attrs_len > SAKER_ATTRS_MAX)
		out->attrs_len = 0;
	out->attrs = out->attrs_len > 0 ?
	    memcpy(attrs, in->attrs, out->attrs_len) : NULL;
	out->expires_ms = 0;
	out->due_ms = 0;
	return SAKER_OK;
}

size_t
saker_store_derived_name(const char *qname, size_t qlen, const char *suffix,
    char name[SAKER_STORE_QNAME_MAX + 1])
{
	size_t slen = strlen(suffix);
	size_t base;

	if (slen > SAKER_STORE_QNAME_MAX)	/* no room for any of qname */
		slen = SAKER_STORE_QNAME_MAX;
	base = qlen + slen <= SAKER_STORE_QNAME_MAX ? qlen :
	    SAKER_STORE_QNAME_MAX - slen;
	memcpy(name, qname, base);
	memcpy(name + base, suffix, slen);
	name[base + slen] = '\0';
	return base + slen;
}

int
saker_store_quarantine(saker_store *s, saker_queue *q, const char *qname,
    size_t qlen, uint64_t id, const struct saker_item *bad, int64_t now_ms,
    char *msg, size_t msglen)
{
	char name[SAKER_STORE_QNAME_MAX + 1], why[300];
	unsigned char attrs[SAKER_ATTRS_MAX];
	struct saker_item it;
	saker_queue *dq;
	void *copy;
	size_t len;
	int rc;

	if (bad == NULL) {
		snprintf(msg, msglen, "queue '%.*s': item %" PRIu64 " failed its"
		    " checksum (left in place: the store takes no writes)",
		    (int)qlen, qname, id);
		return SAKER_EREADONLY;
	}
	len = saker_store_derived_name(qname, qlen, SAKER_SUFFIX_DAMAGED, name);
	/* copied before queue_open(), the driver's first write */
	if ((rc = copy_bytes(bad, &it, attrs, &copy)) != SAKER_OK) {
		snprintf(msg, msglen, "queue '%.*s': item %" PRIu64 " failed"
		    " its checksum and could not be moved to '%s' (out of"
		    " memory)", (int)qlen, qname, id, name);
		return rc;
	}
	if ((rc = s->driver->queue_open(s, name, len, true, NULL, &dq)) ==
	    SAKER_OK && dq == q) {
		snprintf(why, sizeof(why), "the queue is its own quarantine");
		rc = SAKER_EINVAL;
	} else if (rc == SAKER_OK &&
	    (rc = saker_store_put(s, dq, &it, now_ms)) == SAKER_OK) {
		snprintf(msg, msglen, "queue '%.*s': item %" PRIu64 " failed its"
		    " checksum; moved to queue '%s'", (int)qlen, qname, id,
		    name);
		free(copy);
		return SAKER_OK;
	} else {
		const char *e = s->driver->errmsg(s);

		/* the driver's reason, on one line */
		snprintf(why, sizeof(why), "%s", e != NULL && *e != '\0' ? e :
		    saker_strerror(rc));
		why[strcspn(why, "\r\n")] = '\0';
	}
	free(copy);
	snprintf(msg, msglen, "queue '%.*s': item %" PRIu64 " failed its"
	    " checksum and could not be moved to '%s' (%s)", (int)qlen, qname,
	    id, name, why);
	return rc;
}

int
saker_store_keep_expire_to(saker_store *s, saker_queue *q, const char *name,
    size_t len)
{
	struct saker_queue_base *b = (struct saker_queue_base *)q;

	(void)s;
	if (q == NULL || len >= sizeof(b->xto) || (len > 0 && name == NULL))
		return SAKER_EINVAL;
	b->xtolen = name != NULL ? len : 0;
	if (b->xtolen > 0)
		memcpy(b->xto, name, len);
	return SAKER_OK;
}

int
saker_store_expire_target(saker_store *s, saker_queue *q, saker_queue **to)
{
	struct saker_queue_base *b = (struct saker_queue_base *)q;
	int rc;

	*to = NULL;
	if (b->xtolen == 0)
		return SAKER_OK;
	if ((rc = s->driver->queue_open(s, b->xto, b->xtolen, true, NULL, to)) !=
	    SAKER_OK)
		*to = NULL;
	else if (*to == q)
		*to = NULL;	/* its own name: dropped */
	return rc;
}

int
saker_store_expired(saker_store *s, saker_queue *q,
    const struct saker_item *item, int64_t now_ms, bool *routed)
{
	unsigned char attrs[SAKER_ATTRS_MAX];
	struct saker_item it;
	saker_queue *t;
	void *copy;
	int rc;

	*routed = false;
	if (!saker_store_has_expire_to(q))
		return SAKER_OK;	/* dropped: nothing written */
	/* copied before queue_open(), which may write (a new target) */
	if ((rc = copy_bytes(item, &it, attrs, &copy)) != SAKER_OK)
		return rc;
	if ((rc = saker_store_expire_target(s, q, &t)) == SAKER_OK &&
	    t != NULL)
		rc = saker_store_put(s, t, &it, now_ms);
	free(copy);
	if (rc == SAKER_OK && t != NULL) {	/* t NULL: q's own name */
		*routed = true;
		((struct saker_queue_base *)(void *)q)->expired_to++;
	}
	return rc;
}
