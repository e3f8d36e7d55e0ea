/* migrate_progress.h -- progress of a copy: the meter line on stderr
 * (shared with dump) and the summary of a finished target. */
#ifndef SAKER_MIGRATE_PROGRESS_H
#define SAKER_MIGRATE_PROGRESS_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "migrate_int.h"

void mig_meter_start(struct mig_meter *m, enum mig_progress_mode mode);
void mig_meter_add(struct mig_meter *m, uint64_t bytes);
void mig_meter_end(struct mig_meter *m);
void mig_human_bytes(char *buf, size_t len, uint64_t bytes);

/* Progress: the items expected (0 = unknown). */
void mig_target_set_totals(struct mig_target *t, uint64_t items);
/* One line per queue copied from the source, then a total line starting
 * with `verb` ("migrated", "loaded"). */
void mig_target_summary(struct mig_target *t, FILE *fp, const char *verb);

#endif
