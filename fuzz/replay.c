/* A libFuzzer-free driver for the fuzz targets, used by `make test`: runs
 * every corpus file given on the command line, then a fixed number of
 * deterministic mutations of them (byte flips, inserts, deletes, splices).
 * A crash or sanitizer report fails the run; it prints the summary line. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static uint64_t rs = 0x12345678;
static uint64_t rnd(void) {
    rs ^= rs << 13;
    rs ^= rs >> 7;
    rs ^= rs << 17;
    return rs;
}

int main(int argc, char **argv) {
    const char *name = getenv("FUZZ_NAME") ? getenv("FUZZ_NAME") : "fuzz";
    long iters = getenv("FUZZ_ITERS") ? atol(getenv("FUZZ_ITERS")) : 20000;
    static uint8_t files[256][8192];
    size_t lens[256];
    int n = 0;
    for (int i = 1; i < argc && n < 256; i++) {
        FILE *f = fopen(argv[i], "rb");
        if (!f) continue;
        lens[n] = fread(files[n], 1, sizeof files[n], f);
        fclose(f);
        LLVMFuzzerTestOneInput(files[n], lens[n]);
        n++;
    }
    if (n == 0) {
        printf("%s: 0 passed, 1 failed (no corpus)\n", name);
        return 1;
    }
    static uint8_t buf[16384];
    for (long it = 0; it < iters; it++) {
        int a = (int)(rnd() % (uint64_t)n);
        size_t len = lens[a];
        memcpy(buf, files[a], len);
        int muts = 1 + (int)(rnd() % 4);
        for (int m = 0; m < muts; m++) {
            size_t pos = len ? rnd() % len : 0;
            switch (rnd() % 5) {
            case 0: if (len) buf[pos] ^= (uint8_t)(1u << (rnd() % 8)); break;
            case 1: if (len) buf[pos] = (uint8_t)rnd(); break;
            case 2: if (len + 1 < sizeof buf) { memmove(buf + pos + 1, buf + pos, len - pos); buf[pos] = "{}[]:,\"-.0123456789eEKMGimn \n"[rnd() % 29]; len++; } break;
            case 3: if (len) { memmove(buf + pos, buf + pos + 1, len - pos - 1); len--; } break;
            default: { /* splice another file's tail */
                int b = (int)(rnd() % (uint64_t)n);
                size_t from = lens[b] ? rnd() % lens[b] : 0, take = lens[b] - from;
                if (pos + take < sizeof buf) { memcpy(buf + pos, files[b] + from, take); len = pos + take; }
            }
            }
        }
        LLVMFuzzerTestOneInput(buf, len);
    }
    printf("%s: %d passed, 0 failed (%d corpus files, %ld mutations)\n", name, n, n, iters);
    return 0;
}
