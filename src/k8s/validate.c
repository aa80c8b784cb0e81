/* Write-time validation of built-in objects (validate.h), in
 * kube-apiserver's words (pkg/apis/core/validation: ValidateObjectMeta's
 * labels and annotations, ValidateResourceRequirements, ValidateSecret). */
#include "validate.h"

#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base64.h"
#include "jsontype.h"
#include "podspec.h"
#include "quantity.h"
#include "selector.h"

#define FIELD_MAX 600 /* a field path: a container index and a qualified resource name fit */

#define XSTR(x) STR(x)
#define STR(x) #x

#define INVALID "FieldValueInvalid"
#define REQUIRED "FieldValueRequired"
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

/* ---- pods: resource requirements ---- */

/* A quantity as read: its text, and its value in milli-units or, when that
 * overflows, in units (huge). */
struct qty {
    char text[QUANTITY_MAX_LEN + 32];
    int64_t milli, units;
    bool huge;
};

/* The shortest text of d that reads back as d (JSON numbers lost theirs). */
static void real_text(double d, char *buf, size_t n) {
    for (int prec = 1; prec <= 17; prec++) {
        snprintf(buf, n, "%.*g", prec, d);
        if (strtod(buf, NULL) == d) return;
    }
}

/* 0, -EINVAL (not a quantity; q->text holds what to show), -E2BIG (more
 * than INT64_MAX base units) or -ERANGE (negative). */
static int qty_read(const json_t *v, struct qty *q) {
    memset(q, 0, sizeof *q);
    if (json_is_string(v)) {
        if (json_string_length(v) > QUANTITY_MAX_LEN) {
            snprintf(q->text, sizeof q->text, "%.*s...", 32, json_string_value(v));
            return -EINVAL;
        }
        snprintf(q->text, sizeof q->text, "%s", json_string_value(v));
    } else if (json_is_integer(v)) {
        snprintf(q->text, sizeof q->text, "%" PRId64, (int64_t)json_integer_value(v));
    } else if (json_is_real(v)) {
        real_text(json_real_value(v), q->text, sizeof q->text);
    } else {
        snprintf(q->text, sizeof q->text, "%s", json_type_name(v));
        return -EINVAL;
    }
    const char *s = q->text;
    bool neg = s[0] == '-';
    int rc = quantity_parse(s + neg, 1000, &q->milli, NULL, 0);
    if (rc == -ERANGE) {
        q->huge = true;
        rc = quantity_parse(s + neg, 1, &q->units, NULL, 0);
    }
    if (rc) return rc == -ERANGE ? -E2BIG : -EINVAL;
    if (neg && (q->huge || q->milli > 0)) return -ERANGE;
    return 0;
}

/* -1, 0, 1 as a < b, a == b, a > b. */
static int qty_cmp(const struct qty *a, const struct qty *b) {
    int64_t x = a->milli, y = b->milli;
    if (a->huge || b->huge) {
        x = a->huge ? a->units : a->milli / 1000;
        y = b->huge ? b->units : b->milli / 1000;
    }
    return x < y ? -1 : x > y;
}

static bool is_native(const char *n) { return !strchr(n, '/') || strstr(n, "kubernetes.io/"); }
static bool is_hugepages(const char *n) { return !strncmp(n, "hugepages-", 10); }

/* IsExtendedResourceName: not native, not a quota's "requests.", and a
 * qualified name with "requests." before it. */
static bool is_extended(const char *n) {
    char buf[LABEL_PREFIX_MAX + LABEL_NAME_MAX + 16];
    if (is_native(n) || !strncmp(n, "requests.", 9) || strlen(n) + 10 > sizeof buf) return false;
    snprintf(buf, sizeof buf, "requests.%s", n);
    return !labelsel_key_problem(buf);
}

/* Kubernetes lets a request be below its limit for native resources other
 * than hugepages; the rest must be equal. */
static bool overcommit_ok(const char *n) { return is_native(n) && !is_hugepages(n); }

/* validateContainerResourceName and ValidateResourceQuantityValue for one
 * entry of a resource list at `at` (`...requests`); the entry's quantity in
 * *q. Returns whether it is usable for comparisons. */
static bool check_entry(struct vc *c, const char *at, const char *name, const json_t *v, struct qty *q) {
    char f[FIELD_MAX], qs[SCHEMA_MAX_VALUE_SHOWN * 4 + 16];
    snprintf(f, sizeof f, "%s[%s]", at, name);
    const char *why = labelsel_key_problem(name);
    if (why) {
        ADD(c, INVALID, f, "Invalid value: %s: %s", quote(name, qs, sizeof qs), why);
    } else if (!strchr(name, '/')) {
        if (strcmp(name, "cpu") && strcmp(name, "memory") && strcmp(name, "ephemeral-storage") && !is_hugepages(name))
            ADD(c, INVALID, f, "Invalid value: %s: must be a standard resource for containers",
                quote(name, qs, sizeof qs));
    } else if (!is_native(name) && !is_extended(name)) {
        ADD(c, INVALID, f, "Invalid value: %s: doesn't follow extended resource name standard",
            quote(name, qs, sizeof qs));
    }
    int rc = qty_read(v, q);
    if (rc == -EINVAL || rc == -E2BIG) {
        ADD(c, INVALID, f, "Invalid value: %s: must be a valid quantity%s", quote(q->text, qs, sizeof qs),
            rc == -E2BIG ? " of at most 9223372036854775807 units" : "");
        return false;
    }
    if (rc == -ERANGE) {
        ADD(c, INVALID, f, "Invalid value: %s: must be greater than or equal to 0", quote(q->text, qs, sizeof qs));
        return false;
    }
    if (is_extended(name) && !q->huge && q->milli % 1000) {
        ADD(c, INVALID, f, "Invalid value: %s: must be an integer", quote(q->text, qs, sizeof qs));
        return false;
    }
    return true;
}

/* A resource list (requests, limits, overhead) at `at`: its entries checked.
 * Returns it when it is an object, else NULL. */
static const json_t *check_list(struct vc *c, const char *at, const json_t *list) {
    if (!is_map(c, list, at, "resource names to quantities")) return NULL;
    const char *k;
    json_t *v;
    struct qty q;
    json_object_foreach((json_t *)list, k, v) check_entry(c, at, k, v, &q);
    return list;
}

/* ValidateResourceRequirements of the container at `at` ("spec.containers[0]"). */
static void check_container(struct vc *c, const char *at, const json_t *ctr) {
    char rp[FIELD_MAX], lp[FIELD_MAX], qs[SCHEMA_MAX_VALUE_SHOWN * 4 + 16];
    const json_t *res = json_object_get(ctr, "resources");
    if (!json_is_object(res)) return; /* absent, or not an object: pod_info_decode says so */
    snprintf(rp, sizeof rp, "%s.resources.requests", at);
    snprintf(lp, sizeof lp, "%s.resources.limits", at);
    const json_t *req = check_list(c, rp, json_object_get(res, "requests"));
    const json_t *lim = check_list(c, lp, json_object_get(res, "limits"));
    const char *k;
    json_t *v;
    json_object_foreach((json_t *)req, k, v) {
        struct qty rq, lq;
        if (qty_read(v, &rq) || (is_extended(k) && !rq.huge && rq.milli % 1000)) continue; /* said above */
        json_t *lv = json_object_get(lim, k);
        if (!lv) {
            if (!overcommit_ok(k))
                ADD(c, REQUIRED, lp, "Required value: Limit must be set for non overcommitable resources");
            continue;
        }
        if (qty_read(lv, &lq)) continue;
        int cmp = qty_cmp(&rq, &lq);
        if (!overcommit_ok(k) && cmp != 0)
            ADD(c, INVALID, rp, "Invalid value: %s: must be equal to %s limit of %s", quote(rq.text, qs, sizeof qs), k,
                lq.text);
        else if (cmp > 0)
            ADD(c, INVALID, rp, "Invalid value: %s: must be less than or equal to %s limit of %s",
                quote(rq.text, qs, sizeof qs), k, lq.text);
    }
}

/* A string field of a container that must be there and not empty. */
static void require_str(struct vc *c, const char *at, const json_t *ctr, const char *key) {
    const char *v = json_string_value(json_object_get(ctr, key));
    char f[FIELD_MAX];
    snprintf(f, sizeof f, "%s.%s", at, key);
    if (!v || !v[0]) ADD(c, REQUIRED, f, "Required value");
}

/* validateContainers' first checks: a name and an image each, names unique
 * across containers and initContainers (seen: names so far, borrowed). */
static void check_containers(struct vc *c, const json_t *spec, const char *key, json_t *seen) {
    const json_t *arr = json_object_get(spec, key);
    size_t i;
    json_t *ctr;
    char at[64], f[FIELD_MAX], qs[SCHEMA_MAX_VALUE_SHOWN * 4 + 16];
    json_array_foreach(arr, i, ctr) {
        snprintf(at, sizeof at, "spec.%s[%zu]", key, i);
        if (!json_is_object(ctr)) continue; /* pod_info_decode says so */
        require_str(c, at, ctr, "name");
        require_str(c, at, ctr, "image");
        const char *name = json_string_value(json_object_get(ctr, "name"));
        if (name && name[0] && seen) {
            snprintf(f, sizeof f, "%s.name", at);
            if (json_object_get(seen, name)) ADD(c, "FieldValueDuplicate", f, "Duplicate value: %s",
                                                 quote(name, qs, sizeof qs));
            else if (json_object_set_new(seen, name, json_true())) c->oom = 1;
        }
        check_container(c, at, ctr);
    }
}

static void check_pod(struct vc *c, const json_t *pod) {
    const json_t *spec = json_object_get(pod, "spec");
    const json_t *ctrs = json_object_get(spec, "containers");
    if (!json_is_array(ctrs) || !json_array_size(ctrs)) ADD(c, REQUIRED, "spec.containers", "Required value");
    json_t *seen = json_object();
    if (!seen) c->oom = 1;
    check_containers(c, spec, "containers", seen);
    check_containers(c, spec, "initContainers", seen);
    json_decref(seen);
    check_list(c, "spec.overhead", json_object_get(spec, "overhead"));
    if (c->res->n || c->oom) return;
    /* what the scheduler would refuse to read: "field: why" */
    struct pod_info info;
    char err[512];
    if (pod_info_decode(pod, &info, err, sizeof err) == 0) return;
    char *sep = strstr(err, ": ");
    if (sep) *sep = 0;
    ADD(c, INVALID, sep ? err : "spec", "%s", sep ? sep + 2 : err);
}

/* ---- secrets ---- */

/* IsConfigMapKey: NULL, or why key is not one. */
static const char *config_key_problem(const char *key) {
    size_t n = strlen(key);
    if (n > VALIDATE_MAX_CONFIG_KEY) return "must be no more than " XSTR(VALIDATE_MAX_CONFIG_KEY) " characters";
    if (n == 0 || strspn(key, "-._abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789") != n)
        return "a valid config key must consist of alphanumeric characters, '-', '_' or '.' (e.g. 'key.name',  or "
               "'KEY_NAME',  or 'key-name', regex used for validation is '[-._a-zA-Z0-9]+')";
    if (!strcmp(key, ".")) return "must not be '.'";
    if (!strcmp(key, "..")) return "must not be '..'";
    if (!strncmp(key, "..", 2)) return "must not start with '..'";
    return NULL;
}

/* stringData into data: each value base64-encoded over data's. */
static void fold_string_data(struct vc *c, json_t *secret) {
    char f[FIELD_MAX];
    json_t *sd = json_object_get(secret, "stringData");
    if (!sd) return;
    if (!is_map(c, sd, "stringData", "strings")) {
        if (json_is_null(sd)) json_object_del(secret, "stringData");
        return;
    }
    json_t *data = json_object_get(secret, "data");
    if (!data || json_is_null(data)) {
        if (!(data = json_object()) || json_object_set_new(secret, "data", data)) {
            c->oom = 1;
            return;
        }
    }
    if (!json_is_object(data)) return; /* check_secret says so */
    const char *k;
    json_t *v;
    json_object_foreach(sd, k, v) {
        if (!json_is_string(v)) {
            snprintf(f, sizeof f, "stringData[%s]", k);
            ADD(c, INVALID, f, "Invalid value: %s: must be a string", json_type_name(v));
            continue;
        }
        size_t n = json_string_length(v);
        char *b = malloc(b64_encoded_len(n, true) + 1);
        if (!b || (b64_encode(json_string_value(v), n, false, true, b), json_object_set_new(data, k, json_string(b)))) {
            free(b);
            c->oom = 1;
            return;
        }
        free(b);
    }
    json_object_del(secret, "stringData");
}

static void check_secret(struct vc *c, json_t *secret) {
    char f[FIELD_MAX], q[SCHEMA_MAX_VALUE_SHOWN * 4 + 16];
    fold_string_data(c, secret);
    const json_t *data = json_object_get(secret, "data");
    if (!is_map(c, data, "data", "base64 strings")) return;
    size_t total = 0;
    const char *k;
    json_t *v;
    json_object_foreach((json_t *)data, k, v) {
        snprintf(f, sizeof f, "data[%s]", k);
        const char *why = config_key_problem(k);
        if (why) ADD(c, INVALID, f, "Invalid value: %s: %s", quote(k, q, sizeof q), why);
        if (!json_is_string(v)) {
            ADD(c, INVALID, f, "Invalid value: %s: must be a base64 string", json_type_name(v));
            continue;
        }
        size_t bad;
        long n = b64_std_check(json_string_value(v), json_string_length(v), &bad);
        /* the value is a secret: not repeated in the message */
        if (n < 0) ADD(c, INVALID, f, "Invalid value: \"<secret>\": illegal base64 data at input byte %zu", bad);
        else total += (size_t)n;
    }
    if (total > VALIDATE_MAX_SECRET)
        ADD(c, TOO_LONG, "data", "Too long: must have at most %d bytes", VALIDATE_MAX_SECRET);
}

int validate_object(const char *group, const char *kind, json_t *obj, struct schema_result *res) {
    struct vc c = {.res = res};
    const json_t *md = json_object_get(obj, "metadata");
    check_labels(&c, json_object_get(md, "labels"));
    check_annotations(&c, json_object_get(md, "annotations"));
    if (!group[0] && !strcmp(kind, "Secret")) check_secret(&c, obj);
    if (!group[0] && !strcmp(kind, "Pod")) check_pod(&c, obj);
    if (c.oom) return -ENOMEM;
    return res->n ? -EINVAL : 0;
}
