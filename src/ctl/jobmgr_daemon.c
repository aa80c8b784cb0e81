/* DAEMON eligibility (jobmgr_int.h): the nodes as placement sees them
 * (nodehost.h), judged by placement's own filters (place_check_hosts), so a
 * DAEMON gets an instance exactly where its pod could be placed. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "jobmgr_int.h"
#include "labels.h"
#include "nodehost.h"
#include "podspec.h"

struct jm_fleet {
    struct host_fleet *f;
    struct place_engine *e;
    char **names; /* by host index, the fleet's own copies */
    uint32_t *idx; /* 0 .. n-1, for place_check_hosts */
    uint8_t *why;  /* per host, scratch */
    uint32_t n;
};

void jm_fleet_free(struct jm_fleet *fl) {
    if (!fl) return;
    place_engine_free(fl->e);
    host_fleet_free(fl->f);
    for (uint32_t i = 0; i < fl->n; i++) free(fl->names[i]);
    free(fl->names);
    free(fl->idx);
    free(fl->why);
    free(fl);
}

struct jm_fleet *jm_fleet_new(const json_t *const *nodes, size_t n, const struct place_options *o) {
    struct jm_fleet *fl = calloc(1, sizeof *fl);
    size_t cap = n ? n : 1;
    if (!fl || !(fl->f = host_fleet_new()) || !(fl->names = calloc(cap, sizeof *fl->names)) ||
        !(fl->idx = calloc(cap, sizeof *fl->idx)) || !(fl->why = calloc(cap, sizeof *fl->why)))
        goto nomem;
    for (size_t i = 0; i < n; i++) {
        struct kp_mem m = {.lenient = true};
        struct host_spec s;
        int rc = node_host_spec(nodes[i], &m, &s);
        uint32_t at = HOST_NONE;
        if (!rc) {
            rc = host_fleet_add(fl->f, &s, &at);
            if (rc == -EINVAL) { /* too many labels or taints for the core: as cluster.c, without them */
                s.nlabels = s.ntaints = 0;
                rc = host_fleet_add(fl->f, &s, &at);
            }
        }
        if (!rc && !(fl->names[fl->n] = strdup(s.name))) rc = -ENOMEM;
        kp_free_all(&m);
        if (rc == -ENOMEM) goto nomem;
        if (rc) continue; /* no name, or a duplicate */
        fl->idx[fl->n] = at;
        fl->n++;
    }
    struct place_options def;
    if (!o) place_options_default(&def);
    if (!(fl->e = place_engine_new(fl->f, o ? o : &def))) goto nomem;
    return fl;
nomem:
    jm_fleet_free(fl);
    return NULL;
}

int jm_fleet_eligible(struct jm_fleet *fl, const json_t *pod, const char **out, size_t *nout, char *err,
                      size_t errlen) {
    *nout = 0;
    struct pod_info info;
    struct pod_task pt;
    int rc = pod_info_decode(pod, &info, err, errlen);
    if (rc) return rc;
    if ((rc = pod_task_build(pod, &info, &pt, err, errlen))) return rc;
    /* hosts are empty here (allocated 0): a resource filter rejects only a
     * host whose allocatable can never hold the pod */
    rc = fl->n ? place_check_hosts(fl->e, &pt.t, NULL, fl->idx, fl->n, fl->why) : 0;
    pod_task_free(&pt);
    if (rc) {
        snprintf(err, errlen, "%s", rc == -ENOMEM ? "out of memory" : "a scheduling field the placement refuses");
        return rc;
    }
    for (uint32_t i = 0; i < fl->n; i++)
        if (fl->why[i] == PR_NONE) out[(*nout)++] = fl->names[i];
    return 0;
}

size_t jm_fleet_size(const struct jm_fleet *fl) { return fl ? fl->n : 0; }

static const json_t *at2(const json_t *o, const char *a, const char *b) {
    return json_object_get(json_object_get(o, a), b);
}

/* json_equal, with two absent members equal (jansson says 0 for NULL). */
static bool same(const json_t *a, const json_t *b) { return (!a && !b) || json_equal(a, b); }

bool jm_node_same(const json_t *a, const json_t *b) {
    return node_ready(a) == node_ready(b) && same(json_object_get(a, "spec"), json_object_get(b, "spec")) &&
           same(at2(a, "metadata", "labels"), at2(b, "metadata", "labels")) &&
           same(at2(a, "status", "allocatable"), at2(b, "status", "allocatable")) &&
           same(at2(a, "status", "capacity"), at2(b, "status", "capacity")) &&
           same(json_object_get(at2(a, "metadata", "annotations"), PA_MAINTENANCE),
                json_object_get(at2(b, "metadata", "annotations"), PA_MAINTENANCE)); /* host maintenance */
}
