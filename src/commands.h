/* commands.h -- running parsed commands against the store and the queues. */
#ifndef SAKER_COMMANDS_H
#define SAKER_COMMANDS_H

#include <stddef.h>

#include "conn.h"
#include "proto_text.h"

/* Run one parsed command for c.  `line` is the command line (keys point
 * into it); `data` the set's data block (cmd->bytes long) or NULL. */
void cmd_execute(struct conn *c, struct proto_cmd *cmd, const char *line,
    size_t linelen, const char *data);

/* Hand items of q to its waiters, first come first served. */
void cmd_serve_waiters(struct squeue *q);

#endif
