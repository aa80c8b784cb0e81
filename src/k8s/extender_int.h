/* What extender.c shares with extender_fast.c (not a public interface). */
#ifndef PELOTON_K8S_EXTENDER_INT_H
#define PELOTON_K8S_EXTENDER_INT_H
#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

/* Go's case-insensitive field match (Unicode simple folding) of key against name. */
bool key_is(const char *key, const char *name);
/* Whether v nests at most `left` levels deep. */
bool depth_ok(const json_t *v, int left);
/* A name's length and bytes are acceptable (what names it in err). */
int check_name(const char *s, size_t len, const char *what, bool allow_empty, char *err, size_t errlen);

#endif
