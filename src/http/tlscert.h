/* A self-signed serving certificate for loopback and local use: an EC P-256
 * key and an X.509 certificate (CA:TRUE, so a kubeconfig can name it as its
 * certificate-authority) for localhost and 127.0.0.1, valid for a year.
 * tls_cert_ensure writes cert_path and key_path (key mode 0600) unless both
 * exist already. Returns 0 or a negative errno code with a message. */
#ifndef PELOTON_HTTP_TLSCERT_H
#define PELOTON_HTTP_TLSCERT_H

#include <stddef.h>

int tls_cert_ensure(const char *cert_path, const char *key_path, char *err, size_t errlen);

#endif
