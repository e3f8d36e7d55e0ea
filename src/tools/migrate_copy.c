/* migrate_copy.c -- the generic store-to-store copy engine (migrate_copy.h):
 * sources, the target built aside, verified and renamed into place. */
#include "config.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <inttypes.h>
#include <libgen.h>
#include <limits.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "saker/store.h"
#include "bytes.h"
#include "itemattr.h"
#include "migrate_copy.h"
#include "migrate_int.h"
#include "migrate_progress.h"
#include "qname.h"

/* Commit at least this often by bytes, too: a batch of 10000 large items
 * would otherwise hold gigabytes of dirty pages in some drivers. */
#define MIG_COMMIT_BYTES (16u << 20)

volatile sig_atomic_t mig_interrupted;
void (*mig_test_item_hook)(uint64_t n);

static struct sigaction mig_old_int, mig_old_term, mig_old_hup, mig_old_pipe;
static int mig_signals_depth;

static void
mig_on_signal(int sig)
{
	mig_interrupted = sig;
}

void
mig_signals_install(void)
{
	struct sigaction sa;

	if (mig_signals_depth++ > 0)
		return;
	mig_interrupted = 0;
	memset(&sa, 0, sizeof(sa));
	sigemptyset(&sa.sa_mask);
	/* No SA_RESTART: a blocking read of stdin must return so the loop
	 * sees the flag. */
	sa.sa_handler = mig_on_signal;
	sigaction(SIGINT, &sa, &mig_old_int);
	sigaction(SIGTERM, &sa, &mig_old_term);
	sigaction(SIGHUP, &sa, &mig_old_hup);
	/* A closed pipe is a write error we report, not a silent death. */
	sa.sa_handler = SIG_IGN;
	sigaction(SIGPIPE, &sa, &mig_old_pipe);
}

void
mig_signals_restore(void)
{
	if (mig_signals_depth == 0 || --mig_signals_depth > 0)
		return;
	sigaction(SIGINT, &mig_old_int, NULL);
	sigaction(SIGTERM, &mig_old_term, NULL);
	sigaction(SIGHUP, &mig_old_hup, NULL);
	sigaction(SIGPIPE, &mig_old_pipe, NULL);
}

void
mig_seterr(struct mig_err *e, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(e->msg, sizeof(e->msg), fmt, ap);
	va_end(ap);
}

static const char *
mig_signame(int sig)
{
	switch (sig) {
	case SIGINT:  return "SIGINT";
	case SIGTERM: return "SIGTERM";
	case SIGHUP:  return "SIGHUP";
	default:      return "a signal";
	}
}

static int
mig_check_interrupt(struct mig_err *e)
{
	if (mig_interrupted == 0)
		return 0;
	mig_seterr(e, "interrupted by %s", mig_signame(mig_interrupted));
	return -1;
}

/* ------------------------------------------------------------------ */
/* checksums */

uint64_t
mig_fnv(uint64_t h, const void *p, size_t len)
{
	const unsigned char *c = p;

	while (len-- > 0) {
		h ^= *c++;
		h *= 0x100000001b3ULL;
	}
	return h;
}

static uint64_t
mig_item_hash(const struct saker_item *it, int state)
{
	unsigned char b[28];
	uint64_t h;

	saker_put_be32(b, it->flags);
	saker_put_be64(b + 4, (uint64_t)it->expires_ms);
	saker_put_be64(b + 12, state == MIG_DELAYED ? (uint64_t)it->due_ms : 0);
	saker_put_be64(b + 20, (uint64_t)it->len);
	h = mig_fnv(MIG_FNV_INIT, b, sizeof(b));
	if (it->len > 0)
		h = mig_fnv(h, it->data, it->len);
	if (it->attrs_len > 0) {
		saker_put_be16(b, (uint16_t)it->attrs_len);
		h = mig_fnv(h, b, 2);
		h = mig_fnv(h, it->attrs, it->attrs_len);
	}
	return h;
}

void
mig_digest_init(struct mig_digest *d)
{
	memset(d, 0, sizeof(*d));
	d->ready_chain = MIG_FNV_INIT;
	d->delayed_chain = MIG_FNV_INIT;
}

void
mig_digest_add(struct mig_digest *d, const struct saker_item *it, int state)
{
	unsigned char b[8];
	uint64_t h = mig_item_hash(it, state);

	saker_put_be64(b, h);
	if (state == MIG_DELAYED) {
		d->delayed++;
		d->delayed_chain = mig_fnv(d->delayed_chain, b, sizeof(b));
		d->delayed_sum += h;
	} else {
		d->ready++;
		d->ready_chain = mig_fnv(d->ready_chain, b, sizeof(b));
	}
	d->bytes += it->len;
}

void
mig_digest_add_id(struct mig_digest *d, const void *key, size_t len,
    int64_t expires_ms)
{
	unsigned char b[8];

	saker_put_be64(b, (uint64_t)expires_ms);
	d->ids++;
	d->ids_sum += mig_fnv(mig_fnv(MIG_FNV_INIT, b, sizeof(b)), key, len);
}

/* ------------------------------------------------------------------ */
/* specs and paths */

static const char *
mig_spec_location(const char *spec)
{
	const char *colon = strchr(spec, ':');

	return colon != NULL ? colon + 1 : NULL;
}

const struct saker_store_driver *
mig_spec_driver(const char *spec, const char *role, struct mig_err *e)
{
	const struct saker_store_driver *drv;
	const char *colon = strchr(spec, ':');
	/* the type ends at the first option or the location, as the
	 * registry reads it (saker_store_open()) */
	size_t tlen = strcspn(spec, ",:");

	drv = saker_store_driver_find(spec, tlen);
	if (drv == NULL) {
		char why[512];

		saker_store_type_error(spec, tlen, why, sizeof(why));
		mig_seterr(e, "%s store '%s': %s", role, spec, why);
		return NULL;
	}
	if (drv->open == NULL) {
		mig_seterr(e, "store type '%s' is not implemented in this build", drv->name);
		return NULL;
	}
	if (!drv->durable) {
		mig_seterr(e, "the %s store is not durable (its items live only inside "
		    "a running sakerd), so it cannot be a %s", drv->name, role);
		return NULL;
	}
	if (drv->location_help == NULL || colon == NULL || colon[1] == '\0') {
		mig_seterr(e, "%s store '%s' needs a location: %s:%s", role, spec,
		    drv->name, drv->location_help != NULL ? drv->location_help : "PATH");
		return NULL;
	}
	return drv;
}

/* The canonical absolute path of `path`, which need not exist (its
 * directory must).  Returns malloc'd or NULL. */
static char *
mig_canon(const char *path)
{
	char buf[PATH_MAX], *d, *b, *res = NULL;

	if (realpath(path, buf) != NULL)
		return strdup(buf);
	d = strdup(path);
	b = strdup(path);
	if (d != NULL && b != NULL && realpath(dirname(d), buf) != NULL) {
		size_t n = strlen(buf) + strlen(basename(b)) + 2;
		if ((res = malloc(n)) != NULL)
			snprintf(res, n, "%s/%s", buf, basename(b));
	}
	free(d);
	free(b);
	return res;
}

bool
mig_same_location(const char *a, const char *b)
{
	const char *la = mig_spec_location(a), *lb = mig_spec_location(b);
	char *ca, *cb;
	bool same;

	if (la == NULL || lb == NULL)
		return strcmp(a, b) == 0;
	ca = mig_canon(la);
	cb = mig_canon(lb);
	same = ca != NULL && cb != NULL ? strcmp(ca, cb) == 0 : strcmp(la, lb) == 0;
	free(ca);
	free(cb);
	return same;
}

static int
mig_rm_one(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
	if (flag == FTW_DP)
		return rmdir(path) == 0 || errno == ENOENT ? 0 : -1;
	return unlink(path) == 0 || errno == ENOENT ? 0 : -1;
}

/* Sidecar files drivers keep next to a FILE store: SQLite's WAL, its
 * index and rollback journal, the driver's flock file and its redo
 * journal (--sync always). */
static const char *const mig_sidecars[] = { "-wal", "-shm", "-journal", ".lock",
    ".saker-journal", NULL };

static void
mig_remove_store(const char *path, bool is_dir)
{
	char side[PATH_MAX];
	size_t i;

	if (is_dir) {
		nftw(path, mig_rm_one, 16, FTW_DEPTH | FTW_PHYS);
		return;
	}
	unlink(path);
	for (i = 0; mig_sidecars[i] != NULL; i++) {
		snprintf(side, sizeof(side), "%s%s", path, mig_sidecars[i]);
		unlink(side);
	}
}

static int
mig_fsync_path(const char *path)
{
	int fd, rc;

	if ((fd = open(path, O_RDONLY | O_CLOEXEC)) == -1)
		return -1;
	rc = fsync(fd);
	/* Some filesystems refuse fsync on directories; that is not ours to fix. */
	if (rc == -1 && (errno == EINVAL || errno == EBADF))
		rc = 0;
	close(fd);
	return rc;
}

static int
mig_fsync_one(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
	if (flag != FTW_F && flag != FTW_D && flag != FTW_DP)
		return 0;
	return mig_fsync_path(path);
}

static int
mig_fsync_parent(const char *path)
{
	char *d = strdup(path);
	int rc;

	if (d == NULL)
		return -1;
	rc = mig_fsync_path(dirname(d));
	free(d);
	return rc;
}

/* Drivers whose location is a file or directory get the temporary-and-
 * rename treatment; others (a database connection string) are written in
 * place. */
static bool
mig_is_path_store(const struct saker_store_driver *drv)
{
	return drv->location == SAKER_LOCATION_DIR ||
	    drv->location == SAKER_LOCATION_FILE;
}

/* ------------------------------------------------------------------ */
/* sources */

int
mig_source_open(const char *spec, saker_store **out, struct mig_err *e)
{
	struct saker_store_opts o = { .read_only = true, .sync = SAKER_SYNC_NEVER };
	struct stat st;
	char err[512] = "";
	int rc;

	const struct saker_store_driver *drv;

	*out = NULL;
	if ((drv = mig_spec_driver(spec, "source", e)) == NULL)
		return -1;
	if (mig_is_path_store(drv) && stat(mig_spec_location(spec), &st) == -1) {
		mig_seterr(e, "source %s: %s", spec, strerror(errno));
		return -1;
	}
	rc = saker_store_open(spec, &o, out, err, sizeof(err));
	if (rc == SAKER_ELOCKED) {
		mig_seterr(e, "source %s is in use by a running sakerd or another "
		    "process (%s); stop it first", spec, err);
		return -1;
	}
	if (rc != SAKER_OK || *out == NULL) {
		mig_seterr(e, "cannot open source %s: %s", spec,
		    err[0] != '\0' ? err : saker_strerror(rc));
		*out = NULL;
		return -1;
	}
	return 0;
}

int
mig_collect_name(void *arg, const char *name, size_t len)
{
	struct mig_names *ns = arg;

	if (ns->n == ns->cap) {
		size_t cap = ns->cap > 0 ? ns->cap * 2 : 16;
		struct mig_name *v = realloc(ns->v, cap * sizeof(*v));
		if (v == NULL) {
			ns->oom = true;
			return 1;
		}
		ns->v = v;
		ns->cap = cap;
	}
	if ((ns->v[ns->n].s = malloc(len > 0 ? len : 1)) == NULL) {
		ns->oom = true;
		return 1;
	}
	memcpy(ns->v[ns->n].s, name, len);
	ns->v[ns->n].len = len;
	ns->n++;
	return 0;
}

int
mig_name_cmp(const void *a, const void *b)
{
	const struct mig_name *x = a, *y = b;
	size_t n = x->len < y->len ? x->len : y->len;
	int c = memcmp(x->s, y->s, n);

	if (c != 0)
		return c;
	return x->len < y->len ? -1 : x->len > y->len;
}

void
mig_names_free(struct mig_names *ns)
{
	size_t i;

	for (i = 0; i < ns->n; i++)
		free(ns->v[i].s);
	free(ns->v);
	memset(ns, 0, sizeof(*ns));
}

/* Every queue of s, sorted by name bytes: dumps must be reproducible. */
static int
mig_list_queues(saker_store *s, struct mig_names *ns, const char *what,
    struct mig_err *e)
{
	int rc;

	memset(ns, 0, sizeof(*ns));
	rc = saker_store_queues(s, mig_collect_name, ns);
	if (ns->oom)
		mig_seterr(e, "out of memory listing the queues of %s", what);
	else if (rc < 0)
		mig_seterr(e, "listing the queues of %s failed: %s", what,
		    saker_store_errmsg(s));
	if (ns->oom || rc < 0) {
		mig_names_free(ns);
		return -1;
	}
	if (ns->n > 1)	/* ns->v is NULL with no queues; qsort wants an array */
		qsort(ns->v, ns->n, sizeof(*ns->v), mig_name_cmp);
	return 0;
}

struct mig_walk {
	const struct mig_source_cb *cb;
	void *arg;
	int64_t now_ms;
	struct mig_err *e;
	int stop;                /* set when a callback stopped the walk */
};

static int
mig_walk_item(void *arg, const struct saker_item *it)
{
	struct mig_walk *w = arg;
	struct saker_item n = *it;
	int state, rc;

	if (mig_check_interrupt(w->e) < 0)
		return w->stop = 1;
	if (it->state == SAKER_ITEM_DELAYED && it->due_ms > w->now_ms) {
		state = MIG_DELAYED;
	} else {
		state = MIG_READY;
		n.due_ms = 0;
	}
	if ((rc = w->cb->item(w->arg, &n, state, it->state == SAKER_ITEM_OPEN)) != 0)
		w->stop = rc;
	return rc;
}

/* A queue's deduplication ids, collected to be handed out sorted. */
struct mig_id {
	int64_t expires_ms;
	size_t len;
	unsigned char key[SAKER_DEDUP_KEY_MAX];
};

struct mig_ids {
	struct mig_id *v;
	size_t n, cap;
	int64_t now_ms;
	bool oom, bad;
};

static int
mig_collect_id(void *arg, const void *key, size_t len, int64_t expires_ms)
{
	struct mig_ids *ids = arg;

	if (expires_ms <= ids->now_ms)
		return 0;	/* expired: a restart's sweep would drop it */
	if (len == 0 || len > SAKER_DEDUP_KEY_MAX) {
		ids->bad = true;
		return 1;
	}
	if (ids->n == ids->cap) {
		size_t cap = ids->cap > 0 ? ids->cap * 2 : 64;
		struct mig_id *v = realloc(ids->v, cap * sizeof(*v));

		if (v == NULL) {
			ids->oom = true;
			return 1;
		}
		ids->v = v;
		ids->cap = cap;
	}
	ids->v[ids->n].expires_ms = expires_ms;
	ids->v[ids->n].len = len;
	memcpy(ids->v[ids->n].key, key, len);
	ids->n++;
	return 0;
}

static int
mig_id_cmp(const void *a, const void *b)
{
	const struct mig_id *x = a, *y = b;
	size_t n = x->len < y->len ? x->len : y->len;
	int c = memcmp(x->key, y->key, n);

	if (c != 0)
		return c;
	return x->len < y->len ? -1 : x->len > y->len;
}

/* Hand q's live ids to cb->id, sorted by key bytes (dumps must be
 * reproducible; the driver lists them in no particular order). */
static int
mig_source_ids(saker_store *s, saker_queue *q, const char *name, int len,
    int64_t now_ms, const struct mig_source_cb *cb, void *arg,
    struct mig_err *e)
{
	struct mig_ids ids;
	size_t i;
	int rc = 0;

	if (cb->id == NULL)
		return 0;
	memset(&ids, 0, sizeof(ids));
	ids.now_ms = now_ms;
	rc = saker_store_dedup_iterate(s, q, mig_collect_id, &ids);
	if (ids.oom || ids.bad || rc != 0) {
		if (ids.oom)
			mig_seterr(e, "out of memory reading the ids of queue '%.*s'",
			    len, name);
		else if (ids.bad)
			mig_seterr(e, "queue '%.*s' holds a deduplication id of a "
			    "bad length", len, name);
		else
			mig_seterr(e, "reading the ids of queue '%.*s' failed: %s",
			    len, name, saker_store_errmsg(s));
		free(ids.v);
		return -1;
	}
	if (ids.n > 1)
		qsort(ids.v, ids.n, sizeof(*ids.v), mig_id_cmp);
	for (i = 0; i < ids.n && rc == 0; i++) {
		if (mig_check_interrupt(e) < 0)
			rc = -1;
		else
			rc = cb->id(arg, ids.v[i].key, ids.v[i].len,
			    ids.v[i].expires_ms);
	}
	free(ids.v);
	return rc;
}

int
mig_source_each(saker_store *s, int64_t now_ms, const struct mig_source_cb *cb,
    void *arg, struct mig_err *e)
{
	struct mig_names ns;
	struct mig_walk w = { cb, arg, now_ms, e, 0 };
	saker_queue *q;
	size_t i;
	int rc = 0;

	if (mig_list_queues(s, &ns, "the source", e) < 0)
		return -1;
	for (i = 0; i < ns.n && rc == 0; i++) {
		const char *name = ns.v[i].s;
		int len = (int)ns.v[i].len;

		if (saker_store_queue_open(s, name, ns.v[i].len, false, NULL, &q) != SAKER_OK) {
			mig_seterr(e, "cannot open queue '%.*s': %s", len, name,
			    saker_store_errmsg(s));
			rc = -1;
			break;
		}
		if (cb->queue_begin != NULL &&
		    (rc = cb->queue_begin(arg, name, ns.v[i].len)) != 0)
			break;
		rc = saker_store_iterate(s, q, mig_walk_item, &w);
		if (rc != 0) {
			if (w.stop == 0)
				mig_seterr(e, "reading queue '%.*s' failed: %s", len,
				    name, saker_store_errmsg(s));
			break;
		}
		if ((rc = mig_source_ids(s, q, name, len, now_ms, cb, arg,
		    e)) != 0)
			break;
		if (cb->queue_end != NULL)
			rc = cb->queue_end(arg);
	}
	mig_names_free(&ns);
	return rc != 0 ? -1 : 0;
}

/* Items of every state in store s (`what` in messages), -1 on error;
 * *nqueues: the queues holding any.  `lax` skips a queue that cannot be
 * read instead. */
static int64_t
mig_count_items(saker_store *s, const char *what, bool lax, size_t *nqueues,
    struct mig_err *e)
{
	struct mig_names ns;
	struct saker_queue_stats st;
	saker_queue *q;
	uint64_t k;
	int64_t n = 0;
	size_t i;

	*nqueues = 0;
	if (mig_list_queues(s, &ns, what, e) < 0)
		return -1;
	for (i = 0; i < ns.n; i++) {
		memset(&st, 0, sizeof(st));
		if (saker_store_queue_open(s, ns.v[i].s, ns.v[i].len, false, NULL, &q) != SAKER_OK ||
		    saker_store_queue_stats(s, q, &st) != SAKER_OK) {
			if (lax)
				continue;
			mig_seterr(e, "reading %s failed: %s", what, saker_store_errmsg(s));
			mig_names_free(&ns);
			return -1;
		}
		k = st.items + st.delayed_items + st.open_items;
		*nqueues += k > 0;
		n += (int64_t)k;
	}
	mig_names_free(&ns);
	return n;
}

uint64_t
mig_source_totals(saker_store *s)
{
	struct mig_err e;
	size_t nq;
	int64_t n = mig_count_items(s, "the source", true, &nq, &e);

	return n > 0 ? (uint64_t)n : 0;
}

/* ------------------------------------------------------------------ */
/* targets */

/* Find queue `name` in the sorted qs, inserting it when absent. */
static struct mig_q *
mig_target_q(struct mig_target *t, const char *name, size_t len, bool insert)
{
	struct mig_name key = { (char *)(uintptr_t)name, len };
	size_t lo = 0, hi = t->nq;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		struct mig_name m = { t->qs[mid].name, t->qs[mid].len };
		int c = mig_name_cmp(&key, &m);
		if (c == 0) {
			t->cur = mid;
			return &t->qs[mid];
		}
		if (c < 0)
			hi = mid;
		else
			lo = mid + 1;
	}
	if (!insert)
		return NULL;
	if (t->nq == t->capq) {
		size_t cap = t->capq > 0 ? t->capq * 2 : 16;
		struct mig_q *v = realloc(t->qs, cap * sizeof(*v));
		if (v == NULL)
			return NULL;
		t->qs = v;
		t->capq = cap;
	}
	memmove(&t->qs[lo + 1], &t->qs[lo], (t->nq - lo) * sizeof(*t->qs));
	memset(&t->qs[lo], 0, sizeof(*t->qs));
	if ((t->qs[lo].name = malloc(len)) == NULL) {
		memmove(&t->qs[lo], &t->qs[lo + 1], (t->nq - lo) * sizeof(*t->qs));
		return NULL;
	}
	memcpy(t->qs[lo].name, name, len);
	t->qs[lo].len = len;
	mig_digest_init(&t->qs[lo].want);
	t->nq++;
	t->cur = lo;
	return &t->qs[lo];
}

int
mig_target_queue(struct mig_target *t, const char *name, size_t len,
    struct mig_err *e)
{
	struct mig_q *mq;

	if (!saker_qname_stored_ok(name, len)) {
		mig_seterr(e, "invalid queue name '%.*s'", (int)(len > 250 ? 250 : len), name);
		return -1;
	}
	if (saker_store_queue_open(t->st, name, len, true, NULL, &t->q) != SAKER_OK) {
		mig_seterr(e, "creating queue '%.*s' in %s failed: %s", (int)len, name,
		    t->spec, saker_store_errmsg(t->st));
		return -1;
	}
	if ((mq = mig_target_q(t, name, len, true)) == NULL) {
		mig_seterr(e, "out of memory");
		return -1;
	}
	if (t->input == 2)
		mq->from_src = true;
	return 0;
}

static int
mig_target_commit(struct mig_target *t, struct mig_err *e)
{
	if (saker_store_commit(t->st) != SAKER_OK) {
		mig_seterr(e, "writing %s failed: %s", t->spec, saker_store_errmsg(t->st));
		return -1;
	}
	t->pending = t->pending_bytes = 0;
	return 0;
}

int
mig_target_put(struct mig_target *t, const struct saker_item *it, int state,
    bool was_open, struct mig_err *e)
{
	struct saker_item p = *it;
	struct mig_q *mq = &t->qs[t->cur];

	if (mig_check_interrupt(e) < 0)
		return -1;
	if (t->q == NULL) {
		mig_seterr(e, "item outside any queue");
		return -1;
	}
	if (mig_test_item_hook != NULL) {
		mig_test_item_hook(t->meter.items + 1);
		if (mig_check_interrupt(e) < 0)
			return -1;
	}
	if (p.attrs_len > SAKER_ATTRS_MAX || !itemattr_valid(p.attrs, p.attrs_len)) {
		mig_seterr(e, "item %" PRIu64 " of queue '%.*s' has malformed "
		    "attributes", mq->want.ready + mq->want.delayed + 1,
		    (int)mq->len, mq->name);
		return -1;
	}
	p.id = 0;
	p.state = SAKER_ITEM_READY;
	if (state != MIG_DELAYED)
		p.due_ms = 0;
	else if (p.due_ms <= t->now_ms) {
		/* Only a corrupt input gets here (sources and the dump reader
		 * normalise); refuse rather than silently change the state. */
		mig_seterr(e, "delayed item in queue '%.*s' is not in the future",
		    (int)mq->len, mq->name);
		return -1;
	}
	if (saker_store_put(t->st, t->q, &p, t->now_ms) != SAKER_OK) {
		mig_seterr(e, "writing to %s failed: %s (queue '%.*s', item %" PRIu64 ")",
		    t->spec, saker_store_errmsg(t->st), (int)mq->len, mq->name,
		    mq->want.ready + mq->want.delayed + 1);
		return -1;
	}
	mig_digest_add(&mq->want, &p, state);
	if (state == MIG_DELAYED)
		mq->delayed_inputs |= t->input;
	if (t->input == 2) {
		if (state == MIG_DELAYED)
			mq->src_delayed++;
		else
			mq->src_ready++;
		if (was_open)
			mq->src_open++;
		mq->src_bytes += p.len;
		t->src_items++;
		t->src_bytes += p.len;
		mig_meter_add(&t->meter, p.len);
	}
	t->pending++;
	t->pending_bytes += p.len;
	if (t->pending >= MIG_COMMIT_EVERY || t->pending_bytes >= MIG_COMMIT_BYTES)
		return mig_target_commit(t, e);
	return 0;
}

int
mig_target_id(struct mig_target *t, const void *key, size_t len,
    int64_t expires_ms, struct mig_err *e)
{
	struct mig_q *mq = &t->qs[t->cur];
	int rc;

	if (mig_check_interrupt(e) < 0)
		return -1;
	if (t->q == NULL) {
		mig_seterr(e, "id outside any queue");
		return -1;
	}
	if (expires_ms <= t->now_ms)
		return 0;	/* expired since the dump: gone, as in the source */
	rc = saker_store_dedup_load(t->st, t->q, key, len, expires_ms, t->now_ms);
	if (rc != SAKER_OK) {
		mig_seterr(e, "writing a deduplication id of queue '%.*s' to %s "
		    "failed: %s", (int)mq->len, mq->name, t->spec,
		    rc == SAKER_EINVAL ? "bad id" : saker_store_errmsg(t->st));
		return -1;
	}
	mig_digest_add_id(&mq->want, key, len, expires_ms);
	mq->id_inputs |= t->input;
	if (t->input == 2) {
		mq->src_ids++;
		t->src_ids++;
	}
	if (++t->pending >= MIG_COMMIT_EVERY)
		return mig_target_commit(t, e);
	return 0;
}

struct mig_tcb {
	struct mig_target *t;
	struct mig_err *e;
};

static int
mig_tcb_queue(void *arg, const char *name, size_t len)
{
	struct mig_tcb *c = arg;

	return mig_target_queue(c->t, name, len, c->e) < 0 ? 1 : 0;
}

static int
mig_tcb_item(void *arg, const struct saker_item *it, int state, bool was_open)
{
	struct mig_tcb *c = arg;

	return mig_target_put(c->t, it, state, was_open, c->e) < 0 ? 1 : 0;
}

static int
mig_tcb_id(void *arg, const void *key, size_t len, int64_t expires_ms)
{
	struct mig_tcb *c = arg;

	return mig_target_id(c->t, key, len, expires_ms, c->e) < 0 ? 1 : 0;
}

static const struct mig_source_cb mig_target_cb = {
	mig_tcb_queue, mig_tcb_item, NULL, mig_tcb_id
};

int
mig_target_copy(struct mig_target *t, saker_store *src, struct mig_err *e)
{
	struct mig_tcb c = { t, e };

	return mig_source_each(src, t->now_ms, &mig_target_cb, &c, e);
}

/* Is the thing at `path` a placeholder we may replace without reading it:
 * an empty directory (DIR stores) or an empty file (FILE stores)? */
static bool
mig_trivial(const char *path, const struct stat *st, bool is_dir)
{
	DIR *d;
	struct dirent *de;
	bool empty = true;

	if (!is_dir)
		return S_ISREG(st->st_mode) && st->st_size == 0;
	if (!S_ISDIR(st->st_mode) || (d = opendir(path)) == NULL)
		return false;
	while ((de = readdir(d)) != NULL) {
		if (strcmp(de->d_name, ".") != 0 && strcmp(de->d_name, "..") != 0) {
			empty = false;
			break;
		}
	}
	closedir(d);
	return empty;
}

/*
 * A destination that is not a path (a shared database) cannot be built
 * aside and renamed into place.  It must be empty; it is written in place,
 * and on any failure every queue written is deleted again, so it is left
 * as it was (empty).  --append is refused: it could not be undone.
 */
static int
mig_target_open_direct(struct mig_target *t, const char *spec,
    struct mig_target **out, struct mig_err *e)
{
	struct saker_store_opts o = { .sync = SAKER_SYNC_ALWAYS, .create = true };
	char err[512] = "";
	int64_t items;
	size_t nq;
	int rc;

	t->direct = true;
	t->tmp_path = strdup(t->path);
	t->tmp_spec = strdup(spec);
	if (t->tmp_path == NULL || t->tmp_spec == NULL) {
		mig_seterr(e, "out of memory");
		goto fail;
	}
	if (t->opts.append) {
		mig_seterr(e, "--append into a %s store is not supported: adding to a "
		    "shared database cannot be undone atomically", t->drv->name);
		goto fail;
	}
	rc = saker_store_open(spec, &o, &t->st, err, sizeof(err));
	if (rc != SAKER_OK || t->st == NULL) {
		mig_seterr(e, "cannot open destination %s: %s", spec,
		    err[0] != '\0' ? err : saker_strerror(rc));
		t->st = NULL;
		goto fail;
	}
	if ((items = mig_count_items(t->st, "the destination", false, &nq,
	    e)) < 0)
		goto fail;
	if (items > 0 || nq > 0) {
		mig_seterr(e, "destination %s is not empty (%" PRId64 " items in %zu "
		    "queues)", spec, items, nq);
		goto fail;
	}
	t->tmp_made = true;     /* from here on, failure deletes what we wrote */
	t->input = 2;
	t->q = NULL;
	*out = t;
	return 0;
fail:
	mig_target_free(t);
	return -1;
}

int
mig_target_open(const char *spec, const char *src_spec,
    const struct mig_opts *opts, int64_t now_ms, struct mig_target **out,
    struct mig_err *e)
{
	struct mig_target *t;
	struct saker_store_opts o = { .sync = SAKER_SYNC_NEVER };
	saker_store *old = NULL;
	struct stat st;
	char err[512] = "";
	size_t n;
	int rc;

	*out = NULL;
	if ((t = calloc(1, sizeof(*t))) == NULL) {
		mig_seterr(e, "out of memory");
		return -1;
	}
	t->opts = *opts;
	t->now_ms = now_ms;
	t->input = 1;
	mig_meter_start(&t->meter, opts->quiet ? MIG_PROGRESS_OFF : opts->progress);
	if ((t->drv = mig_spec_driver(spec, "destination", e)) == NULL)
		goto fail;
	t->is_dir = t->drv->location == SAKER_LOCATION_DIR;
	if (src_spec != NULL && mig_same_location(src_spec, spec)) {
		mig_seterr(e, "source and destination are the same (%s)", spec);
		goto fail;
	}
	/* (checked before anything reads them) */
	t->spec = strdup(spec);
	t->path = strdup(mig_spec_location(spec));
	if (t->spec == NULL || t->path == NULL) {
		mig_seterr(e, "out of memory");
		goto fail;
	}
	if (!mig_is_path_store(t->drv))
		return mig_target_open_direct(t, spec, out, e);
	n = strlen(t->path) + 32;
	t->tmp_path = malloc(n);
	t->tmp_spec = malloc(n + strlen(t->drv->name) + 1);
	if (t->tmp_path == NULL || t->tmp_spec == NULL) {
		mig_seterr(e, "out of memory");
		goto fail;
	}
	/* Strip trailing slashes so DIR/ gets the sibling DIR.tmp-PID. */
	while (strlen(t->path) > 1 && t->path[strlen(t->path) - 1] == '/')
		t->path[strlen(t->path) - 1] = '\0';
	snprintf(t->tmp_path, n, "%s.tmp-%ld", t->path, (long)getpid());
	snprintf(t->tmp_spec, n + strlen(t->drv->name) + 1, "%s:%s", t->drv->name, t->tmp_path);

	if (stat(t->path, &st) == 0) {
		t->replace = true;
		if (t->is_dir && !S_ISDIR(st.st_mode)) {
			mig_seterr(e, "destination %s exists and is not a directory", t->path);
			goto fail;
		}
		if (!t->is_dir && S_ISDIR(st.st_mode)) {
			mig_seterr(e, "destination %s is a directory, expected a file", t->path);
			goto fail;
		}
		if (!mig_trivial(t->path, &st, t->is_dir)) {
			int64_t items;
			size_t nq;

			o.read_only = true;
			rc = saker_store_open(spec, &o, &old, err, sizeof(err));
			if (rc == SAKER_ELOCKED) {
				mig_seterr(e, "destination %s is in use by a running sakerd "
				    "or another process (%s); stop it first", spec, err);
				goto fail;
			}
			if (rc != SAKER_OK || old == NULL) {
				mig_seterr(e, "destination %s exists but cannot be opened "
				    "as a %s store: %s", spec, t->drv->name,
				    err[0] != '\0' ? err : saker_strerror(rc));
				old = NULL;
				goto fail;
			}
			if ((items = mig_count_items(old, "the destination", false,
			    &nq, e)) < 0)
				goto fail;
			if (items > 0 && !opts->append) {
				mig_seterr(e, "destination %s is not empty (%" PRId64 " items "
				    "in %zu queues); use --append to add after them", spec,
				    items, nq);
				goto fail;
			}
		}
	} else if (errno != ENOENT) {
		mig_seterr(e, "destination %s: %s", t->path, strerror(errno));
		goto fail;
	}
	if (lstat(t->tmp_path, &st) == 0) {
		mig_seterr(e, "temporary %s already exists (left by a killed run?); "
		    "remove it first", t->tmp_path);
		goto fail;
	}
	o.read_only = false;
	o.create = true;
	t->tmp_made = true;
	if (t->is_dir && mkdir(t->tmp_path, 0700) == -1) {
		t->tmp_made = false;
		mig_seterr(e, "cannot create %s: %s", t->tmp_path, strerror(errno));
		goto fail;
	}
	err[0] = '\0';
	rc = saker_store_open(t->tmp_spec, &o, &t->st, err, sizeof(err));
	if (rc != SAKER_OK || t->st == NULL) {
		mig_seterr(e, "cannot create %s: %s", t->tmp_spec,
		    err[0] != '\0' ? err : saker_strerror(rc));
		t->st = NULL;
		goto fail;
	}
	if (old != NULL) {
		/* --append (or an existing empty store): rebuild the old
		 * contents into the temporary first, so the final rename is
		 * still all-or-nothing. */
		if (mig_target_copy(t, old, e) < 0)
			goto fail;
		saker_store_close(old);
		old = NULL;
	}
	t->input = 2;
	t->q = NULL;
	*out = t;
	return 0;
fail:
	saker_store_close(old);
	mig_target_free(t);
	return -1;
}

struct mig_vctx {
	struct mig_target *t;
	struct mig_err *e;
	struct mig_digest got;
	struct mig_q *mq;
	size_t seen;
};

static int
mig_v_queue(void *arg, const char *name, size_t len)
{
	struct mig_vctx *v = arg;

	if ((v->mq = mig_target_q(v->t, name, len, false)) == NULL) {
		mig_seterr(v->e, "verification failed: unexpected queue '%.*s' in %s",
		    (int)len, name, v->t->tmp_spec);
		return 1;
	}
	mig_digest_init(&v->got);
	v->seen++;
	return 0;
}

static int
mig_v_item(void *arg, const struct saker_item *it, int state, bool was_open)
{
	struct mig_vctx *v = arg;

	mig_digest_add(&v->got, it, state);
	return 0;
}

static int
mig_v_end(void *arg)
{
	struct mig_vctx *v = arg;
	const struct mig_digest *w = &v->mq->want, *g = &v->got;
	int len = (int)v->mq->len;
	const char *name = v->mq->name;
	bool by_sum = v->mq->delayed_inputs == 3;

	if (w->ready != g->ready || w->delayed != g->delayed) {
		mig_seterr(v->e, "verification failed: queue '%.*s' should have %" PRIu64
		    " ready and %" PRIu64 " delayed items, has %" PRIu64 " and %" PRIu64,
		    len, name, w->ready, w->delayed, g->ready, g->delayed);
		return 1;
	}
	if (w->ready_chain != g->ready_chain || w->bytes != g->bytes) {
		mig_seterr(v->e, "verification failed: checksum mismatch in the ready "
		    "items of queue '%.*s'", len, name);
		return 1;
	}
	if (by_sum ? w->delayed_sum != g->delayed_sum : w->delayed_chain != g->delayed_chain) {
		mig_seterr(v->e, "verification failed: checksum mismatch in the delayed "
		    "items of queue '%.*s'", len, name);
		return 1;
	}
	if (v->mq->id_inputs == 3 ? g->ids > w->ids :
	    g->ids != w->ids || g->ids_sum != w->ids_sum) {
		mig_seterr(v->e, "verification failed: queue '%.*s' should keep %"
		    PRIu64 " deduplication ids, keeps %" PRIu64 "%s", len, name,
		    w->ids, g->ids, g->ids == w->ids ? " (checksum mismatch)" : "");
		return 1;
	}
	return 0;
}

static int
mig_v_id(void *arg, const void *key, size_t len, int64_t expires_ms)
{
	struct mig_vctx *v = arg;

	mig_digest_add_id(&v->got, key, len, expires_ms);
	return 0;
}

static const struct mig_source_cb mig_verify_cb = {
	mig_v_queue, mig_v_item, mig_v_end, mig_v_id
};

static int
mig_target_verify(struct mig_target *t, struct mig_err *e)
{
	struct saker_store_opts o = { .read_only = true, .sync = SAKER_SYNC_NEVER };
	struct mig_vctx v;
	saker_store *s = NULL;
	char err[512] = "";
	int rc;

	rc = saker_store_open(t->tmp_spec, &o, &s, err, sizeof(err));
	if (rc != SAKER_OK || s == NULL) {
		mig_seterr(e, "verification failed: cannot reopen %s: %s", t->tmp_spec,
		    err[0] != '\0' ? err : saker_strerror(rc));
		return -1;
	}
	memset(&v, 0, sizeof(v));
	v.t = t;
	v.e = e;
	rc = mig_source_each(s, t->now_ms, &mig_verify_cb, &v, e);
	saker_store_close(s);
	if (rc < 0) {
		if (strncmp(e->msg, "verification", 12) != 0 &&
		    strncmp(e->msg, "interrupted", 11) != 0) {
			char tmp[sizeof(e->msg)];
			memcpy(tmp, e->msg, sizeof(tmp));
			mig_seterr(e, "verification failed: %s", tmp);
		}
		return -1;
	}
	if (v.seen != t->nq) {
		mig_seterr(e, "verification failed: %zu queues written, %zu found",
		    t->nq, v.seen);
		return -1;
	}
	return 0;
}

/* Move the verified temporary into place. */
static int
mig_target_place(struct mig_target *t, struct mig_err *e)
{
	char old[PATH_MAX];

	if (!t->replace) {
#ifdef RENAME_NOREPLACE
		if (renameat2(AT_FDCWD, t->tmp_path, AT_FDCWD, t->path, RENAME_NOREPLACE) == 0)
			return 0;
		if (errno != EINVAL && errno != ENOSYS)
			goto fail;
#endif
		if (rename(t->tmp_path, t->path) == 0)
			return 0;
		goto fail;
	}
#ifdef RENAME_EXCHANGE
	/* One atomic swap: readers see the old store or the new one. */
	if (renameat2(AT_FDCWD, t->tmp_path, AT_FDCWD, t->path, RENAME_EXCHANGE) == 0) {
		mig_remove_store(t->tmp_path, t->is_dir);
		return 0;
	}
	if (errno != EINVAL && errno != ENOSYS)
		goto fail;
#endif
	/* No exchange: a file is replaced atomically by rename(); a directory
	 * is moved aside first (a crash in between leaves it at PATH.old-PID). */
	if (!t->is_dir) {
		if (rename(t->tmp_path, t->path) == 0)
			return 0;
		goto fail;
	}
	snprintf(old, sizeof(old), "%s.old-%ld", t->path, (long)getpid());
	if (rename(t->path, old) == -1)
		goto fail;
	if (rename(t->tmp_path, t->path) == -1) {
		int saved = errno;
		rename(old, t->path);
		errno = saved;
		goto fail;
	}
	mig_remove_store(old, true);
	return 0;
fail:
	mig_seterr(e, "cannot move %s to %s: %s", t->tmp_path, t->path, strerror(errno));
	return -1;
}

int
mig_target_finish(struct mig_target *t, struct mig_err *e)
{
	char side[PATH_MAX];
	size_t i;
	int rc;

	if (t->st == NULL) {
		mig_seterr(e, "destination not open");
		return -1;
	}
	if (mig_check_interrupt(e) < 0 || mig_target_commit(t, e) < 0)
		goto fail;
	saker_store_close(t->st);
	t->st = NULL;
	t->q = NULL;
	if (t->direct) {
		if (mig_target_verify(t, e) < 0)
			goto fail;
		t->done = true;
		mig_meter_end(&t->meter);
		return 0;
	}
	/* The store was written with sync=never: make it durable once, now,
	 * before it becomes visible under its real name. */
	if (t->is_dir)
		rc = nftw(t->tmp_path, mig_fsync_one, 16, FTW_PHYS);
	else
		rc = mig_fsync_path(t->tmp_path);
	if (rc != 0) {
		mig_seterr(e, "syncing %s failed: %s", t->tmp_path, strerror(errno));
		goto fail;
	}
	if (mig_target_verify(t, e) < 0 || mig_check_interrupt(e) < 0)
		goto fail;
	/* A write-ahead log with frames next to a FILE destination would be
	 * replayed onto the new file: never swap under one.  An empty one
	 * (left by a read-only reader) and its index are just removed. */
	for (i = 0; !t->is_dir && i < 2; i++) {
		struct stat st;

		snprintf(side, sizeof(side), "%s%s", t->path, mig_sidecars[i]);
		if (i == 0 && lstat(side, &st) == 0 && st.st_size > 0) {
			mig_seterr(e, "%s is not empty (is a sakerd using %s, or did "
			    "one crash? start and stop it once); not replacing it",
			    side, t->path);
			goto fail;
		}
		unlink(side);
	}
	if (mig_target_place(t, e) < 0)
		goto fail;
	/* The temporary's own sidecars (its name is free again). */
	if (!t->is_dir)
		mig_remove_store(t->tmp_path, false);
	t->done = true;
	mig_meter_end(&t->meter);
	/* Past the point of no return: the new store is in place. */
	if (mig_fsync_parent(t->path) < 0)
		fprintf(stderr, "saker: warning: %s is in place, but syncing its "
		    "directory failed: %s\n", t->path, strerror(errno));
	return 0;
fail:
	mig_meter_end(&t->meter);
	return -1;
}

/* Delete every queue a failed direct migration wrote (the destination
 * was empty when it started). */
static int
mig_undo_one(void *arg, const char *name, size_t len)
{
	saker_store *s = arg;
	saker_queue *q;

	if (saker_store_queue_open(s, name, len, false, NULL, &q) == SAKER_OK)
		(void)saker_store_queue_delete(s, q);
	return 0;
}

static void
mig_undo_direct(struct mig_target *t)
{
	saker_store *s = t->st;
	struct saker_store_opts o = { .sync = SAKER_SYNC_ALWAYS };
	char err[512];

	if (s == NULL) {
		if (saker_store_open(t->spec, &o, &s, err, sizeof(err)) != SAKER_OK) {
			fprintf(stderr, "saker: could not reopen %s to undo a failed "
			    "migration: %s\n", t->spec, err);
			return;
		}
	}
	(void)saker_store_queues(s, mig_undo_one, s);
	if (saker_store_commit(s) != SAKER_OK)
		fprintf(stderr, "saker: undoing the failed migration into %s failed: "
		    "%s\n", t->spec, saker_store_errmsg(s));
	if (s != t->st)
		saker_store_close(s);
}

void
mig_target_free(struct mig_target *t)
{
	size_t i;

	if (t == NULL)
		return;
	if (t->meter.drawn)
		mig_meter_end(&t->meter);
	if (t->direct && !t->done && t->tmp_made)
		mig_undo_direct(t);
	if (t->st != NULL)
		saker_store_close(t->st);
	if (!t->direct && !t->done && t->tmp_made)
		mig_remove_store(t->tmp_path, t->is_dir);
	for (i = 0; i < t->nq; i++)
		free(t->qs[i].name);
	free(t->qs);
	free(t->spec);
	free(t->path);
	free(t->tmp_path);
	free(t->tmp_spec);
	free(t);
}
