/* jparse: json_loadb, faster. A parser over the bytes in memory (no stream
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
#include <stddef.h>

json_t *jparse_loadb(const char *buf, size_t len, size_t flags, json_error_t *error);

/* The parser alone, without json_loadb behind it: NULL for whatever it
 * refuses (the fuzz target compares this with json_loadb). */
json_t *jparse_try(const char *buf, size_t len, size_t flags);

#endif
