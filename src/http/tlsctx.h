/* The TLS serving context and peer identity of tls.c, for servers outside
 * src/http (the native API's TLS) that serve the same certificates:
 * http_tls_ctx_new makes a context from PEM files (TLS 1.2 at least, ALPN
 * "h2" preferred over "http/1.1", client certificates asked for and
 * verified against client_ca when given); NULL with a message in err; the
 * caller frees it with SSL_CTX_free. http_tls_peer: the verified client
 * certificate of a finished handshake, *cn and *orgs malloc'd (orgs
 * '\n'-joined), or both NULL without one. */
#ifndef PELOTON_HTTP_TLSCTX_H
#define PELOTON_HTTP_TLSCTX_H

#include <openssl/ssl.h>
#include <stddef.h>

SSL_CTX *http_tls_ctx_new(const char *cert, const char *key, const char *client_ca, char *err, size_t errlen);
void http_tls_peer(SSL *ssl, char **cn, char **orgs);

#endif
