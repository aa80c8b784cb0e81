/* The Event TTL (pelotond --event-ttl; shim.h): Events are deleted some time
 * after their last write, as kube-apiserver lets an Event's etcd lease
 * expire --event-ttl (default 1h) after it was written.
 *
 * A sweeper walks the Events' index in pages (store_ttl_scan: at most
 * EVTTL_PAGE members a call, a loop turn), which names those whose last
 * write is older than the TTL by their version alone, and deletes each with
 * that version as precondition: a real delete, so watchers get DELETED with
 * the Event's final state, and an Event written since (a count bumped) or
 * already deleted by someone else is left alone. The deletes go on the
 * asynchronous connection (store_async_delete: their reads together, the
 * deletes in the turn's batches), and the next scan waits for their
 * answers; without that connection they are synchronous, at most
 * EVTTL_TURN_MS of them a loop turn. After a whole
 * pass over the index the sweeper waits a tenth of the TTL (1 s to 60 s)
 * before the next one, so an Event goes between TTL and TTL + that wait +
 * one pass after its last write.
 *
 * Several API servers on one Redis: the scan takes a lease in Redis (one
 * sweeper at a time; another takes over once it lapses), and every delete
 * is conditional, so two sweepers at once (a lease lapsed mid-step) only
 * find some Events gone. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <unistd.h>

#include "shim.h"

#define EVTTL_PAGE 500       /* index members a scan looks at (one Redis call) */
#define EVTTL_STEP_MS 50     /* between scans within a pass that found nothing to delete */
#define EVTTL_TURN_MS 5      /* deletes per loop turn stop after this long (one at least) */
#define EVTTL_RETRY_MS 1000  /* after a store error */
#define EVTTL_LEASE_EXTRA_MS 10000

struct event_ttl {
    struct shim *s;
    uv_idle_t idle;
    uv_timer_t timer;
    int64_t ttl_s;
    unsigned pass_wait_ms, lease_ms;
    char owner[64];             /* this sweeper's id in the lease */
    char *cursor;               /* the scan goes on after this member; NULL: from the first */
    struct store_ttl_page page; /* the last scan's Events past the TTL */
    size_t done;                /* those of page handled */
    bool held;                  /* holds the lease (for the log) */
    size_t inflight;            /* asynchronous deletes not answered yet */
    bool failed;                /* one of them failed for want of the store */
    int closing;
    struct metrics_series *m_deleted, *m_skipped, *m_scanned, *m_passes;
};

static void on_step(uv_idle_t *h);

static void on_wait_over(uv_timer_t *t) {
    struct event_ttl *x = t->data;
    uv_idle_start(&x->idle, on_step);
}

/* The next step: on the next loop turn (ms 0) or after ms. */
static void arm(struct event_ttl *x, uint64_t ms) {
    if (ms == 0) {
        uv_idle_start(&x->idle, on_step);
        return;
    }
    uv_idle_stop(&x->idle);
    uv_timer_start(&x->timer, on_wait_over, ms, 0);
}

/* The member's namespace into ns (its name follows the slash returned);
 * NULL for a member this store does not write. */
static const char *split_member(const char *member, char *ns, size_t nslen) {
    const char *slash = strchr(member, '/');
    if (!slash || (size_t)(slash - member) >= nslen) return NULL;
    memcpy(ns, member, (size_t)(slash - member));
    ns[slash - member] = '\0';
    return slash + 1;
}

/* Deletes the page's Events not handled yet, for at most EVTTL_TURN_MS (one
 * at least). 0, or a store error (the rest is tried again later). */
static int delete_some(struct event_ttl *x) {
    uint64_t deadline = uv_hrtime() + EVTTL_TURN_MS * 1000000ull;
    bool first = true;
    while (x->done < x->page.n && (first || uv_hrtime() < deadline)) {
        first = false;
        char ns[STORE_MAX_NAMESPACE + 1];
        const char *name = split_member(x->page.members[x->done], ns, sizeof ns);
        if (!name) { /* not a member this store writes: leave it */
            x->done++;
            metrics_inc(x->m_skipped);
            continue;
        }
        struct store_delete_opts opts = {.resource_version = x->page.versions[x->done], .grace_period_seconds = -1};
        int rc = store_delete(x->s->st, "events", ns, name, &opts, NULL, NULL);
        if (rc == -EIO || rc == -ENOMEM) return rc;
        x->done++;
        if (rc == 0) metrics_inc(x->m_deleted);
        else metrics_inc(x->m_skipped); /* written since, or deleted by someone else: not ours to remove */
    }
    return 0;
}

/* The page's deletes answered: the next scan, at once while the pass goes
 * on, after the wait at its end. */
static void deletes_over(struct event_ttl *x) {
    if (x->failed) {
        fprintf(stderr, "level=warn msg=\"event TTL: delete failed, trying again\"\n");
        x->failed = false;
        arm(x, EVTTL_RETRY_MS);
    } else arm(x, x->cursor ? 0 : x->pass_wait_ms);
}

static void on_deleted(void *ud, const struct store_result *r) {
    struct event_ttl *x = ud;
    if (r->rc == 0) metrics_inc(x->m_deleted);
    else if (r->rc == -EIO || r->rc == -ENOMEM) x->failed = true;
    else metrics_inc(x->m_skipped); /* written since, or deleted by someone else */
    if (--x->inflight == 0) deletes_over(x);
}

/* The page's deletes on the asynchronous connection: their reads go out
 * together and the deletes in the turn's batches (one script call per
 * batch), answered in on_deleted. */
static void delete_async(struct event_ttl *x) {
    x->inflight = 1; /* held while they are sent: an answer cannot end the page early */
    for (; x->done < x->page.n; x->done++) {
        char ns[STORE_MAX_NAMESPACE + 1], err[256];
        const char *name = split_member(x->page.members[x->done], ns, sizeof ns);
        if (!name) {
            metrics_inc(x->m_skipped);
            continue;
        }
        x->inflight++;
        if (store_async_delete(x->s->astore, "events", ns, name, x->page.versions[x->done], on_deleted, x, err,
                               sizeof err)) {
            x->inflight--;
            metrics_inc(x->m_skipped);
        }
    }
    if (--x->inflight == 0) deletes_over(x);
}

static void on_step(uv_idle_t *h) {
    struct event_ttl *x = h->data;
    uv_idle_stop(&x->idle);
    if (x->inflight) return; /* their answers arm the next step */
    if (x->done < x->page.n) { /* the last scan's Events first */
        if (delete_some(x)) {
            fprintf(stderr, "level=warn msg=\"event TTL: delete failed, trying again\" err=\"%s\"\n",
                    store_errmsg(x->s->st));
            arm(x, EVTTL_RETRY_MS);
        } else if (x->done < x->page.n || x->cursor) arm(x, 0);
        else arm(x, x->pass_wait_ms);
        return;
    }
    store_ttl_page_free(&x->page);
    x->done = 0;
    int rc = store_ttl_scan(x->s->st, "events", x->owner, x->lease_ms, x->ttl_s, x->cursor ? x->cursor : "",
                            EVTTL_PAGE, &x->page);
    if (rc) {
        fprintf(stderr, "level=warn msg=\"event TTL: scan failed, trying again\" err=\"%s\"\n",
                store_errmsg(x->s->st));
        arm(x, EVTTL_RETRY_MS);
        return;
    }
    if (!x->page.owner) { /* another API server sweeps: look again before its lease could lapse */
        if (x->held) fprintf(stderr, "level=info msg=\"event TTL: another API server sweeps now\"\n");
        x->held = false;
        free(x->cursor);
        x->cursor = NULL;
        arm(x, x->lease_ms / 2);
        return;
    }
    if (!x->held) fprintf(stderr, "level=info msg=\"event TTL: this API server sweeps\" ttl_s=%lld\n",
                          (long long)x->ttl_s);
    x->held = true;
    metrics_add(x->m_scanned, x->page.scanned);
    free(x->cursor);
    x->cursor = x->page.next; /* taken: the page keeps no pointer to it */
    x->page.next = NULL;
    if (!x->cursor) metrics_inc(x->m_passes);
    if (x->page.n && x->s->astore) delete_async(x);
    else if (x->page.n) arm(x, 0);
    else arm(x, x->cursor ? EVTTL_STEP_MS : x->pass_wait_ms);
}

struct event_ttl *shim_event_ttl_new(struct shim *s, uv_loop_t *loop, int64_t ttl_s, struct metrics *reg) {
    if (!loop || ttl_s <= 0) return NULL;
    struct event_ttl *x = calloc(1, sizeof *x);
    if (!x) return NULL;
    x->s = s;
    x->ttl_s = ttl_s;
    int64_t wait = ttl_s * 100; /* a tenth of the TTL, in ms */
    x->pass_wait_ms = wait < 1000 ? 1000 : wait > 60000 ? 60000 : (unsigned)wait;
    x->lease_ms = x->pass_wait_ms + EVTTL_LEASE_EXTRA_MS;
    unsigned char rnd[8] = {0};
    if (getrandom(rnd, sizeof rnd, 0) != (ssize_t)sizeof rnd) memset(rnd, 0, sizeof rnd);
    char host[32] = "";
    gethostname(host, sizeof host - 1);
    snprintf(x->owner, sizeof x->owner, "%.31s/%ld/%02x%02x%02x%02x%02x%02x%02x%02x", host, (long)getpid(), rnd[0],
             rnd[1], rnd[2], rnd[3], rnd[4], rnd[5], rnd[6], rnd[7]);
    if (reg) {
        x->m_deleted = metrics_series0(metrics_counter(
            reg, "peloton_apiserver_event_ttl_deleted_total",
            "Events deleted by this API server because their last write was older than --event-ttl.", 0, NULL));
        x->m_skipped = metrics_series0(metrics_counter(
            reg, "peloton_apiserver_event_ttl_skipped_total",
            "Events found past --event-ttl but not deleted: written since the scan, or deleted by someone else.",
            0, NULL));
        x->m_scanned = metrics_series0(metrics_counter(
            reg, "peloton_apiserver_event_ttl_scanned_total",
            "Events looked at by this API server's TTL sweeper (by version, without reading them).", 0, NULL));
        x->m_passes = metrics_series0(metrics_counter(
            reg, "peloton_apiserver_event_ttl_passes_total",
            "Whole passes of this API server's TTL sweeper over the Events.", 0, NULL));
    }
    uv_idle_init(loop, &x->idle);
    uv_timer_init(loop, &x->timer);
    x->idle.data = x->timer.data = x;
    /* the sweeper never keeps the loop running: once the daemon's servers
     * and connections are closed the loop ends, as it did without it */
    uv_unref((uv_handle_t *)&x->idle);
    uv_unref((uv_handle_t *)&x->timer);
    arm(x, EVTTL_STEP_MS);
    return x;
}

/* Freed by the second close callback, on a later loop turn. */
static void on_closed(uv_handle_t *h) {
    struct event_ttl *x = h->data;
    if (--x->closing > 0) return;
    store_ttl_page_free(&x->page);
    free(x->cursor);
    free(x);
}

void shim_event_ttl_free(struct event_ttl *x) {
    if (!x) return;
    x->closing = 2;
    uv_close((uv_handle_t *)&x->idle, on_closed);
    uv_close((uv_handle_t *)&x->timer, on_closed);
}
