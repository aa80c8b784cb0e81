/* Integration tests of store_ttl_scan (the Event TTL's scan, store.h)
 * against a real redis-server: nothing is past the TTL until the counter's
 * marks are that old; then exactly the objects whose last write is older,
 * not one written since; pages bounded by max with a cursor that ends a
 * pass; one lease holder at a time, taken over once it lapses; bad
 * arguments refused. */
#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <uv.h>

#include "redis_fixture.h"
#include "store.h"
#include "test.h"

static void sleep_ms(long ms) {
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

static int make_event(struct store *s, const char *name) {
    json_t *o = json_pack("{s:s, s:s, s:{s:s}, s:s}", "apiVersion", "v1", "kind", "Event", "metadata", "name", name,
                          "reason", "Tested");
    int rc = store_create(s, "events", "default", o, NULL);
    json_decref(o);
    return rc;
}

static bool named(const struct store_ttl_page *p, const char *member) {
    for (size_t i = 0; i < p->n; i++)
        if (!strcmp(p->members[i], member)) return true;
    return false;
}

TEST(store_ttl_scan_names_only_what_is_past_the_ttl) {
    struct redis_fixture f;
    CHECK(redis_fixture_start(&f, NULL) == 0);
    struct store *s = f.store;
    CHECK(make_event(s, "e1") == 0 && make_event(s, "e2") == 0 && make_event(s, "e3") == 0);
    struct store_ttl_page p;
    CHECK(store_ttl_scan(s, "events", "a", 10000, 1, "", 2, &p) == 0);
    CHECK(p.owner && p.threshold_rv == 0 && p.n == 0 && !p.next); /* no mark is a second old yet */
    store_ttl_page_free(&p);
    /* once a mark is older than the TTL (1 s) and its second: every Event so far */
    bool old = false;
    for (int i = 0; i < 50 && !old; i++) {
        sleep_ms(100);
        CHECK(store_ttl_scan(s, "events", "a", 10000, 1, "", 2, &p) == 0);
        old = p.threshold_rv > 0;
        if (!old) store_ttl_page_free(&p);
    }
    CHECK(old);
    /* a page of at most 2, in key order, with the cursor to go on */
    CHECK(p.scanned == 2 && p.n == 2 && named(&p, "default/e1") && named(&p, "default/e2"));
    CHECK(p.next && !strcmp(p.next, "default/e2"));
    uint64_t thr = p.threshold_rv;
    store_ttl_page_free(&p);
    /* e3 written again now: its version is above the threshold, not past the TTL */
    json_t *cur = NULL;
    CHECK(store_get(s, "events", "default", "e3", &cur) == 0);
    json_object_set_new(cur, "reason", json_string("Again"));
    json_t *out = NULL;
    CHECK(store_update(s, "events", "default", cur, &out, NULL) == 0);
    json_decref(cur);
    json_decref(out);
    CHECK(store_ttl_scan(s, "events", "a", 10000, 1, "default/e2", 2, &p) == 0);
    CHECK(p.threshold_rv == thr && p.scanned == 1 && p.n == 0 && !p.next); /* the pass ends */
    store_ttl_page_free(&p);
    redis_fixture_stop(&f);
}

TEST(store_ttl_scan_one_lease_holder) {
    struct redis_fixture f;
    CHECK(redis_fixture_start(&f, NULL) == 0);
    struct store *s = f.store;
    struct store_ttl_page p;
    CHECK(store_ttl_scan(s, "events", "a", 300, 60, "", 10, &p) == 0 && p.owner);
    store_ttl_page_free(&p);
    CHECK(store_ttl_scan(s, "events", "b", 300, 60, "", 10, &p) == 0 && !p.owner && p.n == 0);
    store_ttl_page_free(&p);
    CHECK(store_ttl_scan(s, "events", "a", 300, 60, "", 10, &p) == 0 && p.owner); /* renewed */
    store_ttl_page_free(&p);
    sleep_ms(450); /* a's lease lapses: b takes over, a is out */
    CHECK(store_ttl_scan(s, "events", "b", 300, 60, "", 10, &p) == 0 && p.owner);
    store_ttl_page_free(&p);
    CHECK(store_ttl_scan(s, "events", "a", 300, 60, "", 10, &p) == 0 && !p.owner);
    store_ttl_page_free(&p);
    /* bounded work: a page of 0 or more than STORE_TTL_SCAN_MAX is refused, as is no owner or TTL */
    CHECK(store_ttl_scan(s, "events", "b", 300, 60, "", 0, &p) == -EINVAL);
    CHECK(store_ttl_scan(s, "events", "b", 300, 60, "", STORE_TTL_SCAN_MAX + 1, &p) == -EINVAL);
    CHECK(store_ttl_scan(s, "events", "", 300, 60, "", 10, &p) == -EINVAL);
    CHECK(store_ttl_scan(s, "events", "b", 300, 0, "", 10, &p) == -EINVAL);
    CHECK(store_ttl_scan(s, "no/such", "b", 300, 60, "", 10, &p) == -EINVAL);
    redis_fixture_stop(&f);
}

struct del_got {
    int calls, rc;
    uint64_t rv;
    enum store_event_type type;
};

static void on_del(void *ud, const struct store_result *r) {
    struct del_got *g = ud;
    g->calls++;
    g->rc = r->rc;
    g->rv = r->rv;
    g->type = r->type;
}

static void run_until(uv_loop_t *loop, const int *calls, int want) {
    for (int i = 0; i < 20000 && *calls < want; i++) uv_run(loop, UV_RUN_ONCE);
}

/* The sweeper's deletes: conditional on the version, batched on the
 * asynchronous connection, a DELETED with the delete's version. */
TEST(store_async_delete_is_conditional) {
    struct redis_fixture f;
    CHECK(redis_fixture_start(&f, NULL) == 0);
    uv_loop_t loop;
    uv_loop_init(&loop);
    struct store_async *a = NULL;
    CHECK(store_async_open(&loop, "127.0.0.1", f.proc.port, NULL, &a) == 0);
    CHECK(make_event(f.store, "d1") == 0 && make_event(f.store, "d2") == 0);
    json_t *d1 = NULL;
    CHECK(store_get(f.store, "events", "default", "d1", &d1) == 0);
    char rv1[24];
    snprintf(rv1, sizeof rv1, "%s", json_string_value(json_object_get(json_object_get(d1, "metadata"),
                                                                       "resourceVersion")));
    json_decref(d1);
    char err[256];
    struct del_got stale = {0}, ok = {0}, gone = {0}, again = {0};
    CHECK(store_async_delete(a, "events", "default", "d2", "1", on_del, &stale, err, sizeof err) == 0);
    CHECK(store_async_delete(a, "events", "default", "d1", rv1, on_del, &ok, err, sizeof err) == 0);
    CHECK(store_async_delete(a, "events", "default", "nope", "1", on_del, &gone, err, sizeof err) == 0);
    run_until(&loop, &gone.calls, 1);
    run_until(&loop, &ok.calls, 1);
    run_until(&loop, &stale.calls, 1);
    CHECK(stale.calls == 1 && stale.rc == STORE_ECONFLICT); /* d2 is at another version: left */
    CHECK(ok.calls == 1 && ok.rc == 0 && ok.type == STORE_DELETED && ok.rv > strtoull(rv1, NULL, 10));
    CHECK(gone.calls == 1 && gone.rc == -ENOENT);
    CHECK(store_async_delete(a, "events", "default", "d1", rv1, on_del, &again, err, sizeof err) == 0);
    run_until(&loop, &again.calls, 1);
    CHECK(again.rc == -ENOENT); /* a second sweeper finds it gone */
    json_t *left = NULL;
    CHECK(store_get(f.store, "events", "default", "d2", &left) == 0);
    json_decref(left);
    CHECK(store_get(f.store, "events", "default", "d1", &left) == -ENOENT);
    CHECK(store_async_delete(a, "events", "default", "d2", "", on_del, &again, err, sizeof err) == -EINVAL);
    store_async_close(a);
    uv_run(&loop, UV_RUN_DEFAULT);
    uv_loop_close(&loop);
    redis_fixture_stop(&f);
}
