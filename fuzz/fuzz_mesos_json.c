/* Fuzz target: the v1 scheduler API decoders (src/mesos/mesos_json.c) on
 * any JSON: mesos_call_parse and the call accessors the master uses,
 * mesos_event_parse and mesos_offer_parse the driver uses, task infos and
 * uuids. None may crash; what a decoder accepts must hold its contract
 * (an ACKNOWLEDGE's uuid decodes, a parsed update's state has a name). */
#include <jansson.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "mesos_json.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    json_t *root = json_loadb((const char *)data, size, JSON_DECODE_ANY, NULL);
    char err[512];
    unsigned char u[MESOS_UUID_LEN];
    if (size <= 64) {
        char s[65];
        memcpy(s, data, size);
        s[size] = 0;
        mesos_uuid_decode(s, u);
    }
    if (!root) return 0;
    struct mesos_call c;
    if (mesos_call_parse(root, &c, err, sizeof err) == 0) {
        if (!mesos_call_type_name(c.type)) abort();
        if (c.type != MESOS_CALL_SUBSCRIBE && !c.framework_id) abort();
        if (c.type == MESOS_CALL_ACKNOWLEDGE &&
            mesos_uuid_decode(json_string_value(json_object_get(c.body, "uuid")), u))
            abort();
        const char *ids[8];
        int n;
        mesos_call_offer_ids(c.body, ids, 8, &n, err, sizeof err);
        mesos_call_refuse_seconds(c.body);
        size_t i, j;
        const json_t *op, *ti;
        json_array_foreach(json_object_get(c.body, "operations"), i, op) {
            json_array_foreach(json_object_get(json_object_get(op, "launch"), "task_infos"), j, ti) {
                struct mesos_task_decl d;
                if (mesos_task_info_parse(ti, &d, err, sizeof err) == 0 && (!d.task_id || !d.agent_id)) abort();
                mesos_task_label(ti, "k");
                mesos_task_env(ti, "K");
            }
        }
    } else if (!err[0]) {
        abort(); /* a refusal says why */
    }
    struct mesos_event e;
    if (mesos_event_parse(root, &e, err, sizeof err) == 0) {
        if (e.type == MESOS_EVENT_UPDATE && !mesos_task_state_name(e.status.state)) abort();
        size_t i;
        const json_t *o;
        json_array_foreach(e.offers, i, o) {
            struct mesos_offer_decl d;
            mesos_offer_parse(o, &d, err, sizeof err);
        }
    }
    struct mesos_scalars r;
    int other;
    mesos_resources_parse(root, &r, &other, err, sizeof err);
    json_decref(root);
    return 0;
}
