/* report.h -- the `stats` reply. */
#ifndef SAKER_REPORT_H
#define SAKER_REPORT_H

#include "broker.h"

struct evbuffer;

/* Append the STAT lines and END for the `stats` command. */
void stats_write(struct broker *b, struct evbuffer *out);

#endif
