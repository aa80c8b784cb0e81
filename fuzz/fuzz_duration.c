/* Fuzz target: ktime_parse_duration (src/util/ktime.h), the --event-ttl
 * flag's Go duration syntax. Any bytes: no crash, no read past the input's
 * end; an accepted duration is within int64 and its sign is the input's. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "ktime.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size > 256) return 0;
    char buf[257];
    memcpy(buf, data, size);
    buf[size] = '\0';
    int64_t ns = 0;
    if (ktime_parse_duration(buf, &ns)) {
        if (buf[0] == '-' && ns > 0) abort();
        if (buf[0] != '-' && ns < 0) abort();
    }
    return 0;
}
