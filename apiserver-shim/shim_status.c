/* Responses in the Kubernetes shape: objects as JSON, errors as Status. */
#include <stdarg.h>
#include <stdio.h>
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

void shim_status(struct http_response *resp, int code, const char *reason, json_t *details, const char *fmt, ...) {
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    json_t *st = json_pack("{s:s, s:s, s:{}, s:s, s:s, s:s, s:i}", "kind", "Status", "apiVersion", "v1", "metadata",
                           "status", code < 400 ? "Success" : "Failure", "message", msg, "reason", reason, "code",
                           code);
    if (details) json_object_set_new(st, "details", details);
    shim_json(resp, code, st);
}
