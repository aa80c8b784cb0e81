/* proto3 JSON -> protobuf-c messages by descriptor (pbjson.h): reading. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "pbjson.h"
#include "pbjson_int.h"

static int json_to_msg(struct pj_ctx *c, const ProtobufCMessageDescriptor *d, const json_t *j, ProtobufCMessage *m,
                       int depth);

static ProtobufCMessage *msg_new(const ProtobufCMessageDescriptor *d) {
    ProtobufCMessage *m = malloc(d->sizeof_message);
    if (m) protobuf_c_message_init(d, m);
    return m;
}

/* A JSON number or numeric string as a whole number in [lo, hi] (signed) or
 * [0, uhi] (unsigned). */
static int read_int(struct pj_ctx *c, const json_t *j, bool is_unsigned, int64_t lo, int64_t hi, uint64_t uhi,
                    int64_t *sv, uint64_t *uv) {
    if (json_is_integer(j)) {
        json_int_t v = json_integer_value(j);
        if (is_unsigned ? (v < 0 || (uint64_t)v > uhi) : (v < lo || v > hi)) goto range;
        if (is_unsigned) *uv = (uint64_t)v;
        else *sv = v;
        return 0;
    }
    if (json_is_real(j)) {
        double v = json_real_value(j);
        if (v != floor(v)) goto bad;
        if (is_unsigned ? (v < 0 || v >= 18446744073709551616.0 || (uint64_t)v > uhi)
                        : (v < -9223372036854775808.0 || v >= 9223372036854775808.0 || (int64_t)v < lo ||
                           (int64_t)v > hi))
            goto range;
        if (is_unsigned) *uv = (uint64_t)v;
        else *sv = (int64_t)v;
        return 0;
    }
    if (json_is_string(j)) {
        const char *s = json_string_value(j);
        size_t n = json_string_length(j);
        if (!n || n > 24 || strlen(s) != n || (is_unsigned && s[0] == '-')) goto bad;
        for (size_t i = (s[0] == '-'); i < n; i++)
            if (s[i] < '0' || s[i] > '9') goto bad;
        if (s[0] == '-' && n == 1) goto bad;
        char *end;
        errno = 0;
        if (is_unsigned) {
            unsigned long long v = strtoull(s, &end, 10);
            if (errno || *end || v > uhi) goto range;
            *uv = v;
        } else {
            long long v = strtoll(s, &end, 10);
            if (errno || *end || v < lo || v > hi) goto range;
            *sv = v;
        }
        return 0;
    }
bad:
    pj_fail(c, "expected an integer");
    return -EINVAL;
range:
    pj_fail(c, "integer out of range for the field's type");
    return -ERANGE;
}

static int read_double(struct pj_ctx *c, const json_t *j, double *out) {
    if (json_is_number(j)) {
        *out = json_number_value(j);
        return 0;
    }
    if (json_is_string(j)) {
        const char *s = json_string_value(j);
        if (!strcmp(s, "NaN")) *out = NAN;
        else if (!strcmp(s, "Infinity")) *out = INFINITY;
        else if (!strcmp(s, "-Infinity")) *out = -INFINITY;
        else {
            char *end;
            errno = 0;
            double v = strtod(s, &end);
            /* numbers only: strtod would also take "nan", "inf" and hex */
            if (!*s || *end || errno || strlen(s) != json_string_length(j) || strpbrk(s, "xXnNiI")) {
                pj_fail(c, "expected a number");
                return -EINVAL;
            }
            *out = v;
        }
        return 0;
    }
    pj_fail(c, "expected a number");
    return -EINVAL;
}

/* Standard or URL base64, padded or not. */
static int read_bytes(struct pj_ctx *c, const json_t *j, ProtobufCBinaryData *out) {
    if (!json_is_string(j)) {
        pj_fail(c, "expected base64 text");
        return -EINVAL;
    }
    const char *s = json_string_value(j);
    size_t n = json_string_length(j);
    while (n && s[n - 1] == '=') n--;
    uint8_t *buf = malloc(n / 4 * 3 + 3);
    if (!buf) return -ENOMEM;
    uint32_t acc = 0;
    int bits = 0;
    size_t o = 0;
    for (size_t i = 0; i < n; i++) {
        unsigned char ch = (unsigned char)s[i];
        int v;
        if (ch >= 'A' && ch <= 'Z') v = ch - 'A';
        else if (ch >= 'a' && ch <= 'z') v = ch - 'a' + 26;
        else if (ch >= '0' && ch <= '9') v = ch - '0' + 52;
        else if (ch == '+' || ch == '-') v = 62;
        else if (ch == '/' || ch == '_') v = 63;
        else {
            free(buf);
            pj_fail(c, "invalid base64 at offset %zu", i);
            return -EINVAL;
        }
        acc = acc << 6 | (uint32_t)v;
        bits += 6;
        if (bits >= 8) {
            bits -= 8;
            buf[o++] = (uint8_t)(acc >> bits);
        }
    }
    if (n % 4 == 1 || (acc & ((1u << bits) - 1))) {
        free(buf);
        pj_fail(c, "invalid base64 length or trailing bits");
        return -EINVAL;
    }
    out->data = buf;
    out->len = o;
    return 0;
}

/* RFC 3339: "YYYY-MM-DDThh:mm:ss[.f{1,9}](Z|±hh:mm)". */
static int read_timestamp(struct pj_ctx *c, const json_t *j, int64_t *secs, int32_t *nanos) {
    const char *s = json_is_string(j) ? json_string_value(j) : NULL;
    int Y, M, D, h, mi, sec, used = 0;
    if (!s || strlen(s) > 40 || sscanf(s, "%4d-%2d-%2dT%2d:%2d:%2d%n", &Y, &M, &D, &h, &mi, &sec, &used) != 6 ||
        used != 19 || Y < 1 || M < 1 || M > 12 || D < 1 || D > 31 || h > 23 || mi > 59 || sec > 59)
        goto bad;
    const char *p = s + used;
    int32_t ns = 0;
    if (*p == '.') {
        int digits = 0;
        for (p++; *p >= '0' && *p <= '9'; p++, digits++)
            if (digits < 9) ns = ns * 10 + (*p - '0');
        if (!digits || digits > 9) goto bad;
        for (; digits < 9; digits++) ns *= 10;
    }
    int off = 0;
    if (*p == 'Z' && !p[1]) {
    } else if ((*p == '+' || *p == '-') && strlen(p) == 6 && p[3] == ':') {
        int oh, om;
        if (sscanf(p + 1, "%2d:%2d", &oh, &om) != 2 || oh > 23 || om > 59) goto bad;
        off = (oh * 60 + om) * 60 * (*p == '-' ? -1 : 1);
    } else {
        goto bad;
    }
    struct tm tm = {.tm_year = Y - 1900, .tm_mon = M - 1, .tm_mday = D, .tm_hour = h, .tm_min = mi, .tm_sec = sec};
    time_t t = timegm(&tm);
    if (tm.tm_mday != D) goto bad; /* 31 February */
    *secs = (int64_t)t - off;
    *nanos = ns;
    return 0;
bad:
    pj_fail(c, "expected an RFC 3339 timestamp such as \"2019-01-02T03:04:05Z\"");
    return -EINVAL;
}

/* A scalar, enum, string, bytes or message value of f from j into p. */
static int value_from_json(struct pj_ctx *c, const ProtobufCFieldDescriptor *f, const json_t *j, void *p, int depth) {
    int64_t sv = 0;
    uint64_t uv = 0;
    int rc;
    switch (f->type) {
    case PROTOBUF_C_TYPE_INT32:
    case PROTOBUF_C_TYPE_SINT32:
    case PROTOBUF_C_TYPE_SFIXED32:
        if ((rc = read_int(c, j, false, INT32_MIN, INT32_MAX, 0, &sv, &uv))) return rc;
        *(int32_t *)p = (int32_t)sv;
        return 0;
    case PROTOBUF_C_TYPE_UINT32:
    case PROTOBUF_C_TYPE_FIXED32:
        if ((rc = read_int(c, j, true, 0, 0, UINT32_MAX, &sv, &uv))) return rc;
        *(uint32_t *)p = (uint32_t)uv;
        return 0;
    case PROTOBUF_C_TYPE_INT64:
    case PROTOBUF_C_TYPE_SINT64:
    case PROTOBUF_C_TYPE_SFIXED64:
        if ((rc = read_int(c, j, false, INT64_MIN, INT64_MAX, 0, &sv, &uv))) return rc;
        *(int64_t *)p = sv;
        return 0;
    case PROTOBUF_C_TYPE_UINT64:
    case PROTOBUF_C_TYPE_FIXED64:
        if ((rc = read_int(c, j, true, 0, 0, UINT64_MAX, &sv, &uv))) return rc;
        *(uint64_t *)p = uv;
        return 0;
    case PROTOBUF_C_TYPE_FLOAT: {
        double v;
        if ((rc = read_double(c, j, &v))) return rc;
        if (isfinite(v) && fabs(v) > 3.4028234663852886e38) {
            pj_fail(c, "number out of range for a float");
            return -ERANGE;
        }
        *(float *)p = (float)v;
        return 0;
    }
    case PROTOBUF_C_TYPE_DOUBLE: return read_double(c, j, (double *)p);
    case PROTOBUF_C_TYPE_BOOL:
        if (!json_is_boolean(j)) {
            pj_fail(c, "expected true or false");
            return -EINVAL;
        }
        *(protobuf_c_boolean *)p = json_is_true(j);
        return 0;
    case PROTOBUF_C_TYPE_ENUM: {
        const ProtobufCEnumDescriptor *ed = f->descriptor;
        if (json_is_string(j)) {
            const ProtobufCEnumValue *ev = protobuf_c_enum_descriptor_get_value_by_name(ed, json_string_value(j));
            if (!ev || strlen(json_string_value(j)) != json_string_length(j)) {
                pj_fail(c, "unknown %s value \"%.64s\"", ed->name, json_string_value(j));
                return -EINVAL;
            }
            *(int32_t *)p = ev->value;
            return 0;
        }
        if ((rc = read_int(c, j, false, INT32_MIN, INT32_MAX, 0, &sv, &uv))) return rc;
        *(int32_t *)p = (int32_t)sv;
        return 0;
    }
    case PROTOBUF_C_TYPE_STRING: {
        if (!json_is_string(j)) {
            pj_fail(c, "expected a string");
            return -EINVAL;
        }
        if (strlen(json_string_value(j)) != json_string_length(j)) {
            pj_fail(c, "a string may not hold a NUL character");
            return -EINVAL;
        }
        char *s = strdup(json_string_value(j));
        if (!s) return -ENOMEM;
        *(char **)p = s;
        return 0;
    }
    case PROTOBUF_C_TYPE_BYTES: return read_bytes(c, j, p);
    case PROTOBUF_C_TYPE_MESSAGE: {
        const ProtobufCMessageDescriptor *sd = f->descriptor;
        ProtobufCMessage *sub = msg_new(sd);
        if (!sub) return -ENOMEM;
        *(ProtobufCMessage **)p = sub; /* freed with the parent, whatever happens next */
        return json_to_msg(c, sd, j, sub, depth + 1);
    }
    }
    return -EINVAL;
}

/* A map member name as the entry's key. */
static int map_key_from_text(struct pj_ctx *c, const ProtobufCFieldDescriptor *k, const char *key, void *p) {
    json_t *tmp;
    int rc;
    if (k->type == PROTOBUF_C_TYPE_STRING) {
        char *s = strdup(key);
        if (!s) return -ENOMEM;
        *(char **)p = s;
        return 0;
    }
    if (k->type == PROTOBUF_C_TYPE_BOOL) {
        if (strcmp(key, "true") && strcmp(key, "false")) {
            pj_fail(c, "map key \"%.64s\" is not true or false", key);
            return -EINVAL;
        }
        *(protobuf_c_boolean *)p = !strcmp(key, "true");
        return 0;
    }
    if (!(tmp = json_string(key))) return -ENOMEM;
    rc = value_from_json(c, k, tmp, p, 0);
    json_decref(tmp);
    return rc;
}

/* A string field left NULL by a failed read gets back its default when it
 * has one: "" for proto3's implicit presence (the field descriptor points
 * at protobuf_c_empty_string, which free_unpacked then leaves alone). A
 * proto2 field and a oneof member stay NULL (free_unpacked would free a
 * pointer that is not its default). */
static void string_default(const ProtobufCFieldDescriptor *f, void *p) {
    if (f->type == PROTOBUF_C_TYPE_STRING && !*(char **)p && f->label == PROTOBUF_C_LABEL_NONE &&
        !(f->flags & PROTOBUF_C_FIELD_FLAG_ONEOF) && f->default_value == &protobuf_c_empty_string)
        *(const char **)p = protobuf_c_empty_string;
}

static int count_items(struct pj_ctx *c, size_t n) {
    if (n > PBJSON_MAX_ITEMS - c->items) {
        pj_fail(c, "more than %u repeated elements and map entries", PBJSON_MAX_ITEMS);
        return -E2BIG;
    }
    c->items += n;
    return 0;
}

static int field_from_json(struct pj_ctx *c, const ProtobufCFieldDescriptor *f, const json_t *j, ProtobufCMessage *m,
                           int depth) {
    char *base = (char *)m;
    if (f->label != PROTOBUF_C_LABEL_REPEATED) {
        bool oneof = (f->flags & PROTOBUF_C_FIELD_FLAG_ONEOF) != 0;
        /* A oneof member is marked set first, so that what it allocates is
         * freed with the message even when it fails half-way (free_unpacked
         * frees the set member only, and a NULL one is skipped). */
        if (oneof) *(uint32_t *)(base + f->quantifier_offset) = f->id;
        if (f->type == PROTOBUF_C_TYPE_STRING || f->type == PROTOBUF_C_TYPE_MESSAGE)
            *(void **)(base + f->offset) = NULL; /* the default "" is static: never freed */
        int rc = value_from_json(c, f, j, base + f->offset, depth);
        string_default(f, base + f->offset);
        if (rc) return rc;
        if (!oneof && f->label == PROTOBUF_C_LABEL_OPTIONAL && f->type != PROTOBUF_C_TYPE_STRING &&
            f->type != PROTOBUF_C_TYPE_MESSAGE)
            *(protobuf_c_boolean *)(base + f->quantifier_offset) = 1;
        return 0;
    }
    size_t *np = (size_t *)(base + f->quantifier_offset);
    void **arrp = (void **)(base + f->offset);
    size_t es = pj_elem_size(f->type);
    if (pj_is_map(f)) {
        if (!json_is_object(j)) {
            pj_fail(c, "expected an object (a map)");
            return -EINVAL;
        }
        size_t n = json_object_size(j);
        int rc = count_items(c, n);
        if (rc) return rc;
        if (!n) return 0;
        if (!(*arrp = calloc(n, es))) return -ENOMEM;
        const ProtobufCMessageDescriptor *ed = f->descriptor;
        const char *key;
        const json_t *v;
        json_object_foreach((json_t *)j, key, v) {
            ProtobufCMessage *e = msg_new(ed);
            if (!e) return -ENOMEM;
            ((ProtobufCMessage **)*arrp)[(*np)++] = e;
            size_t old = pj_push(c, key, 0);
            const ProtobufCFieldDescriptor *kf = &ed->fields[0], *vf = &ed->fields[1];
            if (kf->type == PROTOBUF_C_TYPE_STRING) *(void **)((char *)e + kf->offset) = NULL;
            rc = map_key_from_text(c, kf, key, (char *)e + kf->offset);
            string_default(kf, (char *)e + kf->offset);
            if (!rc && !json_is_null(v)) {
                if (vf->type == PROTOBUF_C_TYPE_STRING || vf->type == PROTOBUF_C_TYPE_MESSAGE)
                    *(void **)((char *)e + vf->offset) = NULL;
                rc = value_from_json(c, vf, v, (char *)e + vf->offset, depth + 1);
                string_default(vf, (char *)e + vf->offset);
            }
            if (rc) return rc;
            pj_pop(c, old);
        }
        return 0;
    }
    if (!json_is_array(j)) {
        pj_fail(c, "expected an array");
        return -EINVAL;
    }
    size_t n = json_array_size(j);
    int rc = count_items(c, n);
    if (rc) return rc;
    if (!n) return 0;
    if (!(*arrp = calloc(n, es))) return -ENOMEM;
    for (size_t i = 0; i < n; i++) {
        const json_t *v = json_array_get(j, i);
        size_t old = pj_push(c, NULL, (long)i);
        if (json_is_null(v)) {
            pj_fail(c, "null is not allowed in a repeated field");
            return -EINVAL;
        }
        rc = value_from_json(c, f, v, (char *)*arrp + i * es, depth);
        if (rc) {
            /* an element that failed half-way still counts, so it is freed */
            if (f->type == PROTOBUF_C_TYPE_MESSAGE || f->type == PROTOBUF_C_TYPE_STRING ||
                f->type == PROTOBUF_C_TYPE_BYTES)
                (*np)++;
            return rc;
        }
        (*np)++;
        pj_pop(c, old);
    }
    return 0;
}

/* Field of d whose JSON name or field name is key, or NULL. */
static const ProtobufCFieldDescriptor *find_field(const ProtobufCMessageDescriptor *d, const char *key) {
    const ProtobufCFieldDescriptor *f = protobuf_c_message_descriptor_get_field_by_name(d, key);
    if (f) return f;
    char name[NAME_MAX_LEN];
    for (unsigned i = 0; i < d->n_fields; i++) {
        if (strlen(d->fields[i].name) >= sizeof name) continue;
        pbjson_field_name(&d->fields[i], name);
        if (!strcmp(name, key)) return &d->fields[i];
    }
    return NULL;
}

static int json_to_msg(struct pj_ctx *c, const ProtobufCMessageDescriptor *d, const json_t *j, ProtobufCMessage *m,
                       int depth) {
    if (depth > PBJSON_MAX_DEPTH) {
        pj_fail(c, "messages nested deeper than %d", PBJSON_MAX_DEPTH);
        return -E2BIG;
    }
    if (pj_is_timestamp(d) && d->n_fields == 2)
        return read_timestamp(c, j, (int64_t *)((char *)m + d->fields[0].offset),
                              (int32_t *)((char *)m + d->fields[1].offset));
    if (!json_is_object(j)) {
        pj_fail(c, "expected an object (a %s)", d->name);
        return -EINVAL;
    }
    unsigned char seen[256] = {0}; /* field index -> given; our messages have far fewer fields */
    if (d->n_fields > sizeof seen) {
        pj_fail(c, "message %s has too many fields", d->name);
        return -EINVAL;
    }
    const char *key;
    const json_t *v;
    json_object_foreach((json_t *)j, key, v) {
        const ProtobufCFieldDescriptor *f = find_field(d, key);
        size_t old = pj_push(c, key, 0);
        if (!f) {
            pj_fail(c, "unknown field of %s", d->name);
            return -EINVAL;
        }
        size_t idx = (size_t)(f - d->fields);
        if (seen[idx]) {
            pj_fail(c, "field given twice");
            return -EINVAL;
        }
        seen[idx] = 1;
        if (json_is_null(v)) { /* the default */
            pj_pop(c, old);
            continue;
        }
        if (f->flags & PROTOBUF_C_FIELD_FLAG_ONEOF) {
            uint32_t cur = *(uint32_t *)((char *)m + f->quantifier_offset);
            if (cur) {
                pj_fail(c, "another member of the same oneof is already set");
                return -EINVAL;
            }
        }
        int rc = field_from_json(c, f, v, m, depth);
        if (rc) return rc;
        pj_pop(c, old);
    }
    return 0;
}

ProtobufCMessage *pbjson_to_msg(const ProtobufCMessageDescriptor *d, const json_t *j, char *err, size_t errlen) {
    struct pj_ctx c = {.err = err, .errlen = errlen};
    if (err && errlen) err[0] = 0;
    ProtobufCMessage *m = msg_new(d);
    if (!m) {
        if (err && errlen) snprintf(err, errlen, "out of memory");
        return NULL;
    }
    int rc = json_to_msg(&c, d, j, m, 0);
    if (rc) {
        if (rc == -ENOMEM && err && errlen && !err[0]) snprintf(err, errlen, "out of memory");
        protobuf_c_message_free_unpacked(m, NULL);
        return NULL;
    }
    return m;
}

ProtobufCMessage *pbjson_parse(const ProtobufCMessageDescriptor *d, const char *buf, size_t len, char *err,
                               size_t errlen) {
    json_error_t je;
    json_t *j = json_loadb(buf, len, JSON_REJECT_DUPLICATES, &je);
    if (!j) {
        if (err && errlen) snprintf(err, errlen, "invalid JSON at line %d column %d: %s", je.line, je.column, je.text);
        return NULL;
    }
    ProtobufCMessage *m = pbjson_to_msg(d, j, err, errlen);
    json_decref(j);
    return m;
}
