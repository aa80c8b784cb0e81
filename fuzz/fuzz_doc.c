/* Fuzz target: JSON/YAML documents through every simulator subcommand, which
 * exercises the document reader and every input decoder behind it. */
#include <stdint.h>
#include <stdlib.h>

#include "sim.h"
#include "yamljson.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    char err[512];
    if (size > (1u << 20)) return 0;
    json_t *in = doc_parse((const char *)data, size, err, sizeof err);
    if (!in) return 0;
    json_t *(*const cmds[])(json_t *, char *, size_t) = {sim_entitlement, sim_plan, sim_place};
    for (size_t i = 0; i < sizeof cmds / sizeof cmds[0]; i++) {
        json_t *out = cmds[i](in, err, sizeof err);
        json_decref(out);
    }
    json_decref(in);
    return 0;
}
