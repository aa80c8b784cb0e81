/* Base64 (base64.h). */
#include "base64.h"

#include <string.h>

static const char STD[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
static const char URL[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";

size_t b64_encode(const void *in, size_t n, bool url, bool pad, char *out) {
    const unsigned char *b = in;
    const char *abc = url ? URL : STD;
    char *p = out;
    size_t i = 0;
    for (; i + 2 < n; i += 3) {
        unsigned v = (unsigned)b[i] << 16 | (unsigned)b[i + 1] << 8 | b[i + 2];
        *p++ = abc[v >> 18 & 63];
        *p++ = abc[v >> 12 & 63];
        *p++ = abc[v >> 6 & 63];
        *p++ = abc[v & 63];
    }
    if (i < n) {
        unsigned v = (unsigned)b[i] << 16 | (i + 1 < n ? (unsigned)b[i + 1] << 8 : 0);
        *p++ = abc[v >> 18 & 63];
        *p++ = abc[v >> 12 & 63];
        if (i + 1 < n) *p++ = abc[v >> 6 & 63];
        else if (pad) *p++ = '=';
        if (pad) *p++ = '=';
    }
    *p = 0;
    return (size_t)(p - out);
}

static bool std_char(char c) {
    return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '+' || c == '/';
}

long b64_std_check(const char *s, size_t n, size_t *bad) {
    size_t quantum = 0, out = 0, pads = 0, at = 0;
    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        if (c == '\r' || c == '\n') continue;
        at = i;
        if (c == '=') {
            if (quantum < 2) goto fail; /* "xx==" and "xxx=" only */
            pads++;
            quantum++;
            if (quantum == 4) { /* the padding ends the data */
                out += 3 - pads;
                for (size_t k = i + 1; k < n; k++) {
                    if (s[k] != '\r' && s[k] != '\n') {
                        at = k;
                        goto fail;
                    }
                }
                return (long)out;
            }
            continue;
        }
        if (pads || !std_char(c)) goto fail;
        if (++quantum == 4) {
            quantum = 0;
            out += 3;
        }
    }
    if (quantum == 0) return (long)out;
    at = n;
fail:
    if (bad) *bad = at;
    return -1;
}

size_t b64_std_decode(const char *s, size_t n, unsigned char *out) {
    unsigned v = 0, bits = 0;
    size_t k = 0;
    for (size_t i = 0; i < n && s[i] != '='; i++) {
        const char *at = strchr(STD, s[i]);
        if (!at || !s[i]) continue; /* CR, LF */
        v = (v << 6 | (unsigned)(at - STD)) & 0xffffff;
        if ((bits += 6) >= 8) {
            bits -= 8;
            out[k++] = (unsigned char)(v >> bits);
        }
    }
    return k;
}
