/* Strategic merge patch keeps its results when its list merging changes:
 * a table of list cases (merge keys of every JSON type, missing keys,
 * duplicates, the list directives) with the results the first, quadratic
 * implementation (commit 87a8994) gave, and 20,000 random patches of lists
 * whose results, as a digest, are pinned to that implementation's.
 *
 * To see what changed when the digest differs: PATCH_EQUIV_DUMP=file makes
 * the random test write every case and its result to file, one a line; run it
 * on both builds and diff the two files. */
#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>

#include "patch.h"
#include "test.h"

/* JSON from text written with ' for " (no case needs a '). */
static json_t *pj(const char *text) {
    char *t = strdup(text);
    for (char *c = t; *c; c++)
        if (*c == '\'') *c = '"';
    json_error_t e;
    json_t *v = json_loads(t, JSON_DECODE_ANY, &e);
    if (!v) test_fail(__FILE__, __LINE__, "bad test JSON (%s): %s", e.text, text);
    free(t);
    return v;
}

/* The result of the patch as text: compact JSON with sorted keys (list order
 * kept), or "error <rc>: <message>". The caller frees it. */
static char *result(const json_t *t, const json_t *p) {
    json_t *out = NULL;
    char err[512] = "";
    int rc = patch_strategic(t, p, &out, err, sizeof err);
    char *s;
    if (rc == 0) {
        s = json_dumps(out, JSON_COMPACT | JSON_SORT_KEYS | JSON_ENCODE_ANY);
    } else {
        size_t n = strlen(err) + 32;
        s = malloc(n);
        snprintf(s, n, "error %d: %s", rc, err);
    }
    json_decref(out);
    return s;
}

/* Target, patch and result (or error), with ' for ". */
static const struct equiv_case {
    const char *target, *patch, *want;
} CASES[] = {
    /* merge keys compare as JSON values: numbers by value, never equal to strings */
    {"{'containers':[{'name':'a','ports':[{'containerPort':80,'x':1},{'containerPort':'80','x':2}]}]}",
     "{'containers':[{'name':'a','ports':[{'containerPort':80.0,'y':3},{'containerPort':'80','y':4},"
     "{'containerPort':81,'y':5}]}]}",
     "{'containers':[{'name':'a','ports':[{'containerPort':80.0,'x':1,'y':3},{'containerPort':'80','x':2,'y':4},"
     "{'containerPort':81,'y':5}]}]}"},
    {"{'containers':[{'name':1},{'name':'1'},{'name':true},{'name':null},{'name':{'k':1}},{'name':[1]}]}",
     "{'containers':[{'name':1.0,'v':1},{'name':'1','v':2},{'name':true,'v':3},{'name':{'k':1.0},'v':4},{'name':[1],"
     "'v':5},{'name':false,'v':6}]}",
     "{'containers':[{'name':1.0,'v':1},{'name':'1','v':2},{'name':true,'v':3},{'name':null},{'name':{'k':1.0},"
     "'v':4},{'name':[1],'v':5},{'name':false,'v':6}]}"},
    /* -0.0 and 0 are one number; 2^53 + 1 equals the real 2^53 but not the integer 2^53 */
    {"{'containers':[{'name':0,'v':0},{'name':9007199254740993,'v':1},{'name':9007199254740992,'v':2}]}",
     "{'containers':[{'name':-0.0,'w':0},{'name':9007199254740992,'w':2},{'name':9007199254740992.0,'w':1}]}",
     "{'containers':[{'name':-0.0,'v':0,'w':0},{'name':9007199254740992.0,'v':1,'w':1},{'name':9007199254740992,"
     "'v':2,'w':2}]}"},
    /* a null merge key: the element merged into loses its key, so a second
     * patch element with a null key adds another */
    {"{'containers':[{'name':null,'image':'x'},{'name':'b'}]}",
     "{'containers':[{'name':null,'image':'y'},{'name':null,'image':'z'}]}",
     "{'containers':[{'image':'y'},{'name':'b'},{'image':'z'}]}"},
    /* an object merge key with a null inside changes as it merges */
    {"{'containers':[{'name':{},'v':0},{'name':{'a':null},'v':1}]}",
     "{'containers':[{'name':{'a':null},'w':1},{'name':{},'w':2},{'name':{'a':null},'w':3}]}",
     "{'containers':[{'name':{},'v':0,'w':2},{'name':{},'v':1,'w':1},{'name':{},'w':3}]}"},
    /* live elements without the merge key are never matched, and keep their place */
    {"{'containers':[{'image':'nokey'},{'name':'a'},{'image':'nokey2'}]}",
     "{'containers':[{'name':'b'},{'name':'a','image':'y'}]}",
     "{'containers':[{'name':'b'},{'image':'y','name':'a'},{'image':'nokey'},{'image':'nokey2'}]}"},
    /* duplicates in the live list: the first is merged into, both stay */
    {"{'containers':[{'name':'a','v':1},{'name':'b'},{'name':'a','v':2}]}",
     "{'containers':[{'name':'a','v':3}]}",
     "{'containers':[{'name':'a','v':3},{'name':'a','v':2},{'name':'b'}]}"},
    /* duplicates in the patch list merge into one element, in turn */
    {"{'containers':[{'name':'b'}]}",
     "{'containers':[{'name':'a','v':1},{'name':'a','w':2},{'name':'b','v':3},{'name':'b','v':4}]}",
     "{'containers':[{'name':'a','v':1,'w':2},{'name':'b','v':4}]}"},
    /* $patch: delete removes every element with the key, before the merge */
    {"{'containers':[{'name':'a','v':1},{'name':'b'},{'name':'a','v':2}]}",
     "{'containers':[{'name':'c'},{'name':'a','$patch':'delete'},{'name':'a','v':9}]}",
     "{'containers':[{'name':'c'},{'name':'a','v':9},{'name':'b'}]}"},
    {"{'containers':[{'name':1},{'name':'1'}]}",
     "{'containers':[{'name':1.0,'$patch':'delete'}]}",
     "{'containers':[{'name':'1'}]}"},
    {"{'containers':[{'name':'a'}]}",
     "{'containers':[{'name':'zz','$patch':'delete'}]}",
     "{'containers':[{'name':'a'}]}"},
    /* $patch: replace anywhere in the list; $patch: merge and others refused */
    {"{'containers':[{'name':'a'},{'name':'b'}]}",
     "{'containers':[{'name':'b','v':1},{'$patch':'replace'},{'name':'c'},{'name':'b','w':2}]}",
     "{'containers':[{'name':'b','v':1,'w':2},{'name':'c'}]}"},
    {"{'containers':[{'name':'a'}]}",
     "{'containers':[{'name':'a'},{'$patch':'merge'}]}",
     "error -22: list 'containers': merging lists cannot yet be specified in the patch"},
    {"{'containers':[{'name':'a'}]}",
     "{'containers':[{'$patch':7}]}",
     "error -22: list 'containers': unknown patch type: (not a string)"},
    {"{'containers':[{'name':'a'}]}",
     "{'containers':[{'name':'b','$patch':'delete'},{'image':'x'}]}",
     "error -22: list 'containers': map does not contain declared merge key: name"},
    /* $setElementOrder: named items in its order, server-only ones interleaved by live position */
    {"{'env':[{'name':'A'},{'name':'X'},{'name':'B'},{'name':'Y'},{'name':'C'}]}",
     "{'$setElementOrder/env':[{'name':'C'},{'name':'N'},{'name':'A'},{'name':'B'}],'env':[{'name':'N','v':1},"
     "{'name':'B','v':2}]}",
     "{'env':[{'name':'X'},{'name':'Y'},{'name':'C'},{'name':'N','v':1},{'name':'A'},{'name':'B','v':2}]}"},
    {"{'env':[{'name':'A'},{'name':'B'},{'name':'A'}]}",
     "{'$setElementOrder/env':[{'name':'B'},{'name':'A'},{'name':'B'}]}",
     "{'env':[{'name':'B'},{'name':'A'},{'name':'A'}]}"},
    {"{'env':[{'name':'A'},{'name':'B'}]}",
     "{'$setElementOrder/env':[{'name':'B'},{'name':'A'}],'env':[{'name':'A'},{'name':'B'}]}",
     "error -22: the order in patch list 'env' doesn't match $setElementOrder/env list"},
    {"{'env':[{'name':'A'}]}",
     "{'$setElementOrder/env':[{'name':'A'},{'nam':'B'}]}",
     "error -22: $setElementOrder/env: map does not contain declared merge key: name"},
    {"{'metadata':{'finalizers':['c','a','b','a']}}",
     "{'metadata':{'$setElementOrder/finalizers':['b','d','a','c'],'finalizers':['d','c']}}",
     "{'metadata':{'finalizers':['b','d','a','c']}}"},
    /* scalar merge lists: unions, live duplicates collapse, numbers by value */
    {"{'metadata':{'finalizers':['a',1,'a',1.0,'1',true,null,null]}}",
     "{'metadata':{'finalizers':[2,'a',1,false,null,2.0,'b']}}",
     "{'metadata':{'finalizers':[2,'a',1,false,'1',true,null,'b']}}"},
    {"{'metadata':{'finalizers':[[1],'x',[1],[1.0]]}}",
     "{'metadata':{'finalizers':['y','x']}}",
     "{'metadata':{'finalizers':['y',[1],'x']}}"},
    {"{'metadata':{'finalizers':['a']}}",
     "{'metadata':{'finalizers':[[1]]}}",
     "error -22: list 'finalizers': cannot merge lists without merge key"},
    /* $deleteFromPrimitiveList: every equal value goes, before the union */
    {"{'metadata':{'finalizers':['a','b','a',1,'1',2]}}",
     "{'metadata':{'$deleteFromPrimitiveList/finalizers':['a',1.0,'zz'],'finalizers':['a','c']}}",
     "{'metadata':{'finalizers':['a','c','b','1',2]}}"},
    {"{'metadata':{'finalizers':['a']}}",
     "{'metadata':{'$deleteFromPrimitiveList/finalizers':{'a':1}}}",
     "error -22: $deleteFromPrimitiveList/finalizers must be a list"},
    {"{'spec':{'podCIDRs':['10.0.0.0/24']}}",
     "{'spec':{'$deleteFromPrimitiveList/podCIDRs':['10.0.0.0/24'],'podCIDRs':['10.0.1.0/24']}}",
     "{'spec':{'podCIDRs':['10.0.1.0/24']}}"},
    /* $retainKeys: in a list element, on a map holding lists, and its errors */
    {"{'volumes':[{'name':'v','emptyDir':{},'a':1,'b':2}]}",
     "{'volumes':[{'name':'v','$retainKeys':['name','b','c','b'],'c':3}]}",
     "{'volumes':[{'b':2,'c':3,'name':'v'}]}"},
    {"{'spec':{'containers':[{'name':'a'}],'x':1,'y':2}}",
     "{'spec':{'$retainKeys':['containers','y'],'containers':[{'name':'b'}]}}",
     "{'spec':{'containers':[{'name':'b'},{'name':'a'}],'y':2}}"},
    {"{'spec':{'x':1}}",
     "{'spec':{'$retainKeys':['x'],'x':null,'y':2}}",
     "error -22: invalid patch format of retainKeys: field 'y' is not retained"},
    {"{'spec':{'x':1}}",
     "{'spec':{'$retainKeys':'x'}}",
     "error -22: invalid patch format of retainKeys: not a list"},
    /* element types */
    {"{'containers':[{'name':'a'},'s']}",
     "{'containers':[{'name':'a'}]}",
     "error -22: list 'containers': list element types are not identical"},
    {"{'containers':['s','t','s']}",
     "{'containers':['u','s']}",
     "{'containers':['u','s','t']}"},
    /* a list absent from the target is built from the patch */
    {"{}",
     "{'containers':[{'name':'b','$patch':'delete'},{'name':'a','x':null,'y':1},{'name':'a','z':2}],"
     "'metadata':{'finalizers':['b','a','b']}}",
     "{'containers':[{'name':'a','y':1,'z':2}],'metadata':{'finalizers':['b','a']}}"},
};

TEST(patch_equiv_table_of_list_cases) {
    bool print = getenv("PATCH_EQUIV_PRINT") != NULL; /* for a new case: prints what it gives */
    for (size_t i = 0; i < sizeof CASES / sizeof CASES[0]; i++) {
        json_t *t = pj(CASES[i].target), *p = pj(CASES[i].patch);
        char *got = result(t, p);
        for (char *c = got; *c; c++) /* written as the cases are */
            if (*c == '"') *c = '\'';
        if (print) printf("case %zu: %s\n", i, got);
        else if (strcmp(got, CASES[i].want)) test_fail(__FILE__, __LINE__, "case %zu: got %s", i, got);
        free(got);
        json_decref(t);
        json_decref(p);
    }
}

/* ---- random lists ---- */

/* Merge key values: a few strings mostly (so that keys repeat), one of each
 * other kind, numbers equal across types included; and (rid) strings of a
 * larger set. */
static const char *const IDS[] = {
    "'a'", "'b'", "'c'", "'d'", "'e'", "1", "1.0", "2", "'1'", "true", "false", "null", "{'x':1}", "{'x':null}", "{}",
    "[1]", "9007199254740993", "9007199254740992", "9007199254740992.0", "-0.0", "0",
};
#define NSTR 5 /* IDS[0..NSTR) are the strings */

static json_t *rid(uint64_t *s) {
    if (test_range(s, 0, 3) == 0) return json_sprintf("k%d", (int)test_range(s, 0, 199)); /* many distinct ones */
    size_t n = sizeof IDS / sizeof IDS[0];
    int64_t i = test_range(s, 0, 9) < 7 ? test_range(s, 0, NSTR - 1) : test_range(s, 0, (int64_t)n - 1);
    return pj(IDS[i]);
}

/* A scalar for a primitive list; now and then an array (allowed live only). */
static json_t *rscalar(uint64_t *s, bool live) {
    json_t *v = rid(s);
    if (json_is_object(v) || (!live && json_is_array(v))) {
        json_decref(v);
        v = json_string("o");
    }
    return v;
}

static char *word(char *buf, size_t n, const char *prefix, uint64_t *s) {
    snprintf(buf, n, "%s%d", prefix, (int)test_range(s, 0, 99));
    return buf;
}

/* Ports of a container, by containerPort. */
static json_t *rports(uint64_t *s, bool patch) {
    json_t *a = json_array();
    for (int i = (int)test_range(s, 0, 3); i > 0; i--) {
        json_t *port = json_object();
        int64_t k = test_range(s, 0, 9);
        json_t *cp = k < 3   ? json_integer(80)
                     : k < 5 ? json_real(80.0)
                     : k < 6 ? json_string("80")
                             : json_integer(test_range(s, 81, 83));
        json_object_set_new(port, "containerPort", cp);
        if (patch && test_range(s, 0, 9) == 0) json_object_set_new(port, "$patch", json_string("delete"));
        else json_object_set_new(port, patch ? "p" : "l", json_integer(test_range(s, 0, 9)));
        json_array_append_new(a, port);
    }
    return a;
}

/* A live container, or a patch list element (a merge, a delete, a replace,
 * ...; when clean, only merges and deletes). */
static json_t *rcontainer(uint64_t *s, bool patch, bool clean) {
    char buf[32];
    int64_t kind = patch ? test_range(s, 0, clean ? 91 : 99) : 0;
    if (kind >= 98) return test_range(s, 0, 1) ? json_pack("{s:s}", "$patch", "merge") : json_string("notamap");
    json_t *c = json_object();
    if (kind < 96 && (clean || test_range(s, 0, 19))) json_object_set_new(c, "name", rid(s));
    if (kind >= 80 && kind < 92) {
        json_object_set_new(c, "$patch", json_string("delete"));
        return c;
    }
    if (kind >= 92 && kind < 96) {
        json_object_clear(c);
        json_object_set_new(c, "$patch", json_string("replace"));
        return c;
    }
    json_object_set_new(c, "image", json_string(word(buf, sizeof buf, patch ? "p" : "l", s)));
    if (test_range(s, 0, 2) == 0) json_object_set_new(c, "ports", rports(s, patch));
    if (patch && test_range(s, 0, 19) == 0) {
        bool ports = clean || test_range(s, 0, 1);
        json_object_set_new(c, "$retainKeys", ports ? json_pack("[s,s,s]", "name", "image", "ports")
                                                    : json_pack("[s,s]", "name", "image"));
    }
    if (!patch && test_range(s, 0, 4) == 0) json_object_set_new(c, "extra", json_true());
    return c;
}

/* A $setElementOrder list for patch list `list`: its items' identities
 * (directives left out) in order, with others put between; unless clean, now
 * and then shuffled, which the patch must refuse unless nothing moved. */
static json_t *rorder(uint64_t *s, const json_t *list, const char *key, bool clean) {
    json_t *o = json_array();
    size_t i;
    json_t *e;
    json_array_foreach(list, i, e) {
        if (key && (!json_is_object(e) || json_object_get(e, "$patch"))) continue;
        while (test_range(s, 0, 3) == 0)
            json_array_append_new(o, key ? json_pack("{s:o}", key, rid(s)) : rscalar(s, false));
        const json_t *id = key ? json_object_get(e, key) : e;
        if (!id) continue;
        json_array_append_new(o, key ? json_pack("{s:O}", key, id) : json_incref((json_t *)id));
    }
    if (test_range(s, 0, 1)) json_array_append_new(o, key ? json_pack("{s:o}", key, rid(s)) : rscalar(s, false));
    for (size_t n = json_array_size(o); !clean && n > 1 && test_range(s, 0, 9) == 0; n--) { /* a swap */
        size_t a = (size_t)test_range(s, 0, (int64_t)n - 1), b = (size_t)test_range(s, 0, (int64_t)n - 1);
        json_t *x = json_incref(json_array_get(o, a));
        json_array_set(o, a, json_array_get(o, b));
        json_array_set_new(o, b, x);
    }
    return o;
}

/* One random case: a pod-like target with containers (merged by name, their
 * ports by containerPort) and finalizers (a set), and a patch of them (clean:
 * one that seldom fails). */
static void rcase(uint64_t *s, int maxlen, bool clean, json_t **target, json_t **patch) {
    json_t *cs = json_array(), *fin = json_array(), *pcs = json_array(), *pfin = json_array();
    for (int i = (int)test_range(s, 0, maxlen); i > 0; i--) json_array_append_new(cs, rcontainer(s, false, clean));
    for (int i = (int)test_range(s, 0, maxlen); i > 0; i--) json_array_append_new(fin, rscalar(s, true));
    for (int i = (int)test_range(s, 0, maxlen); i > 0; i--) json_array_append_new(pcs, rcontainer(s, true, clean));
    for (int i = (int)test_range(s, 0, maxlen / 2 + 1); i > 0; i--) json_array_append_new(pfin, rscalar(s, false));
    *target = json_pack("{s:{s:o}, s:{s:o, s:i}}", "metadata", "finalizers", fin, "spec", "containers", cs, "x", 1);
    json_t *spec = json_object(), *md = json_object();
    if (test_range(s, 0, 4)) json_object_set(spec, "containers", pcs);
    if (test_range(s, 0, 2) == 0)
        json_object_set_new(spec, "$setElementOrder/containers", rorder(s, pcs, "name", clean));
    if (!clean && test_range(s, 0, 9) == 0)
        json_object_set_new(spec, "$retainKeys", test_range(s, 0, 1) ? json_pack("[s]", "containers")
                                                                     : json_pack("[s,s]", "containers", "x"));
    if (test_range(s, 0, 2)) json_object_set(md, "finalizers", pfin);
    if (test_range(s, 0, 2) == 0)
        json_object_set_new(md, "$setElementOrder/finalizers", rorder(s, pfin, NULL, clean));
    if (test_range(s, 0, 3) == 0) {
        json_t *del = json_array();
        for (int i = (int)test_range(s, 0, 3); i > 0; i--) json_array_append_new(del, rscalar(s, false));
        json_object_set_new(md, "$deleteFromPrimitiveList/finalizers", del);
    }
    *patch = json_pack("{s:o, s:o}", "metadata", md, "spec", spec);
    json_decref(pcs);
    json_decref(pfin);
}

static uint64_t fnv(uint64_t h, const char *s) {
    for (; *s; s++) h = (h ^ (unsigned char)*s) * 1099511628211ull;
    return (h ^ '\n') * 1099511628211ull;
}

/* Random cases from seed: the digest of their results, and how many were
 * merged (not refused). */
static uint64_t random_digest(uint64_t seed, int n, int maxlen, bool clean, int *merged, FILE *dump) {
    uint64_t h = 1469598103934665603ull;
    *merged = 0;
    for (int i = 0; i < n; i++) {
        json_t *t, *p;
        rcase(&seed, maxlen, clean, &t, &p);
        char *got = result(t, p);
        *merged += strncmp(got, "error ", 6) != 0;
        h = fnv(h, got);
        if (dump) {
            char *ts = json_dumps(t, JSON_COMPACT), *ps = json_dumps(p, JSON_COMPACT);
            fprintf(dump, "%d %s %s -> %s\n", i, ts, ps, got);
            free(ts);
            free(ps);
        }
        free(got);
        json_decref(t);
        json_decref(p);
    }
    return h;
}

TEST(patch_equiv_random_lists_digest) {
    const char *path = getenv("PATCH_EQUIV_DUMP");
    FILE *dump = path ? fopen(path, "w") : NULL;
    int merged;
    /* lists of up to 6 elements, some patches malformed */
    uint64_t h = random_digest(11, 20000, 6, false, &merged, dump);
    CHECK_I64(merged, 16018);
    if (h != 0xfaa3b9c841d93da4ull) test_fail(__FILE__, __LINE__, "results changed: %016llx", (unsigned long long)h);
    /* lists of up to 60 elements, patches that merge */
    h = random_digest(12, 300, 60, true, &merged, dump);
    CHECK_I64(merged, 300);
    if (h != 0x401fd91f4fa7ca4full) test_fail(__FILE__, __LINE__, "results changed: %016llx", (unsigned long long)h);
    if (dump) fclose(dump);
}
