/* lease_text_renew (src/k8s/lease_text.h) against the generic write of the
 * same patch: for every stored Lease and patch of the table, and for random
 * ones, the edit either declines or gives the very bytes the generic path
 * stores (the shim's patch_fn steps: merge, omit-empty metadata, kind and
 * apiVersion, validation; then the store's shaping, store_shape_modify, and
 * its encoding, jdump), with the resourceVersion's place at the same spot.
 * A case the generic path refuses or finds unchanged must be declined. */
#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "jparse.h"
#include "lease_text.h"
#include "patch.h"
#include "shim.h"
#include "store.h"
#include "store_int.h"
#include "test.h"

#define RV_MARK "RV~MARK"

static const struct shim_resource *leases(void) {
    for (int i = 0; i < shim_nresources; i++)
        if (!strcmp(shim_resources[i].store_key, "leases.coordination.k8s.io")) return &shim_resources[i];
    return NULL;
}

/* JSON text written with ' for ". */
static char *q(const char *t) {
    char *s = strdup(t);
    for (char *c = s; *c; c++)
        if (*c == '\'') *c = '"';
    return s;
}

/* The generic path's stored bytes for patch over stored, RV_MARK as the
 * version; NULL when it refuses the patch or writes nothing. */
static char *generic(const char *stored, const char *ns, const char *name, const json_t *patch) {
    const struct shim_resource *r = leases();
    json_error_t je;
    json_t *cur = jparse_loadb(stored, strlen(stored), 0, &je), *n = NULL, *shaped = NULL;
    char err[512];
    if (!cur || patch_merge(cur, patch, &n, err, sizeof err)) {
        json_decref(cur);
        return NULL;
    }
    shim_meta_omit_empty(n);
    json_t *md = json_object_get(n, "metadata");
    const char *nname = json_string_value(json_object_get(md, "name"));
    char *out = NULL;
    if (json_is_object(md) && nname && !strcmp(nname, name)) {
        if (json_is_null(json_object_get(n, "status"))) json_object_del(n, "status");
        if (!json_string_value(json_object_get(json_object_get(patch, "metadata"), "resourceVersion")))
            json_object_del(md, "resourceVersion");
        shim_view_in(r, shim_with_type(r, n));
        json_t *d = NULL;
        int unchanged = 0, del = 0, cond = 0;
        if (!shim_validate(r, n, name, err, sizeof err, &d) &&
            !store_shape_modify(r->store_key, ns, name, cur, json_incref(n), &shaped, &unchanged, &del, &cond, err,
                                sizeof err) &&
            !unchanged && !del) {
            json_object_set_new(json_object_get(shaped, "metadata"), "resourceVersion", json_string(RV_MARK));
            out = jdump(shaped, JSON_COMPACT, NULL);
        }
        json_decref(d);
    }
    json_decref(shaped);
    json_decref(n);
    json_decref(cur);
    return out;
}

/* The edit's bytes with RV_MARK in the version's place; NULL when it declines. */
static char *fast(const char *stored, const char *ns, const char *name, const json_t *patch, int *rc) {
    struct lease_renewal lr;
    *rc = lease_text_renew(stored, strlen(stored), ns, name, patch, &lr);
    if (*rc) return NULL;
    size_t ml = strlen(RV_MARK);
    char *out = malloc(lr.len + ml + 1);
    memcpy(out, lr.text, lr.rv_at);
    memcpy(out + lr.rv_at, RV_MARK, ml);
    memcpy(out + lr.rv_at + ml, lr.text + lr.rv_at, lr.len - lr.rv_at + 1);
    free(lr.text);
    return out;
}

/* The text as the store writes it (jdump of the parsed object), or the
 * text itself when it does not parse. Takes t. */
static char *canonical(char *t) {
    json_t *o = jparse_loadb(t, strlen(t), JSON_REJECT_DUPLICATES, NULL);
    char *c = o ? jdump(o, JSON_COMPACT, NULL) : NULL;
    json_decref(o);
    if (!c) return t;
    free(t);
    return c;
}

/* One case: the edit declines (want_fast 0) or matches the generic bytes
 * (1). The stored text is the store's encoding of stored_q, or with raw set
 * stored_q as it is (texts the store does not write). */
static void one_text(int line, const char *stored_q, const char *patch_q, int want_fast, bool raw) {
    char *stored = raw ? q(stored_q) : canonical(q(stored_q)), *pt = q(patch_q);
    json_error_t je;
    json_t *patch = json_loads(pt, 0, &je);
    if (!patch) {
        test_fail(__FILE__, line, "bad patch JSON: %s", je.text);
        free(stored);
        free(pt);
        return;
    }
    int rc;
    char *g = generic(stored, "kube-node-lease", "n1", patch), *f = fast(stored, "kube-node-lease", "n1", patch, &rc);
    if (want_fast && !f) test_fail(__FILE__, line, "declined (%d), generic: %s", rc, g ? g : "(refused)");
    if (!want_fast && f) test_fail(__FILE__, line, "not declined: %s", f);
    if (f && (!g || strcmp(f, g))) test_fail(__FILE__, line, "\nedit:    %s\ngeneric: %s", f, g ? g : "(none)");
    if (!want_fast && rc != -EAGAIN) test_fail(__FILE__, line, "declined with %d, not -EAGAIN", rc);
    free(g);
    free(f);
    json_decref(patch);
    free(stored);
    free(pt);
}

static void one(int line, const char *stored_q, const char *patch_q, int want_fast) {
    one_text(line, stored_q, patch_q, want_fast, false);
}

#define META(extra) "'metadata':{'name':'n1','namespace':'kube-node-lease','uid':'u-1','creationTimestamp':'2026-11-27T00:00:00Z','generation':3" extra ",'resourceVersion':'41'}"
#define SPEC "'spec':{'holderIdentity':'n1','leaseDurationSeconds':40,'renewTime':'2026-11-27T00:00:01.000000Z'}"
#define LEASE "{'kind':'Lease','apiVersion':'coordination.k8s.io/v1'," META("") "," SPEC "}"
#define RENEW "{'spec':{'renewTime':'2026-11-27T00:00:02.500000Z'}}"

TEST(lease_text_renewals_as_generic) {
    one(__LINE__, LEASE, RENEW, 1);
    one(__LINE__, LEASE, "{'spec':{'renewTime':'2026-11-27T00:00:02.5Z','holderIdentity':'n2','leaseDurationSeconds':7}}", 1);
    one(__LINE__, LEASE, "{'spec':{'leaseDurationSeconds':9223372036854775807}}", 1);
    one(__LINE__, LEASE, "{'spec':{'holderIdentity':'caf\\u00e9 \\\\ \\u0001 \\/ \\ud83d\\ude00'}}", 1);
    one(__LINE__, LEASE, "{'metadata':{'resourceVersion':'41'},'spec':{'renewTime':'x'}}", 1);
    /* fields of the stored object the edit copies as they are */
    one(__LINE__, "{'kind':'Lease','apiVersion':'coordination.k8s.io/v1'," META(",'ownerReferences':[{'apiVersion':'v1','kind':'Node','name':'n1','uid':'x'}]") "," SPEC ",'x':[1,2.5,{'a':null,'b':[true,false]}]}", RENEW, 1);
    one(__LINE__, "{'apiVersion':'coordination.k8s.io/v1'," SPEC "," META("") ",'kind':'Lease'}", RENEW, 1);
    one(__LINE__, "{'kind':'Lease','apiVersion':'coordination.k8s.io/v1'," META("") ",'spec':{'renewTime':null,'holderIdentity':'n1'}}", RENEW, 1);
    one(__LINE__, "{'kind':'Lease','apiVersion':'coordination.k8s.io/v1','metadata':{'name':'n1','namespace':'kube-node-lease','generation':0,'resourceVersion':'41'}," SPEC "}", RENEW, 1);
}

TEST(lease_text_declines_what_it_does_not_make) {
    /* patches */
    one(__LINE__, LEASE, "{'spec':{'renewTime':'2026-11-27T00:00:01.000000Z'}}", 0); /* unchanged */
    one(__LINE__, LEASE, "{'spec':{'renewTime':null}}", 0);
    one(__LINE__, LEASE, "{'spec':{'renewTime':5}}", 0);
    one(__LINE__, LEASE, "{'spec':{'leaseDurationSeconds':'40'}}", 0);
    one(__LINE__, LEASE, "{'spec':{'leaseDurationSeconds':40.5}}", 0);
    one(__LINE__, LEASE, "{'spec':{'acquireTime':'2026-11-27T00:00:00Z'}}", 0); /* not in the stored spec */
    one(__LINE__, LEASE, "{'spec':{'renewTime':'x','$patch':'replace'}}", 0);
    one(__LINE__, LEASE, "{'spec':{}}", 0);
    one(__LINE__, LEASE, "{'spec':{'renewTime':'x'},'status':{}}", 0);
    one(__LINE__, LEASE, "{'spec':{'renewTime':'x'},'metadata':{'labels':{'a':'b'}}}", 0);
    one(__LINE__, LEASE, "{'spec':{'renewTime':'x'},'metadata':{'resourceVersion':'40'}}", 0);
    one(__LINE__, LEASE, "{'spec':{'renewTime':'x'},'metadata':{'resourceVersion':''}}", 0);
    one(__LINE__, LEASE, "{'spec':{'renewTime':'x'},'metadata':{'resourceVersion':41}}", 0);
    one(__LINE__, LEASE, "{'spec':{'renewTime':'x'},'metadata':{'name':'n2'}}", 0);
    /* stored objects */
    one(__LINE__, "{'kind':'Lease','apiVersion':'coordination.k8s.io/v1'," META(",'labels':{'a':'b'}") "," SPEC "}", RENEW, 0);
    one(__LINE__, "{'kind':'Lease','apiVersion':'coordination.k8s.io/v1'," META(",'annotations':{'a':'b'}") "," SPEC "}", RENEW, 0);
    one(__LINE__, "{'kind':'Lease','apiVersion':'coordination.k8s.io/v1'," META(",'finalizers':['f'],'deletionTimestamp':'2026-11-27T00:00:00Z'") "," SPEC "}", RENEW, 0);
    one(__LINE__, "{'kind':'Lease','apiVersion':'coordination.k8s.io/v1'," META(",'managedFields':[]") "," SPEC "}", RENEW, 0);
    one(__LINE__, "{'kind':'Lease','apiVersion':'coordination.k8s.io/v1'," META(",'finalizers':null") "," SPEC "}", RENEW, 0);
    one(__LINE__, "{'kind':'Lease','apiVersion':'coordination.k8s.io/v1beta1'," META("") "," SPEC "}", RENEW, 0);
    one(__LINE__, "{'apiVersion':'coordination.k8s.io/v1'," META("") "," SPEC "}", RENEW, 0);
    one(__LINE__, "{'kind':'Lease','apiVersion':'coordination.k8s.io/v1'," META("") "," SPEC ",'status':null}", RENEW, 0);
    one(__LINE__, "{'kind':'Lease','apiVersion':'coordination.k8s.io/v1','metadata':{'name':'n1','namespace':'kube-node-lease','resourceVersion':'41','generation':3}," SPEC "}", RENEW, 0);
    one(__LINE__, "{'kind':'Lease','apiVersion':'coordination.k8s.io/v1','metadata':{'name':'n1','namespace':'kube-node-lease','resourceVersion':'41'}," SPEC "}", RENEW, 0);
    one(__LINE__, "{'kind':'Lease','apiVersion':'coordination.k8s.io/v1','metadata':{'name':'n1','namespace':'kube-node-lease','generation':-1,'resourceVersion':'41'}," SPEC "}", RENEW, 0);
    one(__LINE__, "{'kind':'Lease','apiVersion':'coordination.k8s.io/v1','metadata':{'name':'n2','namespace':'kube-node-lease','generation':3,'resourceVersion':'41'}," SPEC "}", RENEW, 0);
    one(__LINE__, "{'kind':'Lease','apiVersion':'coordination.k8s.io/v1','metadata':{'name':'n1','namespace':'default','generation':3,'resourceVersion':'41'}," SPEC "}", RENEW, 0);
    one_text(__LINE__, "{'kind':'Lease','apiVersion':'coordination.k8s.io/v1'," META("") ",'spe\\u0063':{'renewTime':'a'}," SPEC "}", RENEW, 0, true);
    one_text(__LINE__, "{'kind':'Lease','apiVersion':'coordination.k8s.io/v1'," META("") "," SPEC "," SPEC "}", RENEW, 0, true);
    one_text(__LINE__, "{'kind':'Lease','apiVersion':'coordination.k8s.io/v1'," META("") "," SPEC, RENEW, 0, true); /* cut short */
    one_text(__LINE__, LEASE " x", RENEW, 0, true);
}

/* Random Leases and renewals: string values drawn from a small alphabet
 * with escapes and UTF-8, optional fields in random places. */
TEST(lease_text_random_against_generic) {
    static const char *const vals[] = {"a", "n1", "\\\"", "\\n", "\\u00e9", "\\u0007", "/", "2026-11-27T00:00:0"};
    uint64_t seed = 25;
    int fast_n = 0;
    for (int it = 0; it < 3000; it++) {
        char stored[1024], patch[512], v1[128] = "", v2[128] = "";
        for (int k = (int)test_range(&seed, 1, 4); k > 0; k--) strcat(v1, vals[test_range(&seed, 0, 7)]);
        for (int k = (int)test_range(&seed, 0, 4); k > 0; k--) strcat(v2, vals[test_range(&seed, 0, 7)]);
        bool owner = test_rand(&seed) & 1, acq = test_rand(&seed) & 1;
        snprintf(stored, sizeof stored,
                 "{'kind':'Lease','apiVersion':'coordination.k8s.io/v1','metadata':{'name':'n1',"
                 "'namespace':'kube-node-lease'%s,'generation':%d,'resourceVersion':'%d'},'spec':{%s"
                 "'holderIdentity':'%s','leaseDurationSeconds':%d,'renewTime':'%s'}}",
                 owner ? ",'ownerReferences':[{'kind':'Node','name':'n1'}]" : "", (int)test_range(&seed, 1, 99),
                 (int)test_range(&seed, 1, 1000000), acq ? "'acquireTime':'t'," : "", v1,
                 (int)test_range(&seed, 1, 60), v2);
        int pick = (int)test_range(&seed, 0, 3);
        snprintf(patch, sizeof patch, "{'spec':{%s'renewTime':'%s'%s}}", pick == 0 ? "'holderIdentity':'n1'," : "",
                 pick == 3 ? v2 : v1, pick == 1 ? ",'leaseDurationSeconds':40" : pick == 2 ? ",'acquireTime':'u'" : "");
        char *sq = canonical(q(stored)), *pq = q(patch);
        json_t *p = json_loads(pq, 0, NULL);
        REQUIRE(p);
        int rc;
        char *g = generic(sq, "kube-node-lease", "n1", p), *f = fast(sq, "kube-node-lease", "n1", p, &rc);
        if (f) fast_n++;
        if (f && (!g || strcmp(f, g))) test_fail(__FILE__, __LINE__, "\nedit:    %s\ngeneric: %s", f, g ? g : "(none)");
        if (!f && g && (pick != 2 || acq)) test_fail(__FILE__, __LINE__, "declined (%d) a renewal: %s over %s", rc, pq, sq);
        free(g);
        free(f);
        json_decref(p);
        free(sq);
        free(pq);
    }
    CHECK(fast_n > 1500); /* most of them take the edit */
}

/* PUT: the generic replace's object (as the store shapes it) against the
 * edit of the patch shim_lease_put_patch finds in the body; equal as JSON
 * (the generic path keeps the body's key order, the edit the stored one). */
static json_t *generic_put(const char *stored, const json_t *body) {
    json_t *cur = jparse_loadb(stored, strlen(stored), 0, NULL), *n = json_deep_copy(body), *shaped = NULL;
    int unchanged = 0, del = 0, cond = 0;
    char err[512];
    shim_meta_omit_empty(n);
    int rc = store_shape_modify("leases.coordination.k8s.io", "kube-node-lease", "n1", cur, n, &shaped, &unchanged,
                                &del, &cond, err, sizeof err);
    json_decref(cur);
    if (rc || unchanged || del) {
        json_decref(shaped);
        return NULL;
    }
    json_object_set_new(json_object_get(shaped, "metadata"), "resourceVersion", json_string(RV_MARK));
    return shaped;
}

static void one_put(int line, const char *stored_q, const char *body_q, int want_fast) {
    char *stored = canonical(q(stored_q)), *bq = q(body_q);
    json_t *body = json_loads(bq, 0, NULL);
    if (!body) {
        test_fail(__FILE__, line, "bad body JSON");
        free(stored);
        free(bq);
        return;
    }
    json_t *patch = shim_lease_put_patch(stored, strlen(stored), body), *g = generic_put(stored, body);
    int rc = -EAGAIN;
    char *f = patch ? fast(stored, "kube-node-lease", "n1", patch, &rc) : NULL;
    json_t *fj = f ? json_loads(f, 0, NULL) : NULL;
    if (want_fast && !f) test_fail(__FILE__, line, "declined (%d)", rc);
    if (!want_fast && f) test_fail(__FILE__, line, "not declined: %s", f);
    if (f && (!g || !json_equal(fj, g))) {
        char *gs = g ? json_dumps(g, JSON_COMPACT) : NULL;
        test_fail(__FILE__, line, "\nedit:    %s\ngeneric: %s", f, gs ? gs : "(none)");
        free(gs);
    }
    json_decref(fj);
    free(f);
    json_decref(g);
    json_decref(patch);
    json_decref(body);
    free(stored);
    free(bq);
}

#define BODY(meta, spec) "{'apiVersion':'coordination.k8s.io/v1','kind':'Lease','metadata':{'name':'n1','namespace':'kube-node-lease'" meta "},'spec':{" spec "}}"

TEST(lease_text_put_as_generic) {
    /* a Kubelet's PUT: the object it last got back, renewTime moved */
    one_put(__LINE__, LEASE, BODY(",'uid':'u-1','resourceVersion':'41','generation':3,'creationTimestamp':'2026-11-27T00:00:00Z'",
                                  "'holderIdentity':'n1','leaseDurationSeconds':40,'renewTime':'2026-11-27T00:00:09.000000Z'"), 1);
    one_put(__LINE__, LEASE, BODY("", "'renewTime':'2026-11-27T00:00:09.000000Z','leaseDurationSeconds':41,'holderIdentity':'n2'"), 1);
    one_put(__LINE__, LEASE, BODY(",'resourceVersion':''", "'holderIdentity':'n1','leaseDurationSeconds':40,'renewTime':'x'"), 1);
    /* declined: what the generic path decides otherwise */
    one_put(__LINE__, LEASE, BODY(",'resourceVersion':'40'", "'holderIdentity':'n1','leaseDurationSeconds':40,'renewTime':'x'"), 0);
    one_put(__LINE__, LEASE, BODY(",'uid':'u-2'", "'holderIdentity':'n1','leaseDurationSeconds':40,'renewTime':'x'"), 0);
    one_put(__LINE__, LEASE, BODY(",'labels':{'a':'b'}", "'holderIdentity':'n1','leaseDurationSeconds':40,'renewTime':'x'"), 0);
    one_put(__LINE__, LEASE, BODY("", "'holderIdentity':'n1','renewTime':'x'"), 0); /* drops leaseDurationSeconds */
    one_put(__LINE__, LEASE, BODY("", "'holderIdentity':'n1','leaseDurationSeconds':40,'renewTime':'x','strategy':'s'"), 0);
    one_put(__LINE__, LEASE, BODY("", "'holderIdentity':'n1','leaseDurationSeconds':40,'renewTime':'2026-11-27T00:00:01.000000Z'"), 0);
    one_put(__LINE__, LEASE, BODY("", "'holderIdentity':'n1','leaseDurationSeconds':40,'renewTime':'x','acquireTime':'y'"), 0);
    one_put(__LINE__, LEASE, BODY("", "'holderIdentity':'n1','leaseDurationSeconds':'40','renewTime':'x'"), 0);
    one_put(__LINE__, LEASE, "{'apiVersion':'coordination.k8s.io/v1','kind':'Lease','metadata':{'name':'n1'},'spec':{'holderIdentity':'n1','leaseDurationSeconds':40,'renewTime':'x'},'status':{}}", 0);
}
