/* The extender's state: the cluster model it shares with pelotond, the job
 * types, the admitted gangs. No I/O. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ext_int.h"
#include "job.h"
#include "labels.h"

void ext_core_options_default(struct ext_core_options *o) {
    memset(o, 0, sizeof *o);
    o->gang_ttl_ms = EXT_DEFAULT_GANG_TTL_MS;
}

struct ext_core *ext_core_new(const struct ext_core_options *o) {
    struct ext_core *x = calloc(1, sizeof *x);
    if (!x) return NULL;
    if (o) x->o = *o;
    else ext_core_options_default(&x->o);
    if (!x->o.gang_ttl_ms) x->o.gang_ttl_ms = EXT_DEFAULT_GANG_TTL_MS;
    if (x->o.default_pool && x->o.default_pool[0] && !(x->default_pool = strdup(x->o.default_pool))) goto fail;
    x->o.default_pool = x->default_pool;
    struct cm_options co;
    cm_options_default(&co);
    co.default_pool = x->default_pool;
    /* Pending pods are demand: a pool with pods waiting is entitled to its
     * share, as in pelotond's resource manager. */
    co.count_pending = true;
    if (!(x->cm = cluster_new(&co)) || !(x->jobs = json_object()) || !(x->inflight = json_object()) ||
        !(x->passed = json_object()) ||
        !(x->nominated = json_object()) || ext_metrics_init(x, x->o.metrics))
        goto fail;
    return x;
fail:
    ext_core_free(x);
    return NULL;
}

void ext_core_free(struct ext_core *x) {
    if (!x) return;
    while (x->gangs) ext_gang_drop(x, x->gangs);
    free(x->adopted_ns);
    free(x->adopted_name);
    cluster_free(x->cm);
    json_decref(x->jobs);
    json_decref(x->inflight);
    json_decref(x->passed);
    json_decref(x->nominated);
    free(x->default_pool);
    ext_scratch_free(&x->sc);
    ext_memo_free(&x->memo);
    ext_metrics_free(&x->m);
    free(x);
}

struct cluster *ext_core_cluster(struct ext_core *x) { return x->cm; }
void ext_core_changed(struct ext_core *x) { x->dirty = true; }

int ext_core_refresh(struct ext_core *x) {
    if (!x->dirty) return 0;
    int rc = cluster_refresh(x->cm);
    if (!rc) x->dirty = false;
    return rc;
}

const char *ext_obj_ns(const json_t *obj) {
    const char *ns = json_string_value(json_object_get(json_object_get(obj, "metadata"), "namespace"));
    return ns && ns[0] ? ns : "default";
}

const char *ext_obj_name(const json_t *obj) {
    const char *n = json_string_value(json_object_get(json_object_get(obj, "metadata"), "name"));
    return n && n[0] ? n : NULL;
}

const char *ext_obj_meta(const json_t *obj, const char *field, const char *key) {
    return json_string_value(json_object_get(json_object_get(json_object_get(obj, "metadata"), field), key));
}

static int job_type_of(const json_t *job) {
    static const char *const names[] = {"BATCH", "STATELESS", "STATEFUL", "DAEMON"};
    const char *t = json_string_value(json_object_get(json_object_get(job, "spec"), "type"));
    for (int i = 0; t && i < JOB_NTYPES; i++)
        if (!strcmp(t, names[i])) return i;
    return -1;
}

static int job_key(const json_t *obj, char *key, size_t len) {
    const char *name = ext_obj_name(obj);
    if (!name) return -EINVAL;
    int n = snprintf(key, len, "%s/%s", ext_obj_ns(obj), name);
    return n < 0 || (size_t)n >= len ? -ENAMETOOLONG : 0;
}

int ext_core_set(struct ext_core *x, const char *kind, json_t *obj) {
    int rc;
    if (!strcmp(kind, "Node")) rc = cluster_node_set(x->cm, obj);
    else if (!strcmp(kind, "Namespace")) rc = cluster_ns_set(x->cm, obj);
    else if (!strcmp(kind, "ResourcePool")) rc = cluster_pool_set(x->cm, obj);
    else if (!strcmp(kind, "Pod")) {
        rc = cluster_pod_set(x->cm, obj);
        if (!rc) ext_nominated_note(x, ext_obj_ns(obj), ext_obj_name(obj), obj);
        if (!rc) ext_passed_seen(x, ext_obj_ns(obj), ext_obj_name(obj));
    } else if (!strcmp(kind, "Job")) {
        char key[600];
        if ((rc = job_key(obj, key, sizeof key))) return rc;
        int t = job_type_of(obj);
        if (t < 0) json_object_del(x->jobs, key);
        else rc = json_object_set_new(x->jobs, key, json_integer(t)) ? -ENOMEM : 0;
        return rc; /* job types do not change the model */
    } else return -EINVAL;
    x->dirty = true;
    return rc;
}

void ext_core_del(struct ext_core *x, const char *kind, json_t *obj) {
    const char *name = ext_obj_name(obj);
    if (!name) return;
    if (!strcmp(kind, "Node")) cluster_node_del(x->cm, name);
    else if (!strcmp(kind, "Namespace")) cluster_ns_del(x->cm, name);
    else if (!strcmp(kind, "ResourcePool")) cluster_pool_del(x->cm, name);
    else if (!strcmp(kind, "Pod")) {
        cluster_pod_del(x->cm, ext_obj_ns(obj), name);
        ext_nominated_forget(x, ext_obj_ns(obj), name);
    }
    else if (!strcmp(kind, "Job")) {
        char key[600];
        if (!job_key(obj, key, sizeof key)) json_object_del(x->jobs, key);
        return;
    } else return;
    x->dirty = true;
}

struct cm_pod *ext_pod_for(struct ext_core *x, json_t *pod, char *err, size_t errlen) {
    const char *name = ext_obj_name(pod), *ns = ext_obj_ns(pod);
    if (!json_is_object(pod) || !name) {
        snprintf(err, errlen, "ExtenderArgs.Pod.metadata.name: missing");
        return NULL;
    }
    if (ext_core_refresh(x)) {
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    struct cm_pod *p = cluster_pod(x->cm, ns, name);
    const char *uid = json_string_value(json_object_get(json_object_get(pod, "metadata"), "uid"));
    /* unknown, or a newer pod of the same name than the cache holds */
    if (!p || (uid && uid[0] && p->uid && p->uid[0] && strcmp(uid, p->uid) && !p->node)) {
        bool known = p != NULL;
        int rc = cluster_pod_set(x->cm, pod);
        x->dirty = true;
        if (!rc && !known) {
            ext_pod_release(x);
            x->adopted_ns = strdup(ns);
            x->adopted_name = strdup(name);
        }
        if (rc || ext_core_refresh(x) || !(p = cluster_pod(x->cm, ns, name))) {
            snprintf(err, errlen, "pod %s/%s: %s", ns, name, rc == -ENOMEM ? "out of memory" : "cannot be decoded");
            return NULL;
        }
    }
    ext_nominated_from_request(x, p, pod);
    if (p->bad) {
        struct pod_info info;
        char why[256] = "cannot be decoded";
        pod_info_decode(p->obj, &info, why, sizeof why);
        snprintf(err, errlen, "pod %s/%s: %s", ns, name, why);
        return NULL;
    }
    return p;
}

void ext_pod_release(struct ext_core *x) {
    if (x->adopted_ns && x->adopted_name) {
        cluster_pod_del(x->cm, x->adopted_ns, x->adopted_name);
        x->dirty = true;
    }
    free(x->adopted_ns);
    free(x->adopted_name);
    x->adopted_ns = x->adopted_name = NULL;
}

const char *ext_pod_job(const struct cm_pod *p) { return p->info.job ? p->info.job : p->info.gang; }

enum place_strategy ext_pod_strategy(struct ext_core *x, const struct cm_pod *p) {
    enum place_strategy s;
    const char *a = ext_obj_meta(p->obj, "annotations", PA_STRATEGY);
    if (a && !pod_strategy_parse(a, &s)) return s;
    const char *job = ext_obj_meta(p->obj, "labels", PL_JOB);
    if (job) {
        char key[600];
        snprintf(key, sizeof key, "%s/%s", p->ns, job);
        json_t *t = json_object_get(x->jobs, key);
        if (t) switch (json_integer_value(t)) {
            case JOB_BATCH: return PLACE_PACK;             /* fill hosts, keep whole hosts free for big gangs */
            case JOB_STATELESS: return PLACE_SPREAD_JOB;   /* replicas apart: one host lost, few replicas lost */
            case JOB_STATEFUL: return PLACE_SPREAD_JOB;    /* the same, for the volumes too */
            case JOB_DAEMON: return PLACE_LEAST_LOADED;    /* one per host anyway: go where it hurts least */
            default: break;
            }
    }
    return PLACE_PACK;
}

/* ---- gang plans ---- */

struct ext_gang *ext_gang_find(struct ext_core *x, const char *ns, const char *id, uint64_t now_ms) {
    for (struct ext_gang *g = x->gangs; g; g = g->next)
        if (!strcmp(g->ns, ns) && !strcmp(g->id, id)) {
            if (g->expires_ms <= now_ms) {
                ext_gang_drop(x, g);
                return NULL;
            }
            return g;
        }
    return NULL;
}

struct ext_gang *ext_gang_add(struct ext_core *x, const char *ns, const char *id, uint32_t n, uint64_t now_ms) {
    struct ext_gang *g = calloc(1, sizeof *g);
    if (!g) return NULL;
    g->ns = strdup(ns);
    g->id = strdup(id);
    g->pods = calloc(n ? n : 1, sizeof *g->pods);
    g->nodes = calloc(n ? n : 1, sizeof *g->nodes);
    g->req = calloc(n ? n : 1, sizeof *g->req);
    g->n = n;
    g->expires_ms = now_ms + x->o.gang_ttl_ms;
    g->next = x->gangs;
    x->gangs = g;
    if (!g->ns || !g->id || !g->pods || !g->nodes || !g->req) {
        ext_gang_drop(x, g);
        return NULL;
    }
    x->st.gangs_admitted++;
    metrics_inc(x->m.gangs_admitted);
    return g;
}

void ext_gang_drop(struct ext_core *x, struct ext_gang *g) {
    for (struct ext_gang **pp = &x->gangs; *pp; pp = &(*pp)->next)
        if (*pp == g) {
            *pp = g->next;
            break;
        }
    for (uint32_t i = 0; i < g->n; i++) {
        if (g->pods) free(g->pods[i]);
        if (g->nodes) free(g->nodes[i]);
    }
    free(g->pods);
    free(g->nodes);
    free(g->req);
    free(g->ns);
    free(g->id);
    free(g);
}

void ext_gangs_expire(struct ext_core *x, uint64_t now_ms) {
    struct ext_gang *g = x->gangs;
    while (g) {
        struct ext_gang *next = g->next;
        if (g->expires_ms <= now_ms) ext_gang_drop(x, g);
        g = next;
    }
}

const char *ext_gang_node(const struct ext_gang *g, const char *pod) {
    for (uint32_t i = 0; i < g->n; i++)
        if (g->pods[i] && !strcmp(g->pods[i], pod)) return g->nodes[i];
    return NULL;
}

void ext_core_stats(const struct ext_core *x, struct ext_stats *out) {
    *out = x->st;
    out->nodes = cluster_node_count(x->cm);
    out->pods = cluster_pod_count(x->cm);
    out->gangs_held = 0;
    for (const struct ext_gang *g = x->gangs; g; g = g->next) out->gangs_held++;
}
