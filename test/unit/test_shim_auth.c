/* The token file parser, the request attributes and the RBAC matcher (shim_auth.h). */
#include <errno.h>
#include <string.h>

#include "schema.h"
#include "shim_auth.h"
#include "test.h"

static int parse(const char *text, struct auth_tokens **t, char *err) {
    return auth_tokens_parse(text, strlen(text), t, err, 256);
}

static const struct auth_user *find(const struct auth_tokens *t, const char *tok) {
    return auth_tokens_find(t, tok, strlen(tok));
}

TEST(auth_tokens_csv_users_uids_and_groups) {
    struct auth_tokens *t;
    char err[256] = "";
    CHECK(parse("# a comment\n\n"
                "tok1,alice,u-1,\"system:masters\"\r\n"
                "  tok2, bob ,u-2,\"team-a, developers,\"\n"
                "tok3,carol,u-3,ops\n"
                "tok4,dave,u-4\n"
                "\"tok,5\",eve,u-5,\"a \"\"quoted\"\" group\"\n",
                &t, err) == 0);
    CHECK_I64(auth_tokens_count(t), 5);
    const struct auth_user *u = find(t, "tok1");
    CHECK(u && !strcmp(u->name, "alice") && !strcmp(u->uid, "u-1") && u->ngroups == 2);
    CHECK_STR(u->groups[0], "system:masters");
    CHECK_STR(u->groups[1], "system:authenticated");
    u = find(t, "tok2");
    CHECK(u && u->ngroups == 3); /* blanks around groups dropped, the empty one too */
    CHECK_STR(u->name, "bob "); /* only leading blanks are trimmed, as encoding/csv does */
    CHECK_STR(u->groups[0], "team-a");
    CHECK_STR(u->groups[1], "developers");
    CHECK(find(t, "tok3") && find(t, "tok3")->ngroups == 2);
    CHECK(find(t, "tok4") && find(t, "tok4")->ngroups == 1);
    u = find(t, "tok,5");
    CHECK(u && !strcmp(u->groups[0], "a \"quoted\" group"));
    CHECK(!find(t, "tok") && !find(t, "tok11") && !find(t, "") && !find(t, "TOK1"));
    auth_tokens_free(t);
}

TEST(auth_tokens_single_token_file_is_admin_in_masters) {
    struct auth_tokens *t;
    char err[256];
    CHECK(parse("  s3cret-token\n", &t, err) == 0);
    const struct auth_user *u = find(t, "s3cret-token");
    CHECK(u && !strcmp(u->name, AUTH_SINGLE_USER) && !strcmp(u->groups[0], "system:masters"));
    auth_tokens_free(t);
    CHECK(parse("two words\n", &t, err) == -EINVAL);
}

TEST(auth_tokens_bad_files_are_refused_with_the_line) {
    struct auth_tokens *t = NULL;
    char err[256];
    static const struct {
        const char *text, *want;
    } bad[] = {
        {"tok1,alice\n", "line 1: want token,user,uid"},
        {"a,b,c\n,bob,u\n", "line 2: an empty token"},
        {"a,,u\n", "line 1: an empty user name"},
        {"a,b,c\na,d,e\n", "line 2: a token given twice"},
        {"a,b,c,\"g1,g2\n", "line 1: unterminated quote"},
        {"a,b,c,\"g\"x\n", "line 1: text after a closing quote"},
        {"a,b\"c,d\n", "line 1: a quote inside an unquoted field"},
        {"a,b,c,d,e,f,g,h,i\n", "line 1: too many fields"},
        {"\n# only comments\n", "no token"},
        {"", "no token"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        err[0] = 0;
        CHECK(parse(bad[i].text, &t, err) == -EINVAL && t == NULL);
        CHECK_HAS(err, bad[i].want);
    }
    char groups[2048] = "a,b,c,\"";
    for (int i = 0; i <= AUTH_MAX_GROUPS; i++) strcat(groups, "g,");
    strcat(groups, "\"\n");
    CHECK(parse(groups, &t, err) == -EINVAL);
    CHECK_HAS(err, "more than 32 groups");
    CHECK(auth_tokens_parse("a,b,c\0d,e,f\n", 12, &t, err, sizeof err) == -EINVAL);
    CHECK_HAS(err, "NUL");
}

static struct authz_attrs res(const char *verb, const char *group, const char *plural, const char *sub,
                              const char *ns, const char *name) {
    struct authz_attrs a = {.resource = true, .verb = verb, .group = group, .version = "v1", .plural = plural,
                            .sub = sub, .ns = ns, .name = name, .path = ""};
    return a;
}

static bool rule(const char *json, struct authz_attrs a) {
    json_t *r = json_loads(json, 0, NULL);
    bool ok = rbac_rule_allows(r, &a);
    json_decref(r);
    return ok;
}

TEST(rbac_rule_wildcards_names_subresources_urls) {
    struct authz_attrs get_pod = res("get", "", "pods", "", "ns", "p1");
    CHECK(rule("{\"verbs\":[\"get\"],\"apiGroups\":[\"\"],\"resources\":[\"pods\"]}", get_pod));
    CHECK(!rule("{\"verbs\":[\"list\"],\"apiGroups\":[\"\"],\"resources\":[\"pods\"]}", get_pod));
    CHECK(!rule("{\"verbs\":[\"get\"],\"apiGroups\":[\"apps\"],\"resources\":[\"pods\"]}", get_pod));
    CHECK(rule("{\"verbs\":[\"*\"],\"apiGroups\":[\"*\"],\"resources\":[\"*\"]}", get_pod));
    /* resourceNames: only those, and never a request without a name (list, create) */
    CHECK(rule("{\"verbs\":[\"get\"],\"apiGroups\":[\"\"],\"resources\":[\"pods\"],\"resourceNames\":[\"p0\",\"p1\"]}",
               get_pod));
    CHECK(!rule("{\"verbs\":[\"get\"],\"apiGroups\":[\"\"],\"resources\":[\"pods\"],\"resourceNames\":[\"p2\"]}",
                get_pod));
    CHECK(!rule("{\"verbs\":[\"list\"],\"apiGroups\":[\"\"],\"resources\":[\"pods\"],\"resourceNames\":[\"p1\"]}",
                res("list", "", "pods", "", "ns", "")));
    /* subresources: named, or by a wildcard on either side; the resource alone does not cover them */
    struct authz_attrs status = res("update", "", "pods", "status", "ns", "p1");
    CHECK(!rule("{\"verbs\":[\"update\"],\"apiGroups\":[\"\"],\"resources\":[\"pods\"]}", status));
    CHECK(rule("{\"verbs\":[\"update\"],\"apiGroups\":[\"\"],\"resources\":[\"pods/status\"]}", status));
    CHECK(rule("{\"verbs\":[\"update\"],\"apiGroups\":[\"\"],\"resources\":[\"*/status\"]}", status));
    CHECK(rule("{\"verbs\":[\"update\"],\"apiGroups\":[\"\"],\"resources\":[\"pods/*\"]}", status));
    CHECK(!rule("{\"verbs\":[\"update\"],\"apiGroups\":[\"\"],\"resources\":[\"pods/log\"]}", status));
    CHECK(!rule("{\"verbs\":[\"update\"],\"apiGroups\":[\"\"],\"resources\":[\"pods/status\"]}",
                res("update", "", "pods", "", "ns", "p1")));
    /* non-resource URLs: exact or a prefix ending in *, never from a resource rule */
    struct authz_attrs metrics = {.resource = false, .verb = "get", .path = "/metrics"};
    metrics.group = metrics.version = metrics.plural = metrics.sub = metrics.ns = metrics.name = "";
    CHECK(rule("{\"verbs\":[\"get\"],\"nonResourceURLs\":[\"/metrics\"]}", metrics));
    CHECK(rule("{\"verbs\":[\"get\"],\"nonResourceURLs\":[\"/met*\"]}", metrics));
    CHECK(!rule("{\"verbs\":[\"get\"],\"nonResourceURLs\":[\"/metrics/x\"]}", metrics));
    CHECK(!rule("{\"verbs\":[\"get\"],\"apiGroups\":[\"*\"],\"resources\":[\"*\"]}", metrics));
    CHECK(!rule("{\"verbs\":[\"get\"],\"nonResourceURLs\":[\"*\"]}", get_pod));
    /* malformed rules match nothing */
    CHECK(!rule("{\"verbs\":\"get\",\"apiGroups\":[\"\"],\"resources\":[\"pods\"]}", get_pod));
    CHECK(!rule("{\"apiGroups\":[\"\"],\"resources\":[\"pods\"]}", get_pod));
    CHECK(!rule("{\"verbs\":[1],\"apiGroups\":[\"\"],\"resources\":[\"pods\"]}", get_pod));
}

static json_t *binding(const char *role_kind, const char *role, const char *subj_kind, const char *subj) {
    return json_pack("{s:{s:s, s:s}, s:[{s:s, s:s}]}", "roleRef", "kind", role_kind, "name", role, "subjects", "kind",
                     subj_kind, "name", subj);
}

TEST(rbac_index_bindings_by_user_and_group_in_their_scope) {
    struct rbac *r = rbac_new();
    json_t *pods = json_loads("[{\"verbs\":[\"create\",\"list\"],\"apiGroups\":[\"\"],\"resources\":[\"pods\"]}]", 0, NULL);
    json_t *pools = json_loads("[{\"verbs\":[\"get\"],\"apiGroups\":[\"peloton.io\"],\"resources\":[\"resourcepools\"]},"
                               "{\"verbs\":[\"get\"],\"nonResourceURLs\":[\"/metrics\"]}]", 0, NULL);
    CHECK(rbac_add_role(r, "team-a", "dev", pods) == 0);
    CHECK(rbac_add_role(r, "", "reader", pools) == 0);
    json_t *b1 = binding("Role", "dev", "Group", "team-a"), *b2 = binding("ClusterRole", "reader", "User", "bob"),
           *b3 = binding("ClusterRole", "reader", "Group", "ns-readers"), *b4 = binding("Role", "missing", "User", "bob");
    CHECK(rbac_add_binding(r, "team-a", b1) == 0);
    CHECK(rbac_add_binding(r, "", b2) == 0);
    CHECK(rbac_add_binding(r, "team-b", b3) == 0); /* a ClusterRole by RoleBinding: in team-b only */
    CHECK(rbac_add_binding(r, "team-a", b4) == 0);
    CHECK(rbac_finish(r) == 0);
    struct auth_user bob = {.name = "bob", .uid = "", .groups = {"team-a", "system:authenticated"}, .ngroups = 2};
    struct auth_user eve = {.name = "eve", .uid = "", .groups = {"ns-readers"}, .ngroups = 1};
    struct auth_user root = {.name = "root", .uid = "", .groups = {"system:masters"}, .ngroups = 1};
    struct authz_attrs a = res("create", "", "pods", "", "team-a", "");
    CHECK(rbac_allows(r, &bob, &a));
    a = res("create", "", "pods", "", "team-b", "");
    CHECK(!rbac_allows(r, &bob, &a));
    a = res("list", "", "pods", "", "", ""); /* all namespaces: a RoleBinding does not reach */
    CHECK(!rbac_allows(r, &bob, &a));
    a = res("get", "peloton.io", "resourcepools", "", "", "p");
    CHECK(rbac_allows(r, &bob, &a) && !rbac_allows(r, &eve, &a) && rbac_allows(r, &root, &a));
    a = res("get", "peloton.io", "resourcepools", "", "team-b", "p");
    CHECK(rbac_allows(r, &eve, &a));
    struct authz_attrs m = {.resource = false, .verb = "get", .path = "/metrics"};
    m.group = m.version = m.plural = m.sub = m.ns = m.name = "";
    CHECK(rbac_allows(r, &bob, &m) && !rbac_allows(r, &eve, &m)); /* URLs come through cluster bindings only */
    a = res("delete", "", "nodes", "", "", "n1");
    CHECK(!rbac_allows(r, &bob, &a) && rbac_allows(r, &root, &a) && rbac_allows(NULL, &root, &a));
    CHECK(!rbac_allows(NULL, &bob, &a));
    json_decref(pods);
    json_decref(pools);
    json_decref(b1);
    json_decref(b2);
    json_decref(b3);
    json_decref(b4);
    rbac_free(r);
}

static struct authz_attrs attrs_of(enum http_method m, const char *path, const char *watch) {
    const char *keys[] = {"watch"}, *vals[] = {watch};
    struct http_request req = {.method = m, .path = path, .nargs = watch ? 1 : 0, .arg_keys = keys,
                               .arg_values = vals};
    struct authz_attrs a;
    authz_attrs_of(&req, &a);
    return a;
}

TEST(authz_attrs_from_method_and_path) {
    struct authz_attrs a = attrs_of(HTTP_GET, "/api/v1/namespaces/ns1/pods", NULL);
    CHECK(a.resource && !strcmp(a.verb, "list") && !strcmp(a.plural, "pods") && !strcmp(a.ns, "ns1") && !a.name[0]);
    a = attrs_of(HTTP_GET, "/api/v1/pods", "true");
    CHECK(!strcmp(a.verb, "watch") && !a.ns[0]);
    a = attrs_of(HTTP_PUT, "/api/v1/namespaces/ns1/pods/p/status", NULL);
    CHECK(!strcmp(a.verb, "update") && !strcmp(a.name, "p") && !strcmp(a.sub, "status"));
    a = attrs_of(HTTP_DELETE, "/apis/peloton.io/v1alpha1/resourcepools", NULL);
    CHECK(!strcmp(a.verb, "deletecollection") && !strcmp(a.group, "peloton.io") && !strcmp(a.version, "v1alpha1"));
    a = attrs_of(HTTP_PATCH, "/apis/peloton.io/v1alpha1/resourcepools/root", NULL);
    CHECK(!strcmp(a.verb, "patch") && !strcmp(a.name, "root") && !a.ns[0]);
    a = attrs_of(HTTP_GET, "/api/v1/namespaces/ns1", NULL); /* the namespace itself */
    CHECK(!strcmp(a.verb, "get") && !strcmp(a.plural, "namespaces") && !strcmp(a.name, "ns1") && !strcmp(a.ns, "ns1"));
    a = attrs_of(HTTP_POST, "/api/v1/namespaces", NULL);
    CHECK(!strcmp(a.verb, "create") && !strcmp(a.plural, "namespaces"));
    a = attrs_of(HTTP_GET, "/metrics", NULL);
    CHECK(!a.resource && !strcmp(a.verb, "get") && !strcmp(a.path, "/metrics"));
    a = attrs_of(HTTP_GET, "/apis/peloton.io/v1alpha1", NULL); /* discovery: a non-resource URL */
    CHECK(!a.resource);
    a = attrs_of(HTTP_POST, "/openapi/v2", NULL);
    CHECK(!a.resource && !strcmp(a.verb, "post"));
    a = attrs_of(HTTP_GET, "/api//v1/pods", NULL);
    CHECK(!a.resource);
}

TEST(ssar_protobuf_to_json) {
    /* k8s\0, Unknown{raw(2): SSAR{spec(2): {resourceAttributes(1): {namespace "a", verb "get", resource "pods"}}}} */
    static const unsigned char ra[] = {0x0a, 1, 'a', 0x12, 3, 'g', 'e', 't', 0x2a, 4, 'p', 'o', 'd', 's'};
    unsigned char spec[2 + sizeof ra], ssar[2 + sizeof spec], msg[4 + 2 + sizeof ssar];
    spec[0] = 0x0a, spec[1] = sizeof ra;
    memcpy(spec + 2, ra, sizeof ra);
    ssar[0] = 0x12, ssar[1] = sizeof spec;
    memcpy(ssar + 2, spec, sizeof spec);
    memcpy(msg, "k8s", 4);
    msg[4] = 0x12, msg[5] = sizeof ssar;
    memcpy(msg + 6, ssar, sizeof ssar);
    json_t *j = ssar_from_protobuf(msg, sizeof msg);
    json_t *attrs = json_object_get(json_object_get(j, "spec"), "resourceAttributes");
    CHECK_STR(json_string_value(json_object_get(attrs, "verb")), "get");
    CHECK_STR(json_string_value(json_object_get(attrs, "resource")), "pods");
    CHECK_STR(json_string_value(json_object_get(attrs, "namespace")), "a");
    json_decref(j);
    CHECK(ssar_from_protobuf((const unsigned char *)"k8s", 3) == NULL);
    msg[5] = 0x7f; /* a length past the end */
    j = ssar_from_protobuf(msg, sizeof msg);
    CHECK(j == NULL);
}

static int invalid(const char *kind, const char *json, char *why, size_t n) {
    json_t *o = json_loads(json, 0, NULL);
    struct schema_result res = {0};
    CHECK(rbac_validate(kind, o, &res) == 0);
    int count = (int)res.n;
    schema_result_format(&res, why, n);
    schema_result_free(&res);
    json_decref(o);
    return count;
}

TEST(rbac_validate_roles_and_bindings) {
    char why[512];
    CHECK_I64(invalid("Role", "{\"rules\":[{\"verbs\":[\"get\"],\"apiGroups\":[\"\"],\"resources\":[\"pods\"]}]}", why,
                      sizeof why), 0);
    CHECK_I64(invalid("Role", "{\"rules\":[{\"apiGroups\":[\"\"],\"resources\":[\"pods\"]}]}", why, sizeof why), 1);
    CHECK_HAS(why, "rules[0].verbs: verbs must contain at least one value");
    CHECK_I64(invalid("Role", "{\"rules\":[{\"verbs\":[\"get\"],\"nonResourceURLs\":[\"/metrics\"]}]}", why, sizeof why), 1);
    CHECK_HAS(why, "namespaced rules cannot apply to non-resource URLs");
    CHECK_I64(invalid("ClusterRole", "{\"rules\":[{\"verbs\":[\"get\"],\"nonResourceURLs\":[\"/metrics\"]}]}", why,
                      sizeof why), 0);
    CHECK_I64(invalid("ClusterRole", "{\"rules\":[{\"verbs\":[\"get\"],\"resources\":[\"pods\"]}]}", why, sizeof why), 1);
    CHECK_HAS(why, "rules[0].apiGroups: resource rules must supply at least one api group");
    const char *ok = "{\"roleRef\":{\"apiGroup\":\"rbac.authorization.k8s.io\",\"kind\":\"Role\",\"name\":\"r\"},"
                     "\"subjects\":[{\"kind\":\"Group\",\"name\":\"g\"}]}";
    CHECK_I64(invalid("RoleBinding", ok, why, sizeof why), 0);
    CHECK_I64(invalid("ClusterRoleBinding", ok, why, sizeof why), 1); /* a Role from a ClusterRoleBinding */
    CHECK_HAS(why, "roleRef.kind");
    CHECK_I64(invalid("RoleBinding", "{\"roleRef\":{\"kind\":\"Role\"},\"subjects\":[{\"kind\":\"Robot\"}]}", why,
                      sizeof why), 4);
    CHECK_HAS(why, "subjects[0].kind");
    CHECK_I64(invalid("ConfigMap", "{}", why, sizeof why), 0);
}

TEST(ssrr_protobuf_to_json) {
    /* k8s\0, Unknown{raw(2): SSRR{spec(2): {namespace(1): "abc"}}} */
    static const unsigned char msg[] = {'k', '8', 's', 0, 0x12, 7, 0x12, 5, 0x0a, 3, 'a', 'b', 'c'};
    json_t *j = ssrr_from_protobuf(msg, sizeof msg);
    CHECK_STR(json_string_value(json_object_get(json_object_get(j, "spec"), "namespace")), "abc");
    json_decref(j);
    j = ssrr_from_protobuf(msg, 9); /* cut inside: no spec read, an empty one */
    CHECK(j && json_object_size(json_object_get(j, "spec")) == 0);
    json_decref(j);
    CHECK(ssrr_from_protobuf((const unsigned char *)"{}", 2) == NULL);
}
