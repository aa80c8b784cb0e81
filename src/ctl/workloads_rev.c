/* The revision records kubectl reads (workloads_int.h): a Deployment's
 * ReplicaSets and a StatefulSet's or DaemonSet's ControllerRevisions
 * (docs/workloads.md, "A Deployment's ReplicaSets"). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "workloads_int.h"

/* ---- a Deployment's ReplicaSets, as kubectl reads them ----
 * Peloton updates a Job's instances in place, so no ReplicaSet runs pods
 * here; but kubectl describe, rollout history and rollout undo read a
 * Deployment's revisions from the ReplicaSets it owns. Each template a
 * Deployment had gets one, named <deployment>-<pod-template-hash>, with the
 * revision annotation; the current one shows the Deployment's counts, the
 * others 0. They are not translated into Peloton Jobs. */

#define RS_REVISION "deployment.kubernetes.io/revision"
#define RS_HASH_LABEL "pod-template-hash"
#define RS_HISTORY "deployment.kubernetes.io/revision-history"
#define RS_HISTORY_MAX 2000 /* characters of revision-history, as kube-controller-manager bounds it */

/* The controller owner's kind of obj ("" when none). */
const char *wl_controller_kind(const json_t *obj, const char **uid) {
    size_t i;
    json_t *r;
    json_array_foreach(json_object_get(json_object_get(obj, "metadata"), "ownerReferences"), i, r) {
        if (!json_is_true(json_object_get(r, "controller"))) continue;
        if (uid) *uid = str(r, "uid", NULL);
        return str(r, "kind", NULL) ? str(r, "kind", NULL) : "";
    }
    return "";
}

/* v without its null members and its empty objects, recursively (in place).
 * A Go client's round trip of a template (kubectl rollout undo copies an old
 * ReplicaSet's template back through typed structs) adds `resources: {}`
 * and `creationTimestamp: null`, which kube-apiserver would have stored
 * anyway; here what a client sent is stored as sent. The API server bounds
 * a body's depth, so the recursion is bounded. */
static void prune_empty(json_t *v) {
    if (json_is_array(v)) {
        for (size_t i = 0; i < json_array_size(v); i++) prune_empty(json_array_get(v, i));
        return;
    }
    if (!json_is_object(v)) return;
    const char *k;
    json_t *m, *tmp;
    json_object_foreach_safe(v, tmp, k, m) {
        prune_empty(m);
        if (json_is_null(m) || (json_is_object(m) && !json_object_size(m))) json_object_del(v, k);
    }
}

/* A template's hash as kube-controller-manager spells one (FNV-1a over the
 * template's JSON with sorted keys, in its alphabet without vowels); a
 * ReplicaSet's own label, null members and empty objects (what a Go
 * client's round trip adds, `kubectl rollout undo` included: prune_empty)
 * do not count. */
void wl_template_hash(const json_t *tpl, char out[16]) {
    json_t *t = json_deep_copy(tpl);
    json_object_del(json_object_get(json_object_get(t, "metadata"), "labels"), RS_HASH_LABEL);
    prune_empty(t);
    char *s = t ? json_dumps(t, JSON_COMPACT | JSON_SORT_KEYS) : NULL;
    json_decref(t);
    uint32_t h = 2166136261u;
    for (const char *p = s ? s : ""; *p; p++) h = (h ^ (uint8_t)*p) * 16777619u;
    free(s);
    static const char alphabet[] = "bcdfghjklmnpqrstvwxz2456789";
    int n = 0;
    do out[n++] = alphabet[h % 27], h /= 27;
    while (h && n < 15);
    out[n] = 0;
}

/* Whether rec, a revision record in namespace ns nobody controls (its
 * workload was deleted with --cascade=orphan), is one workload obj adopts:
 * its labels matched by obj's selector, as kube-controller-manager adopts. */
static bool orphan_for(const json_t *rec, const char *ns, const json_t *obj) {
    const json_t *md = json_object_get(rec, "metadata");
    return !strcmp(str(md, "namespace", NULL) ? str(md, "namespace", NULL) : "", ns) &&
           !wl_controller_kind(rec, NULL)[0] && wl_selects(obj, json_object_get(md, "labels"));
}

/* The records in adopt (borrowed) made workload obj's (kind k): obj's
 * controller reference added to each; plural: "replicasets" or
 * "controllerrevisions". */
static void adopt_records(struct workloads *w, enum wl_kind k, const json_t *obj, const json_t *adopt,
                          const char *plural) {
    const json_t *md = json_object_get(obj, "metadata");
    json_t *ref = json_pack("{s:s, s:s, s:s, s:s, s:b, s:b}", "apiVersion", wl_kinds[k].api_version, "kind",
                            wl_kinds[k].kind, "name", str(md, "name", NULL), "uid", str(md, "uid", NULL),
                            "controller", 1, "blockOwnerDeletion", 1);
    size_t i;
    json_t *rec;
    json_array_foreach(adopt, i, rec) {
        char path[512];
        snprintf(path, sizeof path, "/apis/apps/v1/namespaces/%s/%s/%s", str(rec, "metadata", "namespace"), plural,
                 str(rec, "metadata", "name"));
        if (ref) wl_send(w, "PATCH", path, json_pack("{s:{s:o}}", "metadata", "ownerReferences", wl_refs_with(rec, ref)),
                         "application/merge-patch+json");
    }
    json_decref(ref);
}

struct rs_scan {
    const char *ns, *uid, *hash;
    const json_t *d; /* the Deployment */
    json_int_t max_rev, cur_rev;
    const json_t *current;
    json_t *others; /* owned ReplicaSets of other templates (borrowed) */
    json_t *adopt;  /* orphaned ones it takes (borrowed), counted as owned */
};

static int rs_scan_one(void *ud, json_t *rs) {
    struct rs_scan *c = ud;
    const char *uid = NULL;
    if (wl_rs_is_record(rs) && orphan_for(rs, c->ns, c->d)) json_array_append(c->adopt, rs);
    else if (strcmp(str(rs, "metadata", "namespace") ? str(rs, "metadata", "namespace") : "", c->ns) ||
             strcmp(wl_controller_kind(rs, &uid), "Deployment") || !uid || strcmp(uid, c->uid))
        return 0;
    const char *r = str(json_object_get(rs, "metadata"), "annotations", RS_REVISION);
    json_int_t rev = r ? strtoll(r, NULL, 10) : 0;
    if (rev > c->max_rev) c->max_rev = rev;
    const char *h = json_string_value(json_object_get(json_object_get(json_object_get(rs, "metadata"), "labels"),
                                                      RS_HASH_LABEL));
    if (h && !strcmp(h, c->hash)) c->current = rs, c->cur_rev = rev;
    else json_array_append(c->others, rs);
    return 0;
}

static void rs_status(struct workloads *w, const json_t *rs, json_t *want) {
    if (wl_status_same(json_object_get(rs, "status"), want)) {
        json_decref(want);
        return;
    }
    char path[512];
    wl_path_of(WL_RS, str(rs, "metadata", "namespace"), str(rs, "metadata", "name"), "status", path, sizeof path);
    wl_send(w, "PATCH", path, wl_status_patch(json_object_get(rs, "status"), want), "application/merge-patch+json");
}

/* The annotations that make rs, an older revision brought back, revision
 * rev: its former revision is appended to deployment.kubernetes.io/
 * revision-history (comma-separated, the oldest dropped beyond
 * RS_HISTORY_MAX characters), as kube-controller-manager keeps it. New
 * reference, a merge patch's annotations (workloads_int.h). */
json_t *wl_rs_rollback_ann(const json_t *rs, const char *rev) {
    const json_t *ann = json_object_get(json_object_get(rs, "metadata"), "annotations");
    const char *was = str(ann, RS_REVISION, NULL), *hist = str(ann, RS_HISTORY, NULL);
    json_t *out = json_pack("{s:s}", RS_REVISION, rev);
    if (!was || !was[0] || strlen(was) >= RS_HISTORY_MAX) return out;
    char buf[RS_HISTORY_MAX + 1];
    const char *h = hist ? hist : "";
    while (h[0] && strlen(h) + 1 + strlen(was) > RS_HISTORY_MAX) { /* the oldest go first */
        const char *comma = strchr(h, ',');
        h = comma ? comma + 1 : "";
    }
    snprintf(buf, sizeof buf, "%s%s%s", h, h[0] ? "," : "", was);
    json_object_set_new(out, RS_HISTORY, json_string(buf));
    return out;
}

void wl_mirror_rs(struct workloads *w, const json_t *d, const json_t *dst) {
    const json_t *md = json_object_get(d, "metadata"), *spec = json_object_get(d, "spec");
    const char *ns = str(md, "namespace", NULL), *name = str(md, "name", NULL);
    char hash[16], rsname[320], path[512];
    wl_template_hash(json_object_get(spec, "template"), hash);
    struct rs_scan c = {.ns = ns, .uid = str(md, "uid", NULL), .hash = hash, .d = d, .others = json_array(),
                        .adopt = json_array()};
    kc_informer_foreach(w->inf[WL_RS], rs_scan_one, &c);
    adopt_records(w, WL_DEPLOY, d, c.adopt, "replicasets");
    json_decref(c.adopt);
    size_t i;
    json_t *old;
    json_array_foreach(c.others, i, old) {
        if (num(old, "spec", "replicas") != 0) { /* an old revision: scaled to 0 */
            wl_path_of(WL_RS, ns, str(old, "metadata", "name"), NULL, path, sizeof path);
            wl_send(w, "PATCH", path, json_pack("{s:{s:i}}", "spec", "replicas", 0), "application/merge-patch+json");
        }
        rs_status(w, old, json_pack("{s:i, s:i, s:i, s:I}", "replicas", 0, "readyReplicas", 0, "availableReplicas", 0,
                                    "observedGeneration", num(old, "metadata", "generation")));
    }
    json_decref(c.others);
    /* the Deployment's own revision annotation, as kube-controller-manager
     * keeps it: kubectl rollout undo replaces /metadata/annotations with a
     * JSON patch, which needs the map there, and carries this value over */
    json_int_t rev_now = c.current && c.cur_rev > 0 && c.cur_rev >= c.max_rev ? c.cur_rev : c.max_rev + 1;
    char rev[24];
    snprintf(rev, sizeof rev, "%" JSON_INTEGER_FORMAT, rev_now);
    const char *drev = str(json_object_get(md, "annotations"), RS_REVISION, NULL);
    if (!drev || strcmp(drev, rev)) {
        wl_path_of(WL_DEPLOY, ns, name, NULL, path, sizeof path);
        wl_send(w, "PATCH", path, json_pack("{s:{s:{s:s}}}", "metadata", "annotations", RS_REVISION, rev),
                "application/merge-patch+json");
    }
    json_t *st = json_pack("{s:I, s:I, s:I}", "replicas", json_integer_value(json_object_get(dst, "replicas")),
                           "readyReplicas", json_integer_value(json_object_get(dst, "readyReplicas")),
                           "availableReplicas", json_integer_value(json_object_get(dst, "availableReplicas")));
    if (c.current) {
        json_object_set_new(st, "observedGeneration", json_integer(num(c.current, "metadata", "generation")));
        wl_path_of(WL_RS, ns, str(c.current, "metadata", "name"), NULL, path, sizeof path);
        if (num(c.current, "spec", "replicas") != num(d, "spec", "replicas"))
            wl_send(w, "PATCH", path, json_pack("{s:{s:I}}", "spec", "replicas", num(d, "spec", "replicas")),
                    "application/merge-patch+json");
        if (rev_now != c.cur_rev) /* an older template back (rollout undo): the newest revision again */
            wl_send(w, "PATCH", path,
                    json_pack("{s:{s:o}}", "metadata", "annotations", wl_rs_rollback_ann(c.current, rev)),
                    "application/merge-patch+json");
        rs_status(w, c.current, st);
        return;
    }
    json_decref(st);
    json_t *tpl = json_deep_copy(json_object_get(spec, "template"));
    json_t *labels = json_object_get(json_object_get(tpl, "metadata"), "labels");
    json_t *sel = json_deep_copy(json_object_get(json_object_get(spec, "selector"), "matchLabels"));
    if (!tpl || !json_is_object(labels) || !json_is_object(sel)) {
        json_decref(tpl);
        json_decref(sel);
        return;
    }
    json_object_set_new(labels, RS_HASH_LABEL, json_string(hash));
    json_object_set_new(sel, RS_HASH_LABEL, json_string(hash));
    json_t *ann = json_pack("{s:s}", RS_REVISION, rev);
    const char *cause = json_string_value(json_object_get(json_object_get(md, "annotations"),
                                                          "kubernetes.io/change-cause"));
    if (cause) json_object_set_new(ann, "kubernetes.io/change-cause", json_string(cause));
    snprintf(rsname, sizeof rsname, "%.240s-%s", name, hash);
    json_t *body = json_pack("{s:s, s:s, s:{s:s, s:s, s:O, s:o, s:[{s:s, s:s, s:s, s:s, s:b, s:b}]}, "
                             "s:{s:I, s:{s:o}, s:o}}",
                             "apiVersion", "apps/v1", "kind", "ReplicaSet", "metadata", "name", rsname, "namespace", ns,
                             "labels", labels, "annotations", ann, "ownerReferences", "apiVersion", "apps/v1", "kind",
                             "Deployment", "name", name, "uid", str(md, "uid", NULL), "controller", 1,
                             "blockOwnerDeletion", 1, "spec", "replicas", num(d, "spec", "replicas"), "selector",
                             "matchLabels", sel, "template", tpl);
    snprintf(path, sizeof path, "/apis/apps/v1/namespaces/%s/replicasets", ns);
    if (body) wl_send(w, "POST", path, body, NULL);
}

/* A Deployment's revision record: controlled by a Deployment, or left
 * ownerless by one deleted with --cascade=orphan (it still carries the
 * revision annotation and the pod-template-hash label). Neither is
 * translated into a Peloton Job: the pods it stands for are its
 * Deployment's Peloton Job's. */
bool wl_rs_is_record(const json_t *rs) {
    const char *kind = wl_controller_kind(rs, NULL);
    if (!strcmp(kind, "Deployment")) return true;
    const json_t *md = json_object_get(rs, "metadata");
    return !kind[0] && str(json_object_get(md, "annotations"), RS_REVISION, NULL) &&
           str(json_object_get(md, "labels"), RS_HASH_LABEL, NULL);
}

struct owned_by {
    struct workloads *w;
    const char *kind, *uid, *plural;
};

/* A record rec controlled by the owner (kind, uid) in o: deleted, unless
 * orphaned meanwhile (wl_delete_if_owned reads it again). */
static int delete_owned(void *ud, json_t *rec) {
    struct owned_by *o = ud;
    const char *uid = NULL;
    if (!strcmp(wl_controller_kind(rec, &uid), o->kind) && uid && !strcmp(uid, o->uid)) {
        char path[512];
        snprintf(path, sizeof path, "/apis/apps/v1/namespaces/%s/%s/%s", str(rec, "metadata", "namespace"), o->plural,
                 str(rec, "metadata", "name"));
        wl_delete_if_owned(o->w, path, uid);
    }
    return 0;
}

/* ---- a StatefulSet's or DaemonSet's ControllerRevisions ----
 * kubectl rollout history and undo read these: one per template the
 * workload had, named <name>-<hash>, labelled with the selector's labels
 * and controller-revision-hash, its data the strategic merge patch that
 * puts the template back (as kube-controller-manager writes it). */

#define CR_HASH_LABEL "controller-revision-hash"

struct cr_scan {
    const char *ns, *uid, *hash;
    const json_t *obj; /* the StatefulSet or DaemonSet */
    json_int_t max_rev, cur_rev;
    const json_t *current;
    json_t *adopt; /* orphaned ones it takes (borrowed), counted as owned */
};

static int cr_scan_one(void *ud, json_t *cr) {
    struct cr_scan *c = ud;
    const char *uid = NULL;
    wl_controller_kind(cr, &uid);
    if (orphan_for(cr, c->ns, c->obj)) json_array_append(c->adopt, cr);
    else if (strcmp(str(cr, "metadata", "namespace") ? str(cr, "metadata", "namespace") : "", c->ns) || !uid ||
             strcmp(uid, c->uid))
        return 0;
    json_int_t rev = json_integer_value(json_object_get(cr, "revision"));
    if (rev > c->max_rev) c->max_rev = rev;
    const char *h = str(json_object_get(cr, "metadata"), "labels", CR_HASH_LABEL);
    if (h && !strcmp(h, c->hash)) c->current = cr, c->cur_rev = rev;
    return 0;
}

void wl_mirror_cr(struct workloads *w, enum wl_kind k, const json_t *obj) {
    const json_t *md = json_object_get(obj, "metadata"), *spec = json_object_get(obj, "spec");
    const char *ns = str(md, "namespace", NULL), *name = str(md, "name", NULL);
    char hash[16], crname[320], path[512];
    wl_template_hash(json_object_get(spec, "template"), hash);
    struct cr_scan c = {.ns = ns, .uid = str(md, "uid", NULL), .hash = hash, .obj = obj, .adopt = json_array()};
    kc_informer_foreach(w->crs, cr_scan_one, &c);
    adopt_records(w, k, obj, c.adopt, "controllerrevisions");
    json_decref(c.adopt);
    if (c.current) {
        if (c.cur_rev < c.max_rev) { /* an older template back (rollout undo): the newest revision again */
            snprintf(path, sizeof path, "/apis/apps/v1/namespaces/%s/controllerrevisions/%s", ns,
                     str(c.current, "metadata", "name"));
            wl_send(w, "PATCH", path, json_pack("{s:I}", "revision", c.max_rev + 1), "application/merge-patch+json");
        }
        return;
    }
    json_t *labels = json_deep_copy(json_object_get(json_object_get(spec, "selector"), "matchLabels"));
    json_t *tpl = json_deep_copy(json_object_get(spec, "template"));
    if (!json_is_object(labels) || !json_is_object(tpl)) {
        json_decref(labels);
        json_decref(tpl);
        return;
    }
    json_object_set_new(labels, CR_HASH_LABEL, json_string(hash));
    json_object_set_new(tpl, "$patch", json_string("replace"));
    json_t *ann = json_object();
    const char *cause = str(json_object_get(md, "annotations"), "kubernetes.io/change-cause", NULL);
    if (cause) json_object_set_new(ann, "kubernetes.io/change-cause", json_string(cause));
    snprintf(crname, sizeof crname, "%.240s-%s", name, hash);
    json_t *body = json_pack("{s:s, s:s, s:{s:s, s:s, s:o, s:o, s:[{s:s, s:s, s:s, s:s, s:b, s:b}]}, s:{s:{s:o}}, "
                             "s:I}",
                             "apiVersion", "apps/v1", "kind", "ControllerRevision", "metadata", "name", crname,
                             "namespace", ns, "labels", labels, "annotations", ann, "ownerReferences", "apiVersion",
                             "apps/v1", "kind", wl_kinds[k].kind, "name", name, "uid", str(md, "uid", NULL), "controller",
                             1, "blockOwnerDeletion", 1, "data", "spec", "template", tpl, "revision", c.max_rev + 1);
    snprintf(path, sizeof path, "/apis/apps/v1/namespaces/%s/controllerrevisions", ns);
    if (body) wl_send(w, "POST", path, body, NULL);
}


void wl_delete_revisions(struct workloads *w, enum wl_kind k, const char *uid) {
    struct owned_by o = {w, wl_kinds[k].kind, uid, k == WL_DEPLOY ? "replicasets" : "controllerrevisions"};
    if (k == WL_DEPLOY) kc_informer_foreach(w->inf[WL_RS], delete_owned, &o);
    else if (k == WL_STS || k == WL_DS) kc_informer_foreach(w->crs, delete_owned, &o);
}
