/* ui: which paths are the UI's and what ui_serve answers for them (the
 * embedded files of build/gen/ui_assets.h). */
#include <stdlib.h>
#include <string.h>

#include "test.h"
#include "ui.h"

static struct http_response serve(enum http_method m, const char *path) {
    struct http_request req = {.method = m, .path = path};
    struct http_response resp = {.status = 200};
    ui_serve(&req, &resp);
    return resp;
}

TEST(ui_paths) {
    CHECK(ui_path("/ui"));
    CHECK(ui_path("/ui/"));
    CHECK(ui_path("/ui/app.js"));
    CHECK(!ui_path("/uix"));
    CHECK(!ui_path("/api/v1/ui/"));
    CHECK(!ui_path("/"));
}

TEST(ui_serves_its_files) {
    struct http_response r = serve(HTTP_GET, "/ui/");
    CHECK_I64(r.status, 200);
    CHECK_STR(r.content_type, "text/html; charset=utf-8");
    REQUIRE(r.body && r.body_len > 0);
    CHECK(memmem(r.body, r.body_len, "/ui/app.js", 10) != NULL);
    struct http_response same = serve(HTTP_GET, "/ui");
    CHECK(same.body_len == r.body_len && !memcmp(same.body, r.body, r.body_len));
    free(same.body);
    free(r.body);
    r = serve(HTTP_HEAD, "/ui/app.js");
    CHECK_I64(r.status, 200);
    CHECK_STR(r.content_type, "text/javascript; charset=utf-8");
    free(r.body);
    r = serve(HTTP_GET, "/ui/app.css");
    CHECK_STR(r.content_type, "text/css; charset=utf-8");
    free(r.body);
}

TEST(ui_refuses_what_it_has_not) {
    const char *missing[] = {"/ui/none.js", "/ui/../shim.c", "/ui//app.js", "/ui/app.js/", "/ui/index.html%00"};
    for (size_t i = 0; i < sizeof missing / sizeof *missing; i++) {
        struct http_response r = serve(HTTP_GET, missing[i]);
        CHECK_I64(r.status, 404);
        CHECK_STR(r.content_type, "text/plain; charset=utf-8");
        free(r.body);
    }
    enum http_method other[] = {HTTP_POST, HTTP_PUT, HTTP_PATCH, HTTP_DELETE, HTTP_OPTIONS, HTTP_OTHER};
    for (size_t i = 0; i < sizeof other / sizeof *other; i++) {
        struct http_response r = serve(other[i], "/ui/app.js");
        CHECK_I64(r.status, 405);
        free(r.body);
    }
}
