/* RBAC (shim_auth.h): the request's attributes, the roles and bindings
 * compiled into an index by subject, and the decision. */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "shim_auth.h"
#include "schema.h"
#include "shim.h"
#include "store.h"

/* A PolicyRule, its lists pointing into the role's JSON (kept alive by the index). */
struct rrule {
    const char **v; /* verbs, groups, resources, names, urls, one after the other */
    int nverbs, ngroups, nres, nnames, nurls;
};

struct rrole {
    const char *ns, *name; /* into obj / the index's copy */
    json_t *obj;           /* the rules array */
    struct rrule *rules;
    int nrules;
};

struct rbind {
    json_t *obj;
    const char *ns;        /* "" for a ClusterRoleBinding */
};

/* What one binding gives one subject: a role's rules, in a namespace or everywhere. */
struct grant {
    const char *ns;        /* "" everywhere (ClusterRoleBinding) */
    const struct rrole *role;
};

struct subj {
    char *key;             /* "u:NAME" or "g:NAME" */
    uint64_t hash;
    struct grant *g;
    int n, cap;
};

struct rbac {
    struct rrole *roles;
    int nroles, caproles;
    struct rbind *binds;
    int nbinds, capbinds;
    char **nss;            /* copies of the namespaces given */
    int nnss, capnss;
    struct subj *subjs;
    int nsubjs;
    int *slots, nslots;
};

/* ---- attributes ---- */

static const char *seg_copy(struct authz_attrs *a, size_t *used, const char *p, size_t n) {
    if (*used + n + 1 > sizeof a->buf) return "";
    char *d = a->buf + *used;
    memcpy(d, p, n);
    d[n] = 0;
    *used += n + 1;
    return d;
}

void authz_attrs_of(const struct http_request *req, struct authz_attrs *a) {
    a->resource = false;
    a->group = a->version = a->plural = a->sub = a->ns = a->name = "";
    a->path = req->path;
    static const char *const lower[] = {[HTTP_GET] = "get",       [HTTP_POST] = "post",  [HTTP_PUT] = "put",
                                        [HTTP_PATCH] = "patch",   [HTTP_DELETE] = "delete", [HTTP_HEAD] = "head",
                                        [HTTP_OPTIONS] = "options", [HTTP_OTHER] = "other"};
    a->verb = req->method <= HTTP_OTHER ? lower[req->method] : "other";
    if (req->method == HTTP_HEAD) a->verb = "get";
    /* the path's segments */
    const char *seg[10];
    size_t len[10];
    int n = 0;
    for (const char *p = req->path; *p == '/' && n < 10;) {
        p++;
        const char *e = strchr(p, '/');
        size_t l = e ? (size_t)(e - p) : strlen(p);
        seg[n] = p, len[n] = l, n++;
        if (!l) return; /* an empty segment: not a resource (404 later) */
        if (!e) break;
        p = e;
    }
    int i;
    if (n >= 3 && len[0] == 3 && !memcmp(seg[0], "api", 3)) i = 2;
    else if (n >= 4 && len[0] == 4 && !memcmp(seg[0], "apis", 4)) i = 3;
    else return;
    size_t used = 0;
    if (i == 3) a->group = seg_copy(a, &used, seg[1], len[1]);
    a->version = seg_copy(a, &used, seg[i - 1], len[i - 1]);
    int left = n - i;
    const char *const *s = seg + i;
    const size_t *l = len + i;
    if (left >= 2 && l[0] == 10 && !memcmp(s[0], "namespaces", 10)) {
        a->ns = seg_copy(a, &used, s[1], l[1]);
        if (left == 2) { /* namespaces/NS: the namespace itself */
            a->plural = "namespaces";
            a->name = a->ns;
        } else if (left == 3 && ((l[2] == 6 && !memcmp(s[2], "status", 6)) || (l[2] == 8 && !memcmp(s[2], "finalize", 8)))) {
            a->plural = "namespaces";
            a->name = a->ns;
            a->sub = seg_copy(a, &used, s[2], l[2]);
        } else {
            a->plural = seg_copy(a, &used, s[2], l[2]);
            if (left >= 4) a->name = seg_copy(a, &used, s[3], l[3]);
            if (left >= 5) a->sub = seg_copy(a, &used, s[4], l[4]);
        }
    } else if (left >= 1) {
        a->plural = seg_copy(a, &used, s[0], l[0]);
        if (left >= 2) a->name = seg_copy(a, &used, s[1], l[1]);
        if (left >= 3) a->sub = seg_copy(a, &used, s[2], l[2]);
    } else {
        return;
    }
    a->resource = true;
    switch (req->method) {
    case HTTP_GET:
    case HTTP_HEAD:
        if (a->name[0]) a->verb = "get";
        else a->verb = http_req_arg_bool(req, "watch") ? "watch" : "list";
        break;
    case HTTP_POST: a->verb = "create"; break;
    case HTTP_PUT: a->verb = "update"; break;
    case HTTP_PATCH: a->verb = "patch"; break;
    case HTTP_DELETE: a->verb = a->name[0] ? "delete" : "deletecollection"; break;
    default: break;
    }
}

/* ---- rules ---- */

static bool has(const char *const *v, int n, const char *s) {
    for (int i = 0; i < n; i++)
        if (!strcmp(v[i], "*") || !strcmp(v[i], s)) return true;
    return false;
}

/* A rule's resources against plural[/sub]: "*", "pods", "pods/status",
 * "*\/status", "pods/\*". A rule naming the resource alone does not cover
 * its subresources. */
static bool res_match(const char *const *v, int n, const char *plural, const char *sub) {
    size_t pl = strlen(plural);
    for (int i = 0; i < n; i++) {
        const char *r = v[i];
        if (!strcmp(r, "*")) return true;
        if (!sub[0]) {
            if (!strcmp(r, plural)) return true;
            continue;
        }
        const char *slash = strchr(r, '/');
        if (!slash) continue;
        bool left = (slash - r == 1 && r[0] == '*') || ((size_t)(slash - r) == pl && !memcmp(r, plural, pl));
        bool right = !strcmp(slash + 1, "*") || !strcmp(slash + 1, sub);
        if (left && right) return true;
    }
    return false;
}

static bool url_match(const char *const *v, int n, const char *path) {
    for (int i = 0; i < n; i++) {
        size_t l = strlen(v[i]);
        if (!strcmp(v[i], "*") || !strcmp(v[i], path)) return true;
        if (l && v[i][l - 1] == '*' && !strncmp(v[i], path, l - 1)) return true;
    }
    return false;
}

static bool rule_allows(const struct rrule *r, const struct authz_attrs *a) {
    const char *const *verbs = r->v, *const *groups = verbs + r->nverbs, *const *res = groups + r->ngroups,
                      *const *names = res + r->nres, *const *urls = names + r->nnames;
    if (!has(verbs, r->nverbs, a->verb)) return false;
    if (!a->resource) return url_match(urls, r->nurls, a->path);
    if (!has(groups, r->ngroups, a->group) || !res_match(res, r->nres, a->plural, a->sub)) return false;
    if (!r->nnames) return true;
    for (int i = 0; i < r->nnames; i++)
        if (a->name[0] && !strcmp(names[i], a->name)) return true;
    return false;
}

/* Compiles a PolicyRule; false for a malformed one (skipped). */
static bool rule_compile(const json_t *j, struct rrule *r) {
    static const char *const keys[] = {"verbs", "apiGroups", "resources", "resourceNames", "nonResourceURLs"};
    int *counts[] = {&r->nverbs, &r->ngroups, &r->nres, &r->nnames, &r->nurls};
    size_t total = 0;
    if (!json_is_object(j)) return false;
    for (int k = 0; k < 5; k++) {
        const json_t *v = json_object_get(j, keys[k]);
        if (v && !json_is_array(v)) return false;
        *counts[k] = v ? (int)json_array_size(v) : 0;
        total += (size_t)*counts[k];
    }
    if (!r->nverbs || total > 4096) return false;
    r->v = malloc((total ? total : 1) * sizeof *r->v);
    if (!r->v) return false;
    size_t at = 0;
    for (int k = 0; k < 5; k++) {
        const json_t *v = json_object_get(j, keys[k]);
        for (int i = 0; i < *counts[k]; i++) {
            const char *s = json_string_value(json_array_get(v, (size_t)i));
            r->v[at++] = s ? s : "\x01"; /* a non-string matches nothing */
        }
    }
    return true;
}

bool rbac_rule_allows(const json_t *rule, const struct authz_attrs *a) {
    struct rrule r = {0};
    if (!rule_compile(rule, &r)) return false;
    bool ok = rule_allows(&r, a);
    free(r.v);
    return ok;
}

/* ---- the index ---- */

struct rbac *rbac_new(void) { return calloc(1, sizeof(struct rbac)); }

void rbac_free(struct rbac *r) {
    if (!r) return;
    for (int i = 0; i < r->nroles; i++) {
        for (int k = 0; k < r->roles[i].nrules; k++) free(r->roles[i].rules[k].v);
        free(r->roles[i].rules);
        json_decref(r->roles[i].obj);
    }
    for (int i = 0; i < r->nbinds; i++) json_decref(r->binds[i].obj);
    for (int i = 0; i < r->nnss; i++) free(r->nss[i]);
    for (int i = 0; i < r->nsubjs; i++) {
        free(r->subjs[i].key);
        free(r->subjs[i].g);
    }
    free(r->roles);
    free(r->binds);
    free(r->nss);
    free(r->subjs);
    free(r->slots);
    free(r);
}

static int grow(void **p, int *cap, int n, size_t size) {
    if (n < *cap) return 0;
    int c = *cap ? 2 * *cap : 16;
    void *q = realloc(*p, (size_t)c * size);
    if (!q) return -ENOMEM;
    *p = q;
    *cap = c;
    return 0;
}

static const char *ns_copy(struct rbac *r, const char *ns) {
    if (!ns[0]) return "";
    for (int i = r->nnss - 1; i >= 0 && i >= r->nnss - 4; i--)
        if (!strcmp(r->nss[i], ns)) return r->nss[i];
    if (grow((void **)&r->nss, &r->capnss, r->nnss, sizeof *r->nss)) return NULL;
    char *c = strdup(ns);
    if (!c) return NULL;
    r->nss[r->nnss++] = c;
    return c;
}

int rbac_add_role(struct rbac *r, const char *ns, const char *name, const json_t *rules) {
    if (!name || grow((void **)&r->roles, &r->caproles, r->nroles, sizeof *r->roles)) return -ENOMEM;
    struct rrole *ro = &r->roles[r->nroles];
    memset(ro, 0, sizeof *ro);
    json_t *rs0 = json_is_array(rules) ? json_incref((json_t *)rules) : json_array();
    ro->obj = json_pack("{s:s, s:o}", "name", name, "rules", rs0);
    if (!ro->obj || !(ro->ns = ns_copy(r, ns))) {
        json_decref(ro->obj);
        return -ENOMEM;
    }
    ro->name = json_string_value(json_object_get(ro->obj, "name"));
    const json_t *rs = json_object_get(ro->obj, "rules");
    size_t n = json_array_size(rs);
    ro->rules = calloc(n ? n : 1, sizeof *ro->rules);
    if (!ro->rules) {
        json_decref(ro->obj);
        return -ENOMEM;
    }
    for (size_t i = 0; i < n; i++)
        if (rule_compile(json_array_get(rs, i), &ro->rules[ro->nrules])) ro->nrules++;
    r->nroles++;
    return 0;
}

int rbac_add_binding(struct rbac *r, const char *ns, const json_t *binding) {
    if (grow((void **)&r->binds, &r->capbinds, r->nbinds, sizeof *r->binds)) return -ENOMEM;
    const char *n = ns_copy(r, ns);
    if (!n) return -ENOMEM;
    r->binds[r->nbinds].obj = json_incref((json_t *)binding);
    r->binds[r->nbinds].ns = n;
    r->nbinds++;
    return 0;
}

static uint64_t fnv(const char *p) {
    uint64_t h = 1469598103934665603ull;
    for (; *p; p++) h = (h ^ (unsigned char)*p) * 1099511628211ull;
    return h;
}

static struct subj *subj_find(const struct rbac *r, const char *key, uint64_t h) {
    if (!r->nslots) return NULL;
    for (int k = (int)(h & (uint64_t)(r->nslots - 1)); r->slots[k]; k = (k + 1) & (r->nslots - 1)) {
        struct subj *s = &r->subjs[r->slots[k] - 1];
        if (s->hash == h && !strcmp(s->key, key)) return s;
    }
    return NULL;
}

static const struct rrole *role_find(const struct rbac *r, const char *ns, const char *name) {
    for (int i = 0; i < r->nroles; i++)
        if (!strcmp(r->roles[i].ns, ns) && !strcmp(r->roles[i].name, name)) return &r->roles[i];
    return NULL;
}

static int grant_add(struct rbac *r, int *capsubjs, const char *key, const char *ns, const struct rrole *ro) {
    uint64_t h = fnv(key);
    struct subj *s = NULL;
    for (int i = 0; i < r->nsubjs; i++) /* the slots are built at the end */
        if (r->subjs[i].hash == h && !strcmp(r->subjs[i].key, key)) s = &r->subjs[i];
    if (!s) {
        if (grow((void **)&r->subjs, capsubjs, r->nsubjs, sizeof *r->subjs)) return -ENOMEM;
        s = &r->subjs[r->nsubjs];
        memset(s, 0, sizeof *s);
        if (!(s->key = strdup(key))) return -ENOMEM;
        s->hash = h;
        r->nsubjs++;
    }
    if (grow((void **)&s->g, &s->cap, s->n, sizeof *s->g)) return -ENOMEM;
    s->g[s->n++] = (struct grant){.ns = ns, .role = ro};
    return 0;
}

int rbac_finish(struct rbac *r) {
    int capsubjs = 0;
    for (int i = 0; i < r->nbinds; i++) {
        const json_t *b = r->binds[i].obj, *ref = json_object_get(b, "roleRef");
        const char *kind = json_string_value(json_object_get(ref, "kind"));
        const char *name = json_string_value(json_object_get(ref, "name"));
        if (!kind || !name) continue;
        const char *ns = r->binds[i].ns;
        const struct rrole *ro = !strcmp(kind, "ClusterRole") ? role_find(r, "", name)
                                 : !strcmp(kind, "Role") && ns[0] ? role_find(r, ns, name)
                                                                  : NULL;
        if (!ro) continue; /* a binding to a role not (yet) there grants nothing */
        const json_t *subs = json_object_get(b, "subjects");
        for (size_t k = 0; k < json_array_size(subs); k++) {
            const json_t *sj = json_array_get(subs, k);
            const char *sk = json_string_value(json_object_get(sj, "kind"));
            const char *sn = json_string_value(json_object_get(sj, "name"));
            const char *sns = json_string_value(json_object_get(sj, "namespace"));
            if (!sk || !sn || strlen(sn) > 1024) continue;
            char key[1200];
            if (!strcmp(sk, "User")) snprintf(key, sizeof key, "u:%s", sn);
            else if (!strcmp(sk, "Group")) snprintf(key, sizeof key, "g:%s", sn);
            else if (!strcmp(sk, "ServiceAccount"))
                snprintf(key, sizeof key, "u:system:serviceaccount:%.64s:%s", sns && sns[0] ? sns : ns, sn);
            else continue;
            if (grant_add(r, &capsubjs, key, ns, ro)) return -ENOMEM;
        }
    }
    int ns = 16;
    while (ns < 2 * (r->nsubjs + 1)) ns *= 2;
    free(r->slots);
    if (!(r->slots = calloc((size_t)ns, sizeof *r->slots))) return -ENOMEM;
    r->nslots = ns;
    for (int i = 0; i < r->nsubjs; i++) {
        int k = (int)(r->subjs[i].hash & (uint64_t)(ns - 1));
        while (r->slots[k]) k = (k + 1) & (ns - 1);
        r->slots[k] = i + 1;
    }
    return 0;
}

static bool subject_allows(const struct rbac *r, const char *prefix, const char *name, const struct authz_attrs *a) {
    char key[1200];
    if (strlen(name) > 1024) return false;
    snprintf(key, sizeof key, "%s%s", prefix, name);
    const struct subj *s = subj_find(r, key, fnv(key));
    if (!s) return false;
    for (int i = 0; i < s->n; i++) {
        const struct grant *g = &s->g[i];
        /* a RoleBinding grants in its namespace only: nothing cluster-wide, no non-resource URLs */
        if (g->ns[0] && (!a->resource || strcmp(g->ns, a->ns))) continue;
        for (int k = 0; k < g->role->nrules; k++)
            if (rule_allows(&g->role->rules[k], a)) return true;
    }
    return false;
}

bool rbac_allows(const struct rbac *r, const struct auth_user *u, const struct authz_attrs *a) {
    for (int i = 0; i < u->ngroups; i++)
        if (!strcmp(u->groups[i], "system:masters")) return true;
    if (!r) return false;
    if (subject_allows(r, "u:", u->name, a)) return true;
    for (int i = 0; i < u->ngroups; i++)
        if (subject_allows(r, "g:", u->groups[i], a)) return true;
    return false;
}

/* ---- loading ---- */

/* What every authenticated user may do whatever the store holds, as
 * kube-apiserver's default system:discovery, system:basic-user and
 * system:public-info-viewer roles give it: read discovery, OpenAPI and
 * health, ask what they may do. */
static int add_defaults(struct rbac *r) {
    json_t *rules = json_pack(
        "[{s:[s], s:[s,s,s,s,s,s,s,s,s,s,s]}, {s:[s], s:[s], s:[s,s]}]", "verbs", "get", "nonResourceURLs", "/api",
        "/api/*", "/apis", "/apis/*", "/openapi", "/openapi/*", "/version", "/version/", "/healthz", "/livez",
        "/readyz", "verbs", "create", "apiGroups", "authorization.k8s.io", "resources", "selfsubjectaccessreviews",
        "selfsubjectrulesreviews");
    json_t *b = json_pack("{s:{s:s, s:s}, s:[{s:s, s:s}]}", "roleRef", "kind", "ClusterRole", "name",
                          "peloton:basic-user", "subjects", "kind", "Group", "name", "system:authenticated");
    int rc = rules && b ? rbac_add_role(r, "", "peloton:basic-user", rules) : -ENOMEM;
    if (!rc) rc = rbac_add_binding(r, "", b);
    json_decref(rules);
    json_decref(b);
    return rc;
}

struct rbac *rbac_load_store(struct store *st) {
    static const char *const keys[] = {"clusterroles.rbac.authorization.k8s.io", "roles.rbac.authorization.k8s.io",
                                       "clusterrolebindings.rbac.authorization.k8s.io",
                                       "rolebindings.rbac.authorization.k8s.io"};
    struct rbac *r = rbac_new();
    if (!r || add_defaults(r)) {
        rbac_free(r);
        return NULL;
    }
    for (int i = 0; i < 4; i++) {
        char *cont = NULL;
        int rc = 0;
        do { /* pages of 500, as the shim reads a kind whole */
            struct store_list l = {0};
            rc = store_list(st, keys[i], "", 500, cont, &l);
            free(cont);
            cont = NULL;
            if (rc) break;
            for (size_t k = 0; !rc && k < json_array_size(l.items); k++) {
                const json_t *obj = json_array_get(l.items, k), *md = json_object_get(obj, "metadata");
                const char *ns = json_string_value(json_object_get(md, "namespace"));
                const char *name = json_string_value(json_object_get(md, "name"));
                rc = i >= 2 ? rbac_add_binding(r, ns ? ns : "", obj)
                            : rbac_add_role(r, ns ? ns : "", name, json_object_get(obj, "rules"));
            }
            cont = l.continue_token;
            l.continue_token = NULL;
            store_list_free(&l);
        } while (!rc && cont);
        free(cont);
        if (rc) {
            fprintf(stderr, "level=error msg=\"rbac: cannot read %s\" rc=%d\n", keys[i], rc);
            rbac_free(r);
            return NULL;
        }
    }
    if (rbac_finish(r)) {
        rbac_free(r);
        return NULL;
    }
    return r;
}

/* ---- validation of the RBAC kinds (kube-apiserver's rules) ---- */

static bool nonempty_strings(const json_t *a) {
    if (!json_is_array(a) || !json_array_size(a)) return false;
    for (size_t i = 0; i < json_array_size(a); i++)
        if (!json_is_string(json_array_get(a, i))) return false;
    return true;
}

int rbac_validate(const char *kind, const json_t *obj, struct schema_result *res) {
    char f[96];
    int rc = 0;
#define ADD(reason, field, ...) rc |= schema_result_add(res, reason, field, __VA_ARGS__)
    bool role = !strcmp(kind, "Role"), crole = !strcmp(kind, "ClusterRole");
    if (role || crole) {
        const json_t *rules = json_object_get(obj, "rules");
        if (rules && !json_is_array(rules)) ADD("FieldValueInvalid", "rules", "must be a list");
        for (size_t i = 0; i < json_array_size(rules) && i < 1000; i++) {
            const json_t *r = json_array_get(rules, i);
            const json_t *res_ = json_object_get(r, "resources"), *urls = json_object_get(r, "nonResourceURLs");
            bool has_res = json_array_size(res_) > 0, has_urls = json_array_size(urls) > 0;
            if (!nonempty_strings(json_object_get(r, "verbs"))) {
                snprintf(f, sizeof f, "rules[%zu].verbs", i);
                ADD("FieldValueRequired", f, "verbs must contain at least one value");
            }
            if (has_urls && (role || has_res)) {
                snprintf(f, sizeof f, "rules[%zu].nonResourceURLs", i);
                ADD("FieldValueInvalid", f, role ? "namespaced rules cannot apply to non-resource URLs"
                                                 : "rules cannot apply to both regular resources and non-resource URLs");
            } else if (!has_urls && !has_res) {
                snprintf(f, sizeof f, "rules[%zu].resources", i);
                ADD("FieldValueRequired", f, "resource rules must supply at least one resource");
            } else if (has_res && !json_array_size(json_object_get(r, "apiGroups"))) {
                snprintf(f, sizeof f, "rules[%zu].apiGroups", i);
                ADD("FieldValueRequired", f, "resource rules must supply at least one api group");
            }
        }
        return rc ? -ENOMEM : 0;
    }
    bool rb = !strcmp(kind, "RoleBinding"), crb = !strcmp(kind, "ClusterRoleBinding");
    if (!rb && !crb) return 0;
    const json_t *ref = json_object_get(obj, "roleRef");
    const char *rk = json_string_value(json_object_get(ref, "kind"));
    const char *rn = json_string_value(json_object_get(ref, "name"));
    const char *rg = json_string_value(json_object_get(ref, "apiGroup"));
    if (!rk || (strcmp(rk, "ClusterRole") && (crb || strcmp(rk, "Role"))))
        ADD("FieldValueNotSupported", "roleRef.kind", "supported values: %s", crb ? "\"ClusterRole\"" : "\"Role\", \"ClusterRole\"");
    if (!rn || !rn[0]) ADD("FieldValueRequired", "roleRef.name", "Required value");
    if (!rg || strcmp(rg, "rbac.authorization.k8s.io"))
        ADD("FieldValueNotSupported", "roleRef.apiGroup", "supported values: \"rbac.authorization.k8s.io\"");
    const json_t *subs = json_object_get(obj, "subjects");
    for (size_t i = 0; i < json_array_size(subs) && i < 1000; i++) {
        const json_t *s = json_array_get(subs, i);
        const char *k = json_string_value(json_object_get(s, "kind"));
        const char *n = json_string_value(json_object_get(s, "name"));
        const char *ns = json_string_value(json_object_get(s, "namespace"));
        if (!k || (strcmp(k, "User") && strcmp(k, "Group") && strcmp(k, "ServiceAccount"))) {
            snprintf(f, sizeof f, "subjects[%zu].kind", i);
            ADD("FieldValueNotSupported", f, "supported values: \"ServiceAccount\", \"User\", \"Group\"");
        }
        if (!n || !n[0]) {
            snprintf(f, sizeof f, "subjects[%zu].name", i);
            ADD("FieldValueRequired", f, "Required value");
        }
        if (crb && k && !strcmp(k, "ServiceAccount") && (!ns || !ns[0])) {
            snprintf(f, sizeof f, "subjects[%zu].namespace", i);
            ADD("FieldValueRequired", f, "Required value");
        }
    }
#undef ADD
    return rc ? -ENOMEM : 0;
}

bool shim_rbac_refuse_update(const struct shim_resource *r, const json_t *next, const json_t *cur, const char *name,
                             struct http_response *resp) {
    if (!cur || strcmp(r->group, "rbac.authorization.k8s.io") || !strstr(r->kind, "Binding")) return false;
    const json_t *was = json_object_get(cur, "roleRef"), *now = json_object_get(next, "roleRef");
    if (!was || json_equal((json_t *)was, (json_t *)now)) return false;
    char *v = json_dumps(now ? now : json_null(), JSON_COMPACT | JSON_SORT_KEYS);
    json_t *d = json_pack("{s:s, s:s, s:s, s:[{s:s, s:s, s:s}]}", "name", name, "group", r->group, "kind", r->kind,
                          "causes", "reason", "FieldValueInvalid", "message", "cannot change roleRef", "field",
                          "roleRef");
    shim_status(resp, 422, "Invalid", d, "%s.%s \"%s\" is invalid: roleRef: Invalid value: %.300s: cannot change roleRef",
                r->kind, r->group, name, v ? v : "");
    free(v);
    return true;
}

/* Appends the rules of subject key's grants that apply in ns. */
static void rules_of(const struct rbac *r, const char *prefix, const char *name, const char *ns, json_t *res,
                     json_t *nonres) {
    char key[1200];
    if (strlen(name) > 1024) return;
    snprintf(key, sizeof key, "%s%s", prefix, name);
    const struct subj *s = subj_find(r, key, fnv(key));
    for (int i = 0; s && i < s->n; i++) {
        const struct grant *g = &s->g[i];
        if (g->ns[0] && strcmp(g->ns, ns)) continue;
        const json_t *rules = json_object_get(g->role->obj, "rules");
        for (size_t k = 0; k < json_array_size(rules); k++) {
            const json_t *rule = json_array_get(rules, k);
            if (json_array_size(json_object_get(rule, "nonResourceURLs"))) {
                if (!g->ns[0])
                    json_array_append_new(nonres, json_pack("{s:O, s:O}", "verbs", json_object_get(rule, "verbs"),
                                                            "nonResourceURLs",
                                                            json_object_get(rule, "nonResourceURLs")));
            } else {
                json_t *o = json_object();
                static const char *const keys[] = {"verbs", "apiGroups", "resources", "resourceNames"};
                for (int j = 0; j < 4; j++)
                    if (json_object_get(rule, keys[j])) json_object_set(o, keys[j], json_object_get(rule, keys[j]));
                json_array_append_new(res, o);
            }
        }
    }
}

json_t *rbac_rules_review(const struct rbac *r, const struct auth_user *u, const char *ns) {
    json_t *res = json_array(), *nonres = json_array();
    bool master = false;
    for (int i = 0; i < u->ngroups; i++) master |= !strcmp(u->groups[i], "system:masters");
    if (master) {
        json_array_append_new(res, json_pack("{s:[s], s:[s], s:[s]}", "verbs", "*", "apiGroups", "*", "resources",
                                             "*"));
        json_array_append_new(nonres, json_pack("{s:[s], s:[s]}", "verbs", "*", "nonResourceURLs", "*"));
    }
    if (r) {
        rules_of(r, "u:", u->name, ns, res, nonres);
        for (int i = 0; i < u->ngroups; i++) rules_of(r, "g:", u->groups[i], ns, res, nonres);
    }
    return json_pack("{s:o, s:o, s:b}", "resourceRules", res, "nonResourceRules", nonres, "incomplete", 0);
}
