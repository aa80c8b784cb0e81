/* Kubernetes label and field selectors: parsed once, matched many times.
 *
 * Label selectors take the string grammar of Kubernetes' labels.Parse
 * (`a=b`, `a==b`, `a!=b`, `a in (x,y)`, `a notin (x,y)`, `a`, `!a`, `a>5`,
 * `a<5`, comma-separated, whitespace between tokens ignored) or a
 * metav1.LabelSelector JSON object (matchLabels + matchExpressions). Both
 * compile into a struct labelsel; matching takes a label map (a json_t object
 * of string -> string, such as metadata.labels; NULL means no labels).
 * Field selectors take `f=v`, `f==v`, `f!=v` terms on a per-kind whitelist
 * and match a whole object by dotted path; a missing field reads as its
 * default ("" for most, "false" for booleans).
 *
 * Ownership: *_parse and labelsel_from_* return a new selector the caller
 * frees with labelsel_free / fieldsel_free (NULL-safe); the json_t arguments
 * are borrowed and never kept. Errors: -EINVAL (syntax, validation, an
 * unsupported field), -E2BIG (a limit below), -ENOMEM; err then holds a
 * message phrased as Kubernetes phrases it, naming the offending part.
 * No I/O, no global mutable state; a compiled selector is read-only and may be
 * shared between threads. */
#ifndef PELOTON_K8S_SELECTOR_H
#define PELOTON_K8S_SELECTOR_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define SELECTOR_MAX_LEN 4096   /* bytes of selector text */
#define SELECTOR_MAX_REQS 100   /* requirements (label) or terms (field) */
#define SELECTOR_MAX_VALUES 100 /* values in one in/notin set */

/* Qualified names (label and annotation keys, resource names) and label
 * values, as Kubernetes' IsQualifiedName and IsValidLabelValue check them. */
#define LABEL_PREFIX_MAX 253 /* the optional DNS subdomain prefix */
#define LABEL_NAME_MAX 63    /* the name after it */
#define LABEL_VALUE_MAX 63   /* a label value (or empty) */

/* NULL when key is a qualified name: an optional lower-case DNS subdomain
 * prefix and '/', then a name of [A-Za-z0-9][-A-Za-z0-9_.]* ending
 * alphanumeric; else Kubernetes' reason ("name part must be no more than 63
 * characters"). */
const char *labelsel_key_problem(const char *key);
/* NULL when v is a valid label value (the name's charset, or empty), else
 * the reason. */
const char *labelsel_value_problem(const char *v);

enum labelsel_op {
    LABELSEL_EQ,         /* key=v, key==v, matchLabels */
    LABELSEL_NE,         /* key!=v (matches when key is absent) */
    LABELSEL_IN,         /* key in (v,...) */
    LABELSEL_NOTIN,      /* key notin (v,...) (matches when key is absent) */
    LABELSEL_EXISTS,     /* key */
    LABELSEL_NOT_EXISTS, /* !key */
    LABELSEL_GT,         /* key>N: the label value parses as an integer > N */
    LABELSEL_LT,         /* key<N */
};

struct labelsel_req {
    enum labelsel_op op;
    char *key;
    int nvalues;
    char **values; /* sorted, unique; one for EQ/NE/GT/LT, none for (NOT_)EXISTS */
    int64_t num;   /* GT/LT operand */
};

/* Read-only for callers. Requirements are sorted by key (stable). */
struct labelsel {
    bool nothing; /* matches no object: a null LabelSelector */
    int nreqs;    /* 0 and !nothing: matches everything */
    struct labelsel_req *reqs;
};

/* Parses selector text (labels.Parse); "" selects everything. */
int labelsel_parse(const char *s, struct labelsel **out, char *err, size_t errlen);

/* Compiles a metav1.LabelSelector object. NULL or JSON null selects nothing
 * (as a nil *LabelSelector does); {} selects everything. */
int labelsel_from_object(const json_t *sel, struct labelsel **out, char *err, size_t errlen);

/* Compiles a plain key -> value map (Service.spec.selector, nodeSelector)
 * into equality requirements; NULL or {} selects everything. */
int labelsel_from_set(const json_t *set, struct labelsel **out, char *err, size_t errlen);

/* True when every requirement holds for labels (a json_t object or NULL). */
bool labelsel_match(const struct labelsel *sel, const json_t *labels);

/* Canonical text, as Kubernetes' Selector.String(): sorted, "==" written as
 * "=". snprintf semantics: returns the full length, writes at most len-1. */
int labelsel_format(const struct labelsel *sel, char *buf, size_t len);

void labelsel_free(struct labelsel *sel);

/* One field selector term; field/path/dflt point into a static table. */
struct fieldsel_term {
    const char *field; /* the field label, e.g. "spec.nodeName" */
    const char *path;  /* dotted JSON path it reads, e.g. "source.component" */
    const char *dflt;  /* value when absent */
    bool neq;          /* != */
    char *value;       /* unescaped */
};

struct fieldsel {
    int nterms; /* 0: matches everything */
    struct fieldsel_term *terms;
};

/* Parses a field selector for a kind, given as Kind or resource ("Pod" or
 * "pods"; case-insensitive; NULL or unknown kinds allow only metadata.name and
 * metadata.namespace). An unsupported field fails with
 * "field label not supported: <field>" (the shim's 400 BadRequest). */
int fieldsel_parse(const char *kind, const char *s, struct fieldsel **out, char *err, size_t errlen);

/* True when the field label is selectable for kind. */
bool fieldsel_supported(const char *kind, const char *field);

bool fieldsel_match(const struct fieldsel *sel, const json_t *obj);

/* The value of the first `field=value` term, or NULL: lets a caller use an
 * index (pods by spec.nodeName) before matching the rest. Borrowed. */
const char *fieldsel_exact(const struct fieldsel *sel, const char *field);

void fieldsel_free(struct fieldsel *sel);

#endif
