/* ResourcePool custom objects: decoding, the tree by name, admission checks,
 * status, the CRD files' structure and the examples (src/k8s/crd_pool.h). */
#include <errno.h>
#include <jansson.h>
#include <stdlib.h>

#include "admit.h"
#include "crd_pool.h"
#include "quantity.h"
#include "test.h"
#include "yamljson.h"

/* Shared with test_crd_job.c: checks a CRD file's structure; returns the
 * number of problems (each reported through test_fail). */
int crd_test_check_crd_file(const char *path, const char *plural, const char *scope);

static json_t *parse(const char *text) {
    char err[256];
    json_t *v = doc_parse(text, strlen(text), err, sizeof err);
    if (!v) fprintf(stderr, "parse: %s\n", err);
    return v;
}

/* {"apiVersion":...,"kind":"ResourcePool","metadata":{"name":name},"spec":spec} */
static json_t *mkpool(const char *name, const char *spec_json) {
    json_t *spec = parse(spec_json ? spec_json : "{}");
    return json_pack("{s:s, s:s, s:{s:s}, s:o}", "apiVersion", "peloton.io/v1alpha1", "kind", "ResourcePool",
                     "metadata", "name", name, "spec", spec);
}

static void free_all(json_t **v, size_t n) {
    for (size_t i = 0; i < n; i++) json_decref(v[i]);
}

TEST(crdpool_decode_every_field) {
    json_t *cr = mkpool("team1",
        "{\"parent\": \"org\", \"policy\": \"PriorityFIFO\", \"owningTeam\": \"t\", \"ldapGroups\": [\"g\"],"
        " \"description\": \"d\", \"resources\": ["
        "  {\"kind\": \"cpu\", \"reservation\": \"2500m\", \"limit\": 8, \"share\": 2.5, \"type\": \"STATIC\"},"
        "  {\"kind\": \"memory\", \"reservation\": \"4Gi\", \"limit\": \"16Gi\", \"share\": 0, \"type\": \"ELASTIC\"},"
        "  {\"kind\": \"disk\", \"reservation\": 1000},"
        "  {\"kind\": \"gpu\", \"limit\": \"2\"}],"
        " \"controllerLimit\": {\"maxPercent\": 50}, \"slackLimit\": {\"maxPercent\": 12.5}}");
    REQUIRE(cr);
    char name[64], parent[64], err[256] = "";
    struct respool_config c;
    int rc = crd_pool_decode(cr, name, sizeof name, parent, sizeof parent, &c, err, sizeof err);
    CHECK_STR(err, "");
    REQUIRE_I64(rc, 0);
    CHECK_STR(name, "team1");
    CHECK_STR(parent, "org");
    CHECK_I64(c.res[RES_CPU].reservation, 2500);
    CHECK_I64(c.res[RES_CPU].limit, 8000);
    CHECK_I64(c.res[RES_CPU].share, 2500);
    CHECK(c.res[RES_CPU].is_static);
    CHECK_I64(c.res[RES_MEMORY].reservation, 4LL << 30);
    CHECK_I64(c.res[RES_MEMORY].limit, 16LL << 30);
    CHECK_I64(c.res[RES_MEMORY].share, 0);
    CHECK(!c.res[RES_MEMORY].is_static);
    CHECK_I64(c.res[RES_DISK].reservation, 1000);
    CHECK_I64(c.res[RES_DISK].limit, RES_UNLIMITED);
    CHECK_I64(c.res[RES_DISK].share, RESPOOL_SHARE_ONE);
    CHECK_I64(c.res[RES_GPU].reservation, 0);
    CHECK_I64(c.res[RES_GPU].limit, 2000);
    CHECK_I64(c.controller_limit_pct, 50 * RESPOOL_PCT_ONE);
    CHECK_I64(c.slack_limit_pct, 12500);
    CHECK_I64(c.policy, RESPOOL_PRIORITY_FIFO);
    json_decref(cr);
}

TEST(crdpool_decode_defaults_and_root_parent) {
    const char *specs[] = {NULL, "{\"parent\": \"root\"}", "{\"parent\": \"\"}", "{\"parent\": null}"};
    for (size_t i = 0; i < sizeof specs / sizeof specs[0]; i++) {
        json_t *cr = mkpool("org", specs[i]);
        char name[64], parent[64] = "x", err[256] = "";
        struct respool_config c, d;
        respool_config_default(&d);
        CHECK_I64(crd_pool_decode(cr, name, sizeof name, parent, sizeof parent, &c, err, sizeof err), 0);
        CHECK_STR(parent, "");
        CHECK(memcmp(&c, &d, sizeof c) == 0);
        json_decref(cr);
    }
    /* no spec at all */
    json_t *cr = json_pack("{s:{s:s}}", "metadata", "name", "bare");
    char name[64], parent[64], err[256] = "";
    struct respool_config c;
    CHECK_I64(crd_pool_decode(cr, name, sizeof name, parent, sizeof parent, &c, err, sizeof err), 0);
    CHECK_I64(c.res[RES_CPU].limit, RES_UNLIMITED);
    json_decref(cr);
}

TEST(crdpool_decode_errors_name_the_field) {
    static const struct { const char *name, *spec, *want; int rc; } cases[] = {
        {"p", "{\"resources\": {}}", "\"p\": spec.resources: expected a list", -EINVAL},
        {"p", "{\"resources\": [{\"kind\": \"tpu\"}]}", "spec.resources[0].kind: \"tpu\" is not one of", -EINVAL},
        {"p", "{\"resources\": [{\"reservation\": 1}]}", "spec.resources[0].kind: missing", -EINVAL},
        {"p", "{\"resources\": [{\"kind\": \"cpu\"}, {\"kind\": \"cpu\"}]}", "spec.resources[1].kind: cpu is listed twice", -EINVAL},
        {"p", "{\"resources\": [{\"kind\": \"cpu\", \"reservation\": \"2 cores\"}]}",
         "spec.resources[0].reservation (cpu): quantity \"2 cores\"", -EINVAL},
        {"p", "{\"resources\": [{\"kind\": \"cpu\", \"reservation\": \"-1\"}]}", "must not be negative", -EINVAL},
        {"p", "{\"resources\": [{\"kind\": \"memory\", \"limit\": -5}]}", "spec.resources[0].limit (memory): -5 is negative", -EINVAL},
        {"p", "{\"resources\": [{\"kind\": \"cpu\", \"limit\": 0.5}]}", "spec.resources[0].limit (cpu): expected a quantity", -EINVAL},
        {"p", "{\"resources\": [{\"kind\": \"cpu\", \"limit\": \"99999999999999999999\"}]}", "too large", -ERANGE},
        {"p", "{\"resources\": [{\"kind\": \"cpu\", \"share\": -1}]}", "spec.resources[0].share (cpu): expected a number in [0, 1000000]", -EINVAL},
        {"p", "{\"resources\": [{\"kind\": \"cpu\", \"share\": \"2\"}]}", "share (cpu): expected a number", -EINVAL},
        {"p", "{\"resources\": [{\"kind\": \"gpu\", \"type\": \"FIXED\"}]}", "spec.resources[0].type (gpu): expected ELASTIC or STATIC", -EINVAL},
        {"p", "{\"resources\": [{\"kind\": \"cpu\", \"reservaton\": 1}]}", "spec.resources[0].reservaton: unknown field", -EINVAL},
        {"p", "{\"resources\": [3]}", "spec.resources[0]: expected an object", -EINVAL},
        {"p", "{\"controllerLimit\": {\"maxPercent\": 150}}", "spec.controllerLimit.maxPercent: expected a number in [0, 100]", -EINVAL},
        {"p", "{\"slackLimit\": {\"maxPercent\": -1}}", "spec.slackLimit.maxPercent: expected a number in [0, 100]", -EINVAL},
        {"p", "{\"slackLimit\": 20}", "spec.slackLimit: expected an object {maxPercent}", -EINVAL},
        {"p", "{\"slackLimit\": {\"max\": 20}}", "spec.slackLimit.max: unknown field", -EINVAL},
        {"p", "{\"policy\": \"FIFO\"}", "spec.policy: expected PriorityFIFO", -EINVAL},
        {"p", "{\"parent\": 3}", "spec.parent: expected the parent pool's name", -EINVAL},
        {"p", "{\"parent\": \"p\"}", "\"p\": spec.parent: a pool cannot be its own parent", -EINVAL},
        {"p", "{\"parnet\": \"x\"}", "spec.parnet: unknown field", -EINVAL},
        {"p", "[]", "spec: expected an object", -EINVAL},
        {"root", "{}", "resourcepools.peloton.io \"root\": metadata.name: \"root\" is reserved", -EINVAL},
        {"", "{}", "metadata.name is required", -EINVAL},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        json_t *cr = mkpool(cases[i].name, cases[i].spec);
        REQUIRE(cr);
        char name[64], parent[64], err[256] = "";
        struct respool_config c;
        int rc = crd_pool_decode(cr, name, sizeof name, parent, sizeof parent, &c, err, sizeof err);
        if (rc != cases[i].rc) test_fail(__FILE__, __LINE__, "case %zu: rc %d, want %d (%s)", i, rc, cases[i].rc, err);
        CHECK_HAS(err, cases[i].want);
        json_decref(cr);
    }
    char name[4], parent[64], err[256] = "";
    struct respool_config c;
    json_t *cr = mkpool("longname", NULL);
    CHECK_I64(crd_pool_decode(cr, name, sizeof name, parent, sizeof parent, &c, err, sizeof err), -ENAMETOOLONG);
    json_decref(cr);
    CHECK_I64(crd_pool_decode(NULL, name, sizeof name, parent, sizeof parent, &c, err, sizeof err), -EINVAL);
    CHECK_HAS(err, "expected an object");
}

/* org (cpu res 40, limit 100) -> team1 (res 24, limit 60), team2 (res 16) */
static size_t org_tree(json_t **v) {
    v[0] = mkpool("org", "{\"resources\": [{\"kind\": \"cpu\", \"reservation\": 40, \"limit\": 100},"
                         " {\"kind\": \"memory\", \"reservation\": \"100Gi\"}]}");
    v[1] = mkpool("team1", "{\"parent\": \"org\", \"resources\": [{\"kind\": \"cpu\", \"reservation\": 24, \"limit\": 60}]}");
    v[2] = mkpool("team2", "{\"parent\": \"org\", \"resources\": [{\"kind\": \"cpu\", \"reservation\": 16}]}");
    return 3;
}

TEST(crdpool_tree_resolves_parents_by_name_in_any_order) {
    json_t *v[8];
    /* children listed before their parents, a grandchild first of all */
    v[0] = mkpool("alpha", "{\"parent\": \"team2\"}");
    v[1] = mkpool("team2", "{\"parent\": \"org\"}");
    v[2] = mkpool("team1", "{\"parent\": \"org\"}");
    v[3] = mkpool("org", NULL);
    v[4] = mkpool("other", "{\"parent\": \"root\"}");
    struct respool_tree *t = NULL;
    char err[256] = "";
    int rc = crd_pool_build_tree((const json_t *const *)v, 5, &t, err, sizeof err);
    CHECK_STR(err, "");
    REQUIRE_I64(rc, 0);
    CHECK_I64(respool_count(t), 6);
    CHECK(respool_lookup(t, "/org/team2/alpha") != NULL);
    CHECK(respool_lookup(t, "/org/team1") != NULL);
    CHECK(respool_lookup(t, "/other") != NULL);
    struct respool *a = crd_pool_find(t, "alpha");
    REQUIRE(a);
    CHECK_STR(a->path, "/org/team2/alpha");
    CHECK(crd_pool_find(t, "nope") == NULL);
    CHECK(crd_pool_find(t, "") == NULL);
    respool_tree_free(t);
    free_all(v, 5);

    /* empty */
    CHECK_I64(crd_pool_build_tree(NULL, 0, &t, err, sizeof err), 0);
    CHECK_I64(respool_count(t), 1);
    respool_tree_free(t);
}

TEST(crdpool_tree_missing_parent_cycles_duplicates) {
    json_t *v[4];
    struct respool_tree *t = (struct respool_tree *)1;
    char err[256] = "";
    v[0] = mkpool("org", NULL);
    v[1] = mkpool("team1", "{\"parent\": \"orgg\"}");
    CHECK_I64(crd_pool_build_tree((const json_t *const *)v, 2, &t, err, sizeof err), -ENOENT);
    CHECK(t == NULL);
    CHECK_STR(err, "resourcepools.peloton.io \"team1\": parent \"orgg\" does not exist");
    free_all(v, 2);

    v[0] = mkpool("a", "{\"parent\": \"b\"}");
    v[1] = mkpool("b", "{\"parent\": \"a\"}");
    CHECK_I64(crd_pool_build_tree((const json_t *const *)v, 2, &t, err, sizeof err), -ELOOP);
    CHECK_HAS(err, "spec.parent forms a cycle: \"a\" -> \"b\" -> \"a\"");
    free_all(v, 2);

    v[0] = mkpool("top", NULL);
    v[1] = mkpool("x", "{\"parent\": \"z\"}");
    v[2] = mkpool("y", "{\"parent\": \"x\"}");
    v[3] = mkpool("z", "{\"parent\": \"y\"}");
    CHECK_I64(crd_pool_build_tree((const json_t *const *)v, 4, &t, err, sizeof err), -ELOOP);
    CHECK_HAS(err, "\"x\" -> \"z\" -> \"y\" -> \"x\"");
    free_all(v, 4);

    v[0] = mkpool("dup", NULL);
    v[1] = mkpool("dup", NULL);
    CHECK_I64(crd_pool_build_tree((const json_t *const *)v, 2, &t, err, sizeof err), -EEXIST);
    CHECK_STR(err, "resourcepools.peloton.io \"dup\": listed twice (names are unique)");
    free_all(v, 2);

    /* a decode error in any pool names that pool */
    v[0] = mkpool("org", NULL);
    v[1] = mkpool("bad", "{\"resources\": [{\"kind\": \"cpu\", \"share\": -2}]}");
    CHECK_I64(crd_pool_build_tree((const json_t *const *)v, 2, &t, err, sizeof err), -EINVAL);
    CHECK_HAS(err, "\"bad\": spec.resources[0].share");
    free_all(v, 2);
}

TEST(crdpool_tree_every_core_rule_names_the_pool) {
    static const struct { const char *name, *spec, *want; } cases[] = {
        {"team1", "{\"parent\": \"org\", \"resources\": [{\"kind\": \"cpu\", \"reservation\": 50, \"limit\": 40}]}",
         "resourcepools.peloton.io \"team1\": cpu reservation 50 exceeds its limit 40"},
        {"team3", "{\"parent\": \"org\", \"resources\": [{\"kind\": \"cpu\", \"limit\": 120}]}",
         "resourcepools.peloton.io \"team3\": cpu limit 120 exceeds parent /org limit 100"},
        {"team3", "{\"parent\": \"org\", \"resources\": [{\"kind\": \"cpu\", \"reservation\": 1}]}",
         "resourcepools.peloton.io \"team3\": children of /org would reserve 41 cpu, more than its reservation 40"},
        {"team3", "{\"parent\": \"team1\", \"resources\": [{\"kind\": \"memory\", \"reservation\": \"1Gi\"}]}",
         "resourcepools.peloton.io \"team3\": children of /org/team1 would reserve 1Gi memory, more than its reservation 0"},
        {"Bad_Name!", "{\"parent\": \"org\"}", "resourcepools.peloton.io \"Bad_Name!\": pool path \"/org/Bad_Name!\": character '!'"},
        {"n234567890123456789012345678901234567890123456789012345678901234", "{}", "segment longer than 63 characters"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        json_t *v[3], *all[4];
        size_t n = org_tree(v), m = 0;
        for (size_t j = 0; j < n; j++) {
            const char *nm = json_string_value(json_object_get(json_object_get(v[j], "metadata"), "name"));
            if (strcmp(nm, cases[i].name) == 0) json_decref(v[j]); /* replaced by the case's pool */
            else all[m++] = v[j];
        }
        all[m++] = mkpool(cases[i].name, cases[i].spec);
        struct respool_tree *t = NULL;
        char err[256] = "";
        int rc = crd_pool_build_tree((const json_t *const *)all, m, &t, err, sizeof err);
        if (rc == 0) test_fail(__FILE__, __LINE__, "case %zu accepted", i);
        CHECK_HAS(err, cases[i].want);
        CHECK(t == NULL);
        free_all(all, m);
    }
    /* too deep: 17 levels */
    json_t *chain[17];
    for (int i = 0; i < 17; i++) {
        char nm[16], spec[64];
        snprintf(nm, sizeof nm, "l%d", i);
        snprintf(spec, sizeof spec, i ? "{\"parent\": \"l%d\"}" : "{}", i - 1);
        chain[i] = mkpool(nm, spec);
    }
    struct respool_tree *t = NULL;
    char err[256] = "";
    CHECK_I64(crd_pool_build_tree((const json_t *const *)chain, 17, &t, err, sizeof err), -EINVAL);
    CHECK_STR(err, "resourcepools.peloton.io \"l16\": deeper than 16 levels of pools");
    CHECK_I64(crd_pool_build_tree((const json_t *const *)chain, 16, &t, err, sizeof err), 0);
    respool_tree_free(t);
    free_all(chain, 17);
}

TEST(crdpool_check_change_create) {
    json_t *v[3];
    size_t n = org_tree(v);
    char err[256] = "";
    json_t *ok = mkpool("team3", "{\"parent\": \"org\", \"resources\": [{\"kind\": \"memory\", \"reservation\": \"10Gi\"}]}");
    CHECK_I64(crd_pool_check_change((const json_t *const *)v, n, ok, NULL, err, sizeof err), 0);
    CHECK_STR(err, "");
    json_t *top = mkpool("other", NULL);
    CHECK_I64(crd_pool_check_change((const json_t *const *)v, n, top, NULL, err, sizeof err), 0);
    json_t *over = mkpool("team3", "{\"parent\": \"org\", \"resources\": [{\"kind\": \"cpu\", \"reservation\": \"500m\"}]}");
    CHECK_I64(crd_pool_check_change((const json_t *const *)v, n, over, NULL, err, sizeof err), -EINVAL);
    CHECK_STR(err, "resourcepools.peloton.io \"team3\": children of /org would reserve 40500m cpu, more than its reservation 40");
    json_t *orphan = mkpool("team3", "{\"parent\": \"nope\"}");
    CHECK_I64(crd_pool_check_change((const json_t *const *)v, n, orphan, NULL, err, sizeof err), -ENOENT);
    CHECK_STR(err, "resourcepools.peloton.io \"team3\": parent \"nope\" does not exist");
    json_t *again = mkpool("team1", "{\"parent\": \"org\"}");
    CHECK_I64(crd_pool_check_change((const json_t *const *)v, n, again, NULL, err, sizeof err), -EEXIST);
    CHECK_STR(err, "resourcepools.peloton.io \"team1\": already exists");
    json_t *child = mkpool("sub", "{\"parent\": \"team1\", \"resources\": [{\"kind\": \"cpu\", \"limit\": 61}]}");
    CHECK_I64(crd_pool_check_change((const json_t *const *)v, n, child, NULL, err, sizeof err), -EINVAL);
    CHECK_STR(err, "resourcepools.peloton.io \"sub\": cpu limit 61 exceeds parent /org/team1 limit 60");
    json_decref(ok); json_decref(top); json_decref(over); json_decref(orphan); json_decref(again); json_decref(child);
    free_all(v, n);
}

TEST(crdpool_check_change_update) {
    json_t *v[3];
    size_t n = org_tree(v);
    char err[256] = "";
    /* raise team1's reservation within org's */
    json_t *up = mkpool("team1", "{\"parent\": \"org\", \"resources\": [{\"kind\": \"cpu\", \"reservation\": 20, \"limit\": 60}]}");
    CHECK_I64(crd_pool_check_change((const json_t *const *)v, n, up, v[1], err, sizeof err), 0);
    /* beyond it */
    json_t *big = mkpool("team1", "{\"parent\": \"org\", \"resources\": [{\"kind\": \"cpu\", \"reservation\": 30, \"limit\": 60}]}");
    CHECK_I64(crd_pool_check_change((const json_t *const *)v, n, big, v[1], err, sizeof err), -EINVAL);
    CHECK_STR(err, "resourcepools.peloton.io \"team1\": children of /org would reserve 46 cpu, more than its reservation 40");
    /* the parent below its children */
    json_t *org = mkpool("org", "{\"resources\": [{\"kind\": \"cpu\", \"reservation\": 40, \"limit\": 50},"
                                " {\"kind\": \"memory\", \"reservation\": \"100Gi\"}]}");
    CHECK_I64(crd_pool_check_change((const json_t *const *)v, n, org, v[0], err, sizeof err), -EINVAL);
    CHECK_STR(err, "resourcepools.peloton.io \"org\": cpu limit 50 is below child /org/team1 limit 60");
    json_t *org2 = mkpool("org", "{\"resources\": [{\"kind\": \"cpu\", \"reservation\": 30}]}");
    CHECK_I64(crd_pool_check_change((const json_t *const *)v, n, org2, v[0], err, sizeof err), -EINVAL);
    CHECK_STR(err, "resourcepools.peloton.io \"org\": cpu reservation 30 is below its children's total reservation 40");
    /* the parent is immutable; "", "root" and absent are the same parent */
    json_t *moved = mkpool("team1", "{\"parent\": \"team2\"}");
    CHECK_I64(crd_pool_check_change((const json_t *const *)v, n, moved, v[1], err, sizeof err), -EINVAL);
    CHECK_STR(err, "resourcepools.peloton.io \"team1\": spec.parent is immutable (was \"org\", now \"team2\")");
    json_t *rooted = mkpool("org", "{\"parent\": \"root\", \"resources\": [{\"kind\": \"cpu\", \"reservation\": 40, \"limit\": 100},"
                                   " {\"kind\": \"memory\", \"reservation\": \"100Gi\"}]}");
    CHECK_I64(crd_pool_check_change((const json_t *const *)v, n, rooted, v[0], err, sizeof err), 0);
    json_t *toroot = mkpool("team1", "{}");
    CHECK_I64(crd_pool_check_change((const json_t *const *)v, n, toroot, v[1], err, sizeof err), -EINVAL);
    CHECK_HAS(err, "spec.parent is immutable (was \"org\", now \"root\")");
    /* old not in the existing list still counts as stored */
    CHECK_I64(crd_pool_check_change((const json_t *const *)v, 1, org2, v[0], err, sizeof err), 0);
    json_t *renamed = mkpool("team9", "{\"parent\": \"org\"}");
    CHECK_I64(crd_pool_check_change((const json_t *const *)v, n, renamed, v[1], err, sizeof err), -EINVAL);
    CHECK_HAS(err, "stored object is called \"team1\"");
    json_decref(up); json_decref(big); json_decref(org); json_decref(org2); json_decref(moved);
    json_decref(rooted); json_decref(toroot); json_decref(renamed);
    free_all(v, n);
}

TEST(crdpool_check_change_broken_store_accepts_only_fixes) {
    /* stored: team1 reserves more than org (say, written before the rule) */
    json_t *v[2];
    v[0] = mkpool("org", "{\"resources\": [{\"kind\": \"cpu\", \"reservation\": 10}]}");
    v[1] = mkpool("team1", "{\"parent\": \"org\", \"resources\": [{\"kind\": \"cpu\", \"reservation\": 20}]}");
    char err[256] = "";
    json_t *other = mkpool("other", NULL);
    CHECK_I64(crd_pool_check_change((const json_t *const *)v, 2, other, NULL, err, sizeof err), -EINVAL);
    CHECK_HAS(err, "\"team1\": children of /org would reserve 20 cpu, more than its reservation 10");
    json_t *fix = mkpool("org", "{\"resources\": [{\"kind\": \"cpu\", \"reservation\": 20}]}");
    CHECK_I64(crd_pool_check_change((const json_t *const *)v, 2, fix, v[0], err, sizeof err), 0);
    json_decref(other); json_decref(fix);
    free_all(v, 2);

    /* stored: an orphan whose parent the candidate creates */
    json_t *orphan = mkpool("kid", "{\"parent\": \"mom\"}");
    json_t *mom = mkpool("mom", NULL);
    CHECK_I64(crd_pool_check_change((const json_t *const *)&orphan, 1, mom, NULL, err, sizeof err), 0);
    json_decref(orphan); json_decref(mom);
}

TEST(crdpool_check_delete) {
    json_t *v[3];
    size_t n = org_tree(v);
    char err[256] = "";
    CHECK_I64(crd_pool_check_delete((const json_t *const *)v, n, "team1", err, sizeof err), 0);
    CHECK_I64(crd_pool_check_delete((const json_t *const *)v, n, "org", err, sizeof err), -ENOTEMPTY);
    CHECK_STR(err, "resourcepools.peloton.io \"org\": has 2 child pools (\"team1\", \"team2\"); delete them first");
    free_all(v, n);
}

/* A pool with a deletionTimestamp (issue #16) is marked deleting in the
 * tree, children stored before included; a new child under it is -EPERM. */
TEST(crdpool_deleting_pools) {
    json_t *v[3];
    size_t n = org_tree(v);
    json_object_set_new(json_object_get(v[0], "metadata"), "deletionTimestamp", json_string("2026-11-27T07:00:00Z"));
    json_object_set_new(json_object_get(v[0], "metadata"), "finalizers",
                        json_pack("[s, s]", "example.com/other", CRD_POOL_FINALIZER));
    CHECK(crd_pool_deleting(v[0]) && crd_pool_has_finalizer(v[0]));
    CHECK(!crd_pool_deleting(v[1]) && !crd_pool_has_finalizer(v[1]));
    struct respool_tree *t = NULL;
    char err[256] = "";
    REQUIRE_I64(crd_pool_build_tree((const json_t *const *)v, n, &t, err, sizeof err), 0);
    CHECK(crd_pool_find(t, "org")->deleting);
    CHECK(!crd_pool_find(t, "team1")->deleting);
    CHECK_I64(crd_pool_find(t, "org")->nchildren, 2);
    respool_tree_free(t);
    json_t *kid = mkpool("team3", "{\"parent\": \"org\"}");
    CHECK_I64(crd_pool_check_change((const json_t *const *)v, n, kid, NULL, err, sizeof err), -EPERM);
    CHECK_STR(err, "resourcepools.peloton.io \"team3\": parent \"org\" is being deleted; it accepts no new child pools");
    json_t *kid1 = mkpool("team4", "{\"parent\": \"team1\"}"); /* under a live pool: fine */
    CHECK_I64(crd_pool_check_change((const json_t *const *)v, n, kid1, NULL, err, sizeof err), 0);
    /* an update of the marked pool itself is a change like any other */
    json_t *upd = json_deep_copy(v[0]);
    CHECK_I64(crd_pool_check_change((const json_t *const *)v, n, upd, v[0], err, sizeof err), 0);
    json_decref(kid); json_decref(kid1); json_decref(upd);
    free_all(v, n);
}

TEST(crdpool_status_quantities_and_summary) {
    json_t *v[3];
    size_t n = org_tree(v);
    struct respool_tree *t = NULL;
    char err[256] = "";
    REQUIRE_I64(crd_pool_build_tree((const json_t *const *)v, n, &t, err, sizeof err), 0);
    struct respool *p = crd_pool_find(t, "team1");
    REQUIRE(p);
    p->entitlement.v[RES_CPU] = 30000;
    p->entitlement.v[RES_MEMORY] = 8LL << 30;
    p->slack_entitlement.v[RES_CPU] = 2500;
    p->demand.v[RES_CPU] = 31000;
    p->alloc.c[UC_PREEMPT].v[RES_CPU] = 12000;
    p->alloc.c[UC_NONPREEMPT].v[RES_CPU] = 500;
    p->alloc.c[UC_REVOCABLE].v[RES_MEMORY] = 512LL << 20;
    json_t *st = crd_pool_status(p);
    REQUIRE(st);
    CHECK_STR(json_string_value(json_object_get(st, "path")), "/org/team1");
    CHECK_STR(json_string_value(json_object_get(json_object_get(st, "entitlement"), "cpu")), "30");
    CHECK_STR(json_string_value(json_object_get(json_object_get(st, "entitlement"), "memory")), "8Gi");
    CHECK_STR(json_string_value(json_object_get(json_object_get(st, "slackEntitlement"), "cpu")), "2500m");
    CHECK_STR(json_string_value(json_object_get(json_object_get(st, "demand"), "cpu")), "31");
    CHECK_STR(json_string_value(json_object_get(json_object_get(st, "allocation"), "cpu")), "12500m");
    CHECK_STR(json_string_value(json_object_get(json_object_get(st, "allocation"), "memory")), "512Mi");
    /* the summary is for people: rounded, cores and binary units; the exact values are above */
    json_t *cpu = json_object_get(json_object_get(st, "summary"), "cpu");
    CHECK_STR(json_string_value(json_object_get(cpu, "reservation")), "24");
    CHECK_STR(json_string_value(json_object_get(cpu, "limit")), "60");
    CHECK_STR(json_string_value(json_object_get(cpu, "entitlement")), "30");
    CHECK_STR(json_string_value(json_object_get(cpu, "allocation")), "12.5");
    CHECK_STR(json_string_value(json_object_get(cpu, "demand")), "31");
    json_t *mem = json_object_get(json_object_get(st, "summary"), "memory");
    CHECK_STR(json_string_value(json_object_get(mem, "reservation")), "0");
    CHECK_STR(json_string_value(json_object_get(mem, "limit")), "unlimited");
    CHECK(json_object_get(json_object_get(st, "summary"), "gpu") != NULL);
    json_decref(st);
    respool_tree_free(t);
    free_all(v, n);
}

/* Rounded for people: cores with two decimals at most, binary units with
 * three significant digits. */
TEST(crdpool_display_quantities) {
    static const struct {
        enum res_kind k;
        int64_t v;
        const char *want;
    } cases[] = {
        {RES_CPU, 2666, "2.67"},        {RES_CPU, 29333, "29.33"},        {RES_CPU, 16000, "16"},
        {RES_CPU, 500, "0.5"},          {RES_CPU, 0, "0"},                {RES_GPU, 1000, "1"},
        {RES_MEMORY, 45812984491LL, "42.7Gi"}, {RES_MEMORY, 128LL << 30, "128Gi"}, {RES_MEMORY, 512LL << 20, "512Mi"},
        {RES_MEMORY, 900, "900"},       {RES_MEMORY, 1536, "1.5Ki"},      {RES_DISK, (1LL << 40) * 3 / 2, "1.5Ti"},
        {RES_MEMORY, 10239LL << 20, "10Gi"}, {RES_MEMORY, (1LL << 30) - (1LL << 19), "1Gi"},
        {RES_MEMORY, 1023, "1023"},     {RES_CPU, RES_UNLIMITED, "unlimited"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char buf[48];
        quantity_format_display(cases[i].k, cases[i].v, buf, sizeof buf);
        if (strcmp(buf, cases[i].want))
            test_fail(__FILE__, __LINE__, "%s %lld: \"%s\", want \"%s\"", res_kind_name(cases[i].k),
                      (long long)cases[i].v, buf, cases[i].want);
    }
}

/* ---- the CRD files ---- */

static const char *const k_types[] = {"object", "array", "string", "integer", "number", "boolean", NULL};
static const char *const k_keys[] = {"type", "description", "properties", "items", "required", "enum", "minimum",
                                     "maximum", "minLength", "maxLength", "pattern", "format", "anyOf", "minItems",
                                     "maxItems", "nullable", NULL};

static bool in_list(const char *s, const char *const *list) {
    for (size_t i = 0; list[i]; i++) if (strcmp(s, list[i]) == 0) return true;
    return false;
}

static int bad(const char *file, const char *where, const char *what) {
    test_fail(file, 0, "schema %s: %s", where, what);
    return 1;
}

/* Structural-schema rules a real kube-apiserver enforces (the subset that a
 * hand-written schema can break): every node typed (or int-or-string with the
 * canonical anyOf), properties only on objects, items on every array, required
 * and list-map keys defined, enums of the node's type, no defaults under
 * metadata, no unknown keywords. */
static int check_schema(const char *file, const json_t *s, const char *where, int depth, bool under_metadata) {
    int nb = 0;
    if (!json_is_object(s)) return bad(file, where, "not an object");
    if (depth > 32) return bad(file, where, "too deep");
    const char *key;
    json_t *v;
    json_object_foreach((json_t *)s, key, v) {
        if (strncmp(key, "x-kubernetes-", 13) == 0) continue;
        if (!in_list(key, k_keys)) nb += bad(file, where, key);
    }
    if (under_metadata && json_object_get(s, "default")) nb += bad(file, where, "default under metadata");
    const char *type = json_string_value(json_object_get(s, "type"));
    if (json_is_true(json_object_get(s, "x-kubernetes-int-or-string"))) {
        const json_t *any = json_object_get(s, "anyOf");
        if (type) nb += bad(file, where, "int-or-string with a type");
        if (json_array_size(any) != 2 ||
            strcmp(json_string_value(json_object_get(json_array_get(any, 0), "type")) ?: "", "integer") != 0 ||
            strcmp(json_string_value(json_object_get(json_array_get(any, 1), "type")) ?: "", "string") != 0)
            nb += bad(file, where, "int-or-string without anyOf [integer, string]");
        return nb;
    }
    if (json_object_get(s, "anyOf")) nb += bad(file, where, "anyOf outside int-or-string");
    if (!type || !in_list(type, k_types)) return nb + bad(file, where, "no valid type");
    const json_t *props = json_object_get(s, "properties");
    if (props && strcmp(type, "object") != 0) nb += bad(file, where, "properties on a non-object");
    if (json_object_get(s, "items") && strcmp(type, "array") != 0) nb += bad(file, where, "items on a non-array");
    if (strcmp(type, "array") == 0 && !json_object_get(s, "items")) nb += bad(file, where, "array without items");
    size_t i;
    json_t *r;
    json_array_foreach(json_object_get(s, "required"), i, r) if (!json_object_get(props, json_string_value(r)))
        nb += bad(file, where, "required field not in properties");
    json_array_foreach(json_object_get(s, "enum"), i, r) {
        bool okv = (strcmp(type, "string") == 0 && json_is_string(r)) || (strcmp(type, "integer") == 0 && json_is_integer(r));
        if (!okv) nb += bad(file, where, "enum value of the wrong type");
    }
    json_object_foreach((json_t *)props, key, v) {
        char w[256];
        snprintf(w, sizeof w, "%s.%s", where, key);
        nb += check_schema(file, v, w, depth + 1, under_metadata || (depth == 0 && strcmp(key, "metadata") == 0));
    }
    const json_t *items = json_object_get(s, "items");
    if (items) {
        char w[256];
        snprintf(w, sizeof w, "%s[]", where);
        nb += check_schema(file, items, w, depth + 1, under_metadata);
        json_array_foreach(json_object_get(s, "x-kubernetes-list-map-keys"), i, r) {
            bool req = false;
            size_t j;
            json_t *q;
            json_array_foreach(json_object_get(items, "required"), j, q) req |= json_equal(q, r);
            if (!req) nb += bad(file, where, "list-map key not required in items");
        }
    }
    return nb;
}

/* The schema node a simple JSONPath (".spec.a.b") reaches, or NULL. */
static const json_t *schema_at(const json_t *root, const char *jp, bool *in_metadata) {
    char buf[256];
    snprintf(buf, sizeof buf, "%s", jp);
    const json_t *s = root;
    *in_metadata = false;
    if (buf[0] != '.') return NULL;
    for (char *save = NULL, *seg = strtok_r(buf + 1, ".", &save); seg; seg = strtok_r(NULL, ".", &save)) {
        if (s == root && strcmp(seg, "metadata") == 0) { *in_metadata = true; return json_object_get(json_object_get(s, "properties"), "metadata"); }
        s = json_object_get(json_object_get(s, "properties"), seg);
        if (!s) return NULL;
    }
    return s;
}

int crd_test_check_crd_file(const char *path, const char *plural, const char *scope) {
    char err[256];
    json_t *crd = doc_load_file(path, err, sizeof err);
    if (!crd) { test_fail(path, 0, "%s", err); return 1; }
    int nb = 0;
    const json_t *spec = json_object_get(crd, "spec");
    char full[128];
    snprintf(full, sizeof full, "%s.peloton.io", plural);
    if (strcmp(json_string_value(json_object_get(crd, "apiVersion")) ?: "", "apiextensions.k8s.io/v1") != 0)
        nb += bad(path, "apiVersion", "not apiextensions.k8s.io/v1");
    if (strcmp(json_string_value(json_object_get(crd, "kind")) ?: "", "CustomResourceDefinition") != 0) nb += bad(path, "kind", "wrong");
    if (strcmp(json_string_value(json_object_get(json_object_get(crd, "metadata"), "name")) ?: "", full) != 0)
        nb += bad(path, "metadata.name", "not <plural>.<group>");
    if (strcmp(json_string_value(json_object_get(spec, "group")) ?: "", "peloton.io") != 0) nb += bad(path, "group", "wrong");
    if (strcmp(json_string_value(json_object_get(spec, "scope")) ?: "", scope) != 0) nb += bad(path, "scope", "wrong");
    const json_t *names = json_object_get(spec, "names");
    if (strcmp(json_string_value(json_object_get(names, "plural")) ?: "", plural) != 0) nb += bad(path, "names.plural", "wrong");
    if (json_array_size(json_object_get(names, "shortNames")) == 0) nb += bad(path, "names.shortNames", "missing");
    const json_t *cat = json_array_get(json_object_get(names, "categories"), 0);
    if (!cat || strcmp(json_string_value(cat) ?: "", "peloton") != 0) nb += bad(path, "names.categories", "not [peloton]");
    const json_t *ver = json_array_get(json_object_get(spec, "versions"), 0);
    if (json_array_size(json_object_get(spec, "versions")) != 1 ||
        strcmp(json_string_value(json_object_get(ver, "name")) ?: "", "v1alpha1") != 0 ||
        !json_is_true(json_object_get(ver, "served")) || !json_is_true(json_object_get(ver, "storage")))
        nb += bad(path, "versions", "not one served, stored v1alpha1");
    if (!json_is_object(json_object_get(json_object_get(ver, "subresources"), "status")))
        nb += bad(path, "subresources", "no status subresource");
    const json_t *root = json_object_get(json_object_get(ver, "schema"), "openAPIV3Schema");
    nb += check_schema(path, root, "openAPIV3Schema", 0, false);
    const json_t *md = json_object_get(json_object_get(root, "properties"), "metadata");
    if (!md || json_object_size(md) != 1) nb += bad(path, "metadata", "must be just {type: object}");
    size_t i;
    json_t *col;
    json_array_foreach(json_object_get(ver, "additionalPrinterColumns"), i, col) {
        const char *jp = json_string_value(json_object_get(col, "jsonPath"));
        const char *ct = json_string_value(json_object_get(col, "type"));
        bool in_md;
        const json_t *s = jp ? schema_at(root, jp, &in_md) : NULL;
        if (!s || !ct) { nb += bad(path, jp ? jp : "column", "printer column path not in the schema"); continue; }
        const char *st = json_string_value(json_object_get(s, "type"));
        bool match = in_md ? strcmp(ct, "date") == 0 || strcmp(ct, "string") == 0
                           : (st && (strcmp(ct, st) == 0 || (strcmp(ct, "date") == 0 && strcmp(st, "string") == 0)));
        if (!match) nb += bad(path, jp, "printer column type differs from the field's");
    }
    json_decref(crd);
    return nb;
}

TEST(crdpool_crd_file_is_structural) {
    CHECK_I64(crd_test_check_crd_file("crds/resourcepools.peloton.io.yaml", "resourcepools", "Cluster"), 0);
    char err[256];
    json_t *crd = doc_load_file("crds/resourcepools.peloton.io.yaml", err, sizeof err);
    REQUIRE(crd);
    json_t *ver = json_array_get(json_object_get(json_object_get(crd, "spec"), "versions"), 0);
    json_t *cols = json_object_get(ver, "additionalPrinterColumns");
    const char *want[] = {".spec.parent", ".status.summary.cpu.reservation", ".status.summary.cpu.entitlement",
                          ".status.summary.cpu.allocation", ".status.summary.cpu.demand",
                          ".status.summary.memory.reservation", ".status.summary.memory.entitlement",
                          ".status.summary.memory.allocation", ".status.summary.memory.demand",
                          ".status.summary.gpu.entitlement", ".status.summary.gpu.allocation",
                          ".status.gangs.pending", ".status.gangs.running", ".metadata.creationTimestamp"};
    REQUIRE_I64(json_array_size(cols), 14);
    for (size_t i = 0; i < 14; i++)
        CHECK_STR(json_string_value(json_object_get(json_array_get(cols, i), "jsonPath")), want[i]);
    CHECK_STR(json_string_value(json_array_get(json_object_get(json_object_get(json_object_get(crd, "spec"), "names"), "shortNames"), 0)), "rp");
    /* the status fields the builder writes are all in the schema */
    json_t *v[3];
    size_t n = org_tree(v);
    struct respool_tree *t = NULL;
    REQUIRE_I64(crd_pool_build_tree((const json_t *const *)v, n, &t, err, sizeof err), 0);
    json_t *st = crd_pool_status(crd_pool_find(t, "team1"));
    REQUIRE_I64(crd_pool_status_gangs(st, crd_pool_find(t, "team1"), (struct crd_pool_gangs){1, 2, NULL}, NULL,
                                      "2026-01-01T00:00:00Z"), 0);
    json_t *sprops = json_object_get(json_object_get(json_object_get(json_object_get(json_object_get(json_object_get(ver, "schema"), "openAPIV3Schema"), "properties"), "status"), "properties"), "summary");
    const char *key;
    json_t *x;
    json_object_foreach(st, key, x) {
        json_t *sch = json_object_get(json_object_get(json_object_get(json_object_get(json_object_get(json_object_get(ver, "schema"), "openAPIV3Schema"), "properties"), "status"), "properties"), key);
        if (!sch) test_fail(__FILE__, __LINE__, "status.%s not in the schema", key);
    }
    json_object_foreach(json_object_get(st, "summary"), key, x) {
        if (!json_object_get(json_object_get(sprops, "properties"), key))
            test_fail(__FILE__, __LINE__, "status.summary.%s not in the schema", key);
    }
    json_decref(st);
    respool_tree_free(t);
    free_all(v, n);
    json_decref(crd);
}

/* The quantity pattern in the CRD accepts what quantity_parse accepts. */
TEST(crdpool_crd_quantity_pattern_present) {
    char err[256];
    json_t *crd = doc_load_file("crds/resourcepools.peloton.io.yaml", err, sizeof err);
    REQUIRE(crd);
    json_t *ver = json_array_get(json_object_get(json_object_get(crd, "spec"), "versions"), 0);
    json_t *item = json_object_get(json_object_get(json_object_get(json_object_get(json_object_get(json_object_get(
        json_object_get(json_object_get(ver, "schema"), "openAPIV3Schema"), "properties"), "spec"), "properties"), "resources"), "items"), "properties");
    for (int i = 0; i < 2; i++) {
        json_t *q = json_object_get(item, i ? "limit" : "reservation");
        REQUIRE(q);
        CHECK(json_is_true(json_object_get(q, "x-kubernetes-int-or-string")));
        CHECK_HAS(json_string_value(json_object_get(q, "pattern")), "[numkMGTPE]");
    }
    json_decref(crd);
}

TEST(crdpool_examples_pools_build_a_valid_tree) {
    char err[256] = "";
    json_t *doc = doc_load_file("examples/pools.yaml", err, sizeof err);
    REQUIRE(doc);
    json_t *items = json_object_get(doc, "items");
    size_t n = json_array_size(items);
    REQUIRE(n >= 3);
    const json_t *v[16];
    REQUIRE(n <= 16);
    for (size_t i = 0; i < n; i++) {
        v[i] = json_array_get(items, i);
        CHECK_STR(json_string_value(json_object_get(v[i], "kind")), "ResourcePool");
        CHECK_STR(json_string_value(json_object_get(v[i], "apiVersion")), "peloton.io/v1alpha1");
        /* each applies in order: parents come first */
        CHECK_I64(crd_pool_check_change(v, i, v[i], NULL, err, sizeof err), 0);
    }
    struct respool_tree *t = NULL;
    int rc = crd_pool_build_tree(v, n, &t, err, sizeof err);
    CHECK_STR(err, "");
    REQUIRE_I64(rc, 0);
    CHECK_I64(respool_validate_tree(t, err, sizeof err), 0);
    struct respool *org = respool_lookup(t, "/ml");
    REQUIRE(org);
    CHECK_I64(org->nchildren, 2);
    bool any_static = false;
    for (struct respool *p = respool_next_preorder(respool_root(t)); p; p = respool_next_preorder(p))
        for (int k = 0; k < RES_NKINDS; k++) any_static |= p->cfg.res[k].is_static;
    CHECK(any_static);
    respool_tree_free(t);
    json_decref(doc);
}

TEST(crdpool_tree_many_pools_shuffled) {
    /* 40 orgs x 50 teams, listed in a scrambled order */
    enum { ORGS = 40, TEAMS = 50, N = ORGS * (TEAMS + 1) };
    json_t **v = calloc(N, sizeof *v);
    REQUIRE(v);
    size_t n = 0;
    for (int o = 0; o < ORGS; o++) {
        char nm[32], spec[160];
        snprintf(nm, sizeof nm, "org%d", o);
        v[n++] = mkpool(nm, "{\"resources\": [{\"kind\": \"cpu\", \"reservation\": 100, \"limit\": 200}]}");
        for (int t = 0; t < TEAMS; t++) {
            snprintf(nm, sizeof nm, "org%d-team%d", o, t);
            snprintf(spec, sizeof spec, "{\"parent\": \"org%d\", \"resources\": [{\"kind\": \"cpu\", \"reservation\": 2}]}", o);
            v[n++] = mkpool(nm, spec);
        }
    }
    uint64_t seed = 42;
    for (size_t i = n - 1; i > 0; i--) {
        size_t j = (size_t)test_range(&seed, 0, (int64_t)i);
        json_t *x = v[i]; v[i] = v[j]; v[j] = x;
    }
    struct respool_tree *t = NULL;
    char err[256] = "";
    int rc = crd_pool_build_tree((const json_t *const *)v, n, &t, err, sizeof err);
    CHECK_STR(err, "");
    REQUIRE_I64(rc, 0);
    CHECK_I64(respool_count(t), N + 1);
    struct respool *p = respool_lookup(t, "/org39/org39-team49");
    REQUIRE(p);
    /* the effective limit comes from the parent */
    json_t *st = crd_pool_status(p);
    CHECK_STR(json_string_value(json_object_get(json_object_get(json_object_get(st, "summary"), "cpu"), "limit")), "200");
    json_decref(st);
    respool_tree_free(t);
    /* one more team in org0 would over-reserve it */
    json_t *extra = mkpool("org0-team50", "{\"parent\": \"org0\", \"resources\": [{\"kind\": \"cpu\", \"reservation\": 1}]}");
    CHECK_I64(crd_pool_check_change((const json_t *const *)v, n, extra, NULL, err, sizeof err), -EINVAL);
    CHECK_HAS(err, "\"org0-team50\": children of /org0 would reserve 101 cpu");
    json_decref(extra);
    free_all(v, n);
    free(v);
}

static const json_t *cond(const json_t *st, const char *type) {
    size_t i;
    json_t *c;
    json_array_foreach(json_object_get(st, "conditions"), i, c) {
        if (strcmp(json_string_value(json_object_get(c, "type")), type) == 0) return c;
    }
    return NULL;
}
#define COND_FIELD(st, type, field) json_string_value(json_object_get(cond(st, type), field))

/* gangs and conditions: Admitting says which rule holds the head of a queue,
 * with the numbers; Borrowing says by how much allocation exceeds the
 * reservation; lastTransitionTime stays while a status does not change. */
TEST(crdpool_status_gangs_and_conditions) {
    json_t *v[2] = {mkpool("org", "{\"resources\": [{\"kind\": \"cpu\", \"reservation\": 8, \"limit\": 16}]}"),
                    mkpool("team", "{\"parent\": \"org\", \"resources\": [{\"kind\": \"cpu\", \"reservation\": 4,"
                                   " \"limit\": 8}]}")};
    struct respool_tree *t = NULL;
    char err[256] = "";
    REQUIRE_I64(crd_pool_build_tree((const json_t *const *)v, 2, &t, err, sizeof err), 0);
    struct respool *team = crd_pool_find(t, "team"), *org = crd_pool_find(t, "org");
    REQUIRE(team && org);
    team->entitlement.v[RES_CPU] = 4000;
    team->alloc.c[UC_PREEMPT].v[RES_CPU] = 4000;
    /* nothing waits, nothing borrowed */
    json_t *st = crd_pool_status(team);
    REQUIRE_I64(crd_pool_status_gangs(st, team, (struct crd_pool_gangs){0, 1, crd_pool_held_head(team)}, NULL, "2026-01-01T00:00:00Z"), 0);
    CHECK_I64(json_integer_value(json_object_get(json_object_get(st, "gangs"), "pending")), 0);
    CHECK_I64(json_integer_value(json_object_get(json_object_get(st, "gangs"), "running")), 1);
    CHECK_STR(COND_FIELD(st, "Admitting", "status"), "True");
    CHECK_STR(COND_FIELD(st, "Admitting", "reason"), "NothingWaiting");
    CHECK_STR(COND_FIELD(st, "Borrowing", "status"), "False");
    CHECK(!cond(st, "Terminating"));
    /* a gang of 2 cpu at the head of the queue, held by the entitlement */
    struct gang g;
    struct resvec d = resvec_zero();
    d.v[RES_CPU] = 2000;
    admit_gang_init(&g, "default/g1", 0, 0, 2, d);
    REQUIRE_I64(admit_enqueue(team, &g, err, sizeof err), 0);
    struct gang *out[4];
    CHECK_I64(admit_pool_round(team, out, 4), 0);
    json_t *st2 = crd_pool_status(team);
    json_t *prev = json_object_get(st, "conditions");
    REQUIRE_I64(crd_pool_status_gangs(st2, team, (struct crd_pool_gangs){3, 1, crd_pool_held_head(team)}, prev, "2026-01-01T00:00:09Z"), 0);
    CHECK_STR(COND_FIELD(st2, "Admitting", "status"), "False");
    CHECK_STR(COND_FIELD(st2, "Admitting", "reason"), "AtEntitlement");
    CHECK_HAS(COND_FIELD(st2, "Admitting", "message"), "cpu entitlement: 4 of 4 cores allocated, gang needs 2");
    CHECK_HAS(COND_FIELD(st2, "Admitting", "message"), "3 gangs wait");
    CHECK_STR(COND_FIELD(st2, "Admitting", "lastTransitionTime"), "2026-01-01T00:00:09Z"); /* it changed */
    CHECK_STR(COND_FIELD(st2, "Borrowing", "lastTransitionTime"), "2026-01-01T00:00:00Z"); /* it did not */
    /* the parent says the same of its subtree */
    json_t *sp = crd_pool_status(org);
    REQUIRE_I64(crd_pool_status_gangs(sp, org, (struct crd_pool_gangs){3, 1, crd_pool_held_head(team)}, NULL, "2026-01-01T00:00:09Z"), 0);
    CHECK_STR(COND_FIELD(sp, "Admitting", "reason"), "AtEntitlement");
    CHECK_HAS(COND_FIELD(sp, "Admitting", "message"), "/org/team");
    /* borrowing: 6 cpu allocated on a reservation of 4; and marked for deletion */
    team->alloc.c[UC_PREEMPT].v[RES_CPU] = 6000;
    team->deleting = true;
    json_t *st3 = crd_pool_status(team);
    REQUIRE_I64(crd_pool_status_gangs(st3, team, (struct crd_pool_gangs){3, 1, crd_pool_held_head(team)}, json_object_get(st2, "conditions"),
                                      "2026-01-01T00:00:20Z"), 0);
    CHECK_STR(COND_FIELD(st3, "Borrowing", "status"), "True");
    CHECK_STR(COND_FIELD(st3, "Borrowing", "reason"), "AboveReservation");
    CHECK_HAS(COND_FIELD(st3, "Borrowing", "message"), "cpu: allocation 6 exceeds reservation 4 by 2");
    CHECK_STR(COND_FIELD(st3, "Admitting", "lastTransitionTime"), "2026-01-01T00:00:09Z");
    CHECK_STR(COND_FIELD(st3, "Terminating", "status"), "True");
    /* the same inputs again build the same status (no write on an idle cluster) */
    json_t *st4 = crd_pool_status(team);
    REQUIRE_I64(crd_pool_status_gangs(st4, team, (struct crd_pool_gangs){3, 1, crd_pool_held_head(team)}, json_object_get(st3, "conditions"),
                                      "2026-01-01T00:05:00Z"), 0);
    CHECK(json_equal(st3, st4));
    admit_remove(&g);
    json_decref(st);
    json_decref(st2);
    json_decref(st3);
    json_decref(st4);
    json_decref(sp);
    admit_tree_release(t);
    respool_tree_free(t);
    free_all(v, 2);
}
