/* peloton-sim entitlement: pools and capacity in, every pool's entitlement out. */
#include <stdio.h>

#include "entitle.h"
#include "sim.h"
#include "simjson.h"
#include "simpools.h"

json_t *sim_entitlement(json_t *in, char *err, size_t errlen) {
    static const char *const known[] = {"capacity", "slackCpu", "pools", NULL};
    if (json_is_object(in) && sj_known_keys(in, known, "input", err, errlen)) return NULL;
    struct respool_tree *t;
    struct sim_cluster cl;
    if (sim_load_pools(in, &t, &cl, err, errlen)) return NULL;
    if (respool_entitle(t, cl.capacity, cl.slack_cpu)) {
        snprintf(err, errlen, "out of memory");
        respool_tree_free(t);
        return NULL;
    }
    json_t *out = json_object();
    json_object_set_new(out, "pools", sim_pools_out(t));
    respool_tree_free(t);
    return out;
}
