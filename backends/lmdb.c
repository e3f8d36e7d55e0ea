/* placeholder: being written */
#include "config.h"
#include "saker/store.h"
const struct saker_store_driver saker_store_lmdb = { .name = "lmdb", .location_help = "DIR", .durable = true };
