/* Client configuration: kubeconfig files, the in-cluster service account, or
 * a URL plus a token file. Paths in a kubeconfig resolve against its
 * directory; *-data fields are base64 PEM, decoded here. A token file is read
 * once, at load. */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kclient.h"
#include "unixpath.h"
#include "yamljson.h"

#define KC_FILE_MAX (1u << 20) /* a token or PEM file */
#define KC_SA_DIR "/var/run/secrets/kubernetes.io/serviceaccount"

static int fail(char *err, size_t errlen, int rc, const char *fmt, const char *a, const char *b) {
    if (err && errlen) snprintf(err, errlen, fmt, a ? a : "", b ? b : "");
    return rc;
}

void kc_config_free(struct kc_config *c) {
    if (!c) return;
    free(c->server);
    free(c->token);
    free(c->ca_file);
    free(c->ca_data);
    free(c->cert_file);
    free(c->cert_data);
    free(c->key_file);
    free(c->key_data);
    free(c->namespace);
    free(c->unix_socket);
    memset(c, 0, sizeof *c);
}

/* The file's bytes, NUL-terminated, trailing whitespace trimmed; NULL with
 * errno set. */
static char *read_small(const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    char *buf = malloc(KC_FILE_MAX + 1);
    if (!buf) {
        fclose(f);
        errno = ENOMEM;
        return NULL;
    }
    size_t n = fread(buf, 1, KC_FILE_MAX + 1, f);
    int bad = ferror(f);
    fclose(f);
    if (bad || n > KC_FILE_MAX) {
        free(buf);
        errno = bad ? EIO : EFBIG;
        return NULL;
    }
    while (n && (buf[n - 1] == '\n' || buf[n - 1] == '\r' || buf[n - 1] == ' ' || buf[n - 1] == '\t')) n--;
    buf[n] = 0;
    return buf;
}

/* Standard base64 (padding optional, whitespace ignored) into a new
 * NUL-terminated string; NULL when malformed. */
static char *b64_decode(const char *s) {
    size_t len = strlen(s);
    char *out = malloc(len / 4 * 3 + 4);
    if (!out) return NULL;
    size_t n = 0;
    unsigned acc = 0;
    int bits = 0, pad = 0;
    for (const char *p = s; *p; p++) {
        int v;
        char ch = *p;
        if (ch == ' ' || ch == '\n' || ch == '\r' || ch == '\t') continue;
        if (ch == '=') {
            pad++;
            continue;
        }
        if (pad) goto bad; /* data after padding */
        if (ch >= 'A' && ch <= 'Z') v = ch - 'A';
        else if (ch >= 'a' && ch <= 'z') v = ch - 'a' + 26;
        else if (ch >= '0' && ch <= '9') v = ch - '0' + 52;
        else if (ch == '+' || ch == '-') v = 62;
        else if (ch == '/' || ch == '_') v = 63;
        else goto bad;
        acc = (acc << 6) | (unsigned)v;
        bits += 6;
        if (bits >= 8) {
            bits -= 8;
            out[n++] = (char)((acc >> bits) & 0xff);
        }
    }
    if (bits >= 6 || pad > 2) goto bad;
    out[n] = 0;
    if (strlen(out) != n) goto bad; /* PEM has no NUL bytes */
    return out;
bad:
    free(out);
    return NULL;
}

/* path made absolute against dir (when relative); new string or NULL. */
static char *resolve(const char *dir, const char *path) {
    if (path[0] == '/' || !dir) return strdup(path);
    size_t n = strlen(dir) + strlen(path) + 2;
    char *p = malloc(n);
    if (p) snprintf(p, n, "%s/%s", dir, path);
    return p;
}

/* The entry named name in a kubeconfig list ("clusters", ...), its inner
 * object (key "cluster", ...). */
static json_t *find_named(json_t *doc, const char *list, const char *inner, const char *name) {
    json_t *arr = json_object_get(doc, list), *e;
    size_t i;
    json_array_foreach(arr, i, e) {
        const char *n = json_string_value(json_object_get(e, "name"));
        if (n && !strcmp(n, name)) {
            if (!json_is_object(json_object_get(e, inner))) json_object_set_new(e, inner, json_object());
            return json_object_get(e, inner);
        }
    }
    return NULL;
}

static const char *str(json_t *o, const char *k) {
    const char *s = json_string_value(json_object_get(o, k));
    return s && *s ? s : NULL;
}

static bool truthy(json_t *o, const char *k) {
    json_t *v = json_object_get(o, k);
    if (json_is_true(v)) return true;
    const char *s = json_string_value(v);
    return s && (!strcmp(s, "true") || !strcmp(s, "True"));
}

/* A PEM either from field-data (base64) or from field (a path). */
static int pem_field(json_t *o, const char *field, const char *dir, char **file, char **data, char *err,
                     size_t errlen) {
    char dk[64];
    snprintf(dk, sizeof dk, "%s-data", field);
    const char *d = str(o, dk), *f = str(o, field);
    if (d) {
        if (!(*data = b64_decode(d))) return fail(err, errlen, -EINVAL, "kubeconfig: %s is not valid base64%s", dk, NULL);
    } else if (f) {
        if (!(*file = resolve(dir, f))) return -ENOMEM;
    }
    return 0;
}

static int load_doc(json_t *doc, const char *dir, const char *context, struct kc_config *out, char *err,
                    size_t errlen) {
    if (!json_is_object(doc)) return fail(err, errlen, -EINVAL, "kubeconfig: not a mapping%s%s", NULL, NULL);
    const char *ctxname = context && *context ? context : str(doc, "current-context");
    if (!ctxname) return fail(err, errlen, -ENOENT, "kubeconfig: no current-context and no context given%s%s", NULL, NULL);
    json_t *ctx = find_named(doc, "contexts", "context", ctxname);
    if (!ctx) return fail(err, errlen, -ENOENT, "kubeconfig: context \"%s\" not found%s", ctxname, NULL);
    const char *clname = str(ctx, "cluster"), *uname = str(ctx, "user");
    if (!clname) return fail(err, errlen, -EINVAL, "kubeconfig: context \"%s\" names no cluster%s", ctxname, NULL);
    json_t *cl = find_named(doc, "clusters", "cluster", clname);
    if (!cl) return fail(err, errlen, -ENOENT, "kubeconfig: cluster \"%s\" not found%s", clname, NULL);
    json_t *user = NULL;
    if (uname && !(user = find_named(doc, "users", "user", uname)))
        return fail(err, errlen, -ENOENT, "kubeconfig: user \"%s\" not found%s", uname, NULL);
    const char *server = str(cl, "server");
    if (!server) return fail(err, errlen, -EINVAL, "kubeconfig: cluster \"%s\" has no server%s", clname, NULL);
    if (strncmp(server, "http://", 7) && strncmp(server, "https://", 8))
        return fail(err, errlen, -EINVAL, "kubeconfig: server \"%s\" is not an http(s) URL%s", server, NULL);

    int rc;
    if (!(out->server = strdup(server))) return -ENOMEM;
    size_t n = strlen(out->server);
    while (n && out->server[n - 1] == '/') out->server[--n] = 0;
    out->insecure = truthy(cl, "insecure-skip-tls-verify");
    if ((rc = pem_field(cl, "certificate-authority", dir, &out->ca_file, &out->ca_data, err, errlen))) return rc;
    const char *ns = str(ctx, "namespace");
    if (!(out->namespace = strdup(ns ? ns : "default"))) return -ENOMEM;
    if (!user) return 0;
    if ((rc = pem_field(user, "client-certificate", dir, &out->cert_file, &out->cert_data, err, errlen))) return rc;
    if ((rc = pem_field(user, "client-key", dir, &out->key_file, &out->key_data, err, errlen))) return rc;
    const char *tok = str(user, "token"), *tf = str(user, "tokenFile");
    if (tok) {
        if (!(out->token = strdup(tok))) return -ENOMEM;
    } else if (tf) {
        char *p = resolve(dir, tf);
        if (!p) return -ENOMEM;
        out->token = read_small(p);
        int e = errno ? errno : EIO;
        if (!out->token) {
            rc = fail(err, errlen, -e, "kubeconfig: cannot read tokenFile %s: %s", p, strerror(e));
            free(p);
            return rc;
        }
        free(p);
        if (!*out->token) return fail(err, errlen, -EINVAL, "kubeconfig: tokenFile %s is empty%s", tf, NULL);
    }
    if (!out->token && !out->cert_file && !out->cert_data &&
        (json_object_get(user, "exec") || json_object_get(user, "auth-provider")))
        return fail(err, errlen, -ENOTSUP, "kubeconfig: user \"%s\": exec and auth-provider plugins are not supported%s",
                    uname, NULL);
    if ((out->cert_file || out->cert_data) != (out->key_file || out->key_data))
        return fail(err, errlen, -EINVAL, "kubeconfig: user \"%s\": a client certificate needs a key and vice versa%s",
                    uname, NULL);
    return 0;
}

int kc_config_load(const char *path, const char *context, struct kc_config *out, char *err, size_t errlen) {
    char buf[PATH_MAX];
    memset(out, 0, sizeof *out);
    if (!path || !*path) {
        const char *env = getenv("KUBECONFIG");
        if (env && *env) { /* a list: the first entry (files are not merged) */
            size_t n = strcspn(env, ":");
            if (n >= sizeof buf) return fail(err, errlen, -ENAMETOOLONG, "kubeconfig: $KUBECONFIG too long%s%s", NULL, NULL);
            memcpy(buf, env, n);
            buf[n] = 0;
        } else {
            const char *home = getenv("HOME");
            if (!home) return fail(err, errlen, -ENOENT, "kubeconfig: no path, $KUBECONFIG or $HOME%s%s", NULL, NULL);
            snprintf(buf, sizeof buf, "%s/.kube/config", home);
        }
        path = buf;
    }
    char perr[256] = "";
    json_t *doc = doc_load_file(path, perr, sizeof perr);
    if (!doc) return fail(err, errlen, -EINVAL, "kubeconfig %s: %s", path, perr);
    char dir[PATH_MAX];
    snprintf(dir, sizeof dir, "%s", path);
    char *slash = strrchr(dir, '/');
    if (slash == dir) dir[1] = 0;
    else if (slash) *slash = 0;
    else snprintf(dir, sizeof dir, ".");
    int rc = load_doc(doc, dir, context, out, err, errlen);
    json_decref(doc);
    if (rc) {
        if (rc == -ENOMEM) fail(err, errlen, rc, "kubeconfig: out of memory%s%s", NULL, NULL);
        kc_config_free(out);
    }
    return rc;
}

int kc_config_in_cluster_at(const char *sa_dir, struct kc_config *out, char *err, size_t errlen) {
    memset(out, 0, sizeof *out);
    const char *host = getenv("KUBERNETES_SERVICE_HOST"), *port = getenv("KUBERNETES_SERVICE_PORT");
    if (!host || !*host || !port || !*port)
        return fail(err, errlen, -ENOENT, "in-cluster: KUBERNETES_SERVICE_HOST/PORT not set%s%s", NULL, NULL);
    char p[PATH_MAX];
    size_t n = strlen(host) + strlen(port) + 16;
    if (!(out->server = malloc(n))) return -ENOMEM;
    snprintf(out->server, n, strchr(host, ':') ? "https://[%s]:%s" : "https://%s:%s", host, port);
    snprintf(p, sizeof p, "%s/token", sa_dir);
    out->token = read_small(p);
    if (!out->token || !*out->token) {
        kc_config_free(out);
        return fail(err, errlen, -ENOENT, "in-cluster: cannot read %s%s", p, NULL);
    }
    snprintf(p, sizeof p, "%s/ca.crt", sa_dir);
    FILE *f = fopen(p, "r");
    if (f) {
        fclose(f);
        out->ca_file = strdup(p);
    }
    snprintf(p, sizeof p, "%s/namespace", sa_dir);
    out->namespace = read_small(p);
    if (out->namespace && !*out->namespace) {
        free(out->namespace);
        out->namespace = NULL;
    }
    if (!out->namespace) out->namespace = strdup("default");
    if (!out->namespace || (!out->ca_file && f)) {
        kc_config_free(out);
        return fail(err, errlen, -ENOMEM, "in-cluster: out of memory%s%s", NULL, NULL);
    }
    return 0;
}

int kc_config_in_cluster(struct kc_config *out, char *err, size_t errlen) {
    return kc_config_in_cluster_at(KC_SA_DIR, out, err, errlen);
}

int kc_config_from_url(const char *url, const char *token_file, struct kc_config *out, char *err, size_t errlen) {
    memset(out, 0, sizeof *out);
    const char *path = url ? unix_url_rest(url) : NULL;
    if (path && (path[0] != '/' || strlen(path) > UNIX_SOCKET_PATH_MAX)) {
        char most[24];
        snprintf(most, sizeof most, "%zu", UNIX_SOCKET_PATH_MAX);
        return fail(err, errlen, -EINVAL, "kclient: \"%s\" is not unix:///ABSOLUTE-PATH (at most %s bytes)", url,
                    most);
    }
    if (!url || (!path && strncmp(url, "http://", 7) && strncmp(url, "https://", 8)))
        return fail(err, errlen, -EINVAL, "kclient: \"%s\" is not an http(s) or unix:// URL%s", url, NULL);
    out->server = strdup(path ? "http://localhost" : url);
    out->namespace = strdup("default");
    if (path) out->unix_socket = strdup(path);
    if (!out->server || !out->namespace || (path && !out->unix_socket)) {
        kc_config_free(out);
        return fail(err, errlen, -ENOMEM, "kclient: out of memory%s%s", NULL, NULL);
    }
    size_t n = strlen(out->server);
    while (n && out->server[n - 1] == '/') out->server[--n] = 0;
    if (token_file && *token_file) {
        out->token = read_small(token_file);
        int e = out->token ? EINVAL : errno ? errno : EIO;
        if (!out->token || !*out->token) {
            kc_config_free(out);
            return fail(err, errlen, -e, "kclient: cannot read a token from %s%s", token_file, NULL);
        }
    }
    return 0;
}
