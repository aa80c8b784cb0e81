/* Fuzz target: the generic proto3 JSON mapping (pbjson) and the bounded wire
 * decoder (pbmsg). The first byte picks the message: peloton_c.test.AllTypes
 * (every field shape), or a served request whose tree holds the proto2 Mesos
 * messages (job CreateRequest), the pool config (respool CreateRequest),
 * an update (update.svc CreateUpdateRequest: JobConfig and UpdateConfig),
 * v1alpha's stateless CreateJobRequest (a map keyed by uint32) or
 * WatchRequest (a uint64).
 * The rest starting with '{' is JSON: what pbjson accepts must pack, unpack
 * and write back as JSON that reads back to the same JSON. Anything else is
 * wire bytes: what pbmsg_unpack accepts must write as JSON (or be refused
 * for a string that is not UTF-8) that reads back and packs to a message
 * writing the same JSON. No crash, leak or sanitizer report on any input. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pbjson.h"
#include "pbmsg.h"
#include "peloton/api/v0/job/job.pb-c.h"
#include "peloton/api/v0/respool/respool.pb-c.h"
#include "peloton/api/v0/update/svc/update_svc.pb-c.h"
#include "peloton/api/v1alpha/job/stateless/svc/stateless_svc.pb-c.h"
#include "peloton/api/v1alpha/watch/svc/watch_svc.pb-c.h"
#include "peloton_c/test/alltypes.pb-c.h"

static const ProtobufCMessageDescriptor *D;

static void same_after_reading(const char *json) {
    char err[256];
    ProtobufCMessage *m = pbjson_parse(D, json, strlen(json), err, sizeof err);
    if (!m) { /* what pbjson writes, it reads */
        fprintf(stderr, "pbjson refused its own output: %s\n%s\n", err, json);
        abort();
    }
    size_t n;
    uint8_t *w = pbmsg_pack(m, &n);
    protobuf_c_message_free_unpacked(m, NULL);
    ProtobufCMessage *b = pbmsg_unpack(D, w, n, err, sizeof err);
    free(w);
    if (!b) {
        fprintf(stderr, "pbmsg refused what was packed: %s\n%s\n", err, json);
        abort();
    }
    char *again = pbjson_dump(b, NULL, err, sizeof err);
    protobuf_c_message_free_unpacked(b, NULL);
    if (!again || strcmp(again, json)) {
        fprintf(stderr, "not the same after reading:\n%s\n%s\n", json, again ? again : err);
        abort();
    }
    free(again);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    static const ProtobufCMessageDescriptor *const descs[] = {
        &peloton_c__test__all_types__descriptor, &peloton__api__v0__job__create_request__descriptor,
        &peloton__api__v0__respool__create_request__descriptor,
        &peloton__api__v0__update__svc__create_update_request__descriptor,
        &peloton__api__v1alpha__job__stateless__svc__create_job_request__descriptor,
        &peloton__api__v1alpha__watch__svc__watch_request__descriptor};
    char err[256];
    ProtobufCMessage *m;
    if (!size) return 0;
    D = descs[data[0] % (sizeof descs / sizeof descs[0])];
    data++;
    size--;
    if (size && data[0] == '{') m = pbjson_parse(D, (const char *)data, size, err, sizeof err);
    else m = pbmsg_unpack(D, data, size, err, sizeof err);
    if (!m) return 0;
    char *json = pbjson_dump(m, NULL, err, sizeof err);
    protobuf_c_message_free_unpacked(m, NULL);
    if (json) same_after_reading(json);
    free(json);
    return 0;
}
