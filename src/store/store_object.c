/* Validation of keys and objects, and the metadata rules of create, update and
 * delete, as pure JSON transformations (no I/O besides the clock and
 * getrandom), shared by the sync and the future async connection paths. */
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>

#include "store_int.h"

#define RE_LABEL "[a-z0-9]([-a-z0-9]*[a-z0-9])?"
#define MSG_SUBDOMAIN                                                                  \
    "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric "          \
    "characters, '-' or '.', and must start and end with an alphanumeric character "   \
    "(e.g. 'example.com', regex used for validation is '" RE_LABEL "(\\." RE_LABEL ")*')"
#define MSG_LABEL                                                                      \
    "a lowercase RFC 1123 label must consist of lower case alphanumeric characters "   \
    "or '-', and must start and end with an alphanumeric character (e.g. 'my-name', "  \
    "or '123-abc', regex used for validation is '" RE_LABEL "')"

static int is_alnum_lower(char c) { return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9'); }

/* One DNS label of len bytes: [a-z0-9]([-a-z0-9]*[a-z0-9])? */
static int label_ok(const char *s, size_t len) {
    if (len == 0 || !is_alnum_lower(s[0]) || !is_alnum_lower(s[len - 1])) return 0;
    for (size_t i = 1; i + 1 < len; i++)
        if (!is_alnum_lower(s[i]) && s[i] != '-') return 0;
    return 1;
}

static int subdomain_ok(const char *s) {
    const char *p = s;
    for (;;) {
        const char *dot = strchr(p, '.');
        size_t len = dot ? (size_t)(dot - p) : strlen(p);
        if (!label_ok(p, len)) return 0;
        if (!dot) return 1;
        p = dot + 1;
    }
}

static int check_subdomain(const char *field, const char *v, size_t max, char *err, size_t errlen) {
    size_t len = strlen(v);
    if (len == 0) {
        snprintf(err, errlen, "%s: Required value: name is required", field);
        return -EINVAL;
    }
    if (len > max) {
        snprintf(err, errlen, "%s: Invalid value: \"%.40s...\": must be no more than %zu characters",
                 field, v, max);
        return -EINVAL;
    }
    if (!subdomain_ok(v)) {
        snprintf(err, errlen, "%s: Invalid value: \"%.64s\": " MSG_SUBDOMAIN, field, v);
        return -EINVAL;
    }
    return 0;
}

int store_validate_key(const char *res, const char *ns, const char *name, char *err,
                       size_t errlen) {
    int rc;
    if (!res || !ns || !name) {
        snprintf(err, errlen, "resource, namespace and name are required");
        return -EINVAL;
    }
    if ((rc = check_subdomain("resource", res, STORE_MAX_RESOURCE, err, errlen))) return rc;
    if (ns[0]) {
        size_t len = strlen(ns);
        if (len > STORE_MAX_NAMESPACE) {
            snprintf(err, errlen, "metadata.namespace: Invalid value: \"%.40s...\": must be no "
                     "more than %d characters", ns, STORE_MAX_NAMESPACE);
            return -EINVAL;
        }
        if (!label_ok(ns, len)) {
            snprintf(err, errlen, "metadata.namespace: Invalid value: \"%.64s\": " MSG_LABEL, ns);
            return -EINVAL;
        }
    }
    return check_subdomain("metadata.name", name, STORE_MAX_NAME, err, errlen);
}

int store_rng_bytes(struct store_rng *g, unsigned char *out, size_t n) {
    if (n > sizeof g->buf) return -EINVAL;
    if (!g->filled || g->pos + n > sizeof g->buf) {
        size_t got = 0;
        for (int tries = 0; got < sizeof g->buf && tries < 8; tries++) {
            ssize_t k = getrandom(g->buf + got, sizeof g->buf - got, 0);
            if (k > 0) got += (size_t)k;
            else if (k < 0 && errno != EINTR) break;
        }
        if (got < sizeof g->buf) return -EIO;
        g->pos = 0;
        g->filled = 1;
    }
    memcpy(out, g->buf + g->pos, n);
    memset(g->buf + g->pos, 0, n); /* used once */
    g->pos += n;
    return 0;
}

int store_uuid_v4(struct store_rng *rng, char out[37]) {
    unsigned char b[16];
    if (store_rng_bytes(rng, b, sizeof b)) return -EIO;
    b[6] = (unsigned char)((b[6] & 0x0f) | 0x40); /* version 4 */
    b[8] = (unsigned char)((b[8] & 0x3f) | 0x80); /* RFC 4122 variant */
    static const char hex[] = "0123456789abcdef";
    char *p = out;
    for (int i = 0; i < 16; i++) {
        if (i == 4 || i == 6 || i == 8 || i == 10) *p++ = '-';
        *p++ = hex[b[i] >> 4];
        *p++ = hex[b[i] & 15];
    }
    *p = '\0';
    return 0;
}

void store_rfc3339_now(char out[32], int64_t offset_seconds) {
    time_t t = time(NULL) + (time_t)offset_seconds;
    struct tm tm;
    gmtime_r(&t, &tm);
    strftime(out, 32, "%Y-%m-%dT%H:%M:%SZ", &tm);
}

uint64_t store_parse_rv(const char *s, int *ok) {
    uint64_t v = 0;
    *ok = 0;
    if (!s || !*s || strlen(s) > 19) return 0;
    for (const char *p = s; *p; p++) {
        if (*p < '0' || *p > '9') return 0;
        v = v * 10 + (uint64_t)(*p - '0');
    }
    *ok = 1;
    return v;
}

const char *store_meta_str(const json_t *obj, const char *field) {
    json_t *m = json_object_get(obj, "metadata");
    return json_string_value(json_object_get(m, field));
}

/* Checks the shape shared by create and update: an object, metadata an object
 * with a string name, a namespace consistent with the request. */
static int check_shape(const char *res, const char *ns, const json_t *obj, const char **name,
                       char *err, size_t errlen) {
    if (!json_is_object(obj)) {
        snprintf(err, errlen, "the object must be a JSON object");
        return -EINVAL;
    }
    json_t *meta = json_object_get(obj, "metadata");
    if (!json_is_object(meta)) {
        snprintf(err, errlen, "metadata: Required value: metadata must be an object");
        return -EINVAL;
    }
    json_t *jn = json_object_get(meta, "name");
    if (!json_is_string(jn)) {
        snprintf(err, errlen, "metadata.name: Required value: name or generateName is required");
        return -EINVAL;
    }
    json_t *jns = json_object_get(meta, "namespace");
    if (jns && !json_is_null(jns)) {
        const char *ons = json_string_value(jns);
        if (!ons) {
            snprintf(err, errlen, "metadata.namespace: Invalid value: must be a string");
            return -EINVAL;
        }
        if (ons[0] && strcmp(ons, ns) != 0) {
            snprintf(err, errlen, ns[0] ? "the namespace of the provided object does not match "
                                          "the namespace sent on the request"
                                        : "metadata.namespace: Forbidden: not allowed on this type");
            return -EINVAL;
        }
    }
    *name = json_string_value(jn);
    return store_validate_key(res, ns, *name, err, errlen);
}

static int set_ns(json_t *meta, const char *ns) {
    if (ns[0]) return json_object_set_new(meta, "namespace", json_string(ns));
    json_object_del(meta, "namespace");
    return 0;
}

int store_prepare_create(struct store_rng *rng, const char *res, const char *ns, const json_t *obj, json_t **out,
                         const char **name, char *err, size_t errlen) {
    const char *n0;
    int rc = check_shape(res, ns, obj, &n0, err, errlen); /* before copying what may not be an object */
    if (rc) return rc;
    json_t *c = json_deep_copy(obj);
    if (!c) {
        snprintf(err, errlen, "out of memory");
        return -ENOMEM;
    }
    return store_prepare_create_owned(rng, res, ns, c, out, name, err, errlen);
}

int store_prepare_create_owned(struct store_rng *rng, const char *res, const char *ns, json_t *c, json_t **out,
                               const char **name, char *err, size_t errlen) {
    int rc = check_shape(res, ns, c, name, err, errlen);
    const char *rv = rc ? NULL : store_meta_str(c, "resourceVersion");
    if (!rc && rv && rv[0]) {
        snprintf(err, errlen, "metadata.resourceVersion: Invalid value: \"%.24s\": "
                 "resourceVersion should not be set on objects to be created", rv);
        rc = -EINVAL;
    }
    char uid[37], ts[32];
    if (!rc && store_uuid_v4(rng, uid)) {
        snprintf(err, errlen, "getrandom failed: %s", strerror(errno));
        rc = -EIO;
    }
    if (rc) {
        json_decref(c);
        return rc;
    }
    store_rfc3339_now(ts, 0);
    json_t *meta = json_object_get(c, "metadata");
    json_object_del(meta, "deletionTimestamp");
    json_object_del(meta, "deletionGracePeriodSeconds");
    if (set_ns(meta, ns) || json_object_set_new(meta, "uid", json_string(uid)) ||
        json_object_set_new(meta, "creationTimestamp", json_string(ts)) ||
        json_object_set_new(meta, "generation", json_integer(1))) {
        json_decref(c);
        goto oom;
    }
    *name = json_string_value(json_object_get(meta, "name"));
    *out = c;
    return 0;
oom:
    snprintf(err, errlen, "out of memory");
    return -ENOMEM;
}

/* Equal outside metadata and status (what bumps generation). */
static int equal_outside_meta(const json_t *a, const json_t *b) {
    const char *k;
    json_t *v;
    size_t na = 0, nb = 0;
    json_object_foreach((json_t *)a, k, v) {
        if (!strcmp(k, "metadata") || !strcmp(k, "status")) continue;
        na++;
        if (!json_equal(v, json_object_get(b, k))) return 0;
    }
    json_object_foreach((json_t *)b, k, v) {
        if (strcmp(k, "metadata") && strcmp(k, "status")) nb++;
    }
    return na == nb;
}

/* Copies cur's metadata field into meta, or removes it when cur has none. */
static int keep_field(json_t *meta, const json_t *curmeta, const char *field) {
    json_t *v = json_object_get(curmeta, field);
    if (!v) {
        json_object_del(meta, field);
        return 0;
    }
    return json_object_set(meta, field, v);
}

static int has_finalizers(const json_t *obj) {
    json_t *f = json_object_get(json_object_get(obj, "metadata"), "finalizers");
    return json_is_array(f) && json_array_size(f) > 0;
}

int store_check_preconditions(const char *res, const json_t *cur, const char *uid,
                              const char *rv, char *err, size_t errlen) {
    const char *cuid = store_meta_str(cur, "uid"), *crv = store_meta_str(cur, "resourceVersion");
    if (uid && uid[0] && (!cuid || strcmp(uid, cuid))) {
        snprintf(err, errlen, "Precondition failed: UID in precondition: %.64s, UID in object meta: %.64s",
                 uid, cuid ? cuid : "");
        return STORE_ECONFLICT;
    }
    if (rv && rv[0] && (!crv || strcmp(rv, crv))) {
        snprintf(err, errlen, "Operation cannot be fulfilled on %s \"%.253s\": the object has been "
                 "modified; please apply your changes to the latest version and try again",
                 res, store_meta_str(cur, "name") ? store_meta_str(cur, "name") : "");
        return STORE_ECONFLICT;
    }
    return 0;
}

static int prepare_update_owned(const char *res, const char *ns, const json_t *cur, json_t *c, json_t **out,
                                int *unchanged, int *del, char *err, size_t errlen);

int store_prepare_update(const char *res, const char *ns, const json_t *cur, const json_t *obj,
                         json_t **out, int *unchanged, int *del, char *err, size_t errlen) {
    const char *name;
    int rc = check_shape(res, ns, obj, &name, err, errlen);
    if (rc) return rc;
    json_t *c = json_deep_copy(obj);
    if (!c) {
        snprintf(err, errlen, "out of memory");
        return -ENOMEM;
    }
    return prepare_update_owned(res, ns, cur, c, out, unchanged, del, err, errlen);
}

/* store_prepare_update's shaping done on c itself (taken; freed on error). */
static int prepare_update_owned(const char *res, const char *ns, const json_t *cur, json_t *c, json_t **out,
                                int *unchanged, int *del, char *err, size_t errlen) {
    const char *name;
    int rc = check_shape(res, ns, c, &name, err, errlen);
    if (rc) {
        json_decref(c);
        return rc;
    }
    json_t *meta = json_object_get(c, "metadata");
    const json_t *curmeta = json_object_get(cur, "metadata");
    json_int_t gen = json_integer_value(json_object_get(curmeta, "generation"));
    if (gen < 1) gen = 1;
    if (!equal_outside_meta(cur, c)) gen++;
    if (set_ns(meta, ns) || keep_field(meta, curmeta, "uid") ||
        keep_field(meta, curmeta, "creationTimestamp") ||
        keep_field(meta, curmeta, "deletionTimestamp") ||
        keep_field(meta, curmeta, "deletionGracePeriodSeconds") ||
        keep_field(meta, curmeta, "resourceVersion") ||
        json_object_set_new(meta, "generation", json_integer(gen))) {
        json_decref(c);
        goto oom;
    }
    *unchanged = json_equal(c, cur);
    /* As kube-apiserver: an update removes a deleting object once it has no
     * finalizers left, unless it is in a grace period (a pod waiting for its
     * node: the final DELETE with gracePeriodSeconds=0 removes it). */
    json_int_t graceleft = json_integer_value(json_object_get(curmeta, "deletionGracePeriodSeconds"));
    *del = json_object_get(curmeta, "deletionTimestamp") && !has_finalizers(c) && graceleft == 0;
    *out = c;
    return 0;
oom:
    snprintf(err, errlen, "out of memory");
    return -ENOMEM;
}

int store_prepare_delete(const char *res, const json_t *cur, const struct store_delete_opts *o,
                         json_t **out, int *del, char *err, size_t errlen) {
    (void)res;
    int64_t grace = o ? o->grace_period_seconds : -1;
    bool graceful = o && o->graceful && grace != 0;
    *out = NULL;
    *del = !has_finalizers(cur) && !graceful;
    const json_t *curmeta = json_object_get(cur, "metadata");
    /* Deleting what is being deleted writes nothing, unless it shortens the
     * grace period (a kubelet's final DELETE with gracePeriodSeconds=0 while
     * finalizers still hold the pod): as kube-apiserver, the shorter period
     * is recorded, so the update that removes the last finalizer removes the
     * object. */
    const json_t *curgrace = json_object_get(curmeta, "deletionGracePeriodSeconds");
    if (!*del && json_object_get(curmeta, "deletionTimestamp") &&
        (grace < 0 || (json_is_integer(curgrace) && json_integer_value(curgrace) <= grace)))
        return 0;
    json_t *c = json_deep_copy(cur);
    if (!c) goto oom;
    if (!*del) {
        char ts[32];
        json_t *meta = json_object_get(c, "metadata");
        json_int_t gen = json_integer_value(json_object_get(meta, "generation"));
        store_rfc3339_now(ts, grace > 0 ? grace : 0);
        if (json_object_set_new(meta, "deletionTimestamp", json_string(ts)) ||
            (grace >= 0 && json_object_set_new(meta, "deletionGracePeriodSeconds",
                                               json_integer(grace))) ||
            json_object_set_new(meta, "generation", json_integer(gen > 0 ? gen + 1 : 1))) {
            json_decref(c);
            goto oom;
        }
    }
    *out = c;
    return 0;
oom:
    snprintf(err, errlen, "out of memory");
    return -ENOMEM;
}

int store_shape_modify(const char *res, const char *ns, const char *name, const json_t *cur, json_t *next,
                       json_t **out, int *unchanged, int *del, int *conditional, char *err, size_t errlen) {
    *out = NULL;
    *conditional = 0;
    int rc = 0;
    const char *nname = store_meta_str(next, "name");
    const char *urv = store_meta_str(next, "resourceVersion");
    int ok = 1;
    if (!nname || strcmp(nname, name) != 0) {
        snprintf(err, errlen, "the name of the object (%.253s) does not match the name being written (%s)",
                 nname ? nname : "", name);
        rc = -EINVAL;
    } else if (urv && urv[0] && (store_parse_rv(urv, &ok), !ok)) {
        snprintf(err, errlen, "metadata.resourceVersion: Invalid value: must be a decimal resourceVersion");
        rc = -EINVAL;
    }
    if (!rc) {
        *conditional = urv && urv[0];
        rc = store_check_preconditions(res, cur, store_meta_str(next, "uid"), urv, err, errlen);
    }
    if (rc) {
        json_decref(next);
        return rc;
    }
    return prepare_update_owned(res, ns, cur, next, out, unchanged, del, err, errlen);
}
