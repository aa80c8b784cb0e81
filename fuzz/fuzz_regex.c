/* Fuzz target: the input splits at its first NUL into a pattern and a
 * subject (any bytes, UTF-8 or not). A pattern is compiled or refused with a
 * message; a compiled one is searched for in the subject. Checks that a
 * refusal explains itself and returns nothing, that the program stays within
 * REGEX_MAX_INSTS, that a search is deterministic, answers 0 or 1 and visits
 * at most (len + 1) x 3 x instructions states (linear time, whatever the
 * pattern), that a budget is honoured, and that wrapping the pattern in a
 * group changes nothing. */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "re2lite.h"

#define FUZZ_STEPS 100000 /* per search: keeps each input fast; more is -E2BIG */

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const uint8_t *nul = memchr(data, 0, size);
    if (!nul) return 0;
    size_t plen = (size_t)(nul - data), slen = size - plen - 1;
    const char *pattern = (const char *)data, *s = (const char *)nul + 1;
    struct regex *re = (struct regex *)&re; /* anything but NULL: compile must clear it */
    char err[256];
    err[0] = 0;
    int rc = regex_compile(pattern, &re, err, sizeof err);
    if (rc) {
        if (re || !err[0] || (rc != -EINVAL && rc != -E2BIG && rc != -ENOMEM)) abort();
        return 0;
    }
    size_t insts = regex_insts(re);
    if (!re || insts < 1 || insts > REGEX_MAX_INSTS || regex_bytes(re) < insts * 8) abort();
    size_t a = 0, b = 0;
    int ra = regex_match(re, s, slen, &a, FUZZ_STEPS), rb = regex_match(re, s, slen, &b, FUZZ_STEPS);
    if (ra != rb || a != b) abort(); /* read-only and deterministic */
    if (ra != 0 && ra != 1 && ra != -E2BIG) abort();
    if (ra >= 0 && a > (slen + 1) * 3 * insts) abort(); /* linear */
    if (ra == -E2BIG && a <= FUZZ_STEPS) abort();
    size_t c = 0;
    int rsmall = regex_match(re, s, slen, &c, a / 2); /* half the steps: no answer, or the same */
    if (rsmall != ra && rsmall != -E2BIG) abort();
    regex_free(re);

    /* (?:P) is P (unless P ends inside \Q..., which would quote the paren) */
    if (plen + 5 <= REGEX_MAX_LEN && !strstr(pattern, "\\Q")) {
        char *wrapped = malloc(plen + 5);
        if (!wrapped) return 0;
        snprintf(wrapped, plen + 5, "(?:%s)", pattern);
        int wc = regex_compile(wrapped, &re, err, sizeof err);
        if (wc == 0) {
            size_t d = 0;
            int rw = regex_match(re, s, slen, &d, FUZZ_STEPS);
            if (ra >= 0 && rw >= 0 && rw != ra) abort();
            regex_free(re);
        } else if (wc != -E2BIG) { /* only a depth limit can refuse it now */
            abort();
        }
        free(wrapped);
    }
    return 0;
}
