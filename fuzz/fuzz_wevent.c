/* Fuzz target: the span of a watch event's object in its line
 * (kc__event_object_text, what a compact informer keeps as the object's
 * text). For a line that decodes as an event without repeated members, a
 * span found must lie within the line and decode to the event's object. */
#include <jansson.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "kclient_int.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const char *line = (const char *)data;
    json_t *ev = json_loadb(line, size, JSON_REJECT_DUPLICATES, NULL);
    const char *type = json_string_value(json_object_get(ev, "type"));
    size_t len = 0;
    const char *t = kc__event_object_text(line, size, type ? type : "ADDED", &len);
    if (t && (t < line || len > size || (size_t)(t - line) > size - len)) abort();
    if (t && ev && type) {
        json_t *obj = json_loadb(t, len, 0, NULL);
        if (!obj || !json_equal(obj, json_object_get(ev, "object"))) abort();
        json_decref(obj);
    }
    json_decref(ev);
    return 0;
}
