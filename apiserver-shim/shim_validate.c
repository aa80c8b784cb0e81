/* Validation of what a write would store (src/k8s/validate.h), the same on
 * every write path: create and server-side apply's create (do_create),
 * update (do_update), and every patch type with server-side apply's merge
 * (shim_write.c's patch_fn, which the dry run shares). A refusal is
 * kube-apiserver's 422 Invalid naming the fields. */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "shim.h"
#include "shim_auth.h"
#include "validate.h"

int shim_validate(const struct shim_resource *r, json_t *obj, const char *name, char *msg, size_t msglen,
                  json_t **details) {
    *details = NULL;
    struct schema_result res = {0};
    int rc = validate_object(r->group, r->kind, obj, &res);
    if (!rc) rc = shim_workload_check(r, obj, name, msg, msglen, details); /* defaults, and what is not translated */
    if (rc && *details) {
        schema_result_free(&res);
        return rc;
    }
    if (!rc && !strcmp(r->group, "rbac.authorization.k8s.io")) /* shim_rbac.c */
        rc = rbac_validate(r->kind, obj, &res) ? -ENOMEM : res.n ? -EINVAL : 0;
    if (rc == -EINVAL) {
        char why[1024];
        schema_result_format(&res, why, sizeof why);
        snprintf(msg, msglen, "%s \"%s\" is invalid: %s", r->kind, name, why);
        *details = json_pack("{s:s, s:s, s:s, s:o*}", "name", name, "group", r->group, "kind", r->kind, "causes",
                             schema_result_causes(&res));
    } else if (rc) {
        snprintf(msg, msglen, "validating %s \"%s\": out of memory", r->kind, name);
    }
    schema_result_free(&res);
    return rc;
}

bool shim_refuse_invalid(const struct shim_resource *r, json_t *obj, const char *name, struct http_response *resp) {
    char msg[1024];
    json_t *d;
    int rc = shim_validate(r, obj, name, msg, sizeof msg, &d);
    if (rc == -EINVAL) shim_status(resp, 422, "Invalid", d, "%s", msg);
    else if (rc) shim_status(resp, 500, "InternalError", NULL, "%s", msg);
    return rc != 0;
}
