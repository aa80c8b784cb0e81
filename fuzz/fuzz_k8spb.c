/* Fuzz target: Kubernetes' protobuf bodies (apiserver-shim/shim_proto.c).
 * The whole input is a request body (the "k8s\0" envelope and an object);
 * what decodes must encode, decode again, and be the same JSON after one
 * more encode and decode (the first decode normalises: a zero Time is null,
 * which encoding leaves out). No crash, leak or sanitizer report on any
 * input. The seeds are envelopes of the served kinds (fuzz/corpus/k8spb). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "shim_proto.h"

/* obj's protobuf decoded again (new reference); aborts when either fails. */
static json_t *again(const json_t *obj) {
    char err[400];
    unsigned char *pb = NULL;
    size_t n = 0;
    if (shim_pb_encode(obj, &pb, &n, err, sizeof err)) {
        fprintf(stderr, "what decoded does not encode: %s\n", err);
        abort();
    }
    json_t *back = shim_pb_decode(pb, n, err, sizeof err);
    free(pb);
    if (!back) {
        fprintf(stderr, "what encoded does not decode: %s\n", err);
        abort();
    }
    return back;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    char err[400];
    json_t *obj = shim_pb_decode(data, size, err, sizeof err);
    if (!obj) return 0;
    json_t *a = again(obj), *b = again(a);
    if (!json_equal(a, b)) {
        char *x = json_dumps(a, JSON_COMPACT | JSON_SORT_KEYS), *y = json_dumps(b, JSON_COMPACT | JSON_SORT_KEYS);
        fprintf(stderr, "not the same after a round trip:\n%s\n%s\n", x, y);
        abort();
    }
    json_decref(obj);
    json_decref(a);
    json_decref(b);
    return 0;
}
