/* qname.h -- queue-name rules (docs/protocol.md, "Queue names"). */
#ifndef SAKER_QNAME_H
#define SAKER_QNAME_H
#include <stdbool.h>
#include <stddef.h>

#define SAKER_QNAME_MAX 250

/* 1..250 bytes of printable ASCII other than space, '/' and '*', not
 * starting with '.'. */
bool saker_qname_valid(const char *name, size_t len);
/* The same but '*' allowed: names of queues made before '*' was refused
 * (issue 35), which stores and dumps may still hold and which a dump,
 * a load or a migration carries over. */
bool saker_qname_stored_ok(const char *name, size_t len);

/* For a fanout child "parent+child", the length of "parent"; 0 when the name
 * has no '+' (or starts with it). */
size_t saker_qname_parent_len(const char *name, size_t len);

#endif
