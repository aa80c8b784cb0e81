/* Fuzz target: label selector text (labels.Parse grammar), LabelSelector
 * objects and field selectors, matched against fixed objects. Checks that a
 * parsed label selector formats to text that parses back to the same text. */
#include <jansson.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "selector.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    static char s[SELECTOR_MAX_LEN + 64];
    if (size >= sizeof s) size = sizeof s - 1;
    memcpy(s, data, size);
    s[size] = 0;
    json_t *labels = json_pack("{s:s,s:s,s:s,s:s}", "app", "web", "tier", "front", "n", "10",
                               "example.com/x", "");
    json_t *pod = json_pack("{s:{s:s,s:s,s:o},s:{s:s,s:b},s:{s:s}}", "metadata", "name", "p1", "namespace",
                            "default", "labels", json_incref(labels), "spec", "nodeName", "n1", "hostNetwork", 1,
                            "status", "phase", "Running");
    char err[512], a[SELECTOR_MAX_LEN * 2], b[SELECTOR_MAX_LEN * 2];

    struct labelsel *ls;
    if (labelsel_parse(s, &ls, err, sizeof err) == 0) {
        (void)labelsel_match(ls, labels);
        (void)labelsel_match(ls, NULL);
        int n = labelsel_format(ls, a, sizeof a);
        if (n < 0 || (size_t)n >= sizeof a) abort();
        struct labelsel *back;
        if (labelsel_parse(a, &back, err, sizeof err) != 0) abort(); /* canonical text must parse */
        labelsel_format(back, b, sizeof b);
        if (strcmp(a, b) != 0 || labelsel_match(ls, labels) != labelsel_match(back, labels)) abort();
        labelsel_free(back);
        labelsel_free(ls);
    }
    static const char *const kinds[] = {"pods", "events", "nodes", "Secret", NULL};
    for (size_t k = 0; k < sizeof kinds / sizeof kinds[0]; k++) {
        struct fieldsel *fs;
        if (fieldsel_parse(kinds[k], s, &fs, err, sizeof err) != 0) continue;
        (void)fieldsel_match(fs, pod);
        (void)fieldsel_exact(fs, "spec.nodeName");
        fieldsel_free(fs);
    }
    json_t *obj = json_loadb((const char *)data, size, JSON_DECODE_ANY, NULL);
    if (obj) {
        if (labelsel_from_object(obj, &ls, err, sizeof err) == 0) {
            (void)labelsel_match(ls, labels);
            labelsel_free(ls);
        }
        if (labelsel_from_set(obj, &ls, err, sizeof err) == 0) {
            (void)labelsel_match(ls, labels);
            labelsel_free(ls);
        }
        json_decref(obj);
    }
    json_decref(pod);
    json_decref(labels);
    return 0;
}
