/* The kube-scheduler extender wire format (k8s.io/kube-scheduler/extender/v1)
 * as pure functions on jansson values: decoders for the three request bodies
 * and encoders for the four replies. No I/O, no global mutable state.
 *
 * Keys: the extender types have no JSON tags, so their keys are Go field names
 * and Go matches them case-insensitively (Unicode simple folding: "NodeNames",
 * "nodenames", "NODENAMES" are one field; so are "Pods" and "Pod\u017f").
 * Decoders do the same; unknown keys are ignored as Go ignores them; two keys
 * that fold to one field are refused (-EINVAL). JSON null reads as absent
 * (Go has no omitempty here). Embedded Kubernetes objects (Pod, the NodeList
 * and its items) keep their own camelCase JSON and are kept as references.
 * Encoders write the exact PascalCase spelling.
 *
 * Ownership: request bodies are borrowed and never modified. A decoder's
 * *out is a new struct the caller frees with the matching *_free (NULL-safe);
 * its json_t members are new references released by that free. An encoder's
 * *out is a new value the caller frees with json_decref; it may share
 * (reference) Node objects with the args it was built from. On failure *out is
 * NULL and err holds one line naming the field, e.g.
 * "ExtenderArgs.NodeNames[3]: expected a string, got integer".
 * Errors: -EINVAL malformed input, -E2BIG a limit below, -ENOMEM. */
#ifndef PELOTON_K8S_EXTENDER_H
#define PELOTON_K8S_EXTENDER_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define EXTENDER_MIN_PRIORITY 0          /* MinExtenderPriority */
#define EXTENDER_MAX_PRIORITY 10         /* MaxExtenderPriority */
#define EXTENDER_MAX_NODES 100000        /* nodes (or node names) in one request or reply */
#define EXTENDER_MAX_NAME 253            /* bytes of a node name, pod name, namespace or UID */
#define EXTENDER_MAX_VICTIMS 10000       /* victim pods on one node */
#define EXTENDER_MAX_VICTIMS_TOTAL 1000000 /* victim pods in one preemption request */
#define EXTENDER_MAX_DEPTH 64            /* nesting of an embedded Pod or Node object */
#define EXTENDER_MAX_REASON 1024         /* bytes of a failure reason or Error text */

enum extender_verb { EXTENDER_FILTER, EXTENDER_PRIORITIZE, EXTENDER_PREEMPT, EXTENDER_BIND };

/* ExtenderArgs: the body of filter and prioritize. Exactly one of Nodes
 * (a v1.NodeList) and NodeNames (nodeCacheCapable) must be non-null. */
struct extender_args {
    json_t *pod;        /* the Pod object */
    bool node_cache;    /* NodeNames was sent (nodeCacheCapable); else Nodes */
    size_t nnodes;
    char **names;       /* nnodes node names in request order, unique */
    json_t *items;      /* Nodes mode: the Node objects, an array parallel to names; NULL in NodeNames mode */
    json_t *index;      /* private: name -> position */
};

int extender_decode_args(const json_t *body, struct extender_args **out, char *err, size_t errlen);
void extender_args_free(struct extender_args *a);

/* ExtenderBindingArgs. PodName, PodNamespace and Node are required; PodUID
 * may be "" (the Binding then carries no UID precondition). */
struct extender_binding_args {
    char *pod_name, *pod_namespace, *pod_uid, *node;
};

int extender_decode_binding_args(const json_t *body, struct extender_binding_args **out, char *err, size_t errlen);
void extender_binding_args_free(struct extender_binding_args *a);

/* One node's victims, from NodeNameToVictims (pods set) or
 * NodeNameToMetaVictims (pods NULL); also the input of
 * extender_preemption_result, which reads node, npods, uids and
 * num_pdb_violations only. */
struct extender_victims {
    char *node;
    size_t npods;
    char **uids;                /* each victim's UID: MetaPod.UID or the Pod's metadata.uid (non-empty) */
    json_t *pods;               /* NodeNameToVictims: the Pod objects, parallel to uids; else NULL */
    int64_t num_pdb_violations; /* >= 0 */
};

/* ExtenderPreemptionArgs: Pod plus exactly one non-null map of the two. */
struct extender_preemption_args {
    json_t *pod;
    bool meta;          /* NodeNameToMetaVictims was sent (nodeCacheCapable) */
    size_t nnodes;
    struct extender_victims *nodes; /* in the body's key order */
    json_t *index;      /* private: node -> position */
};

int extender_decode_preemption_args(const json_t *body, struct extender_preemption_args **out, char *err,
                                    size_t errlen);
void extender_preemption_args_free(struct extender_preemption_args *a);
/* The fast path for preempt with NodeNameToMetaVictims (nodeCacheCapable):
 * the raw body scanned without a jansson value per node or victim (only the
 * Pod goes through jansson). *out (new) holds what
 * extender_decode_preemption_args gives for the same body, -EAGAIN for
 * anything else (the jansson path decides, with its errors), -ENOMEM. */
int extender_scan_preemption_args(const char *body, size_t len, struct extender_preemption_args **out);

/* Position of a node in decoded args, or -1. */
long extender_args_find(const struct extender_args *a, const char *node);
long extender_preemption_find(const struct extender_preemption_args *a, const char *node);

/* ---- replies ---- */

enum extender_verdict {
    EXTENDER_PASS,
    EXTENDER_FAIL,              /* FailedNodes: preemption may help */
    EXTENDER_FAIL_UNRESOLVABLE, /* FailedAndUnresolvableNodes: preemption will not help */
};

struct extender_node_verdict {
    const char *node;
    enum extender_verdict verdict;
    const char *reason; /* FAIL*: the reason shown to users; NULL reads as "" */
};

/* ExtenderFilterResult for args: passing nodes go to NodeNames (node_cache)
 * or to Nodes as a NodeList of the request's own Node objects (otherwise), in
 * request order; the other list is null. Every verdict must name a node of
 * the request, at most once (-EINVAL otherwise). A node with no verdict is
 * dropped without a reason (kube-scheduler removes it). Error is "". */
int extender_filter_result(const struct extender_args *args, const struct extender_node_verdict *v, size_t nv,
                           json_t **out, char *err, size_t errlen);

struct extender_host_priority {
    const char *host;
    int64_t score; /* clamped to EXTENDER_MIN_PRIORITY..EXTENDER_MAX_PRIORITY */
};

/* HostPriorityList: a bare array of {"Host","Score"} in the given order.
 * args may be NULL; when given, every host must be one of its nodes. A host
 * listed twice is refused (kube-scheduler would add both scores). */
int extender_priority_list(const struct extender_args *args, const struct extender_host_priority *p, size_t n,
                           json_t **out, char *err, size_t errlen);

/* ExtenderBindingResult {"Error": error}; error NULL or "" is success. */
int extender_binding_result(const char *error, json_t **out);

/* ExtenderPreemptionResult {"NodeNameToMetaVictims": {...}}. Nodes with no
 * victims are dropped (kube-scheduler refuses them); a node listed twice is
 * refused. in may be NULL; when given, every node must be a candidate of in. */
int extender_preemption_result(const struct extender_preemption_args *in, const struct extender_victims *v, size_t n,
                               json_t **out, char *err, size_t errlen);

/* The reply to a request the extender cannot serve (msg: the decoder's err).
 * filter: an ExtenderFilterResult with null lists and Error = msg; bind: an
 * ExtenderBindingResult with Error = msg; both are sent with HTTP 200 and
 * fail the scheduling cycle (unless the extender is ignorable).
 * prioritize and preempt have no Error field: returns -ENOTSUP and *out NULL;
 * the caller answers HTTP 400 with msg as a text body (any status but 200
 * is an error to kube-scheduler, which ignores prioritize errors). An empty
 * msg is replaced by "extender error" so that the reply is never a success. */
int extender_error_reply(enum extender_verb verb, const char *msg, json_t **out);

/* ---- the fast path: NodeNames requests, replies written as text ----
 * kube-scheduler with nodeCacheCapable sends {"Pod":{...},"Nodes":null,
 * "NodeNames":[...]} with thousands of names. The scan below reads that
 * shape straight from the body's bytes: the names become byte ranges into
 * the body (or into a scratch buffer when a name has escapes), only the Pod
 * goes through jansson. The encoders write the replies' JSON text directly.
 * Results equal the jansson path's: the same decoded request, the same
 * bytes as json_dumps(JSON_COMPACT) of the json_t encoders' replies. */

/* A name as a byte range, not NUL-terminated. */
struct extender_name {
    const char *s;
    size_t len;
};

/* A request decoded by extender_scan_args, and the buffers it reuses.
 * Zero-initialise it; reuse it for every request (its buffers grow to the
 * largest request and are kept); extender_scan_free at the end. */
struct extender_scan {
    json_t *pod;                 /* the Pod object; owned, released by the next scan, reset or free */
    size_t nnodes;
    const struct extender_name *names; /* nnodes names in request order, unique, non-empty, valid UTF-8, no NUL */
    const uint64_t *hashes;      /* extender_name_hash of each name (for the caller's own name maps) */
    /* The request's own text, in body (callers' memos compare it byte for
     * byte: equal text, equal request): the Pod object, and the NodeNames
     * array from "[" to "]". compact: that array is "[" + each name written
     * as the text encoders write it (no escapes) + "," between them + "]",
     * no white space: names[i].s - 1 is name i's opening quote. */
    const char *pod_text, *names_text;
    size_t pod_len, names_len;
    bool compact;
    /* private */
    struct extender_name *names_; /* the scan's own arrays (names, hashes point here unless hinted) */
    uint64_t *hashes_;
    bool hinted_;
    size_t cap_;
    char *scratch_;              /* decoded names that had escapes */
    size_t scratch_cap_;
    uint64_t *slots_;            /* hash set of the names: high half of the hash, index + 1 (0 = empty) */
    size_t nslots_, slots_cap_;  /* in use (a power of two), allocated */
};

/* Decodes an ExtenderArgs body in NodeNames mode from its bytes. Handles
 * exactly the common shape: a top-level object whose keys are Pod, NodeNames
 * and optionally Nodes (any case, Go's folding: the keys decoders match), Pod
 * an object, Nodes null, NodeNames an array of strings; any whitespace; the
 * JSON as json_loadb(JSON_REJECT_DUPLICATES) accepts it; the decoder's
 * limits. Anything else (Nodes mode, unknown or repeated keys, other types,
 * malformed JSON, a limit passed) returns -EAGAIN and leaves the decision to
 * json_loadb + extender_decode_args, which give the error message: the scan
 * never refuses what the jansson path accepts, nor accepts what it refuses.
 * On 0, s->names point into body (borrowed: keep it alive) or into s's
 * scratch, valid until the next scan, reset or free. -ENOMEM. */
int extender_scan_args(const char *body, size_t len, struct extender_scan *s);

/* A NodeNames array a caller expects to see again, decoded once: its text
 * ("[" to "]", compact as extender_scan.compact says), its n names (unique,
 * as a scan takes them, each pointing into text) and their hashes. */
struct extender_names_hint {
    const char *text;
    size_t len, n;
    const struct extender_name *names;
    const uint64_t *hashes;
};
/* extender_scan_args, but a body whose NodeNames array is byte for byte
 * hint's text takes hint's names and hashes instead of reading them again
 * (kube-scheduler sends prioritize the names that passed filter: the caller
 * keeps them as a hint). The result is the same as without the hint, except
 * that s->names and s->hashes point into the hint (keep it alive and
 * unchanged while they are used). hint may be NULL. */
int extender_scan_args_hinted(const char *body, size_t len, const struct extender_names_hint *hint,
                              struct extender_scan *s);
/* Position of a name in the last scan, or -1. */
long extender_scan_find(const struct extender_scan *s, const char *name, size_t len);
/* The hash the scan's name set uses (eight bytes at a time; the same on
 * every byte order): for callers' own name maps. */
uint64_t extender_name_hash(const char *s, size_t len);
/* Releases the Pod and forgets the names; keeps the buffers. */
void extender_scan_reset(struct extender_scan *s);
/* Releases everything (s itself is the caller's); s is zeroed. */
void extender_scan_free(struct extender_scan *s);

/* A growable text buffer the encoders write into. data is malloc'd,
 * NUL-terminated after len bytes (len excludes the NUL). Zero-initialise;
 * free with extender_buf_free, or take data over (free()) and zero it. */
struct extender_buf {
    char *data;
    size_t len, cap;
};
void extender_buf_free(struct extender_buf *b);

/* One node's verdict, for the node at the same position in names. */
struct extender_name_verdict {
    enum extender_verdict verdict;
    const char *reason; /* FAIL*: NULL reads as "" */
};

/* ExtenderFilterResult (NodeNames mode) as JSON text in out (replacing its
 * content): the bytes json_dumps(JSON_COMPACT) writes for
 * extender_filter_result with node_cache args of these names and the
 * verdicts v[i] for names[i], in order. names are a request's (the scan's):
 * unique, so no duplicate check is made; a name that is not valid UTF-8 is
 * refused. Errors as extender_filter_result's: an unknown verdict, a reason
 * over EXTENDER_MAX_REASON bytes or not valid UTF-8 (-EINVAL / -E2BIG, err
 * names the verdict's index); -ENOMEM. On error out->len is 0. */
int extender_filter_result_buf(const struct extender_name *names, const struct extender_name_verdict *v, size_t n,
                               struct extender_buf *out, char *err, size_t errlen);

/* Where a part of a reply stands in its text: out->data + off, len bytes. */
struct extender_span {
    size_t off, len;
};

/* extender_filter_result_buf for the names of scan s (v[i] for
 * s->names[i]). The names are a scan's, so they are not checked again; a
 * compact scan's runs of passing names are copied from the body's text.
 * pass (may be NULL) gets where the passing names' array stands in out:
 * "[...]", the NodeNames text of a request for exactly those names. */
int extender_filter_result_scan(const struct extender_scan *s, const struct extender_name_verdict *v,
                                struct extender_buf *out, struct extender_span *pass, char *err, size_t errlen);

/* HostPriorityList as JSON text in out (replacing its content): the bytes of
 * extender_priority_list(NULL, ...) for hosts[i] with scores[i], clamped.
 * Each host is checked as there (non-empty, at most EXTENDER_MAX_NAME bytes,
 * no NUL, valid UTF-8), except for repeats: hosts must be distinct, as a
 * request's names are (extender_scan_args refused repeats), so no per-call
 * set is built. On error out->len is 0. */
int extender_priority_list_buf(const struct extender_name *hosts, const int64_t *scores, size_t n,
                               struct extender_buf *out, char *err, size_t errlen);
/* extender_priority_list_buf for the names of scan s (scores[i] for
 * s->names[i]), which a scan has checked already. */
int extender_priority_list_scan(const struct extender_scan *s, const int64_t *scores, struct extender_buf *out,
                                char *err, size_t errlen);

#endif
