/* A Lease renewal written as an edit of the stored Lease's text (issue #25).
 *
 * A Kubelet renews its node's Lease every few seconds with a patch of
 * spec.renewTime (and holderIdentity, leaseDurationSeconds); at 50,000 nodes
 * that is thousands of writes a second. The generic write decodes the stored
 * object, merges the patch, validates, shapes and encodes it again. For the
 * renewal's patch over a Lease as the API server stores it, the result is the
 * stored text with a few values replaced (the patched spec fields and
 * metadata.generation, bumped because spec changed), so lease_text_renew
 * writes those bytes directly: the same bytes the generic path stores, or it
 * declines and the generic path runs.
 *
 * It declines (-EAGAIN) whenever the generic path could do anything else:
 * a patch with other keys, types or null values, a field the stored spec
 * lacks, a patch that changes nothing; a stored text that is not a plain
 * Lease as written by the store (kind and apiVersion, name and namespace as
 * keyed, metadata.generation an integer, metadata.resourceVersion its last
 * member, no status, no deletionTimestamp, labels or annotations (the only
 * fields validation reads on a Lease), no empty metadata list or map, no
 * escaped or repeated key). The text is scanned, not trusted: bounded depth
 * and member counts, anything malformed declines. */
#ifndef PELOTON_K8S_LEASE_TEXT_H
#define PELOTON_K8S_LEASE_TEXT_H
#include <jansson.h>
#include <stddef.h>

struct lease_renewal {
    char *text;      /* the new object (malloc'ed; the caller frees), its resourceVersion's value cut out */
    size_t len;      /* its length */
    size_t rv_at;    /* where the resourceVersion's value goes (after its opening quote) */
    char rv[24];     /* the stored resourceVersion (the text's), the version a compare-and-set expects */
    const char *patch_rv; /* the resourceVersion the patch names (in patch), or NULL: unconditional */
};

/* text (len bytes): a stored Lease keyed ns/name; patch: a JSON merge patch
 * (or a strategic merge patch: the same over these scalar fields). 0 and *out
 * filled; -EAGAIN: not a renewal this edit makes (take the generic path);
 * -ENOMEM. */
int lease_text_renew(const char *text, size_t len, const char *ns, const char *name, const json_t *patch,
                     struct lease_renewal *out);

#endif
