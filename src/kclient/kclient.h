/* A Kubernetes API client on the process's libuv loop (libcurl multi), used
 * by every controller, the host manager, kubelet-sim and the extender, so the
 * same code runs against the shim or a real kube-apiserver.
 *
 * Configuration comes from a kubeconfig (current or named context: server,
 * certificate-authority[-data], client-certificate[-data]/client-key[-data],
 * token / tokenFile, insecure-skip-tls-verify, namespace), from the in-cluster
 * service account (KUBERNETES_SERVICE_HOST/PORT and
 * /var/run/secrets/kubernetes.io/serviceaccount/{token,ca.crt,namespace}), or
 * from a URL and a token file.
 *
 * Requests are asynchronous: the callback runs on the loop, exactly once per
 * request (also when the client is freed: status 0, error "cancelled").
 * Watches stream events one JSON line at a time; an informer keeps a cache of
 * one collection by list + watch and re-lists after 410 Gone or a broken
 * stream (bounded backoff), reporting the difference as add/update/delete.
 * Informers of one client on the same path and query share that list, watch
 * and cache (each event is decoded once for all of them); objects handed to
 * handlers are shared too, so handlers must not change them.
 *
 * Ownership: json_t values handed to callbacks are borrowed for the call (take
 * a reference to keep them). Bodies passed in are borrowed. Strings are
 * copied. Not thread-safe: one loop, one thread. Errors are negative errno
 * codes with one line in err (may be NULL). */
#ifndef PELOTON_KCLIENT_H
#define PELOTON_KCLIENT_H
#include <jansson.h>

#include "apilimits.h"
#include "jparse.h"
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <uv.h>

#define KC_BODY_MAX API_BODY_MAX /* largest response body buffered, bytes (apilimits.h) */
#define KC_LINE_MAX (16u << 20)  /* largest watch event line, bytes */
#define KC_MAX_CONNS 64          /* parallel connections to the server: a controller's bindings and status writes are
                                    * bounded by connections / request latency (16 cost a third of pods/s) */

struct kc_config {
    char *server;                /* "https://host:port" or "http://host:port", no trailing slash */
    char *token;                 /* bearer token, or NULL */
    char *ca_file, *ca_data;     /* PEM path / PEM bytes (decoded from *-data), or NULL */
    char *cert_file, *cert_data; /* client certificate */
    char *key_file, *key_data;   /* client key */
    bool insecure;               /* skip TLS verification */
    char *namespace;             /* the context's namespace, "default" when unset */
    long timeout_ms;             /* per request (not watches); 0 = 30 s */
    char *unix_socket;           /* connect to this Unix-domain socket path instead of the URL's host and port (the
                                  * URL's host is then the Host header alone; plain http:// only). A server URL
                                  * "unix:///path" (or "unix:/path") given to kc_config_from_url sets it, with
                                  * server "http://localhost". NULL: the URL's host. */
    bool curl_requests;          /* requests to an http:// server through libcurl too (default: kclient's own
                                  * HTTP/1.1 client, for a numeric address or localhost; watches always use libcurl;
                                  * PELOTON_KCLIENT_CURL=1 in the environment does the same for every client) */
};

/* kubeconfig at path (NULL: $KUBECONFIG, else ~/.kube/config); context NULL =
 * current-context. */
int kc_config_load(const char *path, const char *context, struct kc_config *out, char *err, size_t errlen);
/* The in-cluster service account. -ENOENT when not running in a pod. */
int kc_config_in_cluster(struct kc_config *out, char *err, size_t errlen);
/* The same with the service-account directory given (tests). */
int kc_config_in_cluster_at(const char *sa_dir, struct kc_config *out, char *err, size_t errlen);
/* A server URL and an optional file holding a bearer token. */
int kc_config_from_url(const char *url, const char *token_file, struct kc_config *out, char *err, size_t errlen);
void kc_config_free(struct kc_config *c);

struct kclient;
struct kclient *kclient_new(uv_loop_t *loop, const struct kc_config *cfg, char *err, size_t errlen);
/* Cancels what is in flight (callbacks run with status 0, error "cancelled";
 * requests started from those callbacks are refused), stops and frees the
 * watches and informers still attached (their end callbacks are not called;
 * their pointers are dead afterwards), frees. May be called from inside any
 * of the client's callbacks: it then completes when that callback returns.
 * Run the loop once more before uv_loop_close (handles close asynchronously). */
void kclient_free(struct kclient *c);
const struct kc_config *kclient_config(const struct kclient *c);

struct kc_response {
    long status;        /* HTTP status; 0 = transport error or cancelled */
    json_t *body;       /* private: read it with kc_response_body */
    const char *raw;    /* the body bytes (NUL-terminated), "" when none */
    size_t rawlen;
    const char *error;  /* transport error, or the Status message for a non-2xx reply; NULL on 2xx */
    const char *reason; /* the Status reason ("NotFound", "Conflict", ...) for a non-2xx reply, else NULL */
};
typedef void (*kc_done_fn)(void *ud, const struct kc_response *r);
/* The body parsed as JSON, or NULL (not JSON, empty). Parsed on the first
 * call (most callers of a write want the status alone, and a pod is kilobytes
 * of JSON); borrowed for the callback, incref to keep it. */
json_t *kc_response_body(const struct kc_response *r);

/* method "GET", "POST", "PUT", "PATCH", "DELETE"; path with its query
 * ("/api/v1/namespaces/default/pods?limit=500"); body NULL or any JSON;
 * content_type NULL = "application/json" (PATCH: pass the patch type, e.g.
 * "application/merge-patch+json"). done may be NULL (fire and forget). */
int kclient_request(struct kclient *c, const char *method, const char *path, const json_t *body,
                    const char *content_type, kc_done_fn done, void *ud);
/* The same with the body as JSON text already written (len bytes, copied;
 * NULL for none), for callers that build a body faster than a tree. -EINVAL
 * for a NUL byte in it. */
int kclient_request_text(struct kclient *c, const char *method, const char *path, const char *body, size_t len,
                         const char *content_type, kc_done_fn done, void *ud);
/* The same, blocking, on a private handle (tools, tests, start-up; also safe
 * inside callbacks). *body_out (optional) gets the parsed body (json_decref).
 * Returns the HTTP status, or a negative errno on transport failure; err gets
 * the transport error or "Reason: message" for a non-2xx reply. */
long kclient_request_sync(struct kclient *c, const char *method, const char *path, const json_t *body,
                          const char *content_type, json_t **body_out, char *err, size_t errlen);
/* Requests started and not yet completed. */
size_t kclient_inflight(const struct kclient *c);

/* ---- watch ---- */
struct kc_watch;
/* type: "ADDED", "MODIFIED", "DELETED", "BOOKMARK" or "ERROR" (object is
 * then a Status; a 410 shows as code 410). */
typedef void (*kc_event_fn)(void *ud, const char *type, json_t *object);
/* The stream ended: status is the HTTP status of the watch (200 when a
 * started stream ended or broke), error a line when it broke. The watch is
 * freed after this returns. */
typedef void (*kc_watch_end_fn)(void *ud, long status, const char *error);
/* GET path?watch=1&allowWatchBookmarks=true&resourceVersion=rv&<query>;
 * query may be NULL ("labelSelector=a%3Db&fieldSelector=..."), rv NULL or ""
 * for "from now". */
struct kc_watch *kclient_watch(struct kclient *c, const char *path, const char *query, const char *rv,
                               kc_event_fn on_event, kc_watch_end_fn on_end, void *ud);
/* The same watch handing each event line undecoded (bytes of one JSON
 * object, without the newline; borrowed for the call), for consumers that
 * read a field or two. The same rules as on_event. */
typedef void (*kc_line_fn)(void *ud, const char *line, size_t len);
struct kc_watch *kclient_watch_raw(struct kclient *c, const char *path, const char *query, const char *rv,
                                   kc_line_fn on_line, kc_watch_end_fn on_end, void *ud);
/* kclient_watch that builds of each event's object only the members keep
 * keeps (jparse_filtered; path is from the object itself), for consumers
 * that read a few of them. keep_ud goes to keep. */
struct kc_watch *kclient_watch_filtered(struct kclient *c, const char *path, const char *query, const char *rv,
                                        jparse_keep_fn keep, void *keep_ud, kc_event_fn on_event,
                                        kc_watch_end_fn on_end, void *ud);
/* Stops and frees a watch; on_end is not called. Safe inside on_event (no
 * further events are delivered); a no-op inside on_end. */
void kc_watch_stop(struct kc_watch *w);

/* ---- informer ---- */
struct kc_informer_handlers {
    void (*on_add)(void *ud, json_t *obj);
    void (*on_update)(void *ud, json_t *old, json_t *obj);
    void (*on_delete)(void *ud, json_t *obj);
    void (*on_synced)(void *ud); /* after the first complete list (once) */
};
struct kc_informer;
/* path: a collection ("/api/v1/pods", "/apis/peloton.io/v1alpha1/resourcepools");
 * query as for kclient_watch (also applied to the list). Lists in pages of
 * 500 (at once without pages when a continue token expired: 410), then
 * watches from the list's resourceVersion; on 410 or a broken stream
 * re-lists (backoff 100 ms doubling to 5 s) and reports the difference.
 * An informer on a path and query another informer of the client already
 * follows joins it: started after that one synced, it gets the cache as adds,
 * then on_synced. Handlers of informers sharing a feed run in the order the
 * informers were made. NULL on allocation failure. */
struct kc_informer *kc_informer_new(struct kclient *c, const char *path, const char *query,
                                    const struct kc_informer_handlers *h, void *ud);
/* Trims an object in place (drops what no subscriber reads). */
typedef void (*kc_transform_fn)(json_t *obj);
struct kc_informer_opts {
    /* For subscribers that keep what they need themselves: a feed whose
     * cache holds each object's resourceVersion alone (shared only by
     * keys-only informers with the same transform and keep). on_update gets
     * old == NULL; a deletion a re-list finds comes as an object with only
     * metadata.namespace, name and resourceVersion; kc_informer_get returns
     * NULL and kc_informer_foreach calls nothing. */
    bool keys_only;
    /* Called on every listed or watched object before it is cached or handed
     * to a handler; informers share a feed only when their transforms match. */
    kc_transform_fn transform;
    /* Members to leave out while decoding listed and watched objects
     * (jparse_filtered, called with ud NULL; the path is from the object
     * itself). With a transform it must drop only what the transform drops,
     * so that the objects are the same with or without it, for less work;
     * without one, the handlers get the objects as keep leaves them (a
     * keys-only feed needs metadata's namespace, name and resourceVersion).
     * Feeds are shared only by informers with the same transform and keep. */
    jparse_keep_fn keep;
    /* Keep each object as its compact JSON text rather than its tree (a
     * pod: ~2 KB instead of 13-15 KB), for caches of many objects that are
     * read now and then. Handlers get every event's object decoded as
     * usual, but on_update gets old == NULL; kc_informer_get decodes the
     * text at each call (the object lives until the current callback
     * returns, not until the next event, and two calls give two objects);
     * kc_informer_foreach decodes one object per call of fn (valid during
     * it). Ignored with keys_only. Feeds are shared only by informers with
     * the same setting. */
    bool compact;
};
/* kc_informer_new with options (o may be NULL). */
struct kc_informer *kc_informer_new_opts(struct kclient *c, const char *path, const char *query,
                                         const struct kc_informer_opts *o, const struct kc_informer_handlers *h,
                                         void *ud);
int kc_informer_start(struct kc_informer *inf);
/* The first complete list has been applied (and stays true afterwards: the
 * cache exists). Whether the cache is up to date is kc_informer_current. */
bool kc_informer_synced(const struct kc_informer *inf);
/* Synced and no re-list due or under way: false from the moment a watch
 * fails (410 Gone, an ERROR event, a broken stream, a failed list page)
 * until the re-list that follows has been applied in full, however many
 * attempts it takes. A consumer that acts on the absence of something
 * (a lease not renewed, an object gone) asks this, not kc_informer_synced. */
bool kc_informer_current(const struct kc_informer *inf);
/* Current, with its watch open, and the server heard from (a list applied,
 * an event or a bookmark) at most max_age_ms ago (0: any age). */
bool kc_informer_fresh(const struct kc_informer *inf, uint64_t max_age_ms);
/* Milliseconds (loop time) since the server was last heard from for this
 * cache; UINT64_MAX before the first list. */
uint64_t kc_informer_age_ms(const struct kc_informer *inf);
/* The cached object (borrowed; valid until the next event; for a compact
 * feed until the current callback returns), or NULL (also for a keys-only
 * informer). ns is "" for cluster-scoped objects. */
json_t *kc_informer_get(const struct kc_informer *inf, const char *ns, const char *name);
/* The cached object's resourceVersion (borrowed; valid until the next
 * event), or NULL when ns/name is not cached; any kind of feed, without
 * decoding: to know whether an object changed since it was last seen. */
const char *kc_informer_version(const struct kc_informer *inf, const char *ns, const char *name);
size_t kc_informer_count(const struct kc_informer *inf);
/* Calls fn for every cached object; stops when fn returns non-zero. */
void kc_informer_foreach(const struct kc_informer *inf, int (*fn)(void *ud, json_t *obj), void *ud);
/* The resourceVersion last seen (list, event or bookmark), "" before the first list. */
const char *kc_informer_rv(const struct kc_informer *inf);
/* Lists the informer's feed again now (its watch and any list under way
 * dropped), for every subscriber of the feed: the differences arrive as
 * adds, updates and deletes, then the watch goes on from the new list.
 * -EINVAL not started or freed, -EBUSY inside one of the feed's handlers. */
int kc_informer_relist(struct kc_informer *inf);
/* Complete lists so far (1 after the first sync; each re-list adds one):
 * a generation counter, which moves whenever the cache was rebuilt. */
unsigned kc_informer_lists(const struct kc_informer *inf);
/* Safe inside the informer's own handlers (the free completes when the
 * handler returns). Not needed after kclient_free, which frees it. */
void kc_informer_free(struct kc_informer *inf);

/* URL-escapes s into out (snprintf semantics) for paths and queries. */
int kc_escape(const char *s, char *out, size_t len);

#endif
