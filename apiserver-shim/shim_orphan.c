/* DELETE with propagationPolicy Orphan (kubectl delete --cascade=orphan;
 * the older orphanDependents: true): before the owner goes, every object
 * whose ownerReferences name the owner's uid loses that reference, as
 * kube-apiserver's "orphan" finalizer and garbage collector do. The
 * dependents are then nobody's: the workloads controller, which deletes a
 * Peloton Job whose owner is gone, leaves them (and their pods) alone.
 * Dependents are looked for in the owner's namespace (every namespace for a
 * cluster-scoped owner) among the built-in kinds and Peloton Jobs; at most
 * ORPHAN_MAX_SCAN objects are read per kind. */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "crd_job.h"
#include "shim.h"

#define ORPHAN_MAX_SCAN 100000

/* Whether the request asks for orphaning (its DeleteOptions body, may be NULL). */
bool shim_delete_orphans(const json_t *body, const struct http_request *req) {
    const char *q = http_req_arg(req, "propagationPolicy");
    const char *p = json_string_value(json_object_get(body, "propagationPolicy"));
    if (p) return !strcmp(p, "Orphan");
    if (json_is_boolean(json_object_get(body, "orphanDependents")))
        return json_is_true(json_object_get(body, "orphanDependents"));
    if (q) return !strcmp(q, "Orphan");
    const char *od = http_req_arg(req, "orphanDependents");
    return od && !strcmp(od, "true");
}

static bool refers_to(const json_t *ref, const char *uid) {
    const char *u = json_string_value(json_object_get(ref, "uid"));
    return u && !strcmp(u, uid);
}

/* store_modify: the object without its references to the uid in ud. */
static int drop_refs(void *ud, const json_t *cur, json_t **next, char *err, size_t errlen) {
    const char *uid = ud;
    json_t *md = json_object_get(cur, "metadata");
    json_t *kept = json_array(), *n = json_copy((json_t *)cur), *nmd = json_copy(md);
    if (!kept || !n || !nmd) {
        json_decref(kept);
        json_decref(n);
        json_decref(nmd);
        return snprintf(err, errlen, "out of memory"), -ENOMEM;
    }
    size_t i;
    json_t *ref;
    json_array_foreach(json_object_get(md, "ownerReferences"), i, ref) {
        if (!refers_to(ref, uid)) json_array_append(kept, ref);
    }
    if (json_array_size(kept)) json_object_set_new(nmd, "ownerReferences", kept);
    else {
        json_decref(kept);
        json_object_del(nmd, "ownerReferences");
    }
    json_object_set_new(n, "metadata", nmd);
    *next = n;
    return 0;
}

/* The dependents of uid stored under key in ns: their references to it dropped. */
static int orphan_in(struct shim *s, const char *key, const char *ns, const char *uid) {
    struct store_list l = {0};
    int rc = store_list(s->st, key, ns, ORPHAN_MAX_SCAN, NULL, &l);
    if (rc) return rc == -ENOENT ? 0 : rc;
    size_t i;
    json_t *o;
    json_array_foreach(l.items, i, o) {
        json_t *md = json_object_get(o, "metadata");
        size_t j;
        json_t *ref;
        bool mine = false;
        json_array_foreach(json_object_get(md, "ownerReferences"), j, ref) mine = mine || refers_to(ref, uid);
        if (!mine) continue;
        const char *ons = json_string_value(json_object_get(md, "namespace"));
        int mrc = store_modify(s->st, key, ons ? ons : "", json_string_value(json_object_get(md, "name")), drop_refs,
                               (void *)uid, NULL, NULL);
        if (mrc && mrc != -ENOENT) rc = mrc; /* one gone meanwhile is no dependent any more */
    }
    store_list_free(&l);
    return rc;
}

int shim_orphan_dependents(struct shim *s, const struct shim_resource *owner, const char *ns, const char *name) {
    json_t *cur = NULL;
    int rc = store_get(s->st, owner->store_key, owner->namespaced ? ns : "", name, &cur);
    if (rc) return rc == -ENOENT ? 0 : rc; /* the delete itself answers NotFound */
    const char *u = json_string_value(json_object_get(json_object_get(cur, "metadata"), "uid"));
    char uid[128];
    snprintf(uid, sizeof uid, "%s", u ? u : "");
    json_decref(cur);
    if (!uid[0]) return 0;
    const char *where = owner->namespaced ? ns : "";
    for (int i = 0; i < shim_nresources && !rc; i++) {
        const struct shim_resource *r = &shim_resources[i];
        bool seen = false; /* a kind served in two versions is stored once */
        for (int j = 0; j < i && !seen; j++) seen = !strcmp(shim_resources[j].store_key, r->store_key);
        if (r->namespaced && !seen) rc = orphan_in(s, r->store_key, where, uid);
    }
    return rc ? rc : orphan_in(s, CRD_JOB_RESOURCE, where, uid);
}
