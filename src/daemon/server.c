/* server.c -- sakerd's event loop around the broker: listeners, the
 * per-turn commit and flush, the timers the broker asks for, periodic
 * sync, signals, start and stop. */
#include "config.h"

#include <errno.h>
#include <inttypes.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <grp.h>
#include <pwd.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <event2/listener.h>
#include <event2/util.h>

#include "auth.h"
#include "batch.h"
#include "clock.h"
#include "conn.h"
#include "history.h"
#include "http.h"
#include "log.h"
#include "proto_text.h"
#include "queues.h"
#include "server.h"
#include "tls.h"

static struct server the_server;
struct server *srv = &the_server;

static void
schedule_commit(struct broker *b)
{
	srv->commit_scheduled = true;
}

static void arm_promote(struct broker *b, int64_t due_ms);
static void arm_open_timeout(struct broker *b, int64_t deadline_ms);

static void server_stop(struct broker *b);

static const struct broker_hooks hooks = {
	.schedule_commit = schedule_commit,
	.schedule_flush = conn_schedule_flush,
	.arm_promote = arm_promote,
	.arm_open_timeout = arm_open_timeout,
	.wait_start = conn_wait_start,
	.wait_end = conn_wait_end,
	.close = conn_hook_close,
	.close_after_write = conn_hook_close_after_write,
	.stop = server_stop,
	.login_admit = conn_login_admit,
	.login_failed = conn_login_failed,
	.login_ok = conn_login_ok,
	.reply_keep = pstate_keep,
	.reply_cut = pstate_cut,
	.peer = conn_peer,
};

void
server_drain(void)
{
	if (srv->draining)
		return;
	srv->draining = true;
	for (;;) {
		if (!TAILQ_EMPTY(&srv->broker.ready))
			broker_serve_ready(&srv->broker);
		else if (!conn_resume_one())
			break;
	}
	srv->draining = false;
}

/* The batch in flight has its result (or one is needed now: the flight
 * is waited for): its connections get their replies; when it failed, the
 * batch gathered on top of it fails with it (store.h, ASYNCHRONOUS
 * COMMIT), and its connections get the same error. */
static void
flight_done(void)
{
	struct commit_result res;

	if (!srv->broker.inflight)
		return;
	if (srv->flight_ev != NULL)
		event_del(srv->flight_ev);
	if (broker_commit_finish(&srv->broker, &res))
		conn_flush_flight(&res);
	else {
		conn_flush_flight(&res);
		broker_fail_batch(&srv->broker);
		conn_flush_batch(&res);
	}
	server_drain();
}

/* How long the batch that gathered during a flight waits for the
 * flight's clients, just answered, to join it: about a round trip on a
 * local network.  Without it the clients split into two cohorts taking
 * turns, each fsync carrying half of them (docs/design.md). */
#define GATHER_US 300

static void
gather_cb(evutil_socket_t fd, short what, void *arg)
{
	srv->gathering = false;
	if (srv->broker.dirty || !conn_batch_empty())
		srv->commit_scheduled = true;
}

static void
flight_cb(evutil_socket_t fd, short what, void *arg)
{
	struct timeval tv = { 0, GATHER_US };

	flight_done();
	if (srv->gather_ev == NULL)
		srv->gather_ev = evtimer_new(srv->base, gather_cb, NULL);
	if (srv->gather_ev != NULL && evtimer_add(srv->gather_ev, &tv) == 0)
		srv->gathering = true;
	else
		gather_cb(-1, 0, NULL);
}

/* Watch the store's commit descriptor for the batch just put in flight. */
static bool
flight_watch(void)
{
	int fd = saker_store_commit_fd(srv->broker.store);

	if (fd < 0)
		return false;
	if (srv->flight_ev != NULL && event_get_fd(srv->flight_ev) != fd) {
		event_free(srv->flight_ev);
		srv->flight_ev = NULL;
	}
	if (srv->flight_ev == NULL &&
	    (srv->flight_ev = event_new(srv->base, fd, EV_READ, flight_cb,
	    NULL)) == NULL)
		return false;
	return event_add(srv->flight_ev, NULL) == 0;
}

/* Commits the store's completed batch; once it is durable (or failed)
 * every connection in the batch gets its replies.  At the end of a turn
 * a batch that wrote may go in flight instead (broker_commit_start()),
 * its replies held until flight_cb(); while one is in flight the next
 * gathers, and a batch that wrote nothing is answered at once.  The
 * console's POSTs call it too, to commit now so the reply tells the
 * outcome (the same commit as at the end of this turn, only earlier):
 * they, and a stop, wait for the batch in flight first. */
bool
server_commit_now(char *why, size_t len)
{
	struct commit_result res;
	bool now = why != NULL || srv->stopping;

	srv->commit_scheduled = false;
	if ((srv->broker.inflight || srv->gathering) && !now &&
	    srv->broker.dirty) {
		/* flight_cb() commits it; who wrote nothing is answered */
		conn_flush_unwritten();
		server_drain();
		return true;
	}
	if (srv->broker.inflight && now)
		flight_done();
	if (now || srv->broker.inflight)
		broker_commit(&srv->broker, &res);	/* (one that wrote nothing) */
	else if (broker_commit_start(&srv->broker, &res)) {
		conn_batch_to_flight();
		if (!flight_watch()) {
			/* no way to hear of it: wait for it here */
			log_warn("cannot watch the store's commit; waiting");
			flight_done();
		}
		return true;
	}
	/* else committed synchronously: res is its result */
	conn_flush_batch(&res);
	server_drain();
	if (srv->stopping)
		srv->loop_done = true;
	if (!res.ok)
		snprintf(why, len, "commit failed: %s", res.reason);
	return res.ok;
}

/* --- delayed items ------------------------------------------------------ */

/* Arm ev to fire when wall-clock millisecond at_ms begins, unless it is
 * armed (*armed_at, 0 = unarmed) for that time or earlier.  The delay is
 * taken in microseconds: from a truncated `now` in milliseconds the timer
 * would fire up to 1 ms after at_ms. */
static void
arm_at_ms(struct event *ev, int64_t *armed_at, int64_t at_ms)
{
	struct timeval tv;
	int64_t delay;

	if (*armed_at != 0 && *armed_at <= at_ms)
		return;
	*armed_at = at_ms;
	delay = at_ms * 1000 - saker_now_us();
	if (delay < 0)
		delay = 0;
	tv.tv_sec = delay / 1000000;
	tv.tv_usec = delay % 1000000;
	evtimer_add(ev, &tv);
}

static void
arm_promote(struct broker *b, int64_t due_ms)
{
	if (due_ms > 0)
		arm_at_ms(srv->promote_ev, &srv->promote_at, due_ms);
}

/* Return open items held past their queue's open_timeout. */
static void
arm_open_timeout(struct broker *b, int64_t deadline_ms)
{
	arm_at_ms(srv->open_timeout_ev, &srv->open_timeout_at, deadline_ms);
}

/* What a timer or the store's descriptor runs on the broker, then serves
 * whoever it made ready. */
struct loop_job {
	void (*run)(struct broker *b);
	int64_t *armed_at;      /* the deadline it was armed for, cleared */
	bool watch_store_fd;    /* the driver may have changed its descriptor */
};

static const struct loop_job promote_job = { broker_promote,
    &the_server.promote_at, false };
static const struct loop_job open_timeout_job = { broker_expire_opens,
    &the_server.open_timeout_at, false };
static const struct loop_job store_fd_job = { broker_store_ready, NULL, true };
static const struct loop_job tick_job = { broker_tick, NULL, true };

static void watch_store_fd(void);

static void
job_cb(evutil_socket_t fd, short what, void *arg)
{
	const struct loop_job *job = arg;

	if (job->armed_at != NULL)
		*job->armed_at = 0;
	job->run(&srv->broker);
	if (job->watch_store_fd)
		watch_store_fd();
	server_drain();
}

static void
sweep_cb(evutil_socket_t fd, short what, void *arg)
{
	broker_sweep(&srv->broker);
}

/* --- drivers shared with other processes -------------------------------- */

/* (Re-)register the driver's descriptor when it changed. */
static void
watch_store_fd(void)
{
	int fd;

	fd = saker_store_watch_fd(srv->broker.store);
	if (fd == srv->store_fd && (fd < 0 || srv->store_fd_ev != NULL))
		return;
	if (srv->store_fd_ev != NULL) {
		event_free(srv->store_fd_ev);
		srv->store_fd_ev = NULL;
	}
	srv->store_fd = fd;
	if (fd >= 0) {
		srv->store_fd_ev = event_new(srv->base, fd, EV_READ | EV_PERSIST,
		    job_cb, (void *)&store_fd_job);
		if (srv->store_fd_ev != NULL)
			event_add(srv->store_fd_ev, NULL);
	}
}

static int
load_config(void)
{
	if (broker_load_config(&srv->broker, srv->opt->config_path,
	    srv->opt->max_open) != 0)
		return -1;
	/* the store learns every queue's expire_to before the next sweep */
	queues_apply_config(&srv->broker);
	return 0;
}

static void
sync_cb(evutil_socket_t fd, short what, void *arg)
{
	if (saker_store_sync(srv->broker.store) != SAKER_OK)
		log_error("periodic sync failed: %s", saker_store_errmsg(srv->broker.store));
}

/* --- listening ---------------------------------------------------------- */

static void
accept_cb(struct evconnlistener *l, evutil_socket_t fd, struct sockaddr *sa,
    int salen, void *arg)
{
	static const char too_many[] = "SERVER_ERROR too many open connections\r\n";
	struct conn *c;
	int one = 1;
	bool tcp = sa->sa_family == AF_INET || sa->sa_family == AF_INET6;

	/* -c counts the --http connections too */
	if (srv->stopping || srv->broker.stats.curr_connections + http_connections() >=
	    (uint64_t)srv->opt->max_conns) {
		/* a TLS client could not read the plain-text line */
		if (!(tcp && tls_on())) {
			ssize_t w = write(fd, too_many, sizeof(too_many) - 1);
			(void)w;
		}
		srv->broker.stats.rejected_connections++;
		close(fd);
		return;
	}
	if (tcp)
		setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	evutil_make_socket_nonblocking(fd);
	/* --tls-cert covers the TCP listener; the Unix socket stays plain
	 * (its file permissions guard it) */
	c = conn_new(fd, tcp && tls_on());
	if (c == NULL) {
		log_error("out of memory accepting a connection");
		close(fd);
	}
}

static void
accept_error_cb(struct evconnlistener *l, void *arg)
{
	int err = EVUTIL_SOCKET_ERROR();

	if (err == EMFILE || err == ENFILE || err == ENOBUFS || err == ENOMEM) {
		log_warn("accept: %s; pausing accepts for 100 ms",
		    evutil_socket_error_to_string(err));
		http_pause_accepts(l);
		return;
	}
	log_warn("accept: %s", evutil_socket_error_to_string(err));
}

/*
 * The listeners are bound early (a privileged port needs root, which is
 * dropped before the store opens) but listen only once the store is open
 * and its queues loaded (start_listening()): until then a client's
 * connect is refused, as if the server were not there.  On 8fecbcd a
 * client could be accepted and then reset when the store failed its
 * checks after the port was listening (issue 35).
 */
static int
bind_tcp(void)
{
	struct sockaddr_storage ss;
	int sslen = sizeof(ss), fd, one = 1;
	char addr[300];

	if (srv->opt->port == 0)
		return 0;
	/* evutil parses "1.2.3.4:port" and "[::1]:port" */
	if (strchr(srv->opt->listen, ':') != NULL && srv->opt->listen[0] != '[')
		snprintf(addr, sizeof(addr), "[%s]:%d", srv->opt->listen, srv->opt->port);
	else
		snprintf(addr, sizeof(addr), "%s:%d", srv->opt->listen, srv->opt->port);
	if (evutil_parse_sockaddr_port(addr, (struct sockaddr *)&ss, &sslen) != 0) {
		log_error("cannot parse listen address '%s'", srv->opt->listen);
		return -1;
	}
	fd = socket(ss.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0 || setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one,
	    sizeof(one)) != 0 || bind(fd, (struct sockaddr *)&ss,
	    (socklen_t)sslen) != 0) {
		log_error("cannot listen on %s: %s", addr, strerror(errno));
		if (fd >= 0)
			close(fd);
		return -1;
	}
	srv->listen_fd[0] = fd;
	snprintf(srv->listen_name[0], sizeof(srv->listen_name[0]), "%s", addr);
	return 0;
}

static int
bind_unix(void)
{
	struct sockaddr_un sun;
	const char *path = srv->opt->unix_socket;
	int fd;

	if (path == NULL)
		return 0;
	if (strlen(path) >= sizeof(sun.sun_path)) {
		log_error("unix socket path too long: %s", path);
		return -1;
	}
	memset(&sun, 0, sizeof(sun));
	sun.sun_family = AF_UNIX;
	strcpy(sun.sun_path, path);
	unlink(path);
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0 || bind(fd, (struct sockaddr *)&sun, sizeof(sun)) != 0) {
		log_error("cannot listen on %s: %s", path, strerror(errno));
		if (fd >= 0)
			close(fd);
		return -1;
	}
	srv->listen_fd[1] = fd;
	snprintf(srv->listen_name[1], sizeof(srv->listen_name[1]), "%s", path);
	return 0;
}

/* The store is open: accept clients (--http first, so that once the
 * memcache port accepts every listener is up). */
static int
start_listening(void)
{
	int i;

	if (srv->http != NULL && http_listen(srv->http) != 0)
		return -1;
	for (i = 0; i < 2; i++) {
		if (srv->listen_fd[i] < 0)
			continue;
		srv->listeners[i] = evconnlistener_new(srv->base, accept_cb, NULL,
		    LEV_OPT_CLOSE_ON_FREE | LEV_OPT_CLOSE_ON_EXEC, 1024,
		    srv->listen_fd[i]);
		if (srv->listeners[i] == NULL) {
			log_error("cannot listen on %s: %s", srv->listen_name[i],
			    strerror(errno));
			return -1;
		}
		srv->listen_fd[i] = -1;     /* the listener owns it */
		evconnlistener_set_error_cb(srv->listeners[i], accept_error_cb);
		log_info("listening on %s", srv->listen_name[i]);
	}
	return 0;
}

/*
 * The one line said at startup at the default log level: what runs, where
 * clients reach it and which data it serves.  A relative store location is
 * shown resolved; a PostgreSQL conninfo is not shown (it may hold a
 * password).
 */
static void
say_ready(const struct options *opt)
{
	const char *spec = opt->store_spec, *colon = strchr(spec, ':');
	const struct saker_store_driver *drv = saker_store_spec_driver(spec);
	const char *tcp = srv->listen_name[0];  /* "" without a TCP port */
	char cwd[4096], *where = NULL;
	const char *sync = opt->sync == SAKER_SYNC_ALWAYS ? "always" :
	    opt->sync == SAKER_SYNC_PERIODIC ? "periodic" : "never";

	/* a connection string may hold a password: not for the log */
	if (colon != NULL && drv != NULL &&
	    drv->location == SAKER_LOCATION_SECRET)
		where = strdup(drv->name);
	else if (colon != NULL && colon[1] != '/' && colon[1] != '\0' &&
	    getcwd(cwd, sizeof(cwd)) != NULL) {
		size_t tl = (size_t)(colon - spec), n;

		n = tl + strlen(cwd) + strlen(colon) + 2;
		where = malloc(n);
		if (where != NULL)
			/* started in "/": "lmdb:/saker-data", not "lmdb://..." */
			snprintf(where, n, "%.*s:%s/%s", (int)tl, spec,
			    strcmp(cwd, "/") == 0 ? "" : cwd,
			    colon[1] == '.' && colon[2] == '/' ? colon + 3 : colon + 1);
	}
	log_notice("sakerd %s serving %s%s%s%s, store %s, sync %s",
	    PACKAGE_VERSION, tcp, tcp[0] != '\0' && opt->unix_socket != NULL ?
	    " and " : "", opt->unix_socket != NULL ? "unix:" : "",
	    opt->unix_socket != NULL ? opt->unix_socket : "",
	    where != NULL ? where : spec, sync);
	free(where);
}

static void
close_listeners(void)
{
	int i;

	for (i = 0; i < 2; i++) {
		if (srv->listeners[i] != NULL) {
			evconnlistener_free(srv->listeners[i]);
			srv->listeners[i] = NULL;
		}
		if (srv->listen_fd[i] >= 0) {
			close(srv->listen_fd[i]);
			srv->listen_fd[i] = -1;
		}
	}
	if (srv->opt->unix_socket != NULL)
		unlink(srv->opt->unix_socket);
}

/* --- signals and stopping ---------------------------------------------- */

/* Begin a graceful stop (the shutdown command, signals). */
static void
server_stop(struct broker *b)
{
	if (srv->stopping)
		return;
	srv->stopping = true;
	close_listeners();
	http_stop(srv->http);
	srv->http = NULL;
	/* the commit finishes this turn's work, then ends the loop */
	srv->commit_scheduled = true;
}

static void
signal_cb(evutil_socket_t sig, short what, void *arg)
{
	if (sig == SIGHUP) {
		log_info("SIGHUP: reopening the log and rereading the config");
		log_reopen();
		if (srv->opt->config_path != NULL && load_config() != 0)
			log_error("keeping the previous configuration");
		auth_reload(&srv->broker);
		tls_reload();
		/* counted last: a script that saw it grow sees the new files */
		srv->broker.stats.reloads++;
		return;
	}
	log_info("signal %d: stopping", (int)sig);
	server_stop(&srv->broker);
}

static void
shutdown_everything(void)
{
	int i, rc;

	/* last replies, best effort, then close: open items go back, to
	 * the head as after a crash (no retry_backoff) */
	srv->broker.closing = true;
	conn_close_all();
	/* the driver closes its descriptor: stop watching it first */
	if (srv->store_fd_ev != NULL) {
		event_free(srv->store_fd_ev);
		srv->store_fd_ev = NULL;
	}
	if (srv->flight_ev != NULL) {
		event_free(srv->flight_ev);
		srv->flight_ev = NULL;
	}
	if (srv->gather_ev != NULL) {
		event_free(srv->gather_ev);
		srv->gather_ev = NULL;
	}
	if (srv->broker.store != NULL) {
		rc = saker_store_commit(srv->broker.store);
		if (rc != SAKER_OK)
			log_error("final commit failed: %s",
			    saker_store_errmsg(srv->broker.store));
		saker_store_close(srv->broker.store);
		srv->broker.store = NULL;
	}
	queues_free(&srv->broker);
	for (i = 0; i < 4; i++)
		if (srv->sig_ev[i] != NULL)
			event_free(srv->sig_ev[i]);
	if (srv->sync_ev != NULL)
		event_free(srv->sync_ev);
	if (srv->tick_ev != NULL)
		event_free(srv->tick_ev);
	srv->sync_ev = srv->tick_ev = NULL;
	http_stop(srv->http);
	srv->http = NULL;
	history_stop();
	tls_teardown();
	config_free(srv->broker.config);
	srv->broker.config = NULL;
	auth_free(srv->broker.auth);
	srv->broker.auth = NULL;
	free(srv->broker.proto);
	srv->broker.proto = NULL;
	if (srv->base == NULL)
		return;
	event_free(srv->sweep_ev);
	event_free(srv->open_timeout_ev);
	event_free(srv->promote_ev);
	event_base_free(srv->base);
	srv->base = NULL;
}

/* Give up root for `user` once the sockets are bound. */
static int
drop_privileges(const char *user)
{
	struct passwd *pw;

	if (user == NULL)
		return 0;
	pw = getpwnam(user);
	if (pw == NULL) {
		log_error("-u %s: no such user", user);
		return -1;
	}
	if (getuid() != 0) {
		if (getuid() == pw->pw_uid)
			return 0;
		log_error("-u %s: only root can switch users", user);
		return -1;
	}
	if (initgroups(pw->pw_name, pw->pw_gid) != 0 || setgid(pw->pw_gid) != 0 ||
	    setuid(pw->pw_uid) != 0) {
		log_error("-u %s: cannot switch user: %s", user, strerror(errno));
		return -1;
	}
	log_info("running as user %s", user);
	return 0;
}

int
server_init(struct options *opt)
{
	static const int sigs[4] = { SIGTERM, SIGINT, SIGHUP, 0 };
	static const struct timeval sweep_every = { 5, 0 }, tick_every = { 1, 0 };
	struct saker_store_opts so;
	char err[512], maxmem[48];
	const char *drvopts[2] = { NULL, NULL };
	int i, rc;

	broker_init(&srv->broker, &hooks);
	srv->broker.queue_ext_free = queue_watch_free;
	srv->listen_fd[0] = srv->listen_fd[1] = -1;
	srv->broker.max_item_size = opt->max_item_size;
	srv->broker.enable_shutdown = opt->enable_shutdown;
	srv->broker.max_queues = opt->max_queues;
	srv->broker.sync = opt->sync;
	srv->broker.async_commit = opt->async_commit;
	srv->broker.auth = opt->auth;
	opt->auth = NULL;
	if ((srv->broker.proto = calloc(1, sizeof(*srv->broker.proto))) == NULL) {
		fprintf(stderr, "sakerd: out of memory\n");
		return 1;
	}
	srv->opt = opt;
	signal(SIGPIPE, SIG_IGN);

	if (load_config() != 0) {
		fprintf(stderr, "sakerd: bad --config; see the log above\n");
		return 1;
	}
	/* A precise timer (timerfd under epoll) lets delayed items and
	 * blocking timeouts fire within a millisecond rather than on
	 * epoll_wait's rounded timeout. */
	{
		struct event_config *cfg = event_config_new();

		if (cfg != NULL) {
			event_config_set_flag(cfg, EVENT_BASE_FLAG_PRECISE_TIMER);
			srv->base = event_base_new_with_config(cfg);
			event_config_free(cfg);
		}
	}
	if (srv->base == NULL) {
		fprintf(stderr, "sakerd: cannot create the event loop\n");
		return 1;
	}
	{
		struct conn_env env = { srv->base, &srv->broker, NULL,
		    opt->idle_timeout_ms, opt->max_conn_memory, opt->drain_timeout_ms,
		    opt->tls_handshake_ms, opt->max_conns / 4 > 0 ?
		    (unsigned)opt->max_conns / 4 : 1, server_drain };

		if (opt->idle_timeout_ms > 0) {
			/* one timeout shared by every connection: O(1) timer
			 * queue */
			struct timeval tv = { opt->idle_timeout_ms / 1000,
			    (opt->idle_timeout_ms % 1000) * 1000 };
			env.idle_tv = event_base_init_common_timeout(srv->base, &tv);
		}
		conn_setup(&env);
	}
	srv->promote_ev = evtimer_new(srv->base, job_cb, (void *)&promote_job);
	srv->open_timeout_ev = evtimer_new(srv->base, job_cb, (void *)&open_timeout_job);
	srv->sweep_ev = event_new(srv->base, -1, EV_PERSIST, sweep_cb, NULL);
	event_add(srv->sweep_ev, &sweep_every);
	for (i = 0; sigs[i] != 0; i++) {
		srv->sig_ev[i] = evsignal_new(srv->base, sigs[i], signal_cb, NULL);
		event_add(srv->sig_ev[i], NULL);
	}
	if (opt->sync == SAKER_SYNC_PERIODIC) {
		struct timeval tv = { opt->sync_period_ms / 1000,
		    (opt->sync_period_ms % 1000) * 1000 };
		srv->sync_ev = event_new(srv->base, -1, EV_PERSIST, sync_cb, NULL);
		event_add(srv->sync_ev, &tv);
	}
	/* bind first (privileged ports), then drop root, then open the store
	 * so its files belong to the service user */
	if (opt->tls_cert != NULL &&
	    tls_setup(opt->tls_cert, opt->tls_key, opt->tls_ca) != 0) {
		fprintf(stderr, "sakerd: cannot set up TLS; see the log above\n");
		return 1;
	}
	/* bound now, listening once the store is open (start_listening()) */
	if ((opt->http != NULL && (srv->http = http_start(srv->base, opt->http, &srv->broker,
	    opt->metrics_max_queues, &srv->stopping,
	    srv->broker.auth != NULL && !opt->http_public, opt->max_conns, server_commit_now)) == NULL) ||
	    bind_tcp() != 0 || bind_unix() != 0) {
		fprintf(stderr, "sakerd: cannot listen; see the log above\n");
		return 1;
	}
	if (srv->http != NULL)
		http_allow_hosts(srv->http, opt->http_hosts, opt->nhttp_hosts);
	http_set_handshake_timeout(opt->tls_handshake_ms);
	http_set_idle_timeout(opt->idle_timeout_ms);
	if (srv->http != NULL &&
	    history_start(srv->base, &srv->broker, opt->http_history_ms) != 0) {
		fprintf(stderr, "sakerd: out of memory\n");
		return 1;
	}
	if (drop_privileges(opt->user) != 0) {
		fprintf(stderr, "sakerd: cannot drop privileges; see the log above\n");
		return 1;
	}
	memset(&so, 0, sizeof(so));
	so.sync = opt->sync;
	/* --max-memory is the memory driver's max-memory option (1.0 had it
	 * as a flag); a "memory,max-memory=" in the spec wins over it */
	if (opt->max_memory_set) {
		snprintf(maxmem, sizeof(maxmem), "max-memory=%" PRIu64,
		    opt->max_memory);
		drvopts[0] = maxmem;
		so.driver_opts = drvopts;
	}
	so.max_item = opt->max_item_size;
	so.create = true;
	so.notify = queues_notify;
	so.notify_arg = &srv->broker;
	/* the store's file or conninfo stays in the log, out of replies */
	if (strchr(opt->store_spec, ':') != NULL)
		srv->broker.store_location = strchr(opt->store_spec, ':') + 1;
	rc = saker_store_open(opt->store_spec, &so, &srv->broker.store, err, sizeof(err));
	if (rc != SAKER_OK) {
		fprintf(stderr, "sakerd: --store %s: %s\n", opt->store_spec, err);
		return 1;
	}
	rc = queues_load(&srv->broker);
	if (rc != SAKER_OK) {
		fprintf(stderr, "sakerd: loading queues: %s\n", saker_strerror(rc));
		return 1;
	}
	if (opt->max_queues > 0 && srv->broker.nqueues > opt->max_queues)
		log_warn("the store has %zu queues, more than --max-queues %zu: "
		    "they all work, new ones are refused", srv->broker.nqueues,
		    opt->max_queues);
	/* items that fell due while we were down are promoted now, in order */
	broker_promote(&srv->broker);
	srv->store_fd = -1;
	watch_store_fd();
	if (saker_store_needs_tick(srv->broker.store)) {
		srv->tick_ev = event_new(srv->base, -1, EV_PERSIST, job_cb, (void *)&tick_job);
		event_add(srv->tick_ev, &tick_every);
	}
	if (start_listening() != 0) {
		fprintf(stderr, "sakerd: cannot listen; see the log above\n");
		return 1;
	}
	say_ready(opt);
	return 0;
}

/*
 * One turn: wait for events (unless `block` is false or a batch is still
 * pending), run every callback that is ready -- all the reads of this turn
 * -- then commit the batch once and send its replies.  libevent has no
 * "before sleep" hook; returning from the loop after one pass is it, and
 * costs no extra epoll_wait (a low-priority commit event cost one more
 * epoll_wait and timerfd_settime per batch).
 *
 * One pass, whatever arrives meanwhile: the base has a single priority
 * and both modes carry EVLOOP_ONCE.  libevent's loop goes on while any
 * event is still active, and runs only the highest priority that has one
 * per pass; with two priorities (connections and the promotion timer
 * above the rest) a stream of reads (a noreply producer) or a promotion
 * timer that fell due again during its own callback (a postgres promotion
 * costs a round trip) starved the listener, the tick or the store's
 * notifications, and while one of them stayed active the loop never
 * returned: no commit, and every other client's reply waited, for
 * seconds (tests/check_server.c, test_stream_does_not_hold_commits).
 */
void
server_turn(bool block)
{
	uint64_t t0 = 0, cpu0 = 0, wait0 = 0;

	/* -vv: a turn that ran, or waited for a CPU, 10 ms or more is logged
	 * with the two apart (issue 25's evidence; time asleep, in epoll or
	 * in I/O such as a commit's fsync, is not counted: commits are logged
	 * by the core) */
	if (log_get_level() >= LOG_LVL_DEBUG &&
	    saker_thread_sched(&cpu0, &wait0) == 0)
		t0 = saker_mono_ns();
	event_base_loop(srv->base, block && !srv->commit_scheduled ?
	    EVLOOP_ONCE : EVLOOP_ONCE | EVLOOP_NONBLOCK);
	if (srv->commit_scheduled)
		(void)server_commit_now(NULL, 0);
	if (t0 != 0) {
		uint64_t cpu, wait;

		if (saker_thread_sched(&cpu, &wait) == 0 &&
		    (cpu - cpu0) + (wait - wait0) >= 10000000u)
			log_debug("slow turn: %" PRIu64 " us on the CPU, %" PRIu64
			    " us waiting for a CPU (turn %" PRIu64 " us)",
			    (cpu - cpu0) / 1000, (wait - wait0) / 1000,
			    (saker_mono_ns() - t0) / 1000);
	}
}

void
server_loop(void)
{
	while (!srv->loop_done)
		server_turn(true);
	log_info("stopping: closing %llu connections and the store",
	    (unsigned long long)srv->broker.stats.curr_connections);
}

void
server_exit(void)
{
	close_listeners();
	shutdown_everything();
}
