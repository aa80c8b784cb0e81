/* Integration-test fixture: a private redis-server (src/store/redis_proc.h)
 * and a store connected to it.
 *
 * redis_fixture_start fills a caller-owned struct; redis_fixture_stop closes
 * the store, stops the server and removes its directory (call it on every
 * path out of a test, failures included). As a safety net the fixture keeps
 * the one live fixture in a file-static pointer (the only global state of the
 * integ suite) and an atexit hook SIGKILLs and cleans it up if a test returned
 * without stopping; the child also dies with the test process (PDEATHSIG). */
#ifndef PELOTON_TEST_REDIS_FIXTURE_H
#define PELOTON_TEST_REDIS_FIXTURE_H

#include "redis_proc.h"
#include "store.h"

struct redis_fixture {
    struct redis_proc proc;
    struct store_options opt;
    struct store *store;
};

/* opt NULL = store defaults. 0 or a negative code (message on stderr). */
int redis_fixture_start(struct redis_fixture *f, const struct store_options *opt);
void redis_fixture_stop(struct redis_fixture *f);
/* SIGKILL the server, start it again on the same directory and port, and
 * reopen the store. */
int redis_fixture_crash_restart(struct redis_fixture *f);

#endif
