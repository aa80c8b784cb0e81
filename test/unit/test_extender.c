/* Tests for the kube-scheduler extender wire layer (src/k8s/extender.h). */
#include <errno.h>
#include <stdlib.h>

#include "extender.h"
#include "test.h"

#define POD_JSON                                                                                               \
    "{\"metadata\":{\"name\":\"web-1\",\"namespace\":\"prod\",\"uid\":\"0b6a-uid\",\"labels\":{\"app\":\"web\","  \
    "\"peloton.io/pool\":\"batch\"}},\"spec\":{\"schedulerName\":\"default-scheduler\",\"containers\":[{\"name\":" \
    "\"c\",\"image\":\"nginx\",\"resources\":{\"requests\":{\"cpu\":\"500m\",\"memory\":\"128Mi\"}}}]},"          \
    "\"status\":{\"phase\":\"Pending\"}}"

#define NODE_JSON(n)                                                                                          \
    "{\"metadata\":{\"name\":\"" n "\",\"labels\":{\"kubernetes.io/hostname\":\"" n "\"}},\"spec\":{},"        \
    "\"status\":{\"allocatable\":{\"cpu\":\"4\",\"memory\":\"16Gi\",\"pods\":\"110\"}}}"

static json_t *parse(const char *s) {
    json_error_t e;
    json_t *v = json_loads(s, JSON_DECODE_ANY, &e);
    if (!v) fprintf(stderr, "  bad test JSON: %s (line %d col %d)\n", e.text, e.line, e.column);
    return v;
}

static char *dump(const json_t *v, size_t flags) { return json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY | flags); }

/* Dumps v compactly (insertion order, as Go writes struct fields) and
 * compares with want; frees the dump. */
static void check_dump(const json_t *v, const char *want, int line) {
    char *s = v ? dump(v, 0) : NULL;
    if (!s || strcmp(s, want) != 0)
        test_fail(__FILE__, line, "dump:\n    got  %s\n    want %s", s ? s : "(null)", want);
    free(s);
}
#define CHECK_DUMP(v, want) check_dump((v), (want), __LINE__)

static int decode_args_str(const char *s, struct extender_args **out, char *err, size_t errlen) {
    json_t *b = parse(s);
    if (!b) return -999;
    int rc = extender_decode_args(b, out, err, errlen);
    json_decref(b);
    return rc;
}

/* ---- ExtenderArgs ---- */

TEST(extender_decode_args_node_names) {
    char err[256] = "";
    struct extender_args *a;
    int rc = decode_args_str("{\"Pod\":" POD_JSON ",\"Nodes\":null,\"NodeNames\":[\"n1\",\"n2\",\"n3\"]}", &a, err,
                             sizeof err);
    REQUIRE_I64(rc, 0);
    CHECK(a->node_cache);
    CHECK(a->items == NULL);
    REQUIRE_I64(a->nnodes, 3);
    CHECK_STR(a->names[0], "n1");
    CHECK_STR(a->names[2], "n3");
    CHECK_I64(extender_args_find(a, "n2"), 1);
    CHECK_I64(extender_args_find(a, "n4"), -1);
    /* the Pod is kept as it was sent, camelCase and all */
    json_t *labels = json_object_get(json_object_get(a->pod, "metadata"), "labels");
    CHECK_STR(json_string_value(json_object_get(labels, "peloton.io/pool")), "batch");
    CHECK_STR(json_string_value(json_object_get(json_object_get(a->pod, "metadata"), "namespace")), "prod");
    extender_args_free(a);
}

TEST(extender_decode_args_node_list) {
    char err[256] = "";
    struct extender_args *a;
    json_t *b = parse("{\"Pod\":" POD_JSON ",\"Nodes\":{\"metadata\":{\"resourceVersion\":\"17\"},\"items\":["
                      NODE_JSON("node-a") "," NODE_JSON("node-b") "]},\"NodeNames\":null}");
    REQUIRE(b);
    int rc = extender_decode_args(b, &a, err, sizeof err);
    REQUIRE_I64(rc, 0);
    CHECK(!a->node_cache);
    REQUIRE_I64(a->nnodes, 2);
    CHECK_STR(a->names[0], "node-a");
    CHECK_STR(a->names[1], "node-b");
    REQUIRE(json_is_array(a->items));
    CHECK_I64(json_array_size(a->items), 2);
    json_t *alloc = json_object_get(json_object_get(json_array_get(a->items, 1), "status"), "allocatable");
    CHECK_STR(json_string_value(json_object_get(alloc, "memory")), "16Gi");
    /* the body is borrowed: freeing it first leaves the args intact */
    json_decref(b);
    CHECK_STR(json_string_value(json_object_get(alloc, "cpu")), "4");
    extender_args_free(a);
}

TEST(extender_decode_args_case_insensitive) {
    static const char *const bodies[] = {
        "{\"pod\":" POD_JSON ",\"nodes\":null,\"nodenames\":[\"a\",\"b\"]}",
        "{\"POD\":" POD_JSON ",\"NODES\":null,\"NODENAMES\":[\"a\",\"b\"]}",
        "{\"pOd\":" POD_JSON ",\"nOdEnAmEs\":[\"a\",\"b\"]}",
        /* U+017F LATIN SMALL LETTER LONG S folds to s, as in Go */
        "{\"Pod\":" POD_JSON ",\"NodeName\\u017f\":[\"a\",\"b\"]}",
        /* near-misses are unknown keys and ignored, as Go ignores them */
        "{\"Pod\":" POD_JSON ",\"NodeName\":[\"x\"],\"NodeNamess\":[\"y\"],\"Node_Names\":[\"z\"],"
        "\"NodeNames\":[\"a\",\"b\"]}",
    };
    for (size_t i = 0; i < sizeof bodies / sizeof bodies[0]; i++) {
        char err[256] = "";
        struct extender_args *a = NULL;
        int rc = decode_args_str(bodies[i], &a, err, sizeof err);
        if (rc != 0) {
            test_fail(__FILE__, __LINE__, "body %zu: rc %d: %s", i, rc, err);
            continue;
        }
        CHECK(a->node_cache);
        CHECK_I64(a->nnodes, 2);
        if (a->nnodes == 2) CHECK_STR(a->names[1], "b");
        CHECK(json_is_object(a->pod));
        extender_args_free(a);
    }
    /* Nodes in any case too; the NodeList inside keeps its camelCase keys */
    char err[256] = "";
    struct extender_args *a;
    REQUIRE_I64(decode_args_str("{\"pod\":" POD_JSON ",\"nodes\":{\"items\":[" NODE_JSON("x") "]}}", &a, err,
                                sizeof err),
                0);
    CHECK(!a->node_cache);
    CHECK_I64(a->nnodes, 1);
    extender_args_free(a);
}

TEST(extender_decode_args_null_lists) {
    char err[256] = "";
    struct extender_args *a;
    REQUIRE_I64(decode_args_str("{\"Pod\":" POD_JSON ",\"Nodes\":{\"metadata\":{},\"items\":null},\"NodeNames\":null}",
                                &a, err, sizeof err),
                0);
    CHECK(!a->node_cache);
    CHECK_I64(a->nnodes, 0);
    CHECK(json_is_array(a->items) && json_array_size(a->items) == 0);
    extender_args_free(a);
    REQUIRE_I64(decode_args_str("{\"Pod\":" POD_JSON ",\"Nodes\":{}}", &a, err, sizeof err), 0);
    CHECK_I64(a->nnodes, 0);
    extender_args_free(a);
    REQUIRE_I64(decode_args_str("{\"Pod\":" POD_JSON ",\"Nodes\":null,\"NodeNames\":[]}", &a, err, sizeof err), 0);
    CHECK(a->node_cache);
    CHECK_I64(a->nnodes, 0);
    extender_args_free(a);
}

struct bad_case {
    const char *body;
    int rc;
    const char *msg;
};

/* Runs each case through one decoder (verb: EXTENDER_FILTER for
 * ExtenderArgs, EXTENDER_BIND, EXTENDER_PREEMPT): every one must fail with
 * its code, a NULL result and a message containing msg. */
static void check_bad_cases(enum extender_verb verb, const struct bad_case *cases, size_t n) {
    for (size_t i = 0; i < n; i++) {
        char err[256] = "";
        void *out = &err;
        json_t *b = json_loads(cases[i].body, JSON_DECODE_ANY | JSON_ALLOW_NUL, NULL);
        if (!b) {
            test_fail(__FILE__, __LINE__, "case %zu: bad JSON", i);
            continue;
        }
        int rc;
        if (verb == EXTENDER_BIND) {
            struct extender_binding_args *a = (struct extender_binding_args *)out;
            rc = extender_decode_binding_args(b, &a, err, sizeof err);
            out = a;
            if (!rc) extender_binding_args_free(a);
        } else if (verb == EXTENDER_PREEMPT) {
            struct extender_preemption_args *a = (struct extender_preemption_args *)out;
            rc = extender_decode_preemption_args(b, &a, err, sizeof err);
            out = a;
            if (!rc) extender_preemption_args_free(a);
        } else {
            struct extender_args *a = (struct extender_args *)out;
            rc = extender_decode_args(b, &a, err, sizeof err);
            out = a;
            if (!rc) extender_args_free(a);
        }
        json_decref(b);
        if (rc != cases[i].rc || out != NULL || !strstr(err, cases[i].msg))
            test_fail(__FILE__, __LINE__, "case %zu %s: rc %d (want %d), err \"%s\" (want \"%s\")", i, cases[i].body,
                      rc, cases[i].rc, err, cases[i].msg);
    }
}
#define CHECK_BAD_CASES(verb, cases) check_bad_cases((verb), (cases), sizeof(cases) / sizeof(cases)[0])

TEST(extender_decode_args_errors) {
    char longname[300];
    memset(longname, 'n', 254);
    longname[254] = 0;
    char longbody[512];
    snprintf(longbody, sizeof longbody, "{\"Pod\":{},\"NodeNames\":[\"%s\"]}", longname);
    const struct bad_case cases[] = {
        {"[]", -EINVAL, "ExtenderArgs: expected an object, got array"},
        {"{\"NodeNames\":[\"a\"]}", -EINVAL, "ExtenderArgs.Pod: missing"},
        {"{\"Pod\":null,\"NodeNames\":[\"a\"]}", -EINVAL, "ExtenderArgs.Pod: missing"},
        {"{\"Pod\":[],\"NodeNames\":[\"a\"]}", -EINVAL, "ExtenderArgs.Pod: expected a Pod object, got array"},
        {"{\"Pod\":{},\"Nodes\":{\"items\":[]},\"NodeNames\":[]}", -EINVAL, "both Nodes and NodeNames"},
        {"{\"Pod\":{},\"Nodes\":null,\"NodeNames\":null}", -EINVAL, "neither Nodes nor NodeNames"},
        {"{\"Pod\":{}}", -EINVAL, "neither Nodes nor NodeNames"},
        {"{\"Pod\":{},\"NodeNames\":\"a\"}", -EINVAL, "ExtenderArgs.NodeNames: expected an array of strings or null, got string"},
        {"{\"Pod\":{},\"NodeNames\":[\"a\",7]}", -EINVAL, "ExtenderArgs.NodeNames[1]: expected a string, got integer"},
        {"{\"Pod\":{},\"NodeNames\":[\"a\",null]}", -EINVAL, "ExtenderArgs.NodeNames[1]: expected a string, got null"},
        {"{\"Pod\":{},\"NodeNames\":[\"\"]}", -EINVAL, "ExtenderArgs.NodeNames[0]: must not be empty"},
        {longbody, -E2BIG, "ExtenderArgs.NodeNames[0]: 254 bytes, longer than 253"},
        {"{\"Pod\":{},\"NodeNames\":[\"a\",\"b\",\"a\"]}", -EINVAL, "ExtenderArgs.NodeNames[2]: duplicate node name \"a\""},
        {"{\"Pod\":{},\"NodeNames\":[\"a\"],\"nodenames\":[\"b\"]}", -EINVAL, "more than one key for field NodeNames"},
        {"{\"Pod\":{},\"Nodes\":[]}", -EINVAL, "ExtenderArgs.Nodes: expected a NodeList object or null, got array"},
        {"{\"Pod\":{},\"Nodes\":{\"items\":{}}}", -EINVAL, "ExtenderArgs.Nodes.items: expected an array or null, got object"},
        {"{\"Pod\":{},\"Nodes\":{\"items\":[1]}}", -EINVAL, "ExtenderArgs.Nodes.items[0]: expected a Node object, got integer"},
        {"{\"Pod\":{},\"Nodes\":{\"items\":[{}]}}", -EINVAL, "ExtenderArgs.Nodes.items[0].metadata: expected an object, got nothing"},
        {"{\"Pod\":{},\"Nodes\":{\"items\":[{\"metadata\":{}}]}}", -EINVAL, "ExtenderArgs.Nodes.items[0].metadata.name: missing"},
        {"{\"Pod\":{},\"Nodes\":{\"items\":[{\"metadata\":{\"name\":true}}]}}", -EINVAL,
         "ExtenderArgs.Nodes.items[0].metadata.name: expected a string, got boolean"},
        {"{\"Pod\":{},\"Nodes\":{\"items\":[{\"metadata\":{\"name\":\"a\\u0000b\"}}]}}", -EINVAL, "contains a NUL byte"},
    };
    CHECK_BAD_CASES(EXTENDER_FILTER, cases);
    /* a Pod nested deeper than EXTENDER_MAX_DEPTH */
    json_t *p = json_array(), *cur = p;
    for (int i = 0; i < EXTENDER_MAX_DEPTH + 1; i++) {
        json_t *n = json_array();
        json_array_append_new(cur, n);
        cur = n;
    }
    json_t *b = json_pack("{s:{s:o},s:[s]}", "Pod", "spec", p, "NodeNames", "a");
    REQUIRE(b);
    char err[256] = "";
    struct extender_args *a;
    CHECK_I64(extender_decode_args(b, &a, err, sizeof err), -E2BIG);
    CHECK_HAS(err, "ExtenderArgs.Pod: nested deeper than 64 levels");
    json_decref(b);
    CHECK_I64(extender_decode_args(NULL, &a, err, sizeof err), -EINVAL);
}

TEST(extender_decode_args_node_limit) {
    json_t *names = json_array();
    char n[32];
    for (int i = 0; i <= EXTENDER_MAX_NODES; i++) {
        snprintf(n, sizeof n, "n%d", i);
        json_array_append_new(names, json_string(n));
    }
    json_t *b = json_pack("{s:{},s:o}", "Pod", "NodeNames", names);
    REQUIRE(b);
    char err[256] = "";
    struct extender_args *a;
    CHECK_I64(extender_decode_args(b, &a, err, sizeof err), -E2BIG);
    CHECK_HAS(err, "ExtenderArgs.NodeNames: 100001 names, more than 100000");
    json_array_remove(names, 0);
    REQUIRE_I64(extender_decode_args(b, &a, err, sizeof err), 0);
    CHECK_I64(a->nnodes, EXTENDER_MAX_NODES);
    CHECK_I64(extender_args_find(a, "n100000"), EXTENDER_MAX_NODES - 1);
    extender_args_free(a);
    json_decref(b);
}

/* ---- ExtenderBindingArgs ---- */

TEST(extender_decode_binding) {
    char err[256] = "";
    struct extender_binding_args *a;
    json_t *b = parse("{\"PodName\":\"web-1\",\"PodNamespace\":\"prod\",\"PodUID\":\"0b6a-uid\",\"Node\":\"node-a\"}");
    REQUIRE_I64(extender_decode_binding_args(b, &a, err, sizeof err), 0);
    CHECK_STR(a->pod_name, "web-1");
    CHECK_STR(a->pod_namespace, "prod");
    CHECK_STR(a->pod_uid, "0b6a-uid");
    CHECK_STR(a->node, "node-a");
    extender_binding_args_free(a);
    json_decref(b);
    b = parse("{\"podname\":\"web-1\",\"PODNAMESPACE\":\"prod\",\"poduid\":null,\"node\":\"node-a\",\"extra\":1}");
    REQUIRE_I64(extender_decode_binding_args(b, &a, err, sizeof err), 0);
    CHECK_STR(a->pod_name, "web-1");
    CHECK_STR(a->pod_uid, "");
    CHECK_STR(a->node, "node-a");
    extender_binding_args_free(a);
    json_decref(b);

    const struct bad_case cases[] = {
        {"\"x\"", -EINVAL, "ExtenderBindingArgs: expected an object, got string"},
        {"{\"PodNamespace\":\"prod\",\"Node\":\"n\"}", -EINVAL, "ExtenderBindingArgs.PodName: missing"},
        {"{\"PodName\":\"p\",\"Node\":\"n\"}", -EINVAL, "ExtenderBindingArgs.PodNamespace: missing"},
        {"{\"PodName\":\"p\",\"PodNamespace\":\"prod\"}", -EINVAL, "ExtenderBindingArgs.Node: missing"},
        {"{\"PodName\":\"p\",\"PodNamespace\":\"prod\",\"Node\":5}", -EINVAL,
         "ExtenderBindingArgs.Node: expected a string, got integer"},
        {"{\"PodName\":\"p\",\"PodNamespace\":\"prod\",\"PodUID\":[],\"Node\":\"n\"}", -EINVAL,
         "ExtenderBindingArgs.PodUID: expected a string, got array"},
        {"{\"PodName\":\"p\",\"podName\":\"q\",\"PodNamespace\":\"prod\",\"Node\":\"n\"}", -EINVAL,
         "more than one key for field PodName"},
    };
    CHECK_BAD_CASES(EXTENDER_BIND, cases);
}

/* ---- ExtenderPreemptionArgs ---- */

TEST(extender_decode_preemption_meta) {
    char err[256] = "";
    struct extender_preemption_args *a;
    json_t *b = parse("{\"Pod\":" POD_JSON ",\"NodeNameToVictims\":null,\"NodeNameToMetaVictims\":"
                      "{\"foo\":{\"Pods\":[{\"UID\":\"myuid\"}],\"NumPDBViolations\":1},"
                      "\"bar\":{\"Pods\":[{\"UID\":\"u2\"},{\"uid\":\"u3\"}],\"NumPDBViolations\":0}}}");
    REQUIRE_I64(extender_decode_preemption_args(b, &a, err, sizeof err), 0);
    json_decref(b);
    CHECK(a->meta);
    REQUIRE_I64(a->nnodes, 2);
    long foo = extender_preemption_find(a, "foo"), bar = extender_preemption_find(a, "bar");
    REQUIRE(foo >= 0 && bar >= 0);
    CHECK_STR(a->nodes[foo].node, "foo");
    CHECK_I64(a->nodes[foo].npods, 1);
    CHECK_STR(a->nodes[foo].uids[0], "myuid");
    CHECK_I64(a->nodes[foo].num_pdb_violations, 1);
    CHECK(a->nodes[foo].pods == NULL);
    CHECK_I64(a->nodes[bar].npods, 2);
    CHECK_STR(a->nodes[bar].uids[1], "u3");
    CHECK_I64(extender_preemption_find(a, "baz"), -1);
    extender_preemption_args_free(a);
}

TEST(extender_decode_preemption_full) {
    char err[256] = "";
    struct extender_preemption_args *a;
    json_t *b = parse("{\"pod\":" POD_JSON ",\"nodenametovictims\":{\"node-a\":{\"pods\":[" POD_JSON
                      "],\"numpdbviolations\":2},\"node-b\":null,\"node-c\":{\"Pods\":null}},"
                      "\"NodeNameToMetaVictims\":null}");
    REQUIRE_I64(extender_decode_preemption_args(b, &a, err, sizeof err), 0);
    json_decref(b);
    CHECK(!a->meta);
    REQUIRE_I64(a->nnodes, 3);
    long n = extender_preemption_find(a, "node-a");
    REQUIRE(n >= 0);
    CHECK_I64(a->nodes[n].npods, 1);
    CHECK_STR(a->nodes[n].uids[0], "0b6a-uid");
    CHECK_I64(a->nodes[n].num_pdb_violations, 2);
    REQUIRE(json_is_array(a->nodes[n].pods));
    CHECK_STR(json_string_value(json_object_get(json_object_get(json_array_get(a->nodes[n].pods, 0), "metadata"), "name")),
              "web-1");
    n = extender_preemption_find(a, "node-b");
    REQUIRE(n >= 0);
    CHECK_I64(a->nodes[n].npods, 0);
    extender_preemption_args_free(a);

    const struct bad_case cases[] = {
        {"{\"NodeNameToMetaVictims\":{}}", -EINVAL, "ExtenderPreemptionArgs.Pod: missing"},
        {"{\"Pod\":{}}", -EINVAL, "neither NodeNameToVictims nor NodeNameToMetaVictims"},
        {"{\"Pod\":{},\"NodeNameToVictims\":{},\"NodeNameToMetaVictims\":{}}", -EINVAL, "both NodeNameToVictims and"},
        {"{\"Pod\":{},\"NodeNameToMetaVictims\":[]}", -EINVAL,
         "ExtenderPreemptionArgs.NodeNameToMetaVictims: expected an object or null, got array"},
        {"{\"Pod\":{},\"NodeNameToMetaVictims\":{\"n\":{\"Pods\":[{\"UID\":\"u\"}],\"NumPDBViolations\":1.5}}}",
         -EINVAL, "ExtenderPreemptionArgs.NodeNameToMetaVictims[\"n\"].NumPDBViolations: expected an integer, got number"},
        {"{\"Pod\":{},\"NodeNameToMetaVictims\":{\"n\":{\"NumPDBViolations\":-1}}}", -EINVAL, "negative"},
        {"{\"Pod\":{},\"NodeNameToMetaVictims\":{\"n\":{\"Pods\":[{}]}}}", -EINVAL,
         "ExtenderPreemptionArgs.NodeNameToMetaVictims[\"n\"].Pods[0].UID: missing"},
        {"{\"Pod\":{},\"NodeNameToMetaVictims\":{\"n\":{\"Pods\":[\"u\"]}}}", -EINVAL,
         "Pods[0]: expected a MetaPod object, got string"},
        {"{\"Pod\":{},\"NodeNameToVictims\":{\"n\":{\"Pods\":[{\"metadata\":{\"name\":\"x\"}}]}}}", -EINVAL,
         "ExtenderPreemptionArgs.NodeNameToVictims[\"n\"].Pods[0].metadata.uid: missing"},
        {"{\"Pod\":{},\"NodeNameToVictims\":{\"n\":7}}", -EINVAL,
         "ExtenderPreemptionArgs.NodeNameToVictims[\"n\"]: expected an object or null, got integer"},
        {"{\"Pod\":{},\"NodeNameToVictims\":{\"\":{}}}", -EINVAL,
         "ExtenderPreemptionArgs.NodeNameToVictims key: must not be empty"},
        {"{\"Pod\":{},\"NodeNameToMetaVictims\":{\"n\":{\"Pods\":[],\"pods\":[]}}}", -EINVAL,
         "more than one key for field Pods"},
        /* the messages are built only once a node fails (decoded again, named): the node and index are right */
        {"{\"Pod\":{},\"NodeNameToMetaVictims\":{\"a\":{\"Pods\":[{\"UID\":\"u1\"}]},"
         "\"b\":{\"Pods\":[{\"UID\":\"u2\"},{\"UID\":7}]}}}",
         -EINVAL, "ExtenderPreemptionArgs.NodeNameToMetaVictims[\"b\"].Pods[1].UID: expected a string, got integer"},
    };
    CHECK_BAD_CASES(EXTENDER_PREEMPT, cases);
}

/* ---- replies ---- */

TEST(extender_preemption_result_pinned) {
    /* upstream's JSON compatibility test pins this exact encoding */
    char *uids[] = {"myuid"};
    struct extender_victims v = {.node = "foo", .npods = 1, .uids = uids, .num_pdb_violations = 1};
    char err[256] = "";
    json_t *out;
    REQUIRE_I64(extender_preemption_result(NULL, &v, 1, &out, err, sizeof err), 0);
    CHECK_DUMP(out, "{\"NodeNameToMetaVictims\":{\"foo\":{\"Pods\":[{\"UID\":\"myuid\"}],\"NumPDBViolations\":1}}}");
    json_t *want = parse("{\"NodeNameToMetaVictims\":{\"foo\":{\"Pods\":[{\"UID\":\"myuid\"}],\"NumPDBViolations\":1}}}");
    CHECK(json_equal(out, want));
    json_decref(want);
    json_decref(out);
}

TEST(extender_preemption_result_rules) {
    char *u1[] = {"u1"}, *u2[] = {"u2", "u3"};
    struct extender_victims v[] = {
        {.node = "empty", .npods = 0},
        {.node = "a", .npods = 1, .uids = u1},
        {.node = "b", .npods = 2, .uids = u2, .num_pdb_violations = 3},
    };
    char err[256] = "";
    json_t *out;
    REQUIRE_I64(extender_preemption_result(NULL, v, 3, &out, err, sizeof err), 0);
    CHECK_DUMP(out, "{\"NodeNameToMetaVictims\":{\"a\":{\"Pods\":[{\"UID\":\"u1\"}],\"NumPDBViolations\":0},"
                    "\"b\":{\"Pods\":[{\"UID\":\"u2\"},{\"UID\":\"u3\"}],\"NumPDBViolations\":3}}}");
    json_decref(out);
    /* nothing left: an empty map (no node can be preempted) */
    REQUIRE_I64(extender_preemption_result(NULL, v, 1, &out, err, sizeof err), 0);
    CHECK_DUMP(out, "{\"NodeNameToMetaVictims\":{}}");
    json_decref(out);
    /* a node twice */
    struct extender_victims dup[] = {v[1], v[1]};
    CHECK_I64(extender_preemption_result(NULL, dup, 2, &out, err, sizeof err), -EINVAL);
    CHECK_HAS(err, "node \"a\" listed more than once");
    CHECK(out == NULL);
    /* only candidates of the request */
    json_t *b = parse("{\"Pod\":{},\"NodeNameToMetaVictims\":{\"a\":{\"Pods\":[{\"UID\":\"u1\"}]}}}");
    struct extender_preemption_args *in;
    REQUIRE_I64(extender_decode_preemption_args(b, &in, err, sizeof err), 0);
    json_decref(b);
    CHECK_I64(extender_preemption_result(in, v, 3, &out, err, sizeof err), -EINVAL);
    CHECK_HAS(err, "node \"empty\" is not in the request");
    CHECK_I64(extender_preemption_result(in, &v[1], 1, &out, err, sizeof err), 0);
    json_decref(out);
    extender_preemption_args_free(in);
    char *bad[] = {""};
    struct extender_victims e = {.node = "a", .npods = 1, .uids = bad};
    CHECK_I64(extender_preemption_result(NULL, &e, 1, &out, err, sizeof err), -EINVAL);
    CHECK_HAS(err, "UID 0: must not be empty");
}

static struct extender_args *names_args(const char *body) {
    char err[256] = "";
    struct extender_args *a = NULL;
    if (decode_args_str(body, &a, err, sizeof err) != 0) test_fail(__FILE__, __LINE__, "decode: %s", err);
    return a;
}

TEST(extender_filter_result_node_names) {
    struct extender_args *a = names_args("{\"Pod\":" POD_JSON ",\"Nodes\":null,\"NodeNames\":[\"n1\",\"n2\",\"n3\",\"n4\"]}");
    REQUIRE(a);
    /* verdicts in any order; passing nodes come back in request order */
    struct extender_node_verdict v[] = {
        {"n4", EXTENDER_PASS, NULL},
        {"n1", EXTENDER_FAIL, "pool batch: cpu entitlement exhausted"},
        {"n2", EXTENDER_FAIL_UNRESOLVABLE, "node not managed by peloton"},
        {"n3", EXTENDER_PASS, "ignored"},
    };
    char err[256] = "";
    json_t *out;
    REQUIRE_I64(extender_filter_result(a, v, 4, &out, err, sizeof err), 0);
    CHECK_DUMP(out, "{\"Nodes\":null,\"NodeNames\":[\"n3\",\"n4\"],\"FailedNodes\":{\"n1\":\"pool batch: cpu "
                    "entitlement exhausted\"},\"FailedAndUnresolvableNodes\":{\"n2\":\"node not managed by "
                    "peloton\"},\"Error\":\"\"}");
    json_decref(out);
    /* no verdicts: nothing passes, nothing is reported */
    REQUIRE_I64(extender_filter_result(a, NULL, 0, &out, err, sizeof err), 0);
    CHECK_DUMP(out, "{\"Nodes\":null,\"NodeNames\":[],\"FailedNodes\":{},\"FailedAndUnresolvableNodes\":{},\"Error\":\"\"}");
    json_decref(out);
    extender_args_free(a);
}

TEST(extender_filter_result_node_list) {
    char err[256] = "";
    struct extender_args *a;
    json_t *b = parse("{\"Pod\":" POD_JSON ",\"Nodes\":{\"metadata\":{},\"items\":[" NODE_JSON("a") "," NODE_JSON("b")
                      "," NODE_JSON("c") "]},\"NodeNames\":null}");
    REQUIRE_I64(extender_decode_args(b, &a, err, sizeof err), 0);
    struct extender_node_verdict v[] = {{"c", EXTENDER_PASS, NULL}, {"b", EXTENDER_FAIL, ""}, {"a", EXTENDER_PASS, NULL}};
    json_t *out;
    REQUIRE_I64(extender_filter_result(a, v, 3, &out, err, sizeof err), 0);
    extender_args_free(a);
    json_t *items = json_object_get(json_object_get(out, "Nodes"), "items");
    REQUIRE(json_is_array(items));
    REQUIRE_I64(json_array_size(items), 2);
    json_t *in = json_object_get(json_object_get(b, "Nodes"), "items");
    CHECK(json_equal(json_array_get(items, 0), json_array_get(in, 0)));
    CHECK(json_equal(json_array_get(items, 1), json_array_get(in, 2)));
    CHECK(json_is_null(json_object_get(out, "NodeNames")));
    CHECK_DUMP(json_object_get(out, "FailedNodes"), "{\"b\":\"\"}");
    CHECK_STR(json_string_value(json_object_get(out, "Error")), "");
    json_decref(out);
    json_decref(b);
}

TEST(extender_filter_result_refuses) {
    struct extender_args *a = names_args("{\"Pod\":{},\"NodeNames\":[\"n1\",\"n2\"]}");
    REQUIRE(a);
    char err[256] = "";
    json_t *out = (json_t *)1;
    struct extender_node_verdict stranger[] = {{"n1", EXTENDER_PASS, NULL}, {"n9", EXTENDER_PASS, NULL}};
    CHECK_I64(extender_filter_result(a, stranger, 2, &out, err, sizeof err), -EINVAL);
    CHECK_HAS(err, "filter verdict 1: node \"n9\" is not in the request");
    CHECK(out == NULL);
    struct extender_node_verdict twice[] = {{"n1", EXTENDER_PASS, NULL}, {"n1", EXTENDER_FAIL, "x"}};
    CHECK_I64(extender_filter_result(a, twice, 2, &out, err, sizeof err), -EINVAL);
    CHECK_HAS(err, "node \"n1\" has more than one verdict");
    struct extender_node_verdict nonode[] = {{NULL, EXTENDER_PASS, NULL}};
    CHECK_I64(extender_filter_result(a, nonode, 1, &out, err, sizeof err), -EINVAL);
    struct extender_node_verdict weird[] = {{"n1", (enum extender_verdict)7, NULL}};
    CHECK_I64(extender_filter_result(a, weird, 1, &out, err, sizeof err), -EINVAL);
    CHECK_HAS(err, "unknown verdict 7");
    struct extender_node_verdict badutf[] = {{"n1", EXTENDER_FAIL, "\xff\xfe"}};
    CHECK_I64(extender_filter_result(a, badutf, 1, &out, err, sizeof err), -EINVAL);
    CHECK_HAS(err, "not valid UTF-8");
    CHECK_I64(extender_filter_result(NULL, NULL, 0, &out, err, sizeof err), -EINVAL);
    extender_args_free(a);
}

TEST(extender_priority_list_clamps) {
    struct extender_host_priority p[] = {
        {"n1", -5}, {"n2", 0}, {"n3", 7}, {"n4", 10}, {"n5", 11}, {"n6", INT64_MAX}, {"n7", INT64_MIN},
    };
    char err[256] = "";
    json_t *out;
    REQUIRE_I64(extender_priority_list(NULL, p, 7, &out, err, sizeof err), 0);
    CHECK_DUMP(out, "[{\"Host\":\"n1\",\"Score\":0},{\"Host\":\"n2\",\"Score\":0},{\"Host\":\"n3\",\"Score\":7},"
                    "{\"Host\":\"n4\",\"Score\":10},{\"Host\":\"n5\",\"Score\":10},{\"Host\":\"n6\",\"Score\":10},"
                    "{\"Host\":\"n7\",\"Score\":0}]");
    json_decref(out);
    REQUIRE_I64(extender_priority_list(NULL, NULL, 0, &out, err, sizeof err), 0);
    CHECK_DUMP(out, "[]");
    json_decref(out);

    struct extender_args *a = names_args("{\"Pod\":{},\"NodeNames\":[\"n1\",\"n2\",\"n3\"]}");
    REQUIRE(a);
    CHECK_I64(extender_priority_list(a, p, 3, &out, err, sizeof err), 0);
    json_decref(out);
    CHECK_I64(extender_priority_list(a, p, 4, &out, err, sizeof err), -EINVAL);
    CHECK_HAS(err, "priority 3: Host: node \"n4\" is not in the request");
    struct extender_host_priority dup[] = {{"n1", 1}, {"n1", 2}};
    CHECK_I64(extender_priority_list(a, dup, 2, &out, err, sizeof err), -EINVAL);
    CHECK_HAS(err, "listed more than once");
    struct extender_host_priority none[] = {{NULL, 1}};
    CHECK_I64(extender_priority_list(NULL, none, 1, &out, err, sizeof err), -EINVAL);
    CHECK(out == NULL);
    extender_args_free(a);
}

TEST(extender_binding_and_error_replies) {
    json_t *out;
    REQUIRE_I64(extender_binding_result(NULL, &out), 0);
    CHECK_DUMP(out, "{\"Error\":\"\"}");
    json_decref(out);
    REQUIRE_I64(extender_binding_result("pod prod/web-1 is already bound to node-b", &out), 0);
    CHECK_DUMP(out, "{\"Error\":\"pod prod/web-1 is already bound to node-b\"}");
    json_decref(out);

    REQUIRE_I64(extender_error_reply(EXTENDER_FILTER, "ExtenderArgs.Pod: missing", &out), 0);
    CHECK_DUMP(out, "{\"Nodes\":null,\"NodeNames\":null,\"FailedNodes\":null,\"FailedAndUnresolvableNodes\":null,"
                    "\"Error\":\"ExtenderArgs.Pod: missing\"}");
    json_decref(out);
    REQUIRE_I64(extender_error_reply(EXTENDER_BIND, "", &out), 0);
    CHECK_DUMP(out, "{\"Error\":\"extender error\"}");
    json_decref(out);
    CHECK_I64(extender_error_reply(EXTENDER_PRIORITIZE, "x", &out), -ENOTSUP);
    CHECK(out == NULL);
    CHECK_I64(extender_error_reply(EXTENDER_PREEMPT, "x", &out), -ENOTSUP);
    CHECK(out == NULL);
    /* long messages are cut at a UTF-8 boundary, never left invalid */
    char big[EXTENDER_MAX_REASON + 8];
    memset(big, 'x', sizeof big);
    memcpy(big + EXTENDER_MAX_REASON - 1, "\xc3\xa9", 2);
    big[sizeof big - 1] = 0;
    REQUIRE_I64(extender_error_reply(EXTENDER_FILTER, big, &out), 0);
    CHECK_I64(json_string_length(json_object_get(out, "Error")), EXTENDER_MAX_REASON - 1);
    json_decref(out);
}

/* ---- properties ---- */

/* Writes key in a random case (ASCII letters only). */
static void random_case(char *dst, const char *key, uint64_t *s) {
    size_t i = 0;
    for (; key[i]; i++) {
        char c = key[i];
        if (c >= 'a' && c <= 'z' && test_rand(s) % 2) c = (char)(c - 'a' + 'A');
        else if (c >= 'A' && c <= 'Z' && test_rand(s) % 2) c = (char)(c - 'A' + 'a');
        dst[i] = c;
    }
    dst[i] = 0;
}

/* Random requests in both modes, keys in random case, random verdicts in a
 * random order: the filter result holds exactly the passing nodes in request
 * order and the failed nodes with their reasons, in the mode's own list. */
TEST(extender_filter_property) {
    uint64_t seed = 42;
    for (int round = 0; round < 300; round++) {
        int n = (int)test_range(&seed, 0, 40);
        bool cache = test_rand(&seed) % 2;
        char k[32];
        json_t *body = json_object(), *list = json_array();
        random_case(k, "Pod", &seed);
        json_object_set_new(body, k, json_pack("{s:{s:s}}", "metadata", "name", "p"));
        for (int i = 0; i < n; i++) {
            char name[32];
            snprintf(name, sizeof name, "node-%d-%d", round, i);
            json_array_append_new(list, cache ? json_string(name) : json_pack("{s:{s:s}}", "metadata", "name", name));
        }
        random_case(k, cache ? "NodeNames" : "Nodes", &seed);
        json_object_set_new(body, k, cache ? list : json_pack("{s:o}", "items", list));
        random_case(k, cache ? "Nodes" : "NodeNames", &seed);
        json_object_set_new(body, k, json_null());

        struct extender_args *a;
        char err[256] = "";
        int rc = extender_decode_args(body, &a, err, sizeof err);
        if (rc != 0) {
            test_fail(__FILE__, __LINE__, "round %d: decode %d %s", round, rc, err);
            json_decref(body);
            return;
        }
        CHECK_I64(a->nnodes, n);
        CHECK(a->node_cache == cache);
        /* verdicts for a random subset, shuffled */
        struct extender_node_verdict v[40];
        int perm[40], kind[40];
        char reasons[40][16];
        for (int i = 0; i < n; i++) perm[i] = i;
        for (int i = n - 1; i > 0; i--) {
            int j = (int)test_range(&seed, 0, i), t = perm[i];
            perm[i] = perm[j];
            perm[j] = t;
        }
        int nv = n ? (int)test_range(&seed, 0, n) : 0;
        for (int i = 0; i < n; i++) kind[i] = -1;
        for (int i = 0; i < nv; i++) {
            int node = perm[i];
            kind[node] = (int)test_range(&seed, 0, 2);
            snprintf(reasons[i], sizeof reasons[i], "r%d", node);
            v[i] = (struct extender_node_verdict){a->names[node], (enum extender_verdict)kind[node], reasons[i]};
        }
        json_t *out;
        rc = extender_filter_result(a, v, (size_t)nv, &out, err, sizeof err);
        if (rc != 0) {
            test_fail(__FILE__, __LINE__, "round %d: filter %d %s", round, rc, err);
            extender_args_free(a);
            json_decref(body);
            return;
        }
        json_t *pass = cache ? json_object_get(out, "NodeNames") : json_object_get(json_object_get(out, "Nodes"), "items");
        CHECK(json_is_null(json_object_get(out, cache ? "Nodes" : "NodeNames")));
        json_t *failed = json_object_get(out, "FailedNodes"), *unres = json_object_get(out, "FailedAndUnresolvableNodes");
        size_t pi = 0, nfail = 0, nunres = 0;
        for (int i = 0; i < n; i++) {
            char want[16];
            snprintf(want, sizeof want, "r%d", i);
            if (kind[i] == EXTENDER_PASS) {
                json_t *e = json_array_get(pass, pi++);
                const char *got = cache ? json_string_value(e)
                                        : json_string_value(json_object_get(json_object_get(e, "metadata"), "name"));
                CHECK_STR(got, a->names[i]);
            } else if (kind[i] == EXTENDER_FAIL) {
                CHECK_STR(json_string_value(json_object_get(failed, a->names[i])), want);
                nfail++;
            } else if (kind[i] == EXTENDER_FAIL_UNRESOLVABLE) {
                CHECK_STR(json_string_value(json_object_get(unres, a->names[i])), want);
                nunres++;
            }
        }
        CHECK_I64(json_array_size(pass), pi);
        CHECK_I64(json_object_size(failed), nfail);
        CHECK_I64(json_object_size(unres), nunres);
        json_decref(out);
        extender_args_free(a);
        json_decref(body);
    }
}

/* Round trip: random MetaVictims -> ExtenderPreemptionResult -> (plus a Pod,
 * keys in random case) ExtenderPreemptionArgs -> the same victims, minus the
 * nodes without any. */
TEST(extender_preemption_round_trip) {
    uint64_t seed = 7;
    for (int round = 0; round < 300; round++) {
        int n = (int)test_range(&seed, 0, 12);
        struct extender_victims v[12];
        char names[12][24], uidbuf[12][6][64];
        char *uids[12][6];
        for (int i = 0; i < n; i++) {
            snprintf(names[i], sizeof names[i], "node-%d", i);
            v[i] = (struct extender_victims){.node = names[i], .npods = (size_t)test_range(&seed, 0, 5),
                                             .uids = uids[i], .num_pdb_violations = test_range(&seed, 0, 3)};
            for (size_t j = 0; j < v[i].npods; j++) {
                snprintf(uidbuf[i][j], sizeof uidbuf[i][j], "uid-%d-%zu-%d", i, j, round);
                uids[i][j] = uidbuf[i][j];
            }
        }
        char err[256] = "";
        json_t *out;
        REQUIRE_I64(extender_preemption_result(NULL, v, (size_t)n, &out, err, sizeof err), 0);
        /* re-key every struct key in random case, as a lenient Go peer might */
        json_t *map = json_object_get(out, "NodeNameToMetaVictims"), *remap = json_object();
        const char *node;
        json_t *mv;
        char k[32];
        json_object_foreach(map, node, mv) {
            json_t *pods = json_array();
            size_t j;
            json_t *mp;
            json_array_foreach(json_object_get(mv, "Pods"), j, mp) {
                random_case(k, "UID", &seed);
                json_array_append_new(pods, json_pack("{s:O}", k, json_object_get(mp, "UID")));
            }
            json_t *nmv = json_object();
            random_case(k, "Pods", &seed);
            json_object_set_new(nmv, k, pods);
            random_case(k, "NumPDBViolations", &seed);
            json_object_set(nmv, k, json_object_get(mv, "NumPDBViolations"));
            json_object_set_new(remap, node, nmv);
        }
        json_t *body = json_object();
        random_case(k, "NodeNameToMetaVictims", &seed);
        json_object_set_new(body, k, remap);
        random_case(k, "Pod", &seed);
        json_object_set_new(body, k, json_object());
        json_decref(out);

        struct extender_preemption_args *a;
        int rc = extender_decode_preemption_args(body, &a, err, sizeof err);
        json_decref(body);
        if (rc != 0) {
            test_fail(__FILE__, __LINE__, "round %d: %s", round, err);
            return;
        }
        size_t kept = 0;
        for (int i = 0; i < n; i++) {
            long pos = extender_preemption_find(a, names[i]);
            if (v[i].npods == 0) {
                CHECK_I64(pos, -1);
                continue;
            }
            kept++;
            if (pos < 0) {
                test_fail(__FILE__, __LINE__, "round %d: node %s lost", round, names[i]);
                continue;
            }
            CHECK(a->meta);
            CHECK_I64(a->nodes[pos].npods, v[i].npods);
            CHECK_I64(a->nodes[pos].num_pdb_violations, v[i].num_pdb_violations);
            for (size_t j = 0; j < v[i].npods && j < a->nodes[pos].npods; j++) CHECK_STR(a->nodes[pos].uids[j], uids[i][j]);
        }
        CHECK_I64(a->nnodes, kept);
        extender_preemption_args_free(a);
    }
}

/* Mutated and truncated realistic bodies: every decoder either succeeds or
 * fails with a message and a NULL result; nothing crashes or leaks (ASan). */
TEST(extender_malformed_never_crash) {
    static const char *const seeds[] = {
        "{\"Pod\":" POD_JSON ",\"Nodes\":null,\"NodeNames\":[\"n1\",\"n2\"]}",
        "{\"Pod\":" POD_JSON ",\"Nodes\":{\"items\":[" NODE_JSON("a") "]},\"NodeNames\":null}",
        "{\"PodName\":\"p\",\"PodNamespace\":\"ns\",\"PodUID\":\"u\",\"Node\":\"n\"}",
        "{\"Pod\":{},\"NodeNameToMetaVictims\":{\"foo\":{\"Pods\":[{\"UID\":\"myuid\"}],\"NumPDBViolations\":1}}}",
        "{\"Pod\":{},\"NodeNameToVictims\":{\"foo\":{\"Pods\":[{\"metadata\":{\"uid\":\"u\"}}],\"NumPDBViolations\":1}}}",
    };
    static const char alphabet[] = "{}[]:,\"0123456789-.eEtrufalsn xX\\";
    uint64_t seed = 99;
    int decoded = 0, refused = 0;
    for (int it = 0; it < 20000; it++) {
        const char *src = seeds[it % 5];
        char buf[1024];
        size_t len = strlen(src);
        memcpy(buf, src, len + 1);
        int muts = (int)test_range(&seed, 1, 3);
        for (int m = 0; m < muts && len > 1; m++) {
            size_t pos = (size_t)test_range(&seed, 0, (int64_t)len - 1);
            switch (test_rand(&seed) % 3) {
            case 0: buf[pos] = alphabet[test_rand(&seed) % (sizeof alphabet - 1)]; break;
            case 1: memmove(buf + pos, buf + pos + 1, len - pos); len--; break;
            default: buf[pos] = 0; len = pos; break;
            }
        }
        json_t *b = json_loads(buf, JSON_DECODE_ANY, NULL);
        if (!b) continue;
        char err[256];
        struct extender_args *a = (struct extender_args *)1;
        struct extender_binding_args *ba = (struct extender_binding_args *)1;
        struct extender_preemption_args *pa = (struct extender_preemption_args *)1;
        err[0] = 0;
        int rc = extender_decode_args(b, &a, err, sizeof err);
        if (rc) CHECK(a == NULL && err[0]);
        else {
            decoded++;
            json_t *out;
            struct extender_node_verdict v = {a->nnodes ? a->names[0] : "x", EXTENDER_FAIL, "no"};
            if (extender_filter_result(a, &v, 1, &out, err, sizeof err) == 0) json_decref(out);
            extender_args_free(a);
        }
        refused += rc != 0;
        err[0] = 0;
        rc = extender_decode_binding_args(b, &ba, err, sizeof err);
        if (rc) CHECK(ba == NULL && err[0]);
        else extender_binding_args_free(ba);
        err[0] = 0;
        rc = extender_decode_preemption_args(b, &pa, err, sizeof err);
        if (rc) CHECK(pa == NULL && err[0]);
        else {
            json_t *out;
            if (extender_preemption_result(pa, pa->nodes, pa->nnodes, &out, err, sizeof err) == 0) json_decref(out);
            extender_preemption_args_free(pa);
        }
        json_decref(b);
    }
    /* the mutations must exercise both outcomes, or this test proves nothing */
    CHECK(decoded > 100);
    CHECK(refused > 100);
}

/* ---- the fast path: extender_scan_args and the text encoders ---- */

/* What a scan says of its own text (pod_text, names_text, compact), and its
 * encoders against the json_t ones on its names: the filter result (with the
 * passing names' span) and the priority list. */
static void check_scan_text(const struct extender_scan *s, const struct extender_args *a, int line) {
    json_t *pod = s->pod_text ? json_loadb(s->pod_text, s->pod_len, 0, NULL) : NULL;
    if (!pod || !json_equal(pod, a->pod)) test_fail(__FILE__, line, "pod_text is not the Pod");
    json_decref(pod);
    json_t *names = s->names_text ? json_loadb(s->names_text, s->names_len, 0, NULL) : NULL;
    if (!json_is_array(names) || json_array_size(names) != a->nnodes)
        test_fail(__FILE__, line, "names_text is not the NodeNames array");
    for (size_t i = 0; i < json_array_size(names); i++)
        if (strcmp(json_string_value(json_array_get(names, i)), a->names[i]))
            test_fail(__FILE__, line, "names_text: name %zu", i);
    json_decref(names);
    /* compact: the text is the names as they are, quoted, joined by commas */
    struct extender_buf canon = {0};
    size_t cap = 3;
    for (size_t i = 0; i < a->nnodes; i++) cap += strlen(a->names[i]) + 3;
    canon.data = malloc(cap);
    canon.data[canon.len++] = '[';
    for (size_t i = 0; i < a->nnodes; i++)
        canon.len += (size_t)sprintf(canon.data + canon.len, "%s\"%s\"", i ? "," : "", a->names[i]);
    canon.data[canon.len++] = ']';
    bool same = canon.len == s->names_len && memcmp(canon.data, s->names_text, canon.len) == 0;
    if (s->compact != same) test_fail(__FILE__, line, "compact %d, but the text is %s canonical", s->compact, same ? "" : "not");
    extender_buf_free(&canon);
    /* the encoders for scanned names */
    size_t n = s->nnodes;
    struct extender_node_verdict *nv = calloc(n ? n : 1, sizeof *nv);
    struct extender_name_verdict *v = calloc(n ? n : 1, sizeof *v);
    struct extender_host_priority *p = calloc(n ? n : 1, sizeof *p);
    int64_t *sc = calloc(n ? n : 1, sizeof *sc);
    for (size_t i = 0; i < n; i++) {
        /* runs of passing names, broken now and then */
        enum extender_verdict w = (i * 7 + n) % 5 == 0 ? EXTENDER_FAIL : (i * 3) % 11 == 1 ? EXTENDER_FAIL_UNRESOLVABLE
                                                                                         : EXTENDER_PASS;
        v[i] = (struct extender_name_verdict){w, w == EXTENDER_PASS ? NULL : "why \"not\""};
        nv[i] = (struct extender_node_verdict){a->names[i], v[i].verdict, v[i].reason};
        sc[i] = (int64_t)(i % 14) - 2;
        p[i] = (struct extender_host_priority){a->names[i], sc[i]};
    }
    char err[256];
    json_t *out = NULL;
    struct extender_buf b = {0};
    struct extender_span pass = {0, 0};
    if (extender_filter_result(a, nv, n, &out, err, sizeof err) ||
        extender_filter_result_scan(s, v, &b, &pass, err, sizeof err)) {
        test_fail(__FILE__, line, "filter result: %s", err);
    } else {
        char *want = json_dumps(out, JSON_COMPACT), *wpass = json_dumps(json_object_get(out, "NodeNames"), JSON_COMPACT);
        if (strcmp(want, b.data) || b.len != strlen(want))
            test_fail(__FILE__, line, "filter result:\n    json %s\n    text %s", want, b.data);
        if (pass.len != strlen(wpass) || pass.off + pass.len > b.len || memcmp(b.data + pass.off, wpass, pass.len))
            test_fail(__FILE__, line, "the passing names' span");
        free(want);
        free(wpass);
    }
    json_decref(out);
    out = NULL;
    if (extender_priority_list(NULL, p, n, &out, err, sizeof err) ||
        extender_priority_list_scan(s, sc, &b, err, sizeof err)) {
        test_fail(__FILE__, line, "priority list: %s", err);
    } else {
        char *want = json_dumps(out, JSON_COMPACT | JSON_ENCODE_ANY);
        if (strcmp(want, b.data) || b.len != strlen(want))
            test_fail(__FILE__, line, "priority list:\n    json %s\n    text %s", want, b.data);
        free(want);
    }
    json_decref(out);
    extender_buf_free(&b);
    free(nv);
    free(v);
    free(p);
    free(sc);
}

/* Runs body through both decoders. The scan either leaves it to the jansson
 * path (-EAGAIN) or decodes exactly what that path decodes. Returns the
 * scan's rc; *jansson_rc gets the jansson path's (parse failure: -1000). */
static int scan_vs_jansson(const char *body, size_t len, int *jansson_rc, int line) {
    struct extender_scan s = {0};
    int rc = extender_scan_args(body, len, &s);
    json_t *b = json_loadb(body, len, JSON_REJECT_DUPLICATES, NULL);
    struct extender_args *a = NULL;
    char err[256] = "";
    *jansson_rc = b ? extender_decode_args(b, &a, err, sizeof err) : -1000;
    if (rc != 0 && rc != -EAGAIN) test_fail(__FILE__, line, "scan rc %d", rc);
    if (rc == 0) {
        if (*jansson_rc != 0 || !a->node_cache) {
            test_fail(__FILE__, line, "scan decoded what the jansson path refuses (%d %s): %.200s", *jansson_rc, err,
                      body);
        } else if (s.nnodes != a->nnodes || !json_equal(s.pod, a->pod)) {
            test_fail(__FILE__, line, "scan: %zu names (jansson %zu) or a different pod", s.nnodes, a->nnodes);
        } else {
            for (size_t i = 0; i < s.nnodes; i++) {
                if (s.names[i].len != strlen(a->names[i]) || memcmp(s.names[i].s, a->names[i], s.names[i].len) != 0)
                    test_fail(__FILE__, line, "name %zu: \"%.*s\" != \"%s\"", i, (int)s.names[i].len, s.names[i].s,
                              a->names[i]);
                if (extender_scan_find(&s, a->names[i], strlen(a->names[i])) != (long)i)
                    test_fail(__FILE__, line, "find name %zu", i);
                if (s.hashes[i] != extender_name_hash(a->names[i], strlen(a->names[i])))
                    test_fail(__FILE__, line, "hash of name %zu", i);
            }
            check_scan_text(&s, a, line);
        }
    }
    extender_args_free(a);
    json_decref(b);
    extender_scan_free(&s);
    return rc;
}

TEST(extender_scan_takes_the_common_shapes) {
    static const char *const bodies[] = {
        "{\"Pod\":" POD_JSON ",\"Nodes\":null,\"NodeNames\":[\"n1\",\"n2\",\"n3\"]}",
        "{\"Pod\":" POD_JSON ",\"NodeNames\":[\"n1\"]}",
        "{\"NodeNames\":[\"n1\",\"n2\"],\"Nodes\":null,\"Pod\":" POD_JSON "}",
        "{\"pod\":" POD_JSON ",\"nodes\":null,\"nodenames\":[\"a\",\"b\"]}",
        "{\"POD\":" POD_JSON ",\"NODES\":null,\"NODENAMES\":[\"a\",\"b\"]}",
        "{\"Pod\":" POD_JSON ",\"NodeName\\u017f\":[\"a\",\"b\"]}",   /* U+017F folds to s */
        "{\"Pod\":" POD_JSON ",\"NodeName\xc5\xbf\":[\"a\"]}",         /* the same, raw UTF-8 */
        "{\"\\u0050od\":" POD_JSON ",\"NodeNames\":[\"a\"]}",          /* an escaped key */
        "{\"Pod\":" POD_JSON ",\"Nodes\":null,\"NodeNames\":[]}",     /* empty list */
        " \t\r\n{ \"Pod\" : " POD_JSON " , \"Nodes\" : null , \"NodeNames\" : [ \"a\" , \"b\" ] } \n",
        /* escapes and unicode in names */
        "{\"Pod\":{},\"NodeNames\":[\"n\\\"q\",\"back\\\\slash\",\"sl\\/ash\",\"ctl\\b\\f\\n\\r\\t\",\"\\u00e9t\\u00E9\"]}",
        "{\"Pod\":{},\"NodeNames\":[\"\\ud83d\\ude00\",\"\xf0\x9f\x98\x80x\",\"\xe2\x82\xac\",\"caf\xc3\xa9\",\"\\u0001\"]}",
        "{\"Pod\":{},\"NodeNames\":[\"plain\",\"\\u0041\",\"A\\u0042\",\"ABC\"]}",
        "{\"Pod\":{\"metadata\":{\"name\":\"x\",\"a\":[1,2.5,-3e2,true,false,null,\"}]\\\"\"]}},\"NodeNames\":[\"n\"]}",
    };
    for (size_t i = 0; i < sizeof bodies / sizeof bodies[0]; i++) {
        int jrc;
        int rc = scan_vs_jansson(bodies[i], strlen(bodies[i]), &jrc, __LINE__);
        if (rc != 0) test_fail(__FILE__, __LINE__, "body %zu: not taken by the scan (rc %d, jansson %d)", i, rc, jrc);
    }
    /* a name of exactly EXTENDER_MAX_NAME bytes is taken; one more is left to jansson (E2BIG) */
    char body[700], name[EXTENDER_MAX_NAME + 2];
    memset(name, 'n', sizeof name);
    name[EXTENDER_MAX_NAME] = 0;
    snprintf(body, sizeof body, "{\"Pod\":{},\"NodeNames\":[\"%s\"]}", name);
    int jrc;
    CHECK_I64(scan_vs_jansson(body, strlen(body), &jrc, __LINE__), 0);
    name[EXTENDER_MAX_NAME] = 'n';
    name[EXTENDER_MAX_NAME + 1] = 0;
    snprintf(body, sizeof body, "{\"Pod\":{},\"NodeNames\":[\"%s\"]}", name);
    CHECK_I64(scan_vs_jansson(body, strlen(body), &jrc, __LINE__), -EAGAIN);
    CHECK_I64(jrc, -E2BIG);
}

/* What the scan leaves to the jansson path, which refuses (a 400 with an
 * Error, as before) or, for the shapes it does not handle, decodes. */
/* The preempt scan decodes what the jansson path decodes, byte for byte the
 * same args, and leaves everything else to it. */
static void check_preempt_scan_same(const char *body) {
    struct extender_preemption_args *s = NULL, *a = NULL;
    REQUIRE_I64(extender_scan_preemption_args(body, strlen(body), &s), 0);
    json_t *b = parse(body);
    char err[256] = "";
    REQUIRE_I64(extender_decode_preemption_args(b, &a, err, sizeof err), 0);
    CHECK(s->meta && a->meta);
    CHECK(json_equal(s->pod, a->pod));
    REQUIRE_I64((int64_t)s->nnodes, (int64_t)a->nnodes);
    for (size_t i = 0; i < a->nnodes; i++) {
        CHECK_STR(s->nodes[i].node, a->nodes[i].node);
        CHECK_I64((int64_t)s->nodes[i].npods, (int64_t)a->nodes[i].npods);
        CHECK_I64(s->nodes[i].num_pdb_violations, a->nodes[i].num_pdb_violations);
        for (size_t j = 0; j < a->nodes[i].npods && j < s->nodes[i].npods; j++)
            CHECK_STR(s->nodes[i].uids[j], a->nodes[i].uids[j]);
        CHECK_I64(extender_preemption_find(s, a->nodes[i].node), (int64_t)i);
    }
    extender_preemption_args_free(s);
    extender_preemption_args_free(a);
    json_decref(b);
}

TEST(extender_scan_preempt_same_as_jansson) {
    check_preempt_scan_same("{\"Pod\":{\"metadata\":{\"name\":\"p\",\"uid\":\"u\"}},\"NodeNameToVictims\":null,"
                            "\"NodeNameToMetaVictims\":{\"n1\":{\"Pods\":[{\"UID\":\"a\"},{\"UID\":\"b\"}],"
                            "\"NumPDBViolations\":2},\"n2\":null,\"n3\":{\"Pods\":null,\"NumPDBViolations\":0},"
                            "\"n4\":{\"Pods\":[]}}}");
    /* blanks anywhere, keys folded as Go matches them, no NodeNameToVictims, no nodes */
    check_preempt_scan_same(" {\n \"pod\" : {\"metadata\":{}} , \"nodeNameToMetaVictims\" : { \"n\" : { \"pods\" : "
                            "[ { \"uid\" : \"x\" } ] , \"numPDBViolations\" : 10 } } } \n");
    check_preempt_scan_same("{\"NodeNameToMetaVictims\":{},\"Pod\":{}}");
    static const char *const rest[] = {
        "{\"Pod\":{},\"NodeNameToVictims\":{\"n\":{\"Pods\":[{\"metadata\":{\"uid\":\"u\"}}]}}}", /* Pod victims */
        "{\"Pod\":{},\"NodeNameToMetaVictims\":{\"n\":{}},\"Other\":1}",                        /* unknown key */
        "{\"Pod\":{},\"NodeNameToMetaVictims\":{\"n\":{\"Pods\":[{\"UID\":\"u\",\"x\":1}]}}}",  /* more than UID */
        "{\"Pod\":{},\"NodeNameToMetaVictims\":{\"n\":{},\"n\":{}}}",                          /* duplicate node */
        "{\"Pod\":{},\"NodeNameToMetaVictims\":{\"\\u006e\":{}}}",                               /* escaped name */
        "{\"Pod\":{},\"NodeNameToMetaVictims\":{\"\":{}}}",                                      /* empty name */
        "{\"Pod\":{},\"NodeNameToMetaVictims\":{\"n\":{\"Pods\":[{\"UID\":\"\"}]}}}",           /* empty UID */
        "{\"Pod\":{},\"NodeNameToMetaVictims\":{\"n\":{\"Pods\":[{\"UID\":7}]}}}",              /* UID not a string */
        "{\"Pod\":{},\"NodeNameToMetaVictims\":{\"n\":{\"Pods\":[{}]}}}",                       /* UID missing */
        "{\"Pod\":{},\"NodeNameToMetaVictims\":{\"n\":{\"NumPDBViolations\":-1}}}",
        "{\"Pod\":{},\"NodeNameToMetaVictims\":{\"n\":{\"NumPDBViolations\":01}}}",
        "{\"Pod\":{},\"NodeNameToMetaVictims\":{\"n\":{\"NumPDBViolations\":1.5}}}",
        "{\"Pod\":{},\"NodeNameToMetaVictims\":{\"n\":{\"NumPDBViolations\":1e2}}}",
        "{\"Pod\":{},\"NodeNameToMetaVictims\":{\"n\":{\"Pods\":[],\"pods\":[]}}}",            /* folded twice */
        "{\"Pod\":{},\"NodeNameToMetaVictims\":{\"n\":{}}} x",                                  /* trailing bytes */
        "{\"Pod\":{},\"NodeNameToMetaVictims\":{\"n\":{}},}",                                   /* trailing comma */
        "{\"Pod\":[],\"NodeNameToMetaVictims\":{}}",                                            /* Pod not an object */
        "{\"Pod\":{\"a\":1,\"a\":2},\"NodeNameToMetaVictims\":{}}",                             /* Pod duplicate key */
        "{\"NodeNameToMetaVictims\":{}}",                                                       /* no Pod */
        "{\"Pod\":{},\"NodeNameToMetaVictims\":{\"n\xff\":{}}}",                                /* invalid UTF-8 */
        "{\"Pod\":{},\"NodeNameToMetaVictims\":{\"n\":{\"Pods\":[{\"UID\":\"u\"}]}",             /* truncated */
    };
    for (size_t i = 0; i < sizeof rest / sizeof rest[0]; i++) {
        struct extender_preemption_args *s = (void *)1;
        CHECK_I64(extender_scan_preemption_args(rest[i], strlen(rest[i]), &s), -EAGAIN);
        CHECK(s == NULL);
    }
}

TEST(extender_scan_leaves_the_rest_to_jansson) {
    struct {
        const char *body;
        bool jansson_ok;
    } cases[] = {
        {"{\"Pod\":{},\"Nodes\":{\"items\":[]},\"NodeNames\":null}", true},   /* Nodes mode */
        {"{\"Pod\":{},\"NodeNames\":[\"a\"],\"Other\":1}", true},              /* unknown key */
        {"{\"Pod\":{},\"NodeNames\":[\"a\"],\"nodenames\":[\"b\"]}", false},   /* folded twice */
        {"{\"Pod\":{},\"NodeNames\":[\"a\"],\"NodeNames\":[\"b\"]}", false},   /* duplicate key */
        {"{\"Pod\":{},\"NodeNames\":[\"a\",\"a\"]}", false},                   /* duplicate name */
        {"{\"Pod\":{},\"NodeNames\":[\"\\u0061\",\"a\"]}", false},             /* duplicate once decoded */
        {"{\"Pod\":{},\"NodeNames\":[\"\"]}", false},                          /* empty name */
        {"{\"Pod\":{},\"NodeNames\":[\"a\\u0000b\"]}", false},                 /* NUL */
        {"{\"Pod\":{},\"NodeNames\":[\"\\ud800\"]}", false},                   /* lone surrogate */
        {"{\"Pod\":{},\"NodeNames\":[\"\\udc00x\"]}", false},
        {"{\"Pod\":{},\"NodeNames\":[\"\\ud800\\u0041\"]}", false},
        {"{\"Pod\":{},\"NodeNames\":[\"\\x\"]}", false},                       /* bad escape */
        {"{\"Pod\":{},\"NodeNames\":[\"\\u12\"]}", false},
        {"{\"Pod\":{},\"NodeNames\":[\"a\x01\"]}", false},                     /* raw control byte */
        {"{\"Pod\":{},\"NodeNames\":[\"\xff\"]}", false},                      /* invalid UTF-8 */
        {"{\"Pod\":{},\"NodeNames\":[\"\xc0\xaf\"]}", false},                  /* overlong */
        {"{\"Pod\":{},\"NodeNames\":[\"\xed\xa0\x80\"]}", false},              /* UTF-8 surrogate */
        {"{\"Pod\":{},\"NodeNames\":[1]}", false},
        {"{\"Pod\":{},\"NodeNames\":[null]}", false},
        {"{\"Pod\":{},\"NodeNames\":\"a\"}", false},
        {"{\"Pod\":{},\"NodeNames\":null}", false},
        {"{\"Pod\":null,\"NodeNames\":[\"a\"]}", false},
        {"{\"Pod\":[],\"NodeNames\":[\"a\"]}", false},
        {"{\"NodeNames\":[\"a\"]}", false},
        {"{\"Pod\":{}}", false},
        {"{\"Pod\":{},\"Nodes\":null}", false},
        {"{\"Pod\":{\"a\":1,\"a\":2},\"NodeNames\":[\"a\"]}", false},          /* duplicate key in the Pod */
        {"{\"Pod\":{\"a\":},\"NodeNames\":[\"a\"]}", false},
        {"{\"Pod\":{\"a\":\"\\q\"},\"NodeNames\":[\"a\"]}", false},
        {"{\"Pod\":{\"a\":[}],\"NodeNames\":[\"a\"]}", false},
        {"{\"Pod\":{},\"NodeNames\":[\"a\"]} x", false},                       /* trailing garbage */
        {"{\"Pod\":{},\"NodeNames\":[\"a\"]}{}", false},
        {"{\"Pod\":{},\"NodeNames\":[\"a\",]}", false},
        {"{\"Pod\":{},\"NodeNames\":[\"a\"],}", false},
        {"{\"Pod\":{},\"NodeNames\":[\"a\"]", false},                          /* truncated */
        {"{\"Pod\":{},\"NodeNames\":[\"a", false},
        {"{\"Pod\":{},\"Nodes\":nul,\"NodeNames\":[\"a\"]}", false},
        {"{\"Pod\":{},\"Nodes\":nullx,\"NodeNames\":[\"a\"]}", false},
        {"", false},
        {"[]", false},
        {"{}", false},
        {"\xef\xbb\xbf{\"Pod\":{},\"NodeNames\":[\"a\"]}", false},             /* a BOM */
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        int jrc;
        int rc = scan_vs_jansson(cases[i].body, strlen(cases[i].body), &jrc, __LINE__);
        if (rc != -EAGAIN || (jrc == 0) != cases[i].jansson_ok)
            test_fail(__FILE__, __LINE__, "case %zu %s: scan %d, jansson %d", i, cases[i].body, rc, jrc);
    }
    /* a NUL byte inside the body's length */
    static const char nul[] = "{\"Pod\":{},\"NodeNames\":[\"a\0b\"]}";
    int jrc;
    CHECK_I64(scan_vs_jansson(nul, sizeof nul - 1, &jrc, __LINE__), -EAGAIN);
    CHECK(jrc != 0);
    /* a Pod nested deeper than the decoder takes */
    char deep[512] = "{\"Pod\":";
    for (int i = 0; i < EXTENDER_MAX_DEPTH + 2; i++) strcat(deep, "{\"a\":");
    strcat(deep, "1");
    for (int i = 0; i < EXTENDER_MAX_DEPTH + 2; i++) strcat(deep, "}");
    strcat(deep, ",\"NodeNames\":[\"a\"]}");
    CHECK_I64(scan_vs_jansson(deep, strlen(deep), &jrc, __LINE__), -EAGAIN);
    CHECK_I64(jrc, -E2BIG);
}

/* One scan struct reused: a big request, an escaped one, then small ones. */
TEST(extender_scan_reuse) {
    struct extender_scan s = {0};
    size_t cap = 64 + 20 * 3000;
    char *body = malloc(cap);
    REQUIRE(body);
    size_t len = (size_t)snprintf(body, cap, "{\"Pod\":{},\"NodeNames\":[");
    for (int i = 0; i < 3000; i++) len += (size_t)snprintf(body + len, cap - len, "%s\"n\\u00e9-%d\"", i ? "," : "", i);
    len += (size_t)snprintf(body + len, cap - len, "]}");
    REQUIRE_I64(extender_scan_args(body, len, &s), 0);
    CHECK_I64(s.nnodes, 3000);
    CHECK(s.names[2999].len == strlen("n\xc3\xa9-2999") && !memcmp(s.names[2999].s, "n\xc3\xa9-2999", s.names[2999].len));
    CHECK_I64(extender_scan_find(&s, "n\xc3\xa9-17", strlen("n\xc3\xa9-17")), 17);
    CHECK_I64(extender_scan_find(&s, "n-17", 4), -1);
    static const char small[] = "{\"Pod\":{},\"NodeNames\":[\"x\",\"y\"]}";
    REQUIRE_I64(extender_scan_args(small, sizeof small - 1, &s), 0);
    CHECK_I64(s.nnodes, 2);
    CHECK_I64(extender_scan_find(&s, "y", 1), 1);
    CHECK_I64(extender_scan_args("{", 1, &s), -EAGAIN);
    CHECK(s.pod == NULL && s.nnodes == 0);
    CHECK_I64(extender_scan_find(&s, "y", 1), -1);
    extender_scan_free(&s);
    free(body);
}

/* The text encoders against json_dumps of the json_t encoders. */
static void check_filter_same(const char *const *names, const struct extender_name_verdict *v, size_t n, int line) {
    json_t *list = json_array();
    for (size_t i = 0; i < n; i++) json_array_append_new(list, json_string(names[i]));
    json_t *body = json_pack("{s:{}, s:o}", "Pod", "NodeNames", list);
    struct extender_args *a = NULL;
    char err[256] = "", err2[256] = "";
    if (extender_decode_args(body, &a, err, sizeof err)) {
        test_fail(__FILE__, line, "decode: %s", err);
        json_decref(body);
        return;
    }
    struct extender_node_verdict *nv = calloc(n ? n : 1, sizeof *nv);
    struct extender_name *nm = calloc(n ? n : 1, sizeof *nm);
    for (size_t i = 0; i < n; i++) {
        nv[i] = (struct extender_node_verdict){names[i], v[i].verdict, v[i].reason};
        nm[i] = (struct extender_name){names[i], strlen(names[i])};
    }
    json_t *out = NULL;
    int rc = extender_filter_result(a, nv, n, &out, err, sizeof err);
    struct extender_buf b = {0};
    int rc2 = extender_filter_result_buf(nm, v, n, &b, err2, sizeof err2);
    char *want = out ? json_dumps(out, JSON_COMPACT) : NULL;
    if (rc != rc2 || (rc && strcmp(err, err2) != 0))
        test_fail(__FILE__, line, "filter: rc %d \"%s\" vs text rc %d \"%s\"", rc, err, rc2, err2);
    else if (!rc && (!want || b.len != strlen(want) || strcmp(b.data, want) != 0))
        test_fail(__FILE__, line, "filter:\n    json %s\n    text %s", want ? want : "(null)", b.data ? b.data : "(null)");
    else if (rc && b.len != 0)
        test_fail(__FILE__, line, "filter: text left on error");
    free(want);
    json_decref(out);
    extender_buf_free(&b);
    /* prioritize on the same names */
    int64_t *sc = calloc(n ? n : 1, sizeof *sc);
    struct extender_host_priority *p = calloc(n ? n : 1, sizeof *p);
    for (size_t i = 0; i < n; i++) {
        sc[i] = (int64_t)(i * 7 % 15) - 2;
        p[i] = (struct extender_host_priority){names[i], sc[i]};
    }
    rc = extender_priority_list(NULL, p, n, &out, err, sizeof err);
    rc2 = extender_priority_list_buf(nm, sc, n, &b, err2, sizeof err2);
    want = out ? json_dumps(out, JSON_COMPACT | JSON_ENCODE_ANY) : NULL;
    if (rc != rc2 || (rc && strcmp(err, err2) != 0))
        test_fail(__FILE__, line, "priority: rc %d \"%s\" vs text rc %d \"%s\"", rc, err, rc2, err2);
    else if (!rc && (!want || strcmp(b.data, want) != 0))
        test_fail(__FILE__, line, "priority:\n    json %s\n    text %s", want ? want : "(null)", b.data ? b.data : "");
    free(want);
    json_decref(out);
    extender_buf_free(&b);
    free(sc);
    free(p);
    free(nv);
    free(nm);
    extender_args_free(a);
    json_decref(body);
}

TEST(extender_text_encoders_match_jansson) {
    static const char *const names[] = {"n1", "n\"2", "back\\slash", "ctl\x01\x1f\b\f\n\r\t", "caf\xc3\xa9",
                                        "\xf0\x9f\x98\x80", "sl/ash", "del\x7f", "\xe2\x82\xac-euro", "long-node-name-0001"};
    const size_t n = sizeof names / sizeof names[0];
    static const char *const reasons[] = {"insufficient cpu", "", NULL, "quote \" and \\ and \n",
                                          "unicode \xc3\xa9\xf0\x9f\x98\x80", "ctl \x01"};
    struct extender_name_verdict v[sizeof names / sizeof names[0]];
    uint64_t seed = 7;
    for (int round = 0; round < 300; round++) {
        size_t k = (size_t)test_range(&seed, 0, (int64_t)n);
        for (size_t i = 0; i < k; i++)
            v[i] = (struct extender_name_verdict){(enum extender_verdict)test_range(&seed, 0, 2),
                                                  reasons[test_rand(&seed) % 6]};
        check_filter_same(names, v, k, __LINE__);
    }
    /* errors: the same code and message */
    char big[EXTENDER_MAX_REASON + 2];
    memset(big, 'r', sizeof big - 1);
    big[sizeof big - 1] = 0;
    struct extender_name_verdict bad[3] = {{EXTENDER_PASS, NULL}, {EXTENDER_FAIL, "ok"}, {EXTENDER_FAIL, "\xff"}};
    check_filter_same(names, bad, 3, __LINE__);
    bad[2] = (struct extender_name_verdict){EXTENDER_FAIL_UNRESOLVABLE, big};
    check_filter_same(names, bad, 3, __LINE__);
    bad[1] = (struct extender_name_verdict){(enum extender_verdict)9, NULL};
    check_filter_same(names, bad, 3, __LINE__);
    /* a host the priority list refuses */
    char err[256] = "";
    struct extender_buf b = {0};
    int64_t sc[2] = {1, 2};
    struct extender_name h[2] = {{"a", 1}, {"\xff", 1}};
    CHECK_I64(extender_priority_list_buf(h, sc, 2, &b, err, sizeof err), -EINVAL);
    CHECK_HAS(err, "priority 1: Host: node name is not valid UTF-8");
    h[1] = (struct extender_name){"a\0b", 3};
    CHECK_I64(extender_priority_list_buf(h, sc, 2, &b, err, sizeof err), -EINVAL);
    CHECK_HAS(err, "priority 1: Host: contains a NUL byte");
    h[1] = (struct extender_name){"\xff\0", 2}; /* the NUL is reported first, as extender_priority_list does */
    CHECK_I64(extender_priority_list_buf(h, sc, 2, &b, err, sizeof err), -EINVAL);
    CHECK_HAS(err, "priority 1: Host: contains a NUL byte");
    h[1] = (struct extender_name){"", 0};
    CHECK_I64(extender_priority_list_buf(h, sc, 2, &b, err, sizeof err), -EINVAL);
    CHECK_HAS(err, "priority 1: Host: must not be empty");
    h[1] = (struct extender_name){NULL, 0};
    CHECK_I64(extender_priority_list_buf(h, sc, 2, &b, err, sizeof err), -EINVAL);
    CHECK_HAS(err, "priority 1: Host: no node name");
    CHECK_I64(b.len, 0);
    /* a reused buffer is replaced, not appended to */
    h[1] = (struct extender_name){"b", 1};
    REQUIRE_I64(extender_priority_list_buf(h, sc, 2, &b, err, sizeof err), 0);
    REQUIRE_I64(extender_priority_list_buf(h, sc, 1, &b, err, sizeof err), 0);
    CHECK_STR(b.data, "[{\"Host\":\"a\",\"Score\":1}]");
    REQUIRE_I64(extender_priority_list_buf(NULL, NULL, 0, &b, err, sizeof err), 0);
    CHECK_STR(b.data, "[]");
    extender_buf_free(&b);
}

/* Random bodies of the common shape (random key case and order, escapes,
 * unicode, whitespace): the scan takes them and agrees with jansson. */
TEST(extender_scan_property) {
    static const char *const pieces[] = {"a", "B", "-", ".", "\\u00e9", "\xc3\xa9", "\\\"", "\\\\", "\\/", "\\n",
                                         "\\ud83d\\ude00", "\xf0\x9f\x98\x80", "\\u0001", "z9"};
    static const char *const ws[] = {"", " ", "\n", "\t ", "\r\n"};
    uint64_t seed = 2024;
    char *body = malloc(65536);
    REQUIRE(body);
    int taken = 0;
    for (int round = 0; round < 400; round++) {
        size_t len = 0;
        char key[3][16];
        random_case(key[0], "Pod", &seed);
        random_case(key[1], "Nodes", &seed);
        random_case(key[2], "NodeNames", &seed);
        int order = (int)test_range(&seed, 0, 5);
        static const int perms[6][3] = {{0, 1, 2}, {0, 2, 1}, {1, 0, 2}, {1, 2, 0}, {2, 0, 1}, {2, 1, 0}};
        bool with_nodes = test_rand(&seed) % 2;
        len += (size_t)sprintf(body + len, "%s{", ws[test_rand(&seed) % 5]);
        bool first = true;
        for (int f = 0; f < 3; f++) {
            int k = perms[order][f];
            if (k == 1 && !with_nodes) continue;
            len += (size_t)sprintf(body + len, "%s%s\"%s\"%s:%s", first ? "" : ",", ws[test_rand(&seed) % 5], key[k],
                                   ws[test_rand(&seed) % 5], ws[test_rand(&seed) % 5]);
            first = false;
            if (k == 0) len += (size_t)sprintf(body + len, "%s", POD_JSON);
            else if (k == 1) len += (size_t)sprintf(body + len, "null");
            else {
                int n = (int)test_range(&seed, 0, 30);
                len += (size_t)sprintf(body + len, "[");
                for (int i = 0; i < n; i++) {
                    len += (size_t)sprintf(body + len, "%s%s\"", i ? "," : "", ws[test_rand(&seed) % 5]);
                    int np = (int)test_range(&seed, 1, 4);
                    for (int j = 0; j < np; j++) len += (size_t)sprintf(body + len, "%s", pieces[test_rand(&seed) % 14]);
                    len += (size_t)sprintf(body + len, "%d\"", i);
                }
                len += (size_t)sprintf(body + len, "%s]", ws[test_rand(&seed) % 5]);
            }
        }
        len += (size_t)sprintf(body + len, "}%s", ws[test_rand(&seed) % 5]);
        int jrc;
        int rc = scan_vs_jansson(body, len, &jrc, __LINE__);
        taken += rc == 0;
        if (rc != 0) test_fail(__FILE__, __LINE__, "round %d: not taken (%d, jansson %d): %s", round, rc, jrc, body);
    }
    CHECK(taken == 400);
    /* mutations of those bodies: the scan never decodes what jansson refuses */
    for (int round = 0; round < 20000; round++) {
        const char *src = "{\"Pod\":{\"metadata\":{\"name\":\"p\"}},\"Nodes\":null,\"NodeNames\":[\"n1\",\"n\\u00e92\","
                          "\"\\ud83d\\ude00\"]}";
        size_t len = strlen(src);
        memcpy(body, src, len + 1);
        static const char alphabet[] = "{}[]:,\"\\u0dDe9aA \x01\xc3\xa9\xff";
        int muts = (int)test_range(&seed, 1, 3);
        for (int m = 0; m < muts && len > 1; m++) {
            size_t pos = (size_t)test_range(&seed, 0, (int64_t)len - 1);
            switch (test_rand(&seed) % 3) {
            case 0: body[pos] = alphabet[test_rand(&seed) % (sizeof alphabet - 1)]; break;
            case 1: memmove(body + pos, body + pos + 1, len - pos); len--; break;
            default: len = pos; break;
            }
        }
        int jrc;
        scan_vs_jansson(body, len, &jrc, __LINE__);
    }
    free(body);
}

/* A hint (a NodeNames array decoded once) gives the scan of a body with that
 * very array the same result; any other array is read as before. */
TEST(extender_scan_hint_gives_the_same_scan) {
    static const char *const bodies[] = {
        "{\"Pod\":" POD_JSON ",\"Nodes\":null,\"NodeNames\":[\"n1\",\"n2\",\"caf\xc3\xa9\"]}",
        "{\"NodeNames\":[\"n1\",\"n2\",\"caf\xc3\xa9\"],\"Pod\":" POD_JSON "}",
        "{\"Pod\":" POD_JSON ",\"NodeNames\":[\"n1\",\"n2\",\"caf\xc3\xa9\"] }",
        "{\"Pod\":" POD_JSON ",\"NodeNames\":[\"n1\",\"n2\"]}",                 /* a prefix of the names */
        "{\"Pod\":" POD_JSON ",\"NodeNames\":[\"n1\",\"n2\",\"caf\\u00e9\"]}",  /* the same names, other text */
        "{\"Pod\":" POD_JSON ",\"NodeNames\":[\"n1\",\"n2\",\"caf\xc3\xa9\"],\"NodeNames\":[]}",
        "{\"Pod\":" POD_JSON ",\"NodeNames\":[\"n1\",\"n2\",\"caf\xc3\xa9\",\"n1\"]}", /* a repeat after the hint's text */
        "{\"Pod\":" POD_JSON ",\"NodeNames\":[]}",
    };
    /* the hint: the array of the first body, decoded by a scan, in memory of its own */
    struct extender_scan h = {0};
    REQUIRE_I64(extender_scan_args(bodies[0], strlen(bodies[0]), &h), 0);
    REQUIRE(h.compact);
    char *text = malloc(h.names_len);
    memcpy(text, h.names_text, h.names_len);
    struct extender_name names[3];
    for (size_t i = 0; i < 3; i++) names[i] = (struct extender_name){text + (h.names[i].s - h.names_text), h.names[i].len};
    struct extender_names_hint hint = {text, h.names_len, 3, names, h.hashes};
    for (size_t b = 0; b < sizeof bodies / sizeof bodies[0]; b++) {
        struct extender_scan s = {0}, t = {0};
        int rc = extender_scan_args(bodies[b], strlen(bodies[b]), &s);
        int rc2 = extender_scan_args_hinted(bodies[b], strlen(bodies[b]), &hint, &t);
        CHECK_I64(rc2, rc);
        if (!rc && !rc2) {
            CHECK_I64(t.nnodes, s.nnodes);
            CHECK(t.compact == s.compact);
            CHECK(t.names_text == s.names_text && t.names_len == s.names_len);
            CHECK(t.pod_text == s.pod_text && t.pod_len == s.pod_len && json_equal(t.pod, s.pod));
            for (size_t i = 0; i < s.nnodes && i < t.nnodes; i++) {
                CHECK(t.names[i].len == s.names[i].len && !memcmp(t.names[i].s, s.names[i].s, s.names[i].len));
                CHECK(t.hashes[i] == s.hashes[i]);
                CHECK_I64(extender_scan_find(&t, s.names[i].s, s.names[i].len), (long)i);
            }
            CHECK_I64(extender_scan_find(&t, "n3", 2), -1);
            if (b < 3) CHECK(t.names == names); /* taken from the hint */
            else CHECK(t.names != names);
        }
        extender_scan_free(&s);
        extender_scan_free(&t);
    }
    free(text);
    extender_scan_free(&h);
}
