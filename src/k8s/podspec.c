/* Pods in the core's terms (podspec.h). */
#include "podspec.h"
#include "ktime.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "k8sparse.h"
#include "labels.h"
#include "quantity.h"
#include "respool.h"

#define PS_MAX_CONTAINERS 1024

static const char *str_at(const json_t *obj, const char *key) {
    return json_string_value(json_object_get(obj, key));
}

static const char *label(const json_t *md, const char *key) {
    return str_at(json_object_get(md, "labels"), key);
}

static const char *annotation(const json_t *md, const char *key) {
    return str_at(json_object_get(md, "annotations"), key);
}

/* Where a container is, for messages: "spec.<key>[<i>]" (key NULL: no
 * container). Formatted only when a message needs it, since every pod of
 * every watch event is decoded. */
struct cpath {
    const char *key;
    size_t i;
};

/* The path of resource list `which` of the container at c ("spec.containers[0].resources.limits"),
 * or `which` alone when c names no container. */
static void list_path(char *out, size_t n, struct cpath c, const char *which) {
    if (c.key) snprintf(out, n, "spec.%s[%zu].resources.%s", c.key, c.i, which);
    else snprintf(out, n, "%s", which);
}

/* Adds resource list `which` (requests or limits) of the container at c to r;
 * unknown names are ignored. */
static int add_list(const json_t *list, struct resvec *r, struct cpath c, const char *which, char *err,
                    size_t errlen) {
    static const struct {
        const char *name;
        enum res_kind k;
    } names[] = {{"cpu", RES_CPU}, {"memory", RES_MEMORY}, {"ephemeral-storage", RES_DISK},
                 {PELOTON_GPU_RESOURCE, RES_GPU}};
    if (!list || json_is_null(list)) return 0;
    if (!json_is_object(list)) {
        char w[KP_WHERE];
        list_path(w, sizeof w, c, which);
        snprintf(err, errlen, "%s: expected an object", w);
        return -EINVAL;
    }
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        json_t *v = json_object_get(list, names[i].name);
        if (!v) continue;
        int64_t q;
        char e[160], buf[64];
        const char *s = json_string_value(v);
        if (!s && json_is_integer(v)) {
            snprintf(buf, sizeof buf, "%lld", (long long)json_integer_value(v));
            s = buf;
        } else if (!s && json_is_real(v)) {
            snprintf(buf, sizeof buf, "%.17g", json_real_value(v));
            s = buf;
        }
        char w[KP_WHERE];
        if (!s || quantity_parse_kind(names[i].k, s, &q, e, sizeof e) || q < 0) {
            list_path(w, sizeof w, c, which);
            snprintf(err, errlen, "%s.%s: %s", w, names[i].name, s ? e : "expected a quantity");
            return -EINVAL;
        }
        r->v[names[i].k] += q;
        if (r->v[names[i].k] < 0 || r->v[names[i].k] >= RES_UNLIMITED) {
            list_path(w, sizeof w, c, which);
            snprintf(err, errlen, "%s.%s: too large", w, names[i].name);
            return -EINVAL;
        }
    }
    return 0;
}

/* A container's request: requests, with limits standing in per kind. */
static int container_req(const json_t *c, struct resvec *out, struct cpath at, char *err, size_t errlen) {
    struct resvec req = resvec_zero(), lim = resvec_zero();
    json_t *res = json_object_get(c, "resources");
    *out = resvec_zero();
    if (!res || json_is_null(res)) return 0;
    if (!json_is_object(res)) {
        snprintf(err, errlen, "spec.%s[%zu].resources: expected an object", at.key, at.i);
        return -EINVAL;
    }
    int rc = add_list(json_object_get(res, "requests"), &req, at, "requests", err, errlen);
    if (rc) return rc;
    if ((rc = add_list(json_object_get(res, "limits"), &lim, at, "limits", err, errlen))) return rc;
    json_t *rq = json_object_get(res, "requests");
    static const char *const kn[RES_NKINDS] = {"cpu", "memory", "ephemeral-storage", PELOTON_GPU_RESOURCE};
    for (int k = 0; k < RES_NKINDS; k++)
        out->v[k] = json_object_get(rq, kn[k]) ? req.v[k] : lim.v[k];
    return 0;
}

static int containers(const json_t *spec, const char *key, bool init, struct resvec *out, char *err,
                      size_t errlen) {
    json_t *arr = json_object_get(spec, key);
    *out = resvec_zero();
    if (!arr || json_is_null(arr)) return 0;
    if (!json_is_array(arr) || json_array_size(arr) > PS_MAX_CONTAINERS) {
        snprintf(err, errlen, "spec.%s: expected an array of at most %d containers", key, PS_MAX_CONTAINERS);
        return -EINVAL;
    }
    size_t i;
    json_t *c;
    json_array_foreach(arr, i, c) {
        struct resvec r;
        if (!json_is_object(c)) {
            snprintf(err, errlen, "spec.%s[%zu]: expected an object", key, i);
            return -EINVAL;
        }
        int rc = container_req(c, &r, (struct cpath){key, i}, err, errlen);
        if (rc) return rc;
        *out = init ? resvec_max(*out, r) : resvec_add(*out, r);
    }
    return 0;
}

/* What a slim pod's containers keep: their name and resources (the models'
 * requests), and the image, argv and env the Mesos driver's TaskInfo is made
 * of (it shares the feed: one decoding of each event instead of two). */
static bool slim_container_key(const char *key, size_t len) {
    static const char *const keep[] = {"name", "resources", "image", "command", "args", "env"};
    for (size_t i = 0; i < sizeof keep / sizeof *keep; i++)
        if (len == strlen(keep[i]) && !memcmp(key, keep[i], len)) return true;
    return false;
}

static void slim_containers(json_t *list) {
    size_t i;
    json_t *c;
    json_array_foreach(list, i, c) {
        if (!json_is_object(c)) continue;
        const char *k;
        json_t *v, *tmp;
        json_object_foreach_safe(c, tmp, k, v) {
            if (!slim_container_key(k, strlen(k))) json_object_del(c, k);
        }
    }
}

void pod_slim(json_t *pod) {
    json_object_del(json_object_get(pod, "metadata"), "managedFields");
    json_t *spec = json_object_get(pod, "spec");
    slim_containers(json_object_get(spec, "containers"));
    slim_containers(json_object_get(spec, "initContainers"));
    json_t *st = json_object_get(pod, "status");
    if (!json_is_object(st)) return;
    const char *k;
    json_t *v, *tmp;
    json_object_foreach_safe(st, tmp, k, v) {
        if (strcmp(k, "phase") && strcmp(k, "reason")) json_object_del(st, k); /* reason: the Mesos driver's */
    }
}

#define KEY_IS(lit) (len == sizeof lit - 1 && !memcmp(key, lit, len))

bool pod_slim_keep(void *ud, const struct jparse_seg *path, int depth, const char *key, size_t len) {
    (void)ud;
    if (depth == 1 && JPARSE_SEG_IS(&path[0], "status")) return KEY_IS("phase") || KEY_IS("reason");
    if (depth == 1 && JPARSE_SEG_IS(&path[0], "metadata")) return !KEY_IS("managedFields");
    if (depth == 3 && JPARSE_SEG_IS(&path[0], "spec") &&
        (JPARSE_SEG_IS(&path[1], "containers") || JPARSE_SEG_IS(&path[1], "initContainers")) && !path[2].key)
        return slim_container_key(key, len);
    return true;
}

int pod_strategy_parse(const char *s, enum place_strategy *out) {
    if (!s) return -EINVAL;
    if (!strcasecmp(s, "PACK")) *out = PLACE_PACK;
    else if (!strcasecmp(s, "SPREAD_JOB")) *out = PLACE_SPREAD_JOB;
    else if (!strcasecmp(s, "LEAST_LOADED")) *out = PLACE_LEAST_LOADED;
    else return -EINVAL;
    return 0;
}

static bool parse_u32(const char *s, uint32_t *out) {
    if (!s || !*s) return false;
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (*end || errno || v > UINT32_MAX || s[0] == '-') return false;
    *out = (uint32_t)v;
    return true;
}

static int64_t parse_time_ms(const char *s) {
    int64_t secs;
    return ktime_parse(s, &secs) ? secs * 1000 : 0;
}

int pod_info_decode(const json_t *pod, struct pod_info *out, char *err, size_t errlen) {
    memset(out, 0, sizeof *out);
    out->gang_size = 1;
    out->flags = WF_PREEMPTIBLE;
    if (!json_is_object(pod)) {
        snprintf(err, errlen, "pod: expected an object");
        return -EINVAL;
    }
    json_t *md = json_object_get(pod, "metadata"), *spec = json_object_get(pod, "spec");
    if (!json_is_object(md) || !json_is_object(spec)) {
        snprintf(err, errlen, "pod: metadata and spec must be objects");
        return -EINVAL;
    }
    struct resvec run, init, over = resvec_zero();
    int rc;
    if ((rc = containers(spec, "containers", false, &run, err, errlen)) ||
        (rc = containers(spec, "initContainers", true, &init, err, errlen)) ||
        (rc = add_list(json_object_get(spec, "overhead"), &over, (struct cpath){NULL, 0}, "spec.overhead", err, errlen)))
        return rc;
    out->req = resvec_add(resvec_max(run, init), over);

    const char *pa = annotation(md, PA_PRIORITY);
    json_t *prio = json_object_get(spec, "priority");
    if (pa) {
        if (!parse_u32(pa, &out->priority)) {
            snprintf(err, errlen, "metadata.annotations[%s]: \"%s\" is not a non-negative integer", PA_PRIORITY, pa);
            return -EINVAL;
        }
    } else if (json_is_integer(prio) && json_integer_value(prio) > 0) {
        json_int_t p = json_integer_value(prio);
        out->priority = p > UINT32_MAX ? UINT32_MAX : (uint32_t)p;
    }
    const char *pre = annotation(md, PA_PREEMPTIBLE), *rev = annotation(md, PA_REVOCABLE);
    if (pre && !strcasecmp(pre, "false")) out->flags &= ~WF_PREEMPTIBLE;
    if (rev && !strcasecmp(rev, "true")) {
        if (!(out->flags & WF_PREEMPTIBLE)) {
            snprintf(err, errlen, "metadata.annotations: revocable work must be preemptible");
            return -EINVAL;
        }
        out->flags |= WF_REVOCABLE;
    }
    const char *st = annotation(md, PA_STRATEGY);
    if (st && pod_strategy_parse(st, &out->strategy)) {
        snprintf(err, errlen, "metadata.annotations[%s]: \"%s\" is not PACK, SPREAD_JOB or LEAST_LOADED", PA_STRATEGY,
                 st);
        return -EINVAL;
    }
    out->pool = label(md, PL_POOL);
    out->gang = label(md, PL_GANG);
    if (out->gang && !out->gang[0]) out->gang = NULL;
    const char *gs = label(md, PL_GANG_SIZE);
    if (out->gang) {
        if (!gs || !parse_u32(gs, &out->gang_size) || out->gang_size < 1 || out->gang_size > 100000) {
            snprintf(err, errlen, "metadata.labels[%s]: a gang needs a size between 1 and 100000 (got \"%s\")",
                     PL_GANG_SIZE, gs ? gs : "");
            return -EINVAL;
        }
    }
    out->job = label(md, PL_JOB);
    if (!out->job) {
        json_t *refs = json_object_get(md, "ownerReferences"), *r;
        size_t i;
        json_array_foreach(refs, i, r) if (json_is_true(json_object_get(r, "controller"))) {
            out->job = str_at(r, "name");
            break;
        }
    }
    out->node = str_at(spec, "nodeName");
    if (out->node && !out->node[0]) out->node = NULL;
    out->scheduler = str_at(spec, "schedulerName");
    if (!out->scheduler || !out->scheduler[0]) out->scheduler = "default-scheduler";
    const char *phase = str_at(json_object_get(pod, "status"), "phase");
    out->phase = !phase || !strcmp(phase, "Pending") ? POD_PENDING
                 : !strcmp(phase, "Running")         ? POD_RUNNING
                 : !strcmp(phase, "Succeeded")       ? POD_SUCCEEDED
                 : !strcmp(phase, "Failed")          ? POD_FAILED
                                                     : POD_UNKNOWN;
    out->terminal = out->phase == POD_SUCCEEDED || out->phase == POD_FAILED;
    out->deleting = json_is_string(json_object_get(md, "deletionTimestamp"));
    out->created_ms = parse_time_ms(str_at(md, "creationTimestamp"));
    return 0;
}

int pod_task_build(const json_t *pod, const struct pod_info *info, struct pod_task *out, char *err, size_t errlen) {
    memset(out, 0, sizeof *out);
    struct kp_mem *m = calloc(1, sizeof *m);
    if (!m) return KP_NOMEM(err, errlen);
    m->lenient = true;
    out->mem_ = m;
    struct place_task *t = &out->t;
    t->req = info->req;
    json_t *md = json_object_get(pod, "metadata"), *spec = json_object_get(pod, "spec");
    int rc;
    struct host_kv *sel, *lab;
    if ((rc = kp_kv_map(json_object_get(spec, "nodeSelector"), "spec.nodeSelector", m, &sel, &t->nselector, err,
                        errlen)) ||
        (rc = kp_affinity(json_object_get(spec, "affinity"), "spec.affinity", m, (struct place_term **)&t->terms,
                          &t->nterms, err, errlen)) ||
        (rc = kp_tolerations(json_object_get(spec, "tolerations"), "spec.tolerations", m,
                             (struct place_toleration **)&t->tols, &t->ntols, err, errlen)) ||
        (rc = kp_kv_map(json_object_get(md, "labels"), "metadata.labels", m, &lab, &t->nlabels, err, errlen))) {
        pod_task_free(out);
        return rc;
    }
    t->selector = sel;
    t->labels = lab;
    return 0;
}

void pod_task_free(struct pod_task *pt) {
    if (!pt || !pt->mem_) return;
    kp_free_all(pt->mem_);
    free(pt->mem_);
    pt->mem_ = NULL;
}
