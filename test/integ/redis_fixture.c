/* Integration-test fixture (see redis_fixture.h). */
#include "redis_fixture.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static struct redis_fixture *g_live; /* the running fixture, for the atexit net */
static int g_atexit_registered;

static void fixture_atexit(void) {
    if (g_live) {
        redis_proc_kill9(&g_live->proc);
        redis_proc_destroy(&g_live->proc);
        g_live = NULL;
    }
}

static int open_store(struct redis_fixture *f) {
    int rc = store_open("127.0.0.1", f->proc.port, &f->opt, &f->store);
    if (rc) fprintf(stderr, "fixture: store_open on port %d: %d\n", f->proc.port, rc);
    return rc;
}

int redis_fixture_start(struct redis_fixture *f, const struct store_options *opt) {
    memset(f, 0, sizeof *f);
    if (opt) f->opt = *opt;
    else store_options_init(&f->opt);
    if (!g_atexit_registered) {
        atexit(fixture_atexit);
        g_atexit_registered = 1;
    }
    int rc = redis_proc_start(&f->proc, "always");
    if (rc) {
        fprintf(stderr, "fixture: cannot start redis-server: %s\n", strerror(-rc));
        return rc;
    }
    g_live = f;
    rc = open_store(f);
    if (rc) redis_fixture_stop(f);
    return rc;
}

void redis_fixture_stop(struct redis_fixture *f) {
    store_close(f->store);
    f->store = NULL;
    redis_proc_destroy(&f->proc);
    if (g_live == f) g_live = NULL;
}

int redis_fixture_crash_restart(struct redis_fixture *f) {
    store_close(f->store);
    f->store = NULL;
    redis_proc_kill9(&f->proc);
    int rc = redis_proc_restart(&f->proc);
    if (rc) {
        fprintf(stderr, "fixture: cannot restart redis-server: %s\n", strerror(-rc));
        return rc;
    }
    return open_store(f);
}
