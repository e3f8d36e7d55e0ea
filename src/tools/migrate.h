/* migrate.h -- `saker migrate`: copy every queue of one store into a new
 * store of another type (or the same), verified; the engine is
 * migrate_copy.h. */
#ifndef SAKER_MIGRATE_H
#define SAKER_MIGRATE_H

int migrate_main(int argc, char **argv);

#endif
