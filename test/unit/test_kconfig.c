/* kubeconfig parsing (src/kclient/kconfig.c): files written under a mkdtemp
 * directory, removed at the end of each test. */
#include <errno.h>
#include <stdlib.h>
#include <unistd.h>

#include "kclient.h"
#include "test.h"

struct tdir {
    char path[64];
    char files[8][128];
    int n;
};

static int tdir_new(struct tdir *d) {
    memset(d, 0, sizeof *d);
    snprintf(d->path, sizeof d->path, "/tmp/kconfig-test-XXXXXX");
    return mkdtemp(d->path) ? 0 : -errno;
}

/* Writes name (relative to the directory) and returns its full path. */
static const char *tdir_write(struct tdir *d, const char *name, const char *text) {
    if (d->n == 8) return NULL;
    char full[sizeof d->files[0]];
    snprintf(full, sizeof full, "%s/%s", d->path, name);
    char *p = d->files[d->n++];
    memcpy(p, full, sizeof full);
    FILE *f = fopen(p, "w");
    if (!f) return NULL;
    fputs(text, f);
    fclose(f);
    return p;
}

static void tdir_free(struct tdir *d) {
    for (int i = 0; i < d->n; i++) unlink(d->files[i]);
    rmdir(d->path);
}

/* "-----BEGIN CERTIFICATE-----\nCA\n-----END CERTIFICATE-----\n" and friends, base64 */
#define CA_PEM "-----BEGIN CERTIFICATE-----\nCA\n-----END CERTIFICATE-----\n"
#define CA_B64 "LS0tLS1CRUdJTiBDRVJUSUZJQ0FURS0tLS0tCkNBCi0tLS0tRU5EIENFUlRJRklDQVRFLS0tLS0K"
#define KEY_PEM "-----BEGIN PRIVATE KEY-----\nK\n-----END PRIVATE KEY-----\n"
#define KEY_B64 "LS0tLS1CRUdJTiBQUklWQVRFIEtFWS0tLS0tCksKLS0tLS1FTkQgUFJJVkFURSBLRVktLS0tLQo="

static const char *const KUBECONFIG =
    "apiVersion: v1\n"
    "kind: Config\n"
    "clusters:\n"
    "- name: local\n"
    "  cluster:\n"
    "    server: http://127.0.0.1:6080/\n"
    "- name: secure\n"
    "  cluster:\n"
    "    server: https://10.0.0.1:6443\n"
    "    certificate-authority-data: " CA_B64 "\n"
    "- name: files\n"
    "  cluster:\n"
    "    server: https://files.example:6443\n"
    "    certificate-authority: certs/ca.crt\n"
    "    insecure-skip-tls-verify: true\n"
    "users:\n"
    "- name: tok\n"
    "  user:\n"
    "    token: abc123\n"
    "- name: certs\n"
    "  user:\n"
    "    client-certificate-data: " CA_B64 "\n"
    "    client-key-data: " KEY_B64 "\n"
    "- name: tokfile\n"
    "  user:\n"
    "    tokenFile: token.txt\n"
    "    client-certificate: /abs/client.crt\n"
    "    client-key: keys/client.key\n"
    "- name: plugin\n"
    "  user:\n"
    "    exec: {command: aws}\n"
    "contexts:\n"
    "- name: dev\n"
    "  context: {cluster: local, user: tok}\n"
    "- name: prod\n"
    "  context:\n"
    "    cluster: secure\n"
    "    user: certs\n"
    "    namespace: batch\n"
    "- name: filectx\n"
    "  context: {cluster: files, user: tokfile, namespace: team-a}\n"
    "- name: anon\n"
    "  context: {cluster: local}\n"
    "- name: ghost\n"
    "  context: {cluster: nowhere, user: tok}\n"
    "- name: nouser\n"
    "  context: {cluster: local, user: nobody}\n"
    "- name: exec\n"
    "  context: {cluster: local, user: plugin}\n"
    "current-context: dev\n";

TEST(kconfig_current_context) {
    struct tdir d;
    REQUIRE(tdir_new(&d) == 0);
    const char *p = tdir_write(&d, "config", KUBECONFIG);
    struct kc_config c;
    char err[256] = "";
    CHECK_I64(kc_config_load(p, NULL, &c, err, sizeof err), 0);
    CHECK_STR(c.server, "http://127.0.0.1:6080"); /* trailing slash dropped */
    CHECK_STR(c.token, "abc123");
    CHECK_STR(c.namespace, "default");
    CHECK(c.ca_file == NULL && c.ca_data == NULL && c.cert_data == NULL && !c.insecure);
    kc_config_free(&c);
    kc_config_free(&c); /* idempotent on a freed config */
    tdir_free(&d);
}

TEST(kconfig_named_context_data_fields) {
    struct tdir d;
    REQUIRE(tdir_new(&d) == 0);
    const char *p = tdir_write(&d, "config", KUBECONFIG);
    struct kc_config c;
    char err[256] = "";
    REQUIRE(kc_config_load(p, "prod", &c, err, sizeof err) == 0);
    CHECK_STR(c.server, "https://10.0.0.1:6443");
    CHECK_STR(c.ca_data, CA_PEM);
    CHECK_STR(c.cert_data, CA_PEM);
    CHECK_STR(c.key_data, KEY_PEM);
    CHECK(c.ca_file == NULL && c.cert_file == NULL && c.key_file == NULL && c.token == NULL);
    CHECK_STR(c.namespace, "batch");
    kc_config_free(&c);
    tdir_free(&d);
}

TEST(kconfig_token_file_and_relative_paths) {
    struct tdir d;
    REQUIRE(tdir_new(&d) == 0);
    const char *p = tdir_write(&d, "config", KUBECONFIG);
    tdir_write(&d, "token.txt", "s3cret-token\n\n");
    struct kc_config c;
    char err[256] = "", want[160];
    REQUIRE(kc_config_load(p, "filectx", &c, err, sizeof err) == 0);
    CHECK_STR(c.token, "s3cret-token"); /* trailing newlines trimmed */
    snprintf(want, sizeof want, "%s/certs/ca.crt", d.path);
    CHECK_STR(c.ca_file, want);
    CHECK_STR(c.cert_file, "/abs/client.crt");
    snprintf(want, sizeof want, "%s/keys/client.key", d.path);
    CHECK_STR(c.key_file, want);
    CHECK(c.insecure);
    CHECK_STR(c.namespace, "team-a");
    kc_config_free(&c);
    tdir_free(&d);
}

TEST(kconfig_missing_token_file) {
    struct tdir d;
    REQUIRE(tdir_new(&d) == 0);
    const char *p = tdir_write(&d, "config", KUBECONFIG);
    struct kc_config c;
    char err[256] = "";
    CHECK_I64(kc_config_load(p, "filectx", &c, err, sizeof err), -ENOENT);
    CHECK_HAS(err, "token.txt");
    CHECK(c.server == NULL); /* nothing left to free */
    tdir_free(&d);
}

TEST(kconfig_context_errors) {
    struct tdir d;
    REQUIRE(tdir_new(&d) == 0);
    const char *p = tdir_write(&d, "config", KUBECONFIG);
    struct kc_config c;
    char err[256] = "";
    CHECK_I64(kc_config_load(p, "staging", &c, err, sizeof err), -ENOENT);
    CHECK_HAS(err, "context \"staging\" not found");
    CHECK_I64(kc_config_load(p, "ghost", &c, err, sizeof err), -ENOENT);
    CHECK_HAS(err, "cluster \"nowhere\"");
    CHECK_I64(kc_config_load(p, "nouser", &c, err, sizeof err), -ENOENT);
    CHECK_HAS(err, "user \"nobody\"");
    CHECK_I64(kc_config_load(p, "exec", &c, err, sizeof err), -ENOTSUP);
    CHECK_HAS(err, "exec");
    /* a context without a user: no credentials, fine */
    CHECK_I64(kc_config_load(p, "anon", &c, err, sizeof err), 0);
    CHECK(c.token == NULL);
    kc_config_free(&c);
    /* no current-context */
    const char *q = tdir_write(&d, "nocur",
                               "clusters: [{name: a, cluster: {server: 'http://x'}}]\n"
                               "contexts: [{name: a, context: {cluster: a}}]\n");
    CHECK_I64(kc_config_load(q, NULL, &c, err, sizeof err), -ENOENT);
    CHECK_HAS(err, "current-context");
    CHECK_I64(kc_config_load(q, "a", &c, err, sizeof err), 0);
    CHECK_STR(c.server, "http://x");
    kc_config_free(&c);
    tdir_free(&d);
}

TEST(kconfig_malformed_inputs) {
    struct tdir d;
    REQUIRE(tdir_new(&d) == 0);
    struct kc_config c;
    char err[256] = "";
    const char *bad[] = {
        "clusters: [\n  - name: a\n  cluster: {server: x\n",             /* broken YAML */
        "- just\n- a\n- list\n",                                           /* not a mapping */
        "",                                                                /* empty */
        "current-context: a\ncontexts: 7\nclusters: {}\n",                /* wrong shapes */
        "current-context: a\ncontexts: [{name: a, context: {cluster: a}}]\n"
        "clusters: [{name: a, cluster: {server: 'ftp://x'}}]\n",           /* not http(s) */
        "current-context: a\ncontexts: [{name: a, context: {cluster: a}}]\n"
        "clusters: [{name: a, cluster: {server: 'https://x', certificate-authority-data: '!!notb64'}}]\n",
        "current-context: a\ncontexts: [{name: a, context: {cluster: a}}]\n"
        "clusters: [{name: a, cluster: {}}]\n",                            /* no server */
        "current-context: a\ncontexts: [{name: a, context: 5}]\n",         /* context not a mapping */
        "a: &x [1]\nb: *x\n",                                              /* aliases are refused */
        "current-context: a\ncontexts: [{name: a, context: {cluster: a, user: u}}]\n"
        "clusters: [{name: a, cluster: {server: 'https://x'}}]\n"
        "users: [{name: u, user: {client-certificate: c.pem}}]\n",         /* a cert without a key */
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        const char *p = tdir_write(&d, "bad", bad[i]);
        err[0] = 0;
        int rc = kc_config_load(p, NULL, &c, err, sizeof err);
        if (rc >= 0) test_fail(__FILE__, __LINE__, "case %zu: accepted", i);
        if (!err[0]) test_fail(__FILE__, __LINE__, "case %zu: no message", i);
        CHECK(c.server == NULL);
        d.n--; /* the same file name again */
    }
    d.n++;
    CHECK(kc_config_load("/nonexistent/kubeconfig", NULL, &c, err, sizeof err) < 0);
    CHECK(err[0] != 0);
    tdir_free(&d);
}

TEST(kconfig_env_and_url) {
    struct tdir d;
    REQUIRE(tdir_new(&d) == 0);
    const char *p = tdir_write(&d, "config", KUBECONFIG);
    char list[256];
    snprintf(list, sizeof list, "%s:/other/config", p);
    const char *old = getenv("KUBECONFIG");
    char saved[512] = "";
    if (old) snprintf(saved, sizeof saved, "%s", old);
    setenv("KUBECONFIG", list, 1);
    struct kc_config c;
    char err[256] = "";
    CHECK_I64(kc_config_load(NULL, "prod", &c, err, sizeof err), 0);
    CHECK_STR(c.namespace, "batch");
    kc_config_free(&c);
    if (old) setenv("KUBECONFIG", saved, 1);
    else unsetenv("KUBECONFIG");

    const char *tf = tdir_write(&d, "tok", "tkn\n");
    CHECK_I64(kc_config_from_url("http://127.0.0.1:1/", tf, &c, err, sizeof err), 0);
    CHECK_STR(c.server, "http://127.0.0.1:1");
    CHECK_STR(c.token, "tkn");
    CHECK_STR(c.namespace, "default");
    kc_config_free(&c);
    CHECK_I64(kc_config_from_url("http://h:1", NULL, &c, err, sizeof err), 0);
    CHECK(c.token == NULL);
    kc_config_free(&c);
    CHECK(kc_config_from_url("127.0.0.1:1", NULL, &c, err, sizeof err) < 0);
    /* a Unix-domain socket: the path to connect to, localhost for the Host header */
    CHECK_I64(kc_config_from_url("unix:///run/peloton/api.sock", NULL, &c, err, sizeof err), 0);
    CHECK_STR(c.server, "http://localhost");
    CHECK_STR(c.unix_socket, "/run/peloton/api.sock");
    kc_config_free(&c);
    CHECK_I64(kc_config_from_url("unix:/tmp/a.sock", NULL, &c, err, sizeof err), 0);
    CHECK_STR(c.unix_socket, "/tmp/a.sock");
    kc_config_free(&c);
    CHECK_I64(kc_config_from_url("http://h:1", NULL, &c, err, sizeof err), 0);
    CHECK(c.unix_socket == NULL);
    kc_config_free(&c);
    err[0] = 0;
    CHECK(kc_config_from_url("unix://relative.sock", NULL, &c, err, sizeof err) < 0);
    CHECK_HAS(err, "unix:///ABSOLUTE-PATH");
    CHECK(kc_config_from_url("unix:", NULL, &c, err, sizeof err) < 0);
    char longp[160] = "unix:///";
    memset(longp + 8, 'x', 120);
    CHECK(kc_config_from_url(longp, NULL, &c, err, sizeof err) < 0); /* longer than sun_path */
    CHECK_HAS(err, "(at most 107 bytes)");
    CHECK(kc_config_from_url("http://h:1", "/nonexistent/token", &c, err, sizeof err) < 0);
    CHECK_HAS(err, "/nonexistent/token");
    tdir_free(&d);
}

TEST(kconfig_in_cluster) {
    struct tdir d;
    REQUIRE(tdir_new(&d) == 0);
    tdir_write(&d, "token", "sa-token\n");
    tdir_write(&d, "ca.crt", CA_PEM);
    tdir_write(&d, "namespace", "jobs");
    const char *oh = getenv("KUBERNETES_SERVICE_HOST"), *op = getenv("KUBERNETES_SERVICE_PORT");
    char sh[128] = "", sp[32] = "";
    if (oh) snprintf(sh, sizeof sh, "%s", oh);
    if (op) snprintf(sp, sizeof sp, "%s", op);
    struct kc_config c;
    char err[256] = "", want[128];
    unsetenv("KUBERNETES_SERVICE_HOST");
    CHECK_I64(kc_config_in_cluster_at(d.path, &c, err, sizeof err), -ENOENT);
    setenv("KUBERNETES_SERVICE_HOST", "10.96.0.1", 1);
    setenv("KUBERNETES_SERVICE_PORT", "443", 1);
    CHECK_I64(kc_config_in_cluster_at(d.path, &c, err, sizeof err), 0);
    CHECK_STR(c.server, "https://10.96.0.1:443");
    CHECK_STR(c.token, "sa-token");
    snprintf(want, sizeof want, "%s/ca.crt", d.path);
    CHECK_STR(c.ca_file, want);
    CHECK_STR(c.namespace, "jobs");
    kc_config_free(&c);
    setenv("KUBERNETES_SERVICE_HOST", "fd00::1", 1);
    CHECK_I64(kc_config_in_cluster_at(d.path, &c, err, sizeof err), 0);
    CHECK_STR(c.server, "https://[fd00::1]:443");
    kc_config_free(&c);
    CHECK_I64(kc_config_in_cluster_at("/nonexistent", &c, err, sizeof err), -ENOENT);
    if (oh) setenv("KUBERNETES_SERVICE_HOST", sh, 1);
    else unsetenv("KUBERNETES_SERVICE_HOST");
    if (op) setenv("KUBERNETES_SERVICE_PORT", sp, 1);
    else unsetenv("KUBERNETES_SERVICE_PORT");
    tdir_free(&d);
}

TEST(kc_escape_cases) {
    char out[64];
    CHECK_I64(kc_escape("app=web,tier in (a,b)", out, sizeof out), 35);
    CHECK_STR(out, "app%3Dweb%2Ctier%20in%20%28a%2Cb%29");
    CHECK_I64(kc_escape("a-b_c.d~e", out, sizeof out), 9);
    CHECK_STR(out, "a-b_c.d~e");
    CHECK_I64(kc_escape("é/", out, sizeof out), 9);
    CHECK_STR(out, "%C3%A9%2F");
    char small[5];
    CHECK_I64(kc_escape("a=b", small, sizeof small), 5); /* snprintf semantics: the full length */
    CHECK_STR(small, "a%3D");
    CHECK_I64(kc_escape("", out, sizeof out), 0);
    CHECK_STR(out, "");
    CHECK_I64(kc_escape("xyz", NULL, 0), 3);
}

TEST(kconfig_base64_forms) {
    struct tdir d;
    REQUIRE(tdir_new(&d) == 0);
    struct kc_config c;
    char err[256] = "";
    /* a block scalar with line breaks, padding dropped */
    const char *p = tdir_write(&d, "wrapped",
                               "current-context: a\n"
                               "contexts: [{name: a, context: {cluster: a}}]\n"
                               "clusters:\n"
                               "- name: a\n"
                               "  cluster:\n"
                               "    server: https://x\n"
                               "    certificate-authority-data: |\n"
                               "      LS0tLS1CRUdJTiBDRVJUSUZJQ0FURS0tLS0tCkNB\n"
                               "      Ci0tLS0tRU5EIENFUlRJRklDQVRFLS0tLS0K\n");
    CHECK_I64(kc_config_load(p, NULL, &c, err, sizeof err), 0);
    CHECK_STR(c.ca_data, CA_PEM);
    kc_config_free(&c);
    const char *bad[] = {"QQ===", "Q", "QQ==QQ", "AAAA", "QUJD\x01"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char doc[512];
        snprintf(doc, sizeof doc,
                 "current-context: a\ncontexts: [{name: a, context: {cluster: a}}]\n"
                 "clusters: [{name: a, cluster: {server: 'https://x', certificate-authority-data: '%s'}}]\n",
                 bad[i]);
        p = tdir_write(&d, "b64", doc);
        d.n--;
        int rc = kc_config_load(p, NULL, &c, err, sizeof err);
        if (rc == 0) { /* "AAAA" decodes to NUL bytes: not PEM either */
            test_fail(__FILE__, __LINE__, "case %zu (%s) accepted", i, bad[i]);
            kc_config_free(&c);
        }
    }
    d.n++;
    tdir_free(&d);
}

/* Mutated kubeconfigs: whatever the bytes, an answer and no crash or leak. */
TEST(kconfig_mutations_do_not_crash) {
    struct tdir d;
    REQUIRE(tdir_new(&d) == 0);
    size_t len = strlen(KUBECONFIG);
    char *doc = malloc(len + 1);
    REQUIRE(doc);
    uint64_t seed = 7;
    int ok = 0, failed = 0;
    for (int round = 0; round < 300; round++) {
        memcpy(doc, KUBECONFIG, len + 1);
        int edits = (int)test_range(&seed, 1, 8);
        for (int k = 0; k < edits; k++) {
            size_t at = (size_t)test_range(&seed, 0, (int64_t)len - 1);
            static const char pool[] = " :-{}[]\n'\"#&*!|>%@`\t0aZ=";
            doc[at] = pool[test_range(&seed, 0, (int64_t)sizeof pool - 2)];
        }
        const char *p = tdir_write(&d, "mut", doc);
        d.n--;
        struct kc_config c;
        char err[256] = "";
        const char *ctx[] = {NULL, "prod", "filectx", "dev"};
        if (kc_config_load(p, ctx[round % 4], &c, err, sizeof err) == 0) {
            ok++;
            CHECK(c.server && c.namespace);
            kc_config_free(&c);
        } else {
            failed++;
            CHECK(err[0] != 0);
        }
    }
    d.n++;
    CHECK(ok > 0 && failed > 0);
    free(doc);
    tdir_free(&d);
}
