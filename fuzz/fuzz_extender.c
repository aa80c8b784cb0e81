/* Fuzz target: the input is one JSON document, run through all three
 * extender decoders (ExtenderArgs, ExtenderBindingArgs,
 * ExtenderPreemptionArgs); what decodes is encoded back into every reply.
 * Checks that the body is left untouched, that a failure leaves *out NULL with
 * a message, that a filter result only names request nodes, and that a
 * preemption result decodes again to the nodes that had victims.
 * Differential: the raw bytes also go through the fast path
 * (extender_scan_args), which must either leave them to the jansson path or
 * decode exactly what it decodes (and say where the Pod and the NodeNames
 * array stand in the body); its text replies, for any names and for the
 * scan's own (compact runs copied from the body), must be the bytes
 * json_dumps writes for the json_t replies. The preempt scan
 * (extender_scan_preemption_args) is held to extender_decode_preemption_args
 * the same way. */
#include <errno.h>
#include <jansson.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "extender.h"

static void check_failure(int rc, const void *out, const char *err) {
    if (rc != 0 && (out != NULL || err[0] == 0)) abort();
}

static void run_args(const json_t *body) {
    char err[256] = "";
    struct extender_args *a = NULL;
    int rc = extender_decode_args(body, &a, err, sizeof err);
    check_failure(rc, a, err);
    if (rc) return;
    size_t n = a->nnodes;
    struct extender_node_verdict *v = calloc(n ? n : 1, sizeof *v);
    struct extender_host_priority *p = calloc(n ? n : 1, sizeof *p);
    if (!v || !p) abort();
    for (size_t i = 0; i < n; i++) {
        v[i] = (struct extender_node_verdict){a->names[n - 1 - i], (enum extender_verdict)(i % 3), "reason"};
        p[i] = (struct extender_host_priority){a->names[i], (int64_t)i - 3};
    }
    json_t *out;
    if (extender_filter_result(a, v, n, &out, err, sizeof err) != 0) abort();
    json_t *pass = a->node_cache ? json_object_get(out, "NodeNames")
                                 : json_object_get(json_object_get(out, "Nodes"), "items");
    size_t i;
    json_t *e;
    json_array_foreach(pass, i, e) {
        const char *name = a->node_cache ? json_string_value(e)
                                         : json_string_value(json_object_get(json_object_get(e, "metadata"), "name"));
        if (extender_args_find(a, name) < 0) abort();
    }
    json_decref(out);
    if (extender_priority_list(a, p, n, &out, err, sizeof err) != 0) abort();
    json_array_foreach(out, i, e) {
        json_int_t s = json_integer_value(json_object_get(e, "Score"));
        if (s < EXTENDER_MIN_PRIORITY || s > EXTENDER_MAX_PRIORITY) abort();
    }
    json_decref(out);
    free(v);
    free(p);
    extender_args_free(a);
}

static void run_binding(const json_t *body) {
    char err[256] = "";
    struct extender_binding_args *b = NULL;
    int rc = extender_decode_binding_args(body, &b, err, sizeof err);
    check_failure(rc, b, err);
    json_t *out;
    if (extender_binding_result(rc ? err : NULL, &out) != 0) abort();
    json_decref(out);
    if (extender_error_reply(EXTENDER_FILTER, err, &out) != 0) abort();
    json_decref(out);
    extender_binding_args_free(b);
}

static void run_preemption(const json_t *body) {
    char err[256] = "";
    struct extender_preemption_args *a = NULL;
    int rc = extender_decode_preemption_args(body, &a, err, sizeof err);
    check_failure(rc, a, err);
    if (rc) return;
    json_t *out;
    if (extender_preemption_result(a, a->nodes, a->nnodes, &out, err, sizeof err) != 0) abort();
    if (json_object_set_new(out, "Pod", json_object()) != 0) abort();
    struct extender_preemption_args *again = NULL;
    if (extender_decode_preemption_args(out, &again, err, sizeof err) != 0) abort();
    for (size_t i = 0; i < a->nnodes; i++) {
        long pos = extender_preemption_find(again, a->nodes[i].node);
        if ((a->nodes[i].npods == 0) != (pos < 0)) abort();
        if (pos >= 0 && again->nodes[pos].npods != a->nodes[i].npods) abort();
    }
    extender_preemption_args_free(again);
    json_decref(out);
    extender_preemption_args_free(a);
}

/* The text encoders on the scanned names against the json_t encoders. */
static void compare_replies(const struct extender_args *a, const struct extender_scan *s) {
    static const char *const reasons[] = {"insufficient cpu", "", "quote \" ctl \x01 \xc3\xa9"};
    size_t n = s->nnodes;
    struct extender_node_verdict *nv = calloc(n ? n : 1, sizeof *nv);
    struct extender_name_verdict *v = calloc(n ? n : 1, sizeof *v);
    struct extender_host_priority *p = calloc(n ? n : 1, sizeof *p);
    int64_t *sc = calloc(n ? n : 1, sizeof *sc);
    if (!nv || !v || !p || !sc) abort();
    for (size_t i = 0; i < n; i++) {
        v[i] = (struct extender_name_verdict){(enum extender_verdict)(i % 3), reasons[(i / 3) % 3]};
        nv[i] = (struct extender_node_verdict){a->names[i], v[i].verdict, v[i].reason};
        sc[i] = (int64_t)(i % 13) - 1;
        p[i] = (struct extender_host_priority){a->names[i], sc[i]};
    }
    char err[256] = "";
    json_t *out;
    struct extender_buf b = {0};
    if (extender_filter_result(a, nv, n, &out, err, sizeof err) != 0) abort();
    if (extender_filter_result_buf(s->names, v, n, &b, err, sizeof err) != 0) abort();
    char *want = json_dumps(out, JSON_COMPACT);
    if (!want || strlen(want) != b.len || memcmp(want, b.data, b.len) != 0) abort();
    free(want);
    json_decref(out);
    /* the scan's own encoders: the same bytes, and the passing names' span */
    struct extender_span pass;
    if (extender_filter_result(a, nv, n, &out, err, sizeof err) != 0) abort();
    if (extender_filter_result_scan(s, v, &b, &pass, err, sizeof err) != 0) abort();
    want = json_dumps(out, JSON_COMPACT);
    char *wpass = json_dumps(json_object_get(out, "NodeNames"), JSON_COMPACT);
    if (!want || !wpass || strlen(want) != b.len || memcmp(want, b.data, b.len) != 0) abort();
    if (pass.len != strlen(wpass) || pass.off + pass.len > b.len || memcmp(b.data + pass.off, wpass, pass.len)) abort();
    free(want);
    free(wpass);
    json_decref(out);
    if (extender_priority_list(NULL, p, n, &out, err, sizeof err) != 0) abort();
    want = json_dumps(out, JSON_COMPACT | JSON_ENCODE_ANY);
    if (extender_priority_list_buf(s->names, sc, n, &b, err, sizeof err) != 0) abort();
    if (!want || strlen(want) != b.len || memcmp(want, b.data, b.len) != 0) abort();
    if (extender_priority_list_scan(s, sc, &b, err, sizeof err) != 0) abort();
    if (strlen(want) != b.len || memcmp(want, b.data, b.len) != 0) abort();
    free(want);
    json_decref(out);
    extender_buf_free(&b);
    free(nv);
    free(v);
    free(p);
    free(sc);
}

static void run_scan(const uint8_t *data, size_t size) {
    struct extender_scan s = {0};
    int rc = extender_scan_args((const char *)data, size, &s);
    if (rc == -EAGAIN) {
        if (s.pod || s.nnodes) abort();
        extender_scan_free(&s);
        return;
    }
    if (rc != 0) abort();
    /* what the server does when the scan leaves it: the result must be the same */
    json_t *b = json_loadb((const char *)data, size, JSON_REJECT_DUPLICATES, NULL);
    struct extender_args *a = NULL;
    char err[256] = "";
    if (!b || extender_decode_args(b, &a, err, sizeof err) != 0) abort();
    if (!a->node_cache || a->nnodes != s.nnodes || !json_equal(a->pod, s.pod)) abort();
    /* the request's own text: the Pod and the NodeNames array */
    json_t *pod = json_loadb(s.pod_text, s.pod_len, 0, NULL), *names = json_loadb(s.names_text, s.names_len, 0, NULL);
    if (!json_equal(pod, a->pod) || json_array_size(names) != s.nnodes) abort();
    json_decref(pod);
    json_decref(names);
    for (size_t i = 0; i < s.nnodes; i++) {
        size_t len = strlen(a->names[i]);
        if (s.names[i].len != len || memcmp(s.names[i].s, a->names[i], len) != 0) abort();
        if (extender_scan_find(&s, a->names[i], len) != (long)i) abort();
    }
    compare_replies(a, &s);
    /* the names again with this scan's own array as the hint: the same scan */
    if (s.compact) {
        char *text = malloc(s.names_len + 1);
        struct extender_name *nm = malloc((s.nnodes ? s.nnodes : 1) * sizeof *nm);
        uint64_t *hs = malloc((s.nnodes ? s.nnodes : 1) * sizeof *hs);
        if (!text || !nm || !hs) abort();
        memcpy(text, s.names_text, s.names_len);
        for (size_t i = 0; i < s.nnodes; i++) {
            nm[i] = (struct extender_name){text + (s.names[i].s - s.names_text), s.names[i].len};
            hs[i] = s.hashes[i];
        }
        struct extender_names_hint hint = {text, s.names_len, s.nnodes, nm, hs};
        struct extender_scan t = {0};
        if (extender_scan_args_hinted((const char *)data, size, &hint, &t) != 0) abort();
        if (t.nnodes != s.nnodes || t.names != nm || !t.compact || !json_equal(t.pod, s.pod)) abort();
        for (size_t i = 0; i < s.nnodes; i++)
            if (extender_scan_find(&t, a->names[i], strlen(a->names[i])) != (long)i) abort();
        compare_replies(a, &t);
        extender_scan_free(&t);
        free(text);
        free(nm);
        free(hs);
    }
    extender_args_free(a);
    json_decref(b);
    extender_scan_free(&s);
}

/* The preempt scan: -EAGAIN, or exactly what the jansson path decodes. */
static void run_scan_preemption(const uint8_t *data, size_t size) {
    struct extender_preemption_args *s = NULL;
    int rc = extender_scan_preemption_args((const char *)data, size, &s);
    if (rc == -EAGAIN) {
        if (s) abort();
        return;
    }
    if (rc != 0 || !s) abort();
    json_t *b = json_loadb((const char *)data, size, JSON_REJECT_DUPLICATES, NULL);
    struct extender_preemption_args *a = NULL;
    char err[256] = "";
    if (!b || extender_decode_preemption_args(b, &a, err, sizeof err) != 0) abort();
    if (!a->meta || !s->meta || a->nnodes != s->nnodes || !json_equal(a->pod, s->pod)) abort();
    for (size_t i = 0; i < a->nnodes; i++) {
        const struct extender_victims *x = &a->nodes[i], *y = &s->nodes[i];
        if (strcmp(x->node, y->node) || x->npods != y->npods || x->num_pdb_violations != y->num_pdb_violations ||
            y->pods || extender_preemption_find(s, x->node) != (long)i)
            abort();
        for (size_t j = 0; j < x->npods; j++)
            if (strcmp(x->uids[j], y->uids[j])) abort();
    }
    extender_preemption_args_free(a);
    extender_preemption_args_free(s);
    json_decref(b);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    run_scan(data, size);
    run_scan_preemption(data, size);
    json_t *body = json_loadb((const char *)data, size, JSON_DECODE_ANY | JSON_REJECT_DUPLICATES, NULL);
    if (!body) return 0;
    json_t *copy = json_deep_copy(body);
    run_args(body);
    run_binding(body);
    run_preemption(body);
    if (!json_equal(body, copy)) abort();
    json_decref(copy);
    json_decref(body);
    return 0;
}
