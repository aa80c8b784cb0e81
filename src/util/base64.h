/* Base64 (RFC 4648): the standard alphabet with padding, as Kubernetes
 * carries Secret data ([]byte in JSON), and the URL alphabet without it
 * (continue tokens). Pure functions; no allocation. */
#ifndef PELOTON_UTIL_BASE64_H
#define PELOTON_UTIL_BASE64_H

#include <stdbool.h>
#include <stddef.h>

/* Bytes b64_encode writes for n input bytes (without the NUL). */
static inline size_t b64_encoded_len(size_t n, bool pad) {
    return pad ? (n + 2) / 3 * 4 : n / 3 * 4 + (n % 3 ? n % 3 + 1 : 0);
}

/* Encodes n bytes of in into out (b64_encoded_len + 1 bytes: NUL-terminated);
 * url: the URL alphabet (- and _); pad: '=' to a multiple of four.
 * Returns the length written. */
size_t b64_encode(const void *in, size_t n, bool url, bool pad, char *out);

/* Whether s (n bytes) is standard base64 as Go's base64.StdEncoding decodes
 * it (what kube-apiserver accepts for a Secret's data): the standard
 * alphabet, CR and LF ignored, padded to a multiple of four. Returns the
 * decoded length, or -1 with *bad (may be NULL) the offset of the first byte
 * that is wrong (n when the input ends early). */
long b64_std_check(const char *s, size_t n, size_t *bad);

/* Decodes n bytes of standard base64 that b64_std_check accepted into out
 * (the length it returned; CR and LF skipped); returns the bytes written. */
size_t b64_std_decode(const char *s, size_t n, unsigned char *out);

#endif
