/* An index of a JSON array's elements by identity, for strategic merge patch
 * (patch_strategic.c), so that merging two lists costs expected O(n + m)
 * rather than n x m merge-key comparisons.
 *
 * An element's identity is the value of its merge key (key non-NULL: an
 * element without the key, or not an object, has none and is never found)
 * or, for lists of scalars, the element itself. keyidx_find gives the first
 * indexed position whose identity patch_value_equal's the value asked for:
 * what a scan of the list from its start would find.
 *
 * Buckets hold the positions whose identities hash alike, in list order, and
 * a find compares each with patch_value_equal until one is equal; the hash
 * only agrees with that equality (equal values hash alike: a number as its
 * double, -0.0 as 0, an object as a sum over its members, values nested past
 * PATCH_MAX_DEPTH as one constant). A map of canonical key strings could not
 * do this: patch_value_equal is not an equivalence (the integer 2^53 + 1
 * equals the real 2^53, which equals the integer 2^53, and the two integers
 * differ), objects are equal in any member order, and an identity can change
 * while its list merges (a null or object merge key loses members as it is
 * merged into; the caller then adds the position again, which moves it).
 *
 * Work: every add and find charges the patch's budget (patch_int.h) for
 * hashing the identity (PATCH_STEPS_INDEX, and a step a further value and per
 * CMP_BYTES_PER_STEP bytes of strings), for every slot and chain entry
 * visited past the first (PATCH_STEPS_PROBE) and for every comparison
 * (PATCH_STEPS_CMP and the identity's size), so identities made to collide
 * spend the patch's budget, not the server's loop.
 *
 * Ownership: the index borrows list (which may grow and change while it is
 * indexed: identities are read as they are when looked at), key and budget;
 * keyidx_free frees what the index holds. */
#ifndef PELOTON_K8S_PATCH_KEYIDX_H
#define PELOTON_K8S_PATCH_KEYIDX_H

#include <jansson.h>
#include <stdint.h>

#include "patch_int.h"

struct keyidx_bucket {
    uint64_t hash;
    size_t head, tail; /* positions; KEYIDX_NONE when emptied */
    bool used;         /* the slot holds a bucket (emptied ones too) */
};

struct keyidx_pos {
    uint64_t hash;
    size_t next, prev; /* the bucket's chain, in position order */
    bool linked;
};

struct keyidx {
    const json_t *list;
    const char *key;
    struct patch_budget *b;
    struct keyidx_bucket *tab; /* open addressing on the hash, at most half full */
    size_t cap, nb;            /* slots, slots used */
    struct keyidx_pos *pos;    /* by list position */
    size_t npos;
};

#define KEYIDX_NONE SIZE_MAX

/* The identity of list element e: its member key, or e itself (key NULL). */
static inline const json_t *keyidx_id(const json_t *e, const char *key) { return key ? json_object_get(e, key) : e; }

/* An empty index of list by key (NULL: the elements themselves), sized for
 * about hint positions (it grows past them). 0 or -ENOMEM (message set). */
int keyidx_init(struct keyidx *x, const json_t *list, const char *key, size_t hint, struct patch_budget *b);
void keyidx_free(struct keyidx *x);

/* Indexes list position pos under its identity as it is now (a position
 * indexed before is moved; one whose identity is gone is forgotten). 0,
 * -E2BIG when the budget is spent, -ENOMEM (message set). */
int keyidx_add(struct keyidx *x, size_t pos);
/* keyidx_add for positions [0, n). */
int keyidx_add_all(struct keyidx *x, size_t n);

/* The first indexed position whose identity equals id, as
 * patch_value_equal(identity, id) says: >= 0; -1 when none or id is NULL;
 * -E2BIG (message set) when the budget is spent. */
long keyidx_find(struct keyidx *x, const json_t *id);
/* The first indexed position whose identity is a string whose text is s, as
 * strcmp compares (the list holds strings: $retainKeys). */
long keyidx_find_text(struct keyidx *x, const char *s);
#define KEYIDX_FAILED(r) ((r) < -1)

#endif
