/* Object store: Kubernetes JSON objects in Redis, with one global monotonic
 * resourceVersion and a bounded per-resource change history (for watch).
 *
 * Objects are keyed by (resource, namespace, name): resource is the plural
 * lowercase name ("pods", "resourcepools.peloton.io"), namespace is "" for
 * cluster-scoped objects, name is metadata.name. Every write is one atomic
 * Lua script on the server: it bumps the counter, stores the object with
 * metadata.resourceVersion = the new counter value (a decimal string), keeps
 * the indexes and appends the change to the history stream. The key schema and
 * the scripts' contracts are in docs/store.md.
 *
 * Connections: struct store is synchronous hiredis (one per thread; not
 * thread-safe); struct store_async (below) pipelines on a libuv loop. A call
 * whose connection breaks fails with -EIO and is not resent (a write's
 * outcome is then unknown); the next call reconnects and loads the scripts
 * again. Both send the same scripts with the same argument layout: building
 * arguments and decoding replies live in store_codec.c, independent of any
 * connection (see store_int.h).
 *
 * Errors: functions return 0 or a negative code and leave a one-line message
 * for store_errmsg():
 *   -EEXIST  AlreadyExists (409)      -ENOENT  NotFound (404)
 *   STORE_ECONFLICT (-EAGAIN) Conflict (409): stale resourceVersion or a
 *            uid / resourceVersion precondition that does not match
 *   -ESTALE  Expired (410): history or continue token compacted
 *   -EINVAL  Invalid (422) / BadRequest for a bad continue token
 *   -E2BIG   RequestEntityTooLarge (413)
 *   STORE_EFENCED (-EOWNERDEAD) Conflict (409): a fenced write whose fence
 *            key holds another value (store_modify_fenced)
 *   -EIO     Redis unreachable or replied an error (500)
 *   -ENOMEM  out of memory
 * store_reason() and store_http_code() give the Kubernetes Status fields.
 *
 * Ownership: input json_t values are borrowed and never modified. Every
 * json_t ** out-parameter receives a new reference the caller releases with
 * json_decref. struct store_list and struct store_history are filled by the
 * store and released with store_list_free / store_history_free. */
#ifndef PELOTON_STORE_H
#define PELOTON_STORE_H

#include <errno.h>
#include <jansson.h>
#include <stddef.h>
#include <stdbool.h>
#include <stdint.h>
#include <uv.h>

#include "apilimits.h" /* and objlimits.h */

#define STORE_ECONFLICT (-EAGAIN)
#define STORE_NO_NAMESPACE (-ENXIO) /* a create whose namespace does not exist (404) */
#define STORE_NS_TERMINATING (-ESHUTDOWN) /* a create in a namespace being deleted (403) */
#define STORE_EFENCED (-EOWNERDEAD) /* a fenced write refused: the fence's owner (a lease's term) has ended (409) */

#define STORE_MAX_OBJECT_BYTES OBJ_MAX_BYTES /* etcd's default request limit (objlimits.h) */
#define STORE_MAX_NAME 253                     /* DNS subdomain */
#define STORE_MAX_NAMESPACE 63                 /* DNS label */
#define STORE_MAX_RESOURCE 253
#define STORE_MAX_CONTINUE 4096                /* bytes of an accepted continue token */
#define STORE_DEFAULT_HISTORY 1000000       /* history entries per resource, at most */
#define STORE_DEFAULT_HISTORY_SECONDS 300   /* history kept, at least (etcd's compaction interval) */

struct store;

struct store_options {
    const char *prefix;        /* prefix of every key; default "pc:" (copied) */
    /* History per resource (docs/store.md): the events of the last
     * history_seconds seconds (default 300; 0: no time rule) are kept, as
     * long as they are at most history_max entries (default 1,000,000, the
     * bound that protects Redis's memory); older ones are trimmed. */
    long history_max;
    long history_seconds;
    int history_exact;         /* 1: trim exactly (=, slower); 0: whole stream nodes (~) */
    size_t max_object_bytes;   /* serialized object bound; default 1.5 MiB */
    int connect_timeout_ms;    /* default 2,000 */
    int command_timeout_ms;    /* default 10,000 */
    /* A write is acknowledged only once every replica connected to the
     * primary has it, and at least this many (Redis WAIT, within
     * wait_timeout_ms, default 1,000): the Sentinels may promote any of
     * them. The connected replicas are counted (INFO replication, state
     * online) on each new connection and then once a second. Short of that
     * the write fails -EIO (a 5xx: its outcome is unknown) and is not
     * reported to the write hook (watchers find it in the history if it
     * stays). 0: no wait. */
    int wait_replicas;
    int wait_timeout_ms;
};

/* Fills o with the defaults above. */
void store_options_init(struct store_options *o);

/* Connects to host:port (loopback or a trusted network), loads the scripts
 * (SCRIPT LOAD) and returns the store in *out. opt may be NULL (defaults).
 * A host that starts with '/' is the path of Redis's Unix-domain socket
 * (port unused). On failure returns -EIO or -EINVAL and *out is NULL. */
int store_open(const char *host, int port, const struct store_options *opt, struct store **out);
void store_close(struct store *s); /* NULL is fine */

/* A Redis address as the daemons take it: "host:port", or a Unix-domain
 * socket as "unix:///path", "unix:/path" or "/path" (host gets the path,
 * *port 0). -EINVAL when it is neither or does not fit host (hostlen). */
int store_parse_addr(const char *addr, char *host, size_t hostlen, int *port);
/* A synchronous hiredis connection to host and port as store_parse_addr gives
 * them (a host that starts with '/': that Unix-domain socket), made within
 * timeout_ms: check its err; NULL when out of memory. */
struct redisContext;
struct redisContext *store_redis_connect(const char *host, int port, int timeout_ms);

/* ---- Redis behind Sentinel (docs/operations.md) ----
 * Once configured (at start, before any thread connects), every connection
 * this process makes (store_redis_connect, the asynchronous store) goes to
 * the primary the Sentinels name for master_name, asked again at each new
 * connection, and only to a server that says it is a primary (ROLE): the
 * host and port the callers pass are then ignored. A connection that finds
 * a write refused READONLY (the primary demoted by a failover) is dropped
 * and made again. sentinels: "host:port,host:port,…" (at most
 * STORE_MAX_SENTINELS). 0, or -EINVAL with err. */
#define STORE_MAX_SENTINELS 8
int store_sentinel_config(const char *sentinels, const char *master_name, char *err, size_t errlen);
bool store_sentinel_on(void);
/* The current primary: 0 with host and port, or -EIO with err (no
 * Sentinel answered, none knows the name, or the one named is not a
 * primary yet). */
int store_sentinel_primary(char *host, size_t hostlen, int *port, char *err, size_t errlen);
/* The replicas a primary's INFO replication reply lists online (those a
 * WAIT can count), or -1 when r is not a primary's answer. */
struct redisReply;
int store_replicas_online(const struct redisReply *r);
/* How often a store counts the primary's replicas again (wait_replicas). */
#define STORE_REPLICAS_REFRESH_MS 1000

/* The message of the last failed call on s ("" after a success). */
const char *store_errmsg(const struct store *s);
/* Kubernetes Status reason and HTTP code for a return code. */
const char *store_reason(int rc);
int store_http_code(int rc);

/* Creates obj (a JSON object with metadata.name) in (resource, ns). The store
 * sets metadata.namespace (ns, omitted when ""), uid (UUID v4),
 * creationTimestamp (RFC 3339 UTC), generation 1 and resourceVersion; a
 * resourceVersion in obj is refused. *out (may be NULL) gets the stored object. */
int store_create(struct store *s, const char *resource, const char *ns, const json_t *obj,
                 json_t **out);

/* Many creates in (resource, ns) in one round trip: up to 256 objects per
 * script call, the calls pipelined. Each create succeeds or fails on its own
 * (a duplicate name gets -EEXIST, the others go in). rcs[i] gets each
 * create's code; outs (may be NULL) the stored objects (NULL where it
 * failed). Returns 0 when the batch was answered (look at rcs), or a negative
 * code when the connection failed (then rcs holds -EIO where unknown). */
int store_create_many(struct store *s, const char *resource, const char *ns,
                      json_t *const *objs, size_t n, int *rcs, json_t **outs);

/* Many objects by member ("<ns>/<name>", at most STORE_GET_MANY_MAX) in one
 * read, as of one moment: out[i] is the object or NULL when absent. */
#define STORE_GET_MANY_MAX 4096
int store_get_many(struct store *s, const char *resource, const char *const *members, size_t n, json_t **out);
int store_get(struct store *s, const char *resource, const char *ns, const char *name,
              json_t **out);

/* Replaces the object named by obj's metadata.name. A non-empty
 * metadata.resourceVersion in obj must equal the stored one and a non-empty
 * metadata.uid must match (else STORE_ECONFLICT); an empty or absent
 * resourceVersion means unconditional. uid, creationTimestamp,
 * deletionTimestamp and deletionGracePeriodSeconds are kept from the stored
 * object; generation is bumped when anything outside metadata and status
 * changed. An update that changes nothing writes nothing and returns the
 * stored object. An update that empties metadata.finalizers of an object with
 * a deletionTimestamp removes it (a DELETED event); *deleted (may be NULL) is
 * then 1 and *out is the final state. */
int store_update(struct store *s, const char *resource, const char *ns, const json_t *obj,
                 json_t **out, int *deleted);

/* Read-modify-write: reads the stored object, calls fn(fn_ud, cur, &next,
 * err, errlen) for the object the caller wants stored (a new reference, or a
 * negative code with a message), and writes next with store_update's rules
 * by compare-and-set on what was read. A lost race runs fn again on the newer
 * object (at most 16 times) unless next carries a resourceVersion: then it is
 * a Conflict. fn's code and message are returned as they are. next may share
 * members with cur (a shallow copy) but not its metadata object, whose
 * fields the store sets; neither is changed after fn returns. */
typedef int (*store_modify_fn)(void *fn_ud, const json_t *cur, json_t **next, char *err, size_t errlen);
int store_modify(struct store *s, const char *resource, const char *ns, const char *name, store_modify_fn fn,
                 void *fn_ud, json_t **out, int *deleted);

/* A precondition outside the object: the write is made only while the
 * Redis key `key` (as given, not under the store's prefix; at most
 * STORE_FENCE_KEY_MAX bytes) holds `value` (at most STORE_FENCE_VALUE_MAX),
 * checked in the write's own script call, so that nothing can come between
 * the check and the write. A lease's fencing token is one: its epoch key
 * and the epoch of the term the write was decided in (the placement
 * engines' Bindings, docs/store.md). Refused: STORE_EFENCED, nothing
 * written, the message "<key> holds <what it holds>" ("nothing" when the
 * key is absent). A modify whose fn changes nothing writes nothing and is
 * not checked. */
#define STORE_FENCE_KEY_MAX 63
#define STORE_FENCE_VALUE_MAX 23
struct store_fence {
    const char *key, *value;
};
/* store_modify with a fence (NULL: none); -EINVAL for one past its bounds. */
int store_modify_fenced(struct store *s, const char *resource, const char *ns, const char *name, store_modify_fn fn,
                        void *fn_ud, const struct store_fence *fence, json_t **out, int *deleted);

/* Marks namespace ns as being deleted: from then on creates in it (those
 * that check their namespace: the asynchronous store's) are refused with
 * STORE_NS_TERMINATING. The mark goes with the namespace object. */
int store_ns_set_terminating(struct store *s, const char *ns);

struct store_delete_opts {
    const char *uid;              /* precondition, NULL or "" = none */
    const char *resource_version; /* precondition, NULL or "" = none */
    int64_t grace_period_seconds; /* < 0: not given */
    int graceful; /* mark for deletion (deletionTimestamp) even without finalizers, unless
                     grace_period_seconds is 0; a later delete with 0 removes it */
};

/* Deletes the object. Without finalizers (and not graceful) it is removed
 * (DELETED event, *out is its final state with the deletion's resourceVersion,
 * *deleted = 1). With finalizers, or opts->graceful, it gets deletionTimestamp (now + grace period) and, if given,
 * deletionGracePeriodSeconds, generation + 1, and stays (MODIFIED event,
 * *deleted = 0); deleting it again changes nothing. opts may be NULL. */
int store_delete(struct store *s, const char *resource, const char *ns, const char *name,
                 const struct store_delete_opts *opts, json_t **out, int *deleted);

struct store_list {
    json_t *items;              /* array of objects in key order (namespace/name) */
    char **raw;                 /* store_list_raw only (items is then NULL): the */
    size_t *raw_len;            /*   JSON bytes of each item (unpacked), unparsed, */
    size_t n_raw;               /*   for writing straight into a response */
    uint64_t resource_version;  /* counter at read time (the token's on a continue) */
    char *continue_token;       /* NULL when the list is complete; malloc'ed */
    uint64_t remaining;         /* items after this page (when continue_token) */
    size_t bytes;               /* JSON bytes of this page's objects */
};

/* Lists resource in ns ("" = all namespaces). limit 0 = everything.
 * continue_token (NULL or "") comes from a previous page of the same list; an
 * invalid one is -EINVAL, one older than the retained history -ESTALE.
 * Pages after the first show the current objects, not a snapshot. */
int store_list(struct store *s, const char *resource, const char *ns, size_t limit,
               const char *continue_token, struct store_list *out);
/* store_list whose page (when limit > 0) also ends before its objects pass
 * max_bytes (0: no such bound); a page holds at least one object, so a
 * list always moves on. */
int store_list_bounded(struct store *s, const char *resource, const char *ns, size_t limit, size_t max_bytes,
                       const char *continue_token, struct store_list *out);
/* The same list without parsing the objects (about 4x faster for big lists):
 * fills raw / raw_len / n_raw instead of items. */
int store_list_raw(struct store *s, const char *resource, const char *ns, size_t limit,
                   const char *continue_token, struct store_list *out);
void store_list_free(struct store_list *l);

enum store_event_type { STORE_ADDED = 1, STORE_MODIFIED = 2, STORE_DELETED = 3 };

struct store_event {
    enum store_event_type type;
    uint64_t resource_version;
    char *ns, *name;            /* malloc'ed */
    json_t *object;             /* the object as written by this change */
};

struct store_history {
    struct store_event *events;
    size_t n;
    uint64_t next_rv;   /* pass as after_rv to continue (last scanned resourceVersion) */
    int more;           /* 1: more history may follow next_rv */
    uint64_t current_rv;/* counter at read time */
};

/* Events of resource (only ns's when ns is non-empty) with resourceVersion >
 * after_rv, in order; scans at most max (1..100,000) history entries per call.
 * -ESTALE when events after after_rv were compacted away; the message is
 * "too old resource version: X (Y)", Y the oldest resourceVersion after_rv may be. */
int store_history_after(struct store *s, const char *resource, const char *ns,
                        uint64_t after_rv, size_t max, struct store_history *out);
void store_history_free(struct store_history *h);

/* The counter now (0 before the first write). */
int store_current_rv(struct store *s, uint64_t *rv);

const char *store_event_type_name(enum store_event_type t);

/* ---- objects past an age (store_ttl.c; docs/store.md, "Expiry by age") ----
 *
 * For a sweeper that removes a resource's objects some time after their last
 * write (the API server's Event TTL). The store keeps, per resource, marks
 * of the counter by Redis's clock (a sorted set, one mark a second at most,
 * those older than needed dropped), so that a version tells how old a write
 * is without reading the object. One call: takes or renews the sweep's lease
 * (so that one of several API servers sharing Redis sweeps), adds the mark,
 * and scans at most max (1..STORE_TTL_SCAN_MAX) members of the index after
 * `after` ("": from the first), returning those whose version was written
 * more than ttl_s seconds ago. The caller deletes them with their version
 * as precondition, so that an object written since, or deleted by another,
 * is left alone. Marks start with the first call: nothing is older than the
 * TTL until ttl_s seconds after it. */
#define STORE_TTL_SCAN_MAX 1000
struct store_ttl_page {
    bool owner;            /* false: another holds the lease (nothing else is set) */
    uint64_t threshold_rv; /* versions <= it were written more than ttl_s ago; 0: none yet */
    char *next;            /* the member to pass as `after` next; NULL: the scan reached the end */
    size_t scanned;        /* members looked at */
    size_t n;              /* those past the TTL: */
    char **members;        /* "<ns>/<name>" */
    char **versions;       /* their resourceVersions, as stored */
};
int store_ttl_scan(struct store *s, const char *resource, const char *owner, unsigned lease_ms, int64_t ttl_s,
                   const char *after, size_t max, struct store_ttl_page *out);
void store_ttl_page_free(struct store_ttl_page *p);

/* Every successful write through a store, synchronous or asynchronous, is
 * reported to its hook once stored, before the call returns or its done runs:
 * the change's resource, namespace, type and resourceVersion, the object as
 * stored (borrowed) and its bytes (NULL when they could not be kept). The
 * object is NULL, and the bytes are set, for an attached create
 * (store_async_modify_attach) and a write of text (store_async_put_text):
 * the store wrote it as text and never parsed it. Writes are reported in resourceVersion order within a reply. One hook
 * per store; NULL removes it. The watch hub uses it to fan events out from
 * memory instead of reading them back from Redis. */
typedef void (*store_write_hook_fn)(void *ud, const char *resource, const char *ns, enum store_event_type type,
                                    uint64_t rv, const json_t *obj, const char *json, size_t len);
void store_set_write_hook(struct store *s, store_write_hook_fn fn, void *ud);
/* Counts each command's reply in replies and each failed one (no reply, or
 * an error reply) in errors too (metrics.h series; NULL: not counted). */
struct metrics_series;
void store_set_metrics(struct store *s, struct metrics_series *replies, struct metrics_series *errors);

/* ---- asynchronous writes (store_async.c) ----
 * A second connection for the hot write path, on the caller's libuv loop
 * (hiredis async): commands are pipelined, so every write made in one turn
 * of the loop reaches Redis in one send, and the loop never waits for a
 * reply. Same scripts, rules and key schema as the synchronous calls above,
 * and the two may be mixed (the compare-and-set keeps them consistent).
 *
 * Calls return 0 and later call done exactly once from the loop, or return a
 * negative code (with a message in err) and never call it: bad input is
 * refused at once, as libuv does. A lost connection fails what was in flight
 * with -EIO (a write's outcome is then unknown); the next call reconnects. A
 * reply overdue by more than command_timeout_ms drops the connection. */
struct store_async;

int store_async_open(uv_loop_t *loop, const char *host, int port, const struct store_options *opt,
                     struct store_async **out);
/* Fails what is in flight (-EIO, "closing"), then frees; run the loop once
 * more afterwards (the connection's handles close asynchronously). */
void store_async_close(struct store_async *a);
size_t store_async_inflight(const struct store_async *a);
void store_async_set_write_hook(struct store_async *a, store_write_hook_fn fn, void *ud);
void store_async_set_metrics(struct store_async *a, struct metrics_series *replies, struct metrics_series *errors);

/* What a finished write hands to done; everything is borrowed for the call. */
struct store_result {
    int rc;                     /* 0 or a store code (store_reason, store_http_code) */
    const char *err;            /* the message when rc != 0, else "" */
    json_t *obj;                /* the object as stored now (rc 0): incref to keep it */
    const char *json;           /* its stored bytes, when this call wrote (else NULL) */
    size_t json_len;
    uint64_t rv;                /* the write's resourceVersion (0: nothing was written) */
    enum store_event_type type; /* what the write was, when rv != 0 */
    /* store_async_modify_attach, when the write was stored (rc 0) and a create
     * was attached: its outcome. attached_rv is its resourceVersion (rv + 1)
     * when it was stored, else 0 with a store code and message. */
    uint64_t attached_rv;
    int attached_rc;
    const char *attached_err;
};
typedef void (*store_done_fn)(void *ud, const struct store_result *r);

/* store_create, asynchronously; obj is taken (shaped in place, not copied),
 * also when the call fails. ns_must_exist: refused with STORE_NO_NAMESPACE
 * (404) unless the namespace object ns exists, checked atomically with the create. */
int store_async_create(struct store_async *a, const char *resource, const char *ns, json_t *obj,
                       bool ns_must_exist, store_done_fn done, void *ud, char *err, size_t errlen);

/* store_modify, asynchronously (the same fn contract). */
int store_async_modify(struct store_async *a, const char *resource, const char *ns, const char *name,
                       store_modify_fn fn, void *fn_ud, store_done_fn done, void *ud, char *err, size_t errlen);

/* store_delete, asynchronously, with expected_rv as its resourceVersion
 * precondition (required): a stored version other than it is
 * STORE_ECONFLICT, nothing stored -ENOENT, neither tried again. The read
 * goes out with the turn's other reads and the delete in the turn's batch
 * for the resource (one script call for many), so a sweeper's deletes cost
 * what a turn's writes do (the Event TTL, shim_eventttl.c). done gets the
 * final object with the delete's version and type STORE_DELETED (or, for an
 * object with finalizers, MODIFIED: marked). */
int store_async_delete(struct store_async *a, const char *resource, const char *ns, const char *name,
                       const char *expected_rv, store_done_fn done, void *ud, char *err, size_t errlen);

/* An object to create, written by its caller as JSON text rather than built
 * as a tree and encoded by the store (a fixed template costs a fraction of
 * that). text (malloc'ed, len bytes; the store takes it) is a JSON object
 * whose "metadata" object holds "name" (= name) and "namespace" (= ns, or
 * none when ""), and nothing the store sets; split is the offset of the
 * metadata object's closing brace. The store inserts there what a create
 * sets (uid, creationTimestamp, generation 1, resourceVersion), in the order
 * store_create puts them, so the stored bytes are those of store_create of
 * the parsed text. The caller vouches that the text is such an object; the
 * store checks the key (resource, ns, name) and the size. */
struct store_text_obj {
    const char *resource, *ns, *name; /* copied by the store */
    char *text;
    size_t len, split;
};
/* Called after a modify's fn (store_async_modify_attach) with the object the
 * write will store: fills *out for a create to make with it, or returns
 * non-zero (or leaves out->text NULL) for none. */
typedef int (*store_attach_fn)(void *fn_ud, const json_t *next, struct store_text_obj *out);

/* store_async_modify, with a create made in the same script call as the
 * write, atomically: the create is stored only when the write is, and takes
 * the version after it (both are reported to the hook, the write first, then
 * the create with a NULL object). It is the asynchronous create of
 * ns_must_exist: refused, alone, when its name exists or its namespace does
 * not exist or is being deleted (the write is stored all the same; the
 * result's attached_rc says why). A write lost to a race is read again and
 * fn and attach run again. Replicas waited for acknowledge both or neither. */
int store_async_modify_attach(struct store_async *a, const char *resource, const char *ns, const char *name,
                              store_modify_fn fn, store_attach_fn attach, void *fn_ud, store_done_fn done, void *ud,
                              char *err, size_t errlen);
/* The same with a fence (store_modify_fenced's; NULL: none, copied): the
 * write and its attached create are made only while it holds. attach may be NULL. */
int store_async_modify_fenced(struct store_async *a, const char *resource, const char *ns, const char *name,
                              store_modify_fn fn, store_attach_fn attach, const struct store_fence *fence,
                              void *fn_ud, store_done_fn done, void *ud, char *err, size_t errlen);

/* A compare-and-set put of an object its caller wrote as text, with no read
 * first: text (malloc'ed, len bytes; taken, also on error) is the object to
 * store with its metadata.resourceVersion's value cut out at rv_at (the
 * bytes before it end with the value's opening quote, those from it start
 * with the closing one); the store puts the new version there. It is
 * written only if the stored version is still expected_rv: otherwise done
 * gets STORE_ECONFLICT (or -ENOENT when the object is gone) and nothing is
 * read or tried again; a caller that holds an old copy settles that. The
 * caller vouches that the text is the object it means, shaped as
 * store_modify would shape it (the store checks the key and the size); the
 * hook and done get the bytes and a NULL object. */
int store_async_put_text(struct store_async *a, const char *resource, const char *ns, const char *name,
                         const char *expected_rv, char *text, size_t len, size_t rv_at, store_done_fn done, void *ud,
                         char *err, size_t errlen);

/* ---- text kept packed in memory (store_pack.c) ----
 * zstd with the stored objects' dictionary, for objects a process holds a
 * while (a whole list served in slices keeps every item until it is sent):
 * a pod's JSON in about a fifth of its bytes. Not a stored format. A
 * context is one thread's. */
struct store_pack;
struct store_pack *store_pack_new(void);
void store_pack_free(struct store_pack *p);
/* s (n bytes) packed into *out (malloc'd, *outlen bytes): 0; 1 when packing
 * would not make it smaller (nothing is allocated: keep s); -ENOMEM. */
int store_pack_text(struct store_pack *p, const char *s, size_t n, char **out, size_t *outlen);
/* What store_pack_text made of exactly n bytes of text (z, zn bytes) into
 * dst (room for n): 0, or -EIO when z is not that. */
int store_unpack_text(struct store_pack *p, const char *z, size_t zn, char *dst, size_t n);

#endif
