/* bytes.c -- integers to and from bytes (bytes.h). */
#include "config.h"

#include "bytes.h"

void
saker_put_be16(unsigned char *p, uint16_t v)
{
	p[0] = (unsigned char)(v >> 8);
	p[1] = (unsigned char)v;
}

uint16_t
saker_get_be16(const unsigned char *p)
{
	return (uint16_t)(p[0] << 8 | p[1]);
}

void
saker_put_be32(unsigned char *p, uint32_t v)
{
	p[0] = (unsigned char)(v >> 24);
	p[1] = (unsigned char)(v >> 16);
	p[2] = (unsigned char)(v >> 8);
	p[3] = (unsigned char)v;
}

void
saker_put_be64(unsigned char *p, uint64_t v)
{
	saker_put_be32(p, (uint32_t)(v >> 32));
	saker_put_be32(p + 4, (uint32_t)v);
}

uint32_t
saker_get_be32(const unsigned char *p)
{
	return ((uint32_t)p[0] << 24) | ((uint32_t)p[1] << 16) |
	    ((uint32_t)p[2] << 8) | p[3];
}

uint64_t
saker_get_be64(const unsigned char *p)
{
	return ((uint64_t)saker_get_be32(p) << 32) | saker_get_be32(p + 4);
}

void
saker_put_le32(unsigned char *p, uint32_t v)
{
	p[0] = (unsigned char)v;
	p[1] = (unsigned char)(v >> 8);
	p[2] = (unsigned char)(v >> 16);
	p[3] = (unsigned char)(v >> 24);
}

void
saker_put_le64(unsigned char *p, uint64_t v)
{
	saker_put_le32(p, (uint32_t)v);
	saker_put_le32(p + 4, (uint32_t)(v >> 32));
}

uint32_t
saker_get_le32(const unsigned char *p)
{
	return ((uint32_t)p[3] << 24) | ((uint32_t)p[2] << 16) |
	    ((uint32_t)p[1] << 8) | p[0];
}

uint64_t
saker_get_le64(const unsigned char *p)
{
	return ((uint64_t)saker_get_le32(p + 4) << 32) | saker_get_le32(p);
}
