/* Integration-test fixture: the project's real API server, a private
 * redis-server (redis_fixture.h) and pelotond --roles=apiserver on loopback.
 *
 * apisrv_start makes a private directory (dir) holding a token file ("token",
 * containing "test-token"), the port file and pelotond.log, starts redis and
 * then pelotond, and waits (bounded) for the port file. pelotond gets
 *   --roles=apiserver --port=N --port-file=DIR/port --redis=127.0.0.1:P
 *   --crds= --watch-poll-ms=5 EXTRA...
 * where EXTRA are the space-separated flags of extra, "@" standing for dir.
 * pelotond takes the last occurrence of a flag, so extra can override the
 * defaults (e.g. --crds=crds to install the Peloton CRDs). With --tls-port in
 * extra, the wait is for the TLS port as well (tls_port). The binary is
 * build/asan/pelotond, or $PELOTOND. A binary that cannot be executed (exit
 * 127: being relinked by a concurrent build) is retried.
 *
 * apisrv_stop stops pelotond (SIGTERM, then SIGKILL) and redis and removes the
 * directory; it is safe after a failed start and when called twice. The log
 * is kept (and its path printed) when pelotond failed to start, or when
 * APISRV_KEEP_LOGS (or KEEP_LOGS) is set. pelotond dies with the test process
 * (PDEATHSIG). */
#ifndef PELOTON_TEST_APISRV_FIXTURE_H
#define PELOTON_TEST_APISRV_FIXTURE_H

#include <stdbool.h>
#include <sys/types.h>

#include "redis_fixture.h"

struct apisrv {
    struct redis_fixture rf;
    pid_t pid;        /* pelotond, 0 when not running */
    int port;         /* plain HTTP port */
    int tls_port;     /* with --tls-port in extra, else 0 */
    char dir[64];     /* the private directory, "" when none */
    char url[64];     /* http://127.0.0.1:port */
    char log[128];    /* dir/pelotond.log */
    bool keep_log;    /* a start failed: keep the log for a look */
};

/* redis + pelotond (extra may be NULL). 0 or a negative errno (message on
 * stderr); on failure nothing is left running. */
int apisrv_start(struct apisrv *s, const char *extra);
/* (Re)start pelotond alone on the running redis, e.g. after apisrv_kill;
 * port 0 = any. */
int apisrv_spawn(struct apisrv *s, int port, const char *extra);
/* Send sig to pelotond and reap it (SIGKILL after 5 s). */
void apisrv_kill(struct apisrv *s, int sig);
/* Everything stopped, files removed. */
void apisrv_stop(struct apisrv *s);

#endif
