/* fuzz_proto.c -- fuzz target: proto_parse_line() over framed input lines. */
#include "config.h"

#include <stdbool.h>
#include <string.h>

#include "fuzz.h"
#include "proto_text.h"
#include "qname.h"

/* Every pointer the parser hands back must lie inside the line. */
static bool
inside(const char *line, size_t len, const char *p, size_t plen)
{
	return p >= line && plen <= len && (size_t)(p - line) <= len - plen;
}

static void
check_cmd(const char *line, size_t len, const struct proto_cmd *cmd)
{
	size_t i;

	FUZZ_CHECK(cmd->type != PROTO_CMD_NONE);
	FUZZ_CHECK(cmd->nkeys <= PROTO_MAX_GET_KEYS);
	for (i = 0; i < cmd->nkeys; i++) {
		const struct proto_key *k = &cmd->keys[i];

		FUZZ_CHECK(inside(line, len, k->raw, k->raw_len));
		FUZZ_CHECK(inside(line, len, k->name, k->name_len));
		FUZZ_CHECK(k->name == k->raw);
		FUZZ_CHECK(k->name_len <= k->raw_len);
		/* docs/protocol.md, "Queue names": the parser only lets valid names through. */
		FUZZ_CHECK(saker_qname_valid(k->name, k->name_len));
		FUZZ_CHECK(k->timeout_ms >= -1);
		/* forbidden combinations never come out */
		if (k->opts & PROTO_OPT_PEEK)
			FUZZ_CHECK((k->opts & (PROTO_OPT_OPEN | PROTO_OPT_CLOSE |
			    PROTO_OPT_ABORT)) == 0);
		if (k->opts & PROTO_OPT_ABORT)
			FUZZ_CHECK((k->opts & (PROTO_OPT_OPEN |
			    PROTO_OPT_CLOSE)) == 0);
	}
	switch (cmd->type) {
	case PROTO_CMD_SET:
		FUZZ_CHECK(cmd->nkeys == 1);
		FUZZ_CHECK(cmd->delay_ms >= -1 && cmd->delay_ms <= 315360000000LL);
		FUZZ_CHECK(cmd->at_s >= -1);
		FUZZ_CHECK(cmd->delay_ms == -1 || cmd->at_s == -1);
		break;
	case PROTO_CMD_GET:
		FUZZ_CHECK(cmd->nkeys >= 1);
		break;
	case PROTO_CMD_DELETE:
	case PROTO_CMD_FLUSH:
	case PROTO_CMD_FLUSH_EXPIRED:
	case PROTO_CMD_MONITOR:
	case PROTO_CMD_CONFIRM:
		FUZZ_CHECK(cmd->nkeys == 1);
		break;
	default:
		break;
	}
}

static void
one_line(const char *line, size_t len)
{
	static struct proto_cmd cmd;
	const char *err;

	memset(&cmd, 0xa5, sizeof(cmd));
	err = proto_parse_line(line, len, &cmd);
	if (err == NULL) {
		check_cmd(line, len, &cmd);
		return;
	}
	/* Errors are one of the fixed replies, ending in CRLF. */
	FUZZ_CHECK(strlen(err) >= 7);
	FUZZ_CHECK(strcmp(err + strlen(err) - 2, "\r\n") == 0);
	FUZZ_CHECK(cmd.swallow >= -1);
}

int
fuzz_proto(const uint8_t *data, size_t size)
{
	const char *p = (const char *)data, *end = p + size, *nl;
	char *copy;
	size_t len;

	/* Frame as conn.c does: lines end in "\n", a "\r" before it is
	 * dropped; a line beyond the cap is never parsed.  Each line is
	 * copied into its own exact-size buffer so ASan sees any read past
	 * its end. */
	while (p < end) {
		nl = memchr(p, '\n', (size_t)(end - p));
		len = nl != NULL ? (size_t)(nl - p) : (size_t)(end - p);
		if (nl != NULL && len > 0 && p[len - 1] == '\r')
			len--;
		if ((len <= PROTO_MAX_LINE || (len <= PROTO_MAX_GET_LINE &&
		    proto_is_get_line(p, len))) && (copy = malloc(len > 0 ? len : 1)) != NULL) {
			memcpy(copy, p, len);
			one_line(copy, len);
			free(copy);
		}
		if (nl == NULL)
			break;
		p = nl + 1;
	}
	return 0;
}
