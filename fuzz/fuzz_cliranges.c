/* Fuzz target: the CLI's instance ranges (cli_ranges, `-r from:to,...`),
 * the input's first byte choosing the job's count (none: -1, or 0..254).
 * Checks that what is accepted is a list of [from, to) with from below to
 * (an open end resolved to the count) and to within uint32; that an open end
 * without a count is reported and not guessed. */
#include <jansson.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (!size || size > 4096) return 0;
    long long count = data[0] == 255 ? -1 : data[0];
    char *spec = malloc(size);
    if (!spec) return 0;
    memcpy(spec, data + 1, size - 1);
    spec[size - 1] = 0;
    json_t *out = json_array();
    char bad[80];
    int k = cli_ranges(spec, count, out, bad, sizeof bad);
    if (k == 1 && count >= 0) abort();
    if (k == 0) {
        size_t i;
        json_t *r;
        json_array_foreach(out, i, r) {
            json_int_t from = json_integer_value(json_object_get(r, "from"));
            json_int_t to = json_integer_value(json_object_get(r, "to"));
            if (from < 0 || to > (json_int_t)UINT32_MAX || from > (json_int_t)UINT32_MAX) abort();
            if (from >= to && to != count) abort(); /* only an open end may land at or below from */
        }
    }
    if (k == -1 && !bad[0] && strlen(spec)) abort();
    json_decref(out);
    free(spec);
    return 0;
}
