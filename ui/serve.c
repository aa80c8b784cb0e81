/* Serves the UI's embedded files (ui.h). */
#include <stdlib.h>
#include <string.h>

#include "ui.h"

struct ui_asset {
    const char *path;         /* under /ui/, e.g. "/ui/app.js" */
    const char *content_type; /* static string */
    const unsigned char *data;
    size_t len;
};

#include "ui_assets.h" /* build/gen: ui_assets[], ui_nassets (ui/embed.py) */

bool ui_path(const char *path) {
    return !strcmp(path, "/ui") || !strncmp(path, "/ui/", 4);
}

static void text(struct http_response *resp, int code, const char *msg) {
    resp->status = code;
    resp->content_type = "text/plain; charset=utf-8";
    resp->body = strdup(msg);
    resp->body_len = resp->body ? strlen(resp->body) : 0;
}

static const struct ui_asset *find(const char *path) {
    if (!strcmp(path, "/ui") || !strcmp(path, "/ui/")) path = "/ui/index.html";
    for (size_t i = 0; i < ui_nassets; i++)
        if (!strcmp(ui_assets[i].path, path)) return &ui_assets[i];
    return NULL;
}

void ui_serve(const struct http_request *req, struct http_response *resp) {
    if (req->method != HTTP_GET && req->method != HTTP_HEAD) {
        text(resp, 405, "method not allowed: the UI's files are read with GET\n");
        return;
    }
    const struct ui_asset *a = find(req->path);
    if (!a) {
        text(resp, 404, "not found\n");
        return;
    }
    resp->body = malloc(a->len ? a->len : 1);
    if (!resp->body) {
        text(resp, 503, "out of memory\n");
        return;
    }
    memcpy(resp->body, a->data, a->len);
    resp->body_len = a->len;
    resp->status = 200;
    resp->content_type = a->content_type;
}
