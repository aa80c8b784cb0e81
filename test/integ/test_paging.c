/* Paged lists and informers against churn (issue #25): the project's real API
 * server and redis-server (apisrv_fixture.h), a thread that renews leases as
 * fast as Redis takes them (the asynchronous store, 32 writes in flight), and
 * a client that reads the leases in small pages, slowly. With the history
 * kept by time (docs/store.md) the list's continue token outlives far more
 * writes than the old 10,000-entry history held, so the list completes; an
 * informer lists, watches and re-lists under the same churn and becomes
 * current without a 410. Every wait is bounded. */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "apisrv_fixture.h"
#include "kclient.h"
#include "store.h"
#include "test.h"

#define LEASES "leases.coordination.k8s.io"
#define LEASE_PATH "/apis/coordination.k8s.io/v1/namespaces/default/leases"
#define NLEASES 3000
#define CHURN_INFLIGHT 32
#define CHURN_BEFORE_PAGES 12000 /* writes between the first page and the rest: more than the old history */

static double now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static json_t *lease(const char *name) {
    return json_pack("{s:s, s:s, s:{s:s}, s:{s:s, s:i, s:s}}", "apiVersion", "coordination.k8s.io/v1", "kind",
                     "Lease", "metadata", "name", name, "spec", "holderIdentity", name, "leaseDurationSeconds", 40,
                     "renewTime", "2026-01-01T00:00:00.000000Z");
}

/* NLEASES leases lease-0.. in default, straight into the store. */
static int seed_leases(struct store *st) {
    enum { BATCH = 500 };
    json_t *objs[BATCH];
    int rcs[BATCH];
    for (int base = 0; base < NLEASES; base += BATCH) {
        for (int i = 0; i < BATCH; i++) {
            char name[32];
            snprintf(name, sizeof name, "lease-%d", base + i);
            objs[i] = lease(name);
        }
        int rc = store_create_many(st, LEASES, "default", objs, BATCH, rcs, NULL);
        for (int i = 0; i < BATCH; i++) {
            if (!rc && rcs[i]) rc = rcs[i];
            json_decref(objs[i]);
        }
        if (rc) return rc;
    }
    return 0;
}

/* ---- the churn: lease renewals on a thread of their own ---- */

struct churn {
    int port;
    pthread_t th;
    atomic_bool stop;
    atomic_long writes, failed;
    int ready; /* 1 running, -1 could not connect */
    uv_loop_t loop;
    struct store_async *a;
    int inflight;
    unsigned next;
};

static int renew(void *ud, const json_t *cur, json_t **next, char *err, size_t errlen) {
    (void)err, (void)errlen;
    struct churn *ch = ud;
    json_t *o = json_deep_copy(cur);
    if (!o) return -ENOMEM;
    char t[64];
    long n = atomic_load(&ch->writes);
    snprintf(t, sizeof t, "2026-01-01T00:%02ld:%02ld.%06ldZ", n / 60 % 60, n % 60, n % 1000000);
    json_object_set_new(json_object_get(o, "spec"), "renewTime", json_string(t));
    *next = o;
    return 0;
}

static void churn_more(struct churn *ch);

static void renewed(void *ud, const struct store_result *r) {
    struct churn *ch = ud;
    ch->inflight--;
    atomic_fetch_add(r->rc ? &ch->failed : &ch->writes, 1);
    churn_more(ch);
}

static void churn_more(struct churn *ch) {
    while (!atomic_load(&ch->stop) && ch->inflight < CHURN_INFLIGHT) {
        char name[32], err[256];
        snprintf(name, sizeof name, "lease-%u", ch->next++ % NLEASES);
        if (store_async_modify(ch->a, LEASES, "default", name, renew, ch, renewed, ch, err, sizeof err)) {
            atomic_fetch_add(&ch->failed, 1);
            return;
        }
        ch->inflight++;
    }
}

static void *churn_main(void *arg) {
    struct churn *ch = arg;
    uv_loop_init(&ch->loop);
    if (store_async_open(&ch->loop, "127.0.0.1", ch->port, NULL, &ch->a)) {
        ch->ready = -1;
        uv_loop_close(&ch->loop);
        return NULL;
    }
    ch->ready = 1;
    churn_more(ch);
    while (ch->inflight > 0) uv_run(&ch->loop, UV_RUN_ONCE); /* every write is answered or fails (timeout) */
    store_async_close(ch->a);
    for (int i = 0; i < 100 && uv_loop_close(&ch->loop) == UV_EBUSY; i++) uv_run(&ch->loop, UV_RUN_NOWAIT);
    return NULL;
}

static int churn_start(struct churn *ch, int port) {
    memset(ch, 0, sizeof *ch);
    ch->port = port;
    atomic_init(&ch->stop, false);
    atomic_init(&ch->writes, 0);
    atomic_init(&ch->failed, 0);
    if (pthread_create(&ch->th, NULL, churn_main, ch)) return -1;
    double end = now_ms() + 10000;
    while (atomic_load(&ch->writes) < 100 && now_ms() < end) usleep(10000);
    return atomic_load(&ch->writes) >= 100 ? 0 : -1;
}

static void churn_stop(struct churn *ch) {
    atomic_store(&ch->stop, true);
    pthread_join(ch->th, NULL);
}

/* Waits (bounded) until the churn wrote n more times than at from. */
static bool churn_wait(struct churn *ch, long from, long n, unsigned ms) {
    double end = now_ms() + ms;
    while (atomic_load(&ch->writes) - from < n && now_ms() < end) usleep(20000);
    return atomic_load(&ch->writes) - from >= n;
}

/* ---- the client ---- */

struct env {
    uv_loop_t loop;
    struct kclient *c;
};

static int env_init(struct env *e, const char *url) {
    memset(e, 0, sizeof *e);
    uv_loop_init(&e->loop);
    struct kc_config cfg = {0};
    char err[256];
    if (kc_config_from_url(url, NULL, &cfg, err, sizeof err)) return -1;
    e->c = kclient_new(&e->loop, &cfg, err, sizeof err);
    kc_config_free(&cfg);
    return e->c ? 0 : -1;
}

static void env_done(struct env *e) {
    kclient_free(e->c);
    for (int i = 0; i < 200 && uv_loop_close(&e->loop) == UV_EBUSY; i++) uv_run(&e->loop, UV_RUN_NOWAIT);
}

/* Runs the client's loop until pred(arg) or ms pass. */
static bool run_until(struct env *e, bool (*pred)(void *), void *arg, unsigned ms) {
    double end = now_ms() + ms;
    while (!pred(arg) && now_ms() < end) uv_run(&e->loop, UV_RUN_NOWAIT), usleep(1000);
    return pred(arg);
}

static bool never(void *arg) { return (void)arg, false; }

/* One page: the HTTP status; names go into seen (counting duplicates), the
 * continue token into cont ("" at the end). */
static long list_page(struct env *e, const char *cont, int limit, json_t *seen, int *dups, char *next,
                      size_t nextlen, char *err, size_t errlen) {
    char path[4096 + 256];
    int n = snprintf(path, sizeof path, "%s?limit=%d", LEASE_PATH, limit);
    if (cont && *cont) {
        n += snprintf(path + n, sizeof path - (size_t)n, "&continue=");
        kc_escape(cont, path + n, sizeof path - (size_t)n);
    }
    json_t *body = NULL;
    long st = kclient_request_sync(e->c, "GET", path, NULL, NULL, &body, err, errlen);
    next[0] = 0;
    if (st == 200) {
        size_t i;
        json_t *it;
        json_array_foreach(json_object_get(body, "items"), i, it) {
            const char *name = json_string_value(json_object_get(json_object_get(it, "metadata"), "name"));
            if (!name) continue;
            if (json_object_get(seen, name)) (*dups)++;
            json_object_set_new(seen, name, json_true());
        }
        const char *c = json_string_value(json_object_get(json_object_get(body, "metadata"), "continue"));
        snprintf(next, nextlen, "%s", c ? c : "");
    } else if (body) {
        const char *msg = json_string_value(json_object_get(body, "message"));
        snprintf(err, errlen, "%s", msg ? msg : "");
    }
    json_decref(body);
    return st;
}

/* A list of 3,000 leases in pages of 50 (60 pages), the first page taken
 * and then more than 12,000 renewals (the old 10,000-entry history, and more)
 * before the other pages, each a few milliseconds apart: every page answers
 * 200 and the list is whole, without duplicates. It failed with "410 The
 * provided continue parameter is too old" before history was kept by time. */
TEST(paging_list_outlasts_churn) {
    struct apisrv s;
    REQUIRE(apisrv_start(&s, NULL) == 0);
    struct env e;
    struct churn ch;
    json_t *seen = json_object();
    if (seed_leases(s.rf.store) || env_init(&e, s.url)) {
        test_fail(__FILE__, __LINE__, "seed or client");
        apisrv_stop(&s);
        json_decref(seen);
        return;
    }
    if (churn_start(&ch, s.rf.proc.port)) {
        test_fail(__FILE__, __LINE__, "churn did not start");
        churn_stop(&ch);
        env_done(&e);
        apisrv_stop(&s);
        json_decref(seen);
        return;
    }
    char cont[4096], err[256];
    int dups = 0, pages = 0;
    double t0 = now_ms();
    long st = list_page(&e, NULL, 50, seen, &dups, cont, sizeof cont, err, sizeof err);
    CHECK_I64(st, 200);
    pages++;
    long w0 = atomic_load(&ch.writes);
    CHECK(churn_wait(&ch, w0, CHURN_BEFORE_PAGES, 60000));
    while (st == 200 && cont[0] && pages < 200) {
        run_until(&e, never, NULL, 5); /* slowly */
        st = list_page(&e, cont, 50, seen, &dups, cont, sizeof cont, err, sizeof err);
        pages++;
    }
    long writes = atomic_load(&ch.writes) - w0;
    fprintf(stderr, "  paging: %d pages in %.0f ms, %ld renewals during the list (%ld failed), last status %ld %s\n",
            pages, now_ms() - t0, writes, (long)atomic_load(&ch.failed), st, st == 200 ? "" : err);
    CHECK_I64(st, 200);
    CHECK_I64(pages, NLEASES / 50);
    CHECK_I64(json_object_size(seen), NLEASES);
    CHECK_I64(dups, 0);
    CHECK(writes >= CHURN_BEFORE_PAGES);
    churn_stop(&ch);
    CHECK_I64(atomic_load(&ch.failed), 0);
    json_decref(seen);
    env_done(&e);
    apisrv_stop(&s);
}

struct irec {
    int synced;
};
static void on_synced(void *ud) { ((struct irec *)ud)->synced++; }
static bool is_current(void *arg) { return kc_informer_current(arg); }
static bool is_not_current(void *arg) { return !kc_informer_current(arg); }
struct rv_watch {
    struct kc_informer *inf;
    unsigned long long rv0;
};
static bool rv_moved(void *arg) {
    struct rv_watch *w = arg;
    return strtoull(kc_informer_rv(w->inf), NULL, 10) > w->rv0;
}

/* A transform that takes a millisecond per object while the informer is
 * not current: a list (3 s for 3,000 leases) outlasts more renewals than the
 * old history held; watch events, once current, pass at full speed. */
static struct kc_informer *slow_inf;
static void slow_while_listing(json_t *obj) {
    (void)obj;
    if (slow_inf && !kc_informer_current(slow_inf)) usleep(1000);
}

/* An informer of the 3,000 leases lists them slowly (pages of 500), watches,
 * and after its API server restarts re-lists, all under the churn: it
 * becomes current each time with one list each (no 410, no re-list loop)
 * and stays current, sees all the leases, and follows the renewals. Before
 * history was kept by time, its paged list failed 410, its unpaged list
 * then succeeded, and the watch from that list's version failed 410: a
 * re-list loop. */
TEST(paging_informer_relists_under_churn) {
    struct apisrv s;
    REQUIRE(apisrv_start(&s, NULL) == 0);
    struct env e;
    struct churn ch;
    if (seed_leases(s.rf.store) || env_init(&e, s.url)) {
        test_fail(__FILE__, __LINE__, "seed or client");
        apisrv_stop(&s);
        return;
    }
    if (churn_start(&ch, s.rf.proc.port)) {
        test_fail(__FILE__, __LINE__, "churn did not start");
        churn_stop(&ch);
        env_done(&e);
        apisrv_stop(&s);
        return;
    }
    struct irec r = {0};
    struct kc_informer_handlers h = {.on_synced = on_synced};
    struct kc_informer_opts o = {.transform = slow_while_listing};
    struct kc_informer *inf = kc_informer_new_opts(e.c, LEASE_PATH, NULL, &o, &h, &r);
    REQUIRE(inf);
    slow_inf = inf;
    CHECK_I64(kc_informer_start(inf), 0);
    double t0 = now_ms();
    CHECK(run_until(&e, is_current, inf, 30000));
    fprintf(stderr, "  paging: informer current in %.0f ms under churn, %ld renewals\n", now_ms() - t0,
            (long)atomic_load(&ch.writes));
    /* it follows (its resourceVersion moves with the renewals) and stays current */
    struct rv_watch rw = {inf, strtoull(kc_informer_rv(inf), NULL, 10)};
    CHECK(run_until(&e, rv_moved, &rw, 15000));
    run_until(&e, is_not_current, inf, 1500);
    CHECK(kc_informer_current(inf));
    CHECK_I64(kc_informer_lists(inf), 1);
    CHECK_I64(kc_informer_count(inf), NLEASES);
    /* the API server goes and comes back: the informer re-lists under churn */
    int port = s.port;
    apisrv_kill(&s, SIGKILL);
    CHECK(run_until(&e, is_not_current, inf, 10000));
    CHECK(apisrv_spawn(&s, port, NULL) == 0);
    t0 = now_ms();
    CHECK(run_until(&e, is_current, inf, 30000));
    fprintf(stderr, "  paging: re-listed and current in %.0f ms, %u lists in all, %ld renewals\n", now_ms() - t0,
            kc_informer_lists(inf), (long)atomic_load(&ch.writes));
    run_until(&e, is_not_current, inf, 1500);
    CHECK(kc_informer_current(inf));
    CHECK_I64(kc_informer_lists(inf), 2);
    CHECK_I64(kc_informer_count(inf), NLEASES);
    CHECK(kc_informer_fresh(inf, 5000));
    CHECK_I64(r.synced, 1);
    churn_stop(&ch);
    slow_inf = NULL;
    kc_informer_free(inf);
    env_done(&e);
    apisrv_stop(&s);
}
