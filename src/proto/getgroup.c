/* getgroup.c -- gets made of several requests (binary quiet gets, meta
 * quiet mg lines), and the one way both protocols answer them. */
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include "getgroup.h"

static void gg_reset(struct session *s);

/* Misses of the keys that report them, then the end marker; key `skip`
 * was answered already. */
static void
gg_finish(struct session *s, const uint64_t *hits, size_t nkeys, size_t skip)
{
	struct getgroup *g = s->ps->grp;
	size_t i;

	for (i = 0; i < nkeys; i++) {
		const struct gg_key *gk = &g->keys[i];

		if (i == skip || gk->quiet || (hits != NULL && OP_HIT(hits, i)))
			continue;
		g->rep->miss(s, g, gk);
	}
	if (g->end != GG_END_NONE)
		g->rep->end(s, g);
	gg_reset(s);
}

static int
gg_hit(void *arg, const struct saker_item *it)
{
	struct hit_ctx *hc = arg;

	return hc->s->ps->grp->rep->hit(arg, it);
}

static void
gg_end(struct session *s, const uint64_t *hits, size_t nkeys)
{
	gg_finish(s, hits, nkeys, (size_t)-1);
}

static void
gg_error(struct session *s, size_t k, int r, const char *msg)
{
	struct getgroup *g = s->ps->grp;

	g->rep->error(s, &g->keys[k], r, msg);
	gg_finish(s, NULL, g->nkeys, k);
}

static const struct get_ops gg_get_ops = {
	.hit = gg_hit,
	.end = gg_end,
	.error = gg_error,
};

bool
gg_room(struct session *s, size_t bytes)
{
	const struct getgroup *g = s->ps->grp;

	return g == NULL || (g->nkeys < PROTO_MAX_KEYS && g->len + bytes <= GG_MAX_BYTES);
}

static bool
gg_reserve(struct getgroup *g, size_t n)
{
	size_t cap;
	char *nb;

	if (g->len + n <= g->cap)
		return true;
	cap = g->cap ? g->cap : 256;
	while (cap < g->len + n)
		cap *= 2;
	if ((nb = realloc(g->buf, cap)) == NULL)
		return false;
	g->buf = nb;
	g->cap = cap;
	return true;
}

struct gg_key *
gg_add(struct session *s, const struct proto_key *k, const char *raw, size_t rawlen)
{
	struct getgroup *g = s->ps->grp;
	struct gg_key *gk;

	if (g == NULL && (g = s->ps->grp = calloc(1, sizeof(*g))) == NULL)
		return NULL;
	if (g->nkeys >= PROTO_MAX_KEYS || g->len + rawlen > GG_MAX_BYTES ||
	    !gg_reserve(g, rawlen))
		return NULL;
	gk = &g->keys[g->nkeys++];
	memset(gk, 0, sizeof(*gk));
	gk->off = (uint16_t)g->len;
	gk->len = (uint16_t)rawlen;
	memcpy(g->buf + g->len, raw, rawlen);
	g->len += rawlen;
	gk->k = *k;
	return gk;
}

bool
gg_stash(struct session *s, struct gg_key *gk, const char *p, size_t n)
{
	struct getgroup *g = s->ps->grp;

	if (n > 255 || g->len + n > GG_MAX_BYTES || !gg_reserve(g, n))
		return false;
	gk->ooff = (uint16_t)g->len;
	gk->olen = (uint8_t)n;
	memcpy(g->buf + g->len, p, n);
	g->len += n;
	return true;
}

void
gg_run(struct session *s, const struct gg_replies *rep, int end,
    uint32_t end_opaque)
{
	struct proto_key keys[PROTO_MAX_KEYS];
	struct getgroup *g = s->ps->grp;
	size_t i;

	g->rep = rep;
	g->end = end;
	g->end_opaque = end_opaque;
	for (i = 0; i < g->nkeys; i++) {
		keys[i] = g->keys[i].k;
		keys[i].raw = keys[i].name = g->buf + g->keys[i].off;
		keys[i].raw_len = g->keys[i].len;
	}
	op_get(s, &gg_get_ops, keys, g->nkeys, g->buf, g->len);
}

static void
gg_reset(struct session *s)
{
	if (s->ps->grp == NULL)
		return;
	s->ps->grp->nkeys = 0;
	s->ps->grp->len = 0;
	s->ps->grp->end = GG_END_NONE;
}

void
gg_free(struct session *s)
{
	if (s->ps->grp == NULL)
		return;
	free(s->ps->grp->buf);
	free(s->ps->grp);
	s->ps->grp = NULL;
}

