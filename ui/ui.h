/* ui: the web UI's static files, served by the API server under /ui/.
 *
 * The files are the sources in ui/ (HTML, CSS, JavaScript: no framework, no
 * build tool beyond ui/embed.py), embedded in the binary at make time as C
 * arrays in build/gen/ui_assets.h (generated, never committed). The pages
 * ask the API for every datum with the user's bearer token; the files
 * themselves carry no data and are served without one (docs/ui.md). */
#ifndef PELOTON_UI_H
#define PELOTON_UI_H

#include <stdbool.h>

#include "server.h"

/* True when path is the UI's: "/ui" or anything under "/ui/". */
bool ui_path(const char *path);

/* Answers a request for a UI path (ui_path true): 200 with the file for
 * GET and HEAD ("/ui" and "/ui/" are index.html), 404 for a file the UI does
 * not have, 405 for another method; plain-text bodies on errors. resp->body
 * is malloc'd (the server frees it). */
void ui_serve(const struct http_request *req, struct http_response *resp);

#endif
