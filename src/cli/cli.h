/* The `peloton` command line: Peloton's CLI over the native API
 * (docs/cli.md). Commands are rows of one table (clicmd.c): a path of words
 * ("job create"), its arguments, its flags and a function; parsing, --help at
 * every level and the usage errors come from the table alone (climain.c).
 *
 * Exit codes: CLI_OK 0; CLI_ERR 1, the server answered with an error (one
 * line naming its code); CLI_USAGE 2, bad flags, arguments or input files;
 * CLI_UNREACHABLE 3, no answer (connection refused, timeout, not a Peloton
 * endpoint). */
#ifndef PELOTON_CLI_CLI_H
#define PELOTON_CLI_CLI_H

#include <jansson.h>
#include <stdbool.h>
#include <stdio.h>

#include "clirpc.h"

enum { CLI_OK = 0, CLI_ERR = 1, CLI_USAGE = 2, CLI_UNREACHABLE = 3 };

#define CLI_MAX_FLAGS 16
#define CLI_MAX_ARGS 8

/* A flag given more than once: its values joined with ',' (-r 0:2 -r 4:6 reads as 0:2,4:6). */
#define CLI_VALUES 2

enum cli_target { CLI_JOBMGR, CLI_RESMGR, CLI_HOSTMGR };

struct cli_flag {
    const char *name; /* long name, without "--" */
    char short_name;  /* 0: none */
    int takes_value;  /* false: a switch; true: a value; CLI_VALUES: a value that may repeat */
    const char *def;  /* default value shown in help; NULL: none */
    const char *help;
};

struct cli_inv;
struct cli;

struct cli_cmd {
    const char *path; /* "job create" */
    const char *args; /* "<respool-path> <config.yaml>" */
    const char *help;
    int min_args, max_args;
    const struct cli_flag *flags; /* ends with a zeroed row; NULL: none */
    int (*run)(struct cli *c, const struct cli_inv *in);
    bool unserved; /* its method is not served by pelotond yet (docs/cli.md) */
};

/* One parsed command line. */
struct cli_inv {
    const struct cli_cmd *cmd;
    int argc;
    const char *argv[CLI_MAX_ARGS];
    const char *val[CLI_MAX_FLAGS]; /* by the flag's row; NULL: not given (a switch: "true") */
};

struct cli {
    const char *url[3]; /* by enum cli_target */
    bool json;
    long timeout_ms;
    struct clirpc rpc;
    FILE *out, *err;
};

extern const struct cli_cmd cli_cmds[];

/* The whole program: parses argv, runs the command, returns the exit code. */
int cli_main(int argc, char **argv);

/* A flag's value (its default when not given; NULL when neither). */
const char *cli_flag(const struct cli_inv *in, const char *name);
bool cli_switch(const struct cli_inv *in, const char *name);

/* One call; prints any failure (one line) and returns CLI_OK or the exit
 * code. Errors the reply carries (an `error` member, or v0's top-level
 * notFound / outOfRange) are failures too. On CLI_OK *resp is the reply. */
int cli_call(struct cli *c, enum cli_target t, const struct clirpc_method *m, json_t *req, json_t **resp);

/* Instance ranges "from:to[,from:to...]" (to excluded) appended to out as
 * InstanceRange JSON. An empty from is 0; an empty to is count; ":" alone
 * is every instance (nothing appended). 0: done; -1: a part is not a range
 * or its from is not below its to (bad: that part); 1: an open end and
 * count < 0 (call again with the job's count). */
int cli_ranges(const char *spec, long long count, json_t *out, char *bad, size_t badlen);

/* Output (cliout.c). */
void cli_print_json(struct cli *c, const json_t *v);
void cli_print_yaml(FILE *f, const json_t *v, int indent);
/* A string for a table cell from the member at a dotted path ("runtime.state"); "" when absent. */
const char *cli_str(const json_t *v, const char *path, char *buf, size_t len);
/* Tables: rows of cells, columns as wide as their widest cell. */
struct cli_table;
struct cli_table *cli_table_new(int ncols, const char *const *heads);
void cli_table_add(struct cli_table *t, const char *const *cells);
void cli_table_print(struct cli_table *t, FILE *f);
void cli_table_free(struct cli_table *t);

int cli_usage_error(struct cli *c, const struct cli_cmd *cmd, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

#endif
