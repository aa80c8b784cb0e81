/* peloton-sim subcommands. Each takes the decoded input document (JSON, or YAML
 * converted to JSON) and returns a new output document that the caller frees
 * with json_decref, or NULL with a one-line message in err (the command then
 * exits non-zero and prints nothing on stdout). The input is borrowed. */
#ifndef PELOTON_SIM_H
#define PELOTON_SIM_H

#include <jansson.h>
#include <stddef.h>

json_t *sim_entitlement(json_t *in, char *err, size_t errlen);
json_t *sim_plan(json_t *in, char *err, size_t errlen);
json_t *sim_place(json_t *in, char *err, size_t errlen);

#endif
