/* log.c -- one line per event: time, level, message. Never item data. */
#include "config.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <syslog.h>
#include <time.h>
#include <unistd.h>

#include "log.h"

static int level = LOG_LVL_WARN;
static FILE *out;            /* NULL = stderr */
static char *path;           /* file target, for reopen */
static int use_syslog;

static const char *const names[] = { "error", "warn", "info", "debug" };

int
log_open(const char *target)
{
	if (target == NULL || strcmp(target, "stderr") == 0)
		return 0;
	if (strcmp(target, "syslog") == 0) {
		openlog("sakerd", LOG_PID | LOG_NDELAY, LOG_DAEMON);
		use_syslog = 1;
		return 0;
	}
	free(path);
	path = strdup(target);
	if (path == NULL)
		return -1;
	out = fopen(path, "a");
	if (out == NULL)
		return -1;
	setvbuf(out, NULL, _IOLBF, 0);
	return 0;
}

void
log_reopen(void)
{
	FILE *f;

	if (path == NULL)
		return;
	f = fopen(path, "a");
	if (f == NULL) {
		log_error("cannot reopen log %s: %s", path, strerror(errno));
		return;
	}
	setvbuf(f, NULL, _IOLBF, 0);
	if (out != NULL)
		fclose(out);
	out = f;
}

void
log_set_level(int l)
{
	level = l < LOG_LVL_ERROR ? LOG_LVL_ERROR : l > LOG_LVL_DEBUG ? LOG_LVL_DEBUG : l;
}

int
log_is_stderr(void)
{
	return !use_syslog && out == NULL;
}

int
log_get_level(void)
{
	return level;
}

static void
log_vmsg(int prio, const char *name, const char *fmt, va_list ap)
{
	char msg[1024], stamp[32];
	struct timespec ts;
	struct tm tm;

	vsnprintf(msg, sizeof(msg), fmt, ap);
	if (use_syslog) {
		syslog(prio, "%s", msg);
		return;
	}
	clock_gettime(CLOCK_REALTIME, &ts);
	gmtime_r(&ts.tv_sec, &tm);
	strftime(stamp, sizeof(stamp), "%Y-%m-%dT%H:%M:%S", &tm);
	fprintf(out != NULL ? out : stderr, "%s.%03ldZ sakerd[%ld] %s: %s\n", stamp,
	    ts.tv_nsec / 1000000, (long)getpid(), name, msg);
}

void
log_msg(enum log_level lvl, const char *fmt, ...)
{
	static const int prio[] = { LOG_ERR, LOG_WARNING, LOG_INFO, LOG_DEBUG };
	va_list ap;

	if ((int)lvl > level)
		return;
	va_start(ap, fmt);
	log_vmsg(prio[lvl], names[lvl], fmt, ap);
	va_end(ap);
}

void
log_notice(const char *fmt, ...)
{
	va_list ap;

	if (level < LOG_LVL_WARN)
		return;
	va_start(ap, fmt);
	log_vmsg(LOG_NOTICE, "notice", fmt, ap);
	va_end(ap);
}
