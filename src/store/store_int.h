/* Store internals shared by the sync connection (store.c) and, later, the
 * async libuv path: script texts, the configuration the builders need, and
 * connection-independent argument builders, reply decoders and object shaping.
 *
 * A struct store_cmd owns its arrays and the strings it formatted
 * (store_cmd_free releases them); entries it borrows (cfg's SHA, a blob's
 * bytes) must outlive the send. argv/argvlen feed redisCommandArgv /
 * redisAppendCommandArgv / redisAsyncCommandArgv unchanged (hiredis copies
 * the command when it is queued). Decoders read a redisReply they do not
 * free. Object-shaping functions return new json_t references. */
#ifndef PELOTON_STORE_INT_H
#define PELOTON_STORE_INT_H

#include <hiredis/hiredis.h>
#include <jansson.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "store.h"

enum store_script {
    STORE_SCRIPT_CREATE,
    STORE_SCRIPT_CAS,
    STORE_SCRIPT_LIST,
    STORE_SCRIPT_HISTORY,
    STORE_SCRIPT_CREATE_BATCH,
    STORE_SCRIPT_WRITE_BATCH,
    STORE_NSCRIPTS
};
extern const char *const store_scripts[STORE_NSCRIPTS];

/* Script reply codes (first element of every script reply). */
enum { STORE_R_OK = 0, STORE_R_EXISTS = 1, STORE_R_CONFLICT = 2, STORE_R_NOTFOUND = 3,
       STORE_R_EXPIRED = 4, STORE_R_NO_NAMESPACE = 5, STORE_R_NS_TERMINATING = 6,
       STORE_R_NOT_WRITTEN = 7 /* an attached create whose write was not stored */,
       STORE_R_FENCED = 8 /* a fenced write whose fence key holds another value */ };

#define STORE_PREFIX_MAX 64
#define STORE_ERRMSG_MAX 512

struct store_cfg {
    char prefix[STORE_PREFIX_MAX];
    long history_max;
    int history_exact;
    long history_seconds;
    size_t max_object_bytes;
    char sha[STORE_NSCRIPTS][41]; /* "" until SCRIPT LOAD answered */
    struct store_pack *pack;      /* packs what is written, unpacks what is read (owned) */
};

/* Checks opt and fills cfg (prefix, history, bounds, and each script's SHA-1
 * as Redis names it, computed here). -EINVAL for bad options, -ENOMEM.
 * store_cfg_free releases what it allocated (the pack context). */
int store_cfg_init(struct store_cfg *cfg, const struct store_options *opt);
void store_cfg_free(struct store_cfg *cfg);

/* host and port as both connections take them: a host shorter than cap, and
 * a port from 1 to 65535 unless host is a Unix-domain socket path ('/'). */
static inline bool store_addr_ok(const char *host, size_t cap, int port) {
    return host && strlen(host) < cap && (host[0] == '/' || (port > 0 && port <= 65535));
}

#define STORE_CMD_ARENA 1024

struct store_cmd {
    char arena[STORE_CMD_ARENA];  /* formatted arguments (keys, numbers): argv points in */
    size_t arena_used;
    int argc, cap;
    enum store_script script;     /* for the EVAL fallback */
    const char **argv;            /* argc entries (heap, grown on demand) */
    size_t *argvlen;
    char **owned;                 /* strings argv points to that the cmd frees */
    int nowned, owned_cap;
    int oom;                      /* an allocation failed while building */
};
void store_cmd_free(struct store_cmd *c);
/* Turns an EVALSHA command into the equivalent EVAL (after NOSCRIPT). */
void store_cmd_as_eval(struct store_cmd *c);

/* An object serialized with its resourceVersion value cut out: the stored
 * bytes are head + rv + tail. */
struct store_blob {
    char *json;               /* owns head and tail */
    size_t head_len;
    const char *tail;
    size_t tail_len;
    char *pk;                 /* the packed head and tail sent instead (store_pack_blob), or NULL: owns pk_tail */
    size_t pk_head_len;
    const char *pk_tail;
    size_t pk_tail_len;
};
void store_blob_free(struct store_blob *b);

/* Packed objects (store_pack.c; docs/store.md, "Packed objects"): zstd
 * with a fixed dictionary, head and tail apart, so that the scripts' splice
 * (head + rv + tail) is unchanged. A context per connection (not thread-safe).
 * store_pack_blob fills b's pk fields when packing gains (else leaves them
 * NULL: the plain bytes are sent); store_unpack turns stored bytes into the
 * object's JSON: 0 with *out NULL when they are plain (use s as it is), 0
 * with *out (malloc'd, NUL-terminated, *outlen bytes) when packed, -EIO when
 * they are not a valid packed object or would unpack past max bytes,
 * -ENOMEM. A packed object is at most STORE_PACK_MAX_RATIO times smaller
 * than its JSON (list pages are bounded by bytes in Redis, store_lua.c). */
#define STORE_PACK_MAX_RATIO 32
void store_pack_blob(struct store_pack *p, struct store_blob *b);
int store_unpack(struct store_pack *p, const char *s, size_t len, size_t max, char **out, size_t *outlen);

/* Randomness for uids and placeholders: the OS's, drawn 256 bytes at a
 * time (one getrandom per many writes). One per connection, zeroed to start. */
struct store_rng {
    unsigned char buf[256];
    size_t pos; /* bytes used; sizeof buf when empty (0 after zeroing: refilled first) */
    int filled;
};
/* n (<= 256) random bytes; -EIO when the OS has none. */
int store_rng_bytes(struct store_rng *g, unsigned char *out, size_t n);

/* Serializes obj with a random placeholder as metadata.resourceVersion (left
 * in obj: the caller sets the final value after the write) and cuts it out;
 * -E2BIG when the object would exceed cfg->max_object_bytes. */
int store_blob_encode(const struct store_cfg *cfg, struct store_rng *rng, json_t *obj, struct store_blob *out,
                      char *err, size_t errlen);

/* The blob of an object its caller wrote as text (struct store_text_obj, in
 * store.h): the text with what a create sets put at t->split (uid, now as
 * creationTimestamp, generation 1, the resourceVersion's place). Takes
 * t->text (freed, also on error); -E2BIG past cfg->max_object_bytes. */
int store_blob_from_text(const struct store_cfg *cfg, struct store_rng *rng, struct store_text_obj *t,
                         struct store_blob *out, char *err, size_t errlen);

/* Builders. ns "" = cluster-scoped (or all namespaces for list/history). */
void store_build_create(struct store_cmd *c, const struct store_cfg *cfg, const char *res,
                        const char *ns, const char *name, const struct store_blob *b);
/* The same, refused (STORE_NO_NAMESPACE) unless namespace ns exists. */
void store_build_create_in_ns(struct store_cmd *c, const struct store_cfg *cfg, const char *res,
                              const char *ns, const char *name, const struct store_blob *b);
/* fence: NULL for none (store.h's struct store_fence). */
void store_build_cas(struct store_cmd *c, const struct store_cfg *cfg, const char *res,
                     const char *ns, const char *name, const char *expected_rv, int del,
                     const struct store_blob *b, const struct store_fence *fence);
/* HMGET of many members' objects ("<ns>/<name>") in one round trip. */
void store_build_get_many(struct store_cmd *c, const struct store_cfg *cfg, const char *res,
                          const char *const *members, size_t n);
void store_build_get(struct store_cmd *c, const struct store_cfg *cfg, const char *res,
                     const char *ns, const char *name);
void store_build_list(struct store_cmd *c, const struct store_cfg *cfg, const char *res,
                      const char *ns, const char *start_after, size_t limit, size_t max_bytes,
                      uint64_t token_rv);
void store_build_history(struct store_cmd *c, const struct store_cfg *cfg, const char *res,
                         const char *ns, uint64_t after_rv, size_t max);
void store_build_current_rv(struct store_cmd *c, const struct store_cfg *cfg);
/* One script call creating n objects of (res, ns) (names[i], blobs[i]). */
void store_build_create_batch(struct store_cmd *c, const struct store_cfg *cfg, const char *res,
                              const char *ns, const char *const *names,
                              const struct store_blob *const *blobs, size_t n);
/* One write of a write batch (store_build_write_batch). */
struct store_batch_write {
    char op;              /* 'c' create, 'p' put, 'd' delete; 'a' a create in ares made with the write before */
    const char *ns, *name, *expected_rv; /* expected_rv: for p and d */
    const struct store_blob *blob;
    int ns_check;         /* c, a: refused unless the namespace exists and is not being deleted */
    const struct store_fence *fence; /* c, p, d: made only while it holds (NULL: none) */
};
/* The writes of one resource in one script call; ares: the resource of the
 * attached creates (w's 'a' entries, each right after its write), or NULL
 * when there are none. */
void store_build_write_batch(struct store_cmd *c, const struct store_cfg *cfg, const char *res, const char *ares,
                             const struct store_batch_write *w, size_t n);
/* Result i of a write batch's reply (its i-th entry, 'a' ones counted): 0
 * with *rv, or a store code with err (-ECANCELED for an attached create
 * whose write was not stored). */
int store_decode_write_batch(const redisReply *r, size_t i, const char *res, const char *name, uint64_t *rv,
                             char *err, size_t errlen);

/* Per-item results of a batch: rcs[i] 0 or -EEXIST, rvs[i] the new version. */
int store_decode_create_batch(const redisReply *r, size_t n, int *rcs, uint64_t *rvs, char *err,
                              size_t errlen);

/* Decoders: return 0 or a negative store code; err gets the message
 * (STORE_EFENCED: what the fence key holds, "" for nothing; the caller,
 * which knows the key, makes the message: store_fence_message). */
/* Writes (create, cas): *rv = the new resourceVersion; res and name only
 * shape the messages of AlreadyExists, NotFound and Conflict. */
int store_decode_write(const redisReply *r, const char *res, const char *name, uint64_t *rv,
                       char *err, size_t errlen);
/* The readers of objects unpack them with cfg's context (store_unpack).
 * get: *out = parsed object or NULL when absent (returns -ENOENT). */
int store_decode_get(const struct store_cfg *cfg, const redisReply *r, json_t **out, char *err, size_t errlen);
/* list: fills items (or raw, the objects' JSON, when raw is set),
 * resource_version and *last (malloc'ed or NULL). *floor is set on -ESTALE. */
int store_decode_list(const struct store_cfg *cfg, const redisReply *r, int raw, struct store_list *out,
                      char **last, uint64_t *floor, char *err, size_t errlen);
int store_decode_history(const struct store_cfg *cfg, const redisReply *r, size_t max, struct store_history *out,
                         uint64_t *floor, char *err, size_t errlen);
int store_decode_rv(const redisReply *r, uint64_t *rv, char *err, size_t errlen);
/* A Redis error reply or transport failure as -EIO with a message. */
int store_reply_error(const redisReply *r, char *err, size_t errlen);

/* The synchronous connection of a store, for the modules beside store.c
 * that send commands of their own (store_ttl.c): connected, its scripts
 * loaded; err is the store's message buffer (store_errmsg). -EIO with the
 * message set when Redis cannot be reached. All borrowed from s. */
struct store_raw {
    redisContext *c;
    const char *prefix;
    char *err;
    size_t errlen;
};
int store_raw(struct store *s, struct store_raw *out);

/* Continue tokens: opaque base64url of {"v":1,"rv":N,"res":..,"ns":..,"start":..}. */
char *store_continue_encode(const char *res, const char *ns, uint64_t rv, const char *start);
int store_continue_decode(const char *token, const char *res, const char *ns, uint64_t *rv,
                          char **start, char *err, size_t errlen);

/* err (what the fence key held, from a decoder) made the message of a
 * refused fenced write: "<key> holds <value>" or "<key> holds nothing". */
void store_fence_message(const struct store_fence *fence, char *err, size_t errlen);
/* 0 when fence (NULL: none) is within its bounds, else -EINVAL with err. */
int store_fence_check(const struct store_fence *fence, char *err, size_t errlen);

/* The stored bytes: b's head, rv in decimal, b's tail (malloc'ed, NUL-terminated). */
char *store_blob_final(const struct store_blob *b, uint64_t rv, size_t *len);
/* Sets metadata.resourceVersion of obj to rv in decimal. */
void store_set_rv(json_t *obj, uint64_t rv);

/* Validation and object shaping (store_object.c). */
int store_validate_key(const char *res, const char *ns, const char *name, char *err,
                       size_t errlen);
int store_uuid_v4(struct store_rng *rng, char out[37]);
void store_rfc3339_now(char out[32], int64_t offset_seconds);
uint64_t store_parse_rv(const char *s, int *ok);
const char *store_meta_str(const json_t *obj, const char *field);

/* Copy of obj ready for create, name in *name (borrowed from the copy). */
int store_prepare_create(struct store_rng *rng, const char *res, const char *ns, const json_t *obj, json_t **out,
                         const char **name, char *err, size_t errlen);
/* The same shaping done on obj itself, which the call takes (freed on error). */
int store_prepare_create_owned(struct store_rng *rng, const char *res, const char *ns, json_t *obj, json_t **out,
                               const char **name, char *err, size_t errlen);
/* Shapes an update of cur (stored) by obj (user). *out new object (rv still
 * cur's), *unchanged = 1 when nothing would change, *del = 1 when the update
 * completes a pending deletion. */
int store_prepare_update(const char *res, const char *ns, const json_t *cur, const json_t *obj,
                         json_t **out, int *unchanged, int *del, char *err, size_t errlen);
/* Shapes a delete: *del = 1 remove now; 0 with *out the object marked for
 * deletion, or *out NULL when it is already marked (nothing to write). */
int store_prepare_delete(const char *res, const json_t *cur, const struct store_delete_opts *o,
                         json_t **out, int *del, char *err, size_t errlen);
int store_check_preconditions(const char *res, const json_t *cur, const char *uid,
                              const char *rv, char *err, size_t errlen);
/* A modify function's object made ready to write over cur (stored): the name
 * must be name's, its uid and resourceVersion preconditions must hold, then
 * store_prepare_update's rules. *conditional = 1 when next named a
 * resourceVersion (a lost race is then a Conflict, not a retry). */
int store_shape_modify(const char *res, const char *ns, const char *name, const json_t *cur, json_t *next,
                       json_t **out, int *unchanged, int *del, int *conditional, char *err, size_t errlen);
/* (store_shape_modify takes next: it is shaped in place, or freed on error.) */

#endif
