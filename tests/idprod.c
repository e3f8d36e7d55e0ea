/* idprod.c -- a producer of sets with deduplication ids (idprod.h). */
#include "config.h"

#include <sys/wait.h>

#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "idprod.h"
#include "testlib.h"

static void
idprod_child(int port, int round, int wr)
{
	char line[128], rep[64];
	int fd = tl_try_connect(port), seq;

	if (fd == -1)
		_exit(1);
	for (seq = 0; seq < 1000000; seq++) {
		char data[32];
		int dl = snprintf(data, sizeof(data), "r%d-%d", round, seq);
		int n = snprintf(line, sizeof(line),
		    "set crashid/id=r%d-%d 0 0 %d\r\n%s\r\n", round, seq, dl,
		    data);
		size_t got = 0;

		if (write(fd, line, (size_t)n) != n)
			_exit(0);
		/* one reply line */
		while (got < sizeof(rep) - 1) {
			ssize_t r = read(fd, rep + got, 1);
			if (r <= 0)
				_exit(0);
			if (rep[got++] == '\n')
				break;
		}
		rep[got] = '\0';
		if (strcmp(rep, "STORED\r\n") != 0)
			_exit(2);
		if (write(wr, &seq, sizeof(seq)) != (ssize_t)sizeof(seq))
			_exit(3);
	}
	_exit(0);
}

void
idprod_start(struct idprod *p, int port, int round)
{
	int fds[2];

	ck_assert_int_eq(pipe(fds), 0);
	p->pid = fork();
	ck_assert_int_ne(p->pid, -1);
	if (p->pid == 0) {
		close(fds[0]);
		idprod_child(port, round, fds[1]);
	}
	close(fds[1]);
	p->rd = fds[0];
}

/* After the restart: retry, drain, count. */
void
idprod_check(struct idprod *p, int ctl, const char *name, int round)
{
	int seq, last = -1, status, n, inflight, expect;
	char key[160], want[64];

	ck_assert_int_eq(waitpid(p->pid, &status, 0), p->pid);
	ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0,
	    "%s round %d: id producer status %d", name, round, status);
	while (read(p->rd, &seq, sizeof(seq)) == (ssize_t)sizeof(seq))
		last = seq;
	close(p->rd);
	/* the one after the last acknowledged was in flight (or not sent
	 * yet, when nothing was acknowledged): its outcome is unknown,
	 * retry it */
	inflight = last + 1;
	for (n = inflight; n >= 0; n--) {
		char data[32];
		int dl = snprintf(data, sizeof(data), "r%d-%d", round, n);

		snprintf(key, sizeof(key), "set crashid/id=r%d-%d 0 0 %d\r\n"
		    "%s\r\n", round, n, dl, data);
		mustsends(ctl, key);
		ckresp(ctl, "STORED\r\n");
	}
	for (expect = 0; ; expect++) {
		size_t len;
		char *got = tl_getn(ctl, "crashid", &len, NULL);

		if (got == NULL)
			break;
		snprintf(want, sizeof(want), "r%d-%d", round, expect);
		ck_assert_msg(strcmp(got, want) == 0, "%s round %d: id item "
		    "%d is %s (lost, duplicated or reordered)", name, round,
		    expect, got);
		free(got);
	}
	ck_assert_msg(expect == inflight + 1, "%s round %d: %d id items, "
	    "want %d", name, round, expect, inflight + 1);
	printf("%s round %d: id sets acknowledged %d, in flight retried 1, "
	    "read back %d, duplicated 0\n", name, round, last + 1, expect);
}
