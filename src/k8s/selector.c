/* Label selectors: the labels.Parse grammar and metav1.LabelSelector objects.
 * The lexer and parser follow the structure of Kubernetes'
 * labels package so that inputs and error messages line up with it: scan all
 * tokens first, then a recursive-descent parser with one token of lookahead in
 * which "in"/"notin" read as identifiers wherever a key or value is expected.
 * Field selectors are in fieldsel.c. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "errmsg.h"
#include "selector.h"

/* ---- validation (IsQualifiedName, IsValidLabelValue) ---- */

static bool is_alnum(unsigned char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
}
static bool is_lower_alnum(unsigned char c) { return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9'); }

#define NAME_CHARS_MSG \
    "alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character"

/* [A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])? over s[0..n) */
static bool name_chars_ok(const char *s, size_t n) {
    if (n == 0 || !is_alnum((unsigned char)s[0]) || !is_alnum((unsigned char)s[n - 1])) return false;
    for (size_t i = 1; i + 1 < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (!is_alnum(c) && c != '-' && c != '_' && c != '.') return false;
    }
    return true;
}

/* RFC 1123 subdomain: lower-case labels separated by dots. */
static bool dns_subdomain_ok(const char *s, size_t n) {
    size_t i = 0;
    while (i < n) {
        size_t j = i;
        while (j < n && s[j] != '.') j++;
        if (j == i || !is_lower_alnum((unsigned char)s[i]) || !is_lower_alnum((unsigned char)s[j - 1])) return false;
        for (size_t k = i; k < j; k++)
            if (!is_lower_alnum((unsigned char)s[k]) && s[k] != '-') return false;
        if (j == n) return true;
        i = j + 1;
        if (i == n) return false; /* trailing dot */
    }
    return false;
}

#define XSTR(x) STR(x)
#define STR(x) #x

const char *labelsel_key_problem(const char *key) {
    size_t n = strlen(key);
    const char *slash = memchr(key, '/', n);
    const char *name = key;
    if (slash) {
        if (memchr(slash + 1, '/', n - (size_t)(slash + 1 - key)))
            return "a qualified name must consist of " NAME_CHARS_MSG
                   " with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')";
        size_t plen = (size_t)(slash - key);
        if (plen == 0) return "prefix part must be non-empty";
        if (plen > LABEL_PREFIX_MAX) return "prefix part must be no more than " XSTR(LABEL_PREFIX_MAX) " characters";
        if (!dns_subdomain_ok(key, plen))
            return "prefix part a lowercase RFC 1123 subdomain must consist of lower case alphanumeric "
                   "characters, '-' or '.', and must start and end with an alphanumeric character";
        name = slash + 1;
    }
    size_t nlen = strlen(name);
    if (nlen == 0) return "name part must be non-empty";
    if (nlen > LABEL_NAME_MAX) return "name part must be no more than " XSTR(LABEL_NAME_MAX) " characters";
    if (!name_chars_ok(name, nlen)) return "name part must consist of " NAME_CHARS_MSG;
    return NULL;
}

const char *labelsel_value_problem(const char *v) {
    size_t n = strlen(v);
    if (n == 0) return NULL;
    if (n > LABEL_VALUE_MAX) return "must be no more than " XSTR(LABEL_VALUE_MAX) " characters";
    if (!name_chars_ok(v, n)) return "a valid label must be an empty string or consist of " NAME_CHARS_MSG;
    return NULL;
}

/* strconv.ParseInt(s, 10, 64): optional sign, decimal digits, in range. */
static bool parse_int64(const char *s, int64_t *out) {
    bool neg = false;
    if (*s == '+' || *s == '-') neg = *s++ == '-';
    if (!*s) return false;
    uint64_t v = 0, lim = neg ? (uint64_t)INT64_MAX + 1 : (uint64_t)INT64_MAX;
    for (; *s; s++) {
        if (*s < '0' || *s > '9') return false;
        unsigned d = (unsigned)(*s - '0');
        if (v > (lim - d) / 10) return false;
        v = v * 10 + d;
    }
    *out = neg ? (int64_t)(0 - v) : (int64_t)v;
    return true;
}

/* ---- compiled selector building ---- */

void labelsel_free(struct labelsel *sel) {
    if (!sel) return;
    for (int i = 0; i < sel->nreqs; i++) {
        free(sel->reqs[i].key);
        for (int j = 0; j < sel->reqs[i].nvalues; j++) free(sel->reqs[i].values[j]);
        free(sel->reqs[i].values);
    }
    free(sel->reqs);
    free(sel);
}

static struct labelsel *labelsel_new(void) {
    struct labelsel *sel = calloc(1, sizeof *sel);
    if (sel) sel->reqs = calloc(SELECTOR_MAX_REQS, sizeof *sel->reqs);
    if (sel && !sel->reqs) {
        free(sel);
        return NULL;
    }
    return sel;
}

/* Inserts v[0..n) into r's sorted set (a set: duplicates collapse). */
static int req_add_value(struct labelsel_req *r, const char *v, size_t n) {
    int lo = 0, hi = r->nvalues;
    while (lo < hi) {
        int mid = (lo + hi) / 2, c = strncmp(r->values[mid], v, n);
        if (c == 0 && r->values[mid][n] != 0) c = 1;
        if (c == 0) return 0;
        if (c < 0) lo = mid + 1;
        else hi = mid;
    }
    if (r->nvalues >= SELECTOR_MAX_VALUES) return -E2BIG;
    if (!r->values && !(r->values = calloc(SELECTOR_MAX_VALUES, sizeof *r->values))) return -ENOMEM;
    char *copy = strndup(v, n);
    if (!copy) return -ENOMEM;
    memmove(r->values + lo + 1, r->values + lo, (size_t)(r->nvalues - lo) * sizeof *r->values);
    r->values[lo] = copy;
    r->nvalues++;
    return 0;
}

/* NewRequirement's checks on a finished requirement; msg gets the reason. */
static int req_validate(struct labelsel_req *r, char *msg, size_t msglen) {
    const char *p = labelsel_key_problem(r->key);
    if (p) return core_fail(msg, msglen, -EINVAL, "invalid label key \"%s\": %s", r->key, p);
    switch (r->op) {
    case LABELSEL_IN:
    case LABELSEL_NOTIN:
        if (r->nvalues == 0) {
            return core_fail(msg, msglen, -EINVAL,
                             "key \"%s\": for 'in', 'notin' operators, values set can't be empty", r->key);
        }
        break;
    case LABELSEL_EQ:
    case LABELSEL_NE:
        if (r->nvalues != 1) {
            return core_fail(msg, msglen, -EINVAL,
                             "key \"%s\": exact-match compatibility requires one single value", r->key);
        }
        break;
    case LABELSEL_EXISTS:
    case LABELSEL_NOT_EXISTS:
        if (r->nvalues != 0) {
            return core_fail(msg, msglen, -EINVAL,
                             "key \"%s\": values set must be empty for exists and does not exist", r->key);
        }
        break;
    case LABELSEL_GT:
    case LABELSEL_LT:
        if (r->nvalues != 1) {
            return core_fail(msg, msglen, -EINVAL,
                             "key \"%s\": for 'Gt', 'Lt' operators, exactly one value is required", r->key);
        }
        if (!parse_int64(r->values[0], &r->num)) {
            return core_fail(msg, msglen, -EINVAL,
                             "invalid value \"%s\": for 'Gt', 'Lt' operators, the value must be an integer",
                             r->values[0]);
        }
        break;
    }
    for (int i = 0; i < r->nvalues; i++) {
        if ((p = labelsel_value_problem(r->values[i]))) {
            return core_fail(msg, msglen, -EINVAL,
                             "invalid label value: \"%s\": at key: \"%s\": %s", r->values[i], r->key, p);
        }
    }
    return 0;
}

/* Stable insertion sort by key (at most SELECTOR_MAX_REQS entries). */
static void reqs_sort(struct labelsel *sel) {
    for (int i = 1; i < sel->nreqs; i++) {
        struct labelsel_req r = sel->reqs[i];
        int j = i;
        while (j > 0 && strcmp(sel->reqs[j - 1].key, r.key) > 0) {
            sel->reqs[j] = sel->reqs[j - 1];
            j--;
        }
        sel->reqs[j] = r;
    }
}

/* ---- lexer ---- */

enum tok_type {
    T_EOS, T_ID, T_IN, T_NOTIN, T_NOT, T_NE, T_EQ, T_EQ2, T_GT, T_LT, T_LPAREN, T_RPAREN, T_COMMA,
};

struct tok {
    enum tok_type type;
    const char *s;
    int len;
};

struct parser {
    struct tok *toks;
    int ntoks, pos;
    char msg[512];
};

static bool is_space(char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\n'; }
static bool is_special(char c) { return c && strchr("=!(),><", c) != NULL; }

/* Scans s into p->toks, ending with T_EOS. Every byte is either whitespace,
 * part of a special symbol or part of an identifier, so scanning never fails. */
static int lex(struct parser *p, const char *s) {
    size_t n = strlen(s);
    p->toks = calloc(n + 1, sizeof *p->toks);
    if (!p->toks) return -ENOMEM;
    size_t i = 0;
    while (i < n) {
        if (is_space(s[i])) {
            i++;
            continue;
        }
        struct tok *t = &p->toks[p->ntoks++];
        t->s = s + i;
        if (is_special(s[i])) {
            t->len = 1;
            char c = s[i], d = s[i + 1];
            if (c == '!' && d == '=') t->type = T_NE, t->len = 2;
            else if (c == '=' && d == '=') t->type = T_EQ2, t->len = 2;
            else if (c == '!') t->type = T_NOT;
            else if (c == '=') t->type = T_EQ;
            else if (c == '>') t->type = T_GT;
            else if (c == '<') t->type = T_LT;
            else if (c == '(') t->type = T_LPAREN;
            else if (c == ')') t->type = T_RPAREN;
            else t->type = T_COMMA;
            i += (size_t)t->len;
            continue;
        }
        size_t j = i;
        while (j < n && !is_space(s[j]) && !is_special(s[j])) j++;
        t->len = (int)(j - i);
        t->type = T_ID;
        if (t->len == 2 && memcmp(t->s, "in", 2) == 0) t->type = T_IN;
        if (t->len == 5 && memcmp(t->s, "notin", 5) == 0) t->type = T_NOTIN;
        i = j;
    }
    p->toks[p->ntoks].type = T_EOS;
    p->toks[p->ntoks].s = s + n;
    p->toks[p->ntoks].len = 0;
    return 0;
}

/* In "values" context the keywords read as plain identifiers. */
static enum tok_type peek(const struct parser *p, bool values, const struct tok **lit) {
    const struct tok *t = &p->toks[p->pos];
    if (lit) *lit = t;
    if (values && (t->type == T_IN || t->type == T_NOTIN)) return T_ID;
    return t->type;
}

static enum tok_type next(struct parser *p, bool values, const struct tok **lit) {
    enum tok_type ty = peek(p, values, lit);
    if (ty != T_EOS) p->pos++;
    return ty;
}

#define LIT(t) (t)->len, (t)->s

static int parse_values(struct parser *p, struct labelsel_req *r) {
    const struct tok *t;
    if (next(p, true, &t) != T_LPAREN)
        return core_fail(p->msg, sizeof p->msg, -EINVAL, "found '%.*s', expected: '('", LIT(t));
    enum tok_type ty = peek(p, true, &t);
    if (ty == T_RPAREN) { /* "()" is the set holding "" */
        p->pos++;
        return req_add_value(r, "", 0);
    }
    if (ty != T_ID && ty != T_COMMA)
        return core_fail(p->msg, sizeof p->msg, -EINVAL, "found '%.*s', expected: ',', ')' or identifier", LIT(t));
    int rc;
    for (;;) { /* identifiers list; empty slots (",," "(," ",)") are "" */
        ty = next(p, true, &t);
        if (ty == T_ID) {
            if ((rc = req_add_value(r, t->s, (size_t)t->len))) return rc;
            ty = peek(p, true, &t);
            if (ty == T_COMMA) continue;
            if (ty == T_RPAREN) break;
            return core_fail(p->msg, sizeof p->msg, -EINVAL, "found '%.*s', expected: ',' or ')'", LIT(t));
        } else if (ty == T_COMMA) {
            if (r->nvalues == 0 && (rc = req_add_value(r, "", 0))) return rc;
            ty = peek(p, true, NULL);
            if (ty == T_RPAREN) {
                if ((rc = req_add_value(r, "", 0))) return rc;
                break;
            }
            if (ty == T_COMMA) {
                p->pos++;
                if ((rc = req_add_value(r, "", 0))) return rc;
            }
        } else {
            return core_fail(p->msg, sizeof p->msg, -EINVAL, "found '%.*s', expected: ',', or identifier", LIT(t));
        }
    }
    if (next(p, true, &t) != T_RPAREN)
        return core_fail(p->msg, sizeof p->msg, -EINVAL, "found '%.*s', expected: ')'", LIT(t));
    return 0;
}

static int parse_requirement(struct parser *p, struct labelsel_req *r) {
    const struct tok *t;
    enum tok_type ty = next(p, true, &t);
    bool negated = false;
    if (ty == T_NOT) {
        negated = true;
        ty = next(p, true, &t);
    }
    if (ty != T_ID) return core_fail(p->msg, sizeof p->msg, -EINVAL, "found '%.*s', expected: identifier", LIT(t));
    if (!(r->key = strndup(t->s, (size_t)t->len))) return -ENOMEM;
    const char *prob = labelsel_key_problem(r->key);
    if (prob) return core_fail(p->msg, sizeof p->msg, -EINVAL, "invalid label key \"%s\": %s", r->key, prob);
    ty = peek(p, true, NULL);
    if (negated || ty == T_EOS || ty == T_COMMA) {
        r->op = negated ? LABELSEL_NOT_EXISTS : LABELSEL_EXISTS;
        return req_validate(r, p->msg, sizeof p->msg);
    }
    switch (next(p, false, &t)) {
    case T_IN: r->op = LABELSEL_IN; break;
    case T_NOTIN: r->op = LABELSEL_NOTIN; break;
    case T_EQ:
    case T_EQ2: r->op = LABELSEL_EQ; break;
    case T_NE: r->op = LABELSEL_NE; break;
    case T_GT: r->op = LABELSEL_GT; break;
    case T_LT: r->op = LABELSEL_LT; break;
    default:
        return core_fail(p->msg, sizeof p->msg, -EINVAL,
                         "found '%.*s', expected: in, notin, =, ==, !=, gt, lt", LIT(t));
    }
    int rc;
    if (r->op == LABELSEL_IN || r->op == LABELSEL_NOTIN) {
        if ((rc = parse_values(p, r))) return rc;
    } else {
        ty = peek(p, true, &t);
        if (ty == T_EOS || ty == T_COMMA) {
            rc = req_add_value(r, "", 0);
        } else if (next(p, true, &t) == T_ID) {
            rc = req_add_value(r, t->s, (size_t)t->len);
        } else {
            return core_fail(p->msg, sizeof p->msg, -EINVAL, "found '%.*s', expected: identifier", LIT(t));
        }
        if (rc) return rc;
    }
    return req_validate(r, p->msg, sizeof p->msg);
}

static int parse_all(struct parser *p, struct labelsel *sel, char *err, size_t errlen) {
    const struct tok *t;
    for (;;) {
        enum tok_type ty = peek(p, true, &t);
        if (ty == T_EOS) return 0;
        if (ty != T_ID && ty != T_NOT) {
            return core_fail(err, errlen, -EINVAL,
                             "found '%.*s', expected: !, identifier, or 'end of string'", LIT(t));
        }
        if (sel->nreqs >= SELECTOR_MAX_REQS)
            return core_fail(err, errlen, -E2BIG, "label selector has more than %d requirements", SELECTOR_MAX_REQS);
        struct labelsel_req *r = &sel->reqs[sel->nreqs++];
        int rc = parse_requirement(p, r);
        if (rc == -E2BIG) {
            return core_fail(err, errlen, rc, "unable to parse requirement: key \"%s\": more than %d values",
                             r->key ? r->key : "", SELECTOR_MAX_VALUES);
        }
        if (rc == -ENOMEM) return core_fail(err, errlen, rc, "out of memory");
        if (rc) return core_fail(err, errlen, rc, "unable to parse requirement: %s", p->msg);
        ty = next(p, true, &t);
        if (ty == T_EOS) return 0;
        if (ty != T_COMMA)
            return core_fail(err, errlen, -EINVAL, "found '%.*s', expected: ',' or 'end of string'", LIT(t));
        ty = peek(p, true, &t);
        if (ty != T_ID && ty != T_NOT)
            return core_fail(err, errlen, -EINVAL, "found '%.*s', expected: identifier after ','", LIT(t));
    }
}

int labelsel_parse(const char *s, struct labelsel **out, char *err, size_t errlen) {
    *out = NULL;
    if (!s) s = "";
    size_t n = strnlen(s, SELECTOR_MAX_LEN + 1);
    if (n > SELECTOR_MAX_LEN)
        return core_fail(err, errlen, -E2BIG, "label selector is longer than %d bytes", SELECTOR_MAX_LEN);
    struct labelsel *sel = labelsel_new();
    struct parser p = {0};
    int rc = sel ? lex(&p, s) : -ENOMEM;
    if (rc == 0) rc = parse_all(&p, sel, err, errlen);
    else core_fail(err, errlen, rc, "out of memory");
    free(p.toks);
    if (rc) {
        labelsel_free(sel);
        return rc;
    }
    reqs_sort(sel);
    *out = sel;
    return 0;
}

/* ---- LabelSelector objects and plain sets ---- */

static int add_req(struct labelsel *sel, const char *key, enum labelsel_op op, char *err, size_t errlen,
                   struct labelsel_req **rp) {
    if (sel->nreqs >= SELECTOR_MAX_REQS)
        return core_fail(err, errlen, -E2BIG, "label selector has more than %d requirements", SELECTOR_MAX_REQS);
    struct labelsel_req *r = &sel->reqs[sel->nreqs];
    if (!(r->key = strdup(key))) return -ENOMEM;
    r->op = op;
    sel->nreqs++;
    *rp = r;
    return 0;
}

static int add_string_value(struct labelsel_req *r, const json_t *v, char *err, size_t errlen) {
    if (!json_is_string(v))
        return core_fail(err, errlen, -EINVAL, "key \"%s\": label values must be strings", r->key);
    int rc = req_add_value(r, json_string_value(v), strlen(json_string_value(v)));
    if (rc == -E2BIG)
        return core_fail(err, errlen, rc, "key \"%s\": more than %d values", r->key, SELECTOR_MAX_VALUES);
    return rc;
}

static int compile_set(struct labelsel *sel, const json_t *set, const char *what, char *err, size_t errlen) {
    if (!set || json_is_null(set)) return 0;
    if (!json_is_object(set)) return core_fail(err, errlen, -EINVAL, "%s must be an object", what);
    const char *k;
    json_t *v;
    json_object_foreach((json_t *)set, k, v) {
        struct labelsel_req *r = NULL;
        int rc = add_req(sel, k, LABELSEL_EQ, err, errlen, &r);
        if (rc == 0) rc = add_string_value(r, v, err, errlen);
        if (rc == 0) rc = req_validate(r, err, errlen);
        if (rc) return rc;
    }
    return 0;
}

static int compile_exprs(struct labelsel *sel, const json_t *exprs, char *err, size_t errlen) {
    if (!exprs || json_is_null(exprs)) return 0;
    if (!json_is_array(exprs)) return core_fail(err, errlen, -EINVAL, "matchExpressions must be an array");
    size_t i;
    json_t *e;
    json_array_foreach(exprs, i, e) {
        const char *key = json_string_value(json_object_get(e, "key"));
        const char *op = json_string_value(json_object_get(e, "operator"));
        if (!json_is_object(e) || !key || !op)
            return core_fail(err, errlen, -EINVAL, "matchExpressions[%zu]: key and operator must be strings", i);
        enum labelsel_op o;
        if (!strcmp(op, "In")) o = LABELSEL_IN;
        else if (!strcmp(op, "NotIn")) o = LABELSEL_NOTIN;
        else if (!strcmp(op, "Exists")) o = LABELSEL_EXISTS;
        else if (!strcmp(op, "DoesNotExist")) o = LABELSEL_NOT_EXISTS;
        else {
            return core_fail(err, errlen, -EINVAL, "\"%s\" is not a valid label selector operator", op);
        }
        struct labelsel_req *r = NULL;
        int rc = add_req(sel, key, o, err, errlen, &r);
        if (rc) return rc;
        const json_t *vals = json_object_get(e, "values");
        if (vals && !json_is_null(vals)) {
            if (!json_is_array(vals))
                return core_fail(err, errlen, -EINVAL, "matchExpressions[%zu]: values must be an array", i);
            size_t j;
            json_t *v;
            json_array_foreach(vals, j, v) {
                if ((rc = add_string_value(r, v, err, errlen))) return rc;
            }
        }
        if ((rc = req_validate(r, err, errlen))) return rc;
    }
    return 0;
}

static int finish_compiled(struct labelsel *sel, int rc, struct labelsel **out, char *err, size_t errlen) {
    if (rc) {
        if (rc == -ENOMEM) core_fail(err, errlen, rc, "out of memory");
        labelsel_free(sel);
        return rc;
    }
    reqs_sort(sel);
    *out = sel;
    return 0;
}

int labelsel_from_object(const json_t *obj, struct labelsel **out, char *err, size_t errlen) {
    *out = NULL;
    struct labelsel *sel = labelsel_new();
    if (!sel) return finish_compiled(NULL, -ENOMEM, out, err, errlen);
    int rc = 0;
    if (!obj || json_is_null(obj)) {
        sel->nothing = true;
    } else if (!json_is_object(obj)) {
        rc = core_fail(err, errlen, -EINVAL, "label selector must be an object");
    } else {
        rc = compile_set(sel, json_object_get(obj, "matchLabels"), "matchLabels", err, errlen);
        if (!rc) rc = compile_exprs(sel, json_object_get(obj, "matchExpressions"), err, errlen);
    }
    return finish_compiled(sel, rc, out, err, errlen);
}

int labelsel_from_set(const json_t *set, struct labelsel **out, char *err, size_t errlen) {
    *out = NULL;
    struct labelsel *sel = labelsel_new();
    if (!sel) return finish_compiled(NULL, -ENOMEM, out, err, errlen);
    return finish_compiled(sel, compile_set(sel, set, "selector", err, errlen), out, err, errlen);
}

/* ---- matching and formatting ---- */

static bool req_has(const struct labelsel_req *r, const char *v) {
    for (int i = 0; i < r->nvalues; i++)
        if (!strcmp(r->values[i], v)) return true;
    return false;
}

static bool req_match(const struct labelsel_req *r, const json_t *labels) {
    const char *v = json_string_value(json_object_get(labels, r->key)); /* NULL-safe */
    int64_t n;
    switch (r->op) {
    case LABELSEL_EQ:
    case LABELSEL_IN: return v && req_has(r, v);
    case LABELSEL_NE:
    case LABELSEL_NOTIN: return !v || !req_has(r, v);
    case LABELSEL_EXISTS: return v != NULL;
    case LABELSEL_NOT_EXISTS: return v == NULL;
    case LABELSEL_GT: return v && parse_int64(v, &n) && n > r->num;
    case LABELSEL_LT: return v && parse_int64(v, &n) && n < r->num;
    }
    return false;
}

bool labelsel_match(const struct labelsel *sel, const json_t *labels) {
    if (!sel || sel->nothing) return false;
    for (int i = 0; i < sel->nreqs; i++)
        if (!req_match(&sel->reqs[i], labels)) return false;
    return true;
}

struct sbuf {
    char *buf;
    size_t len, pos;
};

static void sb_put(struct sbuf *b, const char *s) {
    for (; *s; s++, b->pos++)
        if (b->pos + 1 < b->len) b->buf[b->pos] = *s;
}

int labelsel_format(const struct labelsel *sel, char *buf, size_t len) {
    struct sbuf b = {buf, len, 0};
    static const char *const ops[] = {
        [LABELSEL_EQ] = "=", [LABELSEL_NE] = "!=", [LABELSEL_IN] = " in ", [LABELSEL_NOTIN] = " notin ",
        [LABELSEL_EXISTS] = "", [LABELSEL_NOT_EXISTS] = "", [LABELSEL_GT] = ">", [LABELSEL_LT] = "<",
    };
    for (int i = 0; sel && i < sel->nreqs; i++) {
        const struct labelsel_req *r = &sel->reqs[i];
        if (i) sb_put(&b, ",");
        if (r->op == LABELSEL_NOT_EXISTS) sb_put(&b, "!");
        sb_put(&b, r->key);
        sb_put(&b, ops[r->op]);
        bool set = r->op == LABELSEL_IN || r->op == LABELSEL_NOTIN;
        if (set) sb_put(&b, "(");
        for (int j = 0; j < r->nvalues; j++) {
            if (j) sb_put(&b, ",");
            sb_put(&b, r->values[j]);
        }
        if (set) sb_put(&b, ")");
    }
    if (len) buf[b.pos < len ? b.pos : len - 1] = 0;
    return (int)b.pos;
}
