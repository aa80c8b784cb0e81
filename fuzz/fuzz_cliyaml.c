/* Fuzz target: the CLI's YAML reader (src/cli/cliyaml.c). The first byte
 * picks the message the YAML is read as (JobConfig, with maps, enums,
 * repeated and proto2 Mesos messages; ResourcePoolConfig; AllTypes, every
 * field shape), and whether unknown fields are refused or skipped; the
 * rest is the YAML. What the reader accepts must be JSON
 * that pbjson either maps to the message or refuses with a message; a
 * message it makes packs. No crash, leak or sanitizer report on any input,
 * and every refusal says something. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cliyaml.h"
#include "pbjson.h"
#include "pbmsg.h"
#include "peloton/api/v0/job/job.pb-c.h"
#include "peloton/api/v0/respool/respool.pb-c.h"
#include "peloton_c/test/alltypes.pb-c.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    static const ProtobufCMessageDescriptor *const descs[] = {&peloton__api__v0__job__job_config__descriptor,
                                                              &peloton__api__v0__respool__resource_pool_config__descriptor,
                                                              &peloton_c__test__all_types__descriptor};
    char err[512] = "";
    if (!size) return 0;
    static FILE *devnull;
    if (!devnull) devnull = fopen("/dev/null", "w");
    const ProtobufCMessageDescriptor *d = descs[data[0] % 3];
    /* every other input in --skip-unknown's mode */
    FILE *skipped = (data[0] / 3) & 1 ? devnull : NULL;
    json_t *j = cliyaml_to_json_skipping(d, "fuzz.yaml", (const char *)data + 1, size - 1, skipped, err, sizeof err);
    ProtobufCMessage *m = j ? pbjson_to_msg(d, j, err, sizeof err) : NULL;
    json_decref(j);
    if (!m) {
        if (!err[0]) {
            fprintf(stderr, "refused without a message\n");
            abort();
        }
        return 0;
    }
    size_t n;
    uint8_t *w = pbmsg_pack(m, &n);
    if (!w) abort();
    ProtobufCMessage *back = pbmsg_unpack(d, w, n, err, sizeof err);
    if (!back) {
        fprintf(stderr, "pbmsg refused what was packed: %s\n", err);
        abort();
    }
    protobuf_c_message_free_unpacked(back, NULL);
    free(w);
    protobuf_c_message_free_unpacked(m, NULL);
    return 0;
}
