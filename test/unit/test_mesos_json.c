/* The v1 scheduler API's JSON (src/mesos/mesos_json.c): what one side
 * builds the other decodes, and the master's refusals. */
#include <stdlib.h>
#include <string.h>

#include "jparse.h"
#include "mesos_json.h"
#include "test.h"

static int parse_text(const char *text, struct mesos_call *c, json_t **root, char *err, size_t errlen) {
    *root = json_loads(text, 0, NULL);
    if (!*root) return -2;
    return mesos_call_parse(*root, c, err, errlen);
}

TEST(mesos_json_subscribe_roundtrip) {
    const char *roles[] = {"*"}, *caps[] = {"GPU_RESOURCES", "PARTITION_AWARE"};
    struct mesos_framework_info fi = {.user = "peloton", .name = "peloton", .roles = roles, .nroles = 1,
                                      .capabilities = caps, .ncapabilities = 2, .failover_timeout = 2419200};
    json_t *c = mesos_call_subscribe(&fi);
    REQUIRE(c);
    struct mesos_call call;
    char err[256] = "";
    CHECK_I64(mesos_call_parse(c, &call, err, sizeof err), 0);
    CHECK_I64(call.type, MESOS_CALL_SUBSCRIBE);
    CHECK(call.framework_id == NULL);
    const json_t *fij = json_object_get(call.body, "framework_info");
    CHECK_STR(json_string_value(json_object_get(json_array_get(json_object_get(fij, "capabilities"), 1), "type")),
              "PARTITION_AWARE");
    json_decref(c);

    /* resubscription: framework_id must match framework_info.id */
    fi.id = "F1";
    c = mesos_call_subscribe(&fi);
    CHECK_I64(mesos_call_parse(c, &call, err, sizeof err), 0);
    CHECK_STR(call.framework_id, "F1");
    json_object_set_new(c, "framework_id", mesos_id("F2"));
    CHECK_I64(mesos_call_parse(c, &call, err, sizeof err), -1);
    CHECK_HAS(err, "Failed to validate scheduler::Call: 'framework_id' differs");
    json_decref(c);
}

TEST(mesos_json_accept_with_launch) {
    struct mesos_task_spec t = {.name = "t", .task_id = "t-1", .agent_id = "S1", .res = {.cpus = 0.5, .mem = 64},
                                .command = "sleep 10", .image = "busybox",
                                .env = (const char *[]){"A=1", "MESOS_SIM_RUN_SECONDS=3"}, .nenv = 2,
                                .labels = (const char *[]){"peloton.io/run=1"}, .nlabels = 1};
    json_t *infos = json_array();
    json_array_append_new(infos, mesos_task_info(&t));
    const char *offers[] = {"O1", "O2"};
    json_t *c = mesos_call_accept("F1", offers, 2, infos, 30);
    REQUIRE(c);
    struct mesos_call call;
    char err[256] = "";
    REQUIRE(mesos_call_parse(c, &call, err, sizeof err) == 0);
    const char *ids[4];
    int n = 0;
    CHECK_I64(mesos_call_offer_ids(call.body, ids, 4, &n, err, sizeof err), 0);
    CHECK_I64(n, 2);
    CHECK_STR(ids[1], "O2");
    CHECK(mesos_call_refuse_seconds(call.body) == 30);
    const json_t *op = json_array_get(json_object_get(call.body, "operations"), 0);
    CHECK_STR(json_string_value(json_object_get(op, "type")), "LAUNCH");
    const json_t *ti = json_array_get(json_object_get(json_object_get(op, "launch"), "task_infos"), 0);
    struct mesos_task_decl d;
    REQUIRE(mesos_task_info_parse(ti, &d, err, sizeof err) == 0);
    CHECK_STR(d.task_id, "t-1");
    CHECK_STR(d.agent_id, "S1");
    CHECK(d.res.cpus == 0.5 && d.res.mem == 64 && d.res.disk == 0);
    CHECK_STR(mesos_task_env(ti, "MESOS_SIM_RUN_SECONDS"), "3");
    CHECK_STR(mesos_task_label(ti, "peloton.io/run"), "1");
    CHECK(mesos_task_label(ti, "nope") == NULL);
    json_decref(c);
}

TEST(mesos_json_call_refusals) {
    static const struct { const char *text, *want; } cases[] = {
        {"[]", "Failed to convert JSON into Call protobuf"},
        {"{\"framework_id\":{\"value\":\"F\"}}", "Expecting 'type' to be present"},
        {"{\"type\":\"NOPE\"}", "unknown Call.Type"},
        {"{\"type\":7}", "'type' must be a string"},
        {"{\"type\":\"SUBSCRIBE\"}", "Expecting 'subscribe' to be present"},
        {"{\"type\":\"SUBSCRIBE\",\"subscribe\":{\"framework_info\":{\"name\":\"x\"}}}", "Missing required fields"},
        {"{\"type\":\"REVIVE\"}", "Expecting 'framework_id' to be present"},
        {"{\"type\":\"KILL\",\"framework_id\":{\"value\":\"F\"}}", "Expecting 'kill' to be present"},
        {"{\"type\":\"KILL\",\"framework_id\":{\"value\":\"F\"},\"kill\":{}}", "kill.task_id"},
        {"{\"type\":\"ACKNOWLEDGE\",\"framework_id\":{\"value\":\"F\"},\"acknowledge\":{\"agent_id\":{\"value\":\"S\"},"
         "\"task_id\":{\"value\":\"t\"},\"uuid\":\"abc\"}}", "Not a valid UUID"},
        {"{\"type\":\"DECLINE\",\"framework_id\":{\"value\":\"F\"},\"decline\":{\"offer_ids\":[{\"value\":1}]}}",
         "offer_ids[0]"},
        {"{\"type\":\"DECLINE\",\"framework_id\":{\"value\":\"F\"},\"decline\":{\"filters\":{\"refuse_seconds\":\"5\"}}}",
         "refuse_seconds"},
        {"{\"type\":\"RECONCILE\",\"framework_id\":{\"value\":\"F\"},\"reconcile\":{\"tasks\":[{}]}}", "task_id"},
        {"{\"type\":\"REVIVE\",\"framework_id\":{\"value\":7}}", "'framework_id'"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        struct mesos_call c;
        json_t *root;
        char err[256] = "";
        CHECK_I64(parse_text(cases[i].text, &c, &root, err, sizeof err), -1);
        CHECK_HAS(err, cases[i].want);
        json_decref(root);
    }
}

TEST(mesos_json_update_roundtrip_and_ack) {
    struct mesos_task_status s = {.task_id = "t-1", .agent_id = "S1", .state = MESOS_TASK_RUNNING,
                                  .source = MESOS_SOURCE_EXECUTOR, .timestamp = 1700000000.5, .has_uuid = true};
    for (int i = 0; i < MESOS_UUID_LEN; i++) s.uuid[i] = (unsigned char)(i * 17 + 3);
    json_t *e = mesos_event_update(&s);
    REQUIRE(e);
    struct mesos_event ev;
    char err[256] = "";
    REQUIRE(mesos_event_parse(e, &ev, err, sizeof err) == 0);
    CHECK_I64(ev.type, MESOS_EVENT_UPDATE);
    CHECK_I64(ev.status.state, MESOS_TASK_RUNNING);
    CHECK_I64(ev.status.source, MESOS_SOURCE_EXECUTOR);
    CHECK(ev.status.has_uuid && memcmp(ev.status.uuid, s.uuid, MESOS_UUID_LEN) == 0);
    /* the acknowledgement carries the uuid back and passes the master's checks */
    json_t *ack = mesos_call_acknowledge("F1", ev.status.agent_id, ev.status.task_id, ev.status.uuid_b64);
    struct mesos_call c;
    CHECK_I64(mesos_call_parse(ack, &c, err, sizeof err), 0);
    unsigned char u[MESOS_UUID_LEN];
    CHECK_I64(mesos_uuid_decode(json_string_value(json_object_get(c.body, "uuid")), u), 0);
    CHECK(memcmp(u, s.uuid, MESOS_UUID_LEN) == 0);
    json_decref(ack);
    json_decref(e);
    /* unpadded and URL-alphabet forms decode too; junk does not */
    CHECK_I64(mesos_uuid_decode("A-_AAAAAAAAAAAAAAAAAAA", u), 0);
    CHECK_I64(mesos_uuid_decode("AAAAAAAAAAAAAAAAAAAAAB==", u), -1); /* stray bits */
    CHECK_I64(mesos_uuid_decode("AAAA", u), -1);
}

TEST(mesos_json_offers_and_other_events) {
    struct mesos_attr attrs[] = {{"zone", "z1"}};
    struct mesos_offer_spec o = {.id = "O1", .framework_id = "F1", .agent_id = "S1", .hostname = "a1",
                                 .res = {.cpus = 2, .mem = 4096, .disk = 1000, .gpus = 1}, .attrs = attrs, .nattrs = 1};
    json_t *offers = json_array();
    json_array_append_new(offers, mesos_offer(&o));
    json_t *e = mesos_event_offers(offers);
    struct mesos_event ev;
    char err[256] = "";
    REQUIRE(mesos_event_parse(e, &ev, err, sizeof err) == 0);
    struct mesos_offer_decl d;
    REQUIRE(mesos_offer_parse(json_array_get(ev.offers, 0), &d, err, sizeof err) == 0);
    CHECK_STR(d.id, "O1");
    CHECK(d.res.cpus == 2 && d.res.mem == 4096 && d.res.disk == 1000 && d.res.gpus == 1);
    CHECK_STR(json_string_value(json_object_get(json_object_get(json_array_get(d.attributes, 0), "text"), "value")), "z1");
    json_decref(e);

    e = mesos_event_subscribed("F9", 15, "m1");
    REQUIRE(mesos_event_parse(e, &ev, err, sizeof err) == 0);
    CHECK_STR(ev.framework_id, "F9");
    CHECK(ev.heartbeat_seconds == 15);
    json_decref(e);
    e = mesos_event_rescind("O7");
    REQUIRE(mesos_event_parse(e, &ev, err, sizeof err) == 0);
    CHECK_STR(ev.offer_id, "O7");
    json_decref(e);
    e = mesos_event_error("Framework has been removed");
    REQUIRE(mesos_event_parse(e, &ev, err, sizeof err) == 0);
    CHECK_STR(ev.message, "Framework has been removed");
    json_decref(e);
    json_t *bad = json_loads("{\"type\":\"UPDATE\",\"update\":{\"status\":{\"task_id\":{\"value\":\"t\"},\"state\":\"TASK_NOPE\"}}}", 0, NULL);
    CHECK_I64(mesos_event_parse(bad, &ev, err, sizeof err), -1);
    json_decref(bad);
}

TEST(mesos_json_scalars_fixed_point) {
    struct mesos_scalars a = {.cpus = 0.1}, b = {.cpus = 0.3};
    struct mesos_scalars sum = {0};
    mesos_scalars_add(&sum, &a);
    mesos_scalars_add(&sum, &a);
    mesos_scalars_add(&sum, &a);
    CHECK(mesos_scalars_fit(&sum, &b)); /* 0.1 * 3 fits 0.3 in Mesos' fixed point */
    mesos_scalars_sub(&b, &sum);
    CHECK(b.cpus == 0);
    json_t *r = json_loads("[{\"name\":\"cpus\",\"type\":\"SCALAR\",\"scalar\":{\"value\":-1}}]", 0, NULL);
    char err[128];
    CHECK_I64(mesos_resources_parse(r, &a, NULL, err, sizeof err), -1);
    json_decref(r);
}

/* The ACKNOWLEDGE written as text (mesos_ack_members, what mclient_call_members
 * sends after framework_id) is byte for byte the tree mclient_call dumps. */
TEST(mesos_json_ack_text_is_the_tree) {
    const char *cases[][3] = {{"S1", "t-1", "AAECAwQFBgcICQoLDA0ODw=="},
                              {"agent \"q\" \\ é", "task\n\t1", NULL},
                              {"", "", ""}};
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        json_t *tree = mesos_call_acknowledge("F\"1", cases[i][0], cases[i][1], cases[i][2]);
        REQUIRE(tree);
        char *want = jdump(tree, JSON_COMPACT, NULL);
        REQUIRE(want);
        char *buf = NULL;
        size_t len = 0, cap = 0;
        REQUIRE(jdump_append(&buf, &len, &cap, "{\"framework_id\":{\"value\":\"F\\\"1\"},", 33) == 0);
        REQUIRE(mesos_ack_members(&buf, &len, &cap, cases[i][0], cases[i][1], cases[i][2]) == 0);
        REQUIRE(jdump_append(&buf, &len, &cap, "}", 1) == 0);
        CHECK_STR(buf, want);
        CHECK_I64(len, strlen(want));
        if (i == 0) { /* and the master takes it (the others are refused by its checks, as their trees are) */
            json_t *root = json_loads(buf, 0, NULL);
            struct mesos_call c;
            char err[256] = "";
            CHECK(root && mesos_call_parse(root, &c, err, sizeof err) == 0);
            json_decref(root);
        }
        free(buf);
        free(want);
        json_decref(tree);
    }
    char *buf = NULL;
    size_t len = 0, cap = 0;
    CHECK_I64(mesos_ack_members(&buf, &len, &cap, "S1", "bad \xff", "u"), -1); /* not UTF-8: refused */
    free(buf);
}
