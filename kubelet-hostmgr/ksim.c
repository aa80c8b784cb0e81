/* kubelet-sim: configuration and the pure decisions (flags, annotations,
 * admission, exit handling, times), then the simulator on the loop. */
#include "ksim.h"

#include <arpa/inet.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "errmsg.h"
#include "quantity.h"

const char ksim_usage[] =
    "usage: kubelet-sim (--kubeconfig=F [--context=C] | --server=URL [--token-file=F]) [flags]\n"
    "  --nodes=3 --name-prefix=sim-node-      nodes named prefix + index (0-based, not padded)\n"
    "  --cpu=8 --memory=32Gi --pods=110 --gpu=0 --ephemeral-storage=100Gi   capacity = allocatable\n"
    "  --gpu-nodes=0 --gpu-per-node=8         the first K nodes get G nvidia.com/gpu\n"
    "  --labels=k=v,k2=v2 --zones=0           labels; topology.kubernetes.io/zone=zone-<i % N>\n"
    "  --lease-seconds=40 --renew-seconds=10 --status-seconds=60\n"
    "  --restart-backoff=10 --restart-backoff-max=300   seconds before a restart, doubling\n"
    "  --down=name1,name2                     nodes that start down\n"
    "  --max-inflight=256 --retries=5 --kubelet-version=v1.32.0-sim\n"
    "  --events=true                          post the kubelet's Events (Pulled, Created, Started, ...)\n"
    "  --delete-nodes-on-exit --quiet --verbose --help\n";

/* ---------------------------------------------------------------- config */

static int bad(char *err, size_t errlen, const char *flag, const char *v, const char *why) {
    return core_fail(err, errlen, -EINVAL, "--%s=%s: %s", flag, v, why);
}

static int set_str(char **dst, const char *v) {
    char *c = strdup(v);
    if (!c) return -ENOMEM;
    free(*dst);
    *dst = c;
    return 0;
}

static int parse_ll(const char *flag, const char *v, long long lo, long long hi, long long *out, char *err,
                    size_t errlen) {
    char *end = NULL;
    errno = 0;
    long long x = strtoll(v, &end, 10);
    if (!v[0] || *end || errno || x < lo || x > hi) {
        char why[96];
        snprintf(why, sizeof why, "want an integer in [%lld, %lld]", lo, hi);
        return bad(err, errlen, flag, v, why);
    }
    *out = x;
    return 0;
}

static int parse_secs(const char *flag, const char *v, bool allow_zero, double *out, char *err, size_t errlen) {
    int64_t ms;
    if (ksim_parse_seconds(v, &ms) || (!allow_zero && ms == 0))
        return bad(err, errlen, flag, v, allow_zero ? "want decimal seconds" : "want decimal seconds > 0");
    *out = (double)ms / 1000.0;
    return 0;
}

static int parse_qty(const char *flag, enum res_kind k, const char *v, int64_t *out, char *err, size_t errlen) {
    char qerr[200];
    if (quantity_parse_kind(k, v, out, qerr, sizeof qerr)) return bad(err, errlen, flag, v, qerr);
    return 0;
}

static bool label_chars_ok(const char *s, size_t n, bool key) {
    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' ||
                  c == '_' || c == '.' || (key && c == '/');
        if (!ok) return false;
    }
    return true;
}

static int parse_labels(json_t *labels, const char *v, char *err, size_t errlen) {
    const char *p = v;
    while (*p) {
        const char *comma = strchr(p, ',');
        size_t n = comma ? (size_t)(comma - p) : strlen(p);
        const char *eq = memchr(p, '=', n);
        if (n) {
            if (!eq || eq == p) return bad(err, errlen, "labels", v, "want k=v,k2=v2");
            size_t kn = (size_t)(eq - p), vn = n - kn - 1;
            if (kn > 253 || vn > 63 || !label_chars_ok(p, kn, true) || !label_chars_ok(eq + 1, vn, false))
                return bad(err, errlen, "labels", v, "not a valid label key or value");
            char k[256], val[64];
            memcpy(k, p, kn);
            k[kn] = 0;
            memcpy(val, eq + 1, vn);
            val[vn] = 0;
            json_object_set_new(labels, k, json_string(val));
        }
        p += n + (comma ? 1 : 0);
    }
    return 0;
}

static int parse_names(struct ksim_config *c, const char *v) {
    const char *p = v;
    while (*p) {
        const char *comma = strchr(p, ',');
        size_t n = comma ? (size_t)(comma - p) : strlen(p);
        if (n) {
            char **d = realloc(c->down, (size_t)(c->ndown + 2) * sizeof *d);
            if (!d) return -ENOMEM;
            c->down = d;
            if (!(d[c->ndown] = strndup(p, n))) return -ENOMEM;
            d[++c->ndown] = NULL;
        }
        p += n + (comma ? 1 : 0);
    }
    return 0;
}

int ksim_config_parse(struct ksim_config *c, int argc, char **argv, char *err, size_t errlen) {
    memset(c, 0, sizeof *c);
    c->nodes = 3;
    c->cpu_milli = 8000;
    c->memory_bytes = 32LL << 30;
    c->storage_bytes = 100LL << 30;
    c->pods = 110;
    c->gpu_per_node = 8000;
    c->lease_seconds = 40;
    c->renew_seconds = 10;
    c->status_seconds = 60;
    c->backoff_seconds = 10;
    c->backoff_max_seconds = 300;
    c->max_inflight = 256;
    c->retries = 5;
    c->events = true;
    if (!(c->labels = json_object()) || set_str(&c->name_prefix, "sim-node-") ||
        set_str(&c->kubelet_version, "v1.32.0-sim"))
        return core_fail(err, errlen, -ENOMEM, "out of memory");
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (strncmp(a, "--", 2)) return core_fail(err, errlen, -EINVAL, "unexpected argument %s", a);
        char flag[64];
        const char *eq = strchr(a, '=');
        size_t fn = eq ? (size_t)(eq - a - 2) : strlen(a + 2);
        if (fn >= sizeof flag) return core_fail(err, errlen, -EINVAL, "unknown flag %s", a);
        memcpy(flag, a + 2, fn);
        flag[fn] = 0;
        const char *v = eq ? eq + 1 : NULL;
        bool *bf = !strcmp(flag, "quiet") ? &c->quiet : !strcmp(flag, "verbose") ? &c->verbose
                 : !strcmp(flag, "events") ? &c->events
                 : !strcmp(flag, "delete-nodes-on-exit") ? &c->delete_nodes_on_exit
                 : !strcmp(flag, "help") ? &c->help : NULL;
        if (bf) {
            if (v && strcmp(v, "true") && strcmp(v, "false")) return bad(err, errlen, flag, v, "want true or false");
            *bf = !v || !strcmp(v, "true");
            continue;
        }
        if (!v) return core_fail(err, errlen, -EINVAL, "--%s needs a value (--%s=...)", flag, flag);
        long long x = 0;
        int rc = 0;
        if (!strcmp(flag, "kubeconfig")) rc = set_str(&c->kubeconfig, v);
        else if (!strcmp(flag, "context")) rc = set_str(&c->context, v);
        else if (!strcmp(flag, "server")) rc = set_str(&c->server, v);
        else if (!strcmp(flag, "token-file")) rc = set_str(&c->token_file, v);
        else if (!strcmp(flag, "kubelet-version")) rc = set_str(&c->kubelet_version, v);
        else if (!strcmp(flag, "name-prefix")) {
            if (strlen(v) > 200 || !label_chars_ok(v, strlen(v), false) || strchr(v, '_'))
                return bad(err, errlen, flag, v, "want lower-case letters, digits, '-' and '.'");
            for (const char *p = v; *p; p++)
                if (*p >= 'A' && *p <= 'Z') return bad(err, errlen, flag, v, "want lower case");
            rc = set_str(&c->name_prefix, v);
        } else if (!strcmp(flag, "nodes")) {
            if (!(rc = parse_ll(flag, v, 0, KSIM_MAX_NODES, &x, err, errlen))) c->nodes = (int)x;
        } else if (!strcmp(flag, "pods")) {
            if (!(rc = parse_ll(flag, v, 0, 1000000, &x, err, errlen))) c->pods = x;
        } else if (!strcmp(flag, "zones")) {
            if (!(rc = parse_ll(flag, v, 0, 10000, &x, err, errlen))) c->zones = (int)x;
        } else if (!strcmp(flag, "gpu-nodes")) {
            if (!(rc = parse_ll(flag, v, 0, KSIM_MAX_NODES, &x, err, errlen))) c->gpu_nodes = (int)x;
        } else if (!strcmp(flag, "lease-seconds")) {
            if (!(rc = parse_ll(flag, v, 1, 3600, &x, err, errlen))) c->lease_seconds = (int)x;
        } else if (!strcmp(flag, "max-inflight")) {
            if (!(rc = parse_ll(flag, v, 1, 100000, &x, err, errlen))) c->max_inflight = (int)x;
        } else if (!strcmp(flag, "retries")) {
            if (!(rc = parse_ll(flag, v, 0, 100, &x, err, errlen))) c->retries = (int)x;
        } else if (!strcmp(flag, "cpu")) rc = parse_qty(flag, RES_CPU, v, &c->cpu_milli, err, errlen);
        else if (!strcmp(flag, "memory")) rc = parse_qty(flag, RES_MEMORY, v, &c->memory_bytes, err, errlen);
        else if (!strcmp(flag, "ephemeral-storage")) rc = parse_qty(flag, RES_DISK, v, &c->storage_bytes, err, errlen);
        else if (!strcmp(flag, "gpu") || !strcmp(flag, "gpu-per-node")) {
            if (!(rc = parse_ll(flag, v, 0, 1024, &x, err, errlen)))
                *(flag[3] ? &c->gpu_per_node : &c->gpu) = x * 1000;
        } else if (!strcmp(flag, "renew-seconds")) rc = parse_secs(flag, v, false, &c->renew_seconds, err, errlen);
        else if (!strcmp(flag, "status-seconds")) rc = parse_secs(flag, v, false, &c->status_seconds, err, errlen);
        else if (!strcmp(flag, "restart-backoff")) rc = parse_secs(flag, v, true, &c->backoff_seconds, err, errlen);
        else if (!strcmp(flag, "restart-backoff-max"))
            rc = parse_secs(flag, v, true, &c->backoff_max_seconds, err, errlen);
        else if (!strcmp(flag, "labels")) rc = parse_labels(c->labels, v, err, errlen);
        else if (!strcmp(flag, "down")) rc = parse_names(c, v);
        else return core_fail(err, errlen, -EINVAL, "unknown flag --%s", flag);
        if (rc == -ENOMEM) return core_fail(err, errlen, rc, "out of memory");
        if (rc) return rc;
    }
    if (c->help) return 0;
    if (!c->kubeconfig && !c->server) return core_fail(err, errlen, -EINVAL, "give --kubeconfig=F or --server=URL");
    if (c->kubeconfig && c->server) return core_fail(err, errlen, -EINVAL, "--kubeconfig and --server exclude each other");
    if (c->token_file && !c->server) return core_fail(err, errlen, -EINVAL, "--token-file goes with --server");
    if (c->renew_seconds >= c->lease_seconds)
        return core_fail(err, errlen, -EINVAL, "--renew-seconds must be shorter than --lease-seconds");
    return 0;
}

void ksim_config_free(struct ksim_config *c) {
    free(c->kubeconfig);
    free(c->context);
    free(c->server);
    free(c->token_file);
    free(c->name_prefix);
    free(c->kubelet_version);
    json_decref(c->labels);
    for (int i = 0; i < c->ndown; i++) free(c->down[i]);
    free(c->down);
    memset(c, 0, sizeof *c);
}

/* ---------------------------------------------------------------- pure parts */

int ksim_parse_seconds(const char *s, int64_t *ms) {
    if (!s) return -EINVAL;
    int64_t whole = 0, frac = 0;
    int digits = 0, fdigits = 0;
    bool dot = false, rest = false;
    for (const char *p = s; *p; p++) {
        if (*p == '.' && !dot) dot = true;
        else if (*p < '0' || *p > '9') return -EINVAL;
        else if (!dot) {
            if (++digits > 9) return -EINVAL;
            whole = whole * 10 + (*p - '0');
        } else if (fdigits < 3) {
            frac = frac * 10 + (*p - '0');
            fdigits++;
            digits++;
        } else {
            digits++;
            if (*p != '0') rest = true;
        }
    }
    if (!digits) return -EINVAL;
    for (; fdigits < 3; fdigits++) frac *= 10;
    int64_t v = whole * 1000 + frac + (rest ? 1 : 0);
    if (v > (int64_t)(KSIM_MAX_SECONDS * 1000)) return -EINVAL;
    *ms = v;
    return 0;
}

static const char *ann(const json_t *pod, const char *key) {
    return json_string_value(json_object_get(json_object_get(json_object_get(pod, "metadata"), "annotations"), key));
}

int ksim_pod_opts(const json_t *pod, struct ksim_pod_opts *o, char *err, size_t errlen) {
    *o = (struct ksim_pod_opts){.start_ms = 0, .run_ms = -1, .exit_code = 0, .restart = KSIM_RESTART_ALWAYS};
    int nbad = 0;
    const char *v;
    int64_t ms;
    if ((v = ann(pod, KSIM_ANN_START))) {
        if (ksim_parse_seconds(v, &ms)) {
            if (!nbad++) core_fail(err, errlen, -EINVAL, "%s=\"%.64s\": want decimal seconds", KSIM_ANN_START, v);
        } else o->start_ms = ms;
    }
    if ((v = ann(pod, KSIM_ANN_RUN))) {
        if (ksim_parse_seconds(v, &ms)) {
            if (!nbad++) core_fail(err, errlen, -EINVAL, "%s=\"%.64s\": want decimal seconds", KSIM_ANN_RUN, v);
        } else o->run_ms = ms;
    }
    if ((v = ann(pod, KSIM_ANN_EXIT))) {
        char *end = NULL;
        long x = strtol(v, &end, 10);
        if (!v[0] || *end || x < 0 || x > 255) {
            if (!nbad++) core_fail(err, errlen, -EINVAL, "%s=\"%.64s\": want 0..255", KSIM_ANN_EXIT, v);
        } else o->exit_code = (int)x;
    }
    const char *rp = json_string_value(json_object_get(json_object_get(pod, "spec"), "restartPolicy"));
    if (rp && !strcmp(rp, "Never")) o->restart = KSIM_RESTART_NEVER;
    else if (rp && !strcmp(rp, "OnFailure")) o->restart = KSIM_RESTART_ON_FAILURE;
    return nbad;
}

enum ksim_exit_action ksim_exit_action(enum ksim_restart rp, int exit_code) {
    if (rp == KSIM_RESTART_ALWAYS || (rp == KSIM_RESTART_ON_FAILURE && exit_code != 0)) return KSIM_EXIT_RESTART;
    return exit_code == 0 ? KSIM_EXIT_SUCCEEDED : KSIM_EXIT_FAILED;
}

int64_t ksim_backoff_ms(int64_t base_ms, int64_t max_ms, int n) {
    int64_t d = base_ms;
    for (int i = 1; i < n && d < max_ms; i++) d *= 2;
    return d < max_ms ? d : max_ms;
}

/* One quantity of a resources map ("2", "500m", or a JSON number). */
static int qty_of(const json_t *v, enum res_kind k, int64_t *out, char *err, size_t errlen) {
    char buf[64];
    const char *s = json_string_value(v);
    if (!s && json_is_number(v)) {
        snprintf(buf, sizeof buf, "%.17g", json_number_value(v));
        s = buf;
    }
    if (!s) return core_fail(err, errlen, -EINVAL, "a quantity must be a string or a number");
    return quantity_parse_kind(k, s, out, err, errlen);
}

static int container_res(const json_t *c, struct ksim_res *r, char *err, size_t errlen) {
    static const struct {
        const char *name;
        enum res_kind kind;
        size_t off;
    } keys[] = {{"cpu", RES_CPU, offsetof(struct ksim_res, cpu)},
                {"memory", RES_MEMORY, offsetof(struct ksim_res, memory)},
                {"nvidia.com/gpu", RES_GPU, offsetof(struct ksim_res, gpu)}};
    const json_t *res = json_object_get(c, "resources");
    const json_t *req = json_object_get(res, "requests"), *lim = json_object_get(res, "limits");
    *r = (struct ksim_res){0};
    for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++) {
        const json_t *v = json_object_get(req, keys[i].name);
        if (!v) v = json_object_get(lim, keys[i].name);
        if (v && qty_of(v, keys[i].kind, (int64_t *)((char *)r + keys[i].off), err, errlen)) return -EINVAL;
    }
    return 0;
}

int ksim_pod_requests(const json_t *pod, struct ksim_res *out, char *err, size_t errlen) {
    const json_t *spec = json_object_get(pod, "spec");
    struct ksim_res sum = {0}, one;
    size_t i;
    const json_t *c;
    json_array_foreach(json_object_get(spec, "containers"), i, c) {
        if (container_res(c, &one, err, errlen)) return -EINVAL;
        sum.cpu += one.cpu, sum.memory += one.memory, sum.gpu += one.gpu;
    }
    json_array_foreach(json_object_get(spec, "initContainers"), i, c) {
        if (container_res(c, &one, err, errlen)) return -EINVAL;
        if (one.cpu > sum.cpu) sum.cpu = one.cpu;
        if (one.memory > sum.memory) sum.memory = one.memory;
        if (one.gpu > sum.gpu) sum.gpu = one.gpu;
    }
    const json_t *ov = json_object_get(spec, "overhead");
    if (ov) {
        json_t *fake = json_pack("{s:{s:O}}", "resources", "requests", ov);
        int rc = fake ? container_res(fake, &one, err, errlen) : -ENOMEM;
        json_decref(fake);
        if (rc) return rc;
        sum.cpu += one.cpu, sum.memory += one.memory, sum.gpu += one.gpu;
    }
    sum.pods = 1;
    *out = sum;
    return 0;
}

const char *ksim_admit(const struct ksim_res *cap, const struct ksim_res *used, const struct ksim_res *req, char *msg,
                       size_t msglen) {
    static const struct {
        const char *name, *reason;
        size_t off;
        int64_t unit;
    } kinds[] = {{"pods", "OutOfpods", offsetof(struct ksim_res, pods), 1},
                 {"cpu", "OutOfcpu", offsetof(struct ksim_res, cpu), 1},
                 {"memory", "OutOfmemory", offsetof(struct ksim_res, memory), 1},
                 {"nvidia.com/gpu", "OutOfnvidia.com/gpu", offsetof(struct ksim_res, gpu), 1000}};
    for (size_t i = 0; i < sizeof kinds / sizeof kinds[0]; i++) {
        int64_t c = *(const int64_t *)((const char *)cap + kinds[i].off);
        int64_t u = *(const int64_t *)((const char *)used + kinds[i].off);
        int64_t r = *(const int64_t *)((const char *)req + kinds[i].off);
        if (r > 0 && r > c - u) {
            if (msg && msglen)
                snprintf(msg, msglen, "Pod was rejected: Node didn't have enough resource: %s, requested: %lld, "
                         "used: %lld, capacity: %lld", kinds[i].name, (long long)(r / kinds[i].unit),
                         (long long)(u / kinds[i].unit), (long long)(c / kinds[i].unit));
            return kinds[i].reason;
        }
    }
    return NULL;
}

void ksim_microtime(int64_t unix_us, char out[32]) {
    time_t t = (time_t)(unix_us / 1000000);
    struct tm tm;
    gmtime_r(&t, &tm);
    size_t n = strftime(out, 32, "%Y-%m-%dT%H:%M:%S", &tm);
    unsigned us = (unsigned)(unix_us % 1000000);
    for (int i = 5; i >= 0; i--, us /= 10) out[n + 1 + (size_t)i] = (char)('0' + us % 10);
    out[n] = '.';
    out[n + 7] = 'Z';
    out[n + 8] = 0;
}

void ksim_rfc3339(int64_t unix_s, char out[32]) {
    time_t t = (time_t)unix_s;
    struct tm tm;
    gmtime_r(&t, &tm);
    strftime(out, 32, "%Y-%m-%dT%H:%M:%SZ", &tm);
}

int ksim_node_index(const char *prefix, int n, const char *name) {
    size_t pl = strlen(prefix);
    if (!name || strncmp(name, prefix, pl)) return -1;
    const char *d = name + pl;
    if (!d[0] || (d[0] == '0' && d[1]) || strlen(d) > 6) return -1;
    long v = 0;
    for (; *d; d++) {
        if (*d < '0' || *d > '9') return -1;
        v = v * 10 + (*d - '0');
    }
    return v < n ? (int)v : -1;
}


/* ---------------------------------------------------------------- the simulator */

#define LOG_PER_SEC 50
#define DRAIN_MAX 20000   /* deadlines handled per timer callback, so I/O is not starved */
#define RETRY_BASE_MS 100
#define RETRY_MAX_MS 5000
#define REG_RETRIES 10    /* registration writes retry more: the server may still be starting */
#define STOP_BOUND_MS 5000
#define EVQ_MAX 10000     /* Events queued at most; more are dropped (counted) */

#define CONTAINER_OF(p, type, member) ((type *)(void *)((char *)(p) - offsetof(type, member)))

enum tkind { T_POD, T_LEASE, T_STATUS, T_WRITE };
struct ktimer {
    uint64_t at;  /* loop time, ms */
    int32_t hidx; /* position in the heap, -1 when not in it */
    uint8_t kind;
};

/* A pod's place in its timeline. */
enum pstate { PS_HELD, PS_STARTING, PS_RUNNING, PS_BACKOFF, PS_DONE, PS_REJECTED, PS_TERMINATING, PS_DELETING };

struct kwrite;

/* The Events a kubelet posts about a pod's container, in its wording. */
enum evreason { EV_PULLED, EV_CREATED, EV_STARTED, EV_KILLING, EV_BACKOFF, EV_N };
static const char *const ev_reasons[] = {"Pulled", "Created", "Started", "Killing", "BackOff"};

/* One Event of one container of a pod: how often it happened, its name
 * (from the time it was first recorded, so names sort by time) and the
 * write carrying it while that is queued (a repeat is counted on it). */
struct kevslot {
    uint32_t count;
    int64_t first, name_us;
    struct kwrite *pending;
};

/* What an Event write sends. Owned by the write: the pod may be gone by then. */
struct kevent {
    struct kevslot *slot; /* NULL once the write is sent or the pod forgotten */
    char *ns, *pod, *uid, *ctr, *msg, *node;
    uint8_t reason;
    uint32_t count;
    int64_t first, last, name_us;
    bool patch; /* the Event was posted before: count it on that one */
};

struct kpod {
    struct ktimer t;
    struct kpod *hnext;         /* hash chain */
    struct kpod *nprev, *nnext; /* the node's pods */
    struct kwrite *w;           /* the one write queued, waiting or in flight for this pod */
    char *key;                  /* "ns/name" */
    char *uid;
    char *message;              /* admission refusal */
    json_t *ctrs, *inits;       /* the containers' and init containers' names and images: [{name, image}] */
    struct kevslot *evs;        /* [container * EV_N + reason], for nevs containers; NULL until an Event */
    size_t nevs;
    const char *reason;         /* static */
    struct ksim_res req;
    int64_t start_ms, run_ms;
    int64_t start_time, started_at, finished_at, last_started, last_finished; /* Unix seconds */
    uint32_t ip;
    int32_t node, restarts;
    int16_t exit_code, last_exit;
    uint8_t state, restart;
    bool counted, needs_status, delete_sent, deleting, has_last, killed;
};

struct knode {
    struct ktimer lease_t, status_t;
    char *name;
    struct ksim_res cap, used;
    struct kpod *pods;
    int64_t ready_since;
    bool down, registered, lease_busy, status_busy;
};

enum wkind { W_POD, W_NODE_CREATE, W_NODE_TAKEOVER, W_NODE_STATUS, W_LEASE_CREATE, W_LEASE_RENEW, W_NODE_DELETE,
             W_LEASE_DELETE, W_EVENT };
static const char *const wnames[] = {"pod", "node-create", "node-takeover", "node-status", "lease-create",
                                     "lease-renew", "node-delete", "lease-delete", "event"};

struct kwrite {
    struct ktimer t;     /* a retry waits in the heap */
    struct kwrite *next; /* queue */
    struct ksim *s;
    struct kpod *pod;    /* W_POD: NULL once the pod is forgotten */
    struct kevent *ev;   /* W_EVENT */
    int32_t node;
    uint8_t kind, tries;
    bool reg, is_delete; /* part of registration; W_POD: this one is the final DELETE */
    bool own;            /* in flight on the lease path (counted in linflight, not inflight) */
};

struct ksim {
    uv_loop_t *loop;
    struct kclient *kc;
    struct ksim_config cfg; /* numbers, name_prefix, kubelet_version, labels owned; the rest NULL */
    uv_timer_t timer, stop_timer, stats_timer;
    uint64_t armed_at;
    bool armed;
    struct ktimer **heap;
    size_t hn, hcap;
    struct kpod **buckets;
    size_t nbuckets, npods;
    struct knode *nodes;
    int nnodes, reg_left;
    struct kwrite *qhead, *qtail;
    size_t queued, inflight;
    /* Lease renewals: their own queue, sent at once on their own client (a
     * Kubelet renews its Lease apart from its status writes, so a status
     * backlog never delays a renewal); at most one per node at a time */
    struct kclient *lkc;            /* NULL: the main client (still not behind the status queue) */
    struct kwrite *lqhead, *lqtail;
    size_t linflight;
    struct kwrite *eqhead, *eqtail; /* Events: sent only when no other write waits */
    size_t eqn, ev_inflight;
    int64_t last_ev_us;
    struct kc_informer *pods_inf, *nodes_inf;
    uint32_t next_ip;
    void (*on_registered)(void *, int);
    void *reg_ud;
    void (*on_done)(void *);
    void *done_ud;
    bool stopping, deleting_nodes, node_status_main;
    struct ksim_stats st;
    uint64_t log_sec;
    int log_count;
    uint64_t log_dropped;
};

static void klog(struct ksim *s, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void klog(struct ksim *s, const char *fmt, ...) {
    uint64_t sec = uv_now(s->loop) / 1000;
    if (sec != s->log_sec) {
        if (s->log_dropped) fprintf(stderr, "kubelet-sim: level=warn msg=\"%llu log lines suppressed\"\n",
                                    (unsigned long long)s->log_dropped);
        s->log_sec = sec, s->log_count = 0, s->log_dropped = 0;
    }
    if (++s->log_count > LOG_PER_SEC) {
        s->log_dropped++;
        return;
    }
    va_list ap;
    va_start(ap, fmt);
    fputs("kubelet-sim: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
}

static int64_t wall_s(void) { return (int64_t)time(NULL); }
static int64_t wall_us(void) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}
static void ip_text(uint32_t ip, char out[16]) {
    snprintf(out, 16, "%u.%u.%u.%u", ip >> 24, (ip >> 16) & 255, (ip >> 8) & 255, ip & 255);
}
static uint32_t node_ip(int i) { return (172u << 24 | 16u << 16) + (uint32_t)i + 1; }

/* ---- the deadline heap, drained by one uv timer ---- */

static bool hless(struct ksim *s, size_t a, size_t b) { return s->heap[a]->at < s->heap[b]->at; }
static void hswap(struct ksim *s, size_t a, size_t b) {
    struct ktimer *t = s->heap[a];
    s->heap[a] = s->heap[b];
    s->heap[b] = t;
    s->heap[a]->hidx = (int32_t)a;
    s->heap[b]->hidx = (int32_t)b;
}
static void hup(struct ksim *s, size_t i) {
    while (i && hless(s, i, (i - 1) / 2)) hswap(s, i, (i - 1) / 2), i = (i - 1) / 2;
}
static void hdown(struct ksim *s, size_t i) {
    for (;;) {
        size_t l = 2 * i + 1, r = l + 1, m = i;
        if (l < s->hn && hless(s, l, m)) m = l;
        if (r < s->hn && hless(s, r, m)) m = r;
        if (m == i) return;
        hswap(s, i, m);
        i = m;
    }
}
static void heap_del(struct ksim *s, struct ktimer *t) {
    if (t->hidx < 0) return;
    size_t i = (size_t)t->hidx;
    t->hidx = -1;
    if (i == --s->hn) return;
    s->heap[i] = s->heap[s->hn];
    s->heap[i]->hidx = (int32_t)i;
    hup(s, i);
    hdown(s, (size_t)s->heap[i]->hidx);
}
static void on_timer(uv_timer_t *h);
static void arm(struct ksim *s) {
    if (s->stopping || !s->hn) return;
    uint64_t at = s->heap[0]->at;
    if (s->armed && s->armed_at <= at) return;
    uint64_t now = uv_now(s->loop);
    uv_timer_start(&s->timer, on_timer, at > now ? at - now : 0, 0);
    s->armed = true;
    s->armed_at = at;
}
static int heap_set(struct ksim *s, struct ktimer *t, uint64_t at) {
    if (t->hidx >= 0) {
        t->at = at;
        hup(s, (size_t)t->hidx);
        hdown(s, (size_t)t->hidx);
    } else {
        if (s->hn == s->hcap) {
            size_t nc = s->hcap ? s->hcap * 2 : 1024;
            struct ktimer **nh = realloc(s->heap, nc * sizeof *nh);
            if (!nh) return -ENOMEM;
            s->heap = nh, s->hcap = nc;
        }
        t->at = at;
        t->hidx = (int32_t)s->hn;
        s->heap[s->hn++] = t;
        hup(s, s->hn - 1);
    }
    arm(s);
    return 0;
}

/* ---- pods by key ---- */

static uint64_t hash_key(const char *k) {
    uint64_t h = 1469598103934665603ULL;
    for (; *k; k++) h = (h ^ (unsigned char)*k) * 1099511628211ULL;
    return h;
}
static struct kpod *pod_find(struct ksim *s, const char *key) {
    for (struct kpod *p = s->buckets[hash_key(key) & (s->nbuckets - 1)]; p; p = p->hnext)
        if (!strcmp(p->key, key)) return p;
    return NULL;
}
static void pod_hash_add(struct ksim *s, struct kpod *p) {
    if (s->npods >= s->nbuckets) {
        size_t nb = s->nbuckets * 2;
        struct kpod **b = calloc(nb, sizeof *b);
        if (b) {
            for (size_t i = 0; i < s->nbuckets; i++)
                for (struct kpod *q = s->buckets[i], *nx; q; q = nx) {
                    nx = q->hnext;
                    size_t j = hash_key(q->key) & (nb - 1);
                    q->hnext = b[j];
                    b[j] = q;
                }
            free(s->buckets);
            s->buckets = b, s->nbuckets = nb;
        }
    }
    size_t j = hash_key(p->key) & (s->nbuckets - 1);
    p->hnext = s->buckets[j];
    s->buckets[j] = p;
    s->npods++;
}
static void pod_hash_del(struct ksim *s, struct kpod *p) {
    for (struct kpod **pp = &s->buckets[hash_key(p->key) & (s->nbuckets - 1)]; *pp; pp = &(*pp)->hnext)
        if (*pp == p) {
            *pp = p->hnext;
            s->npods--;
            return;
        }
}

/* "ns/name" of an object into buf; false when it has no name. */
static bool obj_key(const json_t *obj, char *buf, size_t len) {
    const json_t *md = json_object_get(obj, "metadata");
    const char *ns = json_string_value(json_object_get(md, "namespace"));
    const char *name = json_string_value(json_object_get(md, "name"));
    if (!name) return false;
    int n = snprintf(buf, len, "%s/%s", ns ? ns : "", name);
    return n > 0 && (size_t)n < len;
}

/* ---- writes: a FIFO with bounded concurrency; retries wait in the heap ---- */

static struct kwrite *write_new(struct ksim *s, enum wkind kind, int node, struct kpod *p) {
    struct kwrite *w = calloc(1, sizeof *w);
    if (!w) return NULL;
    w->t.hidx = -1;
    w->t.kind = T_WRITE;
    w->s = s;
    w->kind = (uint8_t)kind;
    w->node = node;
    w->pod = p;
    return w;
}
/* A renewal (or the create a renewal that found no Lease turns into), as
 * opposed to the lease write of a node's registration, which keeps its order
 * in the main queue. */
static bool lease_path(const struct kwrite *w) {
    return (w->kind == W_LEASE_RENEW || w->kind == W_LEASE_CREATE) && !w->reg;
}

static void enqueue(struct ksim *s, struct kwrite *w) {
    w->next = NULL;
    if (lease_path(w)) {
        if (s->lqtail) s->lqtail->next = w;
        else s->lqhead = w;
        s->lqtail = w;
        return;
    }
    if (s->qtail) s->qtail->next = w;
    else s->qhead = w;
    s->qtail = w;
    s->queued++;
}
static void kevent_free(struct kevent *ev) {
    if (!ev) return;
    if (ev->slot) ev->slot->pending = NULL;
    free(ev->ns);
    free(ev->pod);
    free(ev->uid);
    free(ev->ctr);
    free(ev->msg);
    free(ev->node);
    free(ev);
}
static void write_free(struct kwrite *w) {
    if (w->pod && w->pod->w == w) w->pod->w = NULL;
    kevent_free(w->ev);
    free(w);
}
static void ev_enqueue(struct ksim *s, struct kwrite *w) {
    w->next = NULL;
    if (s->eqtail) s->eqtail->next = w;
    else s->eqhead = w;
    s->eqtail = w;
    s->eqn++;
}
static int node_write(struct ksim *s, enum wkind kind, int node, bool reg) {
    struct kwrite *w = write_new(s, kind, node, NULL);
    if (!w) return -ENOMEM;
    w->reg = reg;
    enqueue(s, w);
    return 0;
}

static void pump(struct ksim *s);
static void pod_kick(struct ksim *s, struct kpod *p);

/* ---- bodies ---- */

/* ---- the pod status patch, written as JSON text (building it as a tree
 * and dumping it was a quarter of kubelet-sim's CPU) ---- */

struct tb {
    char *p;
    size_t len, cap;
    bool oom;
};

static void tb_put(struct tb *b, const char *s, size_t n) {
    if (!b->oom && jdump_append(&b->p, &b->len, &b->cap, s, n)) b->oom = true;
}
static void tb_lit(struct tb *b, const char *s) { tb_put(b, s, strlen(s)); }

/* s as a JSON string, quoted, escaped as jansson escapes it. */
static void tb_str(struct tb *b, const char *s) {
    if (!b->oom && jdump_append_string(&b->p, &b->len, &b->cap, s, strlen(s))) b->oom = true;
}

/* ,"key":"value" (key is trusted text) */
static void tb_kv(struct tb *b, const char *key, const char *v) {
    tb_put(b, ",\"", 2);
    tb_lit(b, key);
    tb_put(b, "\":", 2);
    tb_str(b, v);
}

char *ksim_json_quote(const char *s) {
    struct tb b = {0};
    tb_str(&b, s);
    return b.oom ? (free(b.p), NULL) : b.p;
}

static void tb_cond(struct tb *b, bool first, const char *type, const char *status, int64_t since, const char *reason) {
    char ts[32];
    ksim_rfc3339(since, ts);
    tb_lit(b, first ? "{\"type\":" : ",{\"type\":");
    tb_str(b, type);
    tb_kv(b, "status", status);
    tb_lit(b, ",\"lastProbeTime\":null");
    tb_kv(b, "lastTransitionTime", ts);
    if (reason) tb_kv(b, "reason", reason);
    tb_put(b, "}", 1);
}

static void tb_terminated(struct tb *b, int code, int64_t started, int64_t finished) {
    char a[32], f[32], num[24];
    ksim_rfc3339(started, a);
    ksim_rfc3339(finished, f);
    snprintf(num, sizeof num, "%d", code);
    tb_lit(b, "{\"terminated\":{\"exitCode\":");
    tb_lit(b, num);
    tb_kv(b, "reason", code ? "Error" : "Completed");
    tb_kv(b, "startedAt", a);
    tb_kv(b, "finishedAt", f);
    tb_lit(b, "}}");
}

static void tb_container_statuses(struct tb *b, struct kpod *p, const json_t *list, bool init, int64_t now) {
    size_t i;
    const json_t *c;
    char ts[32], id[96], num[24];
    tb_put(b, "[", 1);
    json_array_foreach(list, i, c) {
        const char *name = json_string_value(json_object_get(c, "name"));
        const char *image = json_string_value(json_object_get(c, "image"));
        snprintf(id, sizeof id, "kubelet-sim://%.36s-%zu-%d", p->uid, i, init ? 0 : p->restarts);
        bool ready = !init && p->state == PS_RUNNING;
        tb_lit(b, i ? ",{\"name\":" : "{\"name\":");
        tb_str(b, name ? name : "");
        tb_kv(b, "image", image ? image : "");
        tb_lit(b, ",\"imageID\":\"\"");
        tb_kv(b, "containerID", id);
        tb_lit(b, ready ? ",\"ready\":true,\"started\":true" : ",\"ready\":false,\"started\":false");
        snprintf(num, sizeof num, "%d", init ? 0 : p->restarts);
        tb_lit(b, ",\"restartCount\":");
        tb_lit(b, num);
        tb_lit(b, ",\"state\":");
        if (init) {
            tb_terminated(b, 0, p->start_time, p->start_time);
        } else if (p->state == PS_RUNNING) {
            ksim_rfc3339(p->started_at, ts);
            tb_lit(b, "{\"running\":{\"startedAt\":");
            tb_str(b, ts);
            tb_lit(b, "}}");
        } else if (p->state == PS_BACKOFF) {
            tb_lit(b, "{\"waiting\":{\"reason\":\"CrashLoopBackOff\",\"message\":"
                      "\"back-off restarting failed container\"}}");
        } else if (p->state == PS_STARTING || p->state == PS_HELD) {
            tb_lit(b, "{\"waiting\":{\"reason\":\"ContainerCreating\"}}");
        } else {
            tb_terminated(b, p->exit_code, p->started_at, p->finished_at ? p->finished_at : now);
        }
        tb_lit(b, ",\"lastState\":");
        if (!init && p->has_last) tb_terminated(b, p->last_exit, p->last_started, p->last_finished);
        else tb_lit(b, "{}");
        tb_put(b, "}", 1);
    }
    tb_put(b, "]", 1);
}

/* The merge patch of a pod's status, as JSON text (malloc'd; NULL when out of memory). */
static char *pod_status_patch(struct ksim *s, struct kpod *p, size_t *len) {
    int64_t now = wall_s();
    struct tb b = {0};
    tb_lit(&b, "{\"metadata\":{\"uid\":");
    tb_str(&b, p->uid);
    tb_lit(&b, "},\"status\":{\"phase\":");
    (void)s;
    if (p->state == PS_REJECTED) {
        tb_str(&b, "Failed");
        tb_kv(&b, "reason", p->reason ? p->reason : "");
        tb_kv(&b, "message", p->message ? p->message : "");
        tb_lit(&b, "}}");
        *len = b.len;
        return b.oom ? (free(b.p), NULL) : b.p;
    }
    const char *phase = "Pending";
    if (p->state == PS_RUNNING || p->state == PS_BACKOFF) phase = "Running";
    else if (p->state == PS_DONE || p->state == PS_TERMINATING || p->state == PS_DELETING)
        phase = p->exit_code ? "Failed" : "Succeeded";
    char hip[16], pip[16], ts[32];
    ip_text(node_ip(p->node), hip);
    ip_text(p->ip, pip);
    ksim_rfc3339(p->start_time, ts);
    bool ready = p->state == PS_RUNNING;
    bool done = !strcmp(phase, "Succeeded") || !strcmp(phase, "Failed");
    int64_t since = ready ? p->started_at : p->finished_at ? p->finished_at : p->start_time;
    tb_str(&b, phase);
    tb_lit(&b, ",\"conditions\":[");
    tb_cond(&b, true, "PodReadyToStartContainers", done ? "False" : "True", since, NULL);
    tb_cond(&b, false, "Initialized", "True", p->start_time, done ? "PodCompleted" : NULL);
    tb_cond(&b, false, "Ready", ready ? "True" : "False", since,
            done ? "PodCompleted" : ready ? NULL : "ContainersNotReady");
    tb_cond(&b, false, "ContainersReady", ready ? "True" : "False", since,
            done ? "PodCompleted" : ready ? NULL : "ContainersNotReady");
    tb_cond(&b, false, "PodScheduled", "True", p->start_time, NULL);
    tb_put(&b, "]", 1);
    tb_kv(&b, "hostIP", hip);
    tb_lit(&b, ",\"hostIPs\":[{\"ip\":");
    tb_str(&b, hip);
    tb_lit(&b, "}]");
    tb_kv(&b, "podIP", pip);
    tb_lit(&b, ",\"podIPs\":[{\"ip\":");
    tb_str(&b, pip);
    tb_lit(&b, "}]");
    tb_kv(&b, "startTime", ts);
    /* no qosClass: the apiserver sets it at create and refuses a change */
    tb_lit(&b, ",\"containerStatuses\":");
    tb_container_statuses(&b, p, p->ctrs, false, now);
    if (json_array_size(p->inits)) {
        tb_lit(&b, ",\"initContainerStatuses\":");
        tb_container_statuses(&b, p, p->inits, true, now);
    }
    tb_lit(&b, "}}");
    *len = b.len;
    return b.oom ? (free(b.p), NULL) : b.p;
}

static json_t *res_map(struct ksim *s, const struct knode *n) {
    char cpu[32], mem[32], disk[32], pods[32], gpu[32];
    quantity_format(RES_CPU, n->cap.cpu, cpu, sizeof cpu);
    quantity_format(RES_MEMORY, n->cap.memory, mem, sizeof mem);
    quantity_format(RES_DISK, s->cfg.storage_bytes, disk, sizeof disk);
    snprintf(pods, sizeof pods, "%lld", (long long)n->cap.pods);
    json_t *m = json_pack("{s:s, s:s, s:s, s:s}", "cpu", cpu, "memory", mem, "pods", pods, "ephemeral-storage", disk);
    if (n->cap.gpu > 0) {
        snprintf(gpu, sizeof gpu, "%lld", (long long)(n->cap.gpu / 1000));
        json_object_set_new(m, "nvidia.com/gpu", json_string(gpu));
    }
    return m;
}

static json_t *node_status(struct ksim *s, struct knode *n) {
    int64_t now = wall_s();
    char hb[32], since[32], ip[16];
    ksim_rfc3339(now, hb);
    ksim_rfc3339(n->ready_since, since);
    ip_text(node_ip((int)(n - s->nodes)), ip);
    json_t *conds = json_array();
    static const char *const pressure[][3] = {{"MemoryPressure", "KubeletHasSufficientMemory", "kubelet has sufficient memory available"},
                                              {"DiskPressure", "KubeletHasNoDiskPressure", "kubelet has no disk pressure"},
                                              {"PIDPressure", "KubeletHasSufficientPID", "kubelet has sufficient PID available"}};
    for (int i = 0; i < 3; i++)
        json_array_append_new(conds, json_pack("{s:s, s:s, s:s, s:s, s:s, s:s}", "type", pressure[i][0], "status",
                                               "False", "lastHeartbeatTime", hb, "lastTransitionTime", since,
                                               "reason", pressure[i][1], "message", pressure[i][2]));
    json_array_append_new(conds, json_pack("{s:s, s:s, s:s, s:s, s:s, s:s}", "type", "Ready", "status",
                                           n->down ? "Unknown" : "True", "lastHeartbeatTime", hb,
                                           "lastTransitionTime", since, "reason",
                                           n->down ? "NodeStatusUnknown" : "KubeletReady", "message",
                                           n->down ? "Kubelet stopped posting node status." : "kubelet is posting ready status"));
    return json_pack("{s:o, s:o, s:o, s:[{s:s, s:s}, {s:s, s:s}], s:{s:s, s:s, s:s, s:s, s:s, s:s, s:s, s:s, s:s, s:s}, "
                     "s:{s:{s:i}}}",
                     "capacity", res_map(s, n), "allocatable", res_map(s, n), "conditions", conds, "addresses", "type",
                     "InternalIP", "address", ip, "type", "Hostname", "address", n->name, "nodeInfo", "kubeletVersion",
                     s->cfg.kubelet_version, "kubeProxyVersion", s->cfg.kubelet_version, "operatingSystem", "linux",
                     "architecture", "amd64", "containerRuntimeVersion", "kubelet-sim://1", "osImage",
                     "kubelet-sim", "kernelVersion", "0.0.0-sim", "machineID", n->name, "systemUUID", n->name,
                     "bootID", n->name, "daemonEndpoints", "kubeletEndpoint", "Port", 10250);
}

static json_t *node_labels(struct ksim *s, int i) {
    json_t *l = json_deep_copy(s->cfg.labels);
    const char *name = s->nodes[i].name;
    json_object_set_new(l, "kubernetes.io/hostname", json_string(name));
    json_object_set_new(l, "kubernetes.io/os", json_string("linux"));
    json_object_set_new(l, "kubernetes.io/arch", json_string("amd64"));
    if (s->cfg.zones > 0) {
        char z[32];
        snprintf(z, sizeof z, "zone-%d", i % s->cfg.zones);
        json_object_set_new(l, "topology.kubernetes.io/zone", json_string(z));
    }
    return l;
}

static json_t *node_annotations(struct ksim *s, int i, bool takeover) {
    json_t *a = json_pack("{s:s}", "kubelet-sim.peloton.io/simulated", "true");
    if (s->nodes[i].down) json_object_set_new(a, KSIM_ANN_DOWN, json_string("true"));
    else if (takeover) json_object_set_new(a, KSIM_ANN_DOWN, json_null()); /* the flags set the start state */
    return a;
}

static json_t *lease_spec(struct ksim *s, int i) {
    char mt[32];
    ksim_microtime(wall_us(), mt);
    return json_pack("{s:s, s:i, s:s}", "holderIdentity", s->nodes[i].name, "leaseDurationSeconds",
                     s->cfg.lease_seconds, "renewTime", mt);
}

/* ---- sending ---- */

static void on_write_done(void *ud, const struct kc_response *r);
static void complete(struct kwrite *w, const struct kc_response *r);

static void pod_path(const struct kpod *p, char *out, size_t len, const char *sub) {
    const char *slash = strchr(p->key, '/');
    snprintf(out, len, "/api/v1/namespaces/%.*s/pods/%s%s", (int)(slash - p->key), p->key, slash + 1, sub);
}

/* Builds the request at send time from the current state, so a pod's queued
 * changes coalesce into one write. Returns false when nothing is to be sent. */
static bool build(struct ksim *s, struct kwrite *w, const char **method, char *path, size_t plen, json_t **body,
                  char **text, size_t *tlen, const char **ct) {
    struct knode *n = &s->nodes[w->node];
    *ct = NULL;
    *body = NULL;
    *text = NULL;
    if (w->kind == W_POD) {
        struct kpod *p = w->pod;
        if (!p || n->down) return false; /* a down kubelet reports nothing; the flags stay for later */
        if (p->needs_status) {
            p->needs_status = false;
            w->is_delete = false;
            *method = "PATCH";
            *ct = "application/merge-patch+json";
            pod_path(p, path, plen, "/status");
            *text = pod_status_patch(s, p, tlen);
            return true;
        }
        if (p->state == PS_TERMINATING) p->state = PS_DELETING; /* final status written: now the delete */
        if (p->state != PS_DELETING || p->delete_sent) return false;
        p->delete_sent = true;
        w->is_delete = true;
        *method = "DELETE";
        pod_path(p, path, plen, "?gracePeriodSeconds=0");
        *body = json_pack("{s:s, s:s, s:i, s:{s:s}}", "kind", "DeleteOptions", "apiVersion", "v1",
                          "gracePeriodSeconds", 0, "preconditions", "uid", p->uid);
        return true;
    }
    switch (w->kind) {
    case W_NODE_CREATE:
        *method = "POST";
        snprintf(path, plen, "/api/v1/nodes");
        *body = json_pack("{s:s, s:s, s:{s:s, s:o, s:o}, s:{}, s:o}", "kind", "Node", "apiVersion", "v1", "metadata",
                          "name", n->name, "labels", node_labels(s, w->node), "annotations",
                          node_annotations(s, w->node, false), "spec", "status", node_status(s, n));
        return true;
    case W_NODE_TAKEOVER:
        *method = "PATCH";
        *ct = "application/merge-patch+json";
        snprintf(path, plen, "/api/v1/nodes/%s", n->name);
        *body = json_pack("{s:{s:o, s:o}}", "metadata", "labels", node_labels(s, w->node), "annotations",
                          node_annotations(s, w->node, true));
        return true;
    case W_NODE_STATUS:
        *method = "PATCH";
        *ct = "application/merge-patch+json";
        snprintf(path, plen, "/api/v1/nodes/%s%s", n->name, s->node_status_main ? "" : "/status");
        *body = json_pack("{s:o}", "status", node_status(s, n));
        return true;
    case W_LEASE_CREATE:
        *method = "POST";
        snprintf(path, plen, "/apis/coordination.k8s.io/v1/namespaces/" KSIM_LEASE_NS "/leases");
        *body = json_pack("{s:s, s:s, s:{s:s, s:s}, s:o}", "kind", "Lease", "apiVersion", "coordination.k8s.io/v1",
                          "metadata", "name", n->name, "namespace", KSIM_LEASE_NS, "spec", lease_spec(s, w->node));
        return true;
    case W_LEASE_RENEW:
        *method = "PATCH";
        *ct = "application/merge-patch+json";
        snprintf(path, plen, "/apis/coordination.k8s.io/v1/namespaces/" KSIM_LEASE_NS "/leases/%s", n->name);
        *body = json_pack("{s:o}", "spec", lease_spec(s, w->node));
        return true;
    case W_NODE_DELETE:
        *method = "DELETE";
        snprintf(path, plen, "/api/v1/nodes/%s", n->name);
        return true;
    case W_LEASE_DELETE:
        *method = "DELETE";
        snprintf(path, plen, "/apis/coordination.k8s.io/v1/namespaces/" KSIM_LEASE_NS "/leases/%s", n->name);
        return true;
    default:
        return false;
    }
}

/* An Event write's path and body, written as JSON text (as the status
 * patch is): the new Event, or its count and lastTimestamp when posted before. */
static char *event_body(const struct kevent *ev, char *path, size_t plen, size_t *len) {
    char name[300], ts[32], num[24];
    struct tb b = {0};
    snprintf(name, sizeof name, "%.200s.%llx", ev->pod, (unsigned long long)ev->name_us);
    snprintf(num, sizeof num, "%u", ev->count);
    ksim_rfc3339(ev->last, ts);
    if (ev->patch) {
        snprintf(path, plen, "/api/v1/namespaces/%s/events/%s", ev->ns, name);
        tb_lit(&b, "{\"count\":");
        tb_lit(&b, num);
        tb_kv(&b, "lastTimestamp", ts);
        tb_lit(&b, "}");
    } else {
        char fp[300];
        snprintf(path, plen, "/api/v1/namespaces/%s/events", ev->ns);
        snprintf(fp, sizeof fp, "spec.containers{%s}", ev->ctr);
        tb_lit(&b, "{\"apiVersion\":\"v1\",\"kind\":\"Event\",\"metadata\":{\"name\":");
        tb_str(&b, name);
        tb_kv(&b, "namespace", ev->ns);
        tb_lit(&b, "},\"involvedObject\":{\"apiVersion\":\"v1\",\"kind\":\"Pod\"");
        tb_kv(&b, "namespace", ev->ns);
        tb_kv(&b, "name", ev->pod);
        tb_kv(&b, "uid", ev->uid);
        tb_kv(&b, "fieldPath", fp);
        tb_lit(&b, "}");
        tb_kv(&b, "reason", ev_reasons[ev->reason]);
        tb_kv(&b, "message", ev->msg);
        tb_kv(&b, "type", ev->reason == EV_BACKOFF ? "Warning" : "Normal");
        tb_lit(&b, ",\"source\":{\"component\":\"kubelet\"");
        tb_kv(&b, "host", ev->node);
        tb_lit(&b, "},\"reportingComponent\":\"kubelet\"");
        tb_kv(&b, "reportingInstance", ev->node);
        tb_kv(&b, "lastTimestamp", ts);
        ksim_rfc3339(ev->first, ts);
        tb_kv(&b, "firstTimestamp", ts);
        tb_lit(&b, ",\"count\":");
        tb_lit(&b, num);
        tb_lit(&b, "}");
    }
    if (b.oom) {
        free(b.p);
        return NULL;
    }
    *len = b.len;
    return b.p;
}

/* One write on its client: 0, or after a refusal before sending, its
 * completion as a transport failure (retries wait in the heap: no recursion). */
static void send_write(struct ksim *s, struct kwrite *w, struct kclient *kc) {
    const char *method = NULL, *ct = NULL;
    char path[600];
    json_t *body = NULL;
    char *text = NULL;
    size_t tlen = 0;
    if (!build(s, w, &method, path, sizeof path, &body, &text, &tlen, &ct)) {
        if (w->own) s->linflight--;
        else s->inflight--;
        write_free(w);
        return;
    }
    int rc = text ? kclient_request_text(kc, method, path, text, tlen, ct, on_write_done, w)
                  : kclient_request(kc, method, path, body, ct, on_write_done, w);
    json_decref(body);
    free(text);
    if (rc) {
        struct kc_response fake = {.status = 0, .raw = "", .error = "request not started"};
        complete(w, &fake);
    }
}

static void pump(struct ksim *s) {
    if (s->stopping && !s->deleting_nodes) return;
    while (!s->stopping && s->lqhead) { /* renewals first, on their own client, whatever the status queue holds */
        struct kwrite *w = s->lqhead;
        s->lqhead = w->next;
        if (!s->lqhead) s->lqtail = NULL;
        w->own = true;
        s->linflight++;
        send_write(s, w, s->lkc ? s->lkc : s->kc);
    }
    while (s->qhead && s->inflight < (size_t)s->cfg.max_inflight) {
        struct kwrite *w = s->qhead;
        s->qhead = w->next;
        if (!s->qhead) s->qtail = NULL;
        s->queued--;
        s->inflight++;
        send_write(s, w, s->kc);
    }
    /* Events take what status writes leave, and at most a quarter of the slots */
    size_t ev_cap = s->cfg.max_inflight > 4 ? (size_t)s->cfg.max_inflight / 4 : 1;
    while (!s->stopping && !s->qhead && s->eqhead && s->inflight < (size_t)s->cfg.max_inflight &&
           s->ev_inflight < ev_cap) {
        struct kwrite *w = s->eqhead;
        s->eqhead = w->next;
        if (!s->eqhead) s->eqtail = NULL;
        s->eqn--;
        struct kevent *ev = w->ev;
        if (ev->slot) ev->slot->pending = NULL; /* sent: a repeat from now on is a new write */
        ev->slot = NULL;
        char path[800];
        size_t len = 0;
        char *body = event_body(ev, path, sizeof path, &len);
        s->inflight++;
        s->ev_inflight++;
        if (!body || kclient_request_text(s->kc, ev->patch ? "PATCH" : "POST", path, body, len,
                                          ev->patch ? "application/merge-patch+json" : "application/json",
                                          on_write_done, w)) {
            struct kc_response fake = {.status = 0, .raw = "", .error = "request not started"};
            complete(w, &fake);
        }
        free(body);
    }
}

/* Records an Event of container ci of a pod: queued, or counted on the same
 * Event still queued; dropped (counted) when the queue is full. */
static void pod_event(struct ksim *s, struct kpod *p, enum evreason r, size_t ci) {
    if (!s->cfg.events || s->stopping || s->nodes[p->node].down) return; /* a down kubelet posts nothing */
    const json_t *c = json_array_get(p->ctrs, ci);
    const char *cname = json_string_value(json_object_get(c, "name"));
    const char *image = json_string_value(json_object_get(c, "image"));
    if (!cname || !image) return;
    size_t nc = json_array_size(p->ctrs);
    if (p->nevs < nc) {
        struct kevslot *e = realloc(p->evs, nc * EV_N * sizeof *e);
        if (!e) {
            s->st.events_dropped++;
            return;
        }
        for (size_t k = p->nevs * EV_N; k < nc * EV_N; k++) e[k] = (struct kevslot){0};
        for (size_t k = 0; k < p->nevs * EV_N; k++) /* the queued writes follow their slot */
            if (e[k].pending) e[k].pending->ev->slot = &e[k];
        p->evs = e, p->nevs = nc;
    }
    struct kevslot *sl = &p->evs[ci * EV_N + r];
    int64_t now = wall_s();
    sl->count++;
    if (sl->pending) {
        sl->pending->ev->count = sl->count;
        sl->pending->ev->last = now;
        s->st.events_counted++;
        return;
    }
    if (s->eqn >= EVQ_MAX) {
        s->st.events_dropped++;
        return;
    }
    if (!sl->name_us) {
        int64_t us = wall_us();
        sl->name_us = s->last_ev_us = us > s->last_ev_us ? us : s->last_ev_us + 1;
        sl->first = now;
    }
    const char *slash = strchr(p->key, '/');
    char msg[700];
    switch (r) {
    case EV_PULLED:
        snprintf(msg, sizeof msg, "Container image \"%.300s\" already present on machine", image);
        break;
    case EV_CREATED:
        snprintf(msg, sizeof msg, "Created container %s", cname);
        break;
    case EV_STARTED:
        snprintf(msg, sizeof msg, "Started container %s", cname);
        break;
    case EV_KILLING:
        snprintf(msg, sizeof msg, "Stopping container %s", cname);
        break;
    default:
        snprintf(msg, sizeof msg, "Back-off restarting failed container %s in pod %s_%.*s(%s)", cname, slash + 1,
                 (int)(slash - p->key), p->key, p->uid);
    }
    struct kevent *ev = calloc(1, sizeof *ev);
    struct kwrite *w = ev ? write_new(s, W_EVENT, p->node, NULL) : NULL;
    if (ev) {
        ev->ns = strndup(p->key, (size_t)(slash - p->key));
        ev->pod = strdup(slash + 1), ev->uid = strdup(p->uid), ev->ctr = strdup(cname);
        ev->msg = strdup(msg), ev->node = strdup(s->nodes[p->node].name);
    }
    if (!w || !ev->ns || !ev->pod || !ev->uid || !ev->ctr || !ev->msg || !ev->node) {
        kevent_free(ev);
        free(w);
        s->st.events_dropped++;
        return;
    }
    ev->reason = (uint8_t)r, ev->count = sl->count, ev->first = sl->first, ev->last = now, ev->name_us = sl->name_us;
    ev->patch = sl->count > 1;
    ev->slot = sl;
    sl->pending = w;
    w->ev = ev;
    ev_enqueue(s, w);
}

/* An Event write's answer: a PATCH of one the server no longer has posts it
 * again with its count (and a POST of a name taken counts on it), once. */
static void event_done(struct ksim *s, struct kwrite *w, const struct kc_response *r) {
    struct kevent *ev = w->ev;
    if (r->status >= 200 && r->status < 300) {
        if (ev->patch) s->st.events_counted++;
        else s->st.events_posted++;
    } else if (!s->stopping && !w->tries && (r->status == 404 || r->status == 409)) {
        w->tries++;
        ev->patch = r->status == 409;
        ev_enqueue(s, w);
        return;
    } else {
        s->st.events_dropped++;
    }
    write_free(w);
}

/* ---- pods ---- */

static void node_release(struct ksim *s, struct kpod *p) {
    if (!p->counted) return;
    struct ksim_res *u = &s->nodes[p->node].used;
    u->cpu -= p->req.cpu, u->memory -= p->req.memory, u->gpu -= p->req.gpu, u->pods -= p->req.pods;
    p->counted = false;
}

static bool pod_wants_write(const struct kpod *p) {
    return p->needs_status || p->state == PS_TERMINATING || (p->state == PS_DELETING && !p->delete_sent);
}

static void pod_kick(struct ksim *s, struct kpod *p) {
    if (s->stopping || p->w || s->nodes[p->node].down || !pod_wants_write(p)) return;
    if (!(p->w = write_new(s, W_POD, p->node, p))) return;
    enqueue(s, p->w);
}

static void pod_report(struct ksim *s, struct kpod *p) {
    p->needs_status = true;
    pod_kick(s, p);
}

static uint32_t ip_alloc(struct ksim *s) {
    do s->next_ip++;
    while ((s->next_ip & 255) == 0 || (s->next_ip & 255) == 255);
    return (10u << 24) | (s->next_ip & 0xffffff);
}

static void pod_exit(struct ksim *s, struct kpod *p);

static void pod_run(struct ksim *s, struct kpod *p) {
    p->state = PS_RUNNING;
    p->started_at = wall_s();
    s->st.running++;
    for (size_t i = 0; s->cfg.events && i < json_array_size(p->ctrs); i++) {
        pod_event(s, p, EV_PULLED, i);
        pod_event(s, p, EV_CREATED, i);
        pod_event(s, p, EV_STARTED, i);
    }
    if (p->run_ms == 0) { /* exits at once: its first report already shows it terminated, as a real kubelet's does */
        pod_exit(s, p);
        return;
    }
    if (p->run_ms >= 0) heap_set(s, &p->t, uv_now(s->loop) + (uint64_t)p->run_ms);
    pod_report(s, p);
}

static void pod_admit(struct ksim *s, struct kpod *p) {
    char msg[300];
    struct knode *n = &s->nodes[p->node];
    p->start_time = wall_s();
    const char *reason = ksim_admit(&n->cap, &n->used, &p->req, msg, sizeof msg);
    if (reason) {
        p->state = PS_REJECTED;
        p->reason = reason;
        p->message = strdup(msg);
        s->st.rejected++;
        pod_report(s, p);
        return;
    }
    n->used.cpu += p->req.cpu, n->used.memory += p->req.memory, n->used.gpu += p->req.gpu, n->used.pods += 1;
    p->counted = true;
    p->ip = ip_alloc(s);
    if (p->start_ms > 0) {
        p->state = PS_STARTING;
        heap_set(s, &p->t, uv_now(s->loop) + (uint64_t)p->start_ms);
    } else {
        pod_run(s, p);
    }
}

static void pod_exit(struct ksim *s, struct kpod *p) {
    int64_t now = wall_s();
    p->finished_at = now;
    switch (ksim_exit_action((enum ksim_restart)p->restart, p->exit_code)) {
    case KSIM_EXIT_RESTART: {
        p->has_last = true;
        p->last_exit = p->exit_code, p->last_started = p->started_at, p->last_finished = now;
        int64_t d = ksim_backoff_ms((int64_t)(s->cfg.backoff_seconds * 1000), (int64_t)(s->cfg.backoff_max_seconds * 1000),
                                    p->restarts + 1);
        if (d < 10) d = 10; /* a zero run and zero backoff must still let the loop breathe */
        p->state = PS_BACKOFF;
        heap_set(s, &p->t, uv_now(s->loop) + (uint64_t)d);
        for (size_t i = 0; s->cfg.events && i < json_array_size(p->ctrs); i++) pod_event(s, p, EV_BACKOFF, i);
        if (d >= 1000) pod_report(s, p); /* a visible CrashLoopBackOff only when it lasts */
        return;
    }
    case KSIM_EXIT_SUCCEEDED:
        s->st.succeeded++;
        break;
    case KSIM_EXIT_FAILED:
        s->st.failed++;
        break;
    }
    p->state = PS_DONE;
    node_release(s, p);
    pod_report(s, p);
}

static void pod_timer(struct ksim *s, struct kpod *p) {
    switch (p->state) {
    case PS_STARTING:
        pod_run(s, p);
        break;
    case PS_RUNNING:
        pod_exit(s, p);
        break;
    case PS_BACKOFF:
        p->restarts++;
        s->st.restarts++;
        pod_run(s, p);
        break;
    default:
        break;
    }
}

/* deletionTimestamp seen: stop the containers, report them, then the final DELETE. */
static void pod_delete_begin(struct ksim *s, struct kpod *p) {
    if (s->nodes[p->node].down) return; /* a dead kubelet cannot confirm; done when it is back */
    heap_del(s, &p->t);
    switch (p->state) {
    case PS_RUNNING:
    case PS_BACKOFF:
        if (p->state == PS_RUNNING) p->exit_code = 0, p->finished_at = wall_s();
        else p->exit_code = p->last_exit, p->finished_at = p->last_finished;
        for (size_t i = 0; p->state == PS_RUNNING && s->cfg.events && i < json_array_size(p->ctrs); i++)
            pod_event(s, p, EV_KILLING, i);
        p->killed = true;
        node_release(s, p);
        p->state = PS_TERMINATING;
        pod_report(s, p);
        break;
    case PS_TERMINATING:
    case PS_DELETING:
        break;
    default:
        node_release(s, p);
        p->state = PS_DELETING;
        pod_kick(s, p);
    }
}

static void pod_free(struct kpod *p) {
    free(p->key);
    free(p->uid);
    free(p->message);
    json_decref(p->ctrs);
    json_decref(p->inits);
    free(p->evs);
    free(p);
}

static void pod_forget(struct ksim *s, struct kpod *p) {
    heap_del(s, &p->t);
    if (p->w) p->w->pod = NULL;
    for (size_t k = 0; k < p->nevs * EV_N; k++) /* its queued Events still go */
        if (p->evs[k].pending) p->evs[k].pending->ev->slot = NULL;
    node_release(s, p);
    struct knode *n = &s->nodes[p->node];
    if (p->nprev) p->nprev->nnext = p->nnext;
    else n->pods = p->nnext;
    if (p->nnext) p->nnext->nprev = p->nprev;
    pod_hash_del(s, p);
    pod_free(p);
}

static uint32_t parse_ip(const char *s) {
    struct in_addr a;
    return s && inet_pton(AF_INET, s, &a) == 1 ? ntohl(a.s_addr) : 0;
}

static struct kpod *pod_new(struct ksim *s, const char *key, const char *uid, int node, const json_t *obj) {
    struct kpod *p = calloc(1, sizeof *p);
    if (!p || !(p->key = strdup(key)) || !(p->uid = strdup(uid))) {
        if (p) free(p->key);
        free(p);
        return NULL;
    }
    p->t.hidx = -1;
    p->t.kind = T_POD;
    p->node = node;
    struct ksim_pod_opts o;
    char err[200];
    if (ksim_pod_opts(obj, &o, err, sizeof err)) klog(s, "level=warn pod=%s msg=\"%s\"", key, err);
    if (ksim_pod_requests(obj, &p->req, err, sizeof err)) { /* what admission and adoption count */
        klog(s, "level=warn pod=%s msg=\"resources: %s\"", key, err);
        p->req = (struct ksim_res){.pods = 1};
    }
    p->start_ms = o.start_ms, p->run_ms = o.run_ms, p->exit_code = (int16_t)o.exit_code, p->restart = (uint8_t)o.restart;
    struct knode *n = &s->nodes[node];
    p->nnext = n->pods;
    if (n->pods) n->pods->nprev = p;
    n->pods = p;
    pod_hash_add(s, p);
    s->st.pods_seen++;
    return p;
}

/* A pod found already past Pending (kubelet-sim restarted): carry on from its status. */
static void pod_adopt(struct ksim *s, struct kpod *p, const json_t *obj, const char *phase) {
    const json_t *st = json_object_get(obj, "status");
    p->start_time = p->started_at = wall_s();
    if (!strcmp(phase, "Succeeded") || !strcmp(phase, "Failed")) {
        p->state = PS_DONE;
        p->exit_code = !strcmp(phase, "Failed");
        return;
    }
    struct ksim_res *u = &s->nodes[p->node].used;
    u->cpu += p->req.cpu, u->memory += p->req.memory, u->gpu += p->req.gpu, u->pods += 1;
    p->counted = true;
    p->ip = parse_ip(json_string_value(json_object_get(st, "podIP")));
    if (!p->ip) p->ip = ip_alloc(s);
    const json_t *cs = json_array_get(json_object_get(st, "containerStatuses"), 0);
    p->restarts = (int32_t)json_integer_value(json_object_get(cs, "restartCount"));
    p->state = PS_RUNNING;
    if (p->run_ms >= 0) heap_set(s, &p->t, uv_now(s->loop) + (uint64_t)p->run_ms);
}

/* list (spec.containers or initContainers) as [{name, image}], or NULL when empty. */
static json_t *names_images(const json_t *list) {
    if (!json_array_size(list)) return NULL;
    json_t *out = json_array();
    size_t i;
    const json_t *c;
    json_array_foreach(list, i, c) {
        const char *name = json_string_value(json_object_get(c, "name")),
                   *image = json_string_value(json_object_get(c, "image"));
        json_array_append_new(out, json_pack("{s:s, s:s}", "name", name ? name : "", "image", image ? image : ""));
    }
    return out;
}

/* Whether kept (from names_images) still says what list does. */
static bool names_images_same(const json_t *kept, const json_t *list) {
    if (json_array_size(kept) != json_array_size(list)) return false;
    size_t i;
    const json_t *c;
    json_array_foreach(list, i, c) {
        const json_t *k = json_array_get(kept, i);
        const char *name = json_string_value(json_object_get(c, "name")),
                   *image = json_string_value(json_object_get(c, "image"));
        if (strcmp(name ? name : "", json_string_value(json_object_get(k, "name"))) ||
            strcmp(image ? image : "", json_string_value(json_object_get(k, "image"))))
            return false;
    }
    return true;
}

/* The containers a status reports follow the spec (an image may change). */
static void pod_containers(struct kpod *p, const json_t *obj) {
    const json_t *spec = json_object_get(obj, "spec");
    const json_t *c = json_object_get(spec, "containers"), *ic = json_object_get(spec, "initContainers");
    if (!names_images_same(p->ctrs, c)) {
        json_decref(p->ctrs);
        p->ctrs = names_images(c);
    }
    if (!names_images_same(p->inits, ic)) {
        json_decref(p->inits);
        p->inits = names_images(ic);
    }
}

static void pod_seen(struct ksim *s, json_t *obj) {
    if (s->stopping) return;
    const json_t *md = json_object_get(obj, "metadata");
    int idx = ksim_node_index(s->cfg.name_prefix, s->nnodes,
                              json_string_value(json_object_get(json_object_get(obj, "spec"), "nodeName")));
    const char *uid = json_string_value(json_object_get(md, "uid"));
    char key[600];
    if (idx < 0 || !uid || !obj_key(obj, key, sizeof key)) return;
    struct kpod *p = pod_find(s, key);
    if (p && strcmp(p->uid, uid)) { /* the name was reused: the old pod is gone */
        pod_forget(s, p);
        p = NULL;
    }
    bool deleting = json_is_string(json_object_get(md, "deletionTimestamp"));
    bool fresh = !p;
    if (fresh && !(p = pod_new(s, key, uid, idx, obj))) {
        klog(s, "level=error pod=%s msg=\"out of memory\"", key);
        return;
    }
    pod_containers(p, obj);
    if (fresh) {
        const char *phase = json_string_value(json_object_get(json_object_get(obj, "status"), "phase"));
        if (phase && strcmp(phase, "Pending")) pod_adopt(s, p, obj, phase);
        else if (deleting || s->nodes[idx].down) p->state = PS_HELD; /* deleted before it ran, or a dead kubelet */
        else pod_admit(s, p);
    }
    if (deleting && !p->deleting) {
        p->deleting = true;
        pod_delete_begin(s, p);
    }
    pump(s);
}

static void pods_add(void *ud, json_t *obj) { pod_seen(ud, obj); }
static void pods_update(void *ud, json_t *old, json_t *obj) { pod_seen(ud, obj); }
static void pods_delete(void *ud, json_t *obj) {
    struct ksim *s = ud;
    char key[600];
    if (!obj_key(obj, key, sizeof key)) return;
    struct kpod *p = pod_find(s, key);
    const char *uid = json_string_value(json_object_get(json_object_get(obj, "metadata"), "uid"));
    if (!p || (uid && strcmp(uid, p->uid))) return;
    if (p->state == PS_DELETING) s->st.deleted++;
    pod_forget(s, p);
}

/* ---- nodes ---- */

static void node_up(struct ksim *s, int i) {
    struct knode *n = &s->nodes[i];
    n->down = false;
    n->ready_since = wall_s();
    s->st.nodes_down--;
    if (!s->cfg.quiet) klog(s, "level=info node=%s msg=\"up\"", n->name);
    if (!n->status_busy && !node_write(s, W_NODE_STATUS, i, false)) n->status_busy = true;
    if (!n->lease_busy && !node_write(s, W_LEASE_RENEW, i, false)) n->lease_busy = true;
    for (struct kpod *p = n->pods, *nx; p; p = nx) {
        nx = p->nnext;
        if (p->state == PS_HELD && !p->deleting) {
            pod_admit(s, p);
        } else if (p->deleting) {
            pod_delete_begin(s, p);
        }
        pod_kick(s, p);
    }
    pump(s);
}

static void node_seen(struct ksim *s, json_t *obj) {
    if (s->stopping) return;
    const json_t *md = json_object_get(obj, "metadata");
    int i = ksim_node_index(s->cfg.name_prefix, s->nnodes, json_string_value(json_object_get(md, "name")));
    if (i < 0) return;
    const char *d = json_string_value(json_object_get(json_object_get(md, "annotations"), KSIM_ANN_DOWN));
    bool down = d && !strcmp(d, "true");
    struct knode *n = &s->nodes[i];
    if (down == n->down) return;
    if (!down) {
        node_up(s, i);
        return;
    }
    n->down = true;
    s->st.nodes_down++;
    if (!s->cfg.quiet) klog(s, "level=info node=%s msg=\"down\"", n->name);
}

static void nodes_add(void *ud, json_t *obj) { node_seen(ud, obj); }
static void nodes_update(void *ud, json_t *old, json_t *obj) { node_seen(ud, obj); }
static void nodes_delete(void *ud, json_t *obj) {
    struct ksim *s = ud;
    const char *name = json_string_value(json_object_get(json_object_get(obj, "metadata"), "name"));
    if (!s->stopping && ksim_node_index(s->cfg.name_prefix, s->nnodes, name) >= 0)
        klog(s, "level=warn node=%s msg=\"Node deleted from the API; its lease and pods carry on\"", name);
}

#define KEY_IS(lit) (len == sizeof lit - 1 && !memcmp(key, lit, len))

bool ksim_pod_keep(void *ud, const struct jparse_seg *path, int depth, const char *key, size_t len) {
    (void)ud;
    if (depth == 1 && JPARSE_SEG_IS(&path[0], "metadata")) return !KEY_IS("managedFields");
    if (depth == 1 && JPARSE_SEG_IS(&path[0], "status"))
        return KEY_IS("phase") || KEY_IS("podIP") || KEY_IS("containerStatuses");
    if (depth == 3 && JPARSE_SEG_IS(&path[0], "status") && JPARSE_SEG_IS(&path[1], "containerStatuses") && !path[2].key)
        return KEY_IS("restartCount");
    if (depth == 3 && JPARSE_SEG_IS(&path[0], "spec") &&
        (JPARSE_SEG_IS(&path[1], "containers") || JPARSE_SEG_IS(&path[1], "initContainers")) && !path[2].key)
        return KEY_IS("name") || KEY_IS("image") || KEY_IS("resources");
    return true;
}

bool ksim_node_keep(void *ud, const struct jparse_seg *path, int depth, const char *key, size_t len) {
    (void)ud;
    if (depth == 0) return KEY_IS("metadata") || KEY_IS("apiVersion") || KEY_IS("kind");
    if (depth == 1 && JPARSE_SEG_IS(&path[0], "metadata")) return !KEY_IS("managedFields");
    return true;
}

static void start_running(struct ksim *s) {
    static const struct kc_informer_handlers ph = {.on_add = pods_add, .on_update = pods_update,
                                                   .on_delete = pods_delete};
    static const struct kc_informer_handlers nh = {.on_add = nodes_add, .on_update = nodes_update,
                                                   .on_delete = nodes_delete};
    /* keys only: the pods and nodes keep what they need (a cached pod tree
     * was 12 KB); and what they do not read is not even decoded */
    static const struct kc_informer_opts pods_o = {.keys_only = true, .keep = ksim_pod_keep};
    static const struct kc_informer_opts nodes_o = {.keys_only = true, .keep = ksim_node_keep};
    s->nodes_inf = kc_informer_new_opts(s->kc, "/api/v1/nodes", NULL, &nodes_o, &nh, s);
    s->pods_inf = kc_informer_new_opts(s->kc, "/api/v1/pods", "fieldSelector=spec.nodeName%21%3D", &pods_o, &ph, s);
    if (!s->nodes_inf || !s->pods_inf || kc_informer_start(s->nodes_inf) || kc_informer_start(s->pods_inf))
        klog(s, "level=error msg=\"cannot start the informers\"");
    uint64_t now = uv_now(s->loop);
    uint64_t renew = (uint64_t)(s->cfg.renew_seconds * 1000), status = (uint64_t)(s->cfg.status_seconds * 1000);
    for (int i = 0; i < s->nnodes; i++) { /* spread over the interval, not all at once */
        heap_set(s, &s->nodes[i].lease_t, now + renew * (uint64_t)(i + 1) / (uint64_t)s->nnodes);
        heap_set(s, &s->nodes[i].status_t, now + status * (uint64_t)(i + 1) / (uint64_t)s->nnodes);
    }
}

static void reg_finish(struct ksim *s, int i, bool ok) {
    struct knode *n = &s->nodes[i];
    if (n->registered) return;
    n->registered = ok;
    if (ok) s->st.nodes_registered++;
    if (--s->reg_left == 0) {
        if (s->on_registered) s->on_registered(s->reg_ud, s->st.nodes_registered);
        start_running(s);
    }
}

static void lease_fire(struct ksim *s, struct knode *n) {
    int i = (int)(n - s->nodes);
    heap_set(s, &n->lease_t, uv_now(s->loop) + (uint64_t)(s->cfg.renew_seconds * 1000));
    if (n->down || n->lease_busy || !n->registered) return;
    if (!node_write(s, W_LEASE_RENEW, i, false)) n->lease_busy = true;
}

static void status_fire(struct ksim *s, struct knode *n) {
    int i = (int)(n - s->nodes);
    heap_set(s, &n->status_t, uv_now(s->loop) + (uint64_t)(s->cfg.status_seconds * 1000));
    if (n->down || n->status_busy || !n->registered) return;
    if (!node_write(s, W_NODE_STATUS, i, false)) n->status_busy = true;
}

static void on_timer(uv_timer_t *h) {
    struct ksim *s = h->data;
    s->armed = false;
    uint64_t now = uv_now(s->loop);
    for (int k = 0; k < DRAIN_MAX && s->hn && s->heap[0]->at <= now && !s->stopping; k++) {
        struct ktimer *t = s->heap[0];
        heap_del(s, t);
        switch (t->kind) {
        case T_POD:
            pod_timer(s, (struct kpod *)t);
            break;
        case T_LEASE:
            lease_fire(s, CONTAINER_OF(t, struct knode, lease_t));
            break;
        case T_STATUS:
            status_fire(s, CONTAINER_OF(t, struct knode, status_t));
            break;
        case T_WRITE: {
            struct kwrite *w = (struct kwrite *)t;
            if (w->kind == W_POD && !w->pod) write_free(w);
            else enqueue(s, w);
            break;
        }
        }
    }
    pump(s);
    arm(s);
}

/* ---- completions ---- */

static bool retryable(long status) { return status == 0 || status == 409 || status == 429 || status >= 500; }

static void retry_later(struct ksim *s, struct kwrite *w) {
    uint64_t d = (uint64_t)RETRY_BASE_MS << (w->tries < 6 ? w->tries : 6);
    if (d > RETRY_MAX_MS) d = RETRY_MAX_MS;
    w->tries++;
    s->st.retries++;
    heap_set(s, &w->t, uv_now(s->loop) + d);
}

static void maybe_stopped(struct ksim *s);

/* A 404 from a missing route (no details), as opposed to a missing object. */
static bool route_missing(const struct kc_response *r) {
    return r->status == 404 && !json_object_get(json_object_get(kc_response_body(r), "details"), "name");
}

/* What a finished write leads to; queues follow-ups but does not send. */
static void complete(struct kwrite *w, const struct kc_response *r) {
    struct ksim *s = w->s;
    if (w->own) s->linflight--;
    else s->inflight--;
    w->own = false;
    if (w->kind == W_EVENT) {
        s->ev_inflight--;
        event_done(s, w, r);
        return;
    }
    if (s->stopping || (w->kind == W_POD && !w->pod)) {
        write_free(w);
        return;
    }
    bool ok = r->status >= 200 && r->status < 300;
    struct knode *n = &s->nodes[w->node];
    int max = w->reg ? (s->cfg.retries > REG_RETRIES ? s->cfg.retries : REG_RETRIES) : s->cfg.retries;
    if (ok) s->st.writes_ok++;
    /* writes with their own answer to an error */
    if (w->kind == W_NODE_CREATE && r->status == 409) {
        w->kind = W_NODE_TAKEOVER, w->tries = 0;
        enqueue(s, w);
        return;
    }
    if (w->kind == W_NODE_STATUS && route_missing(r) && !s->node_status_main) {
        s->node_status_main = true; /* no nodes/status here: status goes with the main resource */
        klog(s, "level=warn msg=\"nodes/status is not served; writing node status on the node\"");
        enqueue(s, w);
        return;
    }
    if (w->kind == W_LEASE_CREATE && r->status == 409) {
        w->kind = W_LEASE_RENEW, w->tries = 0;
        enqueue(s, w);
        return;
    }
    if (w->kind == W_LEASE_RENEW && r->status == 404) {
        w->kind = W_LEASE_CREATE, w->tries = 0;
        enqueue(s, w);
        return;
    }
    if (w->kind == W_POD && w->pod && w->is_delete && r->status == 404) ok = true; /* already gone */
    if (!ok) {
        /* A pod's status and its final delete are retried until they land,
         * as a Kubelet keeps syncing a pod's status through an API server
         * outage; giving up would leave the pod's last stored phase (Running)
         * standing forever. Node status and lease writes are bounded: they
         * are written again at their next period anyway. */
        bool until_landed = w->kind == W_POD && w->pod;
        bool again = retryable(r->status) && (until_landed || w->tries < max);
        if (w->kind == W_POD && w->pod) {
            if (w->is_delete) w->pod->delete_sent = false;
            else w->pod->needs_status = true;
        }
        if (!again) {
            s->st.write_errors++;
            klog(s, "level=error op=%s target=%s status=%ld reason=%s msg=\"%.200s\"", wnames[w->kind],
                 w->kind == W_POD ? (w->pod ? w->pod->key : "?") : n->name, r->status, r->reason ? r->reason : "",
                 r->error ? r->error : "");
            if (w->kind == W_POD && w->pod) { /* give up on this change; a later one writes again */
                w->pod->needs_status = false;
                if (w->is_delete) w->pod->delete_sent = true;
            }
        } else {
            retry_later(s, w);
            return;
        }
    }
    /* the next step */
    switch (w->kind) {
    case W_POD: {
        struct kpod *p = w->pod;
        write_free(w);
        if (p) pod_kick(s, p);
        return;
    }
    case W_NODE_TAKEOVER:
    case W_NODE_CREATE:
        if (!ok) {
            reg_finish(s, w->node, false);
            break;
        }
        /* a real apiserver drops status on create: write it then; a server
         * that kept it (the shim) saves the write */
        if (w->kind == W_NODE_CREATE && json_array_size(json_object_get(json_object_get(kc_response_body(r), "status"), "conditions"))) {
            if (n->down) {
                reg_finish(s, w->node, true);
                break;
            }
            w->kind = W_LEASE_CREATE;
        } else {
            w->kind = W_NODE_STATUS;
        }
        w->tries = 0;
        enqueue(s, w);
        return;
    case W_NODE_STATUS:
        if (!w->reg) n->status_busy = false;
        else if (!ok) reg_finish(s, w->node, false);
        else if (n->down) reg_finish(s, w->node, true);
        else {
            w->kind = W_LEASE_CREATE, w->tries = 0;
            enqueue(s, w);
            return;
        }
        break;
    case W_LEASE_CREATE:
    case W_LEASE_RENEW:
        if (w->reg) reg_finish(s, w->node, ok);
        else n->lease_busy = false;
        if (ok && !w->reg) s->st.lease_renewals++;
        break;
    default:
        break;
    }
    write_free(w);
}

static void on_write_done(void *ud, const struct kc_response *r) {
    struct ksim *s = ((struct kwrite *)ud)->s;
    complete(ud, r);
    if (s->stopping) {
        if (s->deleting_nodes) pump(s);
        maybe_stopped(s);
        return;
    }
    pump(s);
    arm(s);
}

/* ---- life cycle ---- */

static void on_stats(uv_timer_t *h) {
    struct ksim *s = h->data;
    struct ksim_stats st;
    ksim_get_stats(s, &st);
    fprintf(stderr, "kubelet-sim: level=info pods=%zu seen=%llu running=%llu succeeded=%llu failed=%llu rejected=%llu "
            "restarts=%llu deleted=%llu writes=%llu errors=%llu retries=%llu leases=%llu queued=%zu inflight=%zu "
            "down=%d events=%llu counted=%llu dropped=%llu lease_inflight=%zu\n", st.pods, (unsigned long long)st.pods_seen, (unsigned long long)st.running,
            (unsigned long long)st.succeeded, (unsigned long long)st.failed, (unsigned long long)st.rejected,
            (unsigned long long)st.restarts, (unsigned long long)st.deleted, (unsigned long long)st.writes_ok,
            (unsigned long long)st.write_errors, (unsigned long long)st.retries, (unsigned long long)st.lease_renewals,
            st.queued, st.inflight, st.nodes_down, (unsigned long long)st.events_posted,
            (unsigned long long)st.events_counted, (unsigned long long)st.events_dropped, st.lease_inflight);
}

struct ksim *ksim_new(uv_loop_t *loop, struct kclient *kc, const struct ksim_config *cfg, char *err, size_t errlen) {
    struct ksim *s = calloc(1, sizeof *s);
    if (!s) goto oom;
    s->loop = loop;
    s->kc = kc;
    s->cfg = *cfg;
    s->cfg.kubeconfig = s->cfg.context = s->cfg.server = s->cfg.token_file = NULL;
    s->cfg.down = NULL;
    s->cfg.ndown = 0;
    s->cfg.name_prefix = strdup(cfg->name_prefix);
    s->cfg.kubelet_version = strdup(cfg->kubelet_version);
    s->cfg.labels = json_deep_copy(cfg->labels);
    s->nnodes = cfg->nodes;
    s->nbuckets = 1024;
    s->buckets = calloc(s->nbuckets, sizeof *s->buckets);
    s->nodes = calloc((size_t)(s->nnodes ? s->nnodes : 1), sizeof *s->nodes);
    if (!s->cfg.name_prefix || !s->cfg.kubelet_version || !s->cfg.labels || !s->buckets || !s->nodes) goto oom;
    int64_t now = wall_s();
    for (int i = 0; i < s->nnodes; i++) {
        struct knode *n = &s->nodes[i];
        char name[256];
        snprintf(name, sizeof name, "%s%d", cfg->name_prefix, i);
        if (!(n->name = strdup(name))) goto oom;
        n->lease_t = (struct ktimer){.hidx = -1, .kind = T_LEASE};
        n->status_t = (struct ktimer){.hidx = -1, .kind = T_STATUS};
        n->cap = (struct ksim_res){.cpu = cfg->cpu_milli, .memory = cfg->memory_bytes, .pods = cfg->pods,
                                   .gpu = i < cfg->gpu_nodes ? cfg->gpu_per_node : cfg->gpu};
        n->ready_since = now;
        for (int d = 0; d < cfg->ndown; d++)
            if (!strcmp(cfg->down[d], name)) n->down = true;
        if (n->down) s->st.nodes_down++;
    }
    uv_timer_init(loop, &s->timer);
    uv_timer_init(loop, &s->stop_timer);
    uv_timer_init(loop, &s->stats_timer);
    s->timer.data = s->stop_timer.data = s->stats_timer.data = s;
    return s;
oom:
    core_fail(err, errlen, -ENOMEM, "out of memory");
    if (s) {
        if (s->nodes)
            for (int i = 0; i < s->nnodes; i++) free(s->nodes[i].name);
        free(s->nodes);
        free(s->buckets);
        free(s->cfg.name_prefix);
        free(s->cfg.kubelet_version);
        json_decref(s->cfg.labels);
        free(s);
    }
    return NULL;
}

int ksim_start(struct ksim *s, void (*registered)(void *ud, int count), void *ud) {
    s->on_registered = registered;
    s->reg_ud = ud;
    s->reg_left = s->nnodes;
    if (s->cfg.verbose) uv_timer_start(&s->stats_timer, on_stats, 2000, 2000);
    if (!s->nnodes) {
        if (registered) registered(ud, 0);
        start_running(s);
        return 0;
    }
    for (int i = 0; i < s->nnodes; i++)
        if (node_write(s, W_NODE_CREATE, i, true)) return -ENOMEM;
    pump(s);
    return 0;
}

static void maybe_stopped(struct ksim *s) {
    if (!s->on_done || (s->deleting_nodes && (s->inflight || s->queued))) return;
    void (*done)(void *) = s->on_done;
    s->on_done = NULL;
    s->deleting_nodes = false;
    uv_timer_stop(&s->stop_timer);
    done(s->done_ud);
}

static void on_stop_bound(uv_timer_t *h) {
    struct ksim *s = h->data;
    klog(s, "level=warn msg=\"gave up waiting for node deletes\"");
    s->deleting_nodes = false;
    maybe_stopped(s);
}

static void drop_pending(struct ksim *s) {
    for (struct kwrite *w = s->qhead, *nx; w; w = nx) {
        nx = w->next;
        write_free(w);
    }
    s->qhead = s->qtail = NULL;
    s->queued = 0;
    for (struct kwrite *w = s->eqhead, *nx; w; w = nx) {
        nx = w->next;
        write_free(w);
    }
    s->eqhead = s->eqtail = NULL;
    s->eqn = 0;
    for (struct kwrite *w = s->lqhead, *nx; w; w = nx) {
        nx = w->next;
        write_free(w);
    }
    s->lqhead = s->lqtail = NULL;
    while (s->hn) {
        struct ktimer *t = s->heap[0];
        heap_del(s, t);
        if (t->kind == T_WRITE) write_free((struct kwrite *)t);
    }
}

void ksim_shutdown(struct ksim *s, void (*done)(void *ud), void *ud) {
    if (s->stopping) return;
    s->stopping = true;
    s->on_done = done;
    s->done_ud = ud;
    kc_informer_free(s->pods_inf);
    kc_informer_free(s->nodes_inf);
    s->pods_inf = s->nodes_inf = NULL;
    uv_timer_stop(&s->timer);
    uv_timer_stop(&s->stats_timer);
    drop_pending(s);
    if (s->cfg.delete_nodes_on_exit) {
        s->deleting_nodes = true;
        for (int i = 0; i < s->nnodes; i++) {
            node_write(s, W_LEASE_DELETE, i, false);
            node_write(s, W_NODE_DELETE, i, false);
        }
        uv_timer_start(&s->stop_timer, on_stop_bound, STOP_BOUND_MS, 0);
        pump(s);
    }
    maybe_stopped(s);
}

static void on_closed(uv_handle_t *h) { (void)h; }

void ksim_close(struct ksim *s) {
    uv_close((uv_handle_t *)&s->timer, on_closed);
    uv_close((uv_handle_t *)&s->stop_timer, on_closed);
    uv_close((uv_handle_t *)&s->stats_timer, on_closed);
}

void ksim_free(struct ksim *s) {
    if (!s) return;
    kc_informer_free(s->pods_inf);
    kc_informer_free(s->nodes_inf);
    drop_pending(s);
    for (size_t b = 0; b < s->nbuckets; b++)
        for (struct kpod *p = s->buckets[b], *nx; p; p = nx) {
            nx = p->hnext;
            if (p->w) p->w->pod = NULL;
            for (size_t k = 0; k < p->nevs * EV_N; k++)
                if (p->evs[k].pending) p->evs[k].pending->ev->slot = NULL;
            pod_free(p);
        }
    for (int i = 0; i < s->nnodes; i++) free(s->nodes[i].name);
    free(s->nodes);
    free(s->buckets);
    free(s->heap);
    free(s->cfg.name_prefix);
    free(s->cfg.kubelet_version);
    json_decref(s->cfg.labels);
    free(s);
}

void ksim_get_stats(const struct ksim *s, struct ksim_stats *out) {
    *out = s->st;
    out->pods = s->npods;
    out->queued = s->queued;
    out->inflight = s->inflight;
    out->lease_inflight = s->linflight;
}

void ksim_set_lease_client(struct ksim *s, struct kclient *kc) { s->lkc = kc; }
