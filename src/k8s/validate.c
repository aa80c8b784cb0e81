/* Write-time validation of objects (validate.h), in kube-apiserver's words
 * (pkg/apis/core/validation: ValidateObjectMeta's labels and annotations). */
#include "validate.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "jsontype.h"
#include "selector.h"

#define INVALID "FieldValueInvalid"
#define TOO_LONG "FieldValueTooLong"

struct vc {
    struct schema_result *res;
    int oom;
};

#define ADD(c, reason, field, ...)                                                                   \
    do {                                                                                             \
        if (schema_result_add((c)->res, reason, field, __VA_ARGS__)) (c)->oom = 1;                   \
    } while (0)

/* s quoted for a message, as Go's %q would show it, cut at
 * SCHEMA_MAX_VALUE_SHOWN bytes. */
static const char *quote(const char *s, char *buf, size_t n) {
    size_t o = 0, i = 0;
    buf[o++] = '"';
    for (; s[i] && i < SCHEMA_MAX_VALUE_SHOWN && o + 6 < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c == '"' || c == '\\') o += (size_t)snprintf(buf + o, n - o, "\\%c", c);
        else if (c < 0x20 || c == 0x7f) o += (size_t)snprintf(buf + o, n - o, "\\x%02x", c);
        else buf[o++] = (char)c;
    }
    if (s[i] && o + 4 < n) o += (size_t)snprintf(buf + o, n - o, "...");
    snprintf(buf + o, n - o, "\"");
    return buf;
}

/* Whether v is a map to look into: absent and null are not (and fine), any
 * other value that is not an object is an error at field. */
static bool is_map(struct vc *c, const json_t *v, const char *field, const char *of) {
    if (!v || json_is_null(v)) return false;
    if (json_is_object(v)) return true;
    ADD(c, INVALID, field, "Invalid value: %s: must be a map of %s", json_type_name(v), of);
    return false;
}

/* ---- metadata ---- */

static void check_labels(struct vc *c, const json_t *labels) {
    char q[SCHEMA_MAX_VALUE_SHOWN * 4 + 16];
    if (!is_map(c, labels, "metadata.labels", "strings")) return;
    const char *k;
    json_t *v;
    json_object_foreach((json_t *)labels, k, v) {
        const char *why = labelsel_key_problem(k);
        if (why) ADD(c, INVALID, "metadata.labels", "Invalid value: %s: %s", quote(k, q, sizeof q), why);
        if (!json_is_string(v)) {
            ADD(c, INVALID, "metadata.labels", "Invalid value: %s: the value of %s must be a string",
                json_type_name(v), quote(k, q, sizeof q));
        } else if ((why = labelsel_value_problem(json_string_value(v)))) {
            ADD(c, INVALID, "metadata.labels", "Invalid value: %s: %s", quote(json_string_value(v), q, sizeof q), why);
        }
    }
}

/* Keys are qualified names once lower-cased (kube checks them so); keys and
 * values together at most VALIDATE_MAX_ANNOTATIONS bytes. */
static void check_annotations(struct vc *c, const json_t *ann) {
    char q[SCHEMA_MAX_VALUE_SHOWN * 4 + 16];
    if (!is_map(c, ann, "metadata.annotations", "strings")) return;
    size_t total = 0;
    const char *k;
    size_t klen;
    json_t *v;
    json_object_keylen_foreach((json_t *)ann, k, klen, v) {
        char *lower = strdup(k);
        if (!lower) {
            c->oom = 1;
            return;
        }
        for (char *p = lower; *p; p++) *p = (char)tolower((unsigned char)*p);
        const char *why = labelsel_key_problem(lower);
        free(lower);
        if (why) ADD(c, INVALID, "metadata.annotations", "Invalid value: %s: %s", quote(k, q, sizeof q), why);
        if (!json_is_string(v))
            ADD(c, INVALID, "metadata.annotations", "Invalid value: %s: the value of %s must be a string",
                json_type_name(v), quote(k, q, sizeof q));
        total += klen + json_string_length(v);
    }
    if (total > VALIDATE_MAX_ANNOTATIONS)
        ADD(c, TOO_LONG, "metadata.annotations", "Too long: must have at most %d bytes", VALIDATE_MAX_ANNOTATIONS);
}

int validate_object(const char *group, const char *kind, json_t *obj, struct schema_result *res) {
    struct vc c = {.res = res};
    const json_t *md = json_object_get(obj, "metadata");
    check_labels(&c, json_object_get(md, "labels"));
    check_annotations(&c, json_object_get(md, "annotations"));
    if (c.oom) return -ENOMEM;
    return res->n ? -EINVAL : 0;
}
