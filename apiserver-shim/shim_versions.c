/* Kinds served in two versions (kubectl 1.20's generators write the older
 * one: `create pdb` policy/v1beta1, `create cronjob` batch/v1beta1), as
 * views of one stored object, as kube-apiserver 1.20 served them. The store
 * keeps the preferred version's meaning; a request's object is converted in
 * (shim_view_in) and every answer out (shim_view_out, from shim_with_type).
 *
 *   batch/v1beta1 CronJob          the same fields as batch/v1: no change
 *   policy/v1beta1 PDB             an empty selector ({}) selects no pods in
 *                                  v1beta1 but every pod in v1: stored as a
 *                                  selector no pod matches (kube-apiserver's
 *                                  own sentinel requirement), shown as {}
 *                                  again through v1beta1 */
#include <string.h>

#include "shim.h"

#define PDB_NONE_KEY "pdb.kubernetes.io/deprecated-v1beta1-empty-selector-match"

static bool is_pdb_v1beta1(const struct shim_resource *r) {
    return !r->custom && !strcmp(r->group, "policy") && !strcmp(r->version, "v1beta1") &&
           !strcmp(r->plural, "poddisruptionbudgets");
}

bool shim_view_converts(const struct shim_resource *r) { return is_pdb_v1beta1(r); }

/* Whether sel is the sentinel: one Exists requirement on PDB_NONE_KEY and nothing else. */
static bool is_none_selector(const json_t *sel) {
    const json_t *me = json_object_get(sel, "matchExpressions");
    if (json_object_size(sel) != 1 || json_array_size(me) != 1) return false;
    const json_t *req = json_array_get(me, 0);
    const char *k = json_string_value(json_object_get(req, "key"));
    const char *op = json_string_value(json_object_get(req, "operator"));
    return k && op && !strcmp(k, PDB_NONE_KEY) && !strcmp(op, "Exists");
}

json_t *shim_view_in(const struct shim_resource *r, json_t *obj) {
    if (!obj || !is_pdb_v1beta1(r)) return obj;
    json_t *spec = json_object_get(obj, "spec");
    json_t *sel = json_object_get(spec, "selector");
    if (json_is_object(sel) && !json_object_size(sel))
        json_object_set_new(spec, "selector",
                            json_pack("{s:[{s:s, s:s}]}", "matchExpressions", "key", PDB_NONE_KEY, "operator",
                                      "Exists"));
    return obj;
}

json_t *shim_view_out(const struct shim_resource *r, json_t *obj) {
    if (!obj || !is_pdb_v1beta1(r)) return obj;
    json_t *spec = json_object_get(obj, "spec");
    if (is_none_selector(json_object_get(spec, "selector"))) json_object_set_new(spec, "selector", json_object());
    return obj;
}
