/* The CLI's argument checks that come before any call: instance ranges
 * (repeated -r joined, from below to), versions, batch sizes, percentages,
 * --wait-timeout. Each command line points at 127.0.0.1:1, where nothing
 * answers, so a refusal before the call is exit 2 and a line that reached
 * the call is exit 3. */
#include <fcntl.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "cli.h"
#include "test.h"

/* cli_main on the words (NULL-ended), its stderr and stdout silenced. */
static int run(const char *const *words) {
    char *argv[32];
    int argc = 0;
    argv[argc++] = (char *)"peloton";
    argv[argc++] = (char *)"-m";
    argv[argc++] = (char *)"127.0.0.1:1";
    argv[argc++] = (char *)"-t";
    argv[argc++] = (char *)"2s";
    for (; *words && argc < 31; words++) argv[argc++] = (char *)*words;
    argv[argc] = NULL;
    fflush(stdout);
    fflush(stderr);
    int null = open("/dev/null", O_WRONLY), e = dup(2), o = dup(1);
    dup2(null, 2);
    dup2(null, 1);
    int rc = cli_main(argc, argv);
    fflush(stdout);
    fflush(stderr);
    dup2(e, 2);
    dup2(o, 1);
    close(e);
    close(o);
    close(null);
    return rc;
}

#define RUN(...) run((const char *const[]){__VA_ARGS__, NULL})

TEST(cli_ranges_checked_before_the_call) {
    CHECK_I64(RUN("task", "restart", "j", "-r", "0:2"), CLI_UNREACHABLE);
    CHECK_I64(RUN("task", "restart", "j", "-r", "0:2", "-r", "4:6"), CLI_UNREACHABLE);
    CHECK_I64(RUN("task", "restart", "j", "-r", ":"), CLI_UNREACHABLE);
    /* the first of two -r is kept: joined, not replaced by the second */
    CHECK_I64(RUN("task", "restart", "j", "-r", "3:1", "-r", "0:2"), CLI_USAGE);
    CHECK_I64(RUN("task", "stop", "j", "-r", "3:1,0:2"), CLI_USAGE);
    CHECK_I64(RUN("task", "start", "j", "-r", "3:3"), CLI_USAGE);
    CHECK_I64(RUN("job", "stop", "j", "-r", "x:1"), CLI_USAGE);
    CHECK_I64(RUN("job", "restart", "j", "-r", "1"), CLI_USAGE);
    CHECK_I64(RUN("job", "restart", "j", "-r", "-1:2"), CLI_USAGE);
    CHECK_I64(RUN("job", "restart", "j", "-r", "0:99999999999999999999"), CLI_USAGE);
}

TEST(cli_versions_and_counts_checked_before_the_call) {
    CHECK_I64(RUN("job", "stop", "j", "--resourceVersion", "abc"), CLI_USAGE);
    CHECK_I64(RUN("job", "stop", "j", "--resourceVersion", "-1"), CLI_USAGE);
    CHECK_I64(RUN("job", "stop", "j", "--resourceVersion", "7"), CLI_UNREACHABLE);
    CHECK_I64(RUN("job", "start", "j", "many"), CLI_USAGE);
    CHECK_I64(RUN("job", "start", "j", "--wait", "--wait-timeout", "0"), CLI_USAGE);
    CHECK_I64(RUN("job", "stop", "j", "--progress", "--wait-timeout", "x"), CLI_USAGE);
    CHECK_I64(RUN("update", "create", "j", "/nonexistent.yaml", "many"), CLI_USAGE);
    CHECK_I64(RUN("update", "create", "j", "/nonexistent.yaml", "1", "--batch-percentage", "150"), CLI_USAGE);
    CHECK_I64(RUN("update", "create", "j", "/nonexistent.yaml", "1", "--maxattempts", "-2"), CLI_USAGE);
    CHECK_I64(RUN("update", "create", "j", "/nonexistent.yaml", "-c", "v3"), CLI_USAGE);
    CHECK_I64(RUN("update", "create", "j", "/nonexistent.yaml", "1", "pool-without-slash"), CLI_USAGE);
    CHECK_I64(RUN("update", "create", "j", "/nonexistent.yaml"), CLI_USAGE); /* the file */
    CHECK_I64(RUN("update", "get"), CLI_USAGE);
    CHECK_I64(RUN("update", "pause", "a", "b"), CLI_USAGE);
    CHECK_I64(RUN("update", "abort", "u-1"), CLI_UNREACHABLE);
}

/* cli_ranges's JSON for spec with count, or "bad:<part>" / "open". */
static const char *ranges(const char *spec, long long count) {
    static char buf[512];
    char bad[80];
    json_t *a = json_array();
    int k = cli_ranges(spec, count, a, bad, sizeof bad);
    if (k < 0) snprintf(buf, sizeof buf, "bad:%s", bad);
    else if (k > 0) snprintf(buf, sizeof buf, "open");
    else {
        char *s = json_dumps(a, JSON_COMPACT | JSON_SORT_KEYS);
        snprintf(buf, sizeof buf, "%s", s ? s : "");
        free(s);
    }
    json_decref(a);
    return buf;
}

TEST(cli_ranges_from_to) {
    CHECK_STR(ranges("0:2", -1), "[{\"from\":0,\"to\":2}]");
    CHECK_STR(ranges("0:2,4:6", -1), "[{\"from\":0,\"to\":2},{\"from\":4,\"to\":6}]");
    CHECK_STR(ranges(":3", -1), "[{\"from\":0,\"to\":3}]");
    CHECK_STR(ranges(":", -1), "[]");
    CHECK_STR(ranges("", -1), "[]");
    CHECK_STR(ranges(",,1:2,", -1), "[{\"from\":1,\"to\":2}]");
    /* an open end needs the job's count */
    CHECK_STR(ranges("1:2,3:", -1), "open");
    CHECK_STR(ranges("1:2,3:", 5), "[{\"from\":1,\"to\":2},{\"from\":3,\"to\":5}]");
    CHECK_STR(ranges("7:", 5), "[{\"from\":7,\"to\":5}]"); /* the server says it is past the job */
    CHECK_STR(ranges("0:4294967295", -1), "[{\"from\":0,\"to\":4294967295}]");
    CHECK_STR(ranges("3:1", -1), "bad:3:1");
    CHECK_STR(ranges("0:2,2:2", -1), "bad:2:2");
    CHECK_STR(ranges("1", -1), "bad:1");
    CHECK_STR(ranges("a:b", -1), "bad:a:b");
    CHECK_STR(ranges("-1:3", -1), "bad:-1:3");
    CHECK_STR(ranges("0:4294967296", -1), "bad:0:4294967296");
    CHECK_STR(ranges("0:1:2", -1), "bad:0:1:2");
}
