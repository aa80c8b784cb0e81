/* The TLS port's serving context (http_int.h): OpenSSL, TLS 1.2 at least,
 * forward-secret AEAD suites on 1.2 (1.3's are all AEAD), ALPN "h2" or
 * "http/1.1". Connections use it over memory BIOs in h1.c, so libuv keeps
 * the socket and TLS never reads it behind the loop's back. */
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <stdbool.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>

#include "http_int.h"

/* ALPN: "h2" when the client offers it, else "http/1.1"; a client offering
 * neither (or no ALPN at all) gets HTTP/1.1 without an answer. */
static int alpn_select(SSL *ssl, const unsigned char **out, unsigned char *outlen, const unsigned char *in,
                       unsigned int inlen, void *arg) {
    (void)ssl, (void)arg;
    static const unsigned char ours[] = "\x02h2\x08http/1.1";
    unsigned char *sel = NULL;
    if (SSL_select_next_proto(&sel, outlen, ours, sizeof ours - 1, in, inlen) != OPENSSL_NPN_NEGOTIATED)
        return SSL_TLSEXT_ERR_NOACK;
    *out = sel;
    return SSL_TLSEXT_ERR_OK;
}

SSL_CTX *http_tls_ctx_new(const char *cert, const char *key, const char *client_ca, char *err, size_t errlen) {
    SSL_CTX *ctx = SSL_CTX_new(TLS_server_method());
    if (!ctx) {
        snprintf(err, errlen, "http: tls: out of memory");
        return NULL;
    }
    SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION);
    SSL_CTX_set_options(ctx, SSL_OP_CIPHER_SERVER_PREFERENCE | SSL_OP_NO_RENEGOTIATION | SSL_OP_NO_COMPRESSION);
    SSL_CTX_set_mode(ctx, SSL_MODE_RELEASE_BUFFERS); /* idle connections keep no record buffers */
    const char *what = NULL;
    if (!SSL_CTX_set_cipher_list(ctx, HTTP_TLS12_CIPHERS)) what = "cipher list";
    else if (SSL_CTX_use_certificate_chain_file(ctx, cert) != 1) what = cert;
    else if (SSL_CTX_use_PrivateKey_file(ctx, key, SSL_FILETYPE_PEM) != 1) what = key;
    else if (SSL_CTX_check_private_key(ctx) != 1) what = "the key does not match the certificate";
    else if (client_ca && SSL_CTX_load_verify_locations(ctx, client_ca, NULL) != 1) what = client_ca;
    if (what) {
        char e[256];
        ERR_error_string_n(ERR_get_error(), e, sizeof e);
        snprintf(err, errlen, "http: tls: %s: %s", what, e);
        ERR_clear_error();
        SSL_CTX_free(ctx);
        return NULL;
    }
    SSL_CTX_set_alpn_select_cb(ctx, alpn_select, NULL);
    if (client_ca) { /* asked for, not required: a token-bearing client without one goes on */
        STACK_OF(X509_NAME) *names = SSL_load_client_CA_file(client_ca);
        if (names) SSL_CTX_set_client_CA_list(ctx, names);
        SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, NULL);
        SSL_CTX_set_verify_depth(ctx, 4);
        ERR_clear_error();
    }
    return ctx;
}

/* The subject's entries of nid, '\n'-joined (malloc'd; "" for none), each
 * cut at 255 bytes: a name is an identifier, not a document. */
static char *subject_entries(X509_NAME *subj, int nid, bool first_only) {
    size_t len = 0, cap = 256;
    char *out = malloc(cap);
    if (!out) return NULL;
    out[0] = 0;
    for (int i = X509_NAME_get_index_by_NID(subj, nid, -1); i >= 0; i = X509_NAME_get_index_by_NID(subj, nid, i)) {
        unsigned char *utf8 = NULL;
        int n = ASN1_STRING_to_UTF8(&utf8, X509_NAME_ENTRY_get_data(X509_NAME_get_entry(subj, i)));
        if (n < 0) continue;
        size_t k = strnlen((const char *)utf8, n > 255 ? 255 : (size_t)n); /* an embedded NUL ends it */
        if (len + k + 2 > cap) {
            char *m = realloc(out, cap = 2 * (len + k + 2));
            if (!m) {
                OPENSSL_free(utf8);
                break;
            }
            out = m;
        }
        if (len) out[len++] = '\n';
        memcpy(out + len, utf8, k);
        out[len += k] = 0;
        OPENSSL_free(utf8);
        if (first_only || len > 4096) break;
    }
    return out;
}

void http_tls_peer(SSL *ssl, char **cn, char **orgs) {
    *cn = *orgs = NULL;
    X509 *cert = SSL_get1_peer_certificate(ssl);
    if (!cert) return;
    if (SSL_get_verify_result(ssl) == X509_V_OK) { /* always so when the handshake passed; never trust otherwise */
        X509_NAME *subj = X509_get_subject_name(cert);
        *cn = subject_entries(subj, NID_commonName, true);
        *orgs = subject_entries(subj, NID_organizationName, false);
        if (!*cn || !*orgs || !(*cn)[0]) {
            free(*cn);
            free(*orgs);
            *cn = *orgs = NULL;
        }
    }
    X509_free(cert);
}
