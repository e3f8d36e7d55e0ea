/* console_assets.h -- the console's page, script and style, compiled into
 * sakerd (console_assets.c is generated in the build tree from
 * src/daemon/console/ by src/daemon/console/embed.sh; Makefile.am). */
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
