/*
 * perms.h -- what one --auth-file user may do: the queues it may use
 * (name patterns), whether it may read and write them, and whether it may
 * run the server-wide commands (admin).  Parsed once from the user's
 * line; checked on every command that names a queue, without allocating.
 */
#ifndef SAKER_PERMS_H
#define SAKER_PERMS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define PERM_READ  0x1u         /* get, mg, binary GET*, monitor, confirm */
#define PERM_WRITE 0x2u         /* set/add, ms, binary SET/ADD, delete, flush */
#define PERM_ADMIN 0x4u         /* flush_all, status changes, shutdown,
                                 * verbosity, every queue's stats */

/* One queues=PATTERN: a queue name, or a prefix when it ended in '*'. */
struct perm_pat {
	const char *p;
	size_t len;
	bool prefix;
};

struct perms {
	const char *user;           /* for the log */
	unsigned rights;            /* PERM_* */
	size_t npat;                /* 0: every queue */
	struct perm_pat *pat;
	char *buf;                  /* the patterns' bytes */
};

/* The rights of a user removed from the --auth-file by a reload: none. */
extern const struct perms perms_revoked;

/*
 * Parse a permissions field ("queues=jobs*,read"; empty: every queue, read
 * and write) into *p, which the caller zeroed; p->user is left alone.  0,
 * or -1 with the reason in err (an unknown word, a bad pattern, no memory).
 */
int perms_parse(const char *text, size_t len, struct perms *p, char *err,
    size_t errlen);
/* Free what perms_parse() allocated. */
void perms_free(struct perms *p);

/* May the user use queue `name` at all (its patterns)? */
bool perms_queue_ok(const struct perms *p, const char *name, size_t len);

/* May the user do `need` (PERM_READ or PERM_WRITE) on queue `name`? */
static inline bool
perms_allow(const struct perms *p, const char *name, size_t len, unsigned need)
{
	return (p->rights & need) == need && perms_queue_ok(p, name, len);
}

/* Should the user see queue `name` in stats (admin: every queue)? */
static inline bool
perms_sees(const struct perms *p, const char *name, size_t len)
{
	return p == NULL || (p->rights & PERM_ADMIN) != 0 ||
	    (p->rights != 0 && perms_queue_ok(p, name, len));
}

#endif
