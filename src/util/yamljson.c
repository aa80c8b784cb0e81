#include "yamljson.h"

#include <errno.h>
#include <stdbool.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <yaml.h>

struct yctx {
    yaml_parser_t parser;
    size_t nodes;
    char *err;
    size_t errlen;
};

static json_t *yfail(struct yctx *c, const yaml_event_t *ev, const char *why) {
    snprintf(c->err, c->errlen, "YAML line %zu: %s", ev ? ev->start_mark.line + 1 : 0, why);
    return NULL;
}

/* Plain (unquoted) scalars resolve as YAML 1.2's core schema. */
static json_t *resolve_plain(const char *s, size_t len) {
    if (len == 0 || !strcmp(s, "~") || !strcmp(s, "null") || !strcmp(s, "Null") || !strcmp(s, "NULL"))
        return json_null();
    if (!strcmp(s, "true") || !strcmp(s, "True") || !strcmp(s, "TRUE")) return json_true();
    if (!strcmp(s, "false") || !strcmp(s, "False") || !strcmp(s, "FALSE")) return json_false();
    char *end;
    errno = 0;
    long long ll = strtoll(s, &end, 10);
    if (*end == 0 && errno == 0 && (s[0] == '-' || s[0] == '+' || (s[0] >= '0' && s[0] <= '9')))
        return json_integer(ll);
    /* floats: digits with . or exponent; not "1Gi", "250m", ".inf" */
    if ((s[0] >= '0' && s[0] <= '9') || ((s[0] == '-' || s[0] == '+' || s[0] == '.') && len > 1)) {
        errno = 0;
        double d = strtod(s, &end);
        if (*end == 0 && errno == 0 && isfinite(d) && !strpbrk(s, "xXnN")) return json_real(d);
    }
    return json_stringn(s, len);
}

static json_t *parse_node(struct yctx *c, yaml_event_t *ev, int depth);

static json_t *parse_collection(struct yctx *c, yaml_event_t *start, int depth) {
    bool is_map = start->type == YAML_MAPPING_START_EVENT;
    json_t *out = is_map ? json_object() : json_array();
    if (!out) return yfail(c, start, "out of memory");
    for (;;) {
        yaml_event_t ev;
        if (!yaml_parser_parse(&c->parser, &ev)) {
            json_decref(out);
            snprintf(c->err, c->errlen, "YAML line %zu: %s", c->parser.problem_mark.line + 1,
                     c->parser.problem ? c->parser.problem : "syntax error");
            return NULL;
        }
        if (ev.type == YAML_MAPPING_END_EVENT || ev.type == YAML_SEQUENCE_END_EVENT) {
            yaml_event_delete(&ev);
            return out;
        }
        if (!is_map) {
            json_t *v = parse_node(c, &ev, depth + 1);
            yaml_event_delete(&ev);
            if (!v || json_array_append_new(out, v)) { json_decref(out); return NULL; }
            continue;
        }
        if (ev.type != YAML_SCALAR_EVENT) {
            json_decref(out);
            json_t *r = yfail(c, &ev, "mapping keys must be scalars");
            yaml_event_delete(&ev);
            return r;
        }
        char *key = strndup((const char *)ev.data.scalar.value, ev.data.scalar.length);
        yaml_event_delete(&ev);
        if (!key) { json_decref(out); return yfail(c, NULL, "out of memory"); }
        yaml_event_t vev;
        if (!yaml_parser_parse(&c->parser, &vev)) {
            free(key);
            json_decref(out);
            snprintf(c->err, c->errlen, "YAML line %zu: %s", c->parser.problem_mark.line + 1,
                     c->parser.problem ? c->parser.problem : "syntax error");
            return NULL;
        }
        json_t *v = parse_node(c, &vev, depth + 1);
        yaml_event_delete(&vev);
        if (!v) { free(key); json_decref(out); return NULL; }
        if (json_object_get(out, key)) {
            json_decref(v);
            json_decref(out);
            snprintf(c->err, c->errlen, "YAML: duplicate key \"%.64s\"", key);
            free(key);
            return NULL;
        }
        json_object_set_new(out, key, v);
        free(key);
    }
}

static json_t *parse_node(struct yctx *c, yaml_event_t *ev, int depth) {
    if (depth > DOC_MAX_DEPTH) return yfail(c, ev, "nested deeper than the limit");
    if (++c->nodes > DOC_MAX_NODES) return yfail(c, ev, "more values than the limit");
    switch (ev->type) {
    case YAML_SCALAR_EVENT: {
        if (ev->data.scalar.anchor) return yfail(c, ev, "anchors are not supported");
        const char *s = (const char *)ev->data.scalar.value;
        size_t len = ev->data.scalar.length;
        if (ev->data.scalar.style == YAML_PLAIN_SCALAR_STYLE && !ev->data.scalar.tag) return resolve_plain(s, len);
        return json_stringn(s, len);
    }
    case YAML_SEQUENCE_START_EVENT:
    case YAML_MAPPING_START_EVENT:
        if ((ev->type == YAML_SEQUENCE_START_EVENT && ev->data.sequence_start.anchor) ||
            (ev->type == YAML_MAPPING_START_EVENT && ev->data.mapping_start.anchor))
            return yfail(c, ev, "anchors are not supported");
        return parse_collection(c, ev, depth);
    case YAML_ALIAS_EVENT: return yfail(c, ev, "aliases are not supported");
    default: return yfail(c, ev, "unexpected YAML event");
    }
}

static json_t *yaml_to_json(const char *buf, size_t len, char *err, size_t errlen) {
    struct yctx c = {.err = err, .errlen = errlen};
    if (!yaml_parser_initialize(&c.parser)) { snprintf(err, errlen, "YAML: out of memory"); return NULL; }
    yaml_parser_set_input_string(&c.parser, (const unsigned char *)buf, len);
    json_t *out = NULL;
    yaml_event_t ev;
    for (;;) {
        if (!yaml_parser_parse(&c.parser, &ev)) {
            snprintf(err, errlen, "YAML line %zu: %s", c.parser.problem_mark.line + 1,
                     c.parser.problem ? c.parser.problem : "syntax error");
            break;
        }
        yaml_event_type_t t = ev.type;
        if (t == YAML_STREAM_END_EVENT) {
            yaml_event_delete(&ev);
            snprintf(err, errlen, "empty document");
            break;
        }
        if (t == YAML_STREAM_START_EVENT || t == YAML_DOCUMENT_START_EVENT) { yaml_event_delete(&ev); continue; }
        out = parse_node(&c, &ev, 1);
        yaml_event_delete(&ev);
        break;
    }
    yaml_parser_delete(&c.parser);
    return out;
}

static int json_depth_ok(json_t *v, int depth) {
    if (depth > DOC_MAX_DEPTH) return 0;
    if (json_is_object(v)) {
        const char *k;
        json_t *x;
        json_object_foreach(v, k, x) if (!json_depth_ok(x, depth + 1)) return 0;
    } else if (json_is_array(v)) {
        size_t i;
        json_t *x;
        json_array_foreach(v, i, x) if (!json_depth_ok(x, depth + 1)) return 0;
    }
    return 1;
}

json_t *doc_parse(const char *buf, size_t len, char *err, size_t errlen) {
    size_t i = 0;
    while (i < len && (buf[i] == ' ' || buf[i] == '\t' || buf[i] == '\n' || buf[i] == '\r')) i++;
    if (i < len && (buf[i] == '{' || buf[i] == '[')) {
        /* Bound nesting before jansson recurses: count brackets outside strings. */
        int d = 0, maxd = 0, in_str = 0;
        for (size_t j = i; j < len; j++) {
            char ch = buf[j];
            if (in_str) {
                if (ch == '\\') j++;
                else if (ch == '"') in_str = 0;
            } else if (ch == '"') in_str = 1;
            else if (ch == '{' || ch == '[') { if (++d > maxd) maxd = d; }
            else if (ch == '}' || ch == ']') d--;
        }
        if (maxd > DOC_MAX_DEPTH) {
            snprintf(err, errlen, "JSON nested deeper than %d", DOC_MAX_DEPTH);
            return NULL;
        }
        json_error_t je;
        json_t *v = json_loadb(buf, len, JSON_REJECT_DUPLICATES, &je);
        if (v && json_depth_ok(v, 1)) return v;
        if (v) { json_decref(v); snprintf(err, errlen, "JSON nested deeper than %d", DOC_MAX_DEPTH); return NULL; }
        snprintf(err, errlen, "JSON line %d column %d: %s", je.line, je.column, je.text);
        return NULL;
    }
    return yaml_to_json(buf, len, err, errlen);
}

json_t *doc_load_file(const char *path, char *err, size_t errlen) {
    FILE *f = strcmp(path, "-") == 0 ? stdin : fopen(path, "rb");
    if (!f) { snprintf(err, errlen, "%s: %s", path, strerror(errno)); return NULL; }
    size_t cap = 65536, len = 0;
    char *buf = malloc(cap);
    json_t *out = NULL;
    if (!buf) { snprintf(err, errlen, "out of memory"); goto done; }
    for (;;) {
        if (len == cap) {
            if (cap >= DOC_MAX_BYTES) { snprintf(err, errlen, "%s: larger than %u bytes", path, DOC_MAX_BYTES); goto done; }
            char *nb = realloc(buf, cap * 2);
            if (!nb) { snprintf(err, errlen, "out of memory"); goto done; }
            buf = nb;
            cap *= 2;
        }
        size_t r = fread(buf + len, 1, cap - len, f);
        len += r;
        if (r == 0) break;
    }
    if (ferror(f)) { snprintf(err, errlen, "%s: read error", path); goto done; }
    out = doc_parse(buf, len, err, errlen);
done:
    free(buf);
    if (f != stdin) fclose(f);
    return out;
}
