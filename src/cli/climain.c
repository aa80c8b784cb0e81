/* The CLI's driver: global flags, the command found by its words in
 * cli_cmds, its flags and arguments, --help at every level, the call and
 * the exit code. */
#include <ctype.h>
#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "cliyaml.h"

#define DEFAULT_URL "127.0.0.1:5392" /* pelotond's one native port; Peloton's job manager's */
#define MAX_TOKEN 8192

static const struct cli_flag global_flags[] = {
    {"json", 'j', false, NULL, "print the full replies as JSON"},
    {"jobmgr", 'm', true, DEFAULT_URL, "job manager address, host:port or URL ($JOBMGR_URL)"},
    {"resmgr", 'v', true, "the --jobmgr address", "resource manager address ($RESMGR_URL)"},
    {"hostmgr", 'u', true, "the --jobmgr address", "host manager address ($HOSTMGR_URL)"},
    {"timeout", 't', true, "20s", "timeout of each call: 500ms, 20s, 2m ($TIMEOUT)"},
    {"token", 0, true, NULL, "bearer token sent with every call ($PELOTON_TOKEN)"},
    {"token-file", 0, true, NULL, "file holding the bearer token ($PELOTON_TOKEN_FILE)"},
    {"cacert", 0, true, NULL, "https:// addresses: the CA certificates (PEM) to verify the server with ($PELOTON_CACERT)"},
    {"cert", 0, true, NULL, "https:// addresses: a client certificate (PEM) to present ($PELOTON_CERT)"},
    {"key", 0, true, NULL, "the client certificate's key (PEM) ($PELOTON_KEY)"},
    {"help", 'h', false, NULL, "show help for the command"},
    {0},
};
enum { G_JSON, G_JOBMGR, G_RESMGR, G_HOSTMGR, G_TIMEOUT, G_TOKEN, G_TOKEN_FILE, G_CACERT, G_CERT, G_KEY, G_HELP, G_N };

static const struct {
    const char *path, *help;
} groups[] = {
    {"job", "manage jobs"},
    {"job stateless", "manage stateless jobs (v1alpha JobService)"},
    {"task", "manage tasks"},
    {"respool", "manage resource pools"},
    {"host", "manage hosts"},
    {"host maintenance", "host maintenance"},
    {"update", "manage job updates"},
    {"pod", "manage pods (a pod: <job-id>-<instance>)"},
    {"watch", "watch job / pod changes"},
};

static const char *group_help(const char *path) {
    for (size_t i = 0; i < sizeof groups / sizeof *groups; i++)
        if (!strcmp(groups[i].path, path)) return groups[i].help;
    return "";
}

const char *cli_flag(const struct cli_inv *in, const char *name) {
    const struct cli_flag *f = in->cmd->flags;
    for (int i = 0; f && f[i].name; i++)
        if (!strcmp(f[i].name, name)) return in->val[i] ? in->val[i] : f[i].def;
    return NULL;
}

bool cli_switch(const struct cli_inv *in, const char *name) {
    const char *v = cli_flag(in, name);
    return v && strcmp(v, "false");
}

static void print_flags(FILE *f, const struct cli_flag *fl) {
    for (int i = 0; fl && fl[i].name; i++) {
        char left[64];
        if (fl[i].short_name)
            snprintf(left, sizeof left, "-%c, --%s%s", fl[i].short_name, fl[i].name, fl[i].takes_value ? "=VALUE" : "");
        else snprintf(left, sizeof left, "    --%s%s", fl[i].name, fl[i].takes_value ? "=VALUE" : "");
        fprintf(f, "  %-28s %s", left, fl[i].help);
        if (fl[i].def) fprintf(f, " (default %s)", fl[i].def);
        fputc('\n', f);
    }
}

static void print_cmd_help(FILE *f, const struct cli_cmd *cmd) {
    fprintf(f, "usage: peloton [global flags] %s%s%s%s\n\n%s\n", cmd->path, cmd->flags ? " [flags]" : "",
            cmd->args[0] ? " " : "", cmd->args, cmd->help);
    if (cmd->unserved) fprintf(f, "(pelotond does not serve this method yet: the call gets unimplemented)\n");
    if (cmd->flags) {
        fprintf(f, "\nFlags:\n");
        print_flags(f, cmd->flags);
    }
    fprintf(f, "\nGlobal flags:\n");
    print_flags(f, global_flags);
}

/* The commands and groups one word below prefix ("" for the top). */
static void print_group_help(FILE *f, const char *prefix) {
    size_t pl = strlen(prefix);
    fprintf(f, "usage: peloton [global flags] %s%s<command> [flags] [args]\n\n", prefix, pl ? " " : "");
    if (pl) fprintf(f, "%s\n\n", group_help(prefix));
    else fprintf(f, "Peloton's command line, over pelotond's native API (docs/cli.md).\n\n");
    fprintf(f, "Commands:\n");
    char seen[64][48];
    int nseen = 0;
    for (const struct cli_cmd *c = cli_cmds; c->path; c++) {
        if (pl && (strncmp(c->path, prefix, pl) || c->path[pl] != ' ')) continue;
        const char *rest = c->path + (pl ? pl + 1 : 0);
        const char *sp = strchr(rest, ' ');
        if (!sp) {
            fprintf(f, "  %-22s %s%s\n", rest, c->help, c->unserved ? " [not served yet]" : "");
            continue;
        }
        char word[48];
        snprintf(word, sizeof word, "%.*s", (int)(sp - rest), rest);
        int dup = 0;
        for (int i = 0; i < nseen; i++) dup |= !strcmp(seen[i], word);
        if (dup || nseen == 64) continue;
        snprintf(seen[nseen++], sizeof seen[0], "%s", word);
        char full[128];
        snprintf(full, sizeof full, "%s%s%s", prefix, pl ? " " : "", word);
        fprintf(f, "  %-22s %s ...\n", word, group_help(full));
    }
    fprintf(f, "\nGlobal flags:\n");
    print_flags(f, global_flags);
    fprintf(f, "\n'peloton %s%s<command> --help' shows a command's flags and arguments.\n", prefix, pl ? " " : "");
}

int cli_usage_error(struct cli *c, const struct cli_cmd *cmd, const char *fmt, ...) {
    va_list ap;
    fprintf(c->err, "peloton: ");
    va_start(ap, fmt);
    vfprintf(c->err, fmt, ap);
    va_end(ap);
    if (cmd) fprintf(c->err, "\nusage: peloton %s%s%s%s (see --help)\n", cmd->path, cmd->flags ? " [flags]" : "",
                     cmd->args[0] ? " " : "", cmd->args);
    else fputc('\n', c->err);
    return CLI_USAGE;
}

int cli_call(struct cli *c, enum cli_target t, const struct clirpc_method *m, json_t *req, json_t **resp) {
    if (!req) {
        fprintf(c->err, "peloton: out of memory\n");
        return CLI_ERR;
    }
    int rc = clirpc_call(&c->rpc, c->url[t], m, req, resp);
    json_decref(req);
    switch (rc) {
    case CLIRPC_OK: break;
    case CLIRPC_ERR_STATUS: fprintf(c->err, "peloton: error: %s: %s\n", c->rpc.code, c->rpc.msg); return CLI_ERR;
    case CLIRPC_ERR_INPUT: fprintf(c->err, "peloton: bad request: %s\n", c->rpc.msg); return CLI_USAGE;
    default: fprintf(c->err, "peloton: no answer: %s\n", c->rpc.msg); return CLI_UNREACHABLE;
    }
    /* errors the reply carries: Peloton answered them with status OK */
    static const char *const keys[] = {"error", "notFound", "outOfRange"};
    for (size_t i = 0; i < sizeof keys / sizeof *keys; i++) {
        json_t *e = json_object_get(*resp, keys[i]);
        if (!e || (json_is_object(e) && !json_object_size(e))) continue;
        const char *code = keys[i];
        json_t *detail = e;
        if (!strcmp(keys[i], "error") && json_is_object(e)) {
            void *it = json_object_iter(e);
            code = json_object_iter_key(it);
            detail = json_object_iter_value(it);
            if (json_is_string(detail)) code = "failed"; /* error: {message: "..."} (GetPodEvents) */
        }
        json_t *msg = json_is_object(detail) ? json_object_get(detail, "message") : detail;
        char *dump = NULL;
        if (!json_is_string(msg)) dump = json_dumps(detail, JSON_COMPACT | JSON_ENCODE_ANY);
        fprintf(c->err, "peloton: error: %s: %s\n", code, dump ? dump : json_string_value(msg));
        free(dump);
        json_decref(*resp);
        *resp = NULL;
        return CLI_ERR;
    }
    return CLI_OK;
}

/* "500ms", "20s", "2m", "1h", or seconds: milliseconds, or -1. */
static long parse_duration(const char *s) {
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (end == s || errno || !(v > 0) || v > 86400.0 * 1000) return -1;
    double ms = !*end || !strcmp(end, "s") ? v * 1000 : !strcmp(end, "ms") ? v : !strcmp(end, "m") ? v * 60000
              : !strcmp(end, "h") ? v * 3600000 : -1;
    return ms < 1 ? -1 : (long)ms;
}

/* The token from a file: its first line, trimmed. */
static char *read_token(struct cli *c, const char *path) {
    FILE *f = fopen(path, "r");
    if (!f) {
        fprintf(c->err, "peloton: --token-file %s: %s\n", path, strerror(errno));
        return NULL;
    }
    char *buf = calloc(1, MAX_TOKEN + 2);
    if (buf && !fgets(buf, MAX_TOKEN + 2, f)) buf[0] = 0;
    fclose(f);
    if (!buf) return NULL;
    size_t n = strlen(buf);
    while (n && isspace((unsigned char)buf[n - 1])) buf[--n] = 0;
    if (n > MAX_TOKEN || !n) {
        fprintf(c->err, "peloton: --token-file %s: %s\n", path, n ? "token longer than 8 KiB" : "empty");
        free(buf);
        return NULL;
    }
    return buf;
}

static const struct cli_flag *find_flag(const struct cli_flag *fl, const char *name, size_t n, char sh, int *idx) {
    for (int i = 0; fl && fl[i].name; i++)
        if (sh ? fl[i].short_name == sh : (strlen(fl[i].name) == n && !strncmp(fl[i].name, name, n))) {
            *idx = i;
            return &fl[i];
        }
    return NULL;
}

static bool is_group(const char *prefix) {
    size_t n = strlen(prefix);
    for (const struct cli_cmd *c = cli_cmds; c->path; c++)
        if (!strncmp(c->path, prefix, n) && c->path[n] == ' ') return true;
    return false;
}

static const struct cli_cmd *find_cmd(const char *path) {
    for (const struct cli_cmd *c = cli_cmds; c->path; c++)
        if (!strcmp(c->path, path)) return c;
    return NULL;
}

/* joined[i]: the values of the command's repeated flag i, joined (freed by cli_main). */
static int cli_run(int argc, char **argv, char **joined) {
    struct cli c = {.out = stdout, .err = stderr};
    struct cli_inv in = {0};
    const char *gval[G_N] = {0};
    char prefix[128] = "";
    bool only_args = false;
    int rc;

    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!only_args && !strcmp(a, "--")) {
            only_args = true;
            continue;
        }
        if (!only_args && a[0] == '-' && a[1]) {
            bool lng = a[1] == '-';
            const char *name = a + (lng ? 2 : 1);
            const char *eq = lng ? strchr(name, '=') : NULL;
            size_t n = eq ? (size_t)(eq - name) : strlen(name);
            int idx = -1;
            const struct cli_flag *f = find_flag(global_flags, name, n, lng ? 0 : name[0], &idx);
            bool global = f != NULL;
            if (!f && in.cmd) f = find_flag(in.cmd->flags, name, n, lng ? 0 : name[0], &idx);
            if (!f) return cli_usage_error(&c, in.cmd, "unknown flag %s", a);
            const char *val = "true";
            if (f->takes_value) {
                if (eq) val = eq + 1;
                else if (!lng && name[1]) val = name + 1;
                else if (i + 1 < argc) val = argv[++i];
                else return cli_usage_error(&c, in.cmd, "flag --%s needs a value", f->name);
            } else if (eq || (!lng && name[1])) {
                return cli_usage_error(&c, in.cmd, "flag --%s takes no value", f->name);
            }
            if (global) gval[idx] = val;
            else if (f->takes_value == CLI_VALUES && in.val[idx]) {
                size_t n1 = strlen(in.val[idx]), n2 = strlen(val);
                if (n1 + n2 > 65536) return cli_usage_error(&c, in.cmd, "flag --%s given too often", f->name);
                char *j = malloc(n1 + n2 + 2);
                if (!j) return CLI_ERR;
                memcpy(j, in.val[idx], n1);
                j[n1] = ',';
                memcpy(j + n1 + 1, val, n2 + 1);
                free(joined[idx]);
                in.val[idx] = joined[idx] = j;
            } else in.val[idx] = val;
            continue;
        }
        if (!in.cmd) {
            char cand[128];
            if ((size_t)snprintf(cand, sizeof cand, "%s%s%s", prefix, prefix[0] ? " " : "", a) >= sizeof cand)
                return cli_usage_error(&c, NULL, "unknown command \"%s\"", a);
            if ((in.cmd = find_cmd(cand))) continue;
            if (is_group(cand)) {
                snprintf(prefix, sizeof prefix, "%s", cand);
                continue;
            }
            return cli_usage_error(&c, NULL, "unknown command \"%s\" (see 'peloton %s%s--help')", cand, prefix,
                                   prefix[0] ? " " : "");
        }
        if (in.argc == CLI_MAX_ARGS) return cli_usage_error(&c, in.cmd, "too many arguments");
        in.argv[in.argc++] = a;
    }

    if (gval[G_HELP]) {
        if (in.cmd) print_cmd_help(stdout, in.cmd);
        else print_group_help(stdout, prefix);
        return CLI_OK;
    }
    if (!in.cmd) {
        if (prefix[0]) fprintf(stderr, "peloton %s: a command is needed\n\n", prefix);
        print_group_help(stderr, prefix);
        return CLI_USAGE;
    }
    if (in.argc < in.cmd->min_args) return cli_usage_error(&c, in.cmd, "%s: too few arguments", in.cmd->path);
    if (in.argc > in.cmd->max_args) return cli_usage_error(&c, in.cmd, "%s: too many arguments", in.cmd->path);

    c.json = gval[G_JSON] != NULL;
    const char *jm = gval[G_JOBMGR] ? gval[G_JOBMGR] : getenv("JOBMGR_URL") ? getenv("JOBMGR_URL") : DEFAULT_URL;
    c.url[CLI_JOBMGR] = jm;
    c.url[CLI_RESMGR] = gval[G_RESMGR] ? gval[G_RESMGR] : getenv("RESMGR_URL") ? getenv("RESMGR_URL") : jm;
    c.url[CLI_HOSTMGR] = gval[G_HOSTMGR] ? gval[G_HOSTMGR] : getenv("HOSTMGR_URL") ? getenv("HOSTMGR_URL") : jm;
    const char *to = gval[G_TIMEOUT] ? gval[G_TIMEOUT] : getenv("TIMEOUT") ? getenv("TIMEOUT") : "20s";
    c.timeout_ms = parse_duration(to);
    if (c.timeout_ms < 0) return cli_usage_error(&c, in.cmd, "bad --timeout \"%s\" (e.g. 500ms, 20s, 2m)", to);

    char *token = NULL;
    const char *tfile = gval[G_TOKEN_FILE] ? gval[G_TOKEN_FILE] : getenv("PELOTON_TOKEN_FILE");
    if (gval[G_TOKEN]) token = strdup(gval[G_TOKEN]);
    else if (tfile && !(token = read_token(&c, tfile))) return CLI_USAGE;
    else if (!tfile && getenv("PELOTON_TOKEN")) token = strdup(getenv("PELOTON_TOKEN"));
    if (token && (strpbrk(token, "\r\n") || strlen(token) > MAX_TOKEN || !token[0])) {
        free(token);
        return cli_usage_error(&c, in.cmd, "the token must be one line of at most 8 KiB");
    }
    if (clirpc_init(&c.rpc, token, c.timeout_ms)) {
        free(token);
        fprintf(stderr, "peloton: cannot start libcurl\n");
        return CLI_ERR;
    }
    c.rpc.cacert = gval[G_CACERT] ? gval[G_CACERT] : getenv("PELOTON_CACERT");
    c.rpc.cert = gval[G_CERT] ? gval[G_CERT] : getenv("PELOTON_CERT");
    c.rpc.key = gval[G_KEY] ? gval[G_KEY] : getenv("PELOTON_KEY");
    if (!c.rpc.cert != !c.rpc.key) {
        clirpc_free(&c.rpc);
        free(token);
        return cli_usage_error(&c, in.cmd, "--cert and --key go together");
    }
    rc = in.cmd->run(&c, &in);
    clirpc_free(&c.rpc);
    free(token);
    return rc;
}

int cli_main(int argc, char **argv) {
    char *joined[CLI_MAX_FLAGS] = {0};
    int rc = cli_run(argc, argv, joined);
    for (int i = 0; i < CLI_MAX_FLAGS; i++) free(joined[i]);
    return rc;
}
