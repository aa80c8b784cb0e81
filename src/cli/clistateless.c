/* v1alpha stateless jobs and watches: job stateless create|get|replace|
 * list-pods|list|query|restart|pause|resume|abort|delete over JobService,
 * and watch job|pod over WatchService (docs/cli.md). Unary methods go over
 * YARPC as every other command's; ListPods, ListJobs and Watch stream, so
 * they go over gRPC (clirpc_stream), each message printed as it comes. */
#include <stdlib.h>
#include <string.h>

#include "clicmd.h"
#include "peloton/api/v1alpha/job/stateless/svc/stateless_svc.pb-c.h"
#include "peloton/api/v1alpha/watch/svc/watch_svc.pb-c.h"

#define JS_(m, rq, rs)                                                                                              \
    {"peloton.api.v1alpha.job.stateless.svc.JobService::" m, "peloton-jobmgr",                                     \
     &peloton__api__v1alpha__job__stateless__svc__##rq##__descriptor,                                              \
     &peloton__api__v1alpha__job__stateless__svc__##rs##__descriptor}

static const struct clirpc_method
    m_create = JS_("CreateJob", create_job_request, create_job_response),
    m_replace = JS_("ReplaceJob", replace_job_request, replace_job_response),
    m_restart = JS_("RestartJob", restart_job_request, restart_job_response),
    m_pause = JS_("PauseJobWorkflow", pause_job_workflow_request, pause_job_workflow_response),
    m_resume = JS_("ResumeJobWorkflow", resume_job_workflow_request, resume_job_workflow_response),
    m_abort = JS_("AbortJobWorkflow", abort_job_workflow_request, abort_job_workflow_response),
    m_delete = JS_("DeleteJob", delete_job_request, delete_job_response),
    m_get = JS_("GetJob", get_job_request, get_job_response),
    m_query = JS_("QueryJobs", query_jobs_request, query_jobs_response),
    m_list_pods = JS_("ListPods", list_pods_request, list_pods_response),
    m_list_jobs = JS_("ListJobs", list_jobs_request, list_jobs_response),
    m_watch = {"peloton.api.v1alpha.watch.svc.WatchService::Watch", "peloton-jobmgr",
               &peloton__api__v1alpha__watch__svc__watch_request__descriptor,
               &peloton__api__v1alpha__watch__svc__watch_response__descriptor};

/* A stream call's failure printed as cli_call prints a unary one's. */
static int stream_rc(struct cli *c, int rc) {
    switch (rc) {
    case CLIRPC_OK: return CLI_OK;
    case CLIRPC_ERR_STATUS: fprintf(c->err, "peloton: error: %s: %s\n", c->rpc.code, c->rpc.msg); return CLI_ERR;
    case CLIRPC_ERR_INPUT: fprintf(c->err, "peloton: bad request: %s\n", c->rpc.msg); return CLI_USAGE;
    default: fprintf(c->err, "peloton: no answer: %s\n", c->rpc.msg); return CLI_UNREACHABLE;
    }
}

/* "k=v,k=v" as Label JSON into *out; CLI_OK or a usage error. */
int cli_labels(struct cli *c, const struct cli_inv *in, const char *flag, json_t **out) {
    json_t *ls = cli_split_list(cli_flag(in, flag)), *l, *lab = json_array();
    size_t i;
    json_array_foreach(ls, i, l) {
        const char *kv = json_string_value(l), *eq = strchr(kv, '=');
        if (!eq) eq = strchr(kv, ':');
        if (!eq) {
            int rc = cli_usage_error(c, in->cmd, "--%s is key=value,key=value; \"%s\" has no =", flag, kv);
            json_decref(ls);
            json_decref(lab);
            return rc;
        }
        json_array_append_new(lab, json_pack("{s:s%,s:s}", "key", kv, (size_t)(eq - kv), "value", eq + 1));
    }
    json_decref(ls);
    *out = lab;
    return CLI_OK;
}

/* {"jobId": {"value": id}} with "version" from --entity-version when given. */
static json_t *job_req(const struct cli_inv *in, const char *id) {
    json_t *req = json_pack("{s:o}", "jobId", cli_id_obj(id));
    const char *v = cli_flag(in, "entity-version");
    if (req && v) json_object_set_new(req, "version", cli_id_obj(v));
    return req;
}

/* The version a write answered, on a line ("Job <id> <what> (entity version V)"). */
static int print_version(struct cli *c, json_t *resp, const char *id, const char *what) {
    char v[128];
    if (c->json) cli_print_json(c, resp);
    else fprintf(c->out, "Job %s %s (entity version %s)\n", id, what, cli_str(resp, "version.value", v, sizeof v));
    json_decref(resp);
    return CLI_OK;
}

/* A JobSpec from argv[1]'s YAML in the pool at path (NULL: keep the file's
 * respoolId, else the job id's own pool). */
static int load_spec(struct cli *c, const struct cli_inv *in, const char *pool_path, const char *job_id, json_t **out) {
    json_t *spec = cli_load_yaml(c, in, &peloton__api__v1alpha__job__stateless__job_spec__descriptor, in->argv[1]);
    if (!spec) return CLI_USAGE;
    char pool[256] = "";
    int rc = CLI_OK;
    if (pool_path) {
        if (!cli_pool_path_ok(pool_path)) rc = cli_usage_error(c, in->cmd, "\"%s\": a pool's path starts with /", pool_path);
        else rc = cli_lookup_pool(c, pool_path, pool, sizeof pool);
    } else if (job_id && !json_object_get(spec, "respoolId")) { /* the job's own pool */
        json_t *resp;
        rc = cli_call(c, CLI_JOBMGR, &m_get, json_pack("{s:o}", "jobId", cli_id_obj(job_id)), &resp);
        if (!rc) {
            cli_str(resp, "jobInfo.spec.respoolId.value", pool, sizeof pool);
            json_decref(resp);
        }
    }
    if (rc) {
        json_decref(spec);
        return rc;
    }
    if (pool[0]) json_object_set_new(spec, "respoolId", cli_id_obj(pool));
    *out = spec;
    return CLI_OK;
}

CLI_CMD(sl_create) {
    json_t *spec, *resp;
    int rc = load_spec(c, in, in->argv[0], NULL, &spec);
    if (rc) return rc;
    json_t *req = json_pack("{s:o}", "spec", spec);
    const char *want = cli_flag(in, "jobID");
    if (req && want) json_object_set_new(req, "jobId", cli_id_obj(want));
    if ((rc = cli_call(c, CLI_JOBMGR, &m_create, req, &resp))) return rc;
    char id[256];
    return print_version(c, resp, cli_str(resp, "jobId.value", id, sizeof id), "created");
}

CLI_CMD(sl_get) {
    json_t *req = job_req(in, in->argv[0]), *resp;
    bool summary = cli_switch(in, "summary-only");
    if (req && summary) json_object_set_new(req, "summaryOnly", json_true());
    int rc = cli_call(c, CLI_JOBMGR, &m_get, req, &resp);
    if (rc) return rc;
    if (c->json) cli_print_json(c, resp);
    else cli_print_yaml(c->out, summary ? json_object_get(resp, "summary") : resp, 0);
    json_decref(resp);
    return CLI_OK;
}

CLI_CMD(sl_replace) {
    json_t *spec, *resp;
    long long batch = in->argc > 2 ? cli_parse_uint(in->argv[2]) : 0;
    if (batch < 0) return cli_usage_error(c, in->cmd, "batch-size is a whole number, not \"%s\"", in->argv[2]);
    int rc = load_spec(c, in, in->argc > 3 ? in->argv[3] : NULL, in->argv[0], &spec);
    if (rc) return rc;
    json_t *us = json_pack("{s:I}", "batchSize", batch);
    static const struct {
        const char *flag, *field;
    } nums[] = {{"max-instance-retries", "maxInstanceRetries"},
                {"max-tolerable-instance-failures", "maxTolerableInstanceFailures"}};
    for (size_t i = 0; i < sizeof nums / sizeof *nums; i++) {
        const char *v = cli_flag(in, nums[i].flag);
        if (!v) continue;
        long long n = cli_parse_uint(v);
        if (n < 0) {
            json_decref(spec);
            json_decref(us);
            return cli_usage_error(c, in->cmd, "--%s is a whole number, not \"%s\"", nums[i].flag, v);
        }
        json_object_set_new(us, nums[i].field, json_integer(n));
    }
    if (cli_switch(in, "rollback-on-failure")) json_object_set_new(us, "rollbackOnFailure", json_true());
    if (cli_switch(in, "start-paused")) json_object_set_new(us, "startPaused", json_true());
    if (cli_switch(in, "in-place")) json_object_set_new(us, "inPlace", json_true());
    json_t *req = job_req(in, in->argv[0]);
    if (req) {
        json_object_set_new(req, "spec", spec);
        json_object_set_new(req, "updateSpec", us);
    }
    if ((rc = cli_call(c, CLI_JOBMGR, &m_replace, req, &resp))) return rc;
    return print_version(c, resp, in->argv[0], "replaced");
}

CLI_CMD(sl_restart) {
    long long batch = in->argc > 1 ? cli_parse_uint(in->argv[1]) : 0;
    if (batch < 0) return cli_usage_error(c, in->cmd, "batch-size is a whole number, not \"%s\"", in->argv[1]);
    json_t *ranges = json_array(), *resp;
    const char *r = cli_flag(in, "range");
    char bad[128];
    if (r && cli_ranges(r, UINT32_MAX, ranges, bad, sizeof bad)) {
        json_decref(ranges);
        return cli_usage_error(c, in->cmd, "--range: \"%s\" is not from:to with from below to", bad);
    }
    json_t *req = job_req(in, in->argv[0]);
    if (req) {
        json_object_set_new(req, "batchSize", json_integer(batch));
        json_object_set_new(req, "ranges", ranges);
    } else {
        json_decref(ranges);
    }
    int rc = cli_call(c, CLI_JOBMGR, &m_restart, req, &resp);
    return rc ? rc : print_version(c, resp, in->argv[0], "restarting");
}

static int workflow(struct cli *c, const struct cli_inv *in, const struct clirpc_method *m, const char *what) {
    json_t *resp;
    int rc = cli_call(c, CLI_JOBMGR, m, job_req(in, in->argv[0]), &resp);
    return rc ? rc : print_version(c, resp, in->argv[0], what);
}
CLI_CMD(sl_pause) { return workflow(c, in, &m_pause, "workflow paused"); }
CLI_CMD(sl_resume) { return workflow(c, in, &m_resume, "workflow resumed"); }
CLI_CMD(sl_abort) { return workflow(c, in, &m_abort, "workflow aborted"); }

CLI_CMD(sl_delete) {
    json_t *req = job_req(in, in->argv[0]), *resp;
    if (req && cli_switch(in, "force")) json_object_set_new(req, "force", json_true());
    int rc = cli_call(c, CLI_JOBMGR, &m_delete, req, &resp);
    if (rc) return rc;
    if (c->json) cli_print_json(c, resp);
    else fprintf(c->out, "Job %s deleted\n", in->argv[0]);
    json_decref(resp);
    return CLI_OK;
}

/* ------------------------------------------------------------ tables */

static const char *const job_heads[] = {"ID", "NAME", "OWNER", "INSTANCES", "STATE", "DESIRED", "WORKFLOW", "VERSION"};
static void job_row(struct cli_table *t, const json_t *j) {
    char b[8][256];
    const char *row[8] = {cli_str(j, "jobId.value", b[0], 256),          cli_str(j, "name", b[1], 256),
                          cli_str(j, "owner", b[2], 256),                cli_str(j, "instanceCount", b[3], 256),
                          cli_str(j, "status.state", b[4], 256),         cli_str(j, "status.desiredState", b[5], 256),
                          cli_str(j, "status.workflowStatus.state", b[6], 256),
                          cli_str(j, "status.version.value", b[7], 256)};
    cli_table_add(t, row);
}

static const char *const pod_heads[] = {"POD", "STATE", "DESIRED", "POD-ID", "HOST", "MESSAGE"};
static void pod_row(struct cli_table *t, const json_t *p) {
    char b[6][256];
    const char *row[6] = {cli_str(p, "podName.value", b[0], 256),   cli_str(p, "status.state", b[1], 256),
                          cli_str(p, "status.desiredState", b[2], 256), cli_str(p, "status.podId.value", b[3], 256),
                          cli_str(p, "status.host", b[4], 256),     cli_str(p, "status.message", b[5], 256)};
    cli_table_add(t, row);
}

CLI_CMD(sl_query) {
    json_t *lab, *resp;
    int rc = cli_labels(c, in, "labels", &lab);
    if (rc) return rc;
    long long limit = cli_parse_uint(cli_flag(in, "limit"));
    if (limit < 0) {
        json_decref(lab);
        return cli_usage_error(c, in->cmd, "--limit is a whole number");
    }
    json_t *spec = json_pack("{s:o,s:o,s:o,s:{s:I}}", "labels", lab, "keywords", cli_split_list(cli_flag(in, "keywords")),
                             "jobStates", cli_state_list(cli_flag(in, "states")), "pagination", "limit", limit);
    if (spec && cli_flag(in, "owner")) json_object_set_new(spec, "owner", json_string(cli_flag(in, "owner")));
    if (spec && cli_flag(in, "name")) json_object_set_new(spec, "name", json_string(cli_flag(in, "name")));
    if ((rc = cli_call(c, CLI_JOBMGR, &m_query, json_pack("{s:o}", "spec", spec), &resp))) return rc;
    if (c->json) cli_print_json(c, resp);
    else {
        struct cli_table *t = cli_table_new(8, job_heads);
        json_t *j;
        size_t i;
        json_array_foreach(json_object_get(resp, "records"), i, j) job_row(t, j);
        cli_table_print(t, c->out);
        cli_table_free(t);
    }
    json_decref(resp);
    return CLI_OK;
}

/* ------------------------------------------------------------ streams */

/* What a stream printer keeps: the table (collected, printed at the end)
 * or, for watches, nothing (a line per event at once); the message budget. */
struct printer {
    struct cli *c;
    struct cli_table *t;
    const char *key; /* the array of each message that has the rows: "pods", "jobs" */
    bool pods;
    long long left; /* messages still wanted; <0: no bound */
};

/* A list stream's message: its rows join the table (-j: the message). */
static int on_list(void *ud, json_t *msg) {
    struct printer *p = ud;
    if (p->c->json) cli_print_json(p->c, msg);
    else {
        json_t *r;
        size_t i;
        json_array_foreach(json_object_get(msg, p->key), i, r) p->pods ? pod_row(p->t, r) : job_row(p->t, r);
    }
    return 0;
}

static int list_stream(struct cli *c, const struct clirpc_method *m, json_t *req, const char *key, bool pods) {
    if (!req) {
        fprintf(c->err, "peloton: out of memory\n");
        return CLI_ERR;
    }
    struct printer p = {.c = c, .key = key, .pods = pods, .left = -1};
    p.t = c->json ? NULL : cli_table_new(pods ? 6 : 8, pods ? pod_heads : job_heads);
    int rc = stream_rc(c, clirpc_stream(&c->rpc, c->url[CLI_JOBMGR], m, req, c->timeout_ms, on_list, &p));
    json_decref(req);
    if (p.t) {
        if (!rc) cli_table_print(p.t, c->out);
        cli_table_free(p.t);
    }
    return rc;
}

CLI_CMD(sl_list_pods) {
    json_t *req = json_pack("{s:o}", "jobId", cli_id_obj(in->argv[0]));
    const char *r = cli_flag(in, "range");
    if (req && r) {
        json_t *ranges = json_array();
        char bad[128];
        if (cli_ranges(r, UINT32_MAX, ranges, bad, sizeof bad) || json_array_size(ranges) > 1) {
            json_decref(ranges);
            json_decref(req);
            return cli_usage_error(c, in->cmd, "--range is one from:to with from below to");
        }
        if (json_array_size(ranges)) json_object_set(req, "range", json_array_get(ranges, 0));
        json_decref(ranges);
    }
    return list_stream(c, &m_list_pods, req, "pods", true);
}

CLI_CMD(sl_list) { return list_stream(c, &m_list_jobs, json_object(), "jobs", false); }

/* A watch's message: a line per job or pod in it, at once (-j: the message). */
static int on_watch(void *ud, json_t *msg) {
    struct printer *p = ud;
    struct cli *c = p->c;
    if (c->json) cli_print_json(c, msg);
    else {
        char b[6][256], rev[32];
        json_t *x;
        size_t i;
        cli_str(msg, "revision", rev, sizeof rev);
        static const char *const lists[] = {"statelessJobs", "statelessJobsNotFound", "pods", "podsNotFound"};
        size_t rows = 0;
        for (size_t k = 0; k < sizeof lists / sizeof *lists; k++) rows += json_array_size(json_object_get(msg, lists[k]));
        if (!rows) /* the first message: the watch is open */
            fprintf(c->out, "revision=%s watch=%s\n", rev, cli_str(msg, "watchId", b[0], 256));
        json_array_foreach(json_object_get(msg, "statelessJobs"), i, x)
            fprintf(c->out, "revision=%s job=%s name=%s state=%s desired=%s workflow=%s version=%s\n", rev,
                    cli_str(x, "jobId.value", b[0], 256), cli_str(x, "name", b[1], 256),
                    cli_str(x, "status.state", b[2], 256), cli_str(x, "status.desiredState", b[3], 256),
                    cli_str(x, "status.workflowStatus.state", b[4], 256), cli_str(x, "status.version.value", b[5], 256));
        json_array_foreach(json_object_get(msg, "podsNotFound"), i, x)
            fprintf(c->out, "revision=%s pod=%s not-found\n", rev, cli_str(x, "value", b[0], 256));
        json_array_foreach(json_object_get(msg, "statelessJobsNotFound"), i, x)
            fprintf(c->out, "revision=%s job=%s not-found\n", rev, cli_str(x, "value", b[0], 256));
        json_array_foreach(json_object_get(msg, "pods"), i, x)
            fprintf(c->out, "revision=%s pod=%s state=%s desired=%s pod-id=%s host=%s\n", rev,
                    cli_str(x, "podName.value", b[0], 256), cli_str(x, "status.state", b[1], 256),
                    cli_str(x, "status.desiredState", b[2], 256), cli_str(x, "status.podId.value", b[3], 256),
                    cli_str(x, "status.host", b[4], 256));
    }
    fflush(c->out); /* each event as it comes, also into a pipe */
    return p->left > 0 && --p->left == 0;
}

/* --limit and --duration of a watch: messages and milliseconds (0: none). */
static int watch_bounds(struct cli *c, const struct cli_inv *in, long long *limit, long *ms) {
    const char *l = cli_flag(in, "limit"), *d = cli_flag(in, "duration");
    *limit = l ? cli_parse_uint(l) : 0;
    long long s = d ? cli_parse_uint(d) : 0;
    if (*limit < 0) return cli_usage_error(c, in->cmd, "--limit is a number of messages, not \"%s\"", l);
    if (s < 0 || s > 86400 * 365) return cli_usage_error(c, in->cmd, "--duration is a number of seconds, not \"%s\"", d);
    *ms = (long)s * 1000;
    return CLI_OK;
}

static int watch(struct cli *c, const struct cli_inv *in, json_t *req) {
    long long limit = 0;
    long ms = 0;
    int rc = watch_bounds(c, in, &limit, &ms);
    if (rc || !req) {
        json_decref(req);
        return rc ? rc : CLI_ERR;
    }
    struct printer p = {.c = c, .left = limit ? limit : -1};
    rc = stream_rc(c, clirpc_stream(&c->rpc, c->url[CLI_JOBMGR], &m_watch, req, ms, on_watch, &p));
    json_decref(req);
    return rc;
}

CLI_CMD(watch_job) {
    json_t *lab, *ids = json_array();
    int rc = cli_labels(c, in, "labels", &lab);
    if (rc) {
        json_decref(ids);
        return rc;
    }
    for (int i = 0; i < in->argc; i++) json_array_append_new(ids, cli_id_obj(in->argv[i]));
    return watch(c, in, json_pack("{s:{s:o,s:o}}", "statelessJobFilter", "jobIds", ids, "labels", lab));
}

CLI_CMD(watch_pod) {
    json_t *lab, *names = json_array();
    int rc = cli_labels(c, in, "labels", &lab);
    if (rc) {
        json_decref(names);
        return rc;
    }
    for (int i = 0; i < in->argc; i++) json_array_append_new(names, cli_id_obj(in->argv[i]));
    json_t *f = json_pack("{s:o,s:o}", "podNames", names, "labels", lab);
    const char *job = cli_flag(in, "job-id");
    if (f && job) json_object_set_new(f, "jobId", cli_id_obj(job));
    return watch(c, in, json_pack("{s:o}", "podFilter", f));
}
