/* filter and prioritize: the pool's admission (entitlement, reservation for
 * non-preemptible work, whole gangs) for the pod, then the core's per-node
 * filters and scores. No I/O; O(request nodes) with a warm model. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ext_int.h"

static int error_reply(const char *msg, json_t **out) {
    return extender_error_reply(EXTENDER_FILTER, msg, out) ? -ENOMEM : 0;
}

/* The same Error reply as text in out. */
static int error_reply_buf(const char *msg, struct extender_buf *out) {
    json_t *v = NULL;
    char *text = error_reply(msg, &v) ? NULL : json_dumps(v, JSON_COMPACT);
    json_decref(v);
    out->len = 0;
    if (!text) return -ENOMEM;
    size_t len = strlen(text);
    if (len >= out->cap) {
        char *d = realloc(out->data, len + 1);
        if (!d) {
            free(text);
            return -ENOMEM;
        }
        out->data = d;
        out->cap = len + 1;
    }
    memcpy(out->data, text, len + 1);
    out->len = len;
    free(text);
    return 0;
}

/* Filters that preemption cannot change; resource shortfalls it can. */
static enum extender_verdict reason_verdict(enum place_reason r) {
    return r >= PR_INSUFFICIENT_CPU && r <= PR_INSUFFICIENT_GPU ? EXTENDER_FAIL : EXTENDER_FAIL_UNRESOLVABLE;
}

static bool name_is(const struct extender_name *nm, const char *s) {
    return s && strlen(s) == nm->len && memcmp(nm->s, s, nm->len) == 0;
}

/* Sizes the core's per-request arrays for n nodes (they are kept and reused:
 * a warm extender allocates nothing per request that grows with the nodes). */
static int scratch_reserve(struct ext_scratch *sc, size_t n) {
    if (n <= sc->cap && sc->v) return 0;
    size_t cap = sc->cap ? sc->cap : 64;
    while (cap < n) cap *= 2;
#define GROW(f)                                                       \
    do {                                                              \
        void *p_ = realloc(sc->f, cap * sizeof *sc->f);               \
        if (!p_) return -ENOMEM;                                      \
        sc->f = p_;                                                   \
    } while (0)
    GROW(hosts);
    GROW(known);
    GROW(at);
    GROW(reasons);
    GROW(scores);
    GROW(full);
    GROW(v);
    GROW(names);
    GROW(own);
#undef GROW
    sc->cap = cap;
    return 0;
}

void ext_scratch_free(struct ext_scratch *sc) {
    free(sc->hosts);
    free(sc->known);
    free(sc->at);
    free(sc->reasons);
    free(sc->scores);
    free(sc->full);
    free(sc->v);
    free(sc->names);
    free(sc->own);
    extender_buf_free(&sc->arena);
    memset(sc, 0, sizeof *sc);
}

/* The args' names as byte ranges, in the scratch. */
static const struct extender_name *args_names(struct ext_core *x, const struct extender_args *a) {
    if (scratch_reserve(&x->sc, a->nnodes)) return NULL;
    for (size_t i = 0; i < a->nnodes; i++) x->sc.names[i] = (struct extender_name){a->names[i], strlen(a->names[i])};
    return x->sc.names;
}

/* A reason made for one node, kept in the arena until the reply is written;
 * own[i] holds its offset + 1 (the arena may move while it grows). */
static int own_reason(struct ext_scratch *sc, size_t i, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int own_reason(struct ext_scratch *sc, size_t i, const char *fmt, ...) {
    struct extender_buf *b = &sc->arena;
    for (size_t room = 128;; room *= 2) {
        if (b->cap - b->len < room) {
            size_t cap = b->cap ? b->cap : 4096;
            while (cap - b->len < room) cap *= 2;
            char *d = realloc(b->data, cap);
            if (!d) return -ENOMEM;
            b->data = d;
            b->cap = cap;
        }
        va_list ap;
        va_start(ap, fmt);
        int k = vsnprintf(b->data + b->len, b->cap - b->len, fmt, ap);
        va_end(ap);
        if (k < 0) return -EINVAL;
        if ((size_t)k < b->cap - b->len) {
            sc->own[i] = (uint32_t)(b->len + 1);
            b->len += (size_t)k + 1;
            return 0;
        }
        room = (size_t)k + 1;
    }
}

/* Admits the gang of p as a whole, or says why not. On success *planned is
 * the node the trial placement chose for p (may be NULL when p was not in
 * the plan). -EAGAIN: not admitted (why, *resolvable). */
static int gang_admit(struct ext_core *x, struct cm_pod *p, uint64_t now_ms, const char **planned, char *why,
                      size_t len, bool *resolvable) {
    const char *gang = p->info.gang;
    *planned = NULL;
    struct ext_gang *g = ext_gang_find(x, p->ns, gang, now_ms);
    if (g) {
        /* admitted together already: members are not judged one by one again */
        if ((*planned = ext_gang_node(g, p->name))) return 0;
        ext_gang_drop(x, g); /* p joined after the plan (a replaced pod): plan again */
    }
    /* no more members than pods can exist: a bogus gang size allocates nothing large */
    size_t cap = (size_t)p->info.gang_size, npods = cluster_pod_count(x->cm);
    if (cap > npods) cap = npods;
    cap += 8;
    struct cm_pod **m = malloc(cap * sizeof *m);
    if (!m) goto nomem;
    size_t nm = cluster_gang_members(x->cm, p->ns, gang, m, cap);
    if (nm > cap) {
        struct cm_pod **m2 = realloc(m, nm * sizeof *m);
        if (!m2) goto nomem;
        m = m2;
        cap = nm;
        nm = cluster_gang_members(x->cm, p->ns, gang, m, cap);
    }
    if (nm < p->info.gang_size) {
        snprintf(why, len, "gang %s: %zu of %u pods exist; held until the whole gang is created", gang, nm,
                 p->info.gang_size);
        *resolvable = false;
        free(m);
        return -EAGAIN;
    }
    /* the members still to place, and their demand */
    size_t nu = 0;
    struct resvec demand = resvec_zero();
    for (size_t i = 0; i < nm; i++)
        if (!m[i]->node && !m[i]->bad) {
            m[nu++] = m[i];
            demand = resvec_add(demand, m[i]->info.req);
        }
    char w[EXTENDER_MAX_REASON - 128];
    bool res = true;
    if (cluster_admit_check(x->cm, p, demand, w, sizeof w, &res)) {
        snprintf(why, len, "gang %s (%zu pods to place): %s", gang, nu, w);
        *resolvable = res;
        free(m);
        return -EAGAIN;
    }
    struct pod_task *pt = calloc(nu ? nu : 1, sizeof *pt);
    struct place_task *tasks = calloc(nu ? nu : 1, sizeof *tasks);
    uint32_t *hosts = calloc(nu ? nu : 1, sizeof *hosts);
    int rc = pt && tasks && hosts ? 0 : -ENOMEM;
    size_t built = 0;
    while (!rc && built < nu) {
        rc = pod_task_build(m[built]->obj, &m[built]->info, &pt[built], w, sizeof w);
        if (!rc) {
            tasks[built] = pt[built].t;
            built++;
        } else if (rc != -ENOMEM) {
            snprintf(why, len, "gang %s: pod %s: %s", gang, m[built]->name, w);
            *resolvable = false;
        }
    }
    if (!rc) {
        struct place_gang pg = {.id = gang, .job = ext_pod_job(p), .strategy = ext_pod_strategy(x, p),
                                .tasks = tasks, .ntasks = (uint32_t)nu};
        struct place_failure fail;
        struct place_engine *e = cluster_engine(x->cm);
        rc = e ? place_gang(e, &pg, hosts, &fail) : -ENOSPC;
        if (rc == -ENOSPC) {
            if (e) place_failure_format(&fail, w, sizeof w);
            else snprintf(w, sizeof w, "no nodes");
            snprintf(why, len, "gang %s: its %zu pods do not fit together: %s", gang, nu, w);
            *resolvable = true;
        } else if (rc == -EINVAL) {
            snprintf(why, len, "gang %s: a member's placement constraints are invalid", gang);
            *resolvable = false;
        } else if (!rc) {
            const struct host_fleet *f = cluster_fleet(x->cm);
            g = ext_gang_add(x, p->ns, gang, (uint32_t)nu, now_ms);
            for (size_t i = 0; g && i < nu; i++) {
                g->pods[i] = strdup(m[i]->name);
                g->nodes[i] = strdup(host_name(f, hosts[i]));
                g->req[i] = m[i]->info.req;
                if (!g->pods[i] || !g->nodes[i]) {
                    ext_gang_drop(x, g);
                    g = NULL;
                }
            }
            place_gang_undo(e, &pg, hosts); /* a trial: the binds will count the pods */
            if (!g) rc = -ENOMEM;
            else *planned = ext_gang_node(g, p->name);
        }
    }
    for (size_t i = 0; pt && i < built; i++) pod_task_free(&pt[i]);
    free(pt);
    free(tasks);
    free(hosts);
    free(m);
    if (rc == -ENOMEM) goto nomem_free;
    if (rc) {
        if (rc != -ENOSPC && rc != -EINVAL && !why[0]) snprintf(why, len, "gang %s: cannot be placed", gang);
        return -EAGAIN;
    }
    return 0;
nomem:
    free(m);
nomem_free:
    snprintf(why, len, "out of memory");
    *resolvable = false;
    return -EAGAIN;
}

/* A pod that passes filter counts against its pool from then on
 * (cluster_admit), not only once its bind arrives: kube-scheduler binds in a
 * goroutine of its own after assuming the pod, and filters the next pods
 * meanwhile, so a burst would otherwise pass the pool's reservation or
 * entitlement before the first bind comes in. The count holds until the pod
 * is bound (its node counts then), filtered again (judged afresh), ends, or
 * PASS_TTL_MS pass (kube-scheduler dropped it after the filter: another
 * extender, a Reserve or Permit plugin). A pod the request brought (not yet
 * in the watch: in a burst kube-scheduler's informer is often ahead of ours)
 * leaves the model with the request, and counts from its watch event on. */
#define PASS_TTL_MS 5000

static void passed_add(struct ext_core *x, struct cm_pod *p, uint64_t now_ms) {
    if (!p->pool || p->node) return;
    if (json_object_set_new(x->passed, p->key, json_integer((json_int_t)(now_ms + PASS_TTL_MS)))) return;
    /* a pod the request brought leaves the model with the request: it is
     * counted once the watch shows it (ext_passed_seen) */
    if (x->adopted_name && !strcmp(x->adopted_name, p->name) && x->adopted_ns && !strcmp(x->adopted_ns, p->ns))
        return;
    cluster_admit(x->cm, p, true);
}

void ext_passed_seen(struct ext_core *x, const char *ns, const char *name) {
    char key[2 * EXTENDER_MAX_NAME + 2];
    if (!json_object_size(x->passed) || !ns || !name) return;
    snprintf(key, sizeof key, "%s/%s", ns, name);
    if (!json_object_get(x->passed, key)) return;
    struct cm_pod *p = cluster_pod(x->cm, ns, name);
    if (p && !p->node && !p->admitted && !p->info.terminal) cluster_admit(x->cm, p, true);
}

static void passed_expire(struct ext_core *x, uint64_t now_ms) {
    const char *key;
    json_t *v, *tmp;
    json_object_foreach_safe(x->passed, tmp, key, v) {
        struct cm_pod *p = NULL;
        const char *slash = strchr(key, '/');
        char ns[EXTENDER_MAX_NAME + 1];
        if (slash && (size_t)(slash - key) < sizeof ns) {
            memcpy(ns, key, (size_t)(slash - key));
            ns[slash - key] = '\0';
            p = cluster_pod(x->cm, ns, slash + 1);
        }
        if ((!p || !p->node) && (uint64_t)json_integer_value(v) > now_ms) continue;
        if (p && p->admitted && !p->node) cluster_admit(x->cm, p, false);
        json_object_del(x->passed, key);
    }
}

/* The verdict of every request node into x->sc.v[0..n), reasons borrowed
 * from static strings, x->sc.why or x->sc.arena (valid until the next
 * request); the passing nodes' positions into x->sc.at[0..*npass). scan: the
 * fast path's request (its names, hashes and text), whose hosts and scores
 * go through the memo; NULL on the jansson path. 1: the pod itself cannot be
 * judged (x->sc.err says why: the reply is an Error); -ENOMEM. */
static int judge(struct ext_core *x, json_t *pod, const struct extender_name *names, const struct extender_scan *scan,
                 size_t n, uint64_t now_ms, size_t *npass) {
    struct ext_scratch *sc = &x->sc;
    x->st.filters++;
    sc->arena.len = 0;
    *npass = 0;
    struct cm_pod *p = ext_pod_for(x, pod, sc->err, sizeof sc->err);
    if (!p) {
        ext_metrics_decision(x, NULL, EXT_DEC_INVALID);
        return 1;
    }
    if (scratch_reserve(sc, n)) return -ENOMEM;
    struct extender_name_verdict *v = sc->v;
    uint32_t *hosts = sc->hosts;
    uint8_t *reasons = sc->reasons;
    char *why = sc->why, *err = sc->err;
    size_t whylen = sizeof sc->why, errlen = sizeof sc->err;
    why[0] = '\0';
    int rc = 0;

    /* the pod as a whole: its pool, its gang, its pool's admission */
    bool resolvable = true, pod_fails = false, admit = false;
    passed_expire(x, now_ms);
    ext_gangs_expire(x, now_ms); /* an expired plan holds no room for the pods below */
    const char *planned = NULL;
    if (cluster_pod_pool_problem(x->cm, p, why, whylen)) {
        pod_fails = true;
        resolvable = false;
    } else if (p->info.gang && p->info.gang_size > 1) {
        ext_gangs_expire(x, now_ms);
        pod_fails = gang_admit(x, p, now_ms, &planned, why, whylen, &resolvable) != 0;
    } else {
        /* its own earlier pass is not counted against it again */
        if (p->admitted && !p->node) cluster_admit(x->cm, p, false);
        if (cluster_admit_check(x->cm, p, p->info.req, why, whylen, &resolvable)) pod_fails = true;
        else admit = true;
    }
    ext_metrics_decision(x, p->pool, pod_fails ? ext_decision_of(why, resolvable) : EXT_DEC_ADMITTED);
    if (pod_fails) {
        for (size_t i = 0; i < n; i++)
            v[i] = (struct extender_name_verdict){resolvable ? EXTENDER_FAIL : EXTENDER_FAIL_UNRESOLVABLE, why};
        return 0;
    }
    if (scan) ext_memo_hosts(x, scan, true, hosts);
    else ext_lookup_hosts(x, names, NULL, n, hosts);
    struct pod_task pt;
    if (pod_task_build(p->obj, &p->info, &pt, err, errlen)) {
        for (size_t i = 0; i < n; i++) v[i] = (struct extender_name_verdict){EXTENDER_FAIL_UNRESOLVABLE, err};
        return 0;
    }
    /* each node checked and scored in one pass: prioritize follows with the nodes that pass */
    struct place_engine *e = cluster_engine(x->cm);
    enum place_strategy strategy = ext_pod_strategy(x, p);
    rc = n && e ? place_judge_hosts(e, &pt.t, ext_pod_job(p), strategy, hosts, (uint32_t)n, reasons, sc->scores) : 0;
    pod_task_free(&pt);
    if (!rc && n) ext_memo_scores_put(x, scan, p, strategy, hosts, sc->scores, n);
    if (rc == -EINVAL) { /* a constraint the engine refuses (too deep, bad operator) */
        snprintf(err, errlen, "the pod's placement constraints are invalid");
        memset(reasons, PR_LABEL_CONSTRAINT, n);
        rc = 0;
    }
    if (rc) return rc;
    size_t nheld = 0;
    struct ext_held *held = ext_holds_any(x) ? ext_holds_collect(x, p, &nheld) : NULL;
    /* an admitted gang member goes to its planned node while it still fits there */
    bool planned_ok = false;
    for (size_t i = 0; planned && i < n; i++)
        if (hosts[i] != HOST_NONE && reasons[i] == PR_NONE && name_is(&names[i], planned)) planned_ok = true;
    if (planned_ok) snprintf(why, whylen, "gang %s: this pod is planned on node %s", p->info.gang, planned);
    bool owned = false;
    for (size_t i = 0; i < n; i++) {
        sc->own[i] = 0;
        if (hosts[i] == HOST_NONE) {
            if ((rc = own_reason(sc, i, "node %.*s not in the extender's cache", (int)names[i].len, names[i].s)))
                break;
            v[i] = (struct extender_name_verdict){EXTENDER_FAIL_UNRESOLVABLE, NULL};
            owned = true;
            continue;
        }
        enum place_reason r = reasons[i];
        const struct ext_held *holder = NULL;
        if (r == PR_NONE && nheld) r = ext_holds_fit(x, held, nheld, hosts[i], p->info.req, &holder);
        if (holder && r != PR_NONE) {
            if ((rc = own_reason(sc, i, "%s: held for %s %s", place_reason_name(r),
                                 holder->nominated ? "nominated pod" : "gang", holder->who)))
                break;
            v[i] = (struct extender_name_verdict){EXTENDER_FAIL, NULL};
            owned = true;
        } else if (r != PR_NONE) {
            v[i] = (struct extender_name_verdict){reason_verdict(r), place_reason_name(r)};
        } else if (planned_ok && !name_is(&names[i], planned)) {
            v[i] = (struct extender_name_verdict){EXTENDER_FAIL, why};
        } else {
            v[i] = (struct extender_name_verdict){EXTENDER_PASS, NULL};
            sc->at[(*npass)++] = (uint32_t)i;
        }
    }
    free(held);
    if (rc) return rc;
    for (size_t i = 0; owned && i < n; i++)
        if (sc->own[i]) v[i].reason = sc->arena.data + sc->own[i] - 1;
    if (admit && *npass) passed_add(x, p, now_ms);
    return 0;
}

/* Scores of every request node into x->sc.full[0..n) (0 for nodes the model
 * does not know). scan as for judge: the filter's scores are taken where the
 * memo holds them for this pod and host, the rest are scored. -EINVAL and
 * err: the pod cannot be judged; -ENOMEM. */
static int score(struct ext_core *x, json_t *pod, const struct extender_name *names, const struct extender_scan *scan,
                 size_t n, char *err, size_t errlen) {
    struct ext_scratch *sc = &x->sc;
    x->st.prioritizes++;
    struct cm_pod *p = ext_pod_for(x, pod, err, errlen);
    if (!p) return -EINVAL;
    if (scratch_reserve(sc, n)) return -ENOMEM;
    uint32_t *hosts = sc->hosts;
    if (scan) ext_memo_hosts(x, scan, false, hosts);
    else ext_lookup_hosts(x, names, NULL, n, hosts);
    enum place_strategy strategy = ext_pod_strategy(x, p);
    /* keyed: the filter scored this very pod object, so its task builds and compiles */
    bool keyed = ext_memo_scores_keyed(x, scan, p, strategy);
    size_t nk = ext_memo_scores_get(x, keyed, hosts, n, sc->full, sc->known, sc->at);
    if (keyed && !nk) return 0;
    struct pod_task pt;
    int rc = pod_task_build(p->obj, &p->info, &pt, err, errlen);
    if (rc) return rc;
    struct place_engine *e = cluster_engine(x->cm);
    rc = nk && e ? place_score_hosts(e, &pt.t, ext_pod_job(p), strategy, sc->known, (uint32_t)nk, sc->scores) : 0;
    pod_task_free(&pt);
    if (rc) {
        snprintf(err, errlen, "scoring failed: %s", strerror(-rc));
        return rc;
    }
    for (size_t k = 0; k < nk; k++) sc->full[sc->at[k]] = sc->scores[k];
    ext_memo_scores_put(x, scan, p, strategy, sc->known, sc->scores, nk);
    return 0;
}

/* The pod may have come from the request itself: each entry point lets it
 * leave the model again (ext_pod_release). */

int ext_filter(struct ext_core *x, const struct extender_args *a, uint64_t now_ms, json_t **out) {
    *out = NULL;
    char err[EXTENDER_MAX_REASON];
    size_t npass;
    const struct extender_name *names = args_names(x, a);
    int rc = names ? judge(x, a->pod, names, NULL, a->nnodes, now_ms, &npass) : -ENOMEM;
    if (rc == 1) {
        rc = error_reply(x->sc.err, out);
    } else if (!rc) {
        struct extender_node_verdict *nv = malloc((a->nnodes ? a->nnodes : 1) * sizeof *nv);
        if (!nv) rc = -ENOMEM;
        for (size_t i = 0; nv && i < a->nnodes; i++)
            nv[i] = (struct extender_node_verdict){a->names[i], x->sc.v[i].verdict, x->sc.v[i].reason};
        if (nv) rc = extender_filter_result(a, nv, a->nnodes, out, err, sizeof err);
        if (rc && rc != -ENOMEM) rc = error_reply(err, out);
        free(nv);
    }
    if (rc == -ENOMEM && !*out) rc = error_reply("out of memory", out);
    ext_pod_release(x);
    return rc;
}

int ext_filter_scan(struct ext_core *x, const struct extender_scan *a, uint64_t now_ms, struct extender_buf *out) {
    char err[EXTENDER_MAX_REASON];
    size_t npass;
    int rc = judge(x, a->pod, a->names, a, a->nnodes, now_ms, &npass);
    if (rc == 1) {
        rc = error_reply_buf(x->sc.err, out);
    } else if (!rc) {
        struct extender_span pass;
        rc = extender_filter_result_scan(a, x->sc.v, out, &pass, err, sizeof err);
        if (!rc) ext_memo_pass(x, out->data + pass.off, pass.len, a, x->sc.hosts, x->sc.at, npass);
        else if (rc != -ENOMEM) rc = error_reply_buf(err, out);
    }
    if (rc == -ENOMEM) rc = error_reply_buf("out of memory", out);
    ext_pod_release(x);
    return rc;
}

int ext_prioritize(struct ext_core *x, const struct extender_args *a, json_t **out, char *err, size_t errlen) {
    *out = NULL;
    const struct extender_name *names = args_names(x, a);
    int rc = names ? score(x, a->pod, names, NULL, a->nnodes, err, errlen) : -ENOMEM;
    if (!rc) {
        struct extender_host_priority *pr = malloc((a->nnodes ? a->nnodes : 1) * sizeof *pr);
        if (!pr) rc = -ENOMEM;
        for (size_t i = 0; pr && i < a->nnodes; i++) pr[i] = (struct extender_host_priority){a->names[i], x->sc.full[i]};
        /* hosts are the request's own: skip the check */
        if (pr) rc = extender_priority_list(NULL, pr, a->nnodes, out, err, errlen);
        free(pr);
    }
    if (rc == -ENOMEM) snprintf(err, errlen, "out of memory");
    ext_pod_release(x);
    return rc;
}

int ext_prioritize_scan(struct ext_core *x, const struct extender_scan *a, struct extender_buf *out, char *err,
                        size_t errlen) {
    out->len = 0;
    int rc = score(x, a->pod, a->names, a, a->nnodes, err, errlen);
    if (!rc) rc = extender_priority_list_scan(a, x->sc.full, out, err, errlen);
    if (rc == -ENOMEM) snprintf(err, errlen, "out of memory");
    ext_pod_release(x);
    return rc;
}
