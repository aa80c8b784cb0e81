/* Internals of the proto3 JSON mapping shared by pbjson.c (writing) and
 * pbjson_read.c (reading). Not for use outside src/native. */
#ifndef PELOTON_NATIVE_PBJSON_INT_H
#define PELOTON_NATIVE_PBJSON_INT_H

#include <stdbool.h>
#include <stddef.h>

#include "pbjson.h"

#define NAME_MAX_LEN 128 /* field names in our protos are far shorter */

/* The path of the field being converted, for messages: "a.b[3].c". */
struct pj_ctx {
    char *err;
    size_t errlen;
    char path[512];
    size_t plen;
    size_t items; /* repeated elements and map entries so far */
};

void pj_fail(struct pj_ctx *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Appends ".name" (or "name" at the top) or "[idx]" (name NULL) to the path;
 * returns the old length for pj_pop. */
size_t pj_push(struct pj_ctx *c, const char *name, long idx);
void pj_pop(struct pj_ctx *c, size_t old);
/* Bytes of one element of a field of type t (a repeated field's array). */
size_t pj_elem_size(ProtobufCType t);
/* A map field: repeated XEntry messages with key = 1 and value = 2. */
bool pj_is_map(const ProtobufCFieldDescriptor *f);
bool pj_is_timestamp(const ProtobufCMessageDescriptor *d);

#endif
