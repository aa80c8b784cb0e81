/* Connection-independent halves of every store call: building the script
 * arguments (struct store_cmd) and decoding the replies, plus the continue
 * token and the placeholder serialization of objects. The sync path
 * (store.c) and the future async path send exactly these commands.
 *
 * Borrowed argv entries (the SHA in cfg, blob bytes) must stay alive until
 * the command is handed to hiredis, which copies it into its output buffer. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "store_int.h"

#include <openssl/evp.h>
#include "base64.h"
#include "jparse.h"

void store_cmd_free(struct store_cmd *c) {
    for (int i = 0; i < c->nowned; i++) free(c->owned[i]);
    free(c->owned);
    free(c->argv);
    free(c->argvlen);
    memset(c, 0, sizeof *c);
}

static int cmd_grow(struct store_cmd *c) {
    int cap = c->cap ? c->cap * 2 : 24;
    const char **argv = realloc(c->argv, (size_t)cap * sizeof *argv);
    if (!argv) return -1;
    c->argv = argv;
    size_t *lens = realloc(c->argvlen, (size_t)cap * sizeof *lens);
    if (!lens) return -1;
    c->argvlen = lens;
    char **owned = realloc(c->owned, (size_t)cap * sizeof *owned);
    if (!owned) return -1;
    c->owned = owned;
    c->cap = c->owned_cap = cap;
    return 0;
}

void store_cmd_as_eval(struct store_cmd *c) {
    c->argv[0] = "EVAL";
    c->argvlen[0] = 4;
    c->argv[1] = store_scripts[c->script];
    c->argvlen[1] = strlen(store_scripts[c->script]);
}

static void push_ref(struct store_cmd *c, const char *p, size_t len) {
    if (c->oom || (c->argc >= c->cap && cmd_grow(c))) {
        c->oom = 1;
        return;
    }
    c->argv[c->argc] = p;
    c->argvlen[c->argc++] = len;
}

static void push_str(struct store_cmd *c, const char *p) { push_ref(c, p, strlen(p)); }

__attribute__((format(printf, 2, 3)))
static void push_fmt(struct store_cmd *c, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    size_t room = sizeof c->arena - c->arena_used;
    int n = vsnprintf(c->arena + c->arena_used, room, fmt, ap);
    va_end(ap);
    if (n >= 0 && (size_t)n < room) { /* the common case: the command's own arena, no allocation */
        push_ref(c, c->arena + c->arena_used, (size_t)n);
        c->arena_used += (size_t)n + 1;
        return;
    }
    char *s = NULL;
    va_start(ap, fmt);
    n = vasprintf(&s, fmt, ap);
    va_end(ap);
    if (n < 0 || c->oom || (c->nowned >= c->owned_cap && cmd_grow(c))) {
        if (n >= 0) free(s);
        c->oom = 1;
        return;
    }
    c->owned[c->nowned++] = s;
    push_ref(c, s, (size_t)n);
}

static void cmd_start(struct store_cmd *c, const struct store_cfg *cfg, enum store_script s,
                      int numkeys) {
    memset(c, 0, sizeof *c);
    c->script = s;
    push_str(c, "EVALSHA");
    push_str(c, cfg->sha[s]);
    push_fmt(c, "%d", numkeys);
}

/* KEYS every write script starts with: the counter and the resource's
 * hash, index, stream, floor and time marks. */
static void push_res_keys(struct store_cmd *c, const struct store_cfg *cfg, const char *res) {
    const char *p = cfg->prefix;
    push_fmt(c, "%srv", p);
    push_fmt(c, "%sobj:%s", p, res);
    push_fmt(c, "%sidx:%s", p, res);
    push_fmt(c, "%sev:%s", p, res);
    push_fmt(c, "%sfloor:%s", p, res);
    push_fmt(c, "%shist:%s", p, res);
}

/* ARGV maxlen trim secs: how the stream is trimmed. */
static void push_trim(struct store_cmd *c, const struct store_cfg *cfg) {
    push_fmt(c, "%ld", cfg->history_max);
    push_str(c, cfg->history_exact ? "=" : "~");
    push_fmt(c, "%ld", cfg->history_seconds);
}

/* ARGV head tail: what Redis stores of b, packed when it was. */
static void push_blob(struct store_cmd *c, const struct store_blob *b) {
    push_ref(c, b->pk ? b->pk : b->json, b->pk ? b->pk_head_len : b->head_len);
    push_ref(c, b->pk ? b->pk_tail : b->tail, b->pk ? b->pk_tail_len : b->tail_len);
}

/* ARGV member name ns head tail maxlen trim of the single-object scripts. */
static void push_write_args(struct store_cmd *c, const struct store_cfg *cfg, const char *ns, const char *name,
                            const struct store_blob *b) {
    push_fmt(c, "%s/%s", ns, name);
    push_str(c, name);
    push_str(c, ns);
    push_blob(c, b);
    push_trim(c, cfg);
}

void store_build_create(struct store_cmd *c, const struct store_cfg *cfg, const char *res,
                        const char *ns, const char *name, const struct store_blob *b) {
    cmd_start(c, cfg, STORE_SCRIPT_CREATE, 6);
    push_res_keys(c, cfg, res);
    push_write_args(c, cfg, ns, name, b);
}

void store_build_create_in_ns(struct store_cmd *c, const struct store_cfg *cfg, const char *res,
                              const char *ns, const char *name, const struct store_blob *b) {
    cmd_start(c, cfg, STORE_SCRIPT_CREATE, 7);
    push_res_keys(c, cfg, res);
    push_fmt(c, "%sobj:namespaces", cfg->prefix);
    push_write_args(c, cfg, ns, name, b);
    push_fmt(c, "o:/%s", ns);
}

void store_build_cas(struct store_cmd *c, const struct store_cfg *cfg, const char *res,
                     const char *ns, const char *name, const char *expected_rv, int del,
                     const struct store_blob *b, const struct store_fence *fence) {
    cmd_start(c, cfg, STORE_SCRIPT_CAS, fence ? 7 : 6);
    push_res_keys(c, cfg, res);
    if (fence) push_str(c, fence->key);
    push_write_args(c, cfg, ns, name, b);
    push_str(c, expected_rv);
    push_str(c, del ? "del" : "put");
    if (fence) push_str(c, fence->value);
}

void store_build_create_batch(struct store_cmd *c, const struct store_cfg *cfg, const char *res,
                              const char *ns, const char *const *names,
                              const struct store_blob *const *blobs, size_t n) {
    cmd_start(c, cfg, STORE_SCRIPT_CREATE_BATCH, 6);
    push_res_keys(c, cfg, res);
    push_str(c, ns);
    push_trim(c, cfg);
    for (size_t i = 0; i < n; i++) {
        push_fmt(c, "%s/%s", ns, names[i]);
        push_str(c, names[i]);
        push_blob(c, blobs[i]);
    }
}

void store_build_write_batch(struct store_cmd *c, const struct store_cfg *cfg, const char *res, const char *ares,
                             const struct store_batch_write *w, size_t n) {
    cmd_start(c, cfg, STORE_SCRIPT_WRITE_BATCH, ares ? 12 : 7);
    push_res_keys(c, cfg, res);
    push_fmt(c, "%sobj:namespaces", cfg->prefix);
    if (ares) { /* the attached resource's keys but the counter */
        const char *p = cfg->prefix;
        push_fmt(c, "%sobj:%s", p, ares);
        push_fmt(c, "%sidx:%s", p, ares);
        push_fmt(c, "%sev:%s", p, ares);
        push_fmt(c, "%sfloor:%s", p, ares);
        push_fmt(c, "%shist:%s", p, ares);
    }
    push_trim(c, cfg);
    static const char ops[4][2] = {"c", "p", "d", "a"};
    for (size_t i = 0; i < n; i++) {
        if (w[i].fence && w[i].op != 'a') { /* its fence first: f key value */
            push_ref(c, "f", 1);
            push_str(c, w[i].fence->key);
            push_str(c, w[i].fence->value);
        }
        push_ref(c, ops[w[i].op == 'c' ? 0 : w[i].op == 'p' ? 1 : w[i].op == 'a' ? 3 : 2], 1);
        push_fmt(c, "%s/%s", w[i].ns, w[i].name);
        push_str(c, w[i].name);
        push_str(c, w[i].ns);
        push_blob(c, w[i].blob);
        push_str(c, w[i].expected_rv ? w[i].expected_rv : "");
        push_ref(c, w[i].ns_check ? "1" : "0", 1);
    }
}

int store_decode_write_batch(const redisReply *r, size_t i, const char *res, const char *name, uint64_t *rv,
                             char *err, size_t errlen) {
    if (!r || r->type != REDIS_REPLY_ARRAY || r->elements < 2 * i + 2 ||
        r->element[2 * i]->type != REDIS_REPLY_INTEGER)
        return store_reply_error(r && r->type == REDIS_REPLY_ERROR ? r : NULL, err, errlen);
    /* the pair reads as a single write's reply */
    redisReply *pair[2] = {r->element[2 * i], r->element[2 * i + 1]};
    redisReply one = {.type = REDIS_REPLY_ARRAY, .elements = 2, .element = pair};
    return store_decode_write(&one, res, name, rv, err, errlen);
}

int store_decode_create_batch(const redisReply *r, size_t n, int *rcs, uint64_t *rvs, char *err,
                              size_t errlen) {
    if (!r || r->type != REDIS_REPLY_ARRAY || r->elements != n)
        return store_reply_error(r && r->type == REDIS_REPLY_ERROR ? r : NULL, err, errlen);
    for (size_t i = 0; i < n; i++) {
        const redisReply *e = r->element[i];
        int ok = 0;
        rvs[i] = 0;
        if (e->type == REDIS_REPLY_STRING) rvs[i] = store_parse_rv(e->str, &ok);
        rcs[i] = ok ? 0 : e->type == REDIS_REPLY_INTEGER && e->integer == STORE_R_EXISTS ? -EEXIST
                                                                                          : -EIO;
    }
    return 0;
}

void store_build_get(struct store_cmd *c, const struct store_cfg *cfg, const char *res,
                     const char *ns, const char *name) {
    memset(c, 0, sizeof *c);
    push_str(c, "HGET");
    push_fmt(c, "%sobj:%s", cfg->prefix, res);
    push_fmt(c, "o:%s/%s", ns, name);
}

void store_build_get_many(struct store_cmd *c, const struct store_cfg *cfg, const char *res,
                          const char *const *members, size_t n) {
    memset(c, 0, sizeof *c);
    push_str(c, "HMGET");
    push_fmt(c, "%sobj:%s", cfg->prefix, res);
    for (size_t i = 0; i < n; i++) push_fmt(c, "o:%s", members[i]);
}

void store_build_current_rv(struct store_cmd *c, const struct store_cfg *cfg) {
    memset(c, 0, sizeof *c);
    push_str(c, "GET");
    push_fmt(c, "%srv", cfg->prefix);
}

void store_build_list(struct store_cmd *c, const struct store_cfg *cfg, const char *res,
                      const char *ns, const char *start_after, size_t limit, size_t max_bytes, uint64_t token_rv) {
    const char *p = cfg->prefix;
    cmd_start(c, cfg, STORE_SCRIPT_LIST, 4);
    push_fmt(c, "%srv", p);
    push_fmt(c, "%sobj:%s", p, res);
    push_fmt(c, "%sidx:%s", p, res);
    push_fmt(c, "%sfloor:%s", p, res);
    push_str(c, start_after ? start_after : "");
    push_fmt(c, "%zu", limit);
    push_fmt(c, "%llu", (unsigned long long)token_rv);
    push_str(c, ns);
    push_fmt(c, "%zu", max_bytes);
}

void store_build_history(struct store_cmd *c, const struct store_cfg *cfg, const char *res,
                         const char *ns, uint64_t after_rv, size_t max) {
    const char *p = cfg->prefix;
    cmd_start(c, cfg, STORE_SCRIPT_HISTORY, 3);
    push_fmt(c, "%sev:%s", p, res);
    push_fmt(c, "%sfloor:%s", p, res);
    push_fmt(c, "%srv", p);
    push_fmt(c, "%llu", (unsigned long long)after_rv);
    push_fmt(c, "%zu", max);
    push_str(c, ns);
    push_str(c, ns[0] ? "1" : "0");
}

char *store_blob_final(const struct store_blob *b, uint64_t rv, size_t *len) {
    char rvs[24];
    int rl = snprintf(rvs, sizeof rvs, "%llu", (unsigned long long)rv);
    size_t n = b->head_len + (size_t)rl + b->tail_len;
    char *out = malloc(n + 1);
    if (!out) return NULL;
    memcpy(out, b->json, b->head_len);
    memcpy(out + b->head_len, rvs, (size_t)rl);
    memcpy(out + b->head_len + rl, b->tail, b->tail_len);
    out[n] = 0;
    *len = n;
    return out;
}

void store_set_rv(json_t *obj, uint64_t rv) {
    char buf[24];
    snprintf(buf, sizeof buf, "%llu", (unsigned long long)rv);
    json_object_set_new(json_object_get(obj, "metadata"), "resourceVersion", json_string(buf));
}

int store_cfg_init(struct store_cfg *cfg, const struct store_options *opt) {
    if (!opt->prefix || strlen(opt->prefix) >= STORE_PREFIX_MAX || opt->history_max < 1 ||
        opt->history_seconds < 0 ||
        opt->max_object_bytes < 64)
        return -EINVAL;
    memset(cfg, 0, sizeof *cfg);
    snprintf(cfg->prefix, sizeof cfg->prefix, "%s", opt->prefix);
    cfg->history_max = opt->history_max;
    cfg->history_exact = opt->history_exact;
    cfg->history_seconds = opt->history_seconds;
    cfg->max_object_bytes = opt->max_object_bytes;
    for (int i = 0; i < STORE_NSCRIPTS; i++) { /* Redis names a script by the SHA-1 of its text */
        unsigned char md[EVP_MAX_MD_SIZE];
        unsigned int mdlen = 0;
        if (!EVP_Digest(store_scripts[i], strlen(store_scripts[i]), md, &mdlen, EVP_sha1(), NULL) || mdlen != 20)
            return -EINVAL;
        for (unsigned int k = 0; k < 20; k++) snprintf(cfg->sha[i] + 2 * k, 3, "%02x", md[k]);
    }
    if (!(cfg->pack = store_pack_new())) return -ENOMEM;
    return 0;
}

void store_cfg_free(struct store_cfg *cfg) {
    store_pack_free(cfg->pack);
    cfg->pack = NULL;
}

void store_blob_free(struct store_blob *b) {
    free(b->json);
    free(b->pk);
    memset(b, 0, sizeof *b);
}

int store_blob_encode(const struct store_cfg *cfg, struct store_rng *rng, json_t *obj, struct store_blob *out,
                      char *err, size_t errlen) {
    json_t *meta = json_object_get(obj, "metadata");
    memset(out, 0, sizeof *out);
    for (int attempt = 0; attempt < 4; attempt++) {
        char uuid[37], tok[48];
        if (store_uuid_v4(rng, uuid)) {
            snprintf(err, errlen, "getrandom failed");
            return -EIO;
        }
        snprintf(tok, sizeof tok, "\"rv~%s\"", uuid);
        /* the stored value is the token without its quotes */
        if (json_object_set_new(meta, "resourceVersion",
                                json_stringn_nocheck(tok + 1, strlen(tok) - 2))) {
            snprintf(err, errlen, "out of memory");
            return -ENOMEM;
        }
        size_t len = 0;
        char *s = jdump(obj, JSON_COMPACT, &len);
        if (!s) {
            snprintf(err, errlen, "out of memory serializing the object");
            return -ENOMEM;
        }
        size_t toklen = strlen(tok);
        if (len - toklen + 22 > cfg->max_object_bytes) {
            snprintf(err, errlen, "Request entity too large: the object is %zu bytes, "
                     "limit is %zu", len, cfg->max_object_bytes);
            free(s);
            return -E2BIG;
        }
        char *at = strstr(s, tok);
        if (!at || strstr(at + toklen, tok)) { /* user data holds the token: draw again */
            free(s);
            continue;
        }
        out->json = s;
        out->head_len = (size_t)(at - s) + 1;
        out->tail = at + toklen - 1;
        out->tail_len = len - (size_t)(out->tail - s);
        store_pack_blob(cfg->pack, out);
        return 0;
    }
    snprintf(err, errlen, "could not place the resourceVersion placeholder");
    return -EIO;
}

int store_blob_from_text(const struct store_cfg *cfg, struct store_rng *rng, struct store_text_obj *t,
                         struct store_blob *out, char *err, size_t errlen) {
    char uid[37], ts[32], mid[160];
    char *text = t->text;
    t->text = NULL;
    memset(out, 0, sizeof *out);
    if (!text || t->split == 0 || t->split >= t->len) {
        free(text);
        snprintf(err, errlen, "the object's text has no place for its metadata");
        return -EINVAL;
    }
    if (store_uuid_v4(rng, uid)) {
        free(text);
        snprintf(err, errlen, "getrandom failed");
        return -EIO;
    }
    store_rfc3339_now(ts, 0);
    int m = snprintf(mid, sizeof mid, ",\"uid\":\"%s\",\"creationTimestamp\":\"%s\",\"generation\":1,"
                     "\"resourceVersion\":\"", uid, ts);
    size_t head = t->split + (size_t)m, tail = 1 + t->len - t->split;
    if (head + tail + 20 > cfg->max_object_bytes) {
        free(text);
        snprintf(err, errlen, "Request entity too large: the object is %zu bytes, limit is %zu", head + tail + 20,
                 cfg->max_object_bytes);
        return -E2BIG;
    }
    char *json = malloc(head + tail + 1);
    if (!json) {
        free(text);
        snprintf(err, errlen, "out of memory");
        return -ENOMEM;
    }
    memcpy(json, text, t->split);
    memcpy(json + t->split, mid, (size_t)m);
    json[head] = '"';
    memcpy(json + head + 1, text + t->split, t->len - t->split);
    json[head + tail] = '\0';
    free(text);
    out->json = json;
    out->head_len = head;
    out->tail = json + head;
    out->tail_len = tail;
    store_pack_blob(cfg->pack, out);
    return 0;
}

int store_reply_error(const redisReply *r, char *err, size_t errlen) {
    if (!r) snprintf(err, errlen, "redis: no reply (connection lost or timed out)");
    else if (r->type == REDIS_REPLY_ERROR) snprintf(err, errlen, "redis: %s", r->str);
    else snprintf(err, errlen, "redis: unexpected reply type %d", r->type);
    return -EIO;
}

static int elem_int(const redisReply *r, size_t i, long long *v) {
    if (r->elements <= i || r->element[i]->type != REDIS_REPLY_INTEGER) return 0;
    *v = r->element[i]->integer;
    return 1;
}

static const char *elem_str(const redisReply *r, size_t i, size_t *len) {
    if (r->elements <= i || r->element[i]->type != REDIS_REPLY_STRING) return NULL;
    if (len) *len = r->element[i]->len;
    return r->element[i]->str;
}

static uint64_t elem_rv(const redisReply *r, size_t i) {
    int ok;
    const char *s = elem_str(r, i, NULL);
    return s ? store_parse_rv(s, &ok) : 0;
}

/* Checks the reply is a script array and returns its code, or -1. */
static long long script_code(const redisReply *r) {
    long long code;
    if (!r || r->type != REDIS_REPLY_ARRAY || !elem_int(r, 0, &code)) return -1;
    return code;
}

int store_decode_write(const redisReply *r, const char *res, const char *name, uint64_t *rv,
                       char *err, size_t errlen) {
    long long code = script_code(r);
    int ok = 0;
    const char *s;
    switch (code) {
    case STORE_R_OK:
        s = elem_str(r, 1, NULL);
        *rv = s ? store_parse_rv(s, &ok) : 0;
        if (!ok) break;
        err[0] = '\0';
        return 0;
    case STORE_R_EXISTS:
        snprintf(err, errlen, "%s \"%s\" already exists", res, name);
        return -EEXIST;
    case STORE_R_NOTFOUND:
        snprintf(err, errlen, "%s \"%s\" not found", res, name);
        return -ENOENT;
    case STORE_R_NO_NAMESPACE:
        snprintf(err, errlen, "the namespace of %s \"%s\" does not exist", res, name);
        return STORE_NO_NAMESPACE;
    case STORE_R_NS_TERMINATING:
        snprintf(err, errlen, "%s \"%s\" is forbidden: unable to create new content in its namespace "
                 "because it is being terminated", res, name);
        return STORE_NS_TERMINATING;
    case STORE_R_NOT_WRITTEN:
        snprintf(err, errlen, "%s \"%s\" was not created: the write it goes with was not stored", res, name);
        return -ECANCELED;
    case STORE_R_FENCED: /* what the key holds; the caller knows the key (store_fence_message) */
        s = elem_str(r, 1, NULL);
        snprintf(err, errlen, "%s", s ? s : "");
        return STORE_EFENCED;
    case STORE_R_CONFLICT:
        snprintf(err, errlen, "Operation cannot be fulfilled on %s \"%s\": the object has been "
                 "modified; please apply your changes to the latest version and try again",
                 res, name);
        return STORE_ECONFLICT;
    default:
        break;
    }
    return store_reply_error(r && r->type == REDIS_REPLY_ERROR ? r : NULL, err, errlen);
}

void store_fence_message(const struct store_fence *fence, char *err, size_t errlen) {
    char held[STORE_FENCE_VALUE_MAX + 1];
    snprintf(held, sizeof held, "%s", err); /* a longer value than any accepted fence's is cut */
    snprintf(err, errlen, "%s holds %s", fence ? fence->key : "the fence key", held[0] ? held : "nothing");
}

int store_fence_check(const struct store_fence *fence, char *err, size_t errlen) {
    if (!fence) return 0;
    size_t k = fence->key ? strlen(fence->key) : 0, v = fence->value ? strlen(fence->value) : 0;
    if (k && k <= STORE_FENCE_KEY_MAX && v && v <= STORE_FENCE_VALUE_MAX) return 0;
    snprintf(err, errlen, "a fence needs a key of 1 to %d bytes and a value of 1 to %d", STORE_FENCE_KEY_MAX,
             STORE_FENCE_VALUE_MAX);
    return -EINVAL;
}

/* The JSON of stored bytes s (len): s itself when plain (*buf NULL), else
 * unpacked into *buf (the caller frees it). 0, or -EIO/-ENOMEM with err. */
static int stored_json(const struct store_cfg *cfg, const char *s, size_t len, const char **json, size_t *jlen,
                       char **buf, char *err, size_t errlen) {
    int rc = store_unpack(cfg->pack, s, len, cfg->max_object_bytes + 64, buf, jlen);
    if (rc) {
        snprintf(err, errlen, rc == -ENOMEM ? "out of memory" : "stored object is not valid: a packed object "
                 "that does not unpack");
        return rc;
    }
    if (*buf) {
        *json = *buf;
    } else {
        *json = s;
        *jlen = len;
    }
    return 0;
}

/* Parses stored bytes s (len) into *out; *jlen_out (when not NULL) gets the
 * length of its JSON. */
static int stored_parse(const struct store_cfg *cfg, const char *s, size_t len, json_t **out, size_t *jlen_out,
                        char *err, size_t errlen) {
    const char *json;
    size_t jlen;
    char *buf = NULL;
    *out = NULL;
    int rc = stored_json(cfg, s, len, &json, &jlen, &buf, err, errlen);
    if (rc) return rc;
    if (jlen_out) *jlen_out = jlen;
    json_error_t je;
    *out = jparse_loadb(json, jlen, 0, &je);
    free(buf);
    if (!*out) {
        snprintf(err, errlen, "stored object is not valid JSON: %s", je.text);
        return -EIO;
    }
    return 0;
}

int store_decode_get(const struct store_cfg *cfg, const redisReply *r, json_t **out, char *err, size_t errlen) {
    *out = NULL;
    if (r && r->type == REDIS_REPLY_NIL) return -ENOENT;
    if (!r || r->type != REDIS_REPLY_STRING) return store_reply_error(r, err, errlen);
    return stored_parse(cfg, r->str, r->len, out, NULL, err, errlen);
}

int store_decode_rv(const redisReply *r, uint64_t *rv, char *err, size_t errlen) {
    int ok;
    if (r && r->type == REDIS_REPLY_NIL) {
        *rv = 0;
        return 0;
    }
    if (!r || r->type != REDIS_REPLY_STRING) return store_reply_error(r, err, errlen);
    *rv = store_parse_rv(r->str, &ok);
    if (!ok) {
        snprintf(err, errlen, "redis: resourceVersion counter is not a number");
        return -EIO;
    }
    return 0;
}

int store_decode_list(const struct store_cfg *cfg, const redisReply *r, int raw, struct store_list *out,
                      char **last, uint64_t *floor, char *err, size_t errlen) {
    long long code = script_code(r), remaining;
    size_t lastlen;
    const char *ls;
    memset(out, 0, sizeof *out);
    *last = NULL;
    if (code == STORE_R_EXPIRED) {
        *floor = elem_rv(r, 2);
        snprintf(err, errlen, "The provided continue parameter is too old to display a "
                 "consistent list result. You can start a new list without the continue parameter.");
        return -ESTALE;
    }
    if (code != STORE_R_OK || !(ls = elem_str(r, 2, &lastlen)) || !elem_int(r, 3, &remaining))
        return store_reply_error(r && r->type == REDIS_REPLY_ERROR ? r : NULL, err, errlen);
    out->resource_version = elem_rv(r, 1);
    out->remaining = remaining > 0 ? (uint64_t)remaining : 0;
    size_t cap = r->elements - 4;
    if (raw) {
        out->raw = calloc(cap ? cap : 1, sizeof *out->raw);
        out->raw_len = calloc(cap ? cap : 1, sizeof *out->raw_len);
        if (!out->raw || !out->raw_len) goto oom;
    } else if (!(out->items = json_array())) {
        goto oom;
    }
    for (size_t i = 4; i < r->elements; i++) {
        size_t len;
        const char *s = elem_str(r, i, &len);
        if (!s || len == 0) continue; /* index entry without object: skip */
        if (raw) {
            const char *json;
            size_t jlen;
            char *buf = NULL;
            int rc = stored_json(cfg, s, len, &json, &jlen, &buf, err, errlen);
            if (rc) {
                store_list_free(out);
                return rc;
            }
            out->bytes += jlen;
            if (!buf && (buf = malloc(len + 1))) {
                memcpy(buf, s, len);
                buf[len] = '\0';
            }
            if (!buf) goto oom;
            out->raw[out->n_raw] = buf;
            out->raw_len[out->n_raw++] = jlen;
            continue;
        }
        json_t *o;
        size_t jlen = 0;
        int rc = stored_parse(cfg, s, len, &o, &jlen, err, errlen);
        if (rc) {
            store_list_free(out);
            return rc;
        }
        out->bytes += jlen;
        if (json_array_append_new(out->items, o)) goto oom;
    }
    if (lastlen) {
        *last = strndup(ls, lastlen);
        if (!*last) goto oom;
    }
    return 0;
oom:
    store_list_free(out);
    snprintf(err, errlen, "out of memory");
    return -ENOMEM;
}

static enum store_event_type event_type(const char *s) {
    if (!strcmp(s, "ADDED")) return STORE_ADDED;
    if (!strcmp(s, "MODIFIED")) return STORE_MODIFIED;
    if (!strcmp(s, "DELETED")) return STORE_DELETED;
    return 0;
}

int store_decode_history(const struct store_cfg *cfg, const redisReply *r, size_t max, struct store_history *out,
                         uint64_t *floor, char *err, size_t errlen) {
    long long code = script_code(r), scanned;
    memset(out, 0, sizeof *out);
    if (code == STORE_R_EXPIRED) {
        *floor = elem_rv(r, 2);
        out->current_rv = elem_rv(r, 1);
        return -ESTALE; /* the caller words the message: it knows after_rv */
    }
    if (code != STORE_R_OK || !elem_int(r, 3, &scanned) || (r->elements - 4) % 5)
        return store_reply_error(r && r->type == REDIS_REPLY_ERROR ? r : NULL, err, errlen);
    out->current_rv = elem_rv(r, 1);
    out->next_rv = elem_rv(r, 2);
    out->more = scanned >= 0 && (size_t)scanned >= max;
    size_t n = (r->elements - 4) / 5;
    if (n) {
        out->events = calloc(n, sizeof *out->events);
        if (!out->events) goto oom;
    }
    for (size_t i = 0; i < n; i++) {
        size_t b = 4 + i * 5, objlen;
        const char *t = elem_str(r, b + 1, NULL), *ns = elem_str(r, b + 2, NULL),
                   *name = elem_str(r, b + 3, NULL), *obj = elem_str(r, b + 4, &objlen);
        struct store_event *e = &out->events[out->n];
        if (!t || !ns || !name || !obj || !event_type(t)) {
            store_history_free(out);
            return store_reply_error(NULL, err, errlen);
        }
        e->type = event_type(t);
        e->resource_version = elem_rv(r, b);
        e->ns = strdup(ns);
        e->name = strdup(name);
        int rc = stored_parse(cfg, obj, objlen, &e->object, NULL, err, errlen);
        out->n++;
        if (rc == -EIO) {
            store_history_free(out);
            return rc;
        }
        if (!e->ns || !e->name || !e->object) goto oom;
    }
    return 0;
oom:
    store_history_free(out);
    snprintf(err, errlen, "out of memory decoding history");
    return -ENOMEM;
}

/* base64url without padding (what Kubernetes uses for continue tokens);
 * base64.h encodes it. */
static const char b64[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";

/* Returns the decoded length or -1 (invalid character or length). */
static long b64_decode(const char *in, unsigned char *out, size_t cap) {
    size_t n = strlen(in), o = 0;
    unsigned v = 0;
    int bits = 0;
    if (n % 4 == 1) return -1;
    for (size_t i = 0; i < n; i++) {
        const char *c = strchr(b64, in[i]);
        if (!c || !in[i]) return -1;
        v = v << 6 | (unsigned)(c - b64);
        bits += 6;
        if (bits >= 8) {
            bits -= 8;
            if (o >= cap) return -1;
            out[o++] = (unsigned char)(v >> bits & 0xff);
        }
    }
    return (long)o;
}

char *store_continue_encode(const char *res, const char *ns, uint64_t rv, const char *start) {
    json_t *j = json_pack("{s:i,s:I,s:s,s:s,s:s}", "v", 1, "rv", (json_int_t)rv, "res", res,
                          "ns", ns, "start", start);
    if (!j) return NULL;
    char *s = json_dumps(j, JSON_COMPACT);
    json_decref(j);
    if (!s) return NULL;
    size_t n = strlen(s);
    char *t = malloc(b64_encoded_len(n, false) + 1);
    if (t) b64_encode(s, n, true, false, t);
    free(s);
    return t;
}

int store_continue_decode(const char *token, const char *res, const char *ns, uint64_t *rv,
                          char **start, char *err, size_t errlen) {
    unsigned char buf[STORE_MAX_CONTINUE];
    json_int_t jrv = 0, ver = 0;
    const char *tres = NULL, *tns = NULL, *tstart = NULL;
    json_error_t je;
    *start = NULL;
    long n = strlen(token) > STORE_MAX_CONTINUE ? -1 : b64_decode(token, buf, sizeof buf);
    json_t *j = n > 0 ? json_loadb((const char *)buf, (size_t)n, 0, &je) : NULL;
    if (!j || json_unpack(j, "{s:I,s:I,s:s,s:s,s:s}", "v", &ver, "rv", &jrv, "res", &tres,
                          "ns", &tns, "start", &tstart) || ver != 1 || jrv <= 0) {
        json_decref(j);
        snprintf(err, errlen, "continue key is not valid: malformed token");
        return -EINVAL;
    }
    size_t nslen = strlen(ns);
    if (strcmp(tres, res) || strcmp(tns, ns) ||
        (nslen && (strncmp(tstart, ns, nslen) || tstart[nslen] != '/'))) {
        json_decref(j);
        snprintf(err, errlen, "continue key is not valid: it belongs to another list");
        return -EINVAL;
    }
    *rv = (uint64_t)jrv;
    *start = strdup(tstart);
    json_decref(j);
    if (!*start) {
        snprintf(err, errlen, "out of memory");
        return -ENOMEM;
    }
    return 0;
}
