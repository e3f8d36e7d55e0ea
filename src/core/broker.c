/* broker.c -- the broker's state: setting it up, the store's health, the
 * per-queue configuration. */
#include "config.h"

#include <stdio.h>
#include <string.h>
#include <time.h>

#include "broker.h"
#include "clock.h"
#include "log.h"

void
broker_init(struct broker *b, const struct broker_hooks *hooks)
{
	/* not the scratch: written before it is read, its pages stay
	 * untouched until a get needs them */
	memset(b, 0, offsetof(struct broker, scratch));
	b->hooks = hooks;
	b->stats.started = time(NULL);
	TAILQ_INIT(&b->ready);
	TAILQ_INIT(&b->sessions);
}

void
broker_store_failed(struct broker *b, const char *reason)
{
	b->store_failed = true;
	b->store_failed_ms = saker_now_ms();
	broker_redact(b, reason, b->store_error, sizeof(b->store_error));
}

const char *
broker_redact(const struct broker *b, const char *why, char *buf, size_t len)
{
	const char *loc = b->store_location, *hit;
	size_t llen = loc != NULL ? strlen(loc) : 0, n = 0;

	if (len == 0)
		return buf;
	buf[0] = '\0';
	/* a one-byte location would eat every such byte of the message */
	while (llen >= 2 && (hit = strstr(why, loc)) != NULL) {
		n += (size_t)snprintf(buf + n, len - n, "%.*s(store)",
		    (int)(hit - why), why);
		if (n >= len)
			return buf;
		why = hit + llen;
	}
	snprintf(buf + n, len - n, "%s", why);
	return buf;
}

bool
broker_store_down(struct broker *b)
{
	struct saker_store_stats st;

	saker_store_get_stats(b->store, &st);
	return st.server && !st.connected;
}

/* --- configuration ------------------------------------------------------ */

int
broker_load_config(struct broker *b, const char *path, unsigned max_open)
{
	struct queue_config defaults;
	struct config *cf;
	char err[512];

	memset(&defaults, 0, sizeof(defaults));
	defaults.max_open = max_open;
	if (path == NULL)
		cf = config_default(&defaults);
	else
		cf = config_load(path, &defaults, err, sizeof(err));
	if (cf == NULL) {
		log_error("config: %s", path != NULL ? err : "out of memory");
		return -1;
	}
	config_free(b->config);
	b->config = cf;
	b->config_gen++;
	return 0;
}
