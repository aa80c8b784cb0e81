/* The native role's read cache: watch-fed copies (kc_informer) of the Jobs
 * of every namespace, of their pods (label peloton.io/job) and of the
 * ResourcePools, so the reads the native API serves most (JobManager.Get,
 * JobService.GetJob, TaskManager.Get/List/Query, ResourceManager.GetResourcePool,
 * LookupResourcePoolID, Query) are answered from memory instead of lists
 * through the API server. docs/native-api.md ("Read cache")
 * says what is served from it.
 *
 * Semantics kept:
 * - not synced, or not current (a watch broke, a re-list is due or under
 *   way), or the watch not open, or the server silent for
 *   NCACHE_MAX_SILENCE_MS: nothing is served (the caller reads through the
 *   API server as before);
 * - read-your-writes: every write the native role makes (svc_op_request,
 *   svc_jobwrite's pod deletions) reports the resourceVersion it got back
 *   (ncache_wrote); a kind is served from memory only once its informer has
 *   seen that resourceVersion (resourceVersions are the store's global
 *   counter, decimal: docs/store.md); until then reads go through;
 * - an id not in the cache is read through too (a Job applied a moment ago
 *   with kubectl is found; a miss costs what every read cost before);
 * - memory: the Jobs and pools once (shared with the informer's cache), the
 *   pods as the informer's compact text (decoded when read: a Job's pods are
 *   kept decoded between reads only for a Job of at most 256), an id index
 *   and at most NCACHE_MEMOS built replies per Job, dropped when it changes.
 *
 * Ownership: ncache_new borrows kc until ncache_stop (or ncache_free), which
 * stops the informers: before kclient_free; after it nothing is served. Objects and memos returned are
 * borrowed until the next event of the loop. Loop thread only. */
#ifndef PELOTON_NATIVE_NCACHE_H
#define PELOTON_NATIVE_NCACHE_H

#include <jansson.h>
#include <protobuf-c/protobuf-c.h>
#include <stdbool.h>
#include <stdint.h>

#include "kclient.h"

/* A cache whose API server has said nothing (no event, no bookmark: ours
 * sends one every 10 s) for this long is not served: a server that hangs
 * without closing the watch is noticed within it. */
#define NCACHE_MAX_SILENCE_MS 30000

enum ncache_kind { NCACHE_JOBS, NCACHE_PODS, NCACHE_POOLS, NCACHE_NKINDS };

/* Replies built from one Job and kept with it until it changes. */
enum ncache_memo { NCACHE_MEMO_V0_GET, NCACHE_MEMO_V1_GET, NCACHE_MEMO_V1_SUMMARY, NCACHE_MEMOS };

struct ncache;
/* NULL on allocation failure. The informers start at once. */
struct ncache *ncache_new(struct kclient *kc);
void ncache_stop(struct ncache *c);
void ncache_free(struct ncache *c);

/* The kind a request (method, path) writes, or -1 (a read, or a kind not
 * cached). */
int ncache_write_kind(const char *method, const char *path);
/* The answer r to a write of kind k (ncache_write_kind) the native role
 * sent: a 2xx carrying an object raises k's fence to the object's
 * resourceVersion. Anything else changes nothing. c may be NULL. */
void ncache_wrote(struct ncache *c, int k, const struct kc_response *r);

/* Whether reads of kind k may be answered from memory now. */
bool ncache_usable(const struct ncache *c, enum ncache_kind k);

/* The Job whose JobID (svc_job_id) is id, when the cache may answer and has
 * it; NULL means: read through the API server. c may be NULL. */
const json_t *ncache_job(struct ncache *c, const char *id);
/* A reply kept with a Job: the message and its packed bytes. */
struct ncache_reply {
    ProtobufCMessage *msg;
    uint8_t *packed;
    size_t len;
};
/* The reply kept as memo m for the Job ncache_job just returned (NULL:
 * none yet). ncache_job_memo_set keeps msg (stolen; freed with
 * protobuf_c_message_free_unpacked) packed with it and returns the kept
 * reply, or NULL (msg freed) when out of memory or the Job is gone. Send it
 * with native_call_reply_packed. */
const struct ncache_reply *ncache_job_memo(struct ncache *c, const char *id, enum ncache_memo m);
const struct ncache_reply *ncache_job_memo_set(struct ncache *c, const char *id, enum ncache_memo m,
                                               ProtobufCMessage *msg);

/* Every ResourcePool, in the order a list from the API server gives them
 * (by name), when the cache may answer; NULL: read through. Borrowed until
 * the next event of the loop. c may be NULL. */
const json_t *ncache_pools(struct ncache *c);

/* The pods of job (a Job ncache_job returned) in the order a list of them
 * from the API server gives (by name), when the cache may answer pods; NULL:
 * read through. Borrowed until the next event of the loop. */
const json_t *ncache_job_pods(struct ncache *c, const json_t *job);

#endif
