/* The workloads controller's parts (workloads.c: translation and status;
 * workloads_rev.c: the revision records kubectl reads; workloads_cron.c:
 * CronJobs). Internal to src/ctl. */
#ifndef PELOTON_CTL_WORKLOADS_INT_H
#define PELOTON_CTL_WORKLOADS_INT_H
#include <jansson.h>
#include <stdbool.h>

#include "workloads.h"

#define PJ_PATH "/apis/peloton.io/v1alpha1"

enum wl_kind { WL_DEPLOY, WL_RS, WL_STS, WL_DS, WL_JOB, WL_NKINDS };

struct wl_kind_info {
    const char *api_version, *kind, *collection, *pj_type;
};
extern const struct wl_kind_info wl_kinds[WL_NKINDS];

struct workloads;
struct wl_cron;
struct wl_sub { /* one informer's handler context */
    struct workloads *w;
    enum wl_kind k;
};

struct workloads {
    uv_loop_t *loop;
    struct kclient *kc;
    struct workloads_options o;
    struct kc_informer *inf[WL_NKINDS], *pjs, *nss, *crs; /* crs: ControllerRevisions */
    struct wl_sub subs[WL_NKINDS];
    struct wl_cron *cron;
    uv_timer_t resync;
};

static inline const char *str(const json_t *o, const char *a, const char *b) {
    json_t *x = json_object_get(o, a);
    return json_string_value(b ? json_object_get(x, b) : x);
}
static inline json_int_t num(const json_t *o, const char *a, const char *b) {
    return json_integer_value(json_object_get(json_object_get(o, a), b));
}

/* The request, fire and forget (a failure other than 404 or 409 is logged); body is taken. */
void wl_send(struct workloads *w, const char *method, const char *path, json_t *body, const char *ct);
/* /apis/G/V/namespaces/NS/PLURAL/NAME[/SUB] of a workload of kind k. */
void wl_path_of(enum wl_kind k, const char *ns, const char *name, const char *sub, char *out, size_t len);
/* Equal statuses, and the merge patch that writes st over old (st taken; what st leaves out is nulled). */
bool wl_status_same(const json_t *old, const json_t *st);
json_t *wl_status_patch(const json_t *old, json_t *st);
/* The object at path (a workload's dependent) deleted if, read again now,
 * its controller is still owner_uid (not orphaned meanwhile). */
void wl_delete_if_owned(struct workloads *w, const char *path, const char *owner_uid);
/* Whether workload obj's spec.selector.matchLabels (not empty) select labels. */
bool wl_selects(const json_t *obj, const json_t *labels);
/* A copy of obj's ownerReferences with ref (borrowed) added; new reference. */
json_t *wl_refs_with(const json_t *obj, const json_t *ref);
/* The kind of obj's controller owner ("" when none); *uid (may be NULL) its uid. */
const char *wl_controller_kind(const json_t *obj, const char **uid);

/* workloads_rev.c: a Deployment's ReplicaSets (dst: the Deployment's new
 * status, borrowed) and a StatefulSet's or DaemonSet's ControllerRevisions,
 * brought in line with the workload; and deleting those a deleted workload
 * (kind, uid) owned. */
void wl_mirror_rs(struct workloads *w, const json_t *d, const json_t *dst);
/* A pod template's pod-template-hash as kube-controller-manager spells one
 * (at most 15 characters of its alphabet); null members, empty objects and
 * the pod-template-hash label do not count. */
void wl_template_hash(const json_t *tpl, char out[16]);
/* The annotations (a merge patch's, new reference) that make rs, an older
 * revision brought back, revision rev, its former revision appended to its
 * revision-history (at most 2000 characters, the oldest dropped). */
json_t *wl_rs_rollback_ann(const json_t *rs, const char *rev);
/* Whether ReplicaSet rs is a Deployment's revision record (its own or one it
 * orphaned), which is not translated. */
bool wl_rs_is_record(const json_t *rs);
void wl_mirror_cr(struct workloads *w, enum wl_kind k, const json_t *obj);
void wl_delete_revisions(struct workloads *w, enum wl_kind k, const char *uid);

/* workloads_cron.c: CronJobs, started and stopped with the rest. */
struct wl_cron *wl_cron_start(uv_loop_t *loop, struct kclient *kc); /* NULL when out of memory */
void wl_cron_stop(struct wl_cron *c);

#endif
