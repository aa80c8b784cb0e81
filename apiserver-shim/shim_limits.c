/* Per-user request rate and watch count (shim_limits.h). */
#include <stdlib.h>
#include <string.h>

#include "shim_limits.h"

#define NBUCKETS (LIMITS_MAX_USERS * 2) /* chains stay short at the bound */
#define EVICT_PROBES 256                /* chains looked at for a forgettable entry */

struct limits_user {
    struct limits_user *next; /* its chain */
    uint64_t tokens_m;        /* tokens in thousandths: refilled by qps per millisecond */
    uint64_t last_ms;         /* when tokens_m was last brought up to date */
    unsigned watches;
    char name[];
};

struct limits {
    uint64_t qps, burst_m; /* burst in thousandths */
    unsigned max_watches;
    bool no_rate;
    struct limits_user *bucket[NBUCKETS];
    unsigned users, cursor;
    struct limits_user overflow; /* shared by those who found no room (name "") */
    struct limits_stats st;
};

struct limits *limits_new(const struct limits_config *cfg) {
    struct limits *l = calloc(1, sizeof *l);
    if (!l) return NULL;
    unsigned qps = cfg && cfg->qps ? cfg->qps : LIMITS_DEFAULT_QPS;
    unsigned burst = cfg && cfg->burst ? cfg->burst : LIMITS_DEFAULT_BURST;
    l->no_rate = qps == UINT32_MAX;
    if (burst < qps && !l->no_rate) burst = qps;
    l->qps = qps;
    l->burst_m = (uint64_t)burst * 1000;
    l->max_watches = cfg && cfg->watches ? cfg->watches : LIMITS_DEFAULT_WATCHES;
    l->overflow.tokens_m = l->burst_m;
    return l;
}

void limits_free(struct limits *l) {
    if (!l) return;
    for (unsigned i = 0; i < NBUCKETS; i++)
        for (struct limits_user *u = l->bucket[i], *n; u; u = n) {
            n = u->next;
            free(u);
        }
    free(l);
}

static unsigned hash(const char *s) {
    uint32_t h = 2166136261u;
    for (; *s; s++) h = (h ^ (unsigned char)*s) * 16777619u;
    return h % NBUCKETS;
}

/* u's tokens as of now. */
static void refill(const struct limits *l, struct limits_user *u, uint64_t now_ms) {
    if (now_ms > u->last_ms) {
        uint64_t add = (now_ms - u->last_ms) * l->qps;
        u->tokens_m = add >= l->burst_m - u->tokens_m ? l->burst_m : u->tokens_m + add;
        u->last_ms = now_ms;
    }
}

/* Forgets one user whose bucket is full and who holds no watch: true when
 * one was found among the next EVICT_PROBES chains. */
static bool evict_one(struct limits *l, uint64_t now_ms) {
    for (int k = 0; k < EVICT_PROBES; k++) {
        unsigned i = l->cursor;
        l->cursor = (l->cursor + 1) % NBUCKETS;
        for (struct limits_user **pp = &l->bucket[i]; *pp; pp = &(*pp)->next) {
            struct limits_user *u = *pp;
            refill(l, u, now_ms);
            if (u->watches || u->tokens_m < l->burst_m) continue;
            *pp = u->next;
            free(u);
            l->users--;
            return true;
        }
    }
    return false;
}

static struct limits_user *find_or_add(struct limits *l, const char *name, uint64_t now_ms) {
    unsigned h = hash(name);
    for (struct limits_user *u = l->bucket[h]; u; u = u->next)
        if (!strcmp(u->name, name)) return u;
    if (l->users >= LIMITS_MAX_USERS && !evict_one(l, now_ms)) return &l->overflow;
    size_t n = strlen(name);
    struct limits_user *u = malloc(sizeof *u + n + 1);
    if (!u) return &l->overflow;
    memcpy(u->name, name, n + 1);
    u->tokens_m = l->burst_m;
    u->last_ms = now_ms;
    u->watches = 0;
    u->next = l->bucket[h];
    l->bucket[h] = u;
    l->users++;
    return u;
}

struct limits_user *limits_take(struct limits *l, const char *user, uint64_t now_ms, unsigned *retry_after_s) {
    struct limits_user *u = find_or_add(l, user ? user : "", now_ms);
    if (l->no_rate) return u;
    refill(l, u, now_ms);
    if (u->tokens_m >= 1000) {
        u->tokens_m -= 1000;
        return u;
    }
    uint64_t ms = (1000 - u->tokens_m + l->qps - 1) / l->qps; /* until one whole token is back */
    *retry_after_s = (unsigned)((ms + 999) / 1000);
    if (*retry_after_s < 1) *retry_after_s = 1;
    l->st.refused_rate++;
    return NULL;
}

bool limits_watch_begin(struct limits *l, struct limits_user *u) {
    if (l->max_watches != UINT32_MAX && u->watches >= l->max_watches) {
        l->st.refused_watch++;
        return false;
    }
    u->watches++;
    return true;
}

void limits_watch_end(struct limits *l, struct limits_user *u) {
    (void)l;
    if (u && u->watches) u->watches--;
}

void limits_stats(const struct limits *l, struct limits_stats *out) {
    *out = l->st;
    out->users = l->users;
}
