/* tcpproxy.c -- a TCP proxy for tests that fail the network on demand. */
#include "config.h"

#include <sys/socket.h>
#include <sys/un.h>

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tcpproxy.h"

#define TP_MAX 64	/* connection pairs; more are closed at once */

struct tcpproxy {
	char path[108];
	int port;
	int lfd;		/* listening, or -1 while refusing */
	int wake[2];		/* a byte here: the mode changed, or stop */
	int a[TP_MAX], b[TP_MAX];	/* client side, server side; -1 free */
	pthread_t th;
	pthread_mutex_t mu;
	pthread_cond_t cv;
	unsigned gen, seen;	/* mode changes asked for, and applied */
	enum tp_mode mode;
	bool stop;
	unsigned accepted;
};

static int
tp_listen(int port)
{
	struct sockaddr_in sa;
	int fd, one = 1;

	if ((fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0)) < 0)
		return -1;
	(void)setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	memset(&sa, 0, sizeof(sa));
	sa.sin_family = AF_INET;
	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	sa.sin_port = htons((uint16_t)port);
	if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0 ||
	    listen(fd, 16) != 0) {
		close(fd);
		return -1;
	}
	return fd;
}

static void
tp_close_pair(struct tcpproxy *p, int i)
{
	if (p->a[i] >= 0)
		close(p->a[i]);
	if (p->b[i] >= 0)
		close(p->b[i]);
	p->a[i] = p->b[i] = -1;
}

static void
tp_accept(struct tcpproxy *p)
{
	struct sockaddr_un su;
	int c, s, i;

	if ((c = accept4(p->lfd, NULL, NULL, SOCK_CLOEXEC)) < 0)
		return;
	pthread_mutex_lock(&p->mu);
	p->accepted++;
	pthread_mutex_unlock(&p->mu);
	for (i = 0; i < TP_MAX && p->a[i] >= 0; i++)
		;
	memset(&su, 0, sizeof(su));
	su.sun_family = AF_UNIX;
	snprintf(su.sun_path, sizeof(su.sun_path), "%s", p->path);
	if (i == TP_MAX ||
	    (s = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0)) < 0) {
		close(c);
		return;
	}
	/* the server is down: the client sees its connection closed */
	if (connect(s, (struct sockaddr *)&su, sizeof(su)) != 0) {
		close(s);
		close(c);
		return;
	}
	p->a[i] = c;
	p->b[i] = s;
}

/* Copy what one side has to the other; false when the pair is done. */
static bool
tp_copy(int from, int to)
{
	char buf[65536];
	ssize_t n, w, off;

	n = read(from, buf, sizeof(buf));
	if (n <= 0)
		return n < 0 && (errno == EINTR || errno == EAGAIN);
	for (off = 0; off < n; off += w) {
		w = send(to, buf + off, (size_t)(n - off), MSG_NOSIGNAL);
		if (w < 0 && errno == EINTR)
			w = 0;
		else if (w < 0)
			return false;
	}
	return true;
}

static void *
tp_main(void *arg)
{
	struct tcpproxy *p = arg;
	struct pollfd pf[2 + 2 * TP_MAX];
	int idx[2 + 2 * TP_MAX];
	enum tp_mode mode;
	int n, i, k;
	char junk[16];

	for (;;) {
		pthread_mutex_lock(&p->mu);
		mode = p->mode;
		if (p->stop) {
			pthread_mutex_unlock(&p->mu);
			break;
		}
		if (mode == TP_REFUSE) {
			for (i = 0; i < TP_MAX; i++)
				tp_close_pair(p, i);
			if (p->lfd >= 0)
				close(p->lfd);
			p->lfd = -1;
		} else if (p->lfd < 0) {
			p->lfd = tp_listen(p->port);
		}
		/* tp_set_mode() returns once the mode is in force */
		p->seen = p->gen;
		pthread_cond_broadcast(&p->cv);
		pthread_mutex_unlock(&p->mu);
		n = 0;
		pf[n].fd = p->wake[0];
		pf[n].events = POLLIN;
		idx[n++] = -1;
		if (p->lfd >= 0) {
			pf[n].fd = p->lfd;
			pf[n].events = POLLIN;
			idx[n++] = -2;
		}
		for (i = 0; mode == TP_RELAY && i < TP_MAX; i++) {
			if (p->a[i] < 0)
				continue;
			pf[n].fd = p->a[i];
			pf[n].events = POLLIN;
			idx[n++] = i;
			pf[n].fd = p->b[i];
			pf[n].events = POLLIN;
			idx[n++] = TP_MAX + i;
		}
		/* a listener that could not be opened again: retry soon */
		if (poll(pf, (nfds_t)n, p->lfd < 0 && mode != TP_REFUSE ?
		    50 : -1) <= 0)
			continue;
		for (k = 0; k < n; k++) {
			if (pf[k].revents == 0)
				continue;
			if (idx[k] == -1) {
				if (read(p->wake[0], junk, sizeof(junk)) < 0)
					continue;
			} else if (idx[k] == -2) {
				tp_accept(p);
			} else if (idx[k] < TP_MAX) {
				i = idx[k];
				if (p->a[i] >= 0 && !tp_copy(p->a[i], p->b[i]))
					tp_close_pair(p, i);
			} else {
				i = idx[k] - TP_MAX;
				if (p->b[i] >= 0 && !tp_copy(p->b[i], p->a[i]))
					tp_close_pair(p, i);
			}
		}
	}
	for (i = 0; i < TP_MAX; i++)
		tp_close_pair(p, i);
	if (p->lfd >= 0)
		close(p->lfd);
	p->lfd = -1;
	return NULL;
}

struct tcpproxy *
tp_start(const char *unix_path)
{
	struct tcpproxy *p;
	struct sockaddr_in sa;
	socklen_t sl = sizeof(sa);
	int i;

	if ((p = calloc(1, sizeof(*p))) == NULL)
		return NULL;
	snprintf(p->path, sizeof(p->path), "%s", unix_path);
	for (i = 0; i < TP_MAX; i++)
		p->a[i] = p->b[i] = -1;
	p->mode = TP_RELAY;
	pthread_mutex_init(&p->mu, NULL);
	pthread_cond_init(&p->cv, NULL);
	if ((p->lfd = tp_listen(0)) < 0 ||
	    getsockname(p->lfd, (struct sockaddr *)&sa, &sl) != 0 ||
	    pipe2(p->wake, O_CLOEXEC | O_NONBLOCK) != 0) {
		fprintf(stderr, "tcpproxy: %s\n", strerror(errno));
		if (p->lfd >= 0)
			close(p->lfd);
		free(p);
		return NULL;
	}
	p->port = ntohs(sa.sin_port);
	if (pthread_create(&p->th, NULL, tp_main, p) != 0) {
		fprintf(stderr, "tcpproxy: pthread_create failed\n");
		close(p->lfd);
		close(p->wake[0]);
		close(p->wake[1]);
		free(p);
		return NULL;
	}
	return p;
}

int
tp_port(const struct tcpproxy *p)
{
	return p->port;
}

unsigned
tp_accepted(struct tcpproxy *p)
{
	unsigned n;

	pthread_mutex_lock(&p->mu);
	n = p->accepted;
	pthread_mutex_unlock(&p->mu);
	return n;
}

void
tp_set_mode(struct tcpproxy *p, enum tp_mode m)
{
	unsigned g;

	pthread_mutex_lock(&p->mu);
	p->mode = m;
	g = ++p->gen;
	if (write(p->wake[1], "m", 1) < 0) {
		/* the pipe is full: the thread is awake anyway */
	}
	while (p->seen != g)
		pthread_cond_wait(&p->cv, &p->mu);
	pthread_mutex_unlock(&p->mu);
}

void
tp_stop(struct tcpproxy *p)
{
	if (p == NULL)
		return;
	pthread_mutex_lock(&p->mu);
	p->stop = true;
	pthread_mutex_unlock(&p->mu);
	if (write(p->wake[1], "s", 1) < 0) {
		/* the pipe is full: the thread is awake anyway */
	}
	pthread_join(p->th, NULL);
	close(p->wake[0]);
	close(p->wake[1]);
	pthread_cond_destroy(&p->cv);
	pthread_mutex_destroy(&p->mu);
	free(p);
}
