/* The cluster model (cluster.h). */
#include "cluster.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "admit.h"
#include "crd_pool.h"
#include "entitle.h"
#include "k8sparse.h"
#include "labels.h"
#include "metrics.h"
#include "nodehost.h"
#include "quantity.h"
#include "strmap.h"

struct cm_node {
    char *name;
    json_t *obj;
    char *sig; /* what placement sees, serialised: a change here rebuilds the fleet */
    bool ready, unschedulable, down;
};

struct cm_gang {
    struct cm_pod **v;
    size_t n, cap;
};

/* The revocable part of what is counted on a host. */
struct host_rev {
    int64_t cpu;
    uint32_t pods;
};

struct cluster {
    struct cm_options opt;
    char *default_pool;
    struct strmap nodes, ns_pool, pools, pods, uids, gangs;
    bool pools_dirty, nodes_dirty, pods_dirty, entitle_dirty;
    char *pool_error;
    uint64_t gen;
    uint64_t pod_versions; /* the last cm_pod.version given */
    uint64_t fleet_gen;    /* fleet rebuilds */
    uint64_t host_stamps;  /* the last host_gen value given */
    struct respool_tree *tree;
    struct host_fleet *fleet;
    struct place_engine *engine;
    struct cm_pod **host_head; /* per host index */
    struct cm_pod **pool_head; /* per pool index of tree: the pods counted in that leaf */
    uint32_t npool_head;
    struct resvec *host_alloc; /* per host: what its pods request */
    uint32_t *host_pods, *host_max_pods; /* per host: pods counted, allocatable "pods" (0 = no limit) */
    uint64_t *host_gen;        /* per host: stamped whenever what is counted on it changes */
    struct host_rev *host_rev; /* per host: what its revocable pods hold (slack leaves it out) */
    uint32_t nhosts;
    uint32_t *gang_pods, ngang_pods; /* cluster_place_gang's members per host index; all 0 between calls */
    struct resvec capacity;
    struct resvec unplaced;    /* non-revocable work admitted but on no host yet */
};

void cm_options_default(struct cm_options *o) {
    memset(o, 0, sizeof *o);
    o->count_pending = true;
    place_options_default(&o->place);
}

static char *xstrdup(const char *s) { return s ? strdup(s) : NULL; }

struct cluster *cluster_new(const struct cm_options *o) {
    struct cluster *c = calloc(1, sizeof *c);
    if (!c) return NULL;
    if (o) c->opt = *o;
    else cm_options_default(&c->opt);
    if (c->opt.default_pool && c->opt.default_pool[0]) c->default_pool = strdup(c->opt.default_pool);
    c->opt.default_pool = c->default_pool;
    c->tree = respool_tree_new();
    c->fleet = host_fleet_new();
    c->engine = c->fleet && !c->opt.no_engine ? place_engine_new(c->fleet, &c->opt.place) : NULL;
    if (!c->tree || !c->fleet || (!c->engine && !c->opt.no_engine)) {
        cluster_free(c);
        return NULL;
    }
    c->pools_dirty = c->nodes_dirty = c->entitle_dirty = true;
    return c;
}

static void pod_free(struct cm_pod *p) {
    if (!p) return;
    json_decref(p->obj);
    free(p->info_mem_);
    free(p->ns);
    free(p->name);
    free(p->uid);
    free(p->rv);
    free(p->key);
    free(p->pool);
    free(p->node);
    free(p);
}

void cluster_free(struct cluster *c) {
    if (!c) return;
    size_t pos = 0;
    void *v;
    while (strmap_next(&c->pods, &pos, NULL, &v)) pod_free(v);
    pos = 0;
    while (strmap_next(&c->nodes, &pos, NULL, &v)) {
        struct cm_node *n = v;
        json_decref(n->obj);
        free(n->name);
        free(n->sig);
        free(n);
    }
    pos = 0;
    while (strmap_next(&c->ns_pool, &pos, NULL, &v)) free(v);
    pos = 0;
    while (strmap_next(&c->pools, &pos, NULL, &v)) json_decref(v);
    pos = 0;
    while (strmap_next(&c->gangs, &pos, NULL, &v)) {
        free(((struct cm_gang *)v)->v);
        free(v);
    }
    strmap_free(&c->nodes);
    strmap_free(&c->ns_pool);
    strmap_free(&c->pools);
    strmap_free(&c->pods);
    strmap_free(&c->uids);
    strmap_free(&c->gangs);
    place_engine_free(c->engine);
    host_fleet_free(c->fleet);
    if (c->tree) {
        admit_tree_release(c->tree);
        respool_tree_free(c->tree);
    }
    free(c->host_head);
    free(c->pool_head);
    free(c->host_alloc);
    free(c->host_pods);
    free(c->host_max_pods);
    free(c->host_gen);
    free(c->host_rev);
    free(c->gang_pods);
    free(c->pool_error);
    free(c->default_pool);
    free(c);
}

/* ---- counting pods against pools and hosts ---- */

static struct respool *leaf_of(struct cluster *c, const char *name) {
    if (!name) return NULL;
    struct respool *p = crd_pool_find(c->tree, name);
    return p && respool_is_leaf(p) ? p : NULL;
}

/* A host's allocation as placement sees it: a host at its pod
 * limit is full (the core has no pod-count resource, and a Kubelet refuses a
 * pod beyond it: OutOfpods). */
static struct resvec host_used(const struct cluster *c, uint32_t h) {
    struct resvec a = resvec_clamp0(c->host_alloc[h]);
    if (c->host_max_pods[h] && c->host_pods[h] >= c->host_max_pods[h]) {
        const struct resvec *cap = &c->fleet->hosts[h].allocatable;
        if (a.v[RES_CPU] < cap->v[RES_CPU]) a.v[RES_CPU] = cap->v[RES_CPU];
        if (a.v[RES_MEMORY] < cap->v[RES_MEMORY]) a.v[RES_MEMORY] = cap->v[RES_MEMORY];
    }
    return a;
}

/* Slack cpu: what non-revocable work leaves of the schedulable hosts' cpu
 * (Peloton measures idle cpu; we have requests only). Revocable pods are left
 * out, or each one would shrink the slack it runs on and revocable work would
 * preempt itself in an idle cluster; non-revocable work admitted but not yet
 * on a host is counted, so that its arrival is what takes slack back. A host
 * that non-revocable pods alone fill to its pod limit has no slack. */
static int64_t slack_cpu(const struct cluster *c) {
    int64_t used = c->unplaced.v[RES_CPU];
    for (uint32_t h = 0; h < c->nhosts; h++) {
        if (c->fleet->hosts[h].flags & HOST_CLOSED) continue;
        int64_t cpu = res_max(0, c->host_alloc[h].v[RES_CPU] - c->host_rev[h].cpu);
        uint32_t pods = c->host_pods[h] - c->host_rev[h].pods;
        if (c->host_max_pods[h] && pods >= c->host_max_pods[h])
            cpu = res_max(cpu, c->fleet->hosts[h].allocatable.v[RES_CPU]);
        used = res_add(used, cpu);
    }
    return res_max(0, c->capacity.v[RES_CPU] - used);
}

static void host_sync(struct cluster *c, uint32_t h) {
    c->host_gen[h] = ++c->host_stamps; /* its allocation, and (the callers') its job counts */
    if (c->engine) place_host_set_allocated(c->engine, h, host_used(c, h));
}

/* The first host of a placement that the gang's members put over its pod
 * limit, or HOST_NONE. O(members): counts per host in c->gang_pods, cleared
 * again before it returns; -ENOMEM without memory for them. */
static int gang_overfills(struct cluster *c, const struct place_gang *g, const uint32_t *hosts, uint32_t *over) {
    *over = HOST_NONE;
    if (c->ngang_pods < c->nhosts) {
        uint32_t *n = realloc(c->gang_pods, (size_t)c->nhosts * sizeof *n);
        if (!n) return -ENOMEM;
        memset(n + c->ngang_pods, 0, (size_t)(c->nhosts - c->ngang_pods) * sizeof *n);
        c->gang_pods = n;
        c->ngang_pods = c->nhosts;
    }
    for (uint32_t i = 0; i < g->ntasks; i++) c->gang_pods[hosts[i]]++;
    for (uint32_t i = 0; i < g->ntasks && *over == HOST_NONE; i++) {
        uint32_t h = hosts[i];
        if (c->host_max_pods[h] && (uint64_t)c->host_pods[h] + c->gang_pods[h] > c->host_max_pods[h]) *over = h;
    }
    for (uint32_t i = 0; i < g->ntasks; i++) c->gang_pods[hosts[i]] = 0;
    return 0;
}

/* Host h reads as full to the engine, in every kind (as host_used makes a
 * host at its pod limit), until host_sync. */
static void hold_full(struct cluster *c, uint32_t h) {
    struct resvec full = resvec_clamp0(c->host_alloc[h]);
    const struct resvec *cap = &c->fleet->hosts[h].allocatable;
    for (int k = 0; k < RES_NKINDS; k++)
        if (full.v[k] < cap->v[k]) full.v[k] = cap->v[k];
    place_host_set_allocated(c->engine, h, full);
}

int cluster_place_gang(struct cluster *c, const struct place_gang *g, uint32_t *hosts, struct place_failure *fail) {
    if (!c->engine || !c->fleet) return -EINVAL;
    int rc = place_gang(c->engine, g, hosts, fail);
    if (rc) return rc;
    uint32_t over;
    rc = gang_overfills(c, g, hosts, &over);
    place_gang_undo(c->engine, g, hosts);
    if (rc || over == HOST_NONE) return rc;
    /* Some host got more members than its free slots: member by member, a
     * host the members so far fill reads as full to the next ones. */
    const char *job = g->job ? g->job : g->id;
    uint32_t i;
    for (i = 0; i < g->ntasks; i++) {
        struct place_gang one = {.id = g->id, .job = job, .strategy = g->strategy, .tasks = &g->tasks[i], .ntasks = 1};
        if ((rc = place_gang(c->engine, &one, &hosts[i], fail))) {
            if (fail) fail->task = i;
            break;
        }
        uint32_t h = hosts[i];
        if (c->host_max_pods[h] && (uint64_t)c->host_pods[h] + ++c->gang_pods[h] >= c->host_max_pods[h]) hold_full(c, h);
    }
    struct place_gang done = *g;
    done.job = job;
    done.ntasks = i;
    if (i) place_gang_undo(c->engine, &done, hosts);
    for (uint32_t k = 0; k < i; k++)
        if (c->gang_pods[hosts[k]]) { /* back to what the model counts, once a host */
            c->gang_pods[hosts[k]] = 0;
            host_sync(c, hosts[k]);
        }
    return rc;
}

/* The name job_count counts a pod under. */
static const char *job_name(const struct cm_pod *p, const struct pod_info *info) {
    return info->job ? info->job : info->gang ? info->gang : p->name;
}

static void job_count(struct cluster *c, const struct cm_pod *p, uint32_t h, int delta) {
    if (c->opt.no_engine) return; /* only placement reads them */
    const char *job = job_name(p, &p->info);
    uint32_t id = host_str_intern(c->fleet, job, strlen(job));
    if (id) host_count_add(&c->fleet->jobs, host_count_key(h, id), delta);
}

static void uncount(struct cluster *c, struct cm_pod *p) {
    if (!p->counted_) return;
    if (p->pool_) {
        if (p->counted_ == 1) usage_sub(&p->pool_->alloc, p->counted_flags_, p->counted_req_);
        else usage_sub(&p->pool_->pending, p->counted_flags_, p->counted_req_);
        if (p->pprev_) p->pprev_->pnext_ = p->pnext_;
        else if (p->pool_->index < c->npool_head && c->pool_head[p->pool_->index] == p)
            c->pool_head[p->pool_->index] = p->pnext_;
        if (p->pnext_) p->pnext_->pprev_ = p->pprev_;
        p->pnext_ = p->pprev_ = NULL;
    }
    if (p->host_ != HOST_NONE && p->host_ < c->nhosts) {
        c->host_alloc[p->host_] = resvec_sub(c->host_alloc[p->host_], p->counted_req_);
        c->host_pods[p->host_]--;
        if (p->counted_flags_ & WF_REVOCABLE) {
            c->host_rev[p->host_].cpu -= p->counted_req_.v[RES_CPU];
            c->host_rev[p->host_].pods--;
        }
        host_sync(c, p->host_);
        job_count(c, p, p->host_, -1);
        if (p->hprev_) p->hprev_->hnext_ = p->hnext_;
        else c->host_head[p->host_] = p->hnext_;
        if (p->hnext_) p->hnext_->hprev_ = p->hprev_;
    }
    if (p->unplaced_) c->unplaced = resvec_sub(c->unplaced, p->counted_req_);
    p->unplaced_ = false;
    p->counted_ = 0;
    p->pool_ = NULL;
    p->host_ = HOST_NONE;
    p->hnext_ = p->hprev_ = NULL;
    c->entitle_dirty = true;
    c->gen++;
}

/* How a pod with this info, node and pool would count: 1 as allocation, 2
 * as pending, 0 not at all; *leaf gets its leaf pool. */
static unsigned count_class(struct cluster *c, const struct pod_info *info, bool bad, bool admitted, const char *node,
                            const char *pool, struct respool **leaf) {
    *leaf = leaf_of(c, pool);
    if (bad || info->terminal) return 0;
    bool bound = node != NULL || admitted;
    if (!bound && (!c->opt.count_pending || !*leaf || info->deleting)) return 0;
    return bound ? 1 : 2;
}

/* The host a pod on node counts on, or HOST_NONE. */
static uint32_t count_host(const struct cluster *c, const char *node) {
    uint32_t h = node ? host_fleet_find(c->fleet, node) : HOST_NONE;
    return h != HOST_NONE && h < c->nhosts ? h : HOST_NONE;
}

static void count(struct cluster *c, struct cm_pod *p) {
    if (p->counted_) return;
    struct respool *leaf;
    unsigned cls = count_class(c, &p->info, p->bad, p->admitted, p->node, p->pool, &leaf);
    if (!cls) return;
    bool bound = cls == 1;
    p->counted_ = cls;
    p->counted_req_ = p->info.req;
    p->counted_flags_ = p->info.flags;
    p->pool_ = leaf;
    if (leaf) usage_add(bound ? &leaf->alloc : &leaf->pending, p->info.flags, p->info.req);
    if (leaf && leaf->index < c->npool_head) { /* sized for the tree by rebuild_pools */
        p->pprev_ = NULL;
        p->pnext_ = c->pool_head[leaf->index];
        if (p->pnext_) p->pnext_->pprev_ = p;
        c->pool_head[leaf->index] = p;
    }
    p->host_ = HOST_NONE;
    if (p->node) {
        uint32_t h = count_host(c, p->node);
        if (h != HOST_NONE) {
            p->host_ = h;
            c->host_alloc[h] = resvec_add(c->host_alloc[h], p->info.req);
            c->host_pods[h]++;
            if (p->info.flags & WF_REVOCABLE) {
                c->host_rev[h].cpu += p->info.req.v[RES_CPU];
                c->host_rev[h].pods++;
            }
            host_sync(c, h);
            job_count(c, p, h, 1);
            p->hprev_ = NULL;
            p->hnext_ = c->host_head[h];
            if (p->hnext_) p->hnext_->hprev_ = p;
            c->host_head[h] = p;
        }
    } else if (bound && !(p->info.flags & WF_REVOCABLE)) { /* admitted: on its way to a host */
        p->unplaced_ = true;
        c->unplaced = resvec_add(c->unplaced, p->info.req);
    }
    c->entitle_dirty = true;
    c->gen++;
}

/* ---- namespaces and pools ---- */

/* The pool a pod in namespace ns belongs to: its label, else its
 * namespace's pool, else the default. */
static const char *pool_name(struct cluster *c, const char *ns, const char *label) {
    const char *name = label;
    if (!name || !name[0]) name = strmap_get(&c->ns_pool, ns);
    if (!name || !name[0]) name = c->default_pool;
    return name;
}

static void resolve_pool(struct cluster *c, struct cm_pod *p) {
    const char *name = pool_name(c, p->ns, p->info.pool);
    free(p->pool);
    p->pool = xstrdup(name);
}

int cluster_ns_set(struct cluster *c, json_t *ns) {
    json_t *md = json_object_get(ns, "metadata");
    const char *name = json_string_value(json_object_get(md, "name"));
    if (!name) return -EINVAL;
    const char *pool = json_string_value(json_object_get(json_object_get(md, "annotations"), PL_POOL));
    const char *cur = strmap_get(&c->ns_pool, name);
    if ((cur ? cur : "")[0] == 0 && !pool) return 0;
    if (cur && pool && !strcmp(cur, pool)) return 0;
    char *v = strdup(pool ? pool : "");
    void *old = NULL;
    if (!v || strmap_put(&c->ns_pool, name, v, &old)) {
        free(v);
        return -ENOMEM;
    }
    free(old);
    c->pods_dirty = true;
    return 0;
}

void cluster_ns_del(struct cluster *c, const char *name) {
    char *v = strmap_del(&c->ns_pool, name);
    if (v) {
        free(v);
        c->pods_dirty = true;
    }
}

int cluster_pool_set(struct cluster *c, json_t *pool) {
    const char *name = json_string_value(json_object_get(json_object_get(pool, "metadata"), "name"));
    if (!name) return -EINVAL;
    json_t *old = strmap_get(&c->pools, name);
    if (old && json_equal(json_object_get(old, "spec"), json_object_get(pool, "spec")) &&
        crd_pool_deleting(old) == crd_pool_deleting(pool)) {
        json_incref(pool);
        strmap_put(&c->pools, name, pool, NULL);
        json_decref(old);
        return 0; /* a status or finalizer write: nothing the tree depends on */
    }
    json_incref(pool);
    if (strmap_put(&c->pools, name, pool, NULL)) {
        json_decref(pool);
        return -ENOMEM;
    }
    json_decref(old);
    c->pools_dirty = true;
    return 0;
}

void cluster_pool_del(struct cluster *c, const char *name) {
    json_t *v = strmap_del(&c->pools, name);
    if (v) {
        json_decref(v);
        c->pools_dirty = true;
    }
}

/* ---- nodes ---- */

int cluster_node_set(struct cluster *c, json_t *node) {
    const char *name = json_string_value(json_object_get(json_object_get(node, "metadata"), "name"));
    if (!name || !name[0]) return -EINVAL;
    json_t *st = json_object_get(node, "status"), *spec = json_object_get(node, "spec");
    bool ready = node_ready(node), unsched = json_is_true(json_object_get(spec, "unschedulable"));
    json_t *sigv = json_pack("{s:O?, s:O?, s:O?, s:b, s:b}", "l",
                             json_object_get(json_object_get(node, "metadata"), "labels"), "t",
                             json_object_get(spec, "taints"), "a", json_object_get(st, "allocatable"), "r", ready,
                             "u", unsched);
    char *sig = sigv ? json_dumps(sigv, JSON_SORT_KEYS | JSON_COMPACT) : NULL;
    json_decref(sigv);
    if (!sig) return -ENOMEM;
    struct cm_node *n = strmap_get(&c->nodes, name);
    if (!n) {
        n = calloc(1, sizeof *n);
        if (!n || !(n->name = strdup(name)) || strmap_put(&c->nodes, name, n, NULL)) {
            if (n) free(n->name);
            free(n);
            free(sig);
            return -ENOMEM;
        }
        c->nodes_dirty = true;
    } else if (strcmp(n->sig, sig)) {
        c->nodes_dirty = true;
    }
    free(n->sig);
    n->sig = sig;
    json_incref(node);
    json_decref(n->obj);
    n->obj = node;
    n->ready = ready;
    n->unschedulable = unsched;
    return 0;
}

void cluster_node_del(struct cluster *c, const char *name) {
    struct cm_node *n = strmap_del(&c->nodes, name);
    if (!n) return;
    json_decref(n->obj);
    free(n->name);
    free(n->sig);
    free(n);
    c->nodes_dirty = true;
}

void cluster_node_down(struct cluster *c, const char *name, bool down) {
    struct cm_node *n = strmap_get(&c->nodes, name);
    if (n && n->down != down) {
        n->down = down;
        c->nodes_dirty = true;
    }
}

/* ---- pods ---- */

static void gang_key(char *buf, size_t len, const char *ns, const char *gang) { snprintf(buf, len, "%s/%s", ns, gang); }

static void gang_remove(struct cluster *c, struct cm_pod *p) {
    if (!p->info.gang) return;
    char k[600];
    gang_key(k, sizeof k, p->ns, p->info.gang);
    struct cm_gang *g = strmap_get(&c->gangs, k);
    if (!g) return;
    for (size_t i = 0; i < g->n; i++)
        if (g->v[i] == p) {
            g->v[i] = g->v[--g->n];
            break;
        }
    if (!g->n) {
        strmap_del(&c->gangs, k);
        free(g->v);
        free(g);
    }
}

static int gang_add(struct cluster *c, struct cm_pod *p) {
    if (!p->info.gang) return 0;
    char k[600];
    gang_key(k, sizeof k, p->ns, p->info.gang);
    struct cm_gang *g = strmap_get(&c->gangs, k);
    if (!g) {
        if (!(g = calloc(1, sizeof *g)) || strmap_put(&c->gangs, k, g, NULL)) {
            free(g);
            return -ENOMEM;
        }
    }
    if (g->n == g->cap) {
        size_t nc = g->cap ? g->cap * 2 : 4;
        struct cm_pod **v = realloc(g->v, nc * sizeof *v);
        if (!v) return -ENOMEM;
        g->v = v;
        g->cap = nc;
    }
    g->v[g->n++] = p;
    return 0;
}

/* Whether a counted pod, decoded anew as ni and to sit on node in pool,
 * would be counted exactly as it is: then a new version of it (a status
 * write, most often) leaves the pools', hosts' and placement's counts alone. */
static bool counts_same(struct cluster *c, const struct cm_pod *p, const struct pod_info *ni, bool bad,
                        const char *node, const char *pool) {
    struct respool *leaf;
    if (!p->counted_ || count_class(c, ni, bad, p->admitted, node, pool, &leaf) != p->counted_ || leaf != p->pool_ ||
        !resvec_eq(ni->req, p->counted_req_) || ni->flags != p->counted_flags_)
        return false;
    uint32_t h = count_host(c, node);
    if (h != p->host_) return false;
    return h == HOST_NONE || c->opt.no_engine || !strcmp(job_name(p, &p->info), job_name(p, ni));
}

/* Copies info's strings into one block of its own (*mem; NULL when there
 * are none), so that info outlives the object it was decoded from. */
static int info_own(struct pod_info *info, char **mem) {
    const char **f[] = {&info->pool, &info->gang, &info->job, &info->node, &info->scheduler};
    size_t n = 0;
    for (size_t i = 0; i < sizeof f / sizeof f[0]; i++)
        if (*f[i]) n += strlen(*f[i]) + 1;
    *mem = NULL;
    if (!n) return 0;
    char *m = malloc(n), *at = m;
    if (!m) return -ENOMEM;
    for (size_t i = 0; i < sizeof f / sizeof f[0]; i++) {
        if (!*f[i]) continue;
        size_t l = strlen(*f[i]) + 1;
        memcpy(at, *f[i], l);
        *f[i] = at;
        at += l;
    }
    *mem = m;
    return 0;
}

/* What pod_task_build reads of a pod (its labels, nodeSelector, affinity and
 * tolerations), in an object of its own that shares them with pod: a pod
 * waiting for placement is held at a few hundred bytes instead of its whole
 * tree (4.5 KB for a small slim pod). NULL when out of memory. */
static json_t *task_view(const json_t *pod) {
    static const char *const spec_keys[] = {"nodeSelector", "affinity", "tolerations"};
    const json_t *spec = json_object_get(pod, "spec");
    json_t *labels = json_object_get(json_object_get(pod, "metadata"), "labels");
    json_t *v = json_object(), *vm = json_object(), *vs = json_object();
    bool ok = v && vm && vs && !(labels && json_object_set(vm, "labels", labels));
    for (size_t i = 0; ok && i < sizeof spec_keys / sizeof spec_keys[0]; i++) {
        json_t *x = json_object_get(spec, spec_keys[i]);
        if (x && json_object_set(vs, spec_keys[i], x)) ok = false;
    }
    if (ok && !json_object_set(v, "metadata", vm) && !json_object_set(v, "spec", vs)) {
        json_decref(vm);
        json_decref(vs);
        return v;
    }
    json_decref(v);
    json_decref(vm);
    json_decref(vs);
    return NULL;
}

int cluster_pod_set(struct cluster *c, json_t *pod) {
    json_t *md = json_object_get(pod, "metadata");
    const char *ns = json_string_value(json_object_get(md, "namespace")),
               *name = json_string_value(json_object_get(md, "name")),
               *uid = json_string_value(json_object_get(md, "uid")),
               *rv = json_string_value(json_object_get(md, "resourceVersion"));
    if (!ns || !name) return -EINVAL;
    char key[600];
    snprintf(key, sizeof key, "%s/%s", ns, name);
    struct cm_pod *p = strmap_get(&c->pods, key);
    bool fresh = !p;
    if (fresh) {
        p = calloc(1, sizeof *p);
        if (!p || !(p->ns = strdup(ns)) || !(p->name = strdup(name)) || !(p->key = strdup(key)) ||
            strmap_put(&c->pods, key, p, NULL)) {
            pod_free(p);
            return -ENOMEM;
        }
        p->host_ = HOST_NONE;
        p->seen_ns = metrics_now_ns();
    }
    struct pod_info ni;
    char err[256], *mem = NULL;
    bool bad = pod_info_decode(pod, &ni, err, sizeof err) != 0;
    if (bad) {
        memset(&ni, 0, sizeof ni);
        ni.gang_size = 1;
    }
    if (info_own(&ni, &mem)) {
        if (fresh) {
            strmap_del(&c->pods, key);
            pod_free(p);
        }
        return -ENOMEM;
    }
    /* the object says where it is, which replaces any assumption */
    const char *node = ni.node ? ni.node : p->assumed ? p->node : NULL;
    bool keep = !fresh && counts_same(c, p, &ni, bad, node, pool_name(c, p->ns, ni.pool));
    if (!fresh) { /* with the old object's info */
        if (!keep) uncount(c, p);
        gang_remove(c, p);
        if (p->uid) strmap_del(&c->uids, p->uid);
    }
    json_incref(pod);
    json_decref(p->obj);
    p->obj = pod;
    p->version = ++c->pod_versions;
    free(p->uid);
    p->uid = xstrdup(uid);
    if (p->uid) strmap_put(&c->uids, p->uid, p, NULL);
    free(p->rv);
    p->rv = xstrdup(rv);
    p->info = ni;
    free(p->info_mem_);
    p->info_mem_ = mem;
    p->bad = bad;
    if (p->info.node) {
        free(p->node);
        p->node = strdup(p->info.node);
        p->assumed = false;
    } else if (!p->assumed) {
        free(p->node);
        p->node = NULL;
    }
    if (p->info.terminal) p->admitted = false;
    resolve_pool(c, p);
    gang_add(c, p);
    if (!keep) count(c, p);
    if (c->opt.keep == CM_KEEP_NONE || (c->opt.keep == CM_KEEP_TASKS && (p->info.node || p->info.terminal))) {
        json_decref(p->obj); /* what the model needs of the pod is in info */
        p->obj = NULL;
    } else if (c->opt.keep == CM_KEEP_TASKS) {
        json_t *v = task_view(p->obj); /* out of memory: the whole object stays */
        if (v) {
            json_decref(p->obj);
            p->obj = v;
        }
    }
    return 0;
}

void cluster_pod_del(struct cluster *c, const char *ns, const char *name) {
    char key[600];
    snprintf(key, sizeof key, "%s/%s", ns, name);
    struct cm_pod *p = strmap_del(&c->pods, key);
    if (!p) return;
    uncount(c, p);
    gang_remove(c, p);
    if (p->uid) strmap_del(&c->uids, p->uid);
    pod_free(p);
}

int cluster_assume(struct cluster *c, const char *ns, const char *name, const char *node) {
    struct cm_pod *p = cluster_pod(c, ns, name);
    if (!p || !strmap_get(&c->nodes, node)) return -ENOENT;
    if (p->node && !strcmp(p->node, node)) return 0;
    uncount(c, p);
    free(p->node);
    p->node = strdup(node);
    p->assumed = true;
    count(c, p);
    return p->node ? 0 : -ENOMEM;
}

void cluster_forget(struct cluster *c, const char *ns, const char *name) {
    struct cm_pod *p = cluster_pod(c, ns, name);
    if (!p || !p->assumed) return;
    uncount(c, p);
    free(p->node);
    p->node = NULL;
    p->assumed = false;
    count(c, p);
}

void cluster_admit(struct cluster *c, struct cm_pod *p, bool admitted) {
    if (p->admitted == admitted) return;
    uncount(c, p);
    p->admitted = admitted;
    count(c, p);
}

/* ---- refresh ---- */

static void uncount_all(struct cluster *c) {
    size_t pos = 0;
    void *v;
    while (strmap_next(&c->pods, &pos, NULL, &v)) uncount(c, v);
}

static void count_all(struct cluster *c, bool resolve) {
    size_t pos = 0;
    void *v;
    while (strmap_next(&c->pods, &pos, NULL, &v)) {
        if (resolve) resolve_pool(c, v);
        count(c, v);
    }
}

static int rebuild_pools(struct cluster *c) {
    size_t n = strmap_count(&c->pools), pos = 0, i = 0;
    const json_t **v = calloc(n ? n : 1, sizeof *v);
    if (!v) return -ENOMEM;
    void *x;
    while (strmap_next(&c->pools, &pos, NULL, &x)) v[i++] = x;
    struct respool_tree *t = NULL;
    char err[512];
    int rc = crd_pool_build_tree((const json_t *const *)v, n, &t, err, sizeof err);
    free(v);
    free(c->pool_error);
    c->pool_error = NULL;
    if (rc) {
        c->pool_error = strdup(err);
        return rc == -ENOMEM ? rc : 0; /* keep the previous tree */
    }
    uint32_t lim = respool_index_limit(t);
    struct cm_pod **heads = calloc(lim ? lim : 1, sizeof *heads); /* every pod is uncounted: the lists are empty */
    if (!heads) {
        respool_tree_free(t);
        return -ENOMEM;
    }
    free(c->pool_head);
    c->pool_head = heads;
    c->npool_head = lim;
    admit_tree_release(c->tree); /* a user of admission re-queues on a new tree */
    respool_tree_free(c->tree);
    c->tree = t;
    return 0;
}

static int rebuild_fleet(struct cluster *c) {
    struct host_fleet *f = host_fleet_new();
    if (!f) return -ENOMEM;
    size_t pos = 0;
    void *v;
    int rc = 0;
    struct resvec cap = resvec_zero();
    while (!rc && strmap_next(&c->nodes, &pos, NULL, &v)) {
        struct cm_node *n = v;
        struct kp_mem m = {.lenient = true};
        struct host_spec s;
        if ((rc = node_host_spec(n->obj, &m, &s))) { /* the name is the node's key: only ENOMEM */
            kp_free_all(&m);
            break;
        }
        s.name = n->name;
        s.unschedulable = n->unschedulable;
        s.not_ready = !n->ready || n->down;
        rc = host_fleet_add(f, &s, NULL);
        if (rc == -EINVAL) { /* a node the core cannot take (too many labels): keep it out */
            s.nlabels = 0;
            s.ntaints = 0;
            rc = host_fleet_add(f, &s, NULL);
        }
        if (!rc && !s.unschedulable && !s.not_ready) cap = resvec_add(cap, s.allocatable);
        kp_free_all(&m);
    }
    struct place_engine *e = rc || c->opt.no_engine ? NULL : place_engine_new(f, &c->opt.place);
    size_t nh = f->nhosts ? f->nhosts : 1;
    struct cm_pod **heads = rc ? NULL : calloc(nh, sizeof *heads);
    struct resvec *ha = rc ? NULL : calloc(nh, sizeof *ha);
    uint32_t *hp = rc ? NULL : calloc(nh, sizeof *hp), *hm = rc ? NULL : calloc(nh, sizeof *hm);
    uint64_t *hg = rc ? NULL : malloc(nh * sizeof *hg);
    struct host_rev *hr = rc ? NULL : calloc(nh, sizeof *hr);
    if ((!e && !c->opt.no_engine) || !heads || !ha || !hp || !hm || !hg || !hr) {
        place_engine_free(e);
        host_fleet_free(f);
        free(heads);
        free(ha);
        free(hp);
        free(hm);
        free(hg);
        free(hr);
        return rc ? rc : -ENOMEM;
    }
    uint64_t stamp = ++c->host_stamps;
    for (size_t i = 0; i < nh; i++) hg[i] = stamp;
    pos = 0;
    while (strmap_next(&c->nodes, &pos, NULL, &v)) {
        struct cm_node *n = v;
        uint32_t h = host_fleet_find(f, n->name);
        json_t *al = json_object_get(json_object_get(n->obj, "status"), "allocatable");
        const char *mp = json_string_value(json_object_get(al, "pods"));
        if (h != HOST_NONE && mp) hm[h] = (uint32_t)strtoul(mp, NULL, 10);
    }
    place_engine_free(c->engine);
    host_fleet_free(c->fleet);
    free(c->host_head);
    free(c->host_alloc);
    free(c->host_pods);
    free(c->host_max_pods);
    free(c->host_gen);
    free(c->host_rev);
    c->fleet = f;
    c->engine = e;
    c->host_head = heads;
    c->host_alloc = ha;
    c->host_pods = hp;
    c->host_max_pods = hm;
    c->host_gen = hg;
    c->host_rev = hr;
    c->fleet_gen++;
    c->nhosts = f->nhosts;
    c->capacity = cap;
    return 0;
}

int cluster_refresh(struct cluster *c) {
    int rc = 0;
    if (c->pools_dirty || c->nodes_dirty || c->pods_dirty) {
        uncount_all(c);
        if (c->pools_dirty && (rc = rebuild_pools(c))) return rc;
        if (c->nodes_dirty && (rc = rebuild_fleet(c))) {
            count_all(c, false);
            return rc;
        }
        count_all(c, c->pods_dirty);
        c->pools_dirty = c->nodes_dirty = c->pods_dirty = false;
        c->entitle_dirty = true;
        c->gen++;
    }
    if (c->entitle_dirty) {
        if ((rc = respool_entitle(c->tree, c->capacity, slack_cpu(c)))) return rc;
        c->entitle_dirty = false;
    }
    return 0;
}

void cluster_invalidate(struct cluster *c) {
    c->entitle_dirty = true;
    c->gen++;
}

const char *cluster_pool_error(const struct cluster *c) { return c->pool_error; }
uint64_t cluster_generation(const struct cluster *c) { return c->gen; }
uint64_t cluster_fleet_generation(const struct cluster *c) { return c->fleet_gen; }
const uint64_t *cluster_host_generations(const struct cluster *c) { return c->host_gen; }
struct respool_tree *cluster_tree(struct cluster *c) { return c->tree; }
struct host_fleet *cluster_fleet(struct cluster *c) { return c->fleet; }
struct place_engine *cluster_engine(struct cluster *c) { return c->engine; }
struct resvec cluster_capacity(const struct cluster *c) { return c->capacity; }
size_t cluster_node_count(const struct cluster *c) { return strmap_count(&c->nodes); }
size_t cluster_pod_count(const struct cluster *c) { return strmap_count(&c->pods); }

struct cm_pod *cluster_pod(const struct cluster *c, const char *ns, const char *name) {
    char key[600];
    snprintf(key, sizeof key, "%s/%s", ns, name);
    return strmap_get(&c->pods, key);
}

struct cm_pod *cluster_pod_by_uid(const struct cluster *c, const char *uid) { return strmap_get(&c->uids, uid); }

void cluster_foreach_pod(const struct cluster *c, int (*fn)(void *ud, struct cm_pod *p), void *ud) {
    size_t pos = 0;
    void *v;
    while (strmap_next(&c->pods, &pos, NULL, &v))
        if (fn(ud, v)) return;
}

struct cm_pod *cluster_host_first(const struct cluster *c, uint32_t host) {
    return host < c->nhosts ? c->host_head[host] : NULL;
}

struct respool *cluster_pod_pool(struct cluster *c, const struct cm_pod *p) { return leaf_of(c, p->pool); }

struct cm_pod *cluster_pool_first(const struct cluster *c, const struct respool *leaf) {
    return leaf && leaf->index < c->npool_head && respool_by_index(c->tree, leaf->index) == leaf
               ? c->pool_head[leaf->index]
               : NULL;
}

const char *cluster_pod_pool_problem(struct cluster *c, const struct cm_pod *p, char *buf, size_t len) {
    if (!p->pool) return NULL;
    struct respool *r = crd_pool_find(c->tree, p->pool);
    if (!r) snprintf(buf, len, "resource pool \"%s\" not found", p->pool);
    else if (!respool_is_leaf(r)) snprintf(buf, len, "resource pool \"%s\" is not a leaf pool", p->pool);
    else return NULL;
    return buf;
}

size_t cluster_gang_members(const struct cluster *c, const char *ns, const char *gang, struct cm_pod **out,
                            size_t cap) {
    char k[600];
    gang_key(k, sizeof k, ns, gang);
    struct cm_gang *g = strmap_get(&c->gangs, k);
    size_t n = 0;
    if (!g) return 0;
    for (size_t i = 0; i < g->n; i++) {
        if (g->v[i]->info.terminal) continue;
        if (n < cap) out[n] = g->v[i];
        n++;
    }
    return n;
}

/* ---- admission ---- */

/* Why a pod's pool does not admit it, with the numbers and the way in, as
 * the resource manager says it (admit_why_format): "pool /a at its cpu
 * entitlement: 4 of 4 cores allocated, needs 1; admitted once its work frees
 * 1 core or its entitlement grows by 1 core". */
static int fail(char *why, size_t len, const struct respool *pool, enum res_kind k, const char *rule, int64_t limit,
                int64_t alloc, int64_t demand, const char *to, const char *work) {
    if (!why) return -ENOSPC;
    char a[64], b[48], d[48], need[64];
    admit_amount_format(k, limit, a, sizeof a);
    quantity_format_display(k, alloc, b, sizeof b);
    quantity_format_display(k, demand, d, sizeof d);
    admit_amount_format(k, alloc + demand - limit, need, sizeof need);
    int n = snprintf(why, len, "pool %s at its %s %s: %s of %s allocated%s, needs %s", pool->path, res_kind_name(k),
                     rule, b, a, to, d);
    if (n < 0 || (size_t)n >= len) return -ENOSPC;
    if (demand > limit) /* no work ending is enough */
        snprintf(why + n, len - (size_t)n, "; admitted once its %s grows by %s (the pod is larger than the whole %s)",
                 rule, need, rule);
    else
        snprintf(why + n, len - (size_t)n, "; admitted once its %s frees %s or its %s grows by %s", work, need, rule,
                 need);
    return -ENOSPC;
}

int cluster_admit_check(struct cluster *c, const struct cm_pod *p, struct resvec demand, char *why, size_t len,
                        bool *resolvable) {
    if (resolvable) *resolvable = true;
    if (!p->pool) return 0;
    struct respool *leaf = leaf_of(c, p->pool);
    if (!leaf) {
        if (resolvable) *resolvable = false;
        if (why) cluster_pod_pool_problem(c, p, why, len);
        return -ENOSPC;
    }
    struct usage u = leaf->alloc;
    if (p->counted_ == 1 && p->pool_ == leaf) usage_sub(&u, p->counted_flags_, p->counted_req_);
    unsigned fl = p->info.flags;
    struct resvec ns = usage_nonslack(&u);
    for (int k = 0; k < RES_NKINDS; k++) {
        int64_t d = demand.v[k];
        if (d <= 0) continue;
        if (!(fl & WF_PREEMPTIBLE) && u.c[UC_NONPREEMPT].v[k] + d > leaf->cfg.res[k].reservation) {
            if (resolvable) *resolvable = false;
            return fail(why, len, leaf, k, "reservation", leaf->cfg.res[k].reservation, u.c[UC_NONPREEMPT].v[k], d,
                        " to non-preemptible work", "non-preemptible work");
        }
        if (fl & WF_REVOCABLE) {
            if (u.c[UC_REVOCABLE].v[k] + d > leaf->slack_entitlement.v[k])
                return fail(why, len, leaf, k, "slack entitlement", leaf->slack_entitlement.v[k],
                            u.c[UC_REVOCABLE].v[k], d, " to revocable work", "revocable work");
        } else if (ns.v[k] + d > leaf->entitlement.v[k]) {
            if (resolvable && d > respool_effective_limit(leaf, k)) *resolvable = false;
            return fail(why, len, leaf, k, "entitlement", leaf->entitlement.v[k], ns.v[k], d, "", "work");
        }
    }
    return 0;
}
