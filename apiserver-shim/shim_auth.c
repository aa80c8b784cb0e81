/* The API server's side of authentication, authorization and audit
 * (shim_auth.h): who sent a request, whether RBAC lets them, the 401 and
 * 403 answers, the RBAC index's rebuilds, SelfSubjectAccessReview. */
#include <errno.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "shim.h"
#include "shim_auth.h"


struct shim_sec {
    struct auth_tokens *tokens;
    bool anonymous;
    struct rbac *rbac;      /* NULL until first needed, and after a change */
    uint64_t built_ms;
    struct shim_audit *audit;
    struct limits *limits;
    /* the request being served */
    struct audit_rec *cur;
    bool rbac_write;        /* it writes an RBAC kind: rebuild after it */
    struct auth_user user;  /* a certificate's or the anonymous user */
    const struct auth_user *who;
    struct limits_user *lim; /* who's limits entry; NULL for system:masters */
    char certbuf[4200];
    struct authz_attrs attrs;
};

static uint64_t mono_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

struct shim_sec *shim_sec_new(const struct shim_sec_config *cfg, uv_loop_t *loop, char *err, size_t errlen) {
    struct shim_sec *sec = calloc(1, sizeof *sec);
    if (!sec) {
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    sec->anonymous = cfg->allow_anonymous;
    int rc = cfg->token_file ? auth_tokens_load(cfg->token_file, &sec->tokens, err, errlen) : 0;
    if (!rc && !sec->tokens && !(sec->tokens = auth_tokens_new())) rc = -ENOMEM;
    if (!rc && cfg->internal_token && cfg->internal_token[0])
        rc = auth_tokens_add(sec->tokens, cfg->internal_token, "system:peloton", "", "system:masters");
    if (rc) {
        if (rc == -ENOMEM) snprintf(err, errlen, "out of memory");
        else if (rc == -EINVAL && cfg->internal_token && !err[0]) snprintf(err, errlen, "the token file repeats the internal token");
        shim_sec_free(sec);
        return NULL;
    }
    if (!(sec->limits = limits_new(&cfg->limits))) {
        snprintf(err, errlen, "out of memory");
        shim_sec_free(sec);
        return NULL;
    }
    err[0] = 0;
    sec->audit = shim_audit_open(&cfg->audit, loop, err, errlen);
    if (!sec->audit && err[0]) {
        shim_sec_free(sec);
        return NULL;
    }
    return sec;
}

void shim_sec_free(struct shim_sec *sec) {
    if (!sec) return;
    free(sec->cur);
    shim_audit_close(sec->audit);
    auth_tokens_free(sec->tokens);
    rbac_free(sec->rbac);
    limits_free(sec->limits);
    free(sec);
}

/* ---- who ---- */

/* The request's user, or NULL (401). A bearer token decides when one is
 * sent (a wrong one is 401 whatever else comes with it); then a verified
 * client certificate; then, when allowed, the anonymous user. */
static const struct auth_user *authenticate(struct shim_sec *sec, const struct http_request *req) {
    const char *a = req->authorization;
    if (!strncasecmp(a, "bearer ", 7)) {
        a += 7;
        while (*a == ' ') a++;
        return auth_tokens_find(sec->tokens, a, strcspn(a, " "));
    }
    struct auth_user *u = &sec->user;
    memset(u, 0, sizeof *u);
    if (req->client_cn && req->client_cn[0]) {
        size_t cl = strlen(req->client_cn), ol = strlen(req->client_orgs);
        if (cl + ol + 2 > sizeof sec->certbuf) return NULL;
        memcpy(sec->certbuf, req->client_cn, cl + 1);
        char *o = sec->certbuf + cl + 1;
        memcpy(o, req->client_orgs, ol + 1);
        u->name = sec->certbuf;
        u->uid = "";
        for (char *g = o; *g && u->ngroups < AUTH_MAX_GROUPS;) {
            char *nl = strchr(g, '\n');
            if (nl) *nl = 0;
            if (*g) u->groups[u->ngroups++] = g;
            if (!nl) break;
            g = nl + 1;
        }
        u->groups[u->ngroups++] = "system:authenticated";
        return u;
    }
    if (!sec->anonymous) return NULL;
    u->name = "system:anonymous";
    u->uid = "";
    u->groups[u->ngroups++] = "system:unauthenticated";
    u->groups[u->ngroups++] = "system:masters"; /* --insecure-allow-anonymous: local development */
    return u;
}

/* ---- the RBAC index ---- */

static struct rbac *rbac_load(struct shim *s) { return rbac_load_store(s->st); }

static bool is_master(const struct auth_user *u) {
    for (int i = 0; i < u->ngroups; i++)
        if (!strcmp(u->groups[i], "system:masters")) return true;
    return false;
}

static bool allowed(struct shim *s, const struct auth_user *u, const struct authz_attrs *a) {
    struct shim_sec *sec = s->sec;
    if (is_master(u)) return true; /* without a look at the index (the controllers' hot path) */
    uint64_t now = mono_ms();
    if (!sec->rbac || now - sec->built_ms >= RBAC_REFRESH_MS) {
        struct rbac *r = rbac_load(s);
        if (r || !sec->rbac) { /* a failed read keeps the last index */
            rbac_free(sec->rbac);
            sec->rbac = r;
        }
        sec->built_ms = now;
    }
    return rbac_allows(sec->rbac, u, a);
}

void shim_sec_rbac_changed(struct shim *s) {
    if (!s->sec) return;
    rbac_free(s->sec->rbac);
    s->sec->rbac = NULL;
}

/* ---- answers ---- */

/* The length of the valid UTF-8 sequence at p (1-4), or 0. */
static size_t utf8_len(const unsigned char *p) {
    size_t n = p[0] >= 0xf0 && p[0] <= 0xf4 ? 4 : p[0] >= 0xe0 ? 3 : p[0] >= 0xc2 && p[0] <= 0xdf ? 2 : 0;
    for (size_t i = 1; i < n; i++)
        if ((p[i] & 0xc0) != 0x80) return 0;
    return n;
}

/* s as Go's %q shows it (kube-apiserver's messages use it): in quotes, with
 * quotes, backslashes and control bytes escaped and a byte that is not UTF-8
 * as \xNN; cut to fit buf. */
static const char *goq(const char *s, char *buf, size_t n) {
    static const char hex[] = "0123456789abcdef";
    size_t o = 0;
    buf[o++] = '"';
    for (const unsigned char *p = (const unsigned char *)s; *p && o + 8 < n;) {
        size_t l = *p >= 0x80 ? utf8_len(p) : 1;
        if (*p >= 0x80 && l) {
            memcpy(buf + o, p, l);
            o += l, p += l;
        } else if (*p == '"' || *p == '\\') {
            buf[o++] = '\\', buf[o++] = (char)*p++;
        } else if (*p < 0x20 || *p >= 0x7f) {
            buf[o++] = '\\', buf[o++] = 'x', buf[o++] = hex[*p >> 4], buf[o++] = hex[*p & 15];
            p++;
        } else {
            buf[o++] = (char)*p++;
        }
    }
    buf[o++] = '"';
    buf[o] = 0;
    return buf;
}

/* kube-apiserver's 403: "pods \"x\" is forbidden: User \"u\" cannot get
 * resource \"pods\" in API group \"\" in the namespace \"ns\"". */
static void forbid(struct http_response *resp, const struct auth_user *u, const struct authz_attrs *a) {
    char qu[300], qp[1100], qn[300], qr[600], qg[300], qns[300];
    if (!a->resource) {
        shim_status(resp, 403, "Forbidden", NULL, "forbidden: User %s cannot %s path %s", goq(u->name, qu, sizeof qu),
                    a->verb, goq(a->path, qp, sizeof qp));
        return;
    }
    char gr[600], res[600], where[400];
    snprintf(gr, sizeof gr, "%s%s%s", a->plural, a->group[0] ? "." : "", a->group);
    snprintf(res, sizeof res, "%s%s%s", a->plural, a->sub[0] ? "/" : "", a->sub);
    if (a->ns[0]) snprintf(where, sizeof where, "in the namespace %s", goq(a->ns, qns, sizeof qns));
    else snprintf(where, sizeof where, "at the cluster scope");
    json_t *d = json_object();
    json_object_set_new(d, "group", shim_string(a->group));
    json_object_set_new(d, "kind", shim_string(a->plural));
    if (a->name[0]) json_object_set_new(d, "name", shim_string(a->name));
    char name[310] = "";
    if (a->name[0]) snprintf(name, sizeof name, " %s", goq(a->name, qn, sizeof qn));
    shim_status(resp, 403, "Forbidden", d, "%s%s is forbidden: User %s cannot %s resource %s in API group %s %s", gr,
                name, goq(u->name, qu, sizeof qu), a->verb, goq(res, qr, sizeof qr), goq(a->group, qg, sizeof qg),
                where);
}

/* kube-apiserver's answer to a client it will not serve now (priority and
 * fairness): 429 TooManyRequests, retryAfterSeconds in the details and the
 * Retry-After header, which client-go waits out before it retries. */
static void __attribute__((format(printf, 3, 4))) too_many(struct http_response *resp, unsigned retry,
                                                           const char *fmt, ...) {
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    shim_status(resp, 429, "TooManyRequests", json_pack("{s:i}", "retryAfterSeconds", (int)retry), "%s", msg);
    resp->retry_after = retry;
}

bool shim_sec_admit(struct shim *s, const struct http_request *req, struct http_response *resp) {
    struct shim_sec *sec = s->sec;
    if (!sec) return true;
    struct authz_attrs *a = &sec->attrs;
    authz_attrs_of(req, a);
    sec->rbac_write = a->resource && !strcmp(a->group, "rbac.authorization.k8s.io") && req->method != HTTP_GET &&
                      req->method != HTTP_HEAD;
    const struct auth_user *u = authenticate(sec, req);
    sec->who = u;
    if (!u) {
        static const struct auth_user nobody = {.name = "system:anonymous", .uid = "",
                                                .groups = {"system:unauthenticated"}, .ngroups = 1};
        shim_status(resp, 401, "Unauthorized", NULL, "Unauthorized");
        shim_audit_end(sec->audit, shim_audit_begin(sec->audit, req, &nobody, a, NULL), 401);
        return false;
    }
    bool ok = allowed(s, u, a);
    sec->cur = shim_audit_begin(sec->audit, req, u, a, ok ? "allow" : "forbid");
    if (!ok) {
        forbid(resp, u, a);
        shim_sec_done(s, 403);
        return false;
    }
    sec->lim = NULL;
    unsigned retry = 1;
    if (!is_master(u) && !(sec->lim = limits_take(sec->limits, u->name, mono_ms(), &retry))) {
        too_many(resp, retry, "Too many requests, please try again later.");
        shim_sec_done(s, 429);
        return false;
    }
    return true;
}

bool shim_sec_watch_begin(struct shim *s, struct http_response *resp, void **hold) {
    *hold = NULL;
    struct shim_sec *sec = s->sec;
    if (!sec || !sec->lim) return true; /* open, or system:masters */
    if (!limits_watch_begin(sec->limits, sec->lim)) {
        too_many(resp, 1, "Too many watches open by user %s, please close some and try again later.",
                 sec->who ? sec->who->name : "");
        return false;
    }
    *hold = sec->lim;
    return true;
}

void shim_sec_watch_end(struct shim *s, void *hold) {
    if (s->sec && hold) limits_watch_end(s->sec->limits, hold);
}

void shim_sec_limits_stats(const struct shim *s, struct limits_stats *out) {
    if (s->sec) limits_stats(s->sec->limits, out);
    else memset(out, 0, sizeof *out);
}

bool shim_sec_may(struct shim *s, const char *verb, const char *plural, const char *ns, struct http_response *resp) {
    struct shim_sec *sec = s->sec;
    if (!sec || !sec->who) return true;
    struct authz_attrs a = {.resource = true, .verb = verb, .group = "", .version = "v1", .plural = plural,
                            .sub = "", .ns = ns, .name = "", .path = ""};
    if (allowed(s, sec->who, &a)) return true;
    forbid(resp, sec->who, &a);
    return false;
}

void shim_sec_done(struct shim *s, int code) {
    struct shim_sec *sec = s->sec;
    if (!sec) return;
    if (sec->rbac_write) shim_sec_rbac_changed(s);
    sec->rbac_write = false;
    shim_audit_end(sec->audit, sec->cur, code);
    sec->cur = NULL;
    sec->who = NULL;
}

struct audit_rec *shim_sec_take(struct shim *s) {
    if (!s->sec) return NULL;
    struct audit_rec *r = s->sec->cur;
    s->sec->cur = NULL;
    return r;
}

void shim_sec_end(struct shim *s, struct audit_rec *r, int code) { shim_audit_end(s->sec ? s->sec->audit : NULL, r, code); }

/* ---- SelfSubjectAccessReview ---- */

static const char *jstr(const json_t *o, const char *k) {
    const char *v = json_string_value(json_object_get(o, k));
    return v ? v : "";
}

/* ---- protobuf: kubectl sends its SelfSubjectAccessReview so ---- */

/* One field of a protobuf message at *p (< end): its number and wire type,
 * and for a length-delimited one its bytes. false at the end or on bad input. */
struct pbf {
    unsigned num, wt;
    uint64_t v;
    const unsigned char *b;
    size_t n;
};

static bool pb_varint(const unsigned char **p, const unsigned char *end, uint64_t *v) {
    *v = 0;
    for (int s = 0; s < 64 && *p < end; s += 7) {
        unsigned char c = *(*p)++;
        *v |= (uint64_t)(c & 0x7f) << s;
        if (!(c & 0x80)) return true;
    }
    return false;
}

static bool pb_next(const unsigned char **p, const unsigned char *end, struct pbf *f) {
    uint64_t key;
    if (*p >= end || !pb_varint(p, end, &key)) return false;
    f->num = (unsigned)(key >> 3), f->wt = key & 7;
    switch (f->wt) {
    case 0: return pb_varint(p, end, &f->v);
    case 1: if (end - *p < 8) return false; *p += 8; return true;
    case 5: if (end - *p < 4) return false; *p += 4; return true;
    case 2:
        if (!pb_varint(p, end, &f->v) || f->v > (uint64_t)(end - *p)) return false;
        f->b = *p, f->n = (size_t)f->v;
        *p += f->n;
        return true;
    default: return false;
    }
}

/* The string fields of a message as keys of a new object (names[i] for field i + 1). */
static json_t *pb_strings(const unsigned char *p, size_t n, const char *const *names, unsigned count) {
    json_t *o = json_object();
    struct pbf f;
    for (const unsigned char *end = p + n; o && pb_next(&p, end, &f);)
        if (f.wt == 2 && f.num >= 1 && f.num <= count && names[f.num - 1] && f.n <= 4096)
            json_object_set_new(o, names[f.num - 1], json_stringn((const char *)f.b, f.n));
    return o;
}

/* The JSON shape of a protobuf-encoded SelfSubjectAccessReview (the
 * "k8s\0" envelope, runtime.Unknown, its raw message); NULL when it is none. */
json_t *ssar_from_protobuf(const unsigned char *b, size_t n) {
    static const char *const ra_names[] = {"namespace", "verb", "group", "version", "resource", "subresource", "name"};
    static const char *const nra_names[] = {"path", "verb"};
    if (n < 4 || memcmp(b, "k8s", 4)) return NULL;
    const unsigned char *p = b + 4, *end = b + n, *raw = NULL;
    size_t rawn = 0;
    struct pbf f;
    while (pb_next(&p, end, &f))
        if (f.num == 2 && f.wt == 2) raw = f.b, rawn = f.n;
    if (!raw) return NULL;
    json_t *spec = json_object(), *out = json_pack("{s:o}", "spec", spec);
    for (p = raw, end = raw + rawn; out && pb_next(&p, end, &f);) {
        if (f.num != 2 || f.wt != 2) continue;
        const unsigned char *q = f.b, *qe = f.b + f.n;
        struct pbf g;
        while (pb_next(&q, qe, &g)) {
            if (g.wt != 2) continue;
            if (g.num == 1) json_object_set_new(spec, "resourceAttributes", pb_strings(g.b, g.n, ra_names, 7));
            else if (g.num == 2) json_object_set_new(spec, "nonResourceAttributes", pb_strings(g.b, g.n, nra_names, 2));
        }
    }
    return out;
}

void shim_sec_ssar(struct shim *s, const struct http_request *req, struct http_response *resp) {
    if (req->method != HTTP_POST) {
        shim_status(resp, 405, "MethodNotAllowed", NULL, "the server does not allow this method on the requested resource");
        return;
    }
    json_error_t je;
    json_t *in = !strncmp(req->content_type, "application/vnd.kubernetes.protobuf", 35)
                     ? ssar_from_protobuf((const unsigned char *)req->body, req->body_len)
                     : json_loadb(req->body, req->body_len, JSON_REJECT_DUPLICATES, &je);
    const json_t *spec = json_object_get(in, "spec");
    const json_t *ra = json_object_get(spec, "resourceAttributes"), *nra = json_object_get(spec, "nonResourceAttributes");
    if (!json_is_object(in) || !json_is_object(spec) || (!json_is_object(ra) && !json_is_object(nra)) ||
        (ra && nra)) {
        json_decref(in);
        shim_status(resp, 400, "BadRequest", NULL,
                    "SelfSubjectAccessReview: spec.resourceAttributes or spec.nonResourceAttributes (one) is required");
        return;
    }
    static const struct auth_user open_user = {.name = "system:anonymous", .uid = "", .groups = {"system:masters"},
                                               .ngroups = 1};
    const struct auth_user *u = s->sec && s->sec->who ? s->sec->who : &open_user;
    struct authz_attrs a = {.resource = ra != NULL};
    a.group = a.version = a.plural = a.sub = a.ns = a.name = a.path = "";
    if (ra) {
        a.verb = jstr(ra, "verb");
        a.group = jstr(ra, "group");
        a.version = jstr(ra, "version");
        a.plural = jstr(ra, "resource");
        a.sub = jstr(ra, "subresource");
        a.ns = jstr(ra, "namespace");
        a.name = jstr(ra, "name");
    } else {
        a.verb = jstr(nra, "verb");
        a.path = jstr(nra, "path");
    }
    bool ok = !s->sec || allowed(s, u, &a);
    json_t *out = json_deep_copy(in);
    json_decref(in);
    if (!out) {
        shim_status(resp, 500, "InternalError", NULL, "out of memory");
        return;
    }
    json_object_set_new(out, "kind", json_string("SelfSubjectAccessReview"));
    json_object_set_new(out, "apiVersion", json_string("authorization.k8s.io/v1"));
    if (!json_is_object(json_object_get(out, "metadata"))) json_object_set_new(out, "metadata", json_object());
    json_object_set_new(out, "status", ok ? json_pack("{s:b, s:s}", "allowed", 1, "reason",
                                                      is_master(u) ? "system:masters" : "allowed by RBAC")
                                          : json_pack("{s:b}", "allowed", 0));
    shim_json(resp, 201, out);
}

json_t *ssrr_from_protobuf(const unsigned char *b, size_t n) {
    if (n < 4 || memcmp(b, "k8s", 4)) return NULL;
    static const char *const spec_names[] = {"namespace"};
    json_t *spec = NULL;
    struct pbf f, g;
    for (const unsigned char *p = b + 4, *end = b + n; pb_next(&p, end, &f);) { /* Unknown{raw(2)} */
        if (f.num != 2 || f.wt != 2) continue;
        for (const unsigned char *q = f.b; pb_next(&q, f.b + f.n, &g);) /* SSRR{spec(2)} */
            if (g.num == 2 && g.wt == 2) {
                json_decref(spec);
                spec = pb_strings(g.b, g.n, spec_names, 1);
            }
    }
    return json_pack("{s:o}", "spec", spec ? spec : json_object());
}

void shim_sec_ssrr(struct shim *s, const struct http_request *req, struct http_response *resp) {
    if (req->method != HTTP_POST) {
        shim_status(resp, 405, "MethodNotAllowed", NULL, "the server does not allow this method on the requested resource");
        return;
    }
    json_t *in = NULL;
    const char *ns = NULL;
    if (!strncmp(req->content_type, "application/vnd.kubernetes.protobuf", 35)) {
        in = ssrr_from_protobuf((const unsigned char *)req->body, req->body_len);
        ns = json_string_value(json_object_get(json_object_get(in, "spec"), "namespace"));
    } else {
        json_error_t je;
        in = json_loadb(req->body, req->body_len, JSON_REJECT_DUPLICATES, &je);
        ns = json_string_value(json_object_get(json_object_get(in, "spec"), "namespace"));
    }
    if (!json_is_object(in)) {
        json_decref(in);
        shim_status(resp, 400, "BadRequest", NULL, "SelfSubjectRulesReview: a JSON or protobuf object is required");
        return;
    }
    static const struct auth_user open_user = {.name = "system:anonymous", .uid = "", .groups = {"system:masters"},
                                               .ngroups = 1};
    const struct auth_user *u = s->sec && s->sec->who ? s->sec->who : &open_user;
    if (s->sec && !is_master(u)) {
        struct authz_attrs probe = {.resource = true, .verb = "get", .group = "", .version = "", .plural = "",
                                    .sub = "", .ns = "", .name = "", .path = ""};
        allowed(s, u, &probe); /* the index, fresh */
    }
    json_t *st = rbac_rules_review(s->sec ? s->sec->rbac : NULL, u, ns ? ns : "");
    json_object_set_new(in, "kind", json_string("SelfSubjectRulesReview"));
    json_object_set_new(in, "apiVersion", json_string("authorization.k8s.io/v1"));
    if (!json_is_object(json_object_get(in, "metadata"))) json_object_set_new(in, "metadata", json_object());
    json_object_set_new(in, "status", st);
    shim_json(resp, 201, in);
}
