/* jparse: json_loadb and json_dumps, faster. A parser over the bytes in memory (no stream
 * callbacks, ASCII runs of strings copied once) that builds the same jansson
 * values json_loadb builds, for the hot paths: watch events, request bodies,
 * stored objects.
 *
 * Contract: the same as json_loadb(buf, len, flags, error) for the flags
 * JSON_REJECT_DUPLICATES and JSON_DECODE_ANY (any other flag: json_loadb is
 * called). Input json_loadb accepts gives an equal value (same types, object
 * member order, integers as integers); input it refuses is refused. On a
 * refusal json_loadb itself is run to fill error with its own message, and
 * if it accepts after all, its value is returned (a guard, never the normal
 * path). The caller owns the result (json_decref). A differential fuzz target
 * (fuzz/fuzz_jparse.c) holds the two to the same answers. */
#ifndef PELOTON_JPARSE_H
#define PELOTON_JPARSE_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <string.h>

json_t *jparse_loadb(const char *buf, size_t len, size_t flags, json_error_t *error);

/* The parser alone, without json_loadb behind it: NULL for whatever it
 * refuses (the fuzz target compares this with json_loadb). */
json_t *jparse_try(const char *buf, size_t len, size_t flags);

/* jparse_filtered: one step of the path from the top value to an object
 * member: an object member's key (not NUL-terminated), or key NULL for an
 * array element. */
struct jparse_seg {
    const char *key;
    size_t len;
};
#define JPARSE_PATH_MAX 16 /* members deeper than this are always built */
/* Whether step s is the member named k (n bytes), for filters. */
static inline bool jparse_seg_is(const struct jparse_seg *s, const char *k, size_t n) {
    return s->key && s->len == n && !memcmp(s->key, k, n);
}
/* The same for a string literal. */
#define JPARSE_SEG_IS(s, lit) jparse_seg_is((s), lit, sizeof lit - 1)
/* Whether to build member key of the object at path (depth steps from the
 * top value; path[i] for i < depth). */
typedef bool (*jparse_keep_fn)(void *ud, const struct jparse_seg *path, int depth, const char *key, size_t len);

/* jparse_try that builds only the object members keep keeps: the others are
 * read, checked as json_loadb checks them, and left out (nothing inside a
 * dropped member is asked about). The same input is refused as by
 * jparse_try; the value equals jparse_try's with the dropped members
 * deleted. Flags: 0 or JSON_DECODE_ANY (else NULL). NULL for what it refuses
 * (no error message). */
json_t *jparse_filtered(const char *buf, size_t len, size_t flags, jparse_keep_fn keep, void *ud);

/* Length of the UTF-8 sequence at p (p < end) that jansson accepts: no
 * overlong forms, surrogates or code points past U+10FFFF; 0 when invalid. */
size_t jparse_utf8_len(const unsigned char *p, const unsigned char *end);

/* json_dumps(v, flags), faster, for JSON_COMPACT with or without
 * JSON_ENCODE_ANY (other flags: json_dumps is called): the same bytes
 * (members in insertion order, jansson's escapes, reals formatted by jansson
 * itself), NULL where it fails (invalid UTF-8 in a string, a scalar without
 * JSON_ENCODE_ANY, nesting past JSON_PARSER_MAX_DEPTH). *len (may be NULL)
 * gets the length. The caller frees the result (jdump.c). */
char *jdump(const json_t *v, size_t flags, size_t *len);

/* Appends s (n bytes) to the growing buffer (*buf, *len, *cap: realloc'd
 * as needed) as a quoted JSON string, escaped as jdump escapes it. 0, or -1
 * when out of memory or s is not UTF-8 (*len then unchanged). For bodies
 * written as text instead of built as trees. */
int jdump_append_string(char **buf, size_t *len, size_t *cap, const char *s, size_t n);
/* The same for bytes as they are (JSON text the caller writes itself). */
int jdump_append(char **buf, size_t *len, size_t *cap, const char *s, size_t n);

#endif
