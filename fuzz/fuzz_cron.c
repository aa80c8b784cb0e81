/* Fuzz target: cron schedules (src/k8s/cron.c), parsed and searched over a
 * year back from a fixed time; the minute found must be in the range. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "cron.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    char s[CRON_MAX_LEN + 2];
    if (size > CRON_MAX_LEN + 1) size = CRON_MAX_LEN + 1;
    memcpy(s, data, size);
    s[size] = 0;
    struct cron_sched c;
    char err[200];
    if (cron_parse(s, &c, err, sizeof err)) return 0;
    const int64_t now = 1795776000, after = now - 366 * 86400;
    int64_t t = cron_last(&c, after, now);
    if (t != -1 && (t <= after || t > now || t % 60)) abort();
    return 0;
}
