/* Custom resources: CustomResourceDefinitions stored through the API become
 * entries of the registry (discovery, routing, OpenAPI, watch, Table), and
 * writes to their objects pass the CRD's schema (defaults, pruning,
 * validation) and, for Peloton's ResourcePools, the pool tree's rules. */
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "crd_job.h"
#include "crd_pool.h"
#include "schema.h"
#include "shim.h"
#include "strmap.h"
#include "yamljson.h"

#define CRD_KEY "customresourcedefinitions.apiextensions.k8s.io"
#define POOLS_KEY "resourcepools.peloton.io"
#define JOBS_KEY CRD_JOB_RESOURCE

/* Frees what an entry was built from its CRD but its names. */
static void custom_release(struct shim_resource *r) {
    schema_free(r->schema);
    json_decref(r->columns);
    json_decref(r->openapi);
    free(r->source);
    r->schema = NULL;
    r->columns = r->openapi = NULL;
    r->source = NULL;
}

static void custom_clear(struct shim_resource *r) {
    custom_release(r);
    free(r->strings);
    r->strings = NULL;
}

void shim_crd_free(struct shim *s) {
    for (int i = 0; i < s->ncustom; i++) {
        custom_clear(s->custom[i]);
        free(s->custom[i]);
    }
    free(s->custom);
    s->custom = NULL;
    s->ncustom = s->capcustom = 0;
}

static const char *jstr(const json_t *o, const char *k) {
    const char *v = json_string_value(json_object_get(o, k));
    return v ? v : "";
}

/* One malloc holds every name; the entry's pointers point into it. Slots:
 * group, version, plural, singular, kind, 3 short names, then the
 * categories (the first SHIM_MAX_CATEGORIES strings). */
#define NAME_SLOTS (8 + SHIM_MAX_CATEGORIES)
static int set_names(struct shim_resource *r, const char *group, const char *version, const json_t *names,
                     bool namespaced) {
    const char *src[NAME_SLOTS] = {group, version, jstr(names, "plural"), jstr(names, "singular"), jstr(names, "kind")};
    json_t *sn = json_object_get(names, "shortNames"), *cats = json_object_get(names, "categories");
    for (int k = 0; k < 3; k++) {
        const char *x = json_string_value(json_array_get(sn, (size_t)k));
        src[5 + k] = x ? x : "";
    }
    for (int k = 0, c = 0; k < SHIM_MAX_CATEGORIES; k++) {
        const char *x = NULL;
        while (!x && (size_t)c < json_array_size(cats)) x = json_string_value(json_array_get(cats, (size_t)c++));
        src[8 + k] = x ? x : "";
    }
    size_t total = strlen(src[2]) + strlen(group) + 2;
    for (int k = 0; k < NAME_SLOTS; k++) total += strlen(src[k]) + 1;
    char *buf = malloc(total), *p = buf;
    if (!buf) return -ENOMEM;
    const char *dst[NAME_SLOTS];
    for (int k = 0; k < NAME_SLOTS; k++) {
        dst[k] = p;
        p += sprintf(p, "%s", src[k]) + 1;
    }
    char *key = p;
    sprintf(key, "%s.%s", src[2], group);
    free(r->strings);
    r->strings = buf;
    r->group = dst[0];
    r->version = dst[1];
    r->plural = dst[2];
    r->singular = dst[3][0] ? dst[3] : dst[2];
    r->kind = dst[4];
    for (int k = 0; k < 3; k++) r->short_names[k] = dst[5 + k][0] ? dst[5 + k] : NULL;
    for (int k = 0; k < SHIM_MAX_CATEGORIES; k++) r->categories[k] = dst[8 + k][0] ? dst[8 + k] : NULL;
    r->store_key = key;
    r->namespaced = namespaced;
    r->custom = true;
    return 0;
}

static struct shim_resource *find_slot(struct shim *s, const char *group, const char *version, const char *plural) {
    for (int i = 0; i < s->ncustom; i++) {
        struct shim_resource *r = s->custom[i];
        if (!strcmp(r->group, group) && !strcmp(r->version, version) && !strcmp(r->plural, plural)) return r;
    }
    return NULL;
}

static struct shim_resource *slot(struct shim *s, const char *group, const char *version, const char *plural) {
    struct shim_resource *r = find_slot(s, group, version, plural);
    if (r) return r;
    if (s->ncustom == s->capcustom) {
        int n = s->capcustom ? s->capcustom * 2 : 8;
        struct shim_resource **a = realloc(s->custom, (size_t)n * sizeof *a);
        if (!a) return NULL;
        s->custom = a;
        s->capcustom = n;
    }
    if (!(r = calloc(1, sizeof *r))) return NULL;
    s->custom[s->ncustom++] = r;
    return r;
}

/* Whether an entry's source is "uid/rv" (neither empty). */
static bool same_source(const char *source, const char *uid, const char *rv) {
    size_t n = strlen(uid);
    return source && uid[0] && rv[0] && !strncmp(source, uid, n) && source[n] == '/' && !strcmp(source + n + 1, rv);
}

/* Registers one CRD's served versions; a version whose schema does not
 * compile is left out (admission refuses such CRDs, so only stored junk).
 * An entry already built from this very CRD (same uid and resourceVersion)
 * is kept as it is: every CRD write syncs all CRDs, and compiling them all
 * each time made one write cost as much as all the CRDs' patterns. */
static void register_crd(struct shim *s, const json_t *crd) {
    json_t *spec = json_object_get(crd, "spec"), *names = json_object_get(spec, "names");
    const json_t *meta = json_object_get(crd, "metadata");
    const char *group = jstr(spec, "group"), *uid = jstr(meta, "uid"), *rv = jstr(meta, "resourceVersion");
    bool namespaced = !strcmp(jstr(spec, "scope"), "Namespaced");
    size_t i;
    json_t *v;
    json_array_foreach(json_object_get(spec, "versions"), i, v) {
        if (!json_is_true(json_object_get(v, "served"))) continue;
        struct shim_resource *r = find_slot(s, group, jstr(v, "name"), jstr(names, "plural"));
        if (r && same_source(r->source, uid, rv)) {
            r->removed = false; /* unchanged since built */
            continue;
        }
        json_t *oas = json_object_get(json_object_get(v, "schema"), "openAPIV3Schema");
        struct schema *sc = NULL;
        char err[256];
        if (oas && schema_compile(oas, &sc, err, sizeof err)) {
            fprintf(stderr, "level=warn msg=\"crd schema refused\" crd=%s err=\"%s\"\n", jstr(meta, "name"), err);
            continue;
        }
        fprintf(stderr, "level=info msg=\"crd schema compiled\" crd=%s version=%s resourceVersion=%s\n",
                jstr(meta, "name"), jstr(v, "name"), rv);
        if (!r) r = slot(s, group, jstr(v, "name"), jstr(names, "plural"));
        if (!r) {
            schema_free(sc);
            return;
        }
        custom_clear(r);
        if (set_names(r, group, jstr(v, "name"), names, namespaced)) {
            schema_free(sc);
            r->removed = true;
            return;
        }
        if (uid[0] && rv[0] && (r->source = malloc(strlen(uid) + strlen(rv) + 2))) /* else rebuilt at each sync */
            sprintf(r->source, "%s/%s", uid, rv);
        r->schema = sc;
        r->openapi = oas ? json_deep_copy(oas) : NULL;
        json_t *cols = json_object_get(v, "additionalPrinterColumns");
        r->columns = json_is_array(cols) ? json_deep_copy(cols) : NULL;
        r->has_status = json_object_get(json_object_get(v, "subresources"), "status") != NULL;
        r->removed = false;
    }
}

static int register_each(void *ud, json_t *crd) {
    register_crd(ud, crd);
    return 0;
}

/* A digest of what is served of custom resources, for the OpenAPI cache. */
static uint64_t served_print(const struct shim *s) {
    uint64_t h = 0;
    for (int i = 0; i < s->ncustom; i++) {
        const struct shim_resource *r = s->custom[i];
        if (r->removed) continue;
        /* the CRD's uid/resourceVersion stands for its schema; without one, the schema itself */
        char *schema = !r->source && r->openapi ? json_dumps(r->openapi, JSON_COMPACT | JSON_SORT_KEYS) : NULL;
        const char *parts[] = {r->group, r->version, r->plural, r->singular, r->kind, r->namespaced ? "ns" : "cluster",
                               r->has_status ? "status" : "", r->source ? r->source : schema ? schema : ""};
        for (size_t k = 0; k < sizeof parts / sizeof parts[0]; k++) h = h * 0x9e3779b97f4a7c15ULL + strmap_hash(parts[k]);
        free(schema);
    }
    return h;
}

int shim_crd_sync(struct shim *s) {
    for (int i = 0; i < s->ncustom; i++) s->custom[i]->removed = true; /* until seen again */
    int rc = shim_each(s, CRD_KEY, "", NULL, register_each, s);
    if (rc) return rc; /* a partial read: what was not seen may still exist */
    /* A CRD that is gone frees its schema now, not when the slot is reused;
     * the slot and its names stay, as watchers may point at them. */
    for (int i = 0; i < s->ncustom; i++) {
        struct shim_resource *r = s->custom[i];
        if (!r->removed || !(r->schema || r->openapi || r->columns || r->source)) continue;
        fprintf(stderr, "level=info msg=\"crd served no more\" crd=%s.%s version=%s\n", r->plural, r->group,
                r->version);
        custom_release(r);
    }
    uint64_t print = served_print(s);
    if (print != s->crd_print) { /* what is served changed: the OpenAPI documents are rebuilt */
        s->crd_print = print;
        s->crd_gen++;
    }
    return 0;
}

int shim_crd_install(struct shim *s, const char *dir, char *err, size_t errlen) {
    DIR *d = opendir(dir);
    if (!d) {
        snprintf(err, errlen, "crds: cannot open %s", dir);
        return -ENOENT;
    }
    struct dirent *e;
    int rc = 0;
    while ((e = readdir(d))) {
        size_t n = strlen(e->d_name);
        if (n < 6 || strcmp(e->d_name + n - 5, ".yaml")) continue;
        char path[4096];
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        json_t *crd = doc_load_file(path, err, errlen);
        if (!crd) { rc = -EINVAL; break; }
        if (strcmp(jstr(crd, "kind"), "CustomResourceDefinition") != 0) {
            json_decref(crd);
            continue;
        }
        json_t *cur = NULL;
        const char *name = jstr(json_object_get(crd, "metadata"), "name");
        if (store_get(s->st, CRD_KEY, "", name, &cur) == 0) {
            /* present: bring its spec up to date (unconditional update) */
            json_object_set(cur, "spec", json_object_get(crd, "spec"));
            json_object_del(json_object_get(cur, "metadata"), "resourceVersion");
            rc = store_update(s->st, CRD_KEY, "", cur, NULL, NULL);
            json_decref(cur);
        } else {
            rc = store_create(s->st, CRD_KEY, "", crd, NULL);
        }
        json_decref(crd);
        if (rc) {
            snprintf(err, errlen, "crds: %s: %s", path, store_errmsg(s->st));
            break;
        }
    }
    closedir(d);
    return rc ? rc : shim_crd_sync(s);
}

static void invalid(struct http_response *resp, const struct shim_resource *r, const char *name, json_t *causes,
                    const char *msg) {
    json_t *d = json_pack("{s:s, s:s, s:s}", "name", name, "group", r->group, "kind", r->kind);
    if (causes) json_object_set_new(d, "causes", causes);
    shim_status(resp, 422, "Invalid", d, "%s \"%s\" is invalid: %s", r->kind, name, msg);
}

/* What a CRD must have for this server to serve it. */
static int admit_crd(const struct shim_resource *r, const json_t *crd, struct http_response *resp) {
    json_t *spec = json_object_get(crd, "spec"), *names = json_object_get(spec, "names");
    const char *name = jstr(json_object_get(crd, "metadata"), "name");
    char want[600];
    snprintf(want, sizeof want, "%s.%s", jstr(names, "plural"), jstr(spec, "group"));
    const char *why = NULL;
    char buf[600];
    if (!jstr(spec, "group")[0]) why = "spec.group: Required value";
    else if (!jstr(names, "plural")[0] || !jstr(names, "kind")[0]) why = "spec.names: plural and kind are required";
    else if (strcmp(name, want)) {
        snprintf(buf, sizeof buf, "metadata.name: Invalid value: \"%s\": must be spec.names.plural+\".\"+spec.group", name);
        why = buf;
    } else if (strcmp(jstr(spec, "scope"), "Namespaced") && strcmp(jstr(spec, "scope"), "Cluster"))
        why = "spec.scope: Unsupported value: supported values: \"Cluster\", \"Namespaced\"";
    else if (json_array_size(json_object_get(spec, "versions")) == 0)
        why = "spec.versions: Invalid value: must have exactly one version marked as storage version";
    size_t i;
    json_t *v;
    json_array_foreach(json_object_get(spec, "versions"), i, v) {
        json_t *oas = json_object_get(json_object_get(v, "schema"), "openAPIV3Schema");
        struct schema *sc = NULL;
        char err[400];
        if (!why && oas && schema_compile(oas, &sc, err, sizeof err)) {
            snprintf(buf, sizeof buf, "spec.versions[%zu].schema.openAPIV3Schema: %s", i, err);
            why = buf;
        }
        schema_free(sc);
    }
    if (why) invalid(resp, r, name, NULL, why);
    return why != NULL;
}

static int append_each(void *ud, json_t *obj) {
    json_array_append(ud, obj);
    return 0;
}

/* All stored ResourcePools, in *list (the caller frees it). */
static int all_pools(struct shim *s, json_t **list) {
    *list = json_array();
    return shim_each(s, POOLS_KEY, "", NULL, append_each, *list);
}

static const json_t **as_vector(json_t *list, size_t *n) {
    *n = json_array_size(list);
    const json_t **v = calloc(*n ? *n : 1, sizeof *v);
    for (size_t i = 0; v && i < *n; i++) v[i] = json_array_get(list, i);
    return v;
}

/* The text of a crd_pool / crd_job message after its `resource "name": ` head. */
static const char *after_head(const char *err) {
    const char *why = strstr(err, "\": ");
    return why ? why + 3 : err;
}

static void forbidden(struct http_response *resp, const struct shim_resource *r, const char *name, const char *why) {
    shim_status(resp, 403, "Forbidden", json_pack("{s:s, s:s, s:s}", "name", name, "group", r->group, "kind", r->plural),
                "%s.%s \"%s\" is forbidden: %s", r->plural, r->group, name, why);
}

/* A new Job naming a pool marked for deletion is refused (that pool admits
 * no new work). Returns 1 after answering 403, 0 to go on. */
static int refuse_job_in_deleting_pool(struct shim *s, const struct shim_resource *r, const char *name,
                                       const char *pool, struct http_response *resp) {
    json_t *p = NULL;
    if (!pool[0] || store_get(s->st, POOLS_KEY, "", pool, &p)) return 0; /* none: the job manager says so */
    bool deleting = crd_pool_deleting(p);
    json_decref(p);
    if (!deleting) return 0;
    char why[400];
    snprintf(why, sizeof why, "resource pool \"%.253s\" is being deleted; it admits no new work", pool);
    forbidden(resp, r, name, why);
    return 1;
}

/* A Job the job manager could not run is refused at admission with the core's
 * rules (job_spec_validate through crd_job_decode), as a pool is with the
 * tree's: before, it was stored and its only trace was a line in pelotond's
 * log. The decoder's message, "jobs.peloton.io \"NAME\": FIELD: WHY", gives
 * the cause's field. Returns 1 after answering 422, 0 to go on. */
static int admit_job(struct shim *s, const struct shim_resource *r, const json_t *obj, const json_t *old,
                     const char *name, struct http_response *resp) {
    struct job_spec spec;
    struct crd_job_extra x;
    char pool[256], err[512];
    if (!crd_job_decode(obj, &spec, pool, sizeof pool, err, sizeof err) &&
        !crd_job_decode_extra(obj, &x, err, sizeof err))
        return old ? 0 : refuse_job_in_deleting_pool(s, r, name, pool, resp);
    const char *why = after_head(err);
    size_t flen = strcspn(why, ":");
    char field[128];
    snprintf(field, sizeof field, "%.*s", (int)(why[flen] && flen < sizeof field ? flen : 0), why);
    invalid(resp, r, name,
            json_pack("[{s:s, s:s, s:s}]", "reason", "FieldValueInvalid", "message", why, "field", field), why);
    return 1;
}

/* Puts CRD_POOL_FINALIZER on a pool object (once). 0 or -ENOMEM. */
static int add_finalizer(json_t *obj) {
    if (crd_pool_has_finalizer(obj)) return 0;
    json_t *md = json_object_get(obj, "metadata"), *fin = json_object_get(md, "finalizers");
    if (!json_is_array(fin) && (!json_is_object(md) || json_object_set_new(md, "finalizers", fin = json_array())))
        return -ENOMEM;
    return json_array_append_new(fin, json_string(CRD_POOL_FINALIZER)) ? -ENOMEM : 0;
}

int shim_crd_admit(struct shim *s, const struct shim_resource *r, json_t *obj, const json_t *old,
                   struct http_response *resp) {
    if (!r->custom) return !strcmp(r->plural, "customresourcedefinitions") ? admit_crd(r, obj, resp) : 0;
    const char *name = jstr(json_object_get(obj, "metadata"), "name");
    if (r->schema) {
        schema_apply_defaults(r->schema, obj);
        schema_prune(r->schema, obj);
        struct schema_result res = {0};
        int rc = schema_validate(r->schema, obj, &res);
        if (rc == -EINVAL) {
            char msg[1024];
            schema_result_format(&res, msg, sizeof msg);
            invalid(resp, r, name, schema_result_causes(&res), msg);
            schema_result_free(&res);
            return 1;
        }
        schema_result_free(&res);
        if (rc) {
            shim_status(resp, 500, "InternalError", NULL, "validating %s: out of memory", name);
            return 1;
        }
    }
    if (!strcmp(r->store_key, JOBS_KEY)) return admit_job(s, r, obj, old, name, resp);
    if (!strcmp(r->store_key, POOLS_KEY)) { /* the pool tree's rules, with every stored pool */
        json_t *list;
        size_t n;
        int rc = all_pools(s, &list);
        if (rc) {
            json_decref(list);
            shim_store_error(s, resp, rc, r, name);
            return 1;
        }
        const json_t **v = as_vector(list, &n);
        char err[512];
        rc = v ? crd_pool_check_change(v, n, obj, old, err, sizeof err) : -ENOMEM;
        /* a write that takes the last finalizer off a marked pool removes it:
         * not while it has child pools (they would lose their parent) */
        if (!rc && old && crd_pool_deleting(old) && json_array_size(json_object_get(json_object_get(obj, "metadata"),
                                                                                    "finalizers")) == 0) {
            rc = crd_pool_check_delete(v, n, name, err, sizeof err);
            if (rc == -ENOTEMPTY) {
                free(v);
                json_decref(list);
                shim_status(resp, 409, "Conflict", json_pack("{s:s, s:s, s:s}", "name", name, "group", r->group,
                                                             "kind", r->plural), "%s", err);
                return 1;
            }
        }
        free(v);
        json_decref(list);
        if (rc == -EEXIST) return 0; /* the store answers AlreadyExists */
        if (rc == -EPERM) {
            forbidden(resp, r, name, after_head(err));
            return 1;
        }
        if (!rc && !old && add_finalizer(obj)) {
            shim_status(resp, 500, "InternalError", NULL, "admitting %s: out of memory", name);
            return 1;
        }
        if (rc) {
            json_t *causes = json_pack("[{s:s, s:s, s:s}]", "reason", "FieldValueInvalid", "message", err, "field",
                                       "spec");
            invalid(resp, r, name, causes, err);
            return 1;
        }
    }
    return 0;
}

/* store_modify: the pool with CRD_POOL_FINALIZER, so that the DELETE marks it
 * (one stored before pools got it at creation, or whose finalizers a write
 * replaced). A marked pool is left as it is. */
static int ensure_finalizer(void *ud, const json_t *cur, json_t **next, char *err, size_t errlen) {
    (void)ud;
    json_t *o = json_deep_copy(cur);
    if (!o || (!crd_pool_deleting(cur) && add_finalizer(o))) {
        json_decref(o);
        snprintf(err, errlen, "out of memory");
        return -ENOMEM;
    }
    *next = o;
    return 0;
}

/* Deleting a ResourcePool, as Kubernetes deletes a Namespace or a PVC in use:
 * the DELETE marks it (deletionTimestamp; it keeps its finalizer) and
 * answers 200 with the marked object; the resource manager takes the
 * finalizer off once the pool has no child pools and holds no work, and the
 * store removes it then (docs/crds.md, "Deletion"). */
int shim_crd_admit_delete(struct shim *s, const struct shim_resource *r, const char *name,
                          struct http_response *resp) {
    if (!r->custom || strcmp(r->store_key, POOLS_KEY)) return 0;
    json_t *out = NULL;
    int rc = store_modify(s->st, POOLS_KEY, "", name, ensure_finalizer, NULL, &out, NULL);
    json_decref(out);
    if (rc == -ENOENT) return 0; /* the delete itself will say NotFound */
    if (rc) {
        shim_store_error(s, resp, rc, r, name);
        return 1;
    }
    return 0;
}
