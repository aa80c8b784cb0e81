/* A string-keyed hash map of pointers (open addressing, linear probing,
 * tombstones). Keys are copied; values are the caller's. Iteration order is
 * unspecified; deleting during strmap_next iteration is allowed. */
#ifndef PELOTON_UTIL_STRMAP_H
#define PELOTON_UTIL_STRMAP_H
#include <stddef.h>
#include <stdint.h>

struct strmap_slot {
    char *key; /* NULL: empty; STRMAP_TOMB: deleted */
    void *val;
    uint64_t hash;
};
struct strmap {
    struct strmap_slot *s;
    size_t cap, n, used; /* used: live + tombstones */
};

void *strmap_get(const struct strmap *m, const char *key);
/* Inserts or replaces; *old (optional) gets the replaced value or NULL. -ENOMEM. */
int strmap_put(struct strmap *m, const char *key, void *val, void **old);
/* Removes key; returns its value or NULL. */
void *strmap_del(struct strmap *m, const char *key);
/* Iteration: start with *pos = 0; returns 0 at the end. */
int strmap_next(const struct strmap *m, size_t *pos, const char **key, void **val);
static inline size_t strmap_count(const struct strmap *m) { return m->n; }
void strmap_free(struct strmap *m);
uint64_t strmap_hash(const char *s);

#endif
