/* peloton-sim: the offline simulator. Reads a JSON or YAML document, runs one
 * part of the scheduler's core on it, and prints the result as JSON.
 *
 *   peloton-sim entitlement FILE   pools + capacity -> entitlement per pool
 *   peloton-sim plan FILE          + running tasks and pending gangs -> a round
 *   peloton-sim place FILE         hosts + gangs -> placements and reasons
 *
 * FILE "-" reads stdin. Exit 0 with JSON on stdout; 1 with one line on stderr
 * and nothing on stdout when the input is refused; 2 on usage errors. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sim.h"
#include "yamljson.h"

struct subcommand {
    const char *name;
    json_t *(*run)(json_t *in, char *err, size_t errlen);
    const char *help;
};

static const struct subcommand commands[] = {
    {"entitlement", sim_entitlement, "pools and capacity in; each pool's entitlement out"},
    {"plan", sim_plan, "a scheduling round: entitlement, admission and the preemption plan"},
    {"place", sim_place, "hosts and gangs in; placements and failure reasons out"},
};

static void usage(FILE *f) {
    fprintf(f, "usage: peloton-sim COMMAND FILE   (FILE is JSON or YAML; - reads stdin)\n\ncommands:\n");
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        fprintf(f, "  %-12s %s\n", commands[i].name, commands[i].help);
    fprintf(f, "\nInput and output formats: docs/simulator.md\n");
}

int main(int argc, char **argv) {
    if (argc == 2 && (!strcmp(argv[1], "-h") || !strcmp(argv[1], "--help"))) {
        usage(stdout);
        return 0;
    }
    if (argc != 3) {
        usage(stderr);
        return 2;
    }
    const struct subcommand *cmd = NULL;
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        if (!strcmp(argv[1], commands[i].name)) cmd = &commands[i];
    if (!cmd) {
        fprintf(stderr, "peloton-sim: unknown command \"%s\"\n", argv[1]);
        usage(stderr);
        return 2;
    }
    char err[512] = "";
    json_t *in = doc_load_file(argv[2], err, sizeof err);
    if (!in) {
        fprintf(stderr, "peloton-sim: %s\n", err);
        return 1;
    }
    json_t *out = cmd->run(in, err, sizeof err);
    json_decref(in);
    if (!out) {
        fprintf(stderr, "peloton-sim: %s\n", err[0] ? err : "failed");
        return 1;
    }
    char *s = json_dumps(out, JSON_INDENT(2));
    json_decref(out);
    if (!s) {
        fprintf(stderr, "peloton-sim: out of memory\n");
        return 1;
    }
    puts(s);
    free(s);
    return 0;
}
