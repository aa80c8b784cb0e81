/* Hosts: a fleet snapshot for placement (Kubelets and Mesos agents alike).
 *
 * Strings (names, label keys and values, taint keys, job ids, task label
 * pairs) are interned once into the fleet's string table and referred to by
 * a 32-bit id; id 0 means "absent" and never matches anything. A host holds
 * its resource vectors, flags and the offsets of its labels and taints in
 * fleet-wide arrays, so a host costs about 100 bytes plus its labels.
 *
 * Labels and attributes are one list: Mesos attributes become labels, and the
 * label "hostname" (value: the host's name) is always present. A host with the
 * label "peloton/exclusive" is exclusive (see place.h for what that means).
 * A host with allocatable gpu > 0 is a GPU host.
 *
 * The fleet also counts, per host, the tasks of each job and the tasks
 * carrying each task label ("key=value" pair), for SPREAD_JOB scoring and
 * TASK-kind label constraints.
 *
 * Ownership: the fleet owns everything in it; specs passed in are copied and
 * stay the caller's. Pointers returned by host_str and host_name stay valid
 * until the next intern or add call (the string buffer may move) — copy them
 * if you keep them. Free with host_fleet_free. Not thread-safe. */
#ifndef PELOTON_CORE_HOST_H
#define PELOTON_CORE_HOST_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "resource.h"

#define HOST_NONE UINT32_MAX
#define HOST_LABEL_HOSTNAME "hostname"
#define HOST_LABEL_EXCLUSIVE "peloton/exclusive"
#define HOST_MAX_LABELS 4096
#define HOST_MAX_TAINTS 1024
#define HOST_STR_MAX 4096 /* longest interned string, bytes */

enum host_backend { HOST_KUBELET = 0, HOST_MESOS = 1 };
enum taint_effect { TAINT_NO_SCHEDULE = 0, TAINT_PREFER_NO_SCHEDULE = 1, TAINT_NO_EXECUTE = 2 };

enum host_flag {
    HOST_UNSCHEDULABLE = 1u,
    HOST_DRAINING = 2u,
    HOST_EXCLUSIVE = 4u, /* has a peloton/exclusive label */
    HOST_GPU = 8u,       /* allocatable gpu > 0 */
    HOST_BLOCK_TAINT = 16u, /* has a NoSchedule or NoExecute taint */
    HOST_NOT_READY = 32u,   /* its agent is not ready (Kubernetes: Ready is not True, or the lease lapsed) */
};
/* The flags under which a host takes no new task whatever the task asks. */
#define HOST_CLOSED (HOST_UNSCHEDULABLE | HOST_DRAINING | HOST_NOT_READY)

/* Input shapes (borrowed strings). */
struct host_kv {
    const char *key, *value;
};
struct host_taint_spec {
    const char *key, *value; /* value may be NULL (= "") */
    enum taint_effect effect;
};
struct host_spec {
    const char *name;
    enum host_backend backend;
    struct resvec allocatable, allocated;
    const struct host_kv *labels; /* attributes included; "hostname" is added */
    uint32_t nlabels;
    const struct host_taint_spec *taints;
    uint32_t ntaints;
    bool unschedulable; /* cordoned (Kubernetes spec.unschedulable) */
    bool draining;      /* Mesos maintenance */
    bool not_ready;     /* the agent is not ready or not heard from */
};

/* Stored shapes (interned ids). */
struct host_label {
    uint32_t key, value;
};
struct host_taint {
    uint32_t key, value;
    uint32_t effect;
};

struct host {
    struct resvec allocatable, allocated;
    uint32_t name;      /* string id */
    uint32_t exclusive; /* value of peloton/exclusive, 0 when not exclusive */
    uint32_t label0, taint0; /* first entries in the fleet's label/taint arrays */
    uint16_t nlabels, ntaints;
    uint8_t backend, flags;
};

/* An open-addressing map from a 64-bit key to a 32-bit count. */
struct host_countmap {
    uint64_t *keys; /* UINT64_MAX = empty slot */
    uint32_t *vals;
    uint32_t n, cap; /* cap is a power of two or 0 */
};

struct host_strtab {
    char *buf;         /* NUL-terminated strings back to back */
    size_t len, cap;
    uint32_t *off;     /* off[id - 1]: offset of string id in buf */
    uint32_t n, ncap;  /* strings interned; ids run 1..n */
    uint32_t *slots;   /* hash slots holding ids, 0 = empty */
    uint32_t nslots;   /* power of two */
};

struct host_fleet {
    struct host_strtab strs;
    struct host *hosts;
    uint32_t nhosts, cap;
    struct host_label *labels;
    uint32_t nlabels, caplabels;
    struct host_taint *taints;
    uint32_t ntaints, captaints;
    struct host_countmap byname; /* name id -> host index */
    struct host_countmap jobs;   /* (host << 32 | job id) -> tasks of that job on the host */
    struct host_countmap tlabels; /* (host << 32 | pair id) -> tasks carrying that label */
};

/* NULL on allocation failure. */
struct host_fleet *host_fleet_new(void);
void host_fleet_free(struct host_fleet *f);

/* Adds a host; *idx (optional) gets its dense index (input order, from 0).
 * -EINVAL: empty name, negative allocatable, too many labels or taints, a
 * string over HOST_STR_MAX; -EEXIST: duplicate name; -ENOMEM. Nothing is
 * added on error. */
int host_fleet_add(struct host_fleet *f, const struct host_spec *s, uint32_t *idx);

/* Records a task already running on host idx (its resources are in the host's
 * allocated vector): counts it for its job and each of its labels. */
int host_fleet_add_task(struct host_fleet *f, uint32_t idx, const char *job,
                        const struct host_kv *labels, uint32_t nlabels);

/* Host index by name, or HOST_NONE. */
uint32_t host_fleet_find(const struct host_fleet *f, const char *name);

/* Interning. find returns 0 when s was never interned; intern returns 0 only
 * on allocation failure or a string over HOST_STR_MAX. */
uint32_t host_str_find(const struct host_fleet *f, const char *s, size_t len);
uint32_t host_str_intern(struct host_fleet *f, const char *s, size_t len);
/* The id of the task label pair "key=value" (interned with an unambiguous
 * separator); find variant returns 0 when unknown. */
uint32_t host_pair_intern(struct host_fleet *f, const char *key, const char *value);
uint32_t host_pair_find(const struct host_fleet *f, const char *key, const char *value);
/* The string of an id ("" for 0). */
const char *host_str(const struct host_fleet *f, uint32_t id);
static inline const char *host_name(const struct host_fleet *f, uint32_t idx) {
    return host_str(f, f->hosts[idx].name);
}

/* First value of label key on host idx, or 0 when the host lacks the key. */
uint32_t host_label_value(const struct host_fleet *f, uint32_t idx, uint32_t key);
/* Number of labels on host idx equal to key=value. */
uint32_t host_label_count(const struct host_fleet *f, uint32_t idx, uint32_t key, uint32_t value);

static inline struct resvec host_free(const struct host *h) {
    return resvec_sub(h->allocatable, h->allocated);
}

/* Count maps. get returns 0 for an absent key; add fails only with -ENOMEM
 * (a count never goes below 0: subtracting more than present clamps at 0). */
uint32_t host_count_get(const struct host_countmap *m, uint64_t key);
int host_count_add(struct host_countmap *m, uint64_t key, int32_t delta);
static inline uint64_t host_count_key(uint32_t idx, uint32_t id) { return (uint64_t)idx << 32 | id; }

/* Bytes held by the fleet (arrays and tables, excluding malloc overhead). */
size_t host_fleet_bytes(const struct host_fleet *f);

#endif
