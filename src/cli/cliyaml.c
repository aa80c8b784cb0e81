#include "cliyaml.h"

#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <yaml.h>

#include "pbjson.h"

struct yctx {
    yaml_parser_t parser;
    const char *name; /* the file's, for messages */
    char *err;
    size_t errlen;
    size_t nodes;
    char path[512]; /* the field being read: "defaultConfig.resource.cpuLimit" */
    size_t plen;
    FILE *skipped; /* non-NULL: unknown fields are skipped and named here */
};

static void yfail(struct yctx *c, size_t line, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void yfail(struct yctx *c, size_t line, const char *fmt, ...) {
    char why[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why, sizeof why, fmt, ap);
    va_end(ap);
    if (c->plen) snprintf(c->err, c->errlen, "%s:%zu: %s: %s", c->name, line + 1, c->path, why);
    else snprintf(c->err, c->errlen, "%s:%zu: %s", c->name, line + 1, why);
}

/* Appends ".name" (or "name" first) or "[idx]" (name NULL); returns the old
 * length to restore. A path too long for the buffer is cut, never overrun. */
static size_t ypush(struct yctx *c, const char *name, size_t idx) {
    size_t old = c->plen, room = sizeof c->path - c->plen;
    int n = name ? snprintf(c->path + c->plen, room, "%s%s", c->plen ? "." : "", name)
                 : snprintf(c->path + c->plen, room, "[%zu]", idx);
    if (n > 0) c->plen += (size_t)n < room ? (size_t)n : room - 1;
    return old;
}

static void ypop(struct yctx *c, size_t old) {
    c->plen = old;
    c->path[old] = 0;
}

/* The next event; 0, or -1 with the parser's error (and its line) in err. */
static int ynext(struct yctx *c, yaml_event_t *ev) {
    if (yaml_parser_parse(&c->parser, ev)) return 0;
    const char *what = c->parser.problem ? c->parser.problem : "not valid YAML";
    size_t line = c->parser.problem_mark.line;
    if (c->parser.context)
        snprintf(c->err, c->errlen, "%s:%zu: %s %s", c->name, line + 1, what, c->parser.context);
    else snprintf(c->err, c->errlen, "%s:%zu: %s", c->name, line + 1, what);
    return -1;
}

static size_t ev_line(const yaml_event_t *ev) { return ev->start_mark.line; }

static const char *ev_kind(const yaml_event_t *ev) {
    switch (ev->type) {
    case YAML_MAPPING_START_EVENT: return "a mapping";
    case YAML_SEQUENCE_START_EVENT: return "a list";
    case YAML_SCALAR_EVENT: return "a scalar";
    case YAML_ALIAS_EVENT: return "an alias";
    default: return "nothing";
    }
}

/* Anchors, aliases and tags other than YAML's own are refused: aliases
 * would let a small file expand without bound, and the field, not a tag,
 * types a value here. */
static int check_node(struct yctx *c, const yaml_event_t *ev) {
    const yaml_char_t *anchor = NULL, *tag = NULL;
    switch (ev->type) {
    case YAML_ALIAS_EVENT: yfail(c, ev_line(ev), "aliases (*name) are not supported"); return -1;
    case YAML_SCALAR_EVENT: anchor = ev->data.scalar.anchor; tag = ev->data.scalar.tag; break;
    case YAML_MAPPING_START_EVENT: anchor = ev->data.mapping_start.anchor; tag = ev->data.mapping_start.tag; break;
    case YAML_SEQUENCE_START_EVENT:
        anchor = ev->data.sequence_start.anchor;
        tag = ev->data.sequence_start.tag;
        break;
    default: yfail(c, ev_line(ev), "expected a value"); return -1;
    }
    if (anchor) {
        yfail(c, ev_line(ev), "anchors (&name) are not supported");
        return -1;
    }
    if (tag && strncmp((const char *)tag, "tag:yaml.org,2002:", 18) && strcmp((const char *)tag, "!")) {
        yfail(c, ev_line(ev), "tag %.64s is not supported", (const char *)tag);
        return -1;
    }
    if (++c->nodes > CLIYAML_MAX_NODES) {
        yfail(c, ev_line(ev), "more than %d values", CLIYAML_MAX_NODES);
        return -1;
    }
    return 0;
}

static bool is_null(const yaml_event_t *ev) {
    if (ev->type != YAML_SCALAR_EVENT || ev->data.scalar.style != YAML_PLAIN_SCALAR_STYLE) return false;
    const char *s = (const char *)ev->data.scalar.value;
    return ev->data.scalar.length == 0 || !strcmp(s, "~") || !strcmp(s, "null") || !strcmp(s, "Null") ||
           !strcmp(s, "NULL");
}

/* A map field: repeated XEntry messages with key = 1 and value = 2 (how
 * protoc lowers map<K, V>; protobuf-c keeps no map flag). */
static bool is_map(const ProtobufCFieldDescriptor *f) {
    if (f->label != PROTOBUF_C_LABEL_REPEATED || f->type != PROTOBUF_C_TYPE_MESSAGE) return false;
    const ProtobufCMessageDescriptor *e = f->descriptor;
    size_t n = strlen(e->name);
    return e->n_fields == 2 && n > 5 && !strcmp(e->name + n - 5, "Entry") && e->fields[0].id == 1 &&
           e->fields[1].id == 2;
}

/* Names compared without case, '_' and '-': how Peloton's YAML (Go's
 * lowercased field names) and proto's own spellings meet. */
static bool name_matches(const char *field, const char *key) {
    for (;;) {
        while (*field == '_') field++;
        while (*key == '_' || *key == '-') key++;
        if (!*field || !*key) return !*field && !*key;
        if (tolower((unsigned char)*field) != tolower((unsigned char)*key)) return false;
        field++;
        key++;
    }
}

static const ProtobufCFieldDescriptor *find_field(const ProtobufCMessageDescriptor *d, const char *key) {
    for (unsigned i = 0; i < d->n_fields; i++)
        if (!strcmp(d->fields[i].name, key)) return &d->fields[i];
    for (unsigned i = 0; i < d->n_fields; i++)
        if (name_matches(d->fields[i].name, key)) return &d->fields[i];
    return NULL;
}

/* The text of a scalar that must not hold a NUL (numbers, names). */
static const char *plain_text(struct yctx *c, const yaml_event_t *ev) {
    const char *s = (const char *)ev->data.scalar.value;
    if (strlen(s) != ev->data.scalar.length) {
        yfail(c, ev_line(ev), "unexpected NUL character");
        return NULL;
    }
    return s;
}

static json_t *int_json(struct yctx *c, const yaml_event_t *ev, bool is_signed, int bits) {
    const char *s = plain_text(c, ev);
    if (!s) return NULL;
    const char *p = s + (*s == '+' || (*s == '-' && is_signed));
    bool digits = *p != 0;
    for (const char *q = p; *q; q++) digits = digits && isdigit((unsigned char)*q);
    if (!digits) {
        yfail(c, ev_line(ev), "expected %s integer, got \"%.64s\"", is_signed ? "an" : "a non-negative", s);
        return NULL;
    }
    errno = 0;
    if (is_signed) {
        long long v = strtoll(s, NULL, 10);
        if (errno || (bits == 32 && (v < INT32_MIN || v > INT32_MAX))) {
            yfail(c, ev_line(ev), "%.64s is out of range for a %d-bit integer", s, bits);
            return NULL;
        }
        return json_integer(v);
    }
    unsigned long long v = strtoull(p, NULL, 10);
    if (errno || (bits == 32 && v > UINT32_MAX)) {
        yfail(c, ev_line(ev), "%.64s is out of range for an unsigned %d-bit integer", s, bits);
        return NULL;
    }
    if (v > (unsigned long long)LLONG_MAX) {
        char t[32];
        snprintf(t, sizeof t, "%llu", v);
        return json_string(t);
    }
    return json_integer((json_int_t)v);
}

static json_t *float_json(struct yctx *c, const yaml_event_t *ev) {
    const char *s = plain_text(c, ev);
    if (!s) return NULL;
    const char *p = s + (*s == '+' || *s == '-');
    if (!strcasecmp(p, ".inf") || !strcmp(p, "Infinity"))
        return json_string(*s == '-' ? "-Infinity" : "Infinity");
    if (!strcasecmp(s, ".nan") || !strcmp(s, "NaN")) return json_string("NaN");
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    /* strtod also reads hex, "inf" and "nan": YAML's floats are decimal */
    if (!*s || *end || strpbrk(s, "xXiInN") || errno || !isfinite(v)) {
        yfail(c, ev_line(ev), "expected a number, got \"%.64s\"", s);
        return NULL;
    }
    return json_real(v);
}

static json_t *bool_json(struct yctx *c, const yaml_event_t *ev) {
    const char *s = plain_text(c, ev);
    if (!s) return NULL;
    if (!strcasecmp(s, "true") || !strcasecmp(s, "yes") || !strcasecmp(s, "on")) return json_true();
    if (!strcasecmp(s, "false") || !strcasecmp(s, "no") || !strcasecmp(s, "off")) return json_false();
    yfail(c, ev_line(ev), "expected true or false, got \"%.64s\"", s);
    return NULL;
}

static json_t *enum_json(struct yctx *c, const yaml_event_t *ev, const ProtobufCEnumDescriptor *e) {
    const char *s = plain_text(c, ev);
    if (!s) return NULL;
    if (isdigit((unsigned char)s[*s == '-']) && s[*s == '-']) return int_json(c, ev, true, 32);
    if (protobuf_c_enum_descriptor_get_value_by_name(e, s)) return json_string(s);
    char names[160] = "";
    size_t n = 0;
    for (unsigned i = 0; i < e->n_values && n < sizeof names - 1; i++) {
        int k = snprintf(names + n, sizeof names - n, "%s%s", i ? ", " : "", e->values[i].name);
        if (k < 0) break;
        n += (size_t)k;
    }
    if (n >= sizeof names - 1) memcpy(names + sizeof names - 5, "...", 4);
    yfail(c, ev_line(ev), "unknown value \"%.64s\" (one of %s)", s, names);
    return NULL;
}

/* One scalar typed by its field. NULL with err set when it does not fit. */
static json_t *scalar_json(struct yctx *c, const ProtobufCFieldDescriptor *f, const yaml_event_t *ev) {
    const char *s = (const char *)ev->data.scalar.value;
    size_t n = ev->data.scalar.length;
    json_t *v;
    switch (f->type) {
    case PROTOBUF_C_TYPE_INT32:
    case PROTOBUF_C_TYPE_SINT32:
    case PROTOBUF_C_TYPE_SFIXED32: return int_json(c, ev, true, 32);
    case PROTOBUF_C_TYPE_INT64:
    case PROTOBUF_C_TYPE_SINT64:
    case PROTOBUF_C_TYPE_SFIXED64: return int_json(c, ev, true, 64);
    case PROTOBUF_C_TYPE_UINT32:
    case PROTOBUF_C_TYPE_FIXED32: return int_json(c, ev, false, 32);
    case PROTOBUF_C_TYPE_UINT64:
    case PROTOBUF_C_TYPE_FIXED64: return int_json(c, ev, false, 64);
    case PROTOBUF_C_TYPE_FLOAT:
    case PROTOBUF_C_TYPE_DOUBLE: return float_json(c, ev);
    case PROTOBUF_C_TYPE_BOOL: return bool_json(c, ev);
    case PROTOBUF_C_TYPE_ENUM: return enum_json(c, ev, f->descriptor);
    case PROTOBUF_C_TYPE_STRING:
    case PROTOBUF_C_TYPE_BYTES:
        v = json_stringn(s, n);
        if (!v) yfail(c, ev_line(ev), "not valid UTF-8 text");
        return v;
    case PROTOBUF_C_TYPE_MESSAGE:
        if (!strcmp(((const ProtobufCMessageDescriptor *)f->descriptor)->name, "google.protobuf.Timestamp"))
            return json_stringn(s, n); /* RFC 3339 text, checked by pbjson */
        yfail(c, ev_line(ev), "expected a mapping, got \"%.64s\"", s);
        return NULL;
    }
    yfail(c, ev_line(ev), "field of an unknown type");
    return NULL;
}

static int read_msg(struct yctx *c, const ProtobufCMessageDescriptor *d, int depth, json_t **out);
static int read_field(struct yctx *c, const ProtobufCFieldDescriptor *f, yaml_event_t *ev, int depth,
                      json_t **out);

/* A single (not repeated) value of field f starting at ev: *out is NULL for
 * a null (the field left unset). */
static int read_single(struct yctx *c, const ProtobufCFieldDescriptor *f, yaml_event_t *ev, int depth,
                       json_t **out) {
    *out = NULL;
    if (is_null(ev)) return 0;
    if (f->type == PROTOBUF_C_TYPE_MESSAGE && ev->type == YAML_MAPPING_START_EVENT)
        return read_msg(c, f->descriptor, depth + 1, out);
    if (ev->type != YAML_SCALAR_EVENT) {
        yfail(c, ev_line(ev), "expected %s, got %s",
              f->type == PROTOBUF_C_TYPE_MESSAGE ? "a mapping" : "a scalar", ev_kind(ev));
        return -1;
    }
    *out = scalar_json(c, f, ev);
    return *out ? 0 : -1;
}

/* The next key of a mapping into *k: 0 (a scalar key, for the caller to
 * delete), 1 at the mapping's end, -1 on an error; nothing to delete then. */
static int next_key(struct yctx *c, yaml_event_t *k) {
    if (ynext(c, k)) return -1;
    if (k->type == YAML_MAPPING_END_EVENT) {
        yaml_event_delete(k);
        return 1;
    }
    if (check_node(c, k) || k->type != YAML_SCALAR_EVENT) {
        if (k->type != YAML_SCALAR_EVENT && k->type != YAML_ALIAS_EVENT) yfail(c, ev_line(k), "a key must be a scalar");
        yaml_event_delete(k);
        return -1;
    }
    return 0;
}

/* A map key as the text proto3 JSON keys it by: checked against K here, so
 * a bad key gets its line ("7", "true", or the string itself). */
static const char *map_key(struct yctx *c, const ProtobufCFieldDescriptor *kf, const yaml_event_t *k, char *buf,
                           size_t len) {
    const char *s = plain_text(c, k);
    if (!s || kf->type == PROTOBUF_C_TYPE_STRING) return s;
    size_t old = ypush(c, s, 0);
    json_t *v = scalar_json(c, kf, k);
    ypop(c, old);
    if (!v) return NULL;
    if (json_is_integer(v)) snprintf(buf, len, "%lld", (long long)json_integer_value(v));
    else if (json_is_boolean(v)) snprintf(buf, len, "%s", json_is_true(v) ? "true" : "false");
    else snprintf(buf, len, "%s", json_is_string(v) ? json_string_value(v) : "");
    json_decref(v);
    return buf;
}

/* A map<K, V> field from a YAML mapping: keys as text (pbjson checks them
 * against K), values typed by V. */
static int read_map(struct yctx *c, const ProtobufCFieldDescriptor *f, yaml_event_t *start, int depth,
                    json_t **out) {
    const ProtobufCFieldDescriptor *kf = &((const ProtobufCMessageDescriptor *)f->descriptor)->fields[0];
    const ProtobufCFieldDescriptor *vf = &((const ProtobufCMessageDescriptor *)f->descriptor)->fields[1];
    char keybuf[32];
    json_t *obj = json_object();
    int rc = -1;
    if (!obj) return -1;
    if (depth >= CLIYAML_MAX_DEPTH) {
        yfail(c, ev_line(start), "nested deeper than %d", CLIYAML_MAX_DEPTH);
        goto out;
    }
    for (;;) {
        yaml_event_t k, v;
        int end = next_key(c, &k);
        if (end) {
            if (end < 0) goto out;
            break;
        }
        const char *key = map_key(c, kf, &k, keybuf, sizeof keybuf);
        if (!key || json_object_get(obj, key)) {
            if (key) yfail(c, ev_line(&k), "key \"%.64s\" given twice", key);
            yaml_event_delete(&k);
            goto out;
        }
        size_t old = ypush(c, key, 0);
        json_t *val = NULL;
        int bad = ynext(c, &v);
        if (!bad) {
            bad = check_node(c, &v) || read_single(c, vf, &v, depth, &val);
            if (!bad && !val) {
                yfail(c, ev_line(&v), "a map value cannot be null");
                bad = 1;
            }
            yaml_event_delete(&v);
        }
        ypop(c, old);
        if (!bad) json_object_set_new(obj, key, val);
        yaml_event_delete(&k);
        if (bad) goto out;
    }
    *out = obj;
    obj = NULL;
    rc = 0;
out:
    json_decref(obj);
    return rc;
}

static int read_list(struct yctx *c, const ProtobufCFieldDescriptor *f, yaml_event_t *start, int depth,
                     json_t **out) {
    json_t *arr = json_array();
    int rc = -1;
    if (!arr) return -1;
    if (depth >= CLIYAML_MAX_DEPTH) {
        yfail(c, ev_line(start), "nested deeper than %d", CLIYAML_MAX_DEPTH);
        goto out;
    }
    for (size_t i = 0;; i++) {
        yaml_event_t ev;
        if (ynext(c, &ev)) goto out;
        if (ev.type == YAML_SEQUENCE_END_EVENT) {
            yaml_event_delete(&ev);
            break;
        }
        size_t old = ypush(c, NULL, i);
        json_t *val = NULL;
        int bad = check_node(c, &ev) || read_single(c, f, &ev, depth, &val);
        if (!bad && !val) {
            yfail(c, ev_line(&ev), "a list item cannot be null");
            bad = 1;
        }
        ypop(c, old);
        yaml_event_delete(&ev);
        if (bad) goto out;
        json_array_append_new(arr, val);
    }
    *out = arr;
    arr = NULL;
    rc = 0;
out:
    json_decref(arr);
    return rc;
}

static int read_field(struct yctx *c, const ProtobufCFieldDescriptor *f, yaml_event_t *ev, int depth,
                      json_t **out) {
    *out = NULL;
    if (check_node(c, ev)) return -1;
    if (is_null(ev)) return 0;
    if (is_map(f)) {
        if (ev->type == YAML_MAPPING_START_EVENT) return read_map(c, f, ev, depth + 1, out);
        yfail(c, ev_line(ev), "expected a mapping, got %s", ev_kind(ev));
        return -1;
    }
    if (f->label == PROTOBUF_C_LABEL_REPEATED) {
        if (ev->type == YAML_SEQUENCE_START_EVENT) return read_list(c, f, ev, depth + 1, out);
        yfail(c, ev_line(ev), "expected a list, got %s", ev_kind(ev));
        return -1;
    }
    return read_single(c, f, ev, depth, out);
}

/* Reads past the next value, whatever it holds, within the same bounds. */
static int skip_value(struct yctx *c, int depth) {
    int level = 0;
    do {
        yaml_event_t ev;
        if (ynext(c, &ev)) return -1;
        bool end = ev.type == YAML_MAPPING_END_EVENT || ev.type == YAML_SEQUENCE_END_EVENT;
        int bad = !end && check_node(c, &ev);
        if (!bad && (ev.type == YAML_MAPPING_START_EVENT || ev.type == YAML_SEQUENCE_START_EVENT) &&
            depth + ++level > CLIYAML_MAX_DEPTH) {
            yfail(c, ev_line(&ev), "nested deeper than %d", CLIYAML_MAX_DEPTH);
            bad = 1;
        }
        if (end) level--;
        yaml_event_delete(&ev);
        if (bad) return -1;
    } while (level > 0);
    return 0;
}

/* The fields of message d, after its MAPPING_START event, to its end. */
static int read_msg(struct yctx *c, const ProtobufCMessageDescriptor *d, int depth, json_t **out) {
    json_t *obj = json_object();
    bool *seen = calloc(d->n_fields ? d->n_fields : 1, sizeof *seen);
    int rc = -1;
    if (!obj || !seen) {
        snprintf(c->err, c->errlen, "%s: out of memory", c->name);
        goto out;
    }
    for (;;) {
        yaml_event_t k, v;
        int end = next_key(c, &k);
        if (end) {
            if (end < 0) goto out;
            break;
        }
        if (depth > CLIYAML_MAX_DEPTH) {
            yfail(c, ev_line(&k), "nested deeper than %d", CLIYAML_MAX_DEPTH);
            yaml_event_delete(&k);
            goto out;
        }
        const char *key = plain_text(c, &k);
        const ProtobufCFieldDescriptor *f = key ? find_field(d, key) : NULL;
        if (!f && key && c->skipped) {
            fprintf(c->skipped, "warning: %s:%zu: %s%sunknown field \"%.64s\" in %s skipped\n", c->name,
                    ev_line(&k) + 1, c->path, c->plen ? ": " : "", key, d->short_name);
            yaml_event_delete(&k);
            if (skip_value(c, depth)) goto out;
            continue;
        }
        if (!f) {
            if (key) yfail(c, ev_line(&k), "unknown field \"%.64s\" in %s", key, d->short_name);
            yaml_event_delete(&k);
            goto out;
        }
        size_t idx = (size_t)(f - d->fields);
        if (seen[idx]) {
            yfail(c, ev_line(&k), "field \"%s\" given twice", f->name);
            yaml_event_delete(&k);
            goto out;
        }
        seen[idx] = true;
        char jname[256];
        if (strlen(f->name) >= sizeof jname) {
            yaml_event_delete(&k);
            goto out;
        }
        pbjson_field_name(f, jname);
        size_t old = ypush(c, jname, 0);
        json_t *val = NULL;
        int bad = ynext(c, &v);
        if (!bad) {
            bad = read_field(c, f, &v, depth, &val);
            yaml_event_delete(&v);
        }
        ypop(c, old);
        yaml_event_delete(&k);
        if (bad) goto out;
        if (val) json_object_set_new(obj, jname, val);
    }
    *out = obj;
    obj = NULL;
    rc = 0;
out:
    free(seen);
    json_decref(obj);
    return rc;
}

json_t *cliyaml_to_json(const ProtobufCMessageDescriptor *d, const char *name, const char *buf, size_t len,
                        char *err, size_t errlen) {
    return cliyaml_to_json_skipping(d, name, buf, len, NULL, err, errlen);
}

json_t *cliyaml_to_json_skipping(const ProtobufCMessageDescriptor *d, const char *name, const char *buf, size_t len,
                                 FILE *skipped, char *err, size_t errlen) {
    struct yctx c = {.name = name ? name : "config", .err = err, .errlen = errlen, .skipped = skipped};
    json_t *out = NULL;
    yaml_event_t ev;
    int stage = 0; /* 0 stream start, 1 document start, 2 root, 3 document end, 4 stream end */
    if (len > CLIYAML_MAX_BYTES) {
        snprintf(err, errlen, "%s: larger than %u bytes", c.name, CLIYAML_MAX_BYTES);
        return NULL;
    }
    if (!yaml_parser_initialize(&c.parser)) {
        snprintf(err, errlen, "%s: out of memory", c.name);
        return NULL;
    }
    yaml_parser_set_input_string(&c.parser, (const unsigned char *)buf, len);
    for (; stage < 5; stage++) {
        if (ynext(&c, &ev)) goto fail;
        int bad = 0;
        switch (stage) {
        case 0: bad = ev.type != YAML_STREAM_START_EVENT; break;
        case 1:
            if (ev.type == YAML_STREAM_END_EVENT) {
                yfail(&c, ev_line(&ev), "empty: expected a mapping of %s's fields", d->short_name);
                bad = 2;
            } else bad = ev.type != YAML_DOCUMENT_START_EVENT;
            break;
        case 2:
            if (check_node(&c, &ev)) bad = 2;
            else if (ev.type != YAML_MAPPING_START_EVENT) {
                yfail(&c, ev_line(&ev), "expected a mapping of %s's fields, got %s", d->short_name, ev_kind(&ev));
                bad = 2;
            } else if (read_msg(&c, d, 1, &out)) bad = 2;
            break;
        case 3: bad = ev.type != YAML_DOCUMENT_END_EVENT; break;
        case 4:
            if (ev.type != YAML_STREAM_END_EVENT) {
                yfail(&c, ev_line(&ev), "more than one document");
                bad = 2;
            }
            break;
        }
        if (bad == 1) yfail(&c, ev_line(&ev), "unexpected YAML structure");
        yaml_event_delete(&ev);
        if (bad) goto fail;
    }
    yaml_parser_delete(&c.parser);
    return out;
fail:
    json_decref(out);
    yaml_parser_delete(&c.parser);
    return NULL;
}

ProtobufCMessage *cliyaml_to_msg(const ProtobufCMessageDescriptor *d, const char *name, const char *buf,
                                 size_t len, char *err, size_t errlen) {
    json_t *j = cliyaml_to_json(d, name, buf, len, err, errlen);
    if (!j) return NULL;
    char why[256];
    ProtobufCMessage *m = pbjson_to_msg(d, j, why, sizeof why);
    json_decref(j);
    if (!m) snprintf(err, errlen, "%s: %s", name ? name : "config", why);
    return m;
}

char *cliyaml_read_file(const char *path, size_t *len, char *err, size_t errlen) {
    FILE *f = strcmp(path, "-") ? fopen(path, "rb") : stdin;
    if (!f) {
        snprintf(err, errlen, "%s: %s", path, strerror(errno));
        return NULL;
    }
    size_t cap = 4096, n = 0;
    char *buf = malloc(cap + 1);
    while (buf) {
        if (n == cap) {
            if (cap > CLIYAML_MAX_BYTES) break;
            char *b = realloc(buf, cap * 2 + 1);
            if (!b) {
                free(buf);
                buf = NULL;
                break;
            }
            buf = b;
            cap *= 2;
        }
        size_t r = fread(buf + n, 1, cap - n, f);
        n += r;
        if (r == 0) break;
    }
    bool rd_err = ferror(f);
    if (f != stdin) fclose(f);
    if (!buf) {
        snprintf(err, errlen, "%s: out of memory", path);
        return NULL;
    }
    if (rd_err || n > CLIYAML_MAX_BYTES) {
        snprintf(err, errlen, "%s: %s", path, rd_err ? "read error" : "larger than 4 MiB");
        free(buf);
        return NULL;
    }
    buf[n] = 0;
    *len = n;
    return buf;
}
