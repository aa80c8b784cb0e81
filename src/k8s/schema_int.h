/* Internal to schema.c (compile) and schema_validate.c (validate, default,
 * prune): the compiled node tree. Not for other modules. */
#ifndef PELOTON_K8S_SCHEMA_INT_H
#define PELOTON_K8S_SCHEMA_INT_H

#include <stdint.h>

#include "re2lite.h"
#include "schema.h"

enum {
    SCHEMA_T_OBJECT = 1u << 0,
    SCHEMA_T_ARRAY = 1u << 1,
    SCHEMA_T_STRING = 1u << 2,
    SCHEMA_T_INTEGER = 1u << 3,
    SCHEMA_T_NUMBER = 1u << 4,
    SCHEMA_T_BOOLEAN = 1u << 5,
};

enum schema_format {
    SCHEMA_F_NONE, /* absent or one we do not check */
    SCHEMA_F_INT32,
    SCHEMA_F_INT64,
    SCHEMA_F_DATE_TIME,
    SCHEMA_F_DATE,
    SCHEMA_F_BYTE,
    SCHEMA_F_UUID,
};

struct schema_node;

struct schema_prop {
    char *name;
    struct schema_node *node;
};

struct schema_node {
    unsigned types; /* SCHEMA_T_* mask; 0: any (preserve-unknown or junctor) */
    bool nullable, int_or_string, preserve_unknown, embedded;
    bool has_min, has_max, excl_min, excl_max;
    double min, max, multiple_of; /* multiple_of 0: none */
    int64_t min_len, max_len, min_items, max_items, min_props, max_props; /* -1: none */
    enum schema_format format;
    const char *format_name; /* static; for messages */
    char *pattern;           /* as written, for messages */
    struct regex *re;        /* pattern compiled, or NULL */
    json_t *enumv; /* owned deep copy, an array, or NULL */
    json_t *dflt;  /* owned deep copy, or NULL */
    size_t nprops;
    struct schema_prop *props; /* sorted by name */
    size_t nrequired;
    char **required; /* in schema order */
    struct schema_node *items;
    struct schema_node *addl; /* additionalProperties schema, or NULL */
    bool addl_any;            /* additionalProperties: true */
    bool addl_none;           /* additionalProperties: false */
    size_t nall, nany, none_of;
    struct schema_node **all_of, **any_of, **one_of;
    struct schema_node *not_;
};

struct schema {
    struct schema_node *root;
    int nodes, patterns;
    size_t pattern_insts; /* the patterns' program sizes added up, for SCHEMA_MAX_PATTERN_INSTS */
};

/* The property named name in n, or NULL (binary search). */
const struct schema_node *schema_node_prop(const struct schema_node *n, const char *name);

/* Validates v at node n (path "" for the root); used by compile to check
 * defaults. Returns the number of errors added. */
size_t schema_node_check(const struct schema_node *n, const json_t *v, const char *path, struct schema_result *res);

/* Applies defaults inside v, the value of a non-root node n. */
int schema_node_defaults(const struct schema_node *n, json_t *v);

/* Prunes v in place as the value of a non-root node n. */
void schema_node_prune(const struct schema_node *n, json_t *v);

#endif
