/* apiserver-shim: the Kubernetes-compatible API server (DESIGN.md), served by
 * the HTTP layer (src/http) and backed by the Redis object store (src/store).
 *
 * This first slice serves: /version, /healthz, /livez, /readyz; discovery,
 * legacy and aggregated (apidiscovery.k8s.io/v2); and get, list (limit and
 * continue), create, update and delete of the core built-ins in the registry
 * (shim_resources.c), with every error as a Kubernetes Status. Watch, patch,
 * OpenAPI, Table output, selectors, subresources and custom resources come
 * with the rest of the apiserver-shim issue.
 *
 * Ownership: shim_new borrows the stores (cfg->astore too) for the shim's
 * lifetime; the caller closes them after shim_free. The token is copied.
 * Single-threaded: call shim_handle from the loop thread only. */
#ifndef PELOTON_SHIM_H
#define PELOTON_SHIM_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#include "selector.h"
#include "server.h"
#include "shim_metrics.h"
#include "store.h"

struct shim_config {
    const char *token;      /* bearer token required on API paths over TLS; NULL or "" = no auth */
    bool token_on_plain;    /* require it on plain HTTP too (kubectl sends tokens only over TLS) */
    uv_loop_t *loop;        /* for watch; NULL: watch requests are refused */
    unsigned poll_ms;       /* watch: how often the history is read; default 20 */
    unsigned bookmark_ms;   /* watch: BOOKMARK interval when asked for; default 10,000 */
    size_t max_buffer;      /* watch: bytes a watcher may have unsent; default 64 MiB */
    size_t list_page_bytes; /* a list with a limit ends its page before its objects pass this (one object at
                             * least) and gives a continue token; default API_LIST_PAGE_BYTES */
    struct store_async *astore; /* the asynchronous write connection; NULL: every write is synchronous */
    struct metrics *metrics;    /* the process's registry: GET /metrics and the API server's families; NULL: none */
    struct shim_sec *sec;       /* authentication, RBAC and audit (shim_auth.h), taken; NULL: token above or open */
    /* Whole lists and watches without a resourceVersion hold their items
     * (packed) until sent: at most this many bytes together, past which
     * new ones get 429 and one being read ends (shim_slices.c). 0: default
     * SHIM_DEFAULT_LIST_MEMORY; SIZE_MAX: no bound. */
    size_t list_memory;
    int64_t event_ttl_s;        /* Events are deleted this long after their last write (shim_eventttl.c); 0: kept */
};
#define SHIM_DEFAULT_LIST_MEMORY ((size_t)2 << 30)

struct watch_hub;
struct ns_reaper;
struct event_ttl;
struct shim_oapi;

struct shim {
    struct store *st;
    struct store_async *astore; /* may be NULL: every write synchronous */
    char *token;
    bool token_on_plain;
    size_t list_page_bytes;
    struct watch_hub *hub;
    uv_loop_t *loop;              /* NULL: lists are served in one turn (shim_slices.c) */
    struct slice_job *slices;     /* whole lists and initial watch events being served */
    uv_prepare_t *slice_prep;     /* resets slice_spent_ns every loop turn */
    uint64_t slice_spent_ns;      /* the slices' time in this loop turn */
    struct store_pack *slice_pack; /* packs the items they hold (NULL: kept plain) */
    size_t slice_held;            /* bytes they hold together */
    size_t list_memory;           /* ... at most (shim_config.list_memory; 0: no bound) */
    struct pod_index *pidx;       /* pods by node (shim_podindex.c); NULL without a loop */
    struct pod_index *lidx;       /* pods by label key=value (the same file) */
    struct ns_reaper *reaper; /* empties namespaces being deleted; NULL without a loop */
    struct event_ttl *evttl;  /* deletes Events past the TTL; NULL without a loop or a TTL */
    struct shim_resource **custom; /* allocated once, never moved: watchers point at them */
    int ncustom, capcustom;
    /* Bumped by shim_crd_sync when what is served of custom resources (names,
     * scope, schemas, status) changed: the OpenAPI documents are rebuilt then. */
    uint64_t crd_gen, crd_print;
    struct shim_oapi *oapi; /* the OpenAPI documents, built on first request (shim_openapi.c) */
    struct shim_metrics *metrics; /* NULL: no metrics (shim_metrics.h) */
    struct shim_obs obs;          /* the request being served, for its latency */
    bool obs_deferred;            /* its reply was deferred: the write observes it */
    struct shim_sec *sec;         /* NULL: the single token above, or open (shim_auth.h) */
    uint64_t event_ns;            /* the time in the name of the last Event made here (shim_pods.c) */
    struct shim_leases *leases;   /* the Leases' stored bytes, for renewals (shim_lease.c); NULL: none yet */
};

/* The registry: the built-ins, then custom resources. shim_res_at returns
 * NULL for a custom resource whose CRD is gone. */
int shim_res_count(const struct shim *s);
const struct shim_resource *shim_res_at(const struct shim *s, int i);
const struct shim_resource *shim_find_resource(const struct shim *s, const char *group, const char *version,
                                               const char *plural);

struct shim *shim_new(struct store *st, const struct shim_config *cfg);
void shim_free(struct shim *s);
/* Stops using the asynchronous store (before it is closed): writes from now
 * on are synchronous. */
void shim_detach_async(struct shim *s);

/* Creates the namespaces every cluster has (default, kube-system,
 * kube-public, kube-node-lease) when absent. */
int shim_bootstrap(struct shim *s, char *err, size_t errlen);

/* The HTTP handler (http_handler_fn); ud is the struct shim. */
void shim_handle(void *ud, const struct http_request *req, struct http_response *resp);

/* ---- shared by the shim's files ---- */

struct schema;

#define SHIM_MAX_CATEGORIES 4 /* a CRD's categories past these are not served */

struct shim_resource {
    const char *group;   /* "" for the core group */
    const char *version;
    const char *plural, *singular, *kind;
    bool namespaced;
    const char *short_names[3];
    const char *categories[SHIM_MAX_CATEGORIES]; /* kubectl get CATEGORY (all, peloton); NULL-ended unless full */
    const char *store_key; /* the store's resource name */
    /* custom resources only (shim_crd.c); NULL/false for the built-ins */
    bool custom, removed, has_status;
    struct schema *schema;  /* the version's openAPIV3Schema, compiled */
    json_t *columns;        /* additionalPrinterColumns */
    json_t *openapi;        /* the version's openAPIV3Schema as given */
    char *strings;          /* storage for the names above (kept once removed: watchers may still read them) */
    char *source;           /* "uid/resourceVersion" of the CRD the above were built from, or NULL */
};

extern const struct shim_resource shim_resources[];
extern const int shim_nresources;

/* A Status object as the body of resp, with the given code and reason.
 * details may be NULL; it is stolen. */
void shim_status(struct http_response *resp, int code, const char *reason, json_t *details, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));
/* s as a JSON string, each byte that is not UTF-8 replaced by U+FFFD: for
 * the request's bytes (names, namespaces) quoted in a message; NULL only
 * when out of memory. */
json_t *shim_string(const char *s);
/* resp gets obj as JSON with status code; obj is stolen. */
void shim_json(struct http_response *resp, int code, json_t *obj);

/* Sets kind and apiVersion on obj (borrowed) and returns it. */
json_t *shim_with_type(const struct shim_resource *r, json_t *obj);

/* Calls fn for every stored object of key in ns ("" = all), page by page
 * (pages show current objects); *rv (may be NULL) gets the first page's list
 * resourceVersion. Stops early when fn returns non-zero. 0 or a store error. */
int shim_each(struct shim *s, const char *key, const char *ns, uint64_t *rv, int (*fn)(void *ud, json_t *obj),
              void *ud);

/* A store error as the Status Kubernetes would send for it. */
void shim_store_error(struct shim *s, struct http_response *resp, int rc, const struct shim_resource *r,
                      const char *name);
/* The same with the message given (the default case's text; for
 * STORE_NO_NAMESPACE, the namespace's name). */
void shim_store_error_msg(struct http_response *resp, int rc, const struct shim_resource *r, const char *name,
                          const char *msg);
/* True when obj carries r's kind and apiVersion (its stored bytes can be sent as they are). */
bool shim_typed(const struct shim_resource *r, const json_t *obj);

/* The patch function for the request's content type, with the parsed patch
 * in *patch (the caller frees it); NULL after an error reply (415, 400). */
typedef int (*shim_patch_fn)(const json_t *target, const json_t *patch, json_t **out, char *err, size_t errlen);
shim_patch_fn shim_patch_parse(const struct http_request *req, json_t **patch, bool *server_side_apply,
                               struct http_response *resp);

/* The reply to a write: the written object (stolen) with code, and watchers
 * woken; or, when rc is an error, its Status. */
void shim_reply_written(struct shim *s, struct http_response *resp, int rc, const struct shim_resource *r,
                        const char *name, int code, json_t *out);

/* ---- deleting namespaces (shim_nsdelete.c) ----
 * shim_ns_terminate marks namespace name Terminating (deletionTimestamp,
 * status.phase, the "kubernetes" finalizer; creates in it are refused with
 * 403 from then on) and empties it in the background, at most
 * SHIM_NS_DELETE_BATCH objects or SHIM_NS_DELETE_TURN_MS per loop turn, then
 * removes it; *out is the marked namespace (the
 * caller owns it). 0 or a store error. shim_ns_resume takes up at start the
 * namespaces a previous run left Terminating. */
#define SHIM_NS_DELETE_BATCH 16
#define SHIM_NS_DELETE_TURN_MS 5
struct ns_reaper *shim_ns_reaper_new(struct shim *s, uv_loop_t *loop);
void shim_ns_reaper_free(struct ns_reaper *r);
int shim_ns_terminate(struct shim *s, const char *name, json_t **out);
int shim_ns_resume(struct shim *s);

/* ---- the Event TTL (shim_eventttl.c) ----
 * shim_event_ttl_new starts deleting, on loop, the Events whose last write
 * is more than ttl_s seconds old (in bounded steps, one API server of those
 * sharing Redis at a time), counting what it does in reg (may be NULL).
 * NULL without a loop, for ttl_s <= 0, or out of memory. The free closes
 * its handles: freed once the loop has run them. */
struct event_ttl *shim_event_ttl_new(struct shim *s, uv_loop_t *loop, int64_t ttl_s, struct metrics *reg);
void shim_event_ttl_free(struct event_ttl *x);

/* ---- writes (shim_write.c) ----
 * Each answers through resp, or later (http_defer) when it runs on the
 * asynchronous store connection. Bodies passed in are taken (obj of create is
 * borrowed). */
void shim_write_create(struct shim *s, const struct shim_resource *r, const char *ns, json_t *obj,
                       const struct http_request *req, struct http_response *resp);
void shim_write_replace(struct shim *s, const struct shim_resource *r, const char *ns, const char *name, json_t *obj,
                        const struct http_request *req, struct http_response *resp);
void shim_write_patch(struct shim *s, const struct shim_resource *r, const char *ns, const char *name, json_t *patch,
                      shim_patch_fn apply, const struct http_request *req, struct http_response *resp);
/* A dry-run patch: the object as it would be stored, or NULL after an error answer. */
json_t *shim_patch_preview(struct shim *s, const struct shim_resource *r, const char *ns, const char *name,
                           json_t *patch, shim_patch_fn apply, struct http_response *resp);
/* GET-less writes of KIND/NAME/status (PUT or PATCH) and pods/NAME/binding. */
void shim_write_status(struct shim *s, const struct shim_resource *r, const char *ns, const char *name,
                       const struct http_request *req, struct http_response *resp);
/* event_src: the component in whose name the Scheduled Event is made once
 * the pod is bound (shim_scheduled_event); NULL for none. epoch: the
 * placement term's (labels.h, PELOTON_PLACEMENT_EPOCH_ARG; checked decimal
 * digits), bound only while the placement lease's epoch key holds it; NULL
 * for none. */
void shim_write_binding(struct shim *s, const struct shim_resource *pods, const char *ns, const char *name,
                        json_t *binding, const char *node, const char *event_src, const char *epoch,
                        const struct http_request *req, struct http_response *resp);

/* ---- validation of every write (shim_validate.c) ----
 * Checks obj (what a create, update or patch would store; Secrets' stringData
 * is folded into data here) as kube-apiserver does. shim_validate: 0, or
 * -EINVAL with the Status message in msg and *details (new, with causes) for
 * a 422, or -ENOMEM with msg. shim_refuse_invalid: the same answered in
 * resp; true when it refused. */
int shim_validate(const struct shim_resource *r, json_t *obj, const char *name, char *msg, size_t msglen,
                  json_t **details);
/* Drops obj's empty metadata labels, annotations, finalizers, ownerReferences
 * and managedFields, as kube-apiserver's omitempty types do (shim_write.c). */
/* Lease renewals (shim_lease.c). shim_lease_seen keeps the stored bytes of
 * a Lease written through this process (json NULL or a delete drops them);
 * any other resource is ignored. shim_lease_renew writes a merge PATCH of a
 * kept Lease's spec as an edit of its bytes (lease_text.h), one
 * compare-and-set and no read: 0 and done is called later (as
 * store_async_put_text's: STORE_ECONFLICT when the copy was stale, and
 * *conditional says whether the patch named that version), -EAGAIN when it
 * is not such a renewal (the caller takes the generic path), or another
 * error with err. Its write waits a few ms for others, to go to the store
 * as one batch; shim_lease_flush sends what waits now (before the store
 * connection goes). shim_lease_free drops the copies. */
void shim_lease_seen(struct shim *s, const char *resource, const char *ns, const char *name,
                     enum store_event_type type, const char *json, size_t len);
int shim_lease_renew(struct shim *s, const struct shim_resource *r, const char *ns, const char *name,
                     const json_t *patch, shim_patch_fn apply, bool *conditional, store_done_fn done, void *ud,
                     char *err, size_t errlen);
/* The same for a PUT of a kept Lease that differs from it only in the
 * renewal's spec fields (and what the store sets): written as that patch.
 * shim_lease_put_patch is the test: the merge patch such a body amounts to
 * over the stored text, or NULL when it is not such a renewal. */
int shim_lease_replace(struct shim *s, const struct shim_resource *r, const char *ns, const char *name,
                       const json_t *body, bool *conditional, store_done_fn done, void *ud, char *err, size_t errlen);
json_t *shim_lease_put_patch(const char *text, size_t len, const json_t *body);
void shim_lease_flush(struct shim *s);
void shim_lease_free(struct shim *s);
void shim_meta_omit_empty(json_t *obj);
bool shim_refuse_invalid(const struct shim_resource *r, json_t *obj, const char *name, struct http_response *resp);

/* ---- kinds served in two versions (shim_versions.c) ----
 * shim_view_in: obj (a request's, of resource r's version) changed in place
 * to what is stored; shim_view_out: a stored obj changed in place to r's
 * version (shim_with_type calls it). Both return obj. */
json_t *shim_view_in(const struct shim_resource *r, json_t *obj);
json_t *shim_view_out(const struct shim_resource *r, json_t *obj);
bool shim_view_converts(const struct shim_resource *r); /* whether the two differ for r */

/* ---- DELETE with propagationPolicy Orphan (shim_orphan.c) ----
 * shim_delete_orphans: whether the DeleteOptions body (may be NULL) or the
 * query asks for it. shim_orphan_dependents: every object owned by the
 * stored owner (ns/name of kind r) loses its reference to it; 0, or the
 * store's error. */
bool shim_delete_orphans(const json_t *body, const struct http_request *req);
int shim_orphan_dependents(struct shim *s, const struct shim_resource *owner, const char *ns, const char *name);

/* ---- pods and status subresources (shim_pods.c) ---- */
bool shim_has_status(const struct shim_resource *r); /* pods, nodes, namespaces */
void shim_pod_defaults(json_t *pod);
/* Copies the stored object's status into obj (main-resource writes leave
 * status alone). Returns non-zero after an error reply. */
int shim_keep_status(struct shim *s, const struct shim_resource *r, const char *ns, const char *name, json_t *obj,
                     struct http_response *resp);
/* POST pods/NAME/binding, or the legacy POST namespaces/NS/bindings (name NULL: from the body).
 * With ?scheduledEvent=COMPONENT (SHIM_SCHEDULED_EVENT_ARG) the API server
 * makes the Scheduled Event of the binding itself, in COMPONENT's name, as
 * kube-scheduler would post it: a scheduler spares itself one request and
 * one write a pod. The binding's answer then names the Event (its Status's
 * details: kind "events" and the Event's name), so a client that gets no such
 * details (another API server) posts the Event itself. COMPONENT is 1 to 63
 * lower-case letters, digits, '-' or '.' (else 400); the user must also be
 * allowed to create events in the namespace (else 403). */
#define SHIM_SCHEDULED_EVENT_ARG "scheduledEvent"
void shim_pod_binding(struct shim *s, const char *ns, const char *name, const struct http_request *req,
                      struct http_response *resp);
/* The Scheduled Event of pod (bound to node) in namespace ns, in
 * component's name ("Successfully assigned NS/POD to NODE", count 1, first
 * and last timestamps now, named POD.<unix nanoseconds in hex> as client-go
 * names them, unique in this process), as the text of a create (store.h's
 * struct store_text_obj: written from a template, no tree, no encoding; the
 * caller owns out->text, out->name is name). The shim with the write
 * connection stores it with the binding, in the binding's script call
 * (store_async_modify_attach, shim_write.c). 0, or a negative errno. */
int shim_scheduled_event_text(struct shim *s, const char *ns, const json_t *pod, const char *node,
                              const char *component, char *name, size_t namelen, struct store_text_obj *out);
/* The same Event created at once (the shim without the write connection):
 * 0 with its name in name, or a negative errno (logged; name ""). */
int shim_scheduled_event(struct shim *s, const char *ns, const json_t *pod, const char *node, const char *component,
                         char *name, size_t namelen);
/* POST pods/NAME/eviction (shim_evict.c): the delete, when the pod's
 * disruption budgets allow it; else a 429 TooManyRequests Status. */
void shim_pod_evict(struct shim *s, const char *ns, const char *name, const struct http_request *req,
                    struct http_response *resp);
/* A PodDisruptionBudget's status (currentHealthy, desiredHealthy,
 * disruptionsAllowed, expectedPods) computed from the pods now, set on pdb
 * as it is read (get, list); unchanged when the store fails. */
void shim_pdb_status(struct shim *s, json_t *pdb);
/* DELETE of one object, its DeleteOptions in req's body (JSON or protobuf),
 * dryRun from the query or the options (shim.c). */
void shim_delete(struct shim *s, const struct shim_resource *r, const char *ns, const char *name,
                 const struct http_request *req, struct http_response *resp);
/* GET pods/NAME/log: kubelet-sim runs no process, so there is no log; the
 * answer is a 400 Status saying so, with the container's state (or why the
 * container named is not valid, 404 for a missing pod). */
void shim_pod_log(struct shim *s, const char *ns, const char *name, const struct http_request *req,
                  struct http_response *resp);
/* GET, PUT and PATCH of KIND/NAME/status: only status changes. */
void shim_status_subresource(struct shim *s, const struct shim_resource *r, const char *ns, const char *name,
                             const struct http_request *req, struct http_response *resp);

/* ---- discovery (shim_discovery.c) ---- */
/* GET /: the paths served, as kube-apiserver lists them ({"paths": [...]}). */
void shim_disc_root(const struct shim *s, struct http_response *resp);
/* GET /apis/GROUP: the group's APIGroup; 404 for a group not served. */
void shim_disc_group(const struct shim *s, struct http_response *resp, const char *group);
/* Whether r takes DELETE on its collection (kube-apiserver's namespaces do not). */
bool shim_res_deletecollection(const struct shim_resource *r);
bool shim_disc_wants_aggregated(const struct http_request *req);
void shim_disc_aggregated(const struct shim *s, struct http_response *resp, bool legacy);
void shim_disc_group_list(const struct shim *s, struct http_response *resp);
void shim_disc_resource_list(const struct shim *s, struct http_response *resp, const char *group,
                             const char *version);
void shim_disc_version(struct http_response *resp);

/* ---- custom resources (shim_crd.c) ---- */
/* Re-reads every CRD from the store and updates the registry: an entry is
 * rebuilt (its schema compiled) only when its CRD changed since it was built,
 * and a removed entry's schema, columns and OpenAPI are freed at once. */
int shim_crd_sync(struct shim *s);
/* Creates the CRDs found in dir (*.yaml) that are not stored yet, then syncs. */
int shim_crd_install(struct shim *s, const char *dir, char *err, size_t errlen);
/* Admission for writes to CRDs and custom resources: defaults, pruning and
 * schema validation, and for ResourcePools the pool tree's rules (a new pool
 * gets the finalizer CRD_POOL_FINALIZER; one under a parent marked for
 * deletion is 403; taking the last finalizer off a marked pool with child
 * pools is 409), for Jobs the core's job rules (a new Job in a pool marked for
 * deletion is 403). obj is changed in place; old is the stored object on
 * update (NULL on create). Returns non-zero after an error reply (422 with
 * causes, or 403 / 409). */
int shim_crd_admit(struct shim *s, const struct shim_resource *r, json_t *obj, const json_t *old,
                   struct http_response *resp);
/* Before a (not dry-run) DELETE of a ResourcePool: makes sure it has its
 * finalizer, so that the DELETE marks it rather than removing it. Non-zero
 * after an error reply (the store failed). */
int shim_crd_admit_delete(struct shim *s, const struct shim_resource *r, const char *name,
                          struct http_response *resp);
void shim_crd_free(struct shim *s);

/* ---- Table output for kubectl get (shim_table.c) ---- */
bool shim_wants_table(const struct http_request *req);
/* What a Table's rows carry as their object (the query's includeObject). */
enum shim_include { SHIM_INCLUDE_METADATA, SHIM_INCLUDE_OBJECT, SHIM_INCLUDE_NONE };
/* includeObject from the query: absent or "Metadata", "Object", "None";
 * false after a 400 reply for any other value. */
bool shim_table_include(const struct http_request *req, enum shim_include *inc, struct http_response *resp);
/* A meta.k8s.io/v1 Table of items (borrowed); rv and cont may be NULL.
 * headers false: columnDefinitions null (a watch's events after its first). */
json_t *shim_table(const struct shim_resource *r, const json_t *items, const char *rv, const char *cont,
                   enum shim_include inc, bool headers);
/* One row of a Table (cells and object) for obj (borrowed): shim_table's
 * rows, one at a time (a list in slices encodes them as it reads). */
json_t *shim_table_row(const struct shim_resource *r, const json_t *obj, enum shim_include inc);
/* The Table of one object (borrowed), with its resourceVersion: a get, or a
 * watch event's object. */
json_t *shim_table_of(const struct shim_resource *r, const json_t *obj, enum shim_include inc, bool headers);

/* ---- OpenAPI (shim_openapi.c: /openapi/v3 and the cache; shim_openapi_v2.c) ---- */
/* Serves the OpenAPI paths (req->path); false when the path is not one. */
bool shim_openapi(struct shim *s, const struct http_request *req, struct http_response *resp);
void shim_openapi_free(struct shim *s);
/* The definitions of builtin-schemas.json (the built-in kinds and every type
 * they use), parsed once; borrowed from the cache. NULL when out of memory. */
const json_t *shim_openapi_builtins(struct shim *s);
/* The definition name of r's kind, as kube-apiserver names it:
 * io.k8s.api.core.v1.Pod, or for a custom resource its group reversed
 * (io.peloton.v1alpha1.ResourcePool). "" for a built-in without one. */
void shim_openapi_def_name(const json_t *builtins, const struct shim_resource *r, char *buf, size_t len);
/* A custom resource's definition (new reference): its CRD schema with the
 * standard apiVersion, kind and metadata (a $ref to ObjectMeta under
 * refprefix, "#/definitions/" or "#/components/schemas/") and the
 * group-version-kind extension; v2: made what kube-apiserver publishes for a
 * CRD in OpenAPI v2 (lenient where v2 cannot say what v3 says). */
json_t *shim_openapi_cr_schema(const struct shim_resource *r, const char *refprefix, bool v2);
/* The Swagger 2.0 document of everything served (new reference; NULL when
 * out of memory); builtins as from shim_openapi_builtins. */
json_t *shim_openapi_v2_doc(const struct shim *s, const json_t *builtins);

/* ---- workloads: apps/v1 and batch/v1 (shim_workloads.c) ---- */
bool shim_is_workload(const struct shim_resource *r);
/* Whether r has the scale subresource (deployments, statefulsets, replicasets). */
bool shim_workload_scales(const struct shim_resource *r);
/* kube-apiserver's defaults on a workload, and a 422's message and *details
 * (new) for what the translating controller cannot honour: 0, -EINVAL or
 * -ENOMEM. 0 at once for other kinds. */
int shim_workload_check(const struct shim_resource *r, json_t *obj, const char *name, char *msg, size_t msglen,
                        json_t **details);
/* Table columns and a row's cells (new references); NULL for other kinds. */
json_t *shim_workload_columns(const struct shim_resource *r);
json_t *shim_workload_cells(const struct shim_resource *r, const json_t *o, const char *name, const char *age);
/* GET, PUT and PATCH of KIND/NAME/scale (autoscaling/v1 Scale). */
void shim_workload_scale(struct shim *s, const struct shim_resource *r, const char *ns, const char *name,
                         const struct http_request *req, struct http_response *resp);

/* ---- watch (shim_watch.c) ---- */
struct watch_hub;
struct watch_hub *watch_hub_new(struct shim *owner, const struct shim_config *cfg);
void watch_hub_free(struct watch_hub *h); /* after the HTTP server is gone */
/* Serves GET ...?watch=true. Takes ownership of ls and fs (may be NULL).
 * table: every event's object is a Table of its row (inc: the row's object). */
void watch_start(struct watch_hub *h, const struct shim_resource *r, const char *ns, struct labelsel *ls,
                 struct fieldsel *fs, bool table, enum shim_include inc, const struct http_request *req,
                 struct http_response *resp);
/* ---- whole lists in slices (shim_slices.c) ---- */
struct slice_job;
/* A watch's initial event: its line, or (Table watch) its object, borrowed. */
typedef void (*shim_slice_emit_fn)(void *ud, const char *line, size_t len, json_t *obj);
/* The initial events are sent: the watch goes on after rv; err < 0: they failed. */
typedef void (*shim_slice_done_fn)(void *ud, uint64_t rv, int err);
/* Whether a GET of a collection is served in slices: no limit, a loop. */
bool shim_slices_wanted(const struct shim *s, const struct http_request *req);
/* Serves the list in slices, as JSON (a List; with table, a meta.k8s.io/v1
 * Table whose rows' objects follow inc); takes ls and fs. */
void shim_slices_list(struct shim *s, const struct shim_resource *r, const char *ns, struct labelsel *ls,
                      struct fieldsel *fs, bool table, enum shim_include inc, const struct http_request *req,
                      struct http_response *resp);
/* The resource as one consistent list, as ADDED events on st over many turns,
 * then done(ud, E, 0); ls and fs stay the caller's. NULL: out of memory. */
struct slice_job *shim_slices_watch(struct shim *s, const struct shim_resource *r, const char *ns,
                                    const struct labelsel *ls, const struct fieldsel *fs, bool table,
                                    struct http_stream *st, shim_slice_emit_fn emit, shim_slice_done_fn done,
                                    void *ud);
void shim_slices_cancel(struct slice_job *j); /* no callback after this */
/* Whether a watch without a resourceVersion may start now; false with resp
 * set to 429 TooManyRequests when the whole lists being served hold half of
 * list_memory or more (a whole list is let in or refused the same way once
 * its first page shows it is more than a page). */
bool shim_slices_admit(struct shim *s, struct http_response *resp);
void shim_slices_free_all(struct shim *s);
size_t shim_slices_active(const struct shim *s);

/* ---- pods by node (shim_podindex.c) ---- */
struct pod_index;
enum podindex_kind { PODINDEX_NODE, PODINDEX_LABEL }; /* by spec.nodeName; by each label's key=value */
struct pod_index *podindex_new(struct shim *s, uv_loop_t *loop, enum podindex_kind kind);
void podindex_free(struct pod_index *x);
bool podindex_ready(const struct pod_index *x);
void podindex_start(struct pod_index *x); /* builds it now (else on the first list by node) */
uint64_t podindex_builds(const struct pod_index *x);
size_t podindex_count(const struct pod_index *x, const char *node);
/* The pods with the term (a node, or a label's key=value) (in ns, "" = all)
 * as one consistent list, in key order,
 * and its resourceVersion; -EAGAIN when the index cannot answer now (being
 * built, or far behind): list another way. */
int podindex_list(struct pod_index *x, const char *node, const char *ns, json_t **items, uint64_t *rv);

/* A write happened: read the history soon. */
void watch_kick(struct watch_hub *h);
void watch_detach_async(struct watch_hub *h);

#endif
