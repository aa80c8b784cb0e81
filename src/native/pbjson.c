/* proto3 JSON <-> protobuf-c messages by descriptor (pbjson.h): the shared
 * helpers and writing; reading is in pbjson_read.c. */
#include "pbjson.h"

#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base64.h"
#include "pbjson_int.h"

void pj_fail(struct pj_ctx *c, const char *fmt, ...) {
    if (!c->err || !c->errlen) return;
    char msg[384];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (c->plen > 160) snprintf(c->err, c->errlen, "...%s: %s", c->path + c->plen - 160, msg); /* the tail tells */
    else if (c->plen) snprintf(c->err, c->errlen, "%s: %s", c->path, msg);
    else snprintf(c->err, c->errlen, "%s", msg);
}

/* Appends ".name" (or "name" at the top) or "[i]" to the path; returns the
 * old length to restore. A path past the buffer is cut (messages only). */
size_t pj_push(struct pj_ctx *c, const char *name, long idx) {
    size_t old = c->plen;
    int n;
    if (name) n = snprintf(c->path + c->plen, sizeof c->path - c->plen, "%s%s", c->plen ? "." : "", name);
    else n = snprintf(c->path + c->plen, sizeof c->path - c->plen, "[%ld]", idx);
    if (n > 0) c->plen = c->plen + (size_t)n < sizeof c->path ? c->plen + (size_t)n : sizeof c->path - 1;
    return old;
}
void pj_pop(struct pj_ctx *c, size_t old) {
    c->plen = old;
    c->path[old] = 0;
}

void pbjson_field_name(const ProtobufCFieldDescriptor *f, char *out) {
    bool up = false;
    for (const char *p = f->name; *p; p++) {
        if (*p == '_') {
            up = true;
            continue;
        }
        *out++ = up && *p >= 'a' && *p <= 'z' ? (char)(*p - 'a' + 'A') : *p;
        up = false;
    }
    *out = 0;
}

size_t pj_elem_size(ProtobufCType t) {
    switch (t) {
    case PROTOBUF_C_TYPE_INT32:
    case PROTOBUF_C_TYPE_SINT32:
    case PROTOBUF_C_TYPE_SFIXED32:
    case PROTOBUF_C_TYPE_ENUM: return sizeof(int32_t);
    case PROTOBUF_C_TYPE_UINT32:
    case PROTOBUF_C_TYPE_FIXED32: return sizeof(uint32_t);
    case PROTOBUF_C_TYPE_INT64:
    case PROTOBUF_C_TYPE_SINT64:
    case PROTOBUF_C_TYPE_SFIXED64: return sizeof(int64_t);
    case PROTOBUF_C_TYPE_UINT64:
    case PROTOBUF_C_TYPE_FIXED64: return sizeof(uint64_t);
    case PROTOBUF_C_TYPE_FLOAT: return sizeof(float);
    case PROTOBUF_C_TYPE_DOUBLE: return sizeof(double);
    case PROTOBUF_C_TYPE_BOOL: return sizeof(protobuf_c_boolean);
    case PROTOBUF_C_TYPE_STRING: return sizeof(char *);
    case PROTOBUF_C_TYPE_BYTES: return sizeof(ProtobufCBinaryData);
    case PROTOBUF_C_TYPE_MESSAGE: return sizeof(ProtobufCMessage *);
    }
    return 0;
}

/* A map field: repeated XEntry messages with key = 1 and value = 2, which is
 * how protoc lowers map<K, V> (protobuf-c keeps no map flag). */
bool pj_is_map(const ProtobufCFieldDescriptor *f) {
    if (f->label != PROTOBUF_C_LABEL_REPEATED || f->type != PROTOBUF_C_TYPE_MESSAGE) return false;
    const ProtobufCMessageDescriptor *e = f->descriptor;
    size_t n = strlen(e->name);
    return e->n_fields == 2 && n > 5 && !strcmp(e->name + n - 5, "Entry") && e->fields[0].id == 1 &&
           !strcmp(e->fields[0].name, "key") && e->fields[1].id == 2 && !strcmp(e->fields[1].name, "value");
}

bool pj_is_timestamp(const ProtobufCMessageDescriptor *d) {
    return !strcmp(d->name, "google.protobuf.Timestamp");
}

/* ---------------------------------------------------------------- writing */

static json_t *msg_to_json(struct pj_ctx *c, const ProtobufCMessage *m, int depth);

static json_t *num_or_special(double v) {
    if (isnan(v)) return json_string("NaN");
    if (isinf(v)) return json_string(v > 0 ? "Infinity" : "-Infinity");
    return json_real(v);
}

static json_t *u64_string(uint64_t v) {
    char b[24];
    snprintf(b, sizeof b, "%" PRIu64, v);
    return json_string(b);
}

static json_t *i64_string(int64_t v) {
    char b[24];
    snprintf(b, sizeof b, "%" PRId64, v);
    return json_string(b);
}

/* Seconds since the epoch with nanos as RFC 3339 in UTC; NULL when out of
 * the years 1 to 9999 that the format covers. */
static json_t *timestamp_text(int64_t secs, int32_t nanos) {
    /* 0001-01-01T00:00:00Z and 9999-12-31T23:59:59Z */
    if (secs < -62135596800LL || secs > 253402300799LL || nanos < 0 || nanos > 999999999) return NULL;
    time_t t = (time_t)secs;
    struct tm tm;
    if (!gmtime_r(&t, &tm)) return NULL;
    char b[48];
    int w = snprintf(b, sizeof b, "%04d-%02d-%02dT%02d:%02d:%02d", tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday,
                     tm.tm_hour, tm.tm_min, tm.tm_sec);
    if (w <= 0 || (size_t)w >= sizeof b) return NULL;
    size_t n = (size_t)w;
    if (nanos % 1000000 == 0 && nanos) snprintf(b + n, sizeof b - n, ".%03dZ", nanos / 1000000);
    else if (nanos % 1000 == 0 && nanos) snprintf(b + n, sizeof b - n, ".%06dZ", nanos / 1000);
    else if (nanos) snprintf(b + n, sizeof b - n, ".%09dZ", nanos);
    else snprintf(b + n, sizeof b - n, "Z");
    return json_string(b);
}

/* One value of field f at p (an element for a repeated field). */
static json_t *value_to_json(struct pj_ctx *c, const ProtobufCFieldDescriptor *f, const void *p, int depth) {
    switch (f->type) {
    case PROTOBUF_C_TYPE_INT32:
    case PROTOBUF_C_TYPE_SINT32:
    case PROTOBUF_C_TYPE_SFIXED32: return json_integer(*(const int32_t *)p);
    case PROTOBUF_C_TYPE_UINT32:
    case PROTOBUF_C_TYPE_FIXED32: return json_integer(*(const uint32_t *)p);
    case PROTOBUF_C_TYPE_INT64:
    case PROTOBUF_C_TYPE_SINT64:
    case PROTOBUF_C_TYPE_SFIXED64: return i64_string(*(const int64_t *)p);
    case PROTOBUF_C_TYPE_UINT64:
    case PROTOBUF_C_TYPE_FIXED64: return u64_string(*(const uint64_t *)p);
    case PROTOBUF_C_TYPE_FLOAT: return num_or_special(*(const float *)p);
    case PROTOBUF_C_TYPE_DOUBLE: return num_or_special(*(const double *)p);
    case PROTOBUF_C_TYPE_BOOL: return json_boolean(*(const protobuf_c_boolean *)p);
    case PROTOBUF_C_TYPE_ENUM: {
        int32_t v = *(const int32_t *)p;
        const ProtobufCEnumValue *ev = protobuf_c_enum_descriptor_get_value(f->descriptor, v);
        return ev ? json_string(ev->name) : json_integer(v);
    }
    case PROTOBUF_C_TYPE_STRING: {
        const char *s = *(char *const *)p;
        json_t *j = json_string(s ? s : "");
        if (!j) pj_fail(c, "string is not valid UTF-8");
        return j;
    }
    case PROTOBUF_C_TYPE_BYTES: {
        const ProtobufCBinaryData *b = p;
        char *out = malloc(b64_encoded_len(b->len, true) + 1);
        if (!out) return NULL;
        size_t n = b64_encode(b->data, b->len, false, true, out);
        json_t *j = json_stringn(out, n);
        free(out);
        return j;
    }
    case PROTOBUF_C_TYPE_MESSAGE: {
        const ProtobufCMessage *sub = *(ProtobufCMessage *const *)p;
        if (!sub) return json_object();
        return msg_to_json(c, sub, depth + 1);
    }
    }
    return NULL;
}

static bool value_is_default(const ProtobufCFieldDescriptor *f, const void *p) {
    switch (f->type) {
    case PROTOBUF_C_TYPE_INT32:
    case PROTOBUF_C_TYPE_SINT32:
    case PROTOBUF_C_TYPE_SFIXED32:
    case PROTOBUF_C_TYPE_ENUM:
    case PROTOBUF_C_TYPE_UINT32:
    case PROTOBUF_C_TYPE_FIXED32: return *(const uint32_t *)p == 0;
    case PROTOBUF_C_TYPE_INT64:
    case PROTOBUF_C_TYPE_SINT64:
    case PROTOBUF_C_TYPE_SFIXED64:
    case PROTOBUF_C_TYPE_UINT64:
    case PROTOBUF_C_TYPE_FIXED64: return *(const uint64_t *)p == 0;
    case PROTOBUF_C_TYPE_FLOAT: return *(const float *)p == 0 && !signbit(*(const float *)p);
    case PROTOBUF_C_TYPE_DOUBLE: return *(const double *)p == 0 && !signbit(*(const double *)p);
    case PROTOBUF_C_TYPE_BOOL: return !*(const protobuf_c_boolean *)p;
    case PROTOBUF_C_TYPE_STRING: {
        const char *s = *(char *const *)p;
        return !s || !*s;
    }
    case PROTOBUF_C_TYPE_BYTES: return ((const ProtobufCBinaryData *)p)->len == 0;
    case PROTOBUF_C_TYPE_MESSAGE: return *(ProtobufCMessage *const *)p == NULL;
    }
    return true;
}

/* Whether a singular field is present on the wire's terms. */
static bool field_present(const ProtobufCMessage *m, const ProtobufCFieldDescriptor *f) {
    const char *base = (const char *)m;
    if (f->flags & PROTOBUF_C_FIELD_FLAG_ONEOF) return *(const uint32_t *)(base + f->quantifier_offset) == f->id;
    if (f->label == PROTOBUF_C_LABEL_OPTIONAL && f->type != PROTOBUF_C_TYPE_STRING &&
        f->type != PROTOBUF_C_TYPE_MESSAGE)
        return *(const protobuf_c_boolean *)(base + f->quantifier_offset);
    if (f->label == PROTOBUF_C_LABEL_OPTIONAL) return *(void *const *)(base + f->offset) != NULL;
    if (f->label == PROTOBUF_C_LABEL_REQUIRED) return true;
    return !value_is_default(f, base + f->offset);
}

/* A map entry's key as the member name. */
static int map_key_text(const ProtobufCMessage *e, char *out, size_t len) {
    const ProtobufCFieldDescriptor *k = &e->descriptor->fields[0];
    const void *p = (const char *)e + k->offset;
    switch (k->type) {
    case PROTOBUF_C_TYPE_STRING: {
        const char *s = *(char *const *)p;
        snprintf(out, len, "%s", s ? s : "");
        return strlen(s ? s : "") < len ? 0 : -1;
    }
    case PROTOBUF_C_TYPE_BOOL: snprintf(out, len, "%s", *(const protobuf_c_boolean *)p ? "true" : "false"); return 0;
    case PROTOBUF_C_TYPE_INT32:
    case PROTOBUF_C_TYPE_SINT32:
    case PROTOBUF_C_TYPE_SFIXED32: snprintf(out, len, "%" PRId32, *(const int32_t *)p); return 0;
    case PROTOBUF_C_TYPE_UINT32:
    case PROTOBUF_C_TYPE_FIXED32: snprintf(out, len, "%" PRIu32, *(const uint32_t *)p); return 0;
    case PROTOBUF_C_TYPE_INT64:
    case PROTOBUF_C_TYPE_SINT64:
    case PROTOBUF_C_TYPE_SFIXED64: snprintf(out, len, "%" PRId64, *(const int64_t *)p); return 0;
    case PROTOBUF_C_TYPE_UINT64:
    case PROTOBUF_C_TYPE_FIXED64: snprintf(out, len, "%" PRIu64, *(const uint64_t *)p); return 0;
    default: return -1; /* protoc allows no other key types */
    }
}

static json_t *field_to_json(struct pj_ctx *c, const ProtobufCMessage *m, const ProtobufCFieldDescriptor *f,
                             int depth) {
    const char *base = (const char *)m;
    if (f->label != PROTOBUF_C_LABEL_REPEATED) return value_to_json(c, f, base + f->offset, depth);
    size_t n = *(const size_t *)(base + f->quantifier_offset);
    const char *arr = *(char *const *)(base + f->offset);
    size_t es = pj_elem_size(f->type);
    if (pj_is_map(f)) {
        json_t *obj = json_object();
        for (size_t i = 0; obj && i < n; i++) {
            const ProtobufCMessage *e = ((ProtobufCMessage *const *)arr)[i];
            char key[4096];
            if (!e || map_key_text(e, key, sizeof key)) {
                pj_fail(c, "map key too long");
                json_decref(obj);
                return NULL;
            }
            const ProtobufCFieldDescriptor *vf = &e->descriptor->fields[1];
            json_t *v = value_to_json(c, vf, (const char *)e + vf->offset, depth + 1);
            if (!v || json_object_set_new(obj, key, v)) {
                if (!*c->err) pj_fail(c, "map key \"%s\" is not valid UTF-8", key);
                json_decref(obj);
                return NULL;
            }
        }
        return obj;
    }
    json_t *a = json_array();
    for (size_t i = 0; a && i < n; i++) {
        json_t *v = value_to_json(c, f, arr + i * es, depth);
        if (!v || json_array_append_new(a, v)) {
            json_decref(a);
            return NULL;
        }
    }
    return a;
}

static json_t *msg_to_json(struct pj_ctx *c, const ProtobufCMessage *m, int depth) {
    const ProtobufCMessageDescriptor *d = m->descriptor;
    if (depth > PBJSON_MAX_DEPTH) {
        pj_fail(c, "messages nested deeper than %d", PBJSON_MAX_DEPTH);
        return NULL;
    }
    if (pj_is_timestamp(d) && d->n_fields == 2) {
        json_t *t = timestamp_text(*(const int64_t *)((const char *)m + d->fields[0].offset),
                                   *(const int32_t *)((const char *)m + d->fields[1].offset));
        if (!t) pj_fail(c, "timestamp out of the years 1 to 9999");
        return t;
    }
    json_t *obj = json_object();
    if (!obj) return NULL;
    for (unsigned i = 0; i < d->n_fields; i++) {
        const ProtobufCFieldDescriptor *f = &d->fields[i];
        if (f->label == PROTOBUF_C_LABEL_REPEATED) {
            if (!*(const size_t *)((const char *)m + f->quantifier_offset)) continue;
        } else if (!field_present(m, f)) {
            continue;
        }
        char name[NAME_MAX_LEN];
        if (strlen(f->name) >= sizeof name) continue; /* not in our protos */
        pbjson_field_name(f, name);
        size_t old = pj_push(c, name, 0);
        json_t *v = field_to_json(c, m, f, depth);
        pj_pop(c, old);
        if (!v) {
            json_decref(obj);
            return NULL;
        }
        json_object_set_new(obj, name, v);
    }
    return obj;
}

json_t *pbjson_from_msg(const ProtobufCMessage *m, char *err, size_t errlen) {
    struct pj_ctx c = {.err = err, .errlen = errlen};
    if (err && errlen) err[0] = 0;
    json_t *j = msg_to_json(&c, m, 0);
    if (!j && err && errlen && !err[0]) snprintf(err, errlen, "out of memory");
    return j;
}

char *pbjson_dump(const ProtobufCMessage *m, size_t *len, char *err, size_t errlen) {
    json_t *j = pbjson_from_msg(m, err, errlen);
    if (!j) return NULL;
    char *s = json_dumps(j, JSON_COMPACT | JSON_ENCODE_ANY | JSON_REAL_PRECISION(17));
    json_decref(j);
    if (!s && err && errlen) snprintf(err, errlen, "out of memory");
    if (s && len) *len = strlen(s);
    return s;
}

