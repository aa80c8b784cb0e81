/* Limits per user on the API server (docs/security.md): a request rate (a
 * token bucket per user) and a count of open watches. A request past either
 * is answered 429 TooManyRequests with Retry-After, as kube-apiserver's
 * priority and fairness answers a client it will not queue; client-go and
 * kubectl wait that long and retry. system:masters (the controllers' own
 * token, the local development user) is exempt, as kube-apiserver exempts
 * it from priority and fairness.
 *
 * Users are kept by name in a table of at most LIMITS_MAX_USERS; when it is
 * full, a user whose bucket is full and who holds no watch is forgotten to
 * make room (forgetting one loses nothing: a new entry starts full), and if
 * none can be, the newcomer shares one overflow entry with the others that
 * found no room.
 *
 * Single-threaded (the API server's loop). */
#ifndef PELOTON_SHIM_LIMITS_H
#define PELOTON_SHIM_LIMITS_H

#include <stdbool.h>
#include <stdint.h>

#define LIMITS_MAX_USERS 65536
#define LIMITS_DEFAULT_QPS 500     /* requests per second per user, sustained */
#define LIMITS_DEFAULT_BURST 1000  /* … and at once */
#define LIMITS_DEFAULT_WATCHES 500 /* open watches per user */

struct limits_config {
    unsigned qps;     /* 0: LIMITS_DEFAULT_QPS; UINT32_MAX: no rate limit */
    unsigned burst;   /* 0: LIMITS_DEFAULT_BURST (at least qps) */
    unsigned watches; /* 0: LIMITS_DEFAULT_WATCHES; UINT32_MAX: none */
};

struct limits;
struct limits_user; /* one user's entry, held by each of its watches */

struct limits *limits_new(const struct limits_config *cfg);
void limits_free(struct limits *l);

/* Takes one request of user at now_ms: NULL when past the rate, with
 * *retry_after_s the whole seconds until a token is back (at least 1);
 * else the user's entry (valid until the next call of this module). */
struct limits_user *limits_take(struct limits *l, const char *user, uint64_t now_ms, unsigned *retry_after_s);
/* A watch of u begins: false when the user already holds the most. A
 * begun watch pins the entry until limits_watch_end. */
bool limits_watch_begin(struct limits *l, struct limits_user *u);
void limits_watch_end(struct limits *l, struct limits_user *u);

struct limits_stats {
    unsigned users;          /* entries held */
    uint64_t refused_rate;   /* requests refused for their rate */
    uint64_t refused_watch;  /* watches refused for their count */
};
void limits_stats(const struct limits *l, struct limits_stats *out);

#endif
