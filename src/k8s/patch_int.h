/* Shared by patch.c and patch_strategic.c: the account a patch keeps while it
 * applies (patch_budget.c). The patched document's size is known at every
 * step (measured once at the start, then changed by what each step adds and
 * removes) so that a patch is refused as soon as the document passes the
 * limits, not after it has been built; work that is not proportional to the
 * inputs (copies, list scans, array shifts) is charged as it is done. */
#ifndef PELOTON_K8S_PATCH_INT_H
#define PELOTON_K8S_PATCH_INT_H

#include <stdbool.h>

#include "patch.h"

/* What work costs, in steps of about 10 ns (the step of PATCH_MAX_WORK),
 * measured on jansson with jemalloc: copying a value (and freeing it later)
 * PATCH_STEPS_COPY (patch.h); walking one to measure it; comparing two
 * list elements' merge keys (a lookup and a comparison), plus a step per
 * CMP_BYTES_PER_STEP bytes of strings; adding a list element to an index of
 * merge keys or looking one up (patch_keyidx.h: hashing a scalar key, its
 * slot, its bucket), plus a step per further value and per
 * CMP_BYTES_PER_STEP bytes hashed; each further slot or bucket entry passed;
 * moving SHIFTS_PER_STEP array elements (an insert or remove before the
 * end). */
#define PATCH_STEPS_WALK 4
#define PATCH_STEPS_CMP 2
#define PATCH_STEPS_INDEX 6
#define PATCH_STEPS_PROBE 1
#define CMP_BYTES_PER_STEP 64
#define SHIFTS_PER_STEP 64

/* The estimate of one value (patch_estimate's figures). */
struct patch_size {
    size_t bytes, nodes;
    int depth;
};

struct patch_budget {
    struct patch_limits lim;
    size_t bytes, nodes; /* the document as it stands */
    size_t work;
    const char *what; /* names the patch (or operation) in messages */
    char *err;
    size_t errlen;
};

/* lim NULL: the defaults (PATCH_LIMITS_DEFAULT). */
void pb_init(struct patch_budget *b, const struct patch_limits *lim, const char *what, char *err, size_t errlen);

/* The size of v (NULL: nothing) with, for an object member, its key. */
struct patch_size pb_value(const json_t *v);
struct patch_size pb_member(const char *key, const json_t *v);
struct patch_size pb_element(const json_t *v);
/* What an array or object holds: its size less its own brackets and node. */
struct patch_size pb_inside(const json_t *v);

/* Takes doc as the document (sz, may be NULL, gets its size): 0, or -E2BIG
 * when it is already past a limit. */
int pb_start(struct patch_budget *b, const json_t *doc, struct patch_size *sz);

/* The document gains sz placed `at` containers deep: 0, or -E2BIG with the
 * message in b->err when it passes a limit. */
int pb_grow(struct patch_budget *b, struct patch_size sz, int at);
/* Whether the document could gain add, placed `at` deep, and lose minus:
 * 0, or -E2BIG with the message pb_grow would give. Changes nothing. */
int pb_fits(const struct patch_budget *b, struct patch_size add, struct patch_size minus, int at);
/* The document loses sz. */
void pb_shrink(struct patch_budget *b, struct patch_size sz);
/* Whether a value placed `at` containers deep, sz.depth deep itself, fits. */
int pb_depth_ok(struct patch_budget *b, int at, int depth);

/* Spends steps of work: 0, or -E2BIG once the patch has spent more than
 * lim.max_work. */
int pb_charge(struct patch_budget *b, size_t steps);

/* Strategic merge patch under lim (patch_strategic.c; patch_apply's). */
int patch_strategic_lim(const json_t *target, const json_t *patch, const struct patch_limits *lim, json_t **out,
                        char *err, size_t errlen, struct patch_size *tracked, size_t *work);

/* patch_apply that also says, on success, the size the budget held for the
 * result at the end (tracked may be NULL): the tests and the fuzz target
 * check it equals pb_value(*out), so that no step escapes the account. */
int patch_apply_tracked(enum patch_type type, const json_t *target, const json_t *patch,
                        const struct patch_limits *lim, json_t **out, char *err, size_t errlen,
                        struct patch_size *tracked);
/* patch_apply_tracked that also says, on success, the steps of work the
 * patch was charged (work may be NULL): the tests check how it grows. */
int patch_apply_counted(enum patch_type type, const json_t *target, const json_t *patch,
                        const struct patch_limits *lim, json_t **out, char *err, size_t errlen,
                        struct patch_size *tracked, size_t *work);

#endif
