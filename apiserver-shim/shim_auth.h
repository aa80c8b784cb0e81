/* Authentication, authorization and audit of the API server's requests
 * (docs/security.md).
 *
 * Who: a bearer token from the static token file (kube-apiserver's CSV,
 * token,user,uid,"group1,group2"; or, as before, a file holding one token
 * alone, whose user is "admin" in system:masters), a client certificate
 * verified on the TLS port (CN the user, O the groups), or nobody: 401,
 * unless anonymous requests are allowed (local development), when the
 * anonymous user is in system:masters.
 *
 * What may they do: Kubernetes RBAC (Roles, ClusterRoles and their
 * bindings, read from the store into an index by subject, rebuilt after a
 * write to them and at most every RBAC_REFRESH_MS otherwise); system:masters
 * may do anything without a look at it. Refused: 403 in kube-apiserver's
 * words.
 *
 * What happened: one audit.k8s.io/v1 Event per request, as a JSON line, to
 * a file rotated at a size (shim_audit.c).
 *
 * Ownership: auth_tokens_* own their table; the identity of a request
 * points into the table, the request or its own buffer, for the request's
 * time only. Single-threaded (the API server's loop). */
#ifndef PELOTON_SHIM_AUTH_H
#define PELOTON_SHIM_AUTH_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <uv.h>

#include "server.h"
#include "shim_limits.h"

#define AUTH_MAX_FILE (1u << 20)   /* a token file's bytes */
#define AUTH_MAX_TOKENS 10000      /* its lines */
#define AUTH_MAX_FIELD 1024        /* a token, user or uid */
#define AUTH_MAX_GROUPS 32         /* a user's groups (one more is added: system:authenticated) */
#define AUTH_SINGLE_USER "admin"   /* the user of a file holding one token alone */
#define RBAC_REFRESH_MS 2000       /* the index is rebuilt at least this often while needed */

/* ---- who ---- */
struct auth_user {
    const char *name, *uid;
    const char *groups[AUTH_MAX_GROUPS + 2];
    int ngroups;
};

struct auth_tokens;
/* Parses a token file's text: 0 with *out (the caller frees it with
 * auth_tokens_free), or -EINVAL with a message naming the line in err
 * (a file over AUTH_MAX_FILE, a line without user or uid, an empty or
 * repeated token, an unterminated quote, too many lines, fields or groups),
 * -ENOMEM. Blank lines and lines starting with '#' are skipped. */
int auth_tokens_parse(const char *text, size_t len, struct auth_tokens **out, char *err, size_t errlen);
int auth_tokens_load(const char *path, struct auth_tokens **out, char *err, size_t errlen);
/* Adds one token (copied) with its user; an empty or known token is -EINVAL. */
int auth_tokens_add(struct auth_tokens *t, const char *token, const char *user, const char *uid, const char *group);
/* The user of token tok[0..n), or NULL. */
const struct auth_user *auth_tokens_find(const struct auth_tokens *t, const char *tok, size_t n);
int auth_tokens_count(const struct auth_tokens *t);
struct auth_tokens *auth_tokens_new(void);
void auth_tokens_free(struct auth_tokens *t);

/* ---- what is asked (the attributes RBAC decides on) ---- */
struct authz_attrs {
    bool resource;     /* a resource request; else a non-resource one (path) */
    const char *verb;  /* get list watch create update patch delete deletecollection; lower-case method otherwise */
    const char *group, *version, *plural, *sub, *ns, *name; /* "" when absent */
    const char *path;  /* the request's path */
    char buf[4160];    /* storage for the segments above */
};
/* The attributes of an HTTP request, as kube-apiserver derives them. */
void authz_attrs_of(const struct http_request *req, struct authz_attrs *a);

/* ---- RBAC ---- */
struct rbac;
struct rbac *rbac_new(void);
void rbac_free(struct rbac *r);
/* Adds a Role (ns set) or ClusterRole (ns "") named name with its rules
 * (the object's "rules"); malformed rules are skipped. 0 or -ENOMEM. */
int rbac_add_role(struct rbac *r, const char *ns, const char *name, const json_t *rules);
/* Adds a RoleBinding (ns set) or ClusterRoleBinding (ns ""): the object. */
int rbac_add_binding(struct rbac *r, const char *ns, const json_t *binding);
/* Resolves the bindings to their roles and builds the index by subject;
 * call after the adds, before rbac_allows. 0 or -ENOMEM. */
int rbac_finish(struct rbac *r);
/* Whether u may do a. system:masters may do anything. */
bool rbac_allows(const struct rbac *r, const struct auth_user *u, const struct authz_attrs *a);
/* The index of every Role, ClusterRole and binding in the store, with the
 * defaults every authenticated user has (discovery, OpenAPI, health,
 * SelfSubjectAccessReview); NULL when the store cannot be read. */
struct store;
struct rbac *rbac_load_store(struct store *st);
/* Checks a Role, ClusterRole, RoleBinding or ClusterRoleBinding (kind) as
 * kube-apiserver does, appending each violation to res (other kinds: none).
 * 0 or -ENOMEM. */
struct schema_result;
int rbac_validate(const char *kind, const json_t *obj, struct schema_result *res);
/* An update of a RoleBinding or ClusterRoleBinding (r) from cur to next that
 * changes its roleRef: true after a 422 in resp, as kube-apiserver refuses it. */
struct shim_resource;
bool shim_rbac_refuse_update(const struct shim_resource *r, const json_t *next, const json_t *cur, const char *name,
                             struct http_response *resp);
/* A SelfSubjectRulesReview's status for u in ns: {resourceRules,
 * nonResourceRules, incomplete} (new; NULL when out of memory). r may be NULL. */
json_t *rbac_rules_review(const struct rbac *r, const struct auth_user *u, const char *ns);
/* Whether one rule (a PolicyRule object) allows a: for tests. */
bool rbac_rule_allows(const json_t *rule, const struct authz_attrs *a);

/* ---- audit ---- */
struct shim_audit;
struct audit_config {
    const char *path;       /* the file; NULL: no audit */
    size_t max_bytes;       /* rotate before passing this (0: 100 MiB) */
    int max_backups;        /* PATH.1 … PATH.N kept (0: 5) */
};
/* NULL with err set when the file cannot be opened; NULL with err "" when cfg has no path. */
struct shim_audit *shim_audit_open(const struct audit_config *cfg, uv_loop_t *loop, char *err, size_t errlen);
void shim_audit_close(struct shim_audit *a); /* flushes */
void shim_audit_flush(struct shim_audit *a);
struct audit_rec; /* one request's record, until its answer */
/* decision: "allow", "forbid", or NULL (not authenticated: no decision). */
struct audit_rec *shim_audit_begin(struct shim_audit *a, const struct http_request *req,
                                   const struct auth_user *u, const struct authz_attrs *at, const char *decision);
/* Writes the record's line with its code and latency and frees it (NULL: nothing). */
void shim_audit_end(struct shim_audit *a, struct audit_rec *r, int code);

/* ---- the shim's side (shim_auth.c) ---- */
struct shim;
struct shim_sec_config {
    const char *token_file;    /* NULL: no tokens from a file */
    const char *internal_token; /* this process's controllers' token (system:masters); NULL: none */
    bool allow_anonymous;      /* a request without credentials is system:anonymous in system:masters */
    struct audit_config audit;
    struct limits_config limits; /* per user, system:masters exempt (shim_limits.h) */
};
struct shim_sec;
/* NULL with err on a bad token file or audit path. */
struct shim_sec *shim_sec_new(const struct shim_sec_config *cfg, uv_loop_t *loop, char *err, size_t errlen);
void shim_sec_free(struct shim_sec *sec);
/* Authenticates and authorizes req: true when it may be served (and its
 * audit record begun); false after a 401 or 403 answer in resp (audited). */
bool shim_sec_admit(struct shim *s, const struct http_request *req, struct http_response *resp);
/* The current request opens a watch: true with *hold (what
 * shim_sec_watch_end gives back; NULL when not counted), or false after a
 * 429 in resp (its user holds the most watches). */
bool shim_sec_watch_begin(struct shim *s, struct http_response *resp, void **hold);
void shim_sec_watch_end(struct shim *s, void *hold);
/* The per-user limits' counters (zeros without security). */
void shim_sec_limits_stats(const struct shim *s, struct limits_stats *out);
/* The request's answer is known (code): its audit line. */
void shim_sec_done(struct shim *s, int code);
/* The current request's audit record, taken by a deferred reply (then given to shim_sec_end). */
struct audit_rec *shim_sec_take(struct shim *s);
void shim_sec_end(struct shim *s, struct audit_rec *r, int code);
/* Whether the current request's user may also do verb on the core group's
 * resource plural in namespace ns (a request that does two things is
 * allowed both); false after a 403 in kube-apiserver's words in resp. */
bool shim_sec_may(struct shim *s, const char *verb, const char *plural, const char *ns, struct http_response *resp);
/* POST selfsubjectaccessreviews: the answer for the request's user. */
void shim_sec_ssar(struct shim *s, const struct http_request *req, struct http_response *resp);
/* POST selfsubjectrulesreviews (kubectl auth can-i --list): the user's rules in spec.namespace. */
void shim_sec_ssrr(struct shim *s, const struct http_request *req, struct http_response *resp);
/* A protobuf SelfSubjectAccessReview (kubectl's encoding) as its JSON
 * shape: {"spec": {"resourceAttributes": {...}} or nonResourceAttributes};
 * NULL for bytes that are not one. For tests and the fuzz target. */
json_t *ssar_from_protobuf(const unsigned char *b, size_t n);
/* The same for a SelfSubjectRulesReview: {"spec": {"namespace": …}}. */
json_t *ssrr_from_protobuf(const unsigned char *b, size_t n);
/* A write to an RBAC kind happened: the index is rebuilt before its next use. */
void shim_sec_rbac_changed(struct shim *s);

#endif
