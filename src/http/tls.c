/* The TLS port's serving context (http_int.h): OpenSSL, TLS 1.2 at least,
 * forward-secret AEAD suites on 1.2 (1.3's are all AEAD), ALPN "h2" or
 * "http/1.1". Connections use it over memory BIOs in h1.c, so libuv keeps
 * the socket and TLS never reads it behind the loop's back. */
#include <openssl/err.h>
#include <openssl/ssl.h>
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

SSL_CTX *http_tls_ctx_new(const char *cert, const char *key, char *err, size_t errlen) {
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
    if (what) {
        char e[256];
        ERR_error_string_n(ERR_get_error(), e, sizeof e);
        snprintf(err, errlen, "http: tls: %s: %s", what, e);
        ERR_clear_error();
        SSL_CTX_free(ctx);
        return NULL;
    }
    SSL_CTX_set_alpn_select_cb(ctx, alpn_select, NULL);
    return ctx;
}
