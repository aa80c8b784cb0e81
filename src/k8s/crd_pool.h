/* ResourcePool custom objects (resourcepools.peloton.io/v1alpha1) in the
 * core's terms: decoding one object into a struct respool_config, building the
 * pool tree from all of them (parents resolved by name), admission checks for
 * a create, update or delete, and the status the resource manager writes.
 *
 * In Kubernetes the tree is by name: metadata.name is the pool's name and
 * spec.parent the parent's name (absent, "" or "root": a top-level pool). The
 * core addresses pools by path ("/org/team1"), so a pool's path is its chain
 * of ancestors' names. Names are unique cluster-wide; "root" is reserved.
 *
 * Ownership: every json_t argument is borrowed and never modified. A tree
 * returned through *out belongs to the caller (respool_tree_free). A json_t
 * returned by crd_pool_status is new (json_decref). Errors are 0 or negative
 * errno codes with one line in err (may be NULL) in Kubernetes terms, e.g.
 *   resourcepools.peloton.io "team1": cpu reservation 50 exceeds its limit 40
 * naming the pool, the rule, the kind and the numbers. No global state. */
#ifndef PELOTON_K8S_CRD_POOL_H
#define PELOTON_K8S_CRD_POOL_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

#include "respool.h"

#define CRD_POOL_RESOURCE "resourcepools.peloton.io"
#define CRD_POOL_MAX 100000 /* pools in one tree (bounds the work per check) */
/* The finalizer that keeps a pool marked for deletion (deletionTimestamp)
 * until it has no child pools and holds no work: the API server puts it on
 * every pool, the resource manager takes it off (docs/crds.md, "Deletion"). */
#define CRD_POOL_FINALIZER "peloton.io/pool-protection"

/* Decodes one ResourcePool: its name into name (metadata.name), its parent's
 * name into parent ("" for a top-level pool; "root" is normalised to ""), and
 * spec into *cfg (core defaults for whatever is absent). Checks field types
 * and values (quantities, share >= 0, type ELASTIC|STATIC, percentages,
 * policy, duplicate kinds, unknown fields in spec) but not the tree rules.
 * -EINVAL with a message naming the field; -ENAMETOOLONG when a buffer is
 * too small for a name. */
int crd_pool_decode(const json_t *cr, char *name, size_t namelen, char *parent, size_t parentlen,
                    struct respool_config *cfg, char *err, size_t errlen);

/* Builds the core tree from every ResourcePool object (any order): resolves
 * parents by name (a missing parent or a cycle is refused, naming the pools),
 * then creates pools parents-first with respool_create so that every core
 * rule is checked. Duplicate names are refused. On success *out is a new tree
 * in which each pool's name is its metadata.name and a pool with a
 * metadata.deletionTimestamp is marked deleting; on error *out is NULL. */
int crd_pool_build_tree(const json_t *const *pools, size_t n, struct respool_tree **out, char *err,
                        size_t errlen);

/* Admission for a create (old NULL) or an update (old: the stored object) of
 * candidate, given every stored pool. On update, existing may or may not hold
 * old (whatever carries candidate's name is replaced by it); on create, a
 * stored pool with candidate's name is -EEXIST. Refuses a changed spec.parent
 * (immutable) and anything that would break a tree rule; a new pool whose
 * parent is marked for deletion is -EPERM. When the stored tree itself breaks a rule, the
 * change is allowed only if the tree with it satisfies every rule (so a fix
 * can be applied). 0 = allowed. */
int crd_pool_check_change(const json_t *const *existing, size_t n, const json_t *candidate, const json_t *old,
                          char *err, size_t errlen);

/* Whether the pool called name may be removed now, as far as the stored pools
 * tell: -ENOTEMPTY while another pool names it as parent. Work in the pool
 * is the resource manager's check (it holds the finalizer). */
int crd_pool_check_delete(const json_t *const *existing, size_t n, const char *name, char *err, size_t errlen);

/* The pool in a tree built by crd_pool_build_tree whose name is name (NULL
 * when none). A hash lookup (respool_by_name): constant in the number of
 * pools, so callers may look a pool up per pod. */
struct respool *crd_pool_find(const struct respool_tree *t, const char *name);

/* Whether a stored pool is marked for deletion (metadata.deletionTimestamp). */
bool crd_pool_deleting(const json_t *cr);
/* Whether cr lists CRD_POOL_FINALIZER in metadata.finalizers. */
bool crd_pool_has_finalizer(const json_t *cr);

/* A new status object for pool p: path, entitlement, slackEntitlement,
 * allocation (all classes) and demand per kind as quantity strings, and
 * summary.<kind>.{reservation, limit, entitlement, allocation} (the printer
 * columns' targets). NULL on allocation failure. */
json_t *crd_pool_status(const struct respool *p);

/* Gangs in a pool's subtree: waiting in an admission queue, and holding work
 * (some member bound or admitted); held: the queue head that Admitting
 * reports (the subtree's first leaf in pre-order with a held head,
 * crd_pool_held_head), NULL when none is held. */
struct gang;
struct crd_pool_gangs {
    size_t pending, running;
    const struct gang *held;
};

/* The head of one of leaf's admission queues that was tried and failed a
 * rule (the pending queue first, then the type-specific ones); NULL when
 * none, or when p is not a leaf. */
const struct gang *crd_pool_held_head(const struct respool *leaf);

/* Adds to st (a crd_pool_status object) gangs.{pending, running} and
 * conditions in Kubernetes shape: Admitting (False while g.held: reason AtEntitlement,
 * AtSlackEntitlement, AtControllerLimit, ReservationExhausted or Terminating,
 * message with the numbers), Borrowing (True while allocation exceeds the
 * reservation in some kind, naming it and by how much) and, for a pool
 * marked for deletion, Terminating. A condition keeps the lastTransitionTime
 * it has in prev_conditions (the conditions last written; may be NULL) while
 * its status is unchanged; otherwise it gets now (RFC 3339). 0 or -ENOMEM. */
int crd_pool_status_gangs(json_t *st, const struct respool *p, struct crd_pool_gangs g,
                          const json_t *prev_conditions, const char *now);

#endif
