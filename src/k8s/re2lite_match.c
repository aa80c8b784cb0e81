/* Matching: the program (re2lite.c) run as a set of states, one step per
 * character of the subject (a Pike VM without captures). The states of a
 * position are a list plus a mark per instruction, so a state is visited at
 * most once per position whatever the pattern: time is O(len x insts) and
 * scratch is 16 bytes per instruction, with no backtracking to blow up. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "jparse.h"
#include "re2lite_int.h"

size_t regex_utf8_decode(const unsigned char *s, size_t n, uint32_t *r, bool *valid) {
    size_t k = jparse_utf8_len(s, s + n);
    if (valid) *valid = k != 0;
    switch (k) {
    case 0: *r = REGEX_BAD_RUNE; return 1;
    case 1: *r = s[0]; break;
    case 2: *r = (uint32_t)(s[0] & 0x1F) << 6 | (s[1] & 0x3F); break;
    case 3: *r = (uint32_t)(s[0] & 0x0F) << 12 | (uint32_t)(s[1] & 0x3F) << 6 | (s[2] & 0x3F); break;
    default:
        *r = (uint32_t)(s[0] & 0x07) << 18 | (uint32_t)(s[1] & 0x3F) << 12 | (uint32_t)(s[2] & 0x3F) << 6 |
             (s[3] & 0x3F);
    }
    return k;
}

/* Where an empty-width assertion is evaluated: between prev and next (-1
 * beyond either end of the text). */
struct where {
    bool begin, end;
    int32_t prev, next;
};

struct vm {
    const struct regex *re;
    uint32_t *mark;  /* per instruction: the generation of the list that holds it */
    uint32_t *stack; /* instructions to follow; each is pushed once per generation */
    uint32_t gen;
    size_t steps;
};

static bool is_word(int32_t r) {
    return (r >= '0' && r <= '9') || (r >= 'A' && r <= 'Z') || (r >= 'a' && r <= 'z') || r == '_';
}

static bool holds(uint32_t kind, const struct where *w) {
    switch (kind) {
    case RX_BEGIN_TEXT: return w->begin;
    case RX_END_TEXT: return w->end;
    case RX_WORD_BOUNDARY: return is_word(w->prev) != is_word(w->next);
    default: return is_word(w->prev) == is_word(w->next);
    }
}

static bool class_has(const struct regex *re, const struct regex_class *c, uint32_t r) {
    if (r < 0x80) return c->ascii[r >> 5] >> (r & 31) & 1;
    const struct regex_range *a = re->rng + c->first;
    size_t lo = 0, hi = c->n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (r < a[mid].lo) hi = mid;
        else if (r > a[mid].hi) lo = mid + 1;
        else return true;
    }
    return false;
}

/* Adds pc, and every state reachable from it without consuming a character,
 * to list (the states at one position, of generation m->gen); states already
 * in it are skipped. Only states that consume are kept in list. Returns true
 * when the match state is reached: the search is over. */
static bool follow(struct vm *m, uint32_t pc, uint32_t *list, uint32_t *n, const struct where *w) {
    uint32_t sp = 0;
#define PUSH(t)                                   \
    do {                                          \
        uint32_t t_ = (t);                        \
        if (m->mark[t_] != m->gen) {              \
            m->mark[t_] = m->gen;                 \
            m->stack[sp++] = t_;                  \
        }                                         \
    } while (0)
    PUSH(pc);
    while (sp) {
        pc = m->stack[--sp];
        m->steps++;
        const struct regex_inst *in = &m->re->inst[pc];
        switch (in->op) {
        case RX_JMP: PUSH(in->x); break;
        case RX_SPLIT:
            PUSH(in->y);
            PUSH(in->x);
            break;
        case RX_ASSERT:
            if (holds(in->x, w)) PUSH(pc + 1);
            break;
        case RX_MATCH: return true;
        default: list[(*n)++] = pc;
        }
    }
#undef PUSH
    return false;
}

/* Whether the consuming state at pc accepts r. */
static bool accepts(const struct regex *re, const struct regex_inst *in, uint32_t r) {
    switch (in->op) {
    case RX_CHAR: return r == in->x;
    case RX_CLASS: return class_has(re, &re->cls[in->x], r);
    default: return r != '\n'; /* RX_ANY */
    }
}

#define VM_STACK_INSTS 128 /* programs this small keep their scratch on the stack */

int regex_match(const struct regex *re, const char *s, size_t len, size_t *steps, size_t max_steps) {
    uint32_t small[4 * VM_STACK_INSTS], *buf = small;
    size_t n = re->ninst;
    if (n > VM_STACK_INSTS && !(buf = malloc(4 * n * sizeof *buf))) return -ENOMEM;
    struct vm m = {.re = re, .mark = buf, .stack = buf + n, .gen = 1};
    uint32_t *cur = buf + 2 * n, *next = buf + 3 * n, ncur = 0, nnext;
    memset(m.mark, 0, n * sizeof *m.mark);
    size_t budget = max_steps > *steps ? max_steps - *steps : 0;
    const unsigned char *u = (const unsigned char *)s;
    size_t pos = 0, w = 0;
    uint32_t r = 0;
    int32_t prev = -1, c = -1;
    if (len) {
        w = regex_utf8_decode(u, len, &r, NULL);
        c = (int32_t)r;
    }
    int rc = 0;
    for (;;) {
        struct where here = {pos == 0, pos == len, prev, c};
        /* a new attempt starts at each position, unless matches can only start at 0 */
        if ((pos == 0 || !re->anchored) && follow(&m, 0, cur, &ncur, &here)) {
            rc = 1;
            break;
        }
        if (m.steps > budget) {
            rc = -E2BIG;
            break;
        }
        if (pos == len || (ncur == 0 && re->anchored)) break;
        size_t npos = pos + w, nw = 0;
        int32_t nc = -1;
        if (npos < len) {
            nw = regex_utf8_decode(u + npos, len - npos, &r, NULL);
            nc = (int32_t)r;
        }
        if (++m.gen == 0) { /* after 2^32 positions: start the marks afresh */
            memset(m.mark, 0, n * sizeof *m.mark);
            m.gen = 1;
        }
        struct where there = {false, npos == len, c, nc};
        nnext = 0;
        for (uint32_t i = 0; i < ncur && rc == 0; i++) {
            m.steps++;
            const struct regex_inst *in = &re->inst[cur[i]];
            if (accepts(re, in, (uint32_t)c) && follow(&m, cur[i] + 1, next, &nnext, &there)) rc = 1;
        }
        if (rc) break;
        uint32_t *t = cur;
        cur = next;
        next = t;
        ncur = nnext;
        pos = npos;
        w = nw;
        prev = c;
        c = nc;
    }
    *steps += m.steps;
    if (buf != small) free(buf);
    return rc;
}
