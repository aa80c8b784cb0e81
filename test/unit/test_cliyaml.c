/* cliyaml.h: Peloton's YAML configs into messages by the descriptors: Go's
 * lowercased keys, proto and JSON names; scalars typed by their field;
 * enums by name or number; maps; and what is refused, with the line. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "cliyaml.h"
#include "mesos/v1/mesos.pb-c.h"
#include "peloton/api/v0/job/job.pb-c.h"
#include "peloton/api/v0/respool/respool.pb-c.h"
#include "peloton_c/test/alltypes.pb-c.h"
#include "test.h"

#define JOBCFG (&peloton__api__v0__job__job_config__descriptor)
#define POOLCFG (&peloton__api__v0__respool__resource_pool_config__descriptor)
#define ALLT (&peloton_c__test__all_types__descriptor)

static ProtobufCMessage *rd(const ProtobufCMessageDescriptor *d, const char *yaml, char *err, size_t errlen) {
    err[0] = 0;
    return cliyaml_to_msg(d, "t.yaml", yaml, strlen(yaml), err, errlen);
}

/* The error for yaml read as d ("" when it was accepted). */
static const char *refusal(const ProtobufCMessageDescriptor *d, const char *yaml) {
    static char err[512];
    ProtobufCMessage *m = rd(d, yaml, err, sizeof err);
    if (m) {
        protobuf_c_message_free_unpacked(m, NULL);
        return "";
    }
    return err;
}

TEST(cliyaml_peloton_job_yaml_with_go_lowercased_keys) {
    const char *y = "changelog: null\n"
                    "name: TestPelotonDockerJob_123\n"
                    "owningteam: team6\n"
                    "ldapgroups:\n- money\n- otto\n"
                    "description: \"A dummy test docker job\"\n"
                    "labels:\n- key: testKey0\n  value: testVal0\n"
                    "instancecount: 10\n"
                    "sla:\n  priority: 22\n  preemptible: false\n  minimum_running_instances: 2\n"
                    "defaultconfig:\n"
                    "  resource:\n    cpulimit: 0.1\n    memlimitmb: 2.0\n    disklimitmb: 10\n    fdlimit: 10\n"
                    "  healthcheck: null\n  ports: []\n"
                    "  container:\n    type: 1\n    docker:\n      image: \"debian\"\n"
                    "  command:\n    shell: true\n    value: 'echo Hello && sleep 300'\n"
                    "type: SERVICE\n"
                    "instanceConfig:\n  3:\n    name: third\n";
    char err[512];
    Peloton__Api__V0__Job__JobConfig *c = (void *)rd(JOBCFG, y, err, sizeof err);
    REQUIRE(c);
    CHECK_STR(c->name, "TestPelotonDockerJob_123");
    CHECK_STR(c->owningteam, "team6");
    REQUIRE_I64(c->n_ldapgroups, 2);
    CHECK_STR(c->ldapgroups[1], "otto");
    REQUIRE_I64(c->n_labels, 1);
    CHECK_STR(c->labels[0]->value, "testVal0");
    CHECK_I64(c->instancecount, 10);
    CHECK_I64(c->type, PELOTON__API__V0__JOB__JOB_TYPE__SERVICE);
    REQUIRE(c->sla);
    CHECK_I64(c->sla->priority, 22);
    CHECK_I64(c->sla->minimumrunninginstances, 2);
    REQUIRE(c->defaultconfig && c->defaultconfig->resource);
    CHECK(fabs(c->defaultconfig->resource->cpulimit - 0.1) < 1e-12);
    CHECK(fabs(c->defaultconfig->resource->disklimitmb - 10) < 1e-12);
    CHECK(c->defaultconfig->healthcheck == NULL);
    REQUIRE(c->defaultconfig->container && c->defaultconfig->container->docker);
    CHECK_I64(c->defaultconfig->container->type, MESOS__V1__CONTAINER_INFO__TYPE__DOCKER);
    CHECK_STR(c->defaultconfig->container->docker->image, "debian");
    REQUIRE(c->defaultconfig->command);
    CHECK(c->defaultconfig->command->has_shell && c->defaultconfig->command->shell);
    CHECK_STR(c->defaultconfig->command->value, "echo Hello && sleep 300");
    REQUIRE_I64(c->n_instanceconfig, 1);
    CHECK_I64(c->instanceconfig[0]->key, 3);
    CHECK_STR(c->instanceconfig[0]->value->name, "third");
    protobuf_c_message_free_unpacked(&c->base, NULL);
}

TEST(cliyaml_scalars_typed_by_their_field) {
    char err[512];
    /* a number where a string belongs is the string; yes/no are booleans */
    Peloton__Api__V0__Job__JobConfig *c =
        (void *)rd(JOBCFG, "name: 123\ndescription: yes\nsla: {preemptible: yes, revocable: off}\n", err, sizeof err);
    REQUIRE(c);
    CHECK_STR(c->name, "123");
    CHECK_STR(c->description, "yes");
    CHECK(c->sla->preemptible && !c->sla->revocable);
    protobuf_c_message_free_unpacked(&c->base, NULL);

    Peloton__Api__V0__Respool__ResourcePoolConfig *p = (void *)rd(
        POOLCFG, "resources:\n- {kind: cpu, reservation: 1, limit: .inf}\n- {kind: gpu, limit: -1.5e1}\npolicy: PriorityFIFO\n",
        err, sizeof err);
    REQUIRE(p);
    REQUIRE_I64(p->n_resources, 2);
    CHECK(isinf(p->resources[0]->limit) && p->resources[0]->limit > 0);
    CHECK(p->resources[1]->limit == -15);
    CHECK_I64(p->policy, 1);
    protobuf_c_message_free_unpacked(&p->base, NULL);

    PelotonC__Test__AllTypes *a =
        (void *)rd(ALLT, "u64: 18446744073709551615\ni64: -9007199254740993\nwhen: 2019-01-02T03:04:05Z\n"
                         "counts: {a: 1, b: 2}\nblob: aGk=\nchoice_num: 7\ncolor: 2\n",
                   err, sizeof err);
    REQUIRE(a);
    CHECK(a->u64 == 18446744073709551615ULL);
    CHECK_I64(a->i64, -9007199254740993LL);
    REQUIRE(a->when);
    CHECK_I64(a->when->seconds, 1546398245);
    CHECK_I64(a->n_counts, 2);
    CHECK(a->blob.len == 2 && !memcmp(a->blob.data, "hi", 2));
    CHECK_I64(a->choice_num, 7);
    CHECK_I64(a->color, PELOTON_C__TEST__COLOR__GREEN);
    protobuf_c_message_free_unpacked(&a->base, NULL);
}

TEST(cliyaml_refusals_name_the_line_and_field) {
    CHECK_STR(refusal(JOBCFG, "name: x\ninstancecount: three\n"),
              "t.yaml:2: instanceCount: expected a non-negative integer, got \"three\"");
    CHECK_STR(refusal(JOBCFG, "name: x\nsla:\n  prio: 1\n"), "t.yaml:3: sla: unknown field \"prio\" in SlaConfig");
    CHECK_STR(refusal(JOBCFG, "instanceCount: 4294967296\n"),
              "t.yaml:1: instanceCount: 4294967296 is out of range for an unsigned 32-bit integer");
    CHECK_STR(refusal(JOBCFG, "instanceCount: -1\n"),
              "t.yaml:1: instanceCount: expected a non-negative integer, got \"-1\"");
    CHECK_STR(refusal(JOBCFG, "instanceCount: 1\ninstance_count: 2\n"), "t.yaml:2: field \"instanceCount\" given twice");
    CHECK_HAS(refusal(JOBCFG, "type: BATCHY\n"), "t.yaml:1: type: unknown value \"BATCHY\" (one of BATCH, SERVICE, DAEMON)");
    CHECK_STR(refusal(JOBCFG, "sla: fast\n"), "t.yaml:1: sla: expected a mapping, got \"fast\"");
    CHECK_STR(refusal(JOBCFG, "name: [a]\n"), "t.yaml:1: name: expected a scalar, got a list");
    CHECK_STR(refusal(JOBCFG, "ldapGroups: team\n"), "t.yaml:1: ldapGroups: expected a list, got a scalar");
    CHECK_STR(refusal(JOBCFG, "ldapGroups:\n- a\n- ~\n"), "t.yaml:3: ldapGroups[1]: a list item cannot be null");
    CHECK_STR(refusal(JOBCFG, "defaultConfig:\n  resource:\n    cpuLimit: lots\n"),
              "t.yaml:3: defaultConfig.resource.cpuLimit: expected a number, got \"lots\"");
    CHECK_STR(refusal(JOBCFG, "defaultConfig:\n  resource:\n    cpuLimit: 0x10\n"),
              "t.yaml:3: defaultConfig.resource.cpuLimit: expected a number, got \"0x10\"");
    CHECK_STR(refusal(JOBCFG, "name: &a x\ndescription: *a\n"), "t.yaml:1: name: anchors (&name) are not supported");
    CHECK_STR(refusal(JOBCFG, "name: x\n---\nname: y\n"), "t.yaml:2: more than one document");
    CHECK_STR(refusal(JOBCFG, ""), "t.yaml:1: empty: expected a mapping of JobConfig's fields");
    CHECK_STR(refusal(JOBCFG, "- a\n"), "t.yaml:1: expected a mapping of JobConfig's fields, got a list");
    CHECK_STR(refusal(JOBCFG, "name: !!binary x\n"), "");
    CHECK_STR(refusal(JOBCFG, "name: !custom x\n"), "t.yaml:1: name: tag !custom is not supported");
    CHECK_HAS(refusal(JOBCFG, "name: [unclosed\nx: 1\n"), "t.yaml:");
    CHECK_STR(refusal(JOBCFG, "instanceConfig:\n  x:\n    name: a\n"),
              "t.yaml:2: instanceConfig.x: expected a non-negative integer, got \"x\"");
}

TEST(cliyaml_depth_and_size_bounded) {
    /* AllTypes.node.children nests without end: refused past the bound, no recursion blow-up */
    size_t n = 200;
    char *y = malloc(n * 24 + 64), *p = y;
    p += sprintf(p, "node: ");
    for (size_t i = 0; i < n; i++) p += sprintf(p, "{children: [");
    for (size_t i = 0; i < n; i++) p += sprintf(p, "]}");
    *p = 0;
    CHECK_HAS(refusal(ALLT, y), "nested deeper than");
    free(y);
    char err[128];
    CHECK(cliyaml_to_json(ALLT, "big", "a", CLIYAML_MAX_BYTES + 1, err, sizeof err) == NULL);
    CHECK_STR(err, "big: larger than 4194304 bytes");
}

/* What `job get` and `respool dump` print (cli_print_yaml) reads back as the
 * same values: strings YAML would take for something else are quoted. */
TEST(cliyaml_printed_yaml_reads_back) {
    const char *src =
        "{\"name\": \"yes\", \"description\": \"a: b # no comment\\nsecond line\", \"owner\": \"123\","
        " \"owningTeam\": \"\", \"ldapGroups\": [\"null\", \"-x\", \" lead\", \"tab\\tx\", \"\\u00fc\\u00f1\", \"[x]\","
        " \"a:b\", \"~\", \"1e3\", \"#c\", \"trail \", \"x\\u0001y\"],"
        " \"labels\": [{\"key\": \"k\", \"value\": \"on\"}, {\"key\": \"e\", \"value\": \"\"}], \"instanceCount\": 3,"
        " \"sla\": {\"priority\": 1, \"preemptible\": true}, \"type\": \"SERVICE\","
        " \"defaultConfig\": {\"resource\": {\"cpuLimit\": 0.1, \"memLimitMb\": 2.0}, \"ports\": []},"
        " \"instanceConfig\": {\"0\": {\"name\": \"zero\"}, \"12\": {\"name\": \"twelve\"}}}";
    json_error_t je;
    json_t *in = json_loads(src, 0, &je);
    REQUIRE(in);
    char *text = NULL, err[512];
    size_t n = 0;
    FILE *f = open_memstream(&text, &n);
    REQUIRE(f);
    cli_print_yaml(f, in, 0);
    fclose(f);
    json_t *back = cliyaml_to_json(JOBCFG, "printed", text, n, err, sizeof err);
    if (!back) test_fail(__FILE__, __LINE__, "%s\n%s", err, text);
    /* an empty list reads back as an empty list: drop it from both sides */
    json_object_del(json_object_get(in, "defaultConfig"), "ports");
    if (back) json_object_del(json_object_get(back, "defaultConfig"), "ports");
    if (back && !json_equal(in, back)) {
        char *b = json_dumps(back, 0);
        test_fail(__FILE__, __LINE__, "not the same after printing:\n%s\n%s", text, b);
        free(b);
    }
    CHECK_HAS(text, "cpuLimit: 0.1\n"); /* the shortest digits, not 0.10000000000000001 */
    json_decref(back);
    json_decref(in);
    free(text);
}

/* --skip-unknown: Peloton's Go CLI dropped keys its structs lacked; here
 * each is named on the stream, its whole value skipped, the rest read. */
TEST(cliyaml_skipping_unknown_fields) {
    const char *y = "name: x\n"
                    "sla:\n  minimuminstancecount: 12\n  priority: 3\n"
                    "volumes:\n- {a: 1, b: [2, {c: 3}]}\n- x\n"
                    "instancecount: 2\n";
    char *w = NULL, err[256];
    size_t n = 0;
    FILE *f = open_memstream(&w, &n);
    REQUIRE(f);
    json_t *j = cliyaml_to_json_skipping(JOBCFG, "t.yaml", y, strlen(y), f, err, sizeof err);
    fclose(f);
    REQUIRE(j);
    char *s = json_dumps(j, JSON_COMPACT);
    CHECK_STR(s, "{\"name\":\"x\",\"sla\":{\"priority\":3},\"instanceCount\":2}");
    CHECK_STR(w, "warning: t.yaml:3: sla: unknown field \"minimuminstancecount\" in SlaConfig skipped\n"
                 "warning: t.yaml:5: unknown field \"volumes\" in JobConfig skipped\n");
    free(s);
    free(w);
    json_decref(j);
    /* skipped values keep the bounds: an alias inside one is still refused */
    FILE *sink = fopen("/dev/null", "w");
    REQUIRE(sink);
    CHECK(cliyaml_to_json_skipping(JOBCFG, "t.yaml", "a: &x 1\nb: *x\n", 14, sink, err, sizeof err) == NULL);
    fclose(sink);
    CHECK_STR(err, "t.yaml:1: anchors (&name) are not supported");
}
