/* Swagger JSON to openapi.v2.Document (openapi_pb.h). The field numbers are
 * those of gnostic's OpenAPIv2.proto (package openapi.v2); each message's
 * writer below names the message and writes its fields in number order. */
#include "openapi_pb.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "pbwrite.h"

struct enc {
    struct pbw w;
    int err; /* besides the writer's: depth, out of memory in json_dumps */
};

static bool is_ext(const char *key) { return key[0] == 'x' && key[1] == '-'; }

static void str_of(struct enc *e, uint32_t field, const json_t *o, const char *key) {
    const char *v = json_string_value(json_object_get(o, key));
    if (v) pbw_string(&e->w, field, v);
}

static void bool_of(struct enc *e, uint32_t field, const json_t *o, const char *key) {
    const json_t *v = json_object_get(o, key);
    if (json_is_boolean(v)) pbw_bool(&e->w, field, json_is_true(v));
}

static void double_of(struct enc *e, uint32_t field, const json_t *o, const char *key) {
    const json_t *v = json_object_get(o, key);
    if (json_is_number(v)) pbw_double(&e->w, field, json_number_value(v));
}

static void int_of(struct enc *e, uint32_t field, const json_t *o, const char *key) {
    const json_t *v = json_object_get(o, key);
    if (json_is_integer(v)) pbw_int64(&e->w, field, (int64_t)json_integer_value(v));
}

/* A string, or each string of an array of them, as a repeated string field. */
static void strings_of(struct enc *e, uint32_t field, const json_t *o, const char *key) {
    const json_t *v = json_object_get(o, key);
    size_t i;
    const json_t *x;
    if (json_is_string(v)) pbw_string(&e->w, field, json_string_value(v));
    json_array_foreach(v, i, x) if (json_is_string(x)) pbw_string(&e->w, field, json_string_value(x));
}

/* Any{value = 1, yaml = 2}: the value's JSON text, which YAML reads as the same value. */
static void any(struct enc *e, uint32_t field, const json_t *v) {
    char *text = json_dumps(v, JSON_ENCODE_ANY); /* ", " and ": " between items, as YAML's flow style wants */
    if (!text) {
        e->err = -ENOMEM;
        return;
    }
    pbw_begin(&e->w, field);
    pbw_string(&e->w, 2, text);
    pbw_end(&e->w);
    free(text);
}

static void any_of(struct enc *e, uint32_t field, const json_t *o, const char *key) {
    const json_t *v = json_object_get(o, key);
    if (v) any(e, field, v);
}

static void anys_of(struct enc *e, uint32_t field, const json_t *o, const char *key) {
    size_t i;
    const json_t *x;
    json_array_foreach(json_object_get(o, key), i, x) any(e, field, x);
}

/* Every "x-" key of o as a repeated NamedAny{name = 1, value = 2}. */
static void extensions(struct enc *e, uint32_t field, const json_t *o) {
    const char *k;
    const json_t *v;
    json_object_foreach((json_t *)o, k, v) {
        if (!is_ext(k)) continue;
        pbw_begin(&e->w, field);
        pbw_string(&e->w, 1, k);
        any(e, 2, v);
        pbw_end(&e->w);
    }
}

static void schema(struct enc *e, uint32_t field, const json_t *s, int depth);

/* NamedSchema{name = 1, value = 2} for each member of o, as a repeated field. */
static void named_schemas(struct enc *e, uint32_t field, const json_t *o, int depth) {
    const char *k;
    const json_t *v;
    json_object_foreach((json_t *)o, k, v) {
        pbw_begin(&e->w, field);
        pbw_string(&e->w, 1, k);
        schema(e, 2, v, depth);
        pbw_end(&e->w);
    }
}

/* Schema. A non-object (a JSON Schema boolean) is written as an empty schema. */
static void schema(struct enc *e, uint32_t field, const json_t *s, int depth) {
    if (depth > OPENAPI_PB_MAX_DEPTH) {
        e->err = -E2BIG;
        return;
    }
    struct pbw *w = &e->w;
    pbw_begin(w, field);
    if (!json_is_object(s)) {
        pbw_end(w);
        return;
    }
    str_of(e, 1, s, "$ref");
    str_of(e, 2, s, "format");
    str_of(e, 3, s, "title");
    str_of(e, 4, s, "description");
    any_of(e, 5, s, "default");
    double_of(e, 6, s, "multipleOf");
    double_of(e, 7, s, "maximum");
    bool_of(e, 8, s, "exclusiveMaximum");
    double_of(e, 9, s, "minimum");
    bool_of(e, 10, s, "exclusiveMinimum");
    int_of(e, 11, s, "maxLength");
    int_of(e, 12, s, "minLength");
    str_of(e, 13, s, "pattern");
    int_of(e, 14, s, "maxItems");
    int_of(e, 15, s, "minItems");
    bool_of(e, 16, s, "uniqueItems");
    int_of(e, 17, s, "maxProperties");
    int_of(e, 18, s, "minProperties");
    strings_of(e, 19, s, "required");
    anys_of(e, 20, s, "enum");
    const json_t *ap = json_object_get(s, "additionalProperties"); /* AdditionalPropertiesItem{schema = 1 | boolean = 2} */
    if (json_is_object(ap) || json_is_boolean(ap)) {
        pbw_begin(w, 21);
        if (json_is_object(ap)) schema(e, 1, ap, depth + 1);
        else pbw_bool(w, 2, json_is_true(ap));
        pbw_end(w);
    }
    const json_t *type = json_object_get(s, "type"); /* TypeItem{repeated value = 1} */
    if (json_is_string(type) || json_is_array(type)) {
        pbw_begin(w, 22);
        strings_of(e, 1, s, "type");
        pbw_end(w);
    }
    const json_t *items = json_object_get(s, "items"); /* ItemsItem{repeated schema = 1} */
    if (json_is_object(items) || json_is_array(items)) {
        pbw_begin(w, 23);
        size_t i;
        const json_t *x;
        if (json_is_object(items)) schema(e, 1, items, depth + 1);
        json_array_foreach(items, i, x) schema(e, 1, x, depth + 1);
        pbw_end(w);
    }
    size_t i;
    const json_t *x;
    json_array_foreach(json_object_get(s, "allOf"), i, x) schema(e, 24, x, depth + 1);
    const json_t *props = json_object_get(s, "properties"); /* Properties{repeated NamedSchema = 1} */
    if (json_is_object(props)) {
        pbw_begin(w, 25);
        named_schemas(e, 1, props, depth + 1);
        pbw_end(w);
    }
    str_of(e, 26, s, "discriminator");
    bool_of(e, 27, s, "readOnly");
    any_of(e, 30, s, "example");
    extensions(e, 31, s);
    pbw_end(w);
}

/* ParametersItem{parameter = 1 | json_reference = 2}. */
static void parameter(struct enc *e, uint32_t field, const json_t *p) {
    struct pbw *w = &e->w;
    if (!json_is_object(p)) return;
    pbw_begin(w, field);
    if (json_object_get(p, "$ref")) { /* JsonReference{_ref = 1, description = 2} */
        pbw_begin(w, 2);
        str_of(e, 1, p, "$ref");
        str_of(e, 2, p, "description");
        pbw_end(w);
        pbw_end(w);
        return;
    }
    const char *in = json_string_value(json_object_get(p, "in"));
    in = in ? in : "";
    pbw_begin(w, 1); /* Parameter{body_parameter = 1 | non_body_parameter = 2} */
    if (!strcmp(in, "body")) {
        pbw_begin(w, 1); /* BodyParameter */
        str_of(e, 1, p, "description");
        str_of(e, 2, p, "name");
        str_of(e, 3, p, "in");
        bool_of(e, 4, p, "required");
        if (json_object_get(p, "schema")) schema(e, 5, json_object_get(p, "schema"), 0);
        extensions(e, 6, p);
        pbw_end(w);
    } else {
        /* NonBodyParameter{header = 1, form data = 2, query = 3, path = 4}. The four
         * sub-schemas share their numbers, except that query and form data
         * have allow_empty_value at 5, which moves the later ones up by one. */
        uint32_t sub = !strcmp(in, "header") ? 1 : !strcmp(in, "formData") ? 2 : !strcmp(in, "query") ? 3 : 4;
        uint32_t off = sub == 2 || sub == 3;
        pbw_begin(w, 2);
        pbw_begin(w, sub);
        bool_of(e, 1, p, "required");
        str_of(e, 2, p, "in");
        str_of(e, 3, p, "description");
        str_of(e, 4, p, "name");
        if (off) bool_of(e, 5, p, "allowEmptyValue");
        str_of(e, 5 + off, p, "type");
        str_of(e, 6 + off, p, "format");
        const json_t *items = json_object_get(p, "items");
        if (json_is_object(items)) { /* PrimitivesItems{type = 1, format = 2} */
            pbw_begin(w, 7 + off);
            str_of(e, 1, items, "type");
            str_of(e, 2, items, "format");
            pbw_end(w);
        }
        str_of(e, 8 + off, p, "collectionFormat");
        any_of(e, 9 + off, p, "default");
        bool_of(e, 19 + off, p, "uniqueItems");
        anys_of(e, 20 + off, p, "enum");
        extensions(e, 22 + off, p);
        pbw_end(w);
        pbw_end(w);
    }
    pbw_end(w);
    pbw_end(w);
}

static void parameters_of(struct enc *e, uint32_t field, const json_t *o) {
    size_t i;
    const json_t *p;
    json_array_foreach(json_object_get(o, "parameters"), i, p) parameter(e, field, p);
}

/* Responses{repeated NamedResponseValue response_code = 1, vendor_extension = 2}. */
static void responses(struct enc *e, uint32_t field, const json_t *r) {
    struct pbw *w = &e->w;
    pbw_begin(w, field);
    const char *code;
    const json_t *v;
    json_object_foreach((json_t *)r, code, v) {
        if (is_ext(code) || !json_is_object(v)) continue;
        pbw_begin(w, 1);
        pbw_string(w, 1, code);
        pbw_begin(w, 2); /* ResponseValue{response = 1 | json_reference = 2} */
        if (json_object_get(v, "$ref")) {
            pbw_begin(w, 2);
            str_of(e, 1, v, "$ref");
            pbw_end(w);
        } else {
            pbw_begin(w, 1); /* Response{description = 1, schema = 2 (SchemaItem{schema = 1}), vendor_extension = 5} */
            str_of(e, 1, v, "description");
            if (json_object_get(v, "schema")) {
                pbw_begin(w, 2);
                schema(e, 1, json_object_get(v, "schema"), 0);
                pbw_end(w);
            }
            extensions(e, 5, v);
            pbw_end(w);
        }
        pbw_end(w);
        pbw_end(w);
    }
    extensions(e, 2, r);
    pbw_end(w);
}

/* Operation. */
static void operation(struct enc *e, uint32_t field, const json_t *op) {
    if (!json_is_object(op)) return;
    pbw_begin(&e->w, field);
    strings_of(e, 1, op, "tags");
    str_of(e, 2, op, "summary");
    str_of(e, 3, op, "description");
    str_of(e, 5, op, "operationId");
    strings_of(e, 6, op, "produces");
    strings_of(e, 7, op, "consumes");
    parameters_of(e, 8, op);
    if (json_is_object(json_object_get(op, "responses"))) responses(e, 9, json_object_get(op, "responses"));
    strings_of(e, 10, op, "schemes");
    bool_of(e, 11, op, "deprecated");
    extensions(e, 13, op);
    pbw_end(&e->w);
}

/* PathItem{_ref = 1, get = 2, put = 3, post = 4, delete = 5, options = 6,
 * head = 7, patch = 8, parameters = 9, vendor_extension = 10}. */
static void path_item(struct enc *e, uint32_t field, const json_t *pi) {
    static const char *const ops[] = {"get", "put", "post", "delete", "options", "head", "patch"};
    pbw_begin(&e->w, field);
    if (json_is_object(pi)) {
        str_of(e, 1, pi, "$ref");
        for (uint32_t i = 0; i < sizeof ops / sizeof ops[0]; i++) operation(e, 2 + i, json_object_get(pi, ops[i]));
        parameters_of(e, 9, pi);
        extensions(e, 10, pi);
    }
    pbw_end(&e->w);
}

/* Paths{vendor_extension = 1, repeated NamedPathItem path = 2}. */
static void paths(struct enc *e, uint32_t field, const json_t *p) {
    struct pbw *w = &e->w;
    pbw_begin(w, field);
    extensions(e, 1, p);
    const char *k;
    const json_t *v;
    json_object_foreach((json_t *)p, k, v) {
        if (is_ext(k)) continue;
        pbw_begin(w, 2);
        pbw_string(w, 1, k);
        path_item(e, 2, v);
        pbw_end(w);
    }
    pbw_end(w);
}

int openapi_pb_encode(const json_t *doc, size_t max, unsigned char **out, size_t *len) {
    *out = NULL;
    *len = 0;
    if (!json_is_object(doc)) return -EINVAL;
    struct enc e = {.err = 0};
    pbw_init(&e.w, max);
    struct pbw *w = &e.w;
    /* Document */
    str_of(&e, 1, doc, "swagger");
    const json_t *info = json_object_get(doc, "info");
    if (json_is_object(info)) { /* Info{title = 1, version = 2, description = 3, vendor_extension = 7} */
        pbw_begin(w, 2);
        str_of(&e, 1, info, "title");
        str_of(&e, 2, info, "version");
        str_of(&e, 3, info, "description");
        extensions(&e, 7, info);
        pbw_end(w);
    }
    str_of(&e, 3, doc, "host");
    str_of(&e, 4, doc, "basePath");
    strings_of(&e, 5, doc, "schemes");
    strings_of(&e, 6, doc, "consumes");
    strings_of(&e, 7, doc, "produces");
    if (json_is_object(json_object_get(doc, "paths"))) paths(&e, 8, json_object_get(doc, "paths"));
    const json_t *defs = json_object_get(doc, "definitions");
    if (json_is_object(defs)) { /* Definitions{repeated NamedSchema additional_properties = 1} */
        pbw_begin(w, 9);
        named_schemas(&e, 1, defs, 0);
        pbw_end(w);
    }
    extensions(&e, 16, doc);
    int rc = e.err ? e.err : pbw_error(w);
    if (!rc) {
        *out = pbw_take(w, len);
        if (!*out) rc = pbw_error(w) ? pbw_error(w) : -ENOMEM;
    }
    pbw_free(w);
    return rc;
}
