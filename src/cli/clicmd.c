/* The CLI's commands: one row of cli_cmds each, and the function that turns
 * its arguments into calls (requests built as proto3 JSON) and prints the
 * replies as a table, as YAML, or with -j as the reply's JSON. Here: the
 * shared helpers, respool, job create|get|status|query|delete, task
 * list|get|query and the table; job and task control in clictl.c, updates
 * and hosts in cliupdate.c (clicmd.h). */
#include <ctype.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

#include "clicmd.h"
#include "cliyaml.h"

static const struct clirpc_method
    m_job_create = JM_("Create", create_request, create_response),
    m_job_get = JM_("Get", get_request, get_response),
    m_job_query = JM_("Query", query_request, query_response),
    m_job_delete = JM_("Delete", delete_request, delete_response),
    m_task_get = TM_("Get", get_request, get_response),
    m_task_list = TM_("List", list_request, list_response),
    m_task_query = TM_("Query", query_request, query_response),
    m_rp_create = RM_("CreateResourcePool", create_request, create_response),
    m_rp_update = RM_("UpdateResourcePool", update_request, update_response),
    m_rp_delete = RM_("DeleteResourcePool", delete_request, delete_response),
    m_rp_lookup = RM_("LookupResourcePoolID", lookup_request, lookup_response),
    m_rp_query = RM_("Query", query_request, query_response);


/* ------------------------------------------------------------------ helpers */

json_t *cli_id_obj(const char *v) { return json_pack("{s:s}", "value", v); }

/* An unsigned number argument or flag value; -1 when it is not one. */
long long cli_parse_uint(const char *s) {
    char *end;
    if (!s || !*s || *s == '-') return -1;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    return *end || errno || v > UINT32_MAX ? -1 : (long long)v;
}

/* "from:to" (either side may be empty: 0 and all) as an InstanceRange. */
static json_t *parse_range(const char *s) {
    const char *colon = strchr(s, ':');
    if (!colon) return NULL;
    char from[32] = "", to[32] = "";
    if ((size_t)(colon - s) >= sizeof from || strlen(colon + 1) >= sizeof to) return NULL;
    memcpy(from, s, (size_t)(colon - s));
    snprintf(to, sizeof to, "%s", colon + 1);
    long long f = from[0] ? cli_parse_uint(from) : 0, t = to[0] ? cli_parse_uint(to) : UINT32_MAX;
    if (f < 0 || t < 0 || t < f) return NULL;
    return json_pack("{s:I,s:I}", "from", f, "to", t);
}

/* A comma-separated flag as a JSON array of strings ([] for NULL or ""). */
json_t *cli_split_list(const char *s) {
    json_t *a = json_array();
    while (s && *s) {
        const char *comma = strchr(s, ',');
        size_t n = comma ? (size_t)(comma - s) : strlen(s);
        if (n) json_array_append_new(a, json_stringn(s, n));
        s += n + (comma != NULL);
    }
    return a;
}

/* States given as "running,pending": the enum names, upper case. */
json_t *cli_state_list(const char *s) {
    json_t *a = cli_split_list(s), *v;
    size_t i;
    json_array_foreach(a, i, v) {
        char up[64];
        snprintf(up, sizeof up, "%s", json_string_value(v));
        for (char *p = up; *p; p++) *p = (char)toupper((unsigned char)*p);
        json_array_set_new(a, i, json_string(up));
    }
    return a;
}

/* The id of the pool at path, via LookupResourcePoolID. */
int cli_lookup_pool(struct cli *c, const char *path, char *id, size_t idlen) {
    json_t *resp;
    int rc = cli_call(c, CLI_RESMGR, &m_rp_lookup, json_pack("{s:{s:s}}", "path", "value", path), &resp);
    if (rc) return rc;
    cli_str(resp, "id.value", id, idlen);
    json_decref(resp);
    return CLI_OK;
}

json_t *cli_load_yaml(struct cli *c, const struct cli_inv *in, const ProtobufCMessageDescriptor *d,
                         const char *path) {
    char err[512];
    size_t len;
    char *buf = cliyaml_read_file(path, &len, err, sizeof err);
    FILE *skipped = cli_switch(in, "skip-unknown") ? c->err : NULL;
    json_t *j = buf ? cliyaml_to_json_skipping(d, path, buf, len, skipped, err, sizeof err) : NULL;
    free(buf);
    if (!j) fprintf(c->err, "peloton: %s\n", err);
    return j;
}

/* Prints a reply: -j as JSON, else YAML of the member at key (all when NULL). */
void cli_print_reply_yaml(struct cli *c, json_t *resp, const char *key) {
    if (c->json) cli_print_json(c, resp);
    else cli_print_yaml(c->out, key ? json_object_get(resp, key) : resp, 0);
}

bool cli_pool_path_ok(const char *p) { return p[0] == '/'; }

/* ------------------------------------------------------------------ respool */

/* name = the path's last part, parent = the pool at the rest ("/": root). */
static int pool_config(struct cli *c, const struct cli_inv *in, json_t **config) {
    const char *path = in->argv[0];
    const char *slash = strrchr(path, '/');
    if (!cli_pool_path_ok(path) || !slash[1]) {
        return cli_usage_error(c, in->cmd, "\"%s\": a pool's path starts with / and ends with its name", path);
    }
    json_t *cfg = cli_load_yaml(c, in, &peloton__api__v0__respool__resource_pool_config__descriptor, in->argv[1]);
    if (!cfg) return CLI_USAGE;
    char parent[1024], pid[256];
    snprintf(parent, sizeof parent, "%.*s", slash == path ? 1 : (int)(slash - path), path);
    int rc = cli_lookup_pool(c, parent, pid, sizeof pid);
    if (rc) {
        json_decref(cfg);
        return rc;
    }
    json_object_set_new(cfg, "name", json_string(slash + 1));
    json_object_set_new(cfg, "parent", cli_id_obj(pid));
    *config = cfg;
    return CLI_OK;
}

static int cmd_respool_create(struct cli *c, const struct cli_inv *in) {
    json_t *cfg, *resp;
    int rc = pool_config(c, in, &cfg);
    if (rc) return rc;
    rc = cli_call(c, CLI_RESMGR, &m_rp_create, json_pack("{s:o}", "config", cfg), &resp);
    if (rc) return rc;
    char id[256];
    if (c->json) cli_print_json(c, resp);
    else fprintf(c->out, "Resource pool %s created at %s\n", cli_str(resp, "result.value", id, sizeof id), in->argv[0]);
    json_decref(resp);
    return CLI_OK;
}

static int cmd_respool_update(struct cli *c, const struct cli_inv *in) {
    json_t *cfg = NULL, *resp;
    char id[256];
    int rc = pool_config(c, in, &cfg);
    if (rc) return rc;
    if ((rc = cli_lookup_pool(c, in->argv[0], id, sizeof id))) {
        json_decref(cfg);
        return rc;
    }
    rc = cli_call(c, CLI_RESMGR, &m_rp_update, json_pack("{s:o,s:o}", "id", cli_id_obj(id), "config", cfg), &resp);
    if (rc) return rc;
    if (c->json) cli_print_json(c, resp);
    else fprintf(c->out, "Resource pool %s updated\n", in->argv[0]);
    json_decref(resp);
    return CLI_OK;
}

static int cmd_respool_delete(struct cli *c, const struct cli_inv *in) {
    json_t *resp;
    if (!cli_pool_path_ok(in->argv[0])) return cli_usage_error(c, in->cmd, "\"%s\": a pool's path starts with /", in->argv[0]);
    int rc = cli_call(c, CLI_RESMGR, &m_rp_delete, json_pack("{s:{s:s}}", "path", "value", in->argv[0]), &resp);
    if (rc) return rc;
    if (c->json) cli_print_json(c, resp);
    else fprintf(c->out, "Resource pool %s deleted\n", in->argv[0]);
    json_decref(resp);
    return CLI_OK;
}

static int cmd_respool_dump(struct cli *c, const struct cli_inv *in) {
    const char *fmt = cli_flag(in, "format");
    bool as_json = c->json || !strcmp(fmt, "json");
    if (!as_json && strcmp(fmt, "yaml") && strcmp(fmt, "yml"))
        return cli_usage_error(c, in->cmd, "--format is yaml or json, not \"%s\"", fmt);
    json_t *resp;
    int rc = cli_call(c, CLI_RESMGR, &m_rp_query, json_object(), &resp);
    if (rc) return rc;
    json_t *pools = json_object_get(resp, "resourcePools");
    if (!pools) pools = json_array();
    else json_incref(pools);
    if (as_json) cli_print_json(c, pools);
    else if (json_array_size(pools)) cli_print_yaml(c->out, pools, 0);
    else fprintf(c->out, "[]\n");
    json_decref(pools);
    json_decref(resp);
    return CLI_OK;
}

/* ---------------------------------------------------------------------- job */

int cli_job_get(struct cli *c, const char *id, json_t **resp) {
    return cli_call(c, CLI_JOBMGR, &m_job_get, json_pack("{s:o}", "id", cli_id_obj(id)), resp);
}

/* Instances counted as up for --wait: running, or already done. */
long long cli_job_up(const json_t *info) {
    json_t *stats = json_object_get(json_object_get(info, "runtime"), "taskStats");
    json_t *r = json_object_get(stats, "RUNNING"), *s = json_object_get(stats, "SUCCEEDED");
    return (json_is_integer(r) ? json_integer_value(r) : 0) + (json_is_integer(s) ? json_integer_value(s) : 0);
}

/* Polls Get until every instance runs (or has succeeded), the job ends
 * another way, or wait_ms passes; a line on stderr at each change. */
int cli_job_wait(struct cli *c, const char *id, long wait_ms) {
    struct timespec t0, now;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    char last[512] = "", line[512], st[64];
    for (;;) {
        json_t *resp;
        int rc = cli_job_get(c, id, &resp);
        if (rc) return rc;
        json_t *info = json_object_get(resp, "jobInfo");
        long long want = json_integer_value(json_object_get(json_object_get(info, "config"), "instanceCount"));
        long long up = cli_job_up(info);
        cli_str(info, "runtime.state", st, sizeof st);
        if (!st[0]) snprintf(st, sizeof st, "UNKNOWN");
        snprintf(line, sizeof line, "job %.200s: %s, %lld/%lld instances running or done", id, st, up, want);
        if (strcmp(line, last)) fprintf(c->err, "%s\n", line);
        snprintf(last, sizeof last, "%s", line);
        json_decref(resp);
        if (!strcmp(st, "FAILED") || !strcmp(st, "KILLED") || !strcmp(st, "DELETED")) {
            fprintf(c->err, "peloton: error: job %s ended %s\n", id, st);
            return CLI_ERR;
        }
        if (up >= want || !strcmp(st, "SUCCEEDED")) return CLI_OK;
        clock_gettime(CLOCK_MONOTONIC, &now);
        long el = (now.tv_sec - t0.tv_sec) * 1000 + (now.tv_nsec - t0.tv_nsec) / 1000000;
        if (el >= wait_ms) {
            fprintf(c->err, "peloton: error: deadline-exceeded: job %s not running after %ld ms (%s)\n", id,
                    wait_ms, last);
            return CLI_ERR;
        }
        usleep(300 * 1000);
    }
}

static int cmd_job_create(struct cli *c, const struct cli_inv *in) {
    const char *wait = cli_flag(in, "wait-timeout");
    long wait_ms = 0;
    if (cli_switch(in, "wait")) {
        long long s = cli_parse_uint(wait);
        if (s <= 0) return cli_usage_error(c, in->cmd, "--wait-timeout is a number of seconds, not \"%s\"", wait);
        wait_ms = (long)s * 1000;
    }
    if (!cli_pool_path_ok(in->argv[0]))
        return cli_usage_error(c, in->cmd, "\"%s\": a pool's path starts with /", in->argv[0]);
    json_t *cfg = cli_load_yaml(c, in, &peloton__api__v0__job__job_config__descriptor, in->argv[1]);
    if (!cfg) return CLI_USAGE;
    char pool[256], id[256];
    int rc = cli_lookup_pool(c, in->argv[0], pool, sizeof pool);
    if (rc) {
        json_decref(cfg);
        return rc;
    }
    json_object_set_new(cfg, "respoolID", cli_id_obj(pool));
    json_t *req = json_pack("{s:o}", "config", cfg), *resp;
    const char *want_id = cli_flag(in, "jobID");
    if (want_id) json_object_set_new(req, "id", cli_id_obj(want_id));
    rc = cli_call(c, CLI_JOBMGR, &m_job_create, req, &resp);
    if (rc) return rc;
    cli_str(resp, "jobId.value", id, sizeof id);
    if (c->json) cli_print_json(c, resp);
    else fprintf(c->out, "Job %s created\n", id);
    json_decref(resp);
    return wait_ms ? cli_job_wait(c, id, wait_ms) : CLI_OK;
}

static int cmd_job_get(struct cli *c, const struct cli_inv *in) {
    json_t *resp;
    int rc = cli_job_get(c, in->argv[0], &resp);
    if (rc) return rc;
    cli_print_reply_yaml(c, resp, "jobInfo");
    json_decref(resp);
    return CLI_OK;
}

static int cmd_job_status(struct cli *c, const struct cli_inv *in) {
    json_t *resp;
    int rc = cli_job_get(c, in->argv[0], &resp);
    if (rc) return rc;
    if (c->json) {
        cli_print_json(c, json_object_get(json_object_get(resp, "jobInfo"), "runtime"));
        json_decref(resp);
        return CLI_OK;
    }
    json_t *rt = json_object_get(json_object_get(resp, "jobInfo"), "runtime");
    char b[256];
    static const char *const rows[][2] = {{"State", "state"},          {"Goal state", "goalState"},
                                          {"Created", "creationTime"}, {"Started", "startTime"},
                                          {"Completed", "completionTime"},
                                          {"Config version", "configurationVersion"}};
    for (size_t i = 0; i < sizeof rows / sizeof *rows; i++)
        if (cli_str(rt, rows[i][1], b, sizeof b)[0]) fprintf(c->out, "%-15s %s\n", rows[i][0], b);
    /* the states some instance is in (-j shows every count) */
    json_t *stats = json_object_get(rt, "taskStats");
    const char *k;
    json_t *v;
    fprintf(c->out, "Tasks:\n");
    json_object_foreach(stats, k, v) if (json_integer_value(v) > 0)
        fprintf(c->out, "  %-13s %lld\n", k, (long long)json_integer_value(v));
    json_decref(resp);
    return CLI_OK;
}

static int cmd_job_delete(struct cli *c, const struct cli_inv *in) {
    json_t *resp;
    int rc = cli_call(c, CLI_JOBMGR, &m_job_delete, json_pack("{s:o}", "id", cli_id_obj(in->argv[0])), &resp);
    if (rc) return rc;
    if (c->json) cli_print_json(c, resp);
    else fprintf(c->out, "Job %s deleted\n", in->argv[0]);
    json_decref(resp);
    return CLI_OK;
}

/* A PaginationSpec from --limit, --offset, --sort, --sortorder (and --total). */
static int pagination(struct cli *c, const struct cli_inv *in, json_t **out) {
    long long limit = cli_parse_uint(cli_flag(in, "limit")), offset = cli_parse_uint(cli_flag(in, "offset"));
    const char *total = cli_flag(in, "total"), *sort = cli_flag(in, "sort"), *order = cli_flag(in, "sortorder");
    long long max = total ? cli_parse_uint(total) : 0;
    if (limit < 0 || offset < 0 || max < 0) return cli_usage_error(c, in->cmd, "--limit, --offset and --total are numbers");
    if (strcasecmp(order, "ASC") && strcasecmp(order, "DESC"))
        return cli_usage_error(c, in->cmd, "--sortorder is ASC or DESC, not \"%s\"", order);
    json_t *p = json_pack("{s:I,s:I}", "limit", limit, "offset", offset);
    if (max) json_object_set_new(p, "maxLimit", json_integer(max));
    if (sort && *sort)
        json_object_set_new(p, "orderBy", json_pack("[{s:s,s:{s:s}}]", "order", strcasecmp(order, "ASC") ? "DESC" : "ASC",
                                                    "property", "value", sort));
    *out = p;
    return CLI_OK;
}

static int cmd_job_query(struct cli *c, const struct cli_inv *in) {
    json_t *spec = json_object(), *req = json_pack("{s:b}", "summaryOnly", !c->json), *pg, *resp;
    int rc = pagination(c, in, &pg);
    if (rc) goto bad;
    json_object_set_new(spec, "pagination", pg);
    const char *rp = cli_flag(in, "respool");
    size_t i;
    json_t *lab;
    if ((rc = cli_labels(c, in, "labels", &lab))) goto bad;
    json_object_set_new(spec, "labels", lab);
    json_object_set_new(spec, "keywords", cli_split_list(cli_flag(in, "keywords")));
    json_object_set_new(spec, "jobStates", cli_state_list(cli_flag(in, "states")));
    if (cli_flag(in, "owner")) json_object_set_new(spec, "owner", json_string(cli_flag(in, "owner")));
    if (cli_flag(in, "name")) json_object_set_new(spec, "name", json_string(cli_flag(in, "name")));
    if (rp && *rp) {
        char pid[256];
        if ((rc = cli_lookup_pool(c, rp, pid, sizeof pid))) goto bad;
        json_object_set_new(req, "respoolID", cli_id_obj(pid));
    }
    json_object_set_new(req, "spec", spec);
    spec = NULL;
    rc = cli_call(c, CLI_JOBMGR, &m_job_query, req, &resp);
    req = NULL;
    if (rc) return rc;
    if (c->json) cli_print_json(c, resp);
    else {
        static const char *const heads[] = {"ID", "NAME", "OWNER", "TYPE", "STATE", "CREATED", "TOTAL",
                                            "RUNNING", "SUCCEEDED", "FAILED"};
        struct cli_table *t = cli_table_new(10, heads);
        json_t *r;
        json_array_foreach(json_object_get(resp, "results"), i, r) {
            char b[10][256];
            const char *row[10] = {
                cli_str(r, "id.value", b[0], 256), cli_str(r, "name", b[1], 256), cli_str(r, "owner", b[2], 256),
                cli_str(r, "type", b[3], 256), cli_str(r, "runtime.state", b[4], 256),
                cli_str(r, "runtime.creationTime", b[5], 256), cli_str(r, "instanceCount", b[6], 256),
                cli_str(r, "runtime.taskStats.RUNNING", b[7], 256), cli_str(r, "runtime.taskStats.SUCCEEDED", b[8], 256),
                cli_str(r, "runtime.taskStats.FAILED", b[9], 256)};
            if (!b[3][0]) snprintf(b[3], 256, "BATCH"); /* proto3 leaves the first enum value out */
            for (int k = 6; k < 10; k++)
                if (!b[k][0]) snprintf(b[k], 256, "0");
            cli_table_add(t, row);
        }
        cli_table_print(t, c->out);
        cli_table_free(t);
        char tot[32];
        fprintf(c->err, "%s job(s) in all\n", cli_str(resp, "pagination.total", tot, sizeof tot)[0] ? tot : "0");
    }
    json_decref(resp);
    return CLI_OK;
bad:
    json_decref(spec);
    json_decref(req);
    return rc;
}

/* --------------------------------------------------------------------- task */

static const char *const task_heads[] = {"INSTANCE", "NAME", "STATE", "HOST", "STARTED", "COMPLETED", "MESSAGE",
                                         "REASON"};

static void task_row(struct cli_table *t, const json_t *ti) {
    char b[8][512];
    const char *row[8] = {cli_str(ti, "instanceId", b[0], 512),        cli_str(ti, "config.name", b[1], 512),
                          cli_str(ti, "runtime.state", b[2], 512),     cli_str(ti, "runtime.host", b[3], 512),
                          cli_str(ti, "runtime.startTime", b[4], 512), cli_str(ti, "runtime.completionTime", b[5], 512),
                          cli_str(ti, "runtime.message", b[6], 512),   cli_str(ti, "runtime.reason", b[7], 512)};
    if (!b[0][0]) snprintf(b[0], 512, "0");
    if (!b[2][0]) snprintf(b[2], 512, "UNKNOWN");
    cli_table_add(t, row);
}

static int cmp_instance(const void *a, const void *b) {
    long long x = json_integer_value(json_object_get(*(json_t *const *)a, "instanceId"));
    long long y = json_integer_value(json_object_get(*(json_t *const *)b, "instanceId"));
    return (x > y) - (x < y);
}

/* Tasks (a JSON array, or the values of List's map) as a table by instance. */
static void print_tasks(struct cli *c, json_t *tasks) {
    size_t n = json_is_array(tasks) ? json_array_size(tasks) : json_object_size(tasks), i = 0;
    json_t **v = calloc(n ? n : 1, sizeof *v), *e;
    const char *k;
    if (!v) return;
    if (json_is_array(tasks)) json_array_foreach(tasks, i, e) v[i] = e;
    else json_object_foreach(tasks, k, e) v[i++] = e;
    qsort(v, n, sizeof *v, cmp_instance);
    struct cli_table *t = cli_table_new(8, task_heads);
    for (i = 0; i < n; i++) task_row(t, v[i]);
    cli_table_print(t, c->out);
    cli_table_free(t);
    free(v);
}

static int cmd_task_list(struct cli *c, const struct cli_inv *in) {
    json_t *req = json_pack("{s:{s:s}}", "jobId", "value", in->argv[0]), *resp;
    const char *r = cli_flag(in, "range");
    if (r && strcmp(r, ":")) {
        json_t *rg = parse_range(r);
        if (!rg) {
            json_decref(req);
            return cli_usage_error(c, in->cmd, "--range is from:to, not \"%s\"", r);
        }
        json_object_set_new(req, "range", rg);
    }
    int rc = cli_call(c, CLI_JOBMGR, &m_task_list, req, &resp);
    if (rc) return rc;
    if (c->json) cli_print_json(c, resp);
    else print_tasks(c, json_object_get(json_object_get(resp, "result"), "value"));
    json_decref(resp);
    return CLI_OK;
}

static int cmd_task_get(struct cli *c, const struct cli_inv *in) {
    long long inst = cli_parse_uint(in->argv[1]);
    if (inst < 0) return cli_usage_error(c, in->cmd, "instance \"%s\" is not a number", in->argv[1]);
    json_t *resp;
    int rc = cli_call(c, CLI_JOBMGR, &m_task_get,
                      json_pack("{s:{s:s},s:I}", "jobId", "value", in->argv[0], "instanceId", inst), &resp);
    if (rc) return rc;
    if (c->json) cli_print_json(c, resp);
    else {
        json_t *runs = json_object_get(resp, "results");
        if (json_array_size(runs)) print_tasks(c, runs);
        else {
            json_t *one = json_pack("[O]", json_object_get(resp, "result"));
            if (one) print_tasks(c, one);
            json_decref(one);
        }
    }
    json_decref(resp);
    return CLI_OK;
}

static int cmd_task_query(struct cli *c, const struct cli_inv *in) {
    json_t *pg, *resp;
    int rc = pagination(c, in, &pg);
    if (rc) return rc;
    json_t *spec = json_pack("{s:o,s:o,s:o,s:o}", "pagination", pg, "taskStates", cli_state_list(cli_flag(in, "states")), "names",
                             cli_split_list(cli_flag(in, "names")), "hosts", cli_split_list(cli_flag(in, "hosts")));
    rc = cli_call(c, CLI_JOBMGR, &m_task_query,
                  json_pack("{s:{s:s},s:o}", "jobId", "value", in->argv[0], "spec", spec), &resp);
    if (rc) return rc;
    if (c->json) cli_print_json(c, resp);
    else {
        print_tasks(c, json_object_get(resp, "records"));
        char tot[32];
        fprintf(c->err, "%s task(s) in all\n", cli_str(resp, "pagination.total", tot, sizeof tot)[0] ? tot : "0");
    }
    json_decref(resp);
    return CLI_OK;
}

/* -------------------------------------------------------------------- table */

static const struct cli_flag f_job_create[] = {
    {"jobID", 'i', true, NULL, "the job's id (a UUID); the server picks one when not given"},
    {"wait", 'w', false, NULL, "wait until every instance runs (or has succeeded), printing progress"},
    {"wait-timeout", 0, true, "300", "seconds --wait waits at most"},
    {"skip-unknown", 0, false, NULL, "skip fields the config's message does not have (a warning each)"},
    {0}};
static const struct cli_flag f_config[] = {
    {"skip-unknown", 0, false, NULL, "skip fields the config's message does not have (a warning each)"}, {0}};
static const struct cli_flag f_job_query[] = {
    {"labels", 'l', true, NULL, "labels every job has: key=value,key=value"},
    {"respool", 'r', true, NULL, "the pool's path"},
    {"keywords", 'k', true, NULL, "words each in the name, owner, description or labels: a,b"},
    {"states", 's', true, NULL, "job states: running,succeeded"},
    {"owner", 0, true, NULL, "the job's owner"},
    {"name", 0, true, NULL, "a part of the job's name"},
    {"limit", 'n', true, "100", "jobs to return"},
    {"total", 'q', true, NULL, "jobs to query at most (maxLimit)"},
    {"offset", 'o', true, "0", "jobs to skip"},
    {"sort", 'p', true, "creation_time", "order by: creation_time or name"},
    {"sortorder", 'a', true, "DESC", "ASC or DESC"},
    {0}};
#define RANGE_FLAG                                                                                                  \
    {"range", 'r', CLI_VALUES, NULL,                                                                               \
     "instances from:to (to excluded; an empty side: 0 or the end), repeated or comma-separated; default all"}
#define WAIT_FLAGS                                                                                                  \
    {"wait", 'w', false, NULL, "follow the operation until it ends, printing progress on stderr"},                 \
        {"wait-timeout", 0, true, "300", "seconds --wait waits at most"}
static const struct cli_flag f_job_ctl[] = {
    RANGE_FLAG,
    {"resourceVersion", 0, true, NULL, "the job's configuration version: refused (ABORTED) when not the current one"},
    WAIT_FLAGS,
    {0}};
static const struct cli_flag f_job_stop[] = {
    RANGE_FLAG,
    {"resourceVersion", 0, true, NULL, "the job's configuration version: refused (ABORTED) when not the current one"},
    WAIT_FLAGS,
    {"progress", 0, false, NULL, "the same as --wait (Peloton's name)"},
    {0}};
static const struct cli_flag f_job_update[] = {
    {"configuration-version", 'c', true, NULL, "the job's current configuration version: refused (ABORTED) when stale"},
    {"skip-unknown", 0, false, NULL, "skip fields the config's message does not have (a warning each)"},
    {0}};
static const struct cli_flag f_task_ranges[] = {RANGE_FLAG, {0}};
static const struct cli_flag f_update_create[] = {
    {"configuration-version", 'c', true, NULL, "the job's current configuration version: refused (ABORTED) when stale"},
    {"override", 'o', false, NULL, "replace the update in progress (pelotond always does)"},
    {"maxattempts", 0, true, "0", "attempts to bring an instance up before it counts as failed (0: no bound)"},
    {"maxfailureInstances", 0, true, "0", "failed instances that fail the update (0: no bound)"},
    {"rollbackOnFailure", 0, false, NULL, "roll back when the update fails"},
    {"start-paused", 0, false, NULL, "create the update paused"},
    {"in-place", 0, false, NULL, "prefer the instances' hosts (ignored by pelotond)"},
    {"batch-percentage", 0, true, NULL, "the batch as a percentage of the instances (over batch-size)"},
    WAIT_FLAGS,
    {"skip-unknown", 0, false, NULL, "skip fields the config's message does not have (a warning each)"},
    {0}};
static const struct cli_flag f_task_list[] = {
    {"range", 'r', true, ":", "instances from:to (to excluded)"}, {0}};
static const struct cli_flag f_task_query[] = {
    {"states", 's', true, NULL, "task states: running,pending"},
    {"names", 0, true, NULL, "task names: a,b"},
    {"hosts", 0, true, NULL, "hosts: h1,h2"},
    {"limit", 'n', true, "100", "tasks to return"},
    {"offset", 'o', true, "0", "tasks to skip"},
    {"sort", 'p', true, NULL, "order by (not applied by pelotond yet)"},
    {"sortorder", 'a', true, "ASC", "ASC or DESC"},
    {0}};
static const struct cli_flag f_host_query[] = {
    {"states", 's', true, NULL, "host states: up,draining,drained,down,unknown (default every host)"}, {0}};
static const struct cli_flag f_pod_events[] = {
    {"run", 'r', true, NULL, "one run only: <job-id>-<instance>-<run>, or the run's number"},
    {"limit", 'l', true, NULL, "the latest N events"},
    {0}};
static const struct cli_flag f_pod_get[] = {
    {"statusonly", 0, false, NULL, "the status only, not the spec"},
    {"currentonly", 0, false, NULL, "the current run only, not the previous ones"},
    {0}};
static const struct cli_flag f_pod_events_v1[] = {
    {"id", 'p', true, NULL, "one run: its pod id, <job-id>-<instance>-<run>"}, {0}};
static const struct cli_flag f_dump[] = {{"format", 0, true, "yaml", "yaml or json"}, {0}};
#define EV_FLAG {"entity-version", 0, true, NULL, "the job's entity version: refused (ABORTED) when not the current one"}
static const struct cli_flag f_sl_create[] = {
    {"jobID", 'i', true, NULL, "the new job's id (a UUID); default a new one"},
    {"skip-unknown", 0, false, NULL, "skip fields the spec's message does not have (a warning each)"},
    {0}};
static const struct cli_flag f_sl_get[] = {
    EV_FLAG, {"summary-only", 0, false, NULL, "the job's summary only"}, {0}};
static const struct cli_flag f_sl_replace[] = {
    EV_FLAG,
    {"max-instance-retries", 0, true, NULL, "attempts to bring an instance up before it counts as failed"},
    {"max-tolerable-instance-failures", 0, true, NULL, "failed instances that fail the update"},
    {"rollback-on-failure", 0, false, NULL, "roll back when the update fails"},
    {"start-paused", 0, false, NULL, "create the update paused"},
    {"in-place", 0, false, NULL, "prefer the instances' hosts"},
    {"skip-unknown", 0, false, NULL, "skip fields the spec's message does not have (a warning each)"},
    {0}};
static const struct cli_flag f_sl_ev[] = {EV_FLAG, {0}};
static const struct cli_flag f_sl_restart[] = {RANGE_FLAG, EV_FLAG, {0}};
static const struct cli_flag f_sl_delete[] = {
    EV_FLAG, {"force", 0, false, NULL, "delete a job that is not stopped"}, {0}};
static const struct cli_flag f_sl_list_pods[] = {
    {"range", 'r', true, NULL, "instances from:to (to excluded); default all"}, {0}};
static const struct cli_flag f_sl_query[] = {
    {"labels", 'l', true, NULL, "labels every job has: key=value,key=value"},
    {"keywords", 'k', true, NULL, "words each in the name, owner or labels: a,b"},
    {"states", 's', true, NULL, "job states: JOB_STATE_RUNNING,..."},
    {"owner", 0, true, NULL, "the owner"},
    {"name", 0, true, NULL, "the job's name"},
    {"limit", 'n', true, "100", "jobs to return"},
    {0}};
#define WATCH_FLAGS                                                                                                 \
    {"labels", 'l', true, NULL, "only objects with these labels: key=value,key=value"},                            \
        {"limit", 'n', true, NULL, "stop after this many messages (default: until Ctrl-C)"},                       \
        {"duration", 'd', true, NULL, "stop after this many seconds (default: until Ctrl-C)"}
static const struct cli_flag f_watch_job[] = {WATCH_FLAGS, {0}};
static const struct cli_flag f_watch_pod[] = {
    {"job-id", 0, true, NULL, "only this job's pods"}, WATCH_FLAGS, {0}};

const struct cli_cmd cli_cmds[] = {
    {"job create", "<respool-path> <config.yaml>", "create a job from Peloton's YAML JobConfig", 2, 2, f_job_create,
     cmd_job_create, false},
    {"job get", "<job-id>", "show a job's config and runtime (YAML)", 1, 1, NULL, cmd_job_get, false},
    {"job status", "<job-id>", "show a job's state and its tasks' states", 1, 1, NULL, cmd_job_status, false},
    {"job query", "", "list jobs by labels, pool, keywords, states, owner or name", 0, 0, f_job_query, cmd_job_query,
     false},
    {"job delete", "<job-id>", "delete a job", 1, 1, NULL, cmd_job_delete, false},
    {"job stop", "<job-id>", "stop a job's instances (every one: pelotond has no per-instance stop)", 1, 1, f_job_stop,
     cli_cmd_job_stop, false},
    {"job start", "<job-id> [batch-size]", "start a stopped job's instances again", 1, 2, f_job_ctl, cli_cmd_job_start,
     false},
    {"job restart", "<job-id> [batch-size]", "restart instances (a service: a rolling restart, an update)", 1, 2,
     f_job_ctl, cli_cmd_job_restart, false},
    {"job update", "<job-id> <config.yaml>", "replace a job's config", 2, 2, f_job_update, cli_cmd_job_update, false},
    {"job rolling-start", "<job-id> [batch-size]", "start instances (as job start)", 1, 2, f_job_ctl, cli_cmd_job_start,
     false},
    {"job rolling-restart", "<job-id> [batch-size]", "restart instances, batch by batch (as job restart)", 1, 2,
     f_job_ctl, cli_cmd_job_restart, false},
    {"job rolling-stop", "<job-id> [batch-size]", "stop instances (as job stop)", 1, 2, f_job_ctl, cli_cmd_job_stop,
     false},
    {"job refresh", "<job-id>", "reload a job (pelotond caches nothing: checks that it exists)", 1, 1, NULL,
     cli_cmd_job_refresh, false},
    {"job cache", "<job-id>", "show a job's config and runtime as the job manager has them", 1, 1, NULL,
     cli_cmd_job_cache, false},
    {"job active-list", "", "list the ids of the jobs not ended", 0, 0, NULL, cli_cmd_job_active, false},
    {"task list", "<job-id>", "list a job's tasks", 1, 1, f_task_list, cmd_task_list, false},
    {"task get", "<job-id> <instance>", "show one task (every run still kept)", 2, 2, NULL, cmd_task_get, false},
    {"task query", "<job-id>", "list a job's tasks by states, names or hosts", 1, 1, f_task_query, cmd_task_query,
     false},
    {"task start", "<job-id>", "start tasks", 1, 1, f_task_ranges, cli_cmd_task_start, false},
    {"task stop", "<job-id>", "stop tasks (all without --range)", 1, 1, f_task_ranges, cli_cmd_task_stop, false},
    {"task restart", "<job-id>", "restart tasks", 1, 1, f_task_ranges, cli_cmd_task_restart, false},
    {"task events", "<job-id> <instance>", "show a task's events", 2, 2, NULL, cli_cmd_task_events, false},
    {"update create", "<job-id> <config.yaml> [batch-size] [respool-path]",
     "roll a service job to a new config, batch by batch (the pool: the job's own when not given)", 2, 4,
     f_update_create, cli_cmd_update_create, false},
    {"update get", "<update-id>", "show an update's state and progress", 1, 1, NULL, cli_cmd_update_get, false},
    {"update list", "<job-id>", "list a job's updates (its latest)", 1, 1, NULL, cli_cmd_update_list, false},
    {"update cache", "<update-id>", "show an update's instances as the job manager has them", 1, 1, NULL,
     cli_cmd_update_cache, false},
    {"update pause", "<update-id>", "pause an update", 1, 1, NULL, cli_cmd_update_pause, false},
    {"update resume", "<update-id>", "resume a paused update", 1, 1, NULL, cli_cmd_update_resume, false},
    {"update rollback", "<update-id>", "roll an update back to the previous config", 1, 1, NULL,
     cli_cmd_update_rollback, false},
    {"update abort", "<update-id>", "abort an update where it is", 1, 1, NULL, cli_cmd_update_abort, false},
    {"host maintenance start", "<hostname,...>", "drain hosts: their work moves away, no new work comes", 1, 1,
     NULL, cli_cmd_host_maint_start, false},
    {"host maintenance complete", "<hostname,...>", "end hosts' maintenance: they take work again", 1, 1, NULL,
     cli_cmd_host_maint_complete, false},
    {"host maintenance query", "", "list hosts by state (as host query)", 0, 0, f_host_query, cli_cmd_host_query, false},
    {"host query", "", "list hosts by state", 0, 0, f_host_query, cli_cmd_host_query, false},
    {"pod get", "<pod-name>", "show a pod (<job-id>-<instance>): its current run and the previous ones", 1, 1,
     f_pod_get, cli_cmd_pod_get, false},
    {"pod restart", "<pod-name>", "restart a pod: its current run replaced by the next", 1, 1, NULL,
     cli_cmd_pod_restart, false},
    {"pod events", "<job-id> <instance>", "show a pod's Kubernetes Events (as task events)", 2, 2, f_pod_events,
     cli_cmd_task_events, false},
    {"pod events-v1alpha", "<pod-name>", "show a pod's state changes (v1alpha PodService)", 1, 1, f_pod_events_v1,
     cli_cmd_pod_events_v1, false},
    {"job stateless create", "<respool-path> <spec.yaml>", "create a stateless job from a v1alpha JobSpec (YAML)", 2, 2,
     f_sl_create, cli_cmd_sl_create, false},
    {"job stateless get", "<job-id>", "show a stateless job's spec, status and workflow (YAML)", 1, 1, f_sl_get,
     cli_cmd_sl_get, false},
    {"job stateless replace", "<job-id> <spec.yaml> [batch-size] [respool-path]",
     "replace a stateless job's spec: a rolling update (the pool: the job's own when not given)", 2, 4,
     f_sl_replace, cli_cmd_sl_replace, false},
    {"job stateless list-pods", "<job-id>", "list a stateless job's pods (a stream)", 1, 1, f_sl_list_pods,
     cli_cmd_sl_list_pods, false},
    {"job stateless list", "", "list every stateless job (a stream)", 0, 0, NULL, cli_cmd_sl_list, false},
    {"job stateless query", "", "list stateless jobs by labels, keywords, states, owner or name", 0, 0, f_sl_query,
     cli_cmd_sl_query, false},
    {"job stateless restart", "<job-id> [batch-size]", "restart a stateless job's pods, batch by batch", 1, 2,
     f_sl_restart, cli_cmd_sl_restart, false},
    {"job stateless pause", "<job-id>", "pause a stateless job's workflow (its update)", 1, 1, f_sl_ev,
     cli_cmd_sl_pause, false},
    {"job stateless resume", "<job-id>", "resume a stateless job's paused workflow", 1, 1, f_sl_ev, cli_cmd_sl_resume,
     false},
    {"job stateless abort", "<job-id>", "abort a stateless job's workflow where it is", 1, 1, f_sl_ev, cli_cmd_sl_abort,
     false},
    {"job stateless delete", "<job-id>", "delete a stateless job", 1, 1, f_sl_delete, cli_cmd_sl_delete, false},
    {"watch job", "[job-id...]", "print stateless jobs' changes as they happen (all jobs when no id)", 0,
     CLI_MAX_ARGS, f_watch_job, cli_cmd_watch_job, false},
    {"watch pod", "[pod-name...]", "print pods' changes as they happen", 0, CLI_MAX_ARGS, f_watch_pod,
     cli_cmd_watch_pod, false},
    {"respool create", "<respool-path> <config.yaml>", "create a pool from Peloton's YAML ResourcePoolConfig", 2, 2,
     f_config, cmd_respool_create, false},
    {"respool update", "<respool-path> <config.yaml>", "replace a pool's config", 2, 2, f_config, cmd_respool_update,
     false},
    {"respool delete", "<respool-path>", "delete a pool (a leaf with no running job)", 1, 1, NULL, cmd_respool_delete,
     false},
    {"respool dump", "", "print every pool", 0, 0, f_dump, cmd_respool_dump, false},
    {0},
};
