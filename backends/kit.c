/* kit.c -- helpers the store drivers share (see kit.h). */
#include "config.h"

#include <stdbool.h>
#include <string.h>

#include "kit.h"

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define KIT_HAVE_SSE42 1
#include <nmmintrin.h>
#endif

/* ------------------------------------------------------------------ */
/* CRC32C */

/* Slicing-by-8 tables for the reflected polynomial 0x82f63b78. */
static uint32_t crc_tab[8][256];
static bool crc_tab_ready;

static void
crc_init_tab(void)
{
	uint32_t c;
	int i, k;

	for (i = 0; i < 256; i++) {
		c = (uint32_t)i;
		for (k = 0; k < 8; k++)
			c = (c & 1) ? (c >> 1) ^ 0x82f63b78u : c >> 1;
		crc_tab[0][i] = c;
	}
	for (i = 0; i < 256; i++)
		for (k = 1; k < 8; k++)
			crc_tab[k][i] = (crc_tab[k - 1][i] >> 8) ^
			    crc_tab[0][crc_tab[k - 1][i] & 0xff];
	crc_tab_ready = true;
}

static uint32_t
crc_sw(uint32_t c, const unsigned char *p, size_t len)
{
	uint64_t w;

	if (!crc_tab_ready)
		crc_init_tab();
	while (len > 0 && ((uintptr_t)p & 7) != 0) {
		c = crc_tab[0][(c ^ *p++) & 0xff] ^ (c >> 8);
		len--;
	}
	for (; len >= 8; len -= 8, p += 8) {
		/* the tables are little-endian's, on every host */
		w = saker_get_le64(p) ^ c;
		c = crc_tab[7][w & 0xff] ^ crc_tab[6][(w >> 8) & 0xff] ^
		    crc_tab[5][(w >> 16) & 0xff] ^ crc_tab[4][(w >> 24) & 0xff] ^
		    crc_tab[3][(w >> 32) & 0xff] ^ crc_tab[2][(w >> 40) & 0xff] ^
		    crc_tab[1][(w >> 48) & 0xff] ^ crc_tab[0][w >> 56];
	}
	while (len-- > 0)
		c = crc_tab[0][(c ^ *p++) & 0xff] ^ (c >> 8);
	return c;
}

#ifdef KIT_HAVE_SSE42
__attribute__((target("sse4.2")))
static uint32_t
crc_hw(uint32_t c, const unsigned char *p, size_t len)
{
	uint64_t c64, w;

	while (len > 0 && ((uintptr_t)p & 7) != 0) {
		c = _mm_crc32_u8(c, *p++);
		len--;
	}
	c64 = c;
	for (; len >= 8; len -= 8, p += 8) {
		memcpy(&w, p, 8);
		c64 = _mm_crc32_u64(c64, w);
	}
	c = (uint32_t)c64;
	while (len-- > 0)
		c = _mm_crc32_u8(c, *p++);
	return c;
}
#endif

/* 0 = not probed yet, 1 = software, 2 = SSE4.2 */
static int crc_impl;

int
kit_crc32c_force(int force)
{
	crc_impl = force;
#ifdef KIT_HAVE_SSE42
	if (crc_impl == 2 && !__builtin_cpu_supports("sse4.2"))
		crc_impl = 1;
#else
	if (crc_impl == 2)
		crc_impl = 1;
#endif
	return crc_impl;
}

uint32_t
kit_crc32c(uint32_t crc, const void *p, size_t len)
{
	uint32_t c = ~crc;

	if (crc_impl == 0)
		kit_crc32c_force(2);	/* the instruction if the CPU has it */
#ifdef KIT_HAVE_SSE42
	if (crc_impl == 2)
		return ~crc_hw(c, p, len);
#endif
	return ~crc_sw(c, p, len);
}

uint32_t
kit_item_crc(uint32_t flags, int64_t expires_ms, int64_t created_ms,
    const void *data, size_t len)
{
	unsigned char h[20];

	saker_put_be32(h, flags);
	saker_put_be64(h + 4, (uint64_t)expires_ms);
	saker_put_be64(h + 12, (uint64_t)created_ms);
	return kit_crc32c(kit_crc32c(0, h, sizeof(h)), data, len);
}
