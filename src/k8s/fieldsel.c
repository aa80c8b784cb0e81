/* Field selectors: `f=v`, `f==v`, `f!=v` terms split at unescaped commas,
 * values unescaped as Kubernetes' fields.UnescapeValue does, field labels
 * checked against a per-kind whitelist (the apiserver's field label
 * conversion functions), matched by reading a dotted path of the object. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "errmsg.h"
#include "selector.h"

enum fkind { FK_ANY, FK_POD, FK_EVENT, FK_NODE, FK_NAMESPACE, FK_SECRET, FK_OTHER };

static const struct {
    const char *kind, *resource;
    enum fkind id;
} fkinds[] = {
    {"Pod", "pods", FK_POD},
    {"Event", "events", FK_EVENT},
    {"Node", "nodes", FK_NODE},
    {"Namespace", "namespaces", FK_NAMESPACE},
    {"Secret", "secrets", FK_SECRET},
};

/* Selectable fields: the field label, the JSON path holding it and the value
 * it reads as when absent (Kubernetes renders booleans with FormatBool). */
static const struct fieldsel_spec {
    enum fkind kind;
    const char *field, *path, *dflt;
} fspecs[] = {
    {FK_ANY, "metadata.name", "metadata.name", ""},
    {FK_ANY, "metadata.namespace", "metadata.namespace", ""},
    {FK_POD, "spec.nodeName", "spec.nodeName", ""},
    {FK_POD, "spec.restartPolicy", "spec.restartPolicy", ""},
    {FK_POD, "spec.schedulerName", "spec.schedulerName", ""},
    {FK_POD, "spec.serviceAccountName", "spec.serviceAccountName", ""},
    {FK_POD, "spec.hostNetwork", "spec.hostNetwork", "false"},
    {FK_POD, "status.phase", "status.phase", ""},
    {FK_POD, "status.podIP", "status.podIP", ""},
    {FK_POD, "status.nominatedNodeName", "status.nominatedNodeName", ""},
    {FK_EVENT, "involvedObject.kind", "involvedObject.kind", ""},
    {FK_EVENT, "involvedObject.namespace", "involvedObject.namespace", ""},
    {FK_EVENT, "involvedObject.name", "involvedObject.name", ""},
    {FK_EVENT, "involvedObject.uid", "involvedObject.uid", ""},
    {FK_EVENT, "involvedObject.apiVersion", "involvedObject.apiVersion", ""},
    {FK_EVENT, "involvedObject.resourceVersion", "involvedObject.resourceVersion", ""},
    {FK_EVENT, "involvedObject.fieldPath", "involvedObject.fieldPath", ""},
    {FK_EVENT, "reason", "reason", ""},
    {FK_EVENT, "reportingComponent", "reportingComponent", ""},
    {FK_EVENT, "source", "source.component", ""},
    {FK_EVENT, "type", "type", ""},
    {FK_NODE, "spec.unschedulable", "spec.unschedulable", "false"},
    {FK_NAMESPACE, "status.phase", "status.phase", ""},
    {FK_SECRET, "type", "type", ""},
};

static enum fkind fkind_of(const char *kind) {
    if (!kind) return FK_OTHER;
    for (size_t i = 0; i < sizeof fkinds / sizeof fkinds[0]; i++)
        if (!strcasecmp(kind, fkinds[i].kind) || !strcasecmp(kind, fkinds[i].resource)) return fkinds[i].id;
    return FK_OTHER;
}

static const struct fieldsel_spec *fspec_find(enum fkind k, const char *f, size_t n) {
    for (size_t i = 0; i < sizeof fspecs / sizeof fspecs[0]; i++) {
        const struct fieldsel_spec *s = &fspecs[i];
        if ((s->kind == FK_ANY || s->kind == k) && strlen(s->field) == n && !memcmp(s->field, f, n)) return s;
    }
    return NULL;
}

bool fieldsel_supported(const char *kind, const char *field) {
    return field && fspec_find(fkind_of(kind), field, strlen(field)) != NULL;
}

void fieldsel_free(struct fieldsel *sel) {
    if (!sel) return;
    for (int i = 0; i < sel->nterms; i++) free(sel->terms[i].value);
    free(sel->terms);
    free(sel);
}

/* UnescapeValue: "\\", "\," and "\=" stand for themselves; a bare ',' or '='
 * and any other escape are errors. dst has room for n+1 bytes. */
static int unescape_value(const char *s, size_t n, char *dst, char *err, size_t errlen) {
    size_t o = 0;
    bool slash = false;
    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        if (slash) {
            if (c != '\\' && c != ',' && c != '=')
                return core_fail(err, errlen, -EINVAL, "invalid field selector: invalid escape sequence: \\%c", c);
            dst[o++] = c;
            slash = false;
        } else if (c == '\\') {
            slash = true;
        } else if (c == ',' || c == '=') {
            return core_fail(err, errlen, -EINVAL, "invalid field selector: unescaped character in value: '%c'", c);
        } else {
            dst[o++] = c;
        }
    }
    if (slash) return core_fail(err, errlen, -EINVAL, "invalid field selector: invalid escape sequence: \\");
    dst[o] = 0;
    return 0;
}

/* The operator of term s[0..n): the first "!=", "==" or "=" from the left.
 * Returns the length of the field label before it, or n when there is none. */
static size_t term_split(const char *s, size_t n, size_t *oplen, bool *neq) {
    size_t i;
    *oplen = 0;
    *neq = false;
    for (i = 0; i < n; i++) {
        if (s[i] == '!' && i + 1 < n && s[i + 1] == '=') {
            *oplen = 2;
            *neq = true;
            break;
        }
        if (s[i] == '=') {
            *oplen = (i + 1 < n && s[i + 1] == '=') ? 2 : 1;
            break;
        }
    }
    return i;
}

/* The next non-empty term at or after *pos, split at commas not escaped by a
 * backslash. Returns false at the end. */
static bool term_next(const char *s, size_t n, size_t *pos, const char **term, size_t *tlen) {
    while (*pos <= n) {
        size_t start = *pos, i = start;
        bool slash = false;
        for (; i < n; i++) {
            if (slash) slash = false;
            else if (s[i] == '\\') slash = true;
            else if (s[i] == ',') break;
        }
        *pos = i + 1;
        if (i > start) {
            *term = s + start;
            *tlen = i - start;
            return true;
        }
    }
    return false;
}

/* Syntax of term s[0..n): stores it as the next term, value unescaped. */
static int term_parse(struct fieldsel *sel, const char *all, const char *s, size_t n, char *err, size_t errlen) {
    size_t oplen;
    bool neq;
    size_t i = term_split(s, n, &oplen, &neq);
    if (!oplen)
        return core_fail(err, errlen, -EINVAL, "invalid selector: '%s'; can't understand '%.*s'", all, (int)n, s);
    if (sel->nterms >= SELECTOR_MAX_REQS)
        return core_fail(err, errlen, -E2BIG, "field selector has more than %d terms", SELECTOR_MAX_REQS);
    struct fieldsel_term *t = &sel->terms[sel->nterms];
    size_t vlen = n - i - oplen;
    if (!(t->value = malloc(vlen + 1))) return -ENOMEM;
    sel->nterms++;
    t->neq = neq;
    return unescape_value(s + i + oplen, vlen, t->value, err, errlen);
}

int fieldsel_parse(const char *kind, const char *s, struct fieldsel **out, char *err, size_t errlen) {
    *out = NULL;
    if (!s) s = "";
    size_t n = strnlen(s, SELECTOR_MAX_LEN + 1);
    if (n > SELECTOR_MAX_LEN)
        return core_fail(err, errlen, -E2BIG, "field selector is longer than %d bytes", SELECTOR_MAX_LEN);
    struct fieldsel *sel = calloc(1, sizeof *sel);
    if (!sel || !(sel->terms = calloc(SELECTOR_MAX_REQS, sizeof *sel->terms))) {
        free(sel);
        return core_fail(err, errlen, -ENOMEM, "out of memory");
    }
    size_t pos = 0, tlen;
    const char *term;
    int rc = 0;
    /* As Kubernetes: the whole selector parses before any field is checked. */
    while (rc == 0 && term_next(s, n, &pos, &term, &tlen)) rc = term_parse(sel, s, term, tlen, err, errlen);
    enum fkind k = fkind_of(kind);
    pos = 0;
    for (int t = 0; rc == 0 && term_next(s, n, &pos, &term, &tlen); t++) {
        size_t oplen;
        bool neq;
        size_t flen = term_split(term, tlen, &oplen, &neq);
        const struct fieldsel_spec *spec = fspec_find(k, term, flen);
        if (!spec) {
            rc = core_fail(err, errlen, -EINVAL, "field label not supported: %.*s", (int)flen, term);
            break;
        }
        sel->terms[t].field = spec->field;
        sel->terms[t].path = spec->path;
        sel->terms[t].dflt = spec->dflt;
    }
    if (rc) {
        if (rc == -ENOMEM) core_fail(err, errlen, rc, "out of memory");
        fieldsel_free(sel);
        return rc;
    }
    *out = sel;
    return 0;
}

/* The field's value as text in buf, or the default when absent. */
static const char *field_value(const json_t *obj, const struct fieldsel_term *t, char *buf, size_t len) {
    const char *p = t->path;
    const json_t *v = obj;
    while (v && *p) {
        const char *dot = strchr(p, '.');
        size_t n = dot ? (size_t)(dot - p) : strlen(p);
        char seg[64];
        if (n >= sizeof seg) return t->dflt;
        memcpy(seg, p, n);
        seg[n] = 0;
        v = json_object_get(v, seg); /* NULL when v is not an object */
        p += n + (dot ? 1 : 0);
    }
    if (json_is_string(v)) return json_string_value(v);
    if (json_is_true(v)) return "true";
    if (json_is_false(v)) return "false";
    if (json_is_integer(v)) {
        snprintf(buf, len, "%" JSON_INTEGER_FORMAT, json_integer_value(v));
        return buf;
    }
    return t->dflt;
}

bool fieldsel_match(const struct fieldsel *sel, const json_t *obj) {
    if (!sel) return true;
    for (int i = 0; i < sel->nterms; i++) {
        const struct fieldsel_term *t = &sel->terms[i];
        char buf[32];
        bool eq = strcmp(field_value(obj, t, buf, sizeof buf), t->value) == 0;
        if (eq == t->neq) return false;
    }
    return true;
}

const char *fieldsel_exact(const struct fieldsel *sel, const char *field) {
    for (int i = 0; sel && field && i < sel->nterms; i++)
        if (!sel->terms[i].neq && !strcmp(sel->terms[i].field, field)) return sel->terms[i].value;
    return NULL;
}
