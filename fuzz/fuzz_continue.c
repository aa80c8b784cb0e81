/* Fuzz target: list continue tokens (untrusted: clients send them back), and
 * an encode/decode roundtrip of what the input decodes to. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "store_int.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    char tok[8192];
    if (size >= sizeof tok) size = sizeof tok - 1;
    memcpy(tok, data, size);
    tok[size] = 0;
    uint64_t rv;
    char *start = NULL, err[256];
    if (store_continue_decode(tok, "pods", "default", &rv, &start, err, sizeof err) == 0) {
        char *again = store_continue_encode("pods", "default", rv, start);
        uint64_t rv2;
        char *start2 = NULL;
        if (!again || store_continue_decode(again, "pods", "default", &rv2, &start2, err, sizeof err) != 0 ||
            rv2 != rv || strcmp(start, start2) != 0)
            abort();
        free(again);
        free(start2);
    }
    free(start);
    return 0;
}
