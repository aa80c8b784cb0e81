/* The native role's read cache (ncache.h). */
#include "ncache.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "labels.h"
#include "pbmsg.h"
#include "strmap.h"
#include "svc_job.h"

#define JOBS_PATH "/apis/peloton.io/v1alpha1/jobs"
#define POOLS_PATH "/apis/peloton.io/v1alpha1/resourcepools"

/* Counted over the cache's life; ncache_stop logs them in one line. */
struct ncache_stats {
    uint64_t hits, misses, fallbacks; /* served from memory / id not cached / cache not usable */
    uint64_t memo_hits;               /* replies sent as built before */
};

struct job_entry {
    json_t *obj;   /* the Job (a reference on the informer's object) */
    bool dup;      /* two Jobs carry this JobID: never served from here */
    struct ncache_reply memo[NCACHE_MEMOS];
};

/* Sets of more pods than this are not kept decoded between two reads. */
#define NCACHE_SORTED_KEEP 256

/* The pods of one Job (label peloton.io/job in the Job's namespace): their
 * names; the objects are the informer's (compact: decoded when read). */
struct pod_set {
    char *key;             /* "<namespace>/<job name>" */
    struct strmap by_name; /* pod name -> the set itself (a mark) */
    json_t *sorted;        /* the pods by name (a list's order), built on demand for a set of at most
                            * NCACHE_SORTED_KEEP; NULL after any change */
};

struct ncache {
    struct kclient *kc;
    struct kc_informer *jobs, *pools, *pods;
    struct strmap pod_sets;            /* "<namespace>/<job name>" -> struct pod_set */
    struct strmap pod_of;              /* "<namespace>/<pod name>" -> the struct pod_set it is in */
    json_t *scratch;                   /* the last ncache_job_pods answer for a bigger set */
    json_t *no_pods;                   /* an empty array, for a Job without pods */
    struct strmap by_id;               /* JobID -> struct job_entry */
    json_t *pool_items;                /* the pools in a list's order, built on demand; NULL after any change */
    bool pods_broken;                  /* the pod index missed one (out of memory): pods are read through */
    uint64_t fence[NCACHE_NKINDS];     /* highest resourceVersion a native write of the kind got back */
    struct ncache_stats st;
};

static const char *jstr(const json_t *o, const char *k) { return json_string_value(json_object_get(o, k)); }

static bool same_object(const json_t *a, const json_t *b) {
    const json_t *ma = json_object_get(a, "metadata"), *mb = json_object_get(b, "metadata");
    return !strcmp(jstr(ma, "namespace") ?: "", jstr(mb, "namespace") ?: "") &&
           !strcmp(jstr(ma, "name") ?: "", jstr(mb, "name") ?: "");
}

static void reply_free(struct ncache_reply *r) {
    if (r->msg) protobuf_c_message_free_unpacked(r->msg, NULL);
    free(r->packed);
    *r = (struct ncache_reply){0};
}

static void entry_forget_memos(struct job_entry *e) {
    for (int i = 0; i < NCACHE_MEMOS; i++) reply_free(&e->memo[i]);
}

static void entry_free(struct job_entry *e) {
    if (!e) return;
    entry_forget_memos(e);
    json_decref(e->obj);
    free(e);
}

/* obj (a Job now in the cache) under its JobID. Out of memory leaves the id
 * out: it is then read through the API server. */
static void index_put(struct ncache *c, json_t *obj) {
    const char *id = svc_job_id(obj);
    struct job_entry *e = strmap_get(&c->by_id, id);
    if (e) {
        if (!same_object(e->obj, obj)) e->dup = true;
        entry_forget_memos(e);
        json_decref(e->obj);
        e->obj = json_incref(obj);
        return;
    }
    if (!(e = calloc(1, sizeof *e))) return;
    e->obj = json_incref(obj);
    if (strmap_put(&c->by_id, id, e, NULL)) entry_free(e);
}

/* obj (a Job leaving the cache, or its old state) is no longer under its JobID. */
static void index_del(struct ncache *c, const json_t *obj) {
    const char *id = svc_job_id(obj);
    struct job_entry *e = strmap_get(&c->by_id, id);
    if (!e || (!same_object(e->obj, obj) && !e->dup)) return;
    entry_free(strmap_del(&c->by_id, id));
}

static void on_add(void *ud, json_t *obj) { index_put(ud, obj); }

static void on_update(void *ud, json_t *old, json_t *obj) {
    if (old && strcmp(svc_job_id(old), svc_job_id(obj))) index_del(ud, old);
    index_put(ud, obj);
}

static void on_delete(void *ud, json_t *obj) { index_del(ud, obj); }

/* Any change of a pool: the array of them is built again when next asked for. */
static void pools_changed(struct ncache *c) {
    json_decref(c->pool_items);
    c->pool_items = NULL;
}
static void on_pool_add(void *ud, json_t *obj) { (void)obj, pools_changed(ud); }

/* The key of the Job a pod belongs to ("<namespace>/<job name>"); false for a pod of none. */
static bool pod_job_key(const json_t *pod, char *out, size_t len) {
    const json_t *md = json_object_get(pod, "metadata");
    const char *job = jstr(json_object_get(md, "labels"), PL_JOB);
    if (!job) return false;
    int n = snprintf(out, len, "%s/%s", jstr(md, "namespace") ?: "", job);
    return n > 0 && (size_t)n < len;
}

static void pod_set_free(struct pod_set *ps) {
    strmap_free(&ps->by_name);
    json_decref(ps->sorted);
    free(ps->key);
    free(ps);
}

/* "<namespace>/<pod name>" of pod into out; false without a name. */
static bool pod_key(const json_t *pod, char *out, size_t len) {
    const json_t *md = json_object_get(pod, "metadata");
    const char *name = jstr(md, "name");
    int n = name ? snprintf(out, len, "%s/%s", jstr(md, "namespace") ?: "", name) : -1;
    return n > 0 && (size_t)n < len;
}

/* Pod pkey (named name) leaves the set it is in, if any. */
static void pod_leave(struct ncache *c, const char *pkey, const char *name) {
    struct pod_set *ps = strmap_del(&c->pod_of, pkey);
    if (!ps) return;
    strmap_del(&ps->by_name, name);
    json_decref(ps->sorted);
    ps->sorted = NULL;
    if (!strmap_count(&ps->by_name)) pod_set_free(strmap_del(&c->pod_sets, ps->key));
}

/* pod is gone. */
static void pod_unindex(struct ncache *c, const json_t *pod) {
    char pkey[600];
    const char *name = jstr(json_object_get(pod, "metadata"), "name");
    if (name && pod_key(pod, pkey, sizeof pkey)) pod_leave(c, pkey, name);
}

/* pod (in the informer's cache; added or changed) is in its Job's set, and
 * in no other (the feed hands no old object: pod_of says where it was). Out
 * of memory: the cache stops answering pods (a set that misses one would
 * answer wrong). */
static void pod_index(struct ncache *c, json_t *pod) {
    char key[600], pkey[600];
    const char *name = jstr(json_object_get(pod, "metadata"), "name");
    if (!name || !pod_key(pod, pkey, sizeof pkey)) return;
    bool in_job = pod_job_key(pod, key, sizeof key);
    struct pod_set *was = strmap_get(&c->pod_of, pkey);
    if (was && (!in_job || strcmp(was->key, key))) pod_leave(c, pkey, name);
    if (!in_job) return;
    struct pod_set *ps = strmap_get(&c->pod_sets, key);
    if (!ps) {
        if (!(ps = calloc(1, sizeof *ps)) || !(ps->key = strdup(key)) || strmap_put(&c->pod_sets, key, ps, NULL)) {
            if (ps) free(ps->key);
            free(ps);
            c->pods_broken = true;
            return;
        }
    }
    if (strmap_put(&ps->by_name, name, ps, NULL) || strmap_put(&c->pod_of, pkey, ps, NULL)) c->pods_broken = true;
    json_decref(ps->sorted);
    ps->sorted = NULL;
}

static void on_pod_add(void *ud, json_t *pod) { pod_index(ud, pod); }
static void on_pod_update(void *ud, json_t *old, json_t *pod) { (void)old, pod_index(ud, pod); }
static void on_pod_delete(void *ud, json_t *pod) { pod_unindex(ud, pod); }
static void on_pool_update(void *ud, json_t *old, json_t *obj) { (void)old, (void)obj, pools_changed(ud); }

struct ncache *ncache_new(struct kclient *kc) {
    struct ncache *c = calloc(1, sizeof *c);
    if (!c) return NULL;
    c->kc = kc;
    static const struct kc_informer_handlers h = {on_add, on_update, on_delete, NULL};
    static const struct kc_informer_handlers hp = {on_pool_add, on_pool_update, on_pool_add, NULL};
    static const struct kc_informer_handlers hpod = {on_pod_add, on_pod_update, on_pod_delete, NULL};
    /* the job manager's own informers follow the same paths and queries: in
     * one process they share one list, watch and decoding of each event */
    char sel[64], q[96];
    static const struct kc_informer_opts po = {.compact = true}; /* as the job manager's */
    kc_escape(PL_JOB, sel, sizeof sel);
    snprintf(q, sizeof q, "labelSelector=%s", sel);
    if (!(c->no_pods = json_array()) || !(c->jobs = kc_informer_new(kc, JOBS_PATH, NULL, &h, c)) ||
        kc_informer_start(c->jobs) || !(c->pools = kc_informer_new(kc, POOLS_PATH, NULL, &hp, c)) ||
        kc_informer_start(c->pools) || !(c->pods = kc_informer_new_opts(kc, "/api/v1/pods", q, &po, &hpod, c)) ||
        kc_informer_start(c->pods)) {
        ncache_free(c);
        return NULL;
    }
    return c;
}

void ncache_stop(struct ncache *c) {
    if (!c || !c->jobs) return;
    fprintf(stderr,
            "level=info msg=\"native read cache\" hits=%" PRIu64 " memo_hits=%" PRIu64 " misses=%" PRIu64
            " fallbacks=%" PRIu64 "\n",
            c->st.hits, c->st.memo_hits, c->st.misses, c->st.fallbacks);
    kc_informer_free(c->jobs);
    kc_informer_free(c->pools);
    kc_informer_free(c->pods);
    c->jobs = c->pools = c->pods = NULL;
    pools_changed(c);
}

void ncache_free(struct ncache *c) {
    if (!c) return;
    ncache_stop(c);
    size_t pos = 0;
    const char *k;
    void *v;
    while (strmap_next(&c->by_id, &pos, &k, &v)) entry_free(v);
    strmap_free(&c->by_id);
    pos = 0;
    while (strmap_next(&c->pod_sets, &pos, &k, &v)) pod_set_free(v);
    strmap_free(&c->pod_sets);
    strmap_free(&c->pod_of);
    json_decref(c->scratch);
    json_decref(c->no_pods);
    free(c);
}

/* The kind of the collection a request path names ("/api/v1/namespaces/x/pods/y",
 * "/apis/peloton.io/v1alpha1/jobs"), or -1 for one not cached (another
 * group's "jobs" too: the cache follows peloton.io's). */
static int path_kind(const char *path) {
    static const char core[] = "/api/v1/", peloton[] = "/apis/peloton.io/v1alpha1/";
    bool is_core = !strncmp(path, core, sizeof core - 1);
    if (!is_core && strncmp(path, peloton, sizeof peloton - 1)) return -1;
    const char *p = path + (is_core ? sizeof core : sizeof peloton) - 1;
    if (!strncmp(p, "namespaces/", 11)) {
        const char *q = strchr(p + 11, '/');
        if (!q) return -1; /* the namespace object itself */
        p = q + 1;
    }
    size_t n = strcspn(p, "/?");
    if (is_core) return n == 4 && !strncmp(p, "pods", 4) ? NCACHE_PODS : -1;
    if (n == 4 && !strncmp(p, "jobs", 4)) return NCACHE_JOBS;
    if (n == 13 && !strncmp(p, "resourcepools", 13)) return NCACHE_POOLS;
    return -1;
}

int ncache_write_kind(const char *method, const char *path) { return strcmp(method, "GET") ? path_kind(path) : -1; }

void ncache_wrote(struct ncache *c, int k, const struct kc_response *r) {
    if (!c || k < 0 || k >= NCACHE_NKINDS || r->status < 200 || r->status > 299) return;
    const char *rv = jstr(json_object_get(kc_response_body(r), "metadata"), "resourceVersion");
    char *end;
    errno = 0;
    unsigned long long v = rv ? strtoull(rv, &end, 10) : 0;
    if (!rv || errno || end == rv || *end) v = UINT64_MAX; /* not a version understood: from now on k is read
                                                              * through the API server (safe, slow) */
    if (v > c->fence[k]) c->fence[k] = v;
}

bool ncache_usable(const struct ncache *c, enum ncache_kind k) {
    const struct kc_informer *inf = !c                  ? NULL
                                    : k == NCACHE_JOBS  ? c->jobs
                                    : k == NCACHE_POOLS ? c->pools
                                    : c->pods_broken    ? NULL
                                                        : c->pods;
    if (!inf || !kc_informer_fresh(inf, NCACHE_MAX_SILENCE_MS)) return false;
    char *end;
    const char *rv = kc_informer_rv(inf);
    errno = 0;
    unsigned long long v = strtoull(rv, &end, 10);
    return !errno && end != rv && !*end && v >= c->fence[k];
}

static struct job_entry *usable_entry(struct ncache *c, const char *id) {
    if (!ncache_usable(c, NCACHE_JOBS)) {
        c->st.fallbacks++;
        return NULL;
    }
    struct job_entry *e = strmap_get(&c->by_id, id);
    if (!e || e->dup) {
        c->st.misses++;
        return NULL;
    }
    return e;
}

const json_t *ncache_job(struct ncache *c, const char *id) {
    if (!c) return NULL;
    struct job_entry *e = usable_entry(c, id);
    if (!e) return NULL;
    c->st.hits++;
    return e->obj;
}

const struct ncache_reply *ncache_job_memo(struct ncache *c, const char *id, enum ncache_memo m) {
    struct job_entry *e = c ? strmap_get(&c->by_id, id) : NULL;
    if (!e || !e->memo[m].msg) return NULL;
    c->st.memo_hits++;
    return &e->memo[m];
}

const struct ncache_reply *ncache_job_memo_set(struct ncache *c, const char *id, enum ncache_memo m,
                                               ProtobufCMessage *msg) {
    struct job_entry *e = c ? strmap_get(&c->by_id, id) : NULL;
    size_t len = 0;
    uint8_t *packed = e ? pbmsg_pack(msg, &len) : NULL;
    if (!packed) {
        protobuf_c_message_free_unpacked(msg, NULL);
        return NULL;
    }
    reply_free(&e->memo[m]);
    e->memo[m] = (struct ncache_reply){msg, packed, len};
    return &e->memo[m];
}

static int add_pool(void *ud, json_t *obj) { return json_array_append(ud, obj); }

/* Strings. */
static int by_str(const void *a, const void *b) { return strcmp(*(const char *const *)a, *(const char *const *)b); }

/* Objects (json_t *) by metadata.name. */
static int by_name(const void *a, const void *b) {
    const json_t *x = *(json_t *const *)a, *y = *(json_t *const *)b;
    return strcmp(jstr(json_object_get(x, "metadata"), "name") ?: "", jstr(json_object_get(y, "metadata"), "name") ?: "");
}

/* The pools as an array by name (the API server's list order for a
 * cluster-scoped kind), or NULL when out of memory. */
static json_t *sorted_pools(const struct ncache *c) {
    json_t *items = json_array();
    if (!items) return NULL;
    kc_informer_foreach(c->pools, add_pool, items);
    size_t n = json_array_size(items);
    json_t **v = n == kc_informer_count(c->pools) ? calloc(n ? n : 1, sizeof *v) : NULL;
    if (!v) {
        json_decref(items);
        return NULL;
    }
    for (size_t i = 0; i < n; i++) v[i] = json_incref(json_array_get(items, i));
    qsort(v, n, sizeof *v, by_name);
    json_array_clear(items);
    for (size_t i = 0; i < n; i++) json_array_append_new(items, v[i]);
    free(v);
    return items;
}

const json_t *ncache_pools(struct ncache *c) {
    if (!c) return NULL;
    if (!ncache_usable(c, NCACHE_POOLS)) {
        c->st.fallbacks++;
        return NULL;
    }
    if (!c->pool_items && !(c->pool_items = sorted_pools(c))) return NULL;
    c->st.hits++;
    return c->pool_items;
}

const json_t *ncache_job_pods(struct ncache *c, const json_t *job) {
    if (!c || !job) return NULL;
    if (!ncache_usable(c, NCACHE_PODS)) {
        c->st.fallbacks++;
        return NULL;
    }
    const json_t *md = json_object_get(job, "metadata");
    char key[600];
    int n = snprintf(key, sizeof key, "%s/%s", jstr(md, "namespace") ?: "", jstr(md, "name") ?: "");
    if (n <= 0 || (size_t)n >= sizeof key) return NULL;
    struct pod_set *ps = strmap_get(&c->pod_sets, key);
    if (!ps) return c->no_pods;
    if (ps->sorted) return ps->sorted;
    size_t cnt = strmap_count(&ps->by_name), i = 0, pos = 0;
    const char **names = calloc(cnt ? cnt : 1, sizeof *names);
    json_t *arr = names ? json_array() : NULL;
    if (!arr) {
        free(names);
        return NULL;
    }
    const char *k;
    void *p;
    while (i < cnt && strmap_next(&ps->by_name, &pos, &k, &p)) names[i++] = k;
    qsort(names, i, sizeof *names, by_str);
    const char *ns = jstr(md, "namespace") ?: "";
    for (size_t j = 0; j < i; j++) {
        json_t *pod = kc_informer_get(c->pods, ns, names[j]); /* decoded from the informer's text */
        if (!pod || json_array_append(arr, pod)) { /* the set and the cache disagree: read through */
            json_decref(arr);
            free(names);
            return NULL;
        }
    }
    free(names);
    if (i <= NCACHE_SORTED_KEEP) return ps->sorted = arr;
    json_decref(c->scratch); /* a big set is decoded at each read, not kept */
    return c->scratch = arr;
}
