/* Responses in the Kubernetes shape: objects as JSON, errors as Status. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "shim.h"
#include "jparse.h"

void shim_json(struct http_response *resp, int code, json_t *obj) {
    resp->status = code;
    resp->content_type = "application/json";
    size_t len = 0;
    resp->body = jdump(obj, JSON_COMPACT, &len);
    resp->body_len = resp->body ? len : 0;
    json_decref(obj);
}

json_t *shim_string(const char *s) {
    const unsigned char *p = (const unsigned char *)s, *end = p + strlen(s);
    size_t cap = 3 * (size_t)(end - p) + 1, n = 0;
    char *o = malloc(cap);
    if (!o) return NULL;
    while (p < end) {
        size_t k = jparse_utf8_len(p, end);
        if (k) {
            memcpy(o + n, p, k);
            n += k, p += k;
        } else { /* U+FFFD REPLACEMENT CHARACTER for the byte */
            memcpy(o + n, "\xef\xbf\xbd", 3);
            n += 3, p++;
        }
    }
    json_t *j = json_stringn(o, n);
    free(o);
    return j;
}

void shim_status(struct http_response *resp, int code, const char *reason, json_t *details, const char *fmt, ...) {
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    /* the message often quotes the request (a name, a namespace): its bytes
     * may not be UTF-8, which JSON cannot carry */
    json_t *st = json_pack("{s:s, s:s, s:{}, s:s, s:o, s:s, s:i}", "kind", "Status", "apiVersion", "v1", "metadata",
                           "status", code < 400 ? "Success" : "Failure", "message", shim_string(msg), "reason",
                           reason, "code", code);
    if (details) json_object_set_new(st, "details", details);
    shim_json(resp, code, st);
    if (!resp->body) { /* out of memory: still a Status */
        static const char oom[] = "{\"kind\":\"Status\",\"apiVersion\":\"v1\",\"metadata\":{},\"status\":\"Failure\","
                                  "\"message\":\"out of memory\",\"reason\":\"InternalError\",\"code\":500}";
        resp->status = 500;
        resp->body = strdup(oom);
        resp->body_len = resp->body ? sizeof oom - 1 : 0;
    }
}
