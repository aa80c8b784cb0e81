/* Reading JSON or YAML documents into jansson values, with explicit bounds.
 *
 * doc_parse() takes a buffer holding JSON or YAML (JSON is tried first; YAML
 * is a superset) and returns a new value the caller frees with json_decref,
 * or NULL with a message in err giving the line and what went wrong.
 * YAML: plain scalars resolve as YAML 1.2 core (null, ~, true/false, ints,
 * floats); quoted scalars are strings; aliases and anchors are refused (no
 * expansion bombs); only the first document is read. Limits: nesting depth
 * DOC_MAX_DEPTH, DOC_MAX_NODES values, and the caller's buffer size. */
#ifndef PELOTON_UTIL_YAMLJSON_H
#define PELOTON_UTIL_YAMLJSON_H

#include <jansson.h>
#include <stddef.h>

#define DOC_MAX_DEPTH 64
#define DOC_MAX_NODES 2000000
#define DOC_MAX_BYTES (64u << 20)

json_t *doc_parse(const char *buf, size_t len, char *err, size_t errlen);

/* Reads a whole file ("-" for stdin), at most DOC_MAX_BYTES, then doc_parse. */
json_t *doc_load_file(const char *path, char *err, size_t errlen);

#endif
