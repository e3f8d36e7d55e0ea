/* log.h -- leveled, timestamped log lines to stderr, a file or syslog. */
#ifndef SAKER_LOG_H
#define SAKER_LOG_H

enum log_level { LOG_LVL_ERROR = 0, LOG_LVL_WARN, LOG_LVL_INFO, LOG_LVL_DEBUG };

/* target: NULL or "stderr", "syslog", or a file path. 0 or -1 (errno). */
int log_open(const char *target);
/* Reopen the log file (SIGHUP; after rotation). */
void log_reopen(void);
void log_set_level(int level);
/* 1 when log lines go to stderr. */
int log_is_stderr(void);
int log_get_level(void);
void log_msg(enum log_level lvl, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* Said at the default level (warn) and above, without being a warning:
 * the one startup line. */
void log_notice(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

#define log_error(...) log_msg(LOG_LVL_ERROR, __VA_ARGS__)
#define log_warn(...)  log_msg(LOG_LVL_WARN, __VA_ARGS__)
#define log_info(...)  log_msg(LOG_LVL_INFO, __VA_ARGS__)
#define log_debug(...) log_msg(LOG_LVL_DEBUG, __VA_ARGS__)

#endif
