/* Integration tests of the Mesos framework client (src/mesos/mclient.c)
 * against mesos-master-sim (build/asan/mesos-master-sim, one per test,
 * started and stopped here on loopback; it must exit 0 under ASan).
 * Faults come from the sim's hooks: a dropped or black-holed stream, a
 * master failover with 307s, raw bytes injected into the stream. */
#include <curl/curl.h>
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "mclient.h"
#include "test.h"

extern char **environ;

#define SIM_BIN "build/asan/mesos-master-sim"

struct simproc {
    pid_t pid;
    int port, sport;
};

/* Starts the sim with flags (NULL-terminated) and reads its ports. */
static int sim_start(struct simproc *p, const char *const *flags) {
    int fds[2];
    if (pipe(fds)) return -errno;
    const char *argv[32] = {SIM_BIN, "--port=0", getenv("MSIM_VERBOSE") ? "--port=0" : "--quiet"};
    int n = 3;
    for (int i = 0; flags && flags[i] && n < 31; i++) argv[n++] = flags[i];
    argv[n] = NULL;
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, fds[1], 1);
    posix_spawn_file_actions_addclose(&fa, fds[0]);
    int rc = posix_spawn(&p->pid, SIM_BIN, &fa, NULL, (char *const *)argv, environ);
    posix_spawn_file_actions_destroy(&fa);
    close(fds[1]);
    if (rc) {
        close(fds[0]);
        return -rc;
    }
    char line[256] = "";
    size_t len = 0;
    struct pollfd pfd = {.fd = fds[0], .events = POLLIN};
    while (len < sizeof line - 1 && !strchr(line, '\n') && poll(&pfd, 1, 10000) > 0) {
        ssize_t r = read(fds[0], line + len, sizeof line - 1 - len);
        if (r <= 0) break;
        len += (size_t)r;
        line[len] = 0;
    }
    close(fds[0]);
    p->sport = -1;
    const char *s = strstr(line, "standby_port=");
    if (s) p->sport = atoi(s + 13);
    s = strstr(line, " port=");
    if (!s) {
        kill(p->pid, SIGKILL);
        waitpid(p->pid, NULL, 0);
        return -EIO;
    }
    p->port = atoi(s + 6);
    return 0;
}

/* SIGTERM, then the exit status (-1 when it had to be killed). */
static int sim_stop(struct simproc *p) {
    kill(p->pid, SIGTERM);
    for (int i = 0; i < 200; i++) {
        int st;
        if (waitpid(p->pid, &st, WNOHANG) == p->pid) return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
        usleep(50 * 1000);
    }
    kill(p->pid, SIGKILL);
    waitpid(p->pid, NULL, 0);
    return -1;
}

static size_t sink(char *d, size_t s, size_t n, void *ud) {
    (void)d, (void)ud;
    return s * n;
}

/* POST /sim/<name> with body; the HTTP status. */
static long hook(int port, const char *name, const char *body) {
    CURL *e = curl_easy_init();
    char url[128];
    snprintf(url, sizeof url, "http://127.0.0.1:%d/sim/%s", port, name);
    curl_easy_setopt(e, CURLOPT_URL, url);
    curl_easy_setopt(e, CURLOPT_POSTFIELDS, body);
    curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, sink);
    curl_easy_setopt(e, CURLOPT_TIMEOUT, 10L);
    long code = 0;
    if (curl_easy_perform(e) == CURLE_OK) curl_easy_getinfo(e, CURLINFO_RESPONSE_CODE, &code);
    curl_easy_cleanup(e);
    return code;
}

/* ---- the framework under test ---- */
struct app {
    uv_loop_t loop;
    struct mclient *c;
    int subscribed, lost, offers_events, calls_done, last_status;
    bool lost_final, auto_ack;
    char fid[MESOS_ID_MAX + 1], why[400], last_task_state[32], error[200];
    json_t *offers; /* the last OFFERS' offers */
    int running;
};

static void on_subscribed(void *ud, const char *fid) {
    struct app *a = ud;
    a->subscribed++;
    snprintf(a->fid, sizeof a->fid, "%s", fid);
}

static void on_lost(void *ud, const char *why, bool final) {
    struct app *a = ud;
    a->lost++;
    a->lost_final = final;
    snprintf(a->why, sizeof a->why, "%s", why);
}

static void on_call(void *ud, int status, const char *body) {
    struct app *a = ud;
    (void)body;
    a->calls_done++;
    a->last_status = status;
}

static void on_event(void *ud, const struct mesos_event *ev, const json_t *root) {
    struct app *a = ud;
    (void)root;
    if (ev->type == MESOS_EVENT_OFFERS) {
        a->offers_events++;
        json_decref(a->offers);
        a->offers = json_deep_copy(ev->offers);
    } else if (ev->type == MESOS_EVENT_UPDATE) {
        snprintf(a->last_task_state, sizeof a->last_task_state, "%s", mesos_task_state_name(ev->status.state));
        if (ev->status.state == MESOS_TASK_RUNNING) a->running++;
        if (a->auto_ack && ev->status.uuid_b64)
            mclient_call(a->c, mesos_call_acknowledge(NULL, ev->status.agent_id, ev->status.task_id, ev->status.uuid_b64),
                         NULL, NULL);
    } else if (ev->type == MESOS_EVENT_ERROR) {
        snprintf(a->error, sizeof a->error, "%s", ev->message);
    }
}

static void on_wake(uv_timer_t *t) { (void)t; }

/* Runs the loop until cond(a) or timeout_ms; whether cond held. */
static bool run_until(struct app *a, bool (*cond)(struct app *), int timeout_ms) {
    uv_timer_t wake;
    uv_timer_init(&a->loop, &wake);
    uv_timer_start(&wake, on_wake, 10, 10);
    uint64_t end = uv_now(&a->loop) + (uint64_t)timeout_ms;
    bool ok;
    while (!(ok = cond(a)) && uv_now(&a->loop) < end) uv_run(&a->loop, UV_RUN_ONCE);
    uv_close((uv_handle_t *)&wake, NULL);
    uv_run(&a->loop, UV_RUN_NOWAIT);
    return ok;
}

static bool is_subscribed(struct app *a) { return a->subscribed > 0 && mclient_subscribed(a->c); }
static bool has_offers(struct app *a) { return a->offers_events > 0; }
static bool twice_subscribed(struct app *a) { return a->subscribed >= 2 && mclient_subscribed(a->c); }
static bool one_running(struct app *a) { return a->running > 0; }
static bool is_final(struct app *a) { return a->lost_final; }
static bool call_done(struct app *a) { return a->calls_done > 0; }

static int app_start(struct app *a, int port, unsigned max_record, unsigned missed) {
    memset(a, 0, sizeof *a);
    uv_loop_init(&a->loop);
    char url[64];
    snprintf(url, sizeof url, "http://127.0.0.1:%d", port);
    const char *roles[] = {"*"}, *caps[] = {"PARTITION_AWARE", "TASK_KILLING_STATE", "GPU_RESOURCES", "MULTI_ROLE"};
    struct mclient_config cfg = {.master = url, .fi = {.user = "peloton", .name = "mclient-test", .roles = roles,
                                                        .nroles = 1, .capabilities = caps, .ncapabilities = 4,
                                                        .failover_timeout = 3600},
                                 .backoff_min_ms = 50, .backoff_max_ms = 400, .missed_heartbeats = missed,
                                 .subscribe_timeout_ms = 2000, .max_record = max_record,
                                 .on_subscribed = on_subscribed, .on_event = on_event, .on_lost = on_lost, .ud = a};
    char err[200];
    return mclient_start(&a->loop, &cfg, &a->c, err, sizeof err);
}

static void app_stop(struct app *a) {
    mclient_stop(a->c);
    uv_run(&a->loop, UV_RUN_DEFAULT);
    mclient_free(a->c);
    json_decref(a->offers);
    CHECK_I64(uv_loop_close(&a->loop), 0);
}

#define FAST "--allocation-interval-ms=50", "--heartbeat-seconds=0.3", "--update-retry-ms=300", "--agents=2"

/* Runs body against a fresh sim; checks the sim exits 0 (ASan clean). */
static void with_sim(const char *const *flags, void (*body)(struct simproc *)) {
    struct simproc p;
    if (sim_start(&p, flags)) {
        test_fail(__FILE__, __LINE__, "mesos-master-sim did not start (build it: make build/asan/mesos-master-sim)");
        return;
    }
    body(&p);
    CHECK_I64(sim_stop(&p), 0);
}

static void launch_body(struct simproc *p) {
    struct app a;
    REQUIRE(app_start(&a, p->port, 0, 0) == 0);
    /* before SUBSCRIBED there is no call to make */
    CHECK_I64(mclient_call(a.c, mesos_call_new(MESOS_CALL_REVIVE, NULL), NULL, NULL), -ENOTCONN);
    CHECK(run_until(&a, is_subscribed, 5000));
    CHECK(strlen(a.fid) > 0);
    CHECK(run_until(&a, has_offers, 5000));
    const json_t *o = json_array_get(a.offers, 0);
    struct mesos_offer_decl od;
    char err[200];
    REQUIRE(mesos_offer_parse(o, &od, err, sizeof err) == 0);
    struct mesos_task_spec t = {.name = "t", .task_id = "mc-1", .agent_id = od.agent_id, .res = {.cpus = 1, .mem = 128},
                                .command = "sleep 100"};
    json_t *infos = json_array();
    json_array_append_new(infos, mesos_task_info(&t));
    a.auto_ack = true;
    CHECK_I64(mclient_call(a.c, mesos_call_accept(NULL, &od.id, 1, infos, 5), on_call, &a), 0);
    CHECK(run_until(&a, call_done, 5000));
    CHECK_I64(a.last_status, 202);
    CHECK(run_until(&a, one_running, 5000));
    struct mclient_stats st;
    mclient_get_stats(a.c, &st);
    CHECK_I64(st.subscribes, 1);
    CHECK_I64(st.stream_errors, 0);
    CHECK(st.calls >= 3); /* the accept and two acknowledgements */
    app_stop(&a);
}

TEST(mclient_subscribe_launch_acknowledge) {
    static const char *const flags[] = {FAST, NULL};
    with_sim(flags, launch_body);
}

static int revives_ok;
static void on_revive(void *ud, int status, const char *body) {
    struct app *a = ud;
    (void)body;
    a->calls_done++;
    if (status == 202) revives_ok++;
}
static bool all_calls_done(struct app *a) { return a->calls_done >= 300; }

static void many_calls_body(struct simproc *p) {
    struct app a;
    REQUIRE(app_start(&a, p->port, 0, 0) == 0);
    REQUIRE(run_until(&a, is_subscribed, 5000));
    revives_ok = 0;
    for (int i = 0; i < 300; i++) /* more than the client hands to libcurl at once */
        CHECK_I64(mclient_call(a.c, mesos_call_new(MESOS_CALL_REVIVE, NULL), on_revive, &a), 0);
    CHECK(run_until(&a, all_calls_done, 10000));
    CHECK_I64(revives_ok, 300);
    /* calls still waiting at stop are answered -ECANCELED */
    a.calls_done = 0;
    for (int i = 0; i < 100; i++) mclient_call(a.c, mesos_call_new(MESOS_CALL_REVIVE, NULL), on_call, &a);
    mclient_stop(a.c);
    CHECK_I64(a.calls_done, 100);
    CHECK_I64(a.last_status, -ECANCELED);
    app_stop(&a);
}

TEST(mclient_many_calls_wait_in_line) {
    static const char *const flags[] = {FAST, NULL};
    with_sim(flags, many_calls_body);
}

static void drop_body(struct simproc *p) {
    struct app a;
    REQUIRE(app_start(&a, p->port, 0, 0) == 0);
    REQUIRE(run_until(&a, is_subscribed, 5000));
    char fid[MESOS_ID_MAX + 1], body[400];
    snprintf(fid, sizeof fid, "%s", a.fid);
    snprintf(body, sizeof body, "{\"framework_id\":\"%s\"}", fid);
    CHECK_I64(hook(p->port, "drop-stream", body), 200);
    CHECK(run_until(&a, twice_subscribed, 5000));
    CHECK_STR(a.fid, fid); /* the same framework */
    CHECK_I64(a.lost, 1);
    CHECK(!a.lost_final);
    app_stop(&a);
}

TEST(mclient_resubscribes_as_the_same_framework) {
    static const char *const flags[] = {FAST, NULL};
    with_sim(flags, drop_body);
}

static void failover_body(struct simproc *p) {
    struct app a;
    REQUIRE(app_start(&a, p->sport, 0, 0) == 0); /* pointed at the standby: a 307 to the leader */
    REQUIRE(run_until(&a, is_subscribed, 5000));
    char want[64];
    snprintf(want, sizeof want, "http://127.0.0.1:%d", p->port);
    CHECK_STR(mclient_leader(a.c), want);
    char fid[MESOS_ID_MAX + 1];
    snprintf(fid, sizeof fid, "%s", a.fid);
    CHECK_I64(hook(p->port, "failover", "{}"), 200);
    /* a call made before the client noticed goes to the old leader: 307 */
    CHECK_I64(mclient_call(a.c, mesos_call_new(MESOS_CALL_REVIVE, NULL), on_call, &a), 0);
    CHECK(run_until(&a, call_done, 5000));
    CHECK_I64(a.last_status, 307);
    CHECK(run_until(&a, twice_subscribed, 8000));
    snprintf(want, sizeof want, "http://127.0.0.1:%d", p->sport);
    CHECK_STR(mclient_leader(a.c), want);
    CHECK_STR(a.fid, fid);
    struct mclient_stats st;
    mclient_get_stats(a.c, &st);
    CHECK(st.redirects >= 2);
    app_stop(&a);
}

TEST(mclient_follows_redirects_across_a_master_failover) {
    static const char *const flags[] = {FAST, "--standby-port=0", NULL};
    with_sim(flags, failover_body);
}

static bool two_calls_done(struct app *a) { return a->calls_done >= 2; }

static void idle_close_body(struct simproc *p) {
    struct app a;
    REQUIRE(app_start(&a, p->port, 0, 0) == 0);
    REQUIRE(run_until(&a, is_subscribed, 5000));
    CHECK_I64(mclient_call(a.c, mesos_call_new(MESOS_CALL_REVIVE, NULL), on_call, &a), 0);
    CHECK(run_until(&a, call_done, 5000));
    CHECK_I64(a.last_status, 202);
    /* the loop stands still while the master closes the idle kept-alive connection: the next call
     * is queued on it before the client reads the end, and is sent again on a new connection */
    usleep(2500 * 1000);
    CHECK_I64(mclient_call(a.c, mesos_call_new(MESOS_CALL_REVIVE, NULL), on_call, &a), 0);
    CHECK(run_until(&a, two_calls_done, 5000));
    CHECK_I64(a.last_status, 202);
    struct mclient_stats st;
    mclient_get_stats(a.c, &st);
    CHECK_I64(st.call_errors, 0);
    CHECK_I64(a.lost, 0);
    app_stop(&a);
}

TEST(mclient_call_after_the_master_closed_an_idle_connection) {
    static const char *const flags[] = {FAST, "--heartbeat-seconds=5", "--conn-idle-ms=100", NULL};
    with_sim(flags, idle_close_body);
}

static void watchdog_body(struct simproc *p) {
    struct app a;
    REQUIRE(app_start(&a, p->port, 0, 2) == 0); /* 3 intervals of 0.3 s without an event */
    REQUIRE(run_until(&a, is_subscribed, 5000));
    char body[400];
    snprintf(body, sizeof body, "{\"framework_id\":\"%s\",\"seconds\":30}", a.fid);
    CHECK_I64(hook(p->port, "stall", body), 200);
    CHECK(run_until(&a, twice_subscribed, 5000));
    struct mclient_stats st;
    mclient_get_stats(a.c, &st);
    CHECK_I64(st.heartbeat_timeouts, 1);
    CHECK_HAS(a.why, "no event for");
    app_stop(&a);
}

TEST(mclient_heartbeat_watchdog_resubscribes) {
    static const char *const flags[] = {FAST, NULL};
    with_sim(flags, watchdog_body);
}

static struct simproc *bad_sim;

/* Injects data into the stream, then (end) ends the stream cleanly or
 * (cut) cuts the connection; the client must lose the stream with want in
 * its reason (counted as a stream error unless cut), and subscribe again. */
static void inject_and_expect(struct app *a, const char *data, bool end, bool cut, const char *want) {
    char body[600];
    json_t *j = json_pack("{s:s,s:s,s:b}", "framework_id", a->fid, "data", data, "end", end);
    char *text = json_dumps(j, JSON_COMPACT);
    snprintf(body, sizeof body, "%s", text);
    free(text);
    json_decref(j);
    int before = a->subscribed;
    struct mclient_stats s0, s1;
    mclient_get_stats(a->c, &s0);
    CHECK_I64(hook(bad_sim->port, "inject", body), 200);
    if (cut) {
        run_until(a, is_final, 200); /* let the bytes arrive first */
        snprintf(body, sizeof body, "{\"framework_id\":\"%s\"}", a->fid);
        CHECK_I64(hook(bad_sim->port, "drop-stream", body), 200);
    }
    uint64_t deadline = uv_now(&a->loop) + 5000;
    while (!(a->subscribed > before && mclient_subscribed(a->c)) && uv_now(&a->loop) < deadline) run_until(a, is_final, 20);
    CHECK(a->subscribed > before);
    mclient_get_stats(a->c, &s1);
    CHECK_I64(s1.stream_errors, s0.stream_errors + (cut ? 0 : 1));
    CHECK_HAS(a->why, want);
}

static void bad_body(struct simproc *p) {
    struct app a;
    bad_sim = p;
    REQUIRE(app_start(&a, p->port, 1000, 0) == 0); /* records of at most 1000 bytes */
    REQUIRE(run_until(&a, is_subscribed, 5000));
    inject_and_expect(&a, "x1\n", false, false, "malformed record length");
    inject_and_expect(&a, "1001\n", false, false, "bound of 1000 bytes");
    inject_and_expect(&a, "3\n{{{", false, false, "not JSON");
    inject_and_expect(&a, "9\n[1,2,3,4]", false, false, "event:");
    inject_and_expect(&a, "13\n{\"type\":\"NO\"}", false, false, "unknown 'type'");
    inject_and_expect(&a, "50\n{\"type\":", true, false, "stream ended inside a record (8 of 50 bytes)");
    inject_and_expect(&a, "50\n{\"type\":", false, true, "inside a record: 8 of 50 bytes");
    CHECK(!a.lost_final);
    app_stop(&a);
}

TEST(mclient_bad_recordio_and_bad_events_drop_the_stream) {
    /* no agents: no offers come in between to fill a record cut short */
    static const char *const flags[] = {FAST, "--heartbeat-seconds=15", "--agents=0", NULL};
    with_sim(flags, bad_body);
}

static void teardown_body(struct simproc *p) {
    struct app a;
    REQUIRE(app_start(&a, p->port, 0, 0) == 0);
    REQUIRE(run_until(&a, is_subscribed, 5000));
    CHECK_I64(mclient_call(a.c, mesos_call_new(MESOS_CALL_TEARDOWN, NULL), on_call, &a), 0);
    /* the stream ends, the client comes back, the master refuses it with ERROR: final */
    CHECK(run_until(&a, is_final, 5000));
    CHECK_STR(a.error, "Framework has been removed");
    CHECK_HAS(a.why, "Framework has been removed");
    struct mclient_stats s0, s1;
    mclient_get_stats(a.c, &s0);
    run_until(&a, twice_subscribed, 600); /* nothing should happen */
    mclient_get_stats(a.c, &s1);
    CHECK_I64(s1.subscribes, s0.subscribes);
    CHECK(!mclient_subscribed(a.c));
    app_stop(&a);
}

TEST(mclient_error_event_is_final) {
    static const char *const flags[] = {FAST, NULL};
    with_sim(flags, teardown_body);
}

TEST(mclient_redirect_base_resolves_locations) {
    char out[MCLIENT_URL_MAX];
    CHECK_I64(mclient_redirect_base("http://a:1", "//b:2/api/v1/scheduler", out, sizeof out), 0);
    CHECK_STR(out, "http://b:2");
    CHECK_I64(mclient_redirect_base("https://a:1", "//b:2/master/api/v1/scheduler", out, sizeof out), 0);
    CHECK_STR(out, "https://b:2");
    CHECK_I64(mclient_redirect_base("http://a:1", "http://c:3/x?y", out, sizeof out), 0);
    CHECK_STR(out, "http://c:3");
    CHECK_I64(mclient_redirect_base("http://a:1", "/api/v1/scheduler", out, sizeof out), 0);
    CHECK_STR(out, "http://a:1");
    CHECK_I64(mclient_redirect_base("http://a:1", "ftp://x/", out, sizeof out), -1);
    CHECK_I64(mclient_redirect_base("http://a:1", "//", out, sizeof out), -1);
    CHECK_I64(mclient_redirect_base("http://a:1", "//hhhhhhhhhh:1/", out, 8), -1);
}
