/* A self-signed serving certificate for loopback and local use: an EC P-256
 * key and an X.509 end-entity certificate (CA:FALSE, serverAuth) for
 * localhost and 127.0.0.1, valid for a year. A kubeconfig names the
 * certificate itself as its certificate-authority: clients (Go's crypto/x509,
 * OpenSSL) trust a self-signed leaf that is in their trust store.
 *
 * tls_cert_ensure writes cert_path and key_path (key mode 0600) unless both
 * exist already and the certificate is one to keep: it is renewed (a new key
 * and certificate) when it expires within TLS_CERT_RENEW_DAYS or is a CA (as
 * made by earlier versions). Returns 0 or a negative errno code with a message.
 *
 * tls_cert_check looks at any serving certificate and key (the operator's
 * too) and writes into warn what an operator should hear: a certificate
 * expired, not yet valid or expiring within TLS_CERT_RENEW_DAYS, a key file
 * that others than its owner can read. Returns the number of warnings (0:
 * warn is ""); a file it cannot read is left to the TLS layer to report. */
#ifndef PELOTON_HTTP_TLSCERT_H
#define PELOTON_HTTP_TLSCERT_H

#include <stddef.h>

#define TLS_CERT_RENEW_DAYS 30

int tls_cert_ensure(const char *cert_path, const char *key_path, char *err, size_t errlen);
int tls_cert_check(const char *cert_path, const char *key_path, char *warn, size_t warnlen);

#endif
