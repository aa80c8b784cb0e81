/* The span of a watch event's object in its line (kc__event_object_text):
 * what a compact informer keeps as the object's text when the line has
 * exactly the shape kube-apiserver and the shim write, and nothing else. */
#include <string.h>

#include "kclient_int.h"
#include "test.h"

static const char *span(const char *line, const char *type, size_t *len) {
    return kc__event_object_text(line, strlen(line), type, len);
}

TEST(kwatch_event_object_span) {
    size_t len = 0;
    const char *l = "{\"type\":\"ADDED\",\"object\":{\"metadata\":{\"name\":\"a\"}}}\n";
    const char *t = span(l, "ADDED", &len);
    REQUIRE(t != NULL);
    CHECK(t == l + 25);
    CHECK_I64(len, strlen("{\"metadata\":{\"name\":\"a\"}}"));
    /* spaces and CR before the end, braces inside strings */
    l = "{\"type\":\"MODIFIED\",\"object\":{\"a\":\"}{\\\"\",\"b\":[{}]} }\r\n";
    t = span(l, "MODIFIED", &len);
    REQUIRE(t != NULL);
    CHECK(len == strlen("{\"a\":\"}{\\\"\",\"b\":[{}]}") && !memcmp(t, "{\"a\":", 5));
    /* not that shape: no span */
    CHECK(span(l, "ADDED", &len) == NULL);                                              /* another type */
    CHECK(span("{\"object\":{\"x\":1},\"type\":\"ADDED\"}", "ADDED", &len) == NULL);       /* members reversed */
    CHECK(span("{\"type\":\"ADDED\",\"object\":{\"x\":1},\"e\":{}}", "ADDED", &len) == NULL); /* a member after */
    CHECK(span("{\"type\":\"ADDED\",\"object\":{\"x\":1},\"object\":{}}", "ADDED", &len) == NULL); /* named twice */
    CHECK(span("{\"type\":\"ADDED\",\"object\":[1]}", "ADDED", &len) == NULL);          /* not an object */
    CHECK(span("{\"type\":\"ADDED\",\"object\":{\"x\":\"}", "ADDED", &len) == NULL);    /* cut short */
    CHECK(span("{\"type\":\"ADDED\",\"object\":}", "ADDED", &len) == NULL);
    CHECK(kc__event_object_text(NULL, 0, "ADDED", &len) == NULL);
    CHECK(span(l, NULL, &len) == NULL);
}
