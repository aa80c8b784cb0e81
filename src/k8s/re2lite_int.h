/* Internal to re2lite.c (parse, compile) and re2lite_match.c (the VM): the
 * compiled program. Not for other modules. */
#ifndef PELOTON_K8S_RE2LITE_INT_H
#define PELOTON_K8S_RE2LITE_INT_H

#include <stdint.h>

#include "re2lite.h"

#define REGEX_MAX_RUNE 0x10FFFFu
#define REGEX_BAD_RUNE 0xFFFDu /* what an invalid subject byte decodes to */

enum regex_op {
    RX_CHAR,   /* x: the code point */
    RX_CLASS,  /* x: index into cls */
    RX_ANY,    /* any code point but \n */
    RX_SPLIT,  /* go on at x and at y */
    RX_JMP,    /* go on at x */
    RX_ASSERT, /* x: enum regex_assert; go on at pc + 1 when it holds */
    RX_MATCH,
};

enum regex_assert { RX_BEGIN_TEXT, RX_END_TEXT, RX_WORD_BOUNDARY, RX_NOT_WORD_BOUNDARY };

/* 8 bytes: code points need 21 bits and targets 14 (REGEX_MAX_INSTS). */
struct regex_inst {
    uint32_t op : 8;
    uint32_t x : 24;
    uint32_t y;
};

/* A character class: a bitmap for ASCII, sorted disjoint ranges above. */
struct regex_class {
    uint32_t ascii[4];
    uint32_t first, n; /* rng[first, first + n), each lo >= 0x80 */
};

struct regex_range {
    uint32_t lo, hi;
};

/* One allocation: this header, then inst, cls and rng. */
struct regex {
    uint32_t ninst, ncls, nrng;
    bool anchored; /* every match starts at 0: no new thread after the first character */
    struct regex_inst *inst;
    struct regex_class *cls;
    struct regex_range *rng;
    size_t bytes;
};

/* Decodes the code point at s[0, n) (n > 0) into *r and returns its length;
 * a byte that does not start valid UTF-8 is REGEX_BAD_RUNE, 1 byte long, and
 * *valid (may be NULL) is false. */
size_t regex_utf8_decode(const unsigned char *s, size_t n, uint32_t *r, bool *valid);

#endif
