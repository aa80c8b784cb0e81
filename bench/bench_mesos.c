/* The Mesos driver's per-event work, without the network: RecordIO decoding
 * of a SUBSCRIBE stream cut into 16 KiB chunks, then each UPDATE record
 * parsed and decoded (jparse + mesos_event_parse), and the ACCEPT/LAUNCH and
 * ACKNOWLEDGE calls built and serialized. Targets: the 5,000
 * launches per second need a launch call, three updates and three
 * acknowledgements each, so 15,000 updates/s and 20,000 calls/s are the
 * floor; these figures show how far above it the protocol work is. */
#include <stdlib.h>
#include <string.h>

#include "bench.h"
#include "jparse.h"
#include "mesos_json.h"
#include "recordio.h"

#define EVENTS 200000

struct count {
    uint64_t records, bytes, updates;
    bool decode;
};

static int on_record(void *ud, const char *data, size_t len) {
    struct count *c = ud;
    c->records++;
    c->bytes += len;
    if (!c->decode) return 0;
    json_t *root = jparse_loadb(data, len, 0, NULL);
    struct mesos_event ev;
    char err[128];
    if (root && mesos_event_parse(root, &ev, err, sizeof err) == 0 && ev.type == MESOS_EVENT_UPDATE) c->updates++;
    json_decref(root);
    return 0;
}

int main(void) {
    char *stream = NULL;
    size_t len = 0, cap = 0;
    uint64_t seed = 19;
    for (int i = 0; i < EVENTS; i++) {
        char tid[64];
        snprintf(tid, sizeof tid, "peloton-job-%d-%d", i / 100, i % 100);
        struct mesos_task_status st = {.task_id = tid, .agent_id = "4f5c2d1e-1b2a-4c3d-9e8f-0123456789ab-S1234",
                                       .state = MESOS_TASK_RUNNING, .source = MESOS_SOURCE_EXECUTOR,
                                       .timestamp = 1.7e9 + i, .has_uuid = true};
        for (int k = 0; k < MESOS_UUID_LEN; k++) st.uuid[k] = (unsigned char)bench_rand(&seed);
        json_t *e = mesos_event_update(&st);
        size_t n = 0;
        char *text = jdump(e, JSON_COMPACT, &n);
        recordio_encode(&stream, &len, &cap, text, n);
        free(text);
        json_decref(e);
    }
    for (int pass = 0; pass < 2; pass++) {
        struct recordio_decoder d;
        struct count c = {.decode = pass == 1};
        recordio_decoder_init(&d, 0);
        uint64_t t0 = bench_now_ns();
        for (size_t off = 0; off < len; off += 16384)
            recordio_decode(&d, stream + off, len - off < 16384 ? len - off : 16384, on_record, &c);
        double s = (double)(bench_now_ns() - t0) / 1e9;
        recordio_decoder_free(&d);
        if (c.records != EVENTS || (pass == 1 && c.updates != EVENTS)) {
            fprintf(stderr, "bench_mesos: decoded %llu records, %llu updates\n", (unsigned long long)c.records,
                    (unsigned long long)c.updates);
            return 1;
        }
        if (pass == 0) {
            bench_report("mesos recordio decode (16 KiB chunks)", (double)len / s / 1e6, "MB/s", NULL);
            bench_report("mesos recordio records", (double)EVENTS / s, "records/s", NULL);
        } else {
            bench_report("mesos UPDATE events decoded (recordio+json)", (double)EVENTS / s, "events/s",
                         "(floor 15000/s)");
        }
    }
    free(stream);

    uint64_t t0 = bench_now_ns();
    size_t bytes = 0;
    for (int i = 0; i < EVENTS / 4; i++) {
        char tid[64];
        snprintf(tid, sizeof tid, "peloton-job-%d-%d", i / 100, i % 100);
        struct mesos_task_spec t = {.name = tid, .task_id = tid, .agent_id = "A-S1", .res = {.cpus = 1, .mem = 512},
                                    .command = "sleep 100", .image = "debian:bookworm"};
        json_t *infos = json_array();
        json_array_append_new(infos, mesos_task_info(&t));
        const char *offer = "4f5c2d1e-O123456";
        json_t *accept = mesos_call_accept("F-0000", &offer, 1, infos, 5);
        json_t *ack = mesos_call_acknowledge("F-0000", "A-S1", tid, "AAECAwQFBgcICQoLDA0ODw==");
        size_t n1 = 0, n2 = 0;
        char *a = jdump(accept, JSON_COMPACT, &n1), *b = jdump(ack, JSON_COMPACT, &n2);
        bytes += n1 + n2;
        free(a);
        free(b);
        json_decref(accept);
        json_decref(ack);
    }
    double s = (double)(bench_now_ns() - t0) / 1e9;
    bench_report("mesos ACCEPT+ACKNOWLEDGE calls built", (double)(EVENTS / 4) * 2 / s, "calls/s", "(floor 20000/s)");
    (void)bytes;
    return 0;
}
