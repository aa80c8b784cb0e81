/* Fuzz target: Kubernetes quantity parsing and format/parse roundtrip. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "quantity.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    char s[QUANTITY_MAX_LEN + 32];
    if (size >= sizeof s) size = sizeof s - 1;
    memcpy(s, data, size);
    s[size] = 0;
    for (int k = 0; k < RES_NKINDS; k++) {
        int64_t v;
        char err[256];
        if (quantity_parse_kind((enum res_kind)k, s, &v, err, sizeof err) != 0) continue;
        if (v < 0) abort();
        char buf[64];
        quantity_format((enum res_kind)k, v, buf, sizeof buf);
        int64_t back;
        if (quantity_parse_kind((enum res_kind)k, buf, &back, err, sizeof err) != 0 || back != v) abort();
    }
    return 0;
}
