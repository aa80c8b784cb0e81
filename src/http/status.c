/* The Kubernetes Status the HTTP layer sends for what it refuses itself
 * (http_int.h): both backends build it here, so every refusal has the shape
 * a client decodes (kind, apiVersion, metadata, status, message, reason,
 * code). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "http_int.h"
#include "jparse.h"

char *http_status_body(int code, const char *reason, const char *msg, size_t *len) {
    char *b = NULL;
    size_t n = 0, cap = 0;
    char tail[128];
    int tl = snprintf(tail, sizeof tail, ",\"reason\":\"%s\",\"code\":%d}", reason, code);
    static const char head[] = "{\"kind\":\"Status\",\"apiVersion\":\"v1\",\"metadata\":{},\"status\":\"Failure\","
                               "\"message\":";
    if (tl <= 0 || (size_t)tl >= sizeof tail || jdump_append(&b, &n, &cap, head, sizeof head - 1) ||
        (jdump_append_string(&b, &n, &cap, msg, strlen(msg)) &&
         jdump_append_string(&b, &n, &cap, "(unprintable)", 13)) ||
        jdump_append(&b, &n, &cap, tail, (size_t)tl)) {
        free(b);
        return NULL;
    }
    *len = n;
    return b;
}
