/* check_cmd.h -- `saker check SPEC`: verify a store offline. */
#ifndef SAKER_CHECK_CMD_H
#define SAKER_CHECK_CMD_H

/* Exit status: 0 the store is sound, 1 damaged or unreadable, 2 usage. */
int check_main(int argc, char **argv);

#endif
