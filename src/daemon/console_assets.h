/* console_assets.h -- the console's page, script and style, compiled into
 * sakerd (console_assets.c is made from src/daemon/console/ by
 * src/daemon/console/embed.sh and committed; tests/check_assets.sh
 * checks it is up to date). */
#ifndef SAKER_CONSOLE_ASSETS_H
#define SAKER_CONSOLE_ASSETS_H

#include <stddef.h>

struct console_asset {
	const char *path;            /* "/index.html", "/console.js" */
	const char *type;            /* Content-Type */
	const unsigned char *data;
	size_t len;
};

/* The asset served at path, or NULL. */
const struct console_asset *console_asset(const char *path);

#endif
