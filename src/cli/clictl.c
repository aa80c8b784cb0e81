/* Job and task control: job stop|start|restart (and Peloton's rolling-*
 * names), job update|refresh|cache|active-list, task start|stop|restart|events;
 * instance ranges (cli_ranges) and the waits for a stop. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "clicmd.h"

static const struct clirpc_method
    m_job_stop = JM_("Stop", stop_request, stop_response),
    m_job_start = JM_("Start", start_request, start_response),
    m_job_restart = JM_("Restart", restart_request, restart_response),
    m_job_update = JM_("Update", update_request, update_response),
    m_job_refresh = JM_("Refresh", refresh_request, refresh_response),
    m_job_cache = JM_("GetCache", get_cache_request, get_cache_response),
    m_job_active = JM_("GetActiveJobs", get_active_jobs_request, get_active_jobs_response),
    m_task_start = TM_("Start", start_request, start_response),
    m_task_stop = TM_("Stop", stop_request, stop_response),
    m_task_restart = TM_("Restart", restart_request, restart_response),
    m_task_events = TM_("GetPodEvents", get_pod_events_request, get_pod_events_response);

/* A version (a job's resource or configuration version): a uint64 as
 * proto3 JSON writes it, a string; NULL when s is not a number. */
static json_t *version_json(const char *s) {
    char *end;
    if (!s || !*s || *s == '-' || strlen(s) > 20) return NULL;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (*end || errno) return NULL;
    char b[32];
    snprintf(b, sizeof b, "%llu", v);
    return json_string(b);
}

long cli_elapsed_ms(const struct timespec *t0) {
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    return (now.tv_sec - t0->tv_sec) * 1000 + (now.tv_nsec - t0->tv_nsec) / 1000000;
}

/* --wait's bound from --wait-timeout (seconds): 0 without --wait, -1 when bad. */
long cli_wait_bound(struct cli *c, const struct cli_inv *in) {
    if (!cli_switch(in, "wait") && !cli_switch(in, "progress")) return 0;
    const char *w = cli_flag(in, "wait-timeout");
    long long s = cli_parse_uint(w);
    if (s <= 0) {
        cli_usage_error(c, in->cmd, "--wait-timeout is a number of seconds, not \"%s\"", w ? w : "");
        return -1;
    }
    return (long)s * 1000;
}

/* The job's instanceCount (for a range's open end), or -1 after printing why not. */
static long long job_instances(struct cli *c, const char *id) {
    json_t *resp;
    if (cli_job_get(c, id, &resp)) return -1;
    long long n = json_integer_value(json_object_get(json_object_get(json_object_get(resp, "jobInfo"), "config"),
                                                     "instanceCount"));
    json_decref(resp);
    return n;
}

int cli_ranges(const char *spec, long long count, json_t *out, char *bad, size_t badlen) {
    size_t n = strlen(spec);
    const char *p = spec, *end = spec + n;
    while (p < end) {
        const char *comma = memchr(p, ',', (size_t)(end - p));
        size_t len = comma ? (size_t)(comma - p) : (size_t)(end - p);
        const char *colon = memchr(p, ':', len);
        long long from = -1, to = -1;
        if (colon && (size_t)(colon - p) < 16 && len - (size_t)(colon - p) - 1 < 16) {
            char a[16], b[16];
            snprintf(a, sizeof a, "%.*s", (int)(colon - p), p);
            snprintf(b, sizeof b, "%.*s", (int)(len - (size_t)(colon - p) - 1), colon + 1);
            from = a[0] ? cli_parse_uint(a) : 0;
            to = b[0] ? cli_parse_uint(b) : -2; /* -2: the job's end */
        }
        if (len == 1 && *p == ':') { /* every instance: as no range */
        } else if (len && (from < 0 || to == -1 || (to >= 0 && to <= from))) {
            snprintf(bad, badlen, "%.*s", (int)(len < 64 ? len : 64), p);
            return -1;
        } else if (len) {
            if (to == -2 && count < 0) return 1;
            json_array_append_new(out, json_pack("{s:I,s:I}", "from", from, "to", to == -2 ? count : to));
        }
        p += len + (comma != NULL);
    }
    return 0;
}

/* -r from:to (repeated, or comma-separated) as InstanceRanges: cli_ranges,
 * with the job's instanceCount read with Get when a range is open-ended
 * (so a reply lists what the range named; the server also reads a `to`
 * past the job as its end). */
static int instance_ranges(struct cli *c, const struct cli_inv *in, const char *job, json_t **ranges) {
    *ranges = json_array();
    const char *r = cli_flag(in, "range");
    char bad[80];
    int k = r ? cli_ranges(r, -1, *ranges, bad, sizeof bad) : 0;
    if (k == 1) {
        long long count = job_instances(c, job);
        json_array_clear(*ranges);
        k = count < 0 ? 2 : cli_ranges(r, count, *ranges, bad, sizeof bad);
    }
    if (k == 0) return CLI_OK;
    json_decref(*ranges);
    *ranges = NULL;
    if (k == 2) return CLI_ERR;
    return cli_usage_error(c, in->cmd, "--range \"%s\": expected from:to with from below to (to excluded)", bad);
}

/* Polls Get until the job is KILLED (or ended another way), or wait_ms passes. */
static int job_wait_stopped(struct cli *c, const char *id, long wait_ms) {
    struct timespec t0;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    char last[512] = "", line[512], st[64];
    for (;;) {
        json_t *resp;
        int rc = cli_job_get(c, id, &resp);
        if (rc) return rc;
        json_t *info = json_object_get(resp, "jobInfo");
        cli_str(info, "runtime.state", st, sizeof st);
        long long up = cli_job_up(info);
        json_decref(resp);
        if (!st[0]) snprintf(st, sizeof st, "UNKNOWN");
        snprintf(line, sizeof line, "job %.200s: %s, %lld instance(s) running", id, st, up);
        if (strcmp(line, last)) fprintf(c->err, "%s\n", line);
        snprintf(last, sizeof last, "%s", line);
        if (!strcmp(st, "KILLED") || !strcmp(st, "SUCCEEDED") || !strcmp(st, "FAILED")) return CLI_OK;
        if (cli_elapsed_ms(&t0) >= wait_ms) {
            fprintf(c->err, "peloton: error: deadline-exceeded: job %s not stopped after %ld ms (%s)\n", id,
                    wait_ms, last);
            return CLI_ERR;
        }
        usleep(300 * 1000);
    }
}

enum job_op { OP_STOP, OP_START, OP_RESTART };

/* job stop|start|restart <job> [batch-size] [-r from:to]... [--resourceVersion N] [--wait] */
static int job_lifecycle(struct cli *c, const struct cli_inv *in, enum job_op op) {
    static const struct {
        const struct clirpc_method *m;
        const char *cfgkey, *done;
    } ops[] = {{&m_job_stop, "stopConfig", "stopping"},
               {&m_job_start, "startConfig", "starting"},
               {&m_job_restart, "restartConfig", "restarting"}};
    const char *id = in->argv[0];
    long wait_ms = cli_wait_bound(c, in);
    if (wait_ms < 0) return CLI_USAGE;
    json_t *req = json_pack("{s:o}", "id", cli_id_obj(id)), *ranges, *resp;
    const char *bs = in->argc > 1 ? in->argv[1] : NULL;
    if (bs) {
        long long n = cli_parse_uint(bs);
        if (n < 0) {
            json_decref(req);
            return cli_usage_error(c, in->cmd, "batch size \"%s\" is not a number", bs);
        }
        json_object_set_new(req, ops[op].cfgkey, json_pack("{s:I}", "batchSize", n));
    }
    const char *rv = cli_flag(in, "resourceVersion");
    if (rv) {
        json_t *v = version_json(rv);
        if (!v) {
            json_decref(req);
            return cli_usage_error(c, in->cmd, "--resourceVersion is a number, not \"%s\"", rv);
        }
        json_object_set_new(req, "resourceVersion", v);
    }
    int rc = instance_ranges(c, in, id, &ranges);
    if (rc) {
        json_decref(req);
        return rc;
    }
    json_object_set_new(req, "ranges", ranges);
    if ((rc = cli_call(c, CLI_JOBMGR, ops[op].m, req, &resp))) return rc;
    char v[64], uid[256];
    cli_str(resp, "updateID.value", uid, sizeof uid);
    if (c->json) cli_print_json(c, resp);
    else if (uid[0])
        fprintf(c->out, "Job %s %s: update %s (resource version %s)\n", id, ops[op].done, uid,
                cli_str(resp, "resourceVersion", v, sizeof v)[0] ? v : "0");
    else fprintf(c->out, "Job %s %s (resource version %s)\n", id, ops[op].done,
                 cli_str(resp, "resourceVersion", v, sizeof v)[0] ? v : "0");
    json_decref(resp);
    if (!wait_ms) return CLI_OK;
    if (uid[0]) return cli_update_wait(c, uid, wait_ms);
    return op == OP_STOP ? job_wait_stopped(c, id, wait_ms) : cli_job_wait(c, id, wait_ms);
}

int cli_cmd_job_stop(struct cli *c, const struct cli_inv *in) { return job_lifecycle(c, in, OP_STOP); }
int cli_cmd_job_start(struct cli *c, const struct cli_inv *in) { return job_lifecycle(c, in, OP_START); }
int cli_cmd_job_restart(struct cli *c, const struct cli_inv *in) { return job_lifecycle(c, in, OP_RESTART); }

/* A JobConfig from the YAML for job update / update create: the pool at
 * respool (else the job's own, which Get reads: the config replaces the
 * pool too), and the configuration version given with -c as the
 * precondition. */
int cli_new_config(struct cli *c, const struct cli_inv *in, const char *respool, json_t **out) {
    const char *ver = cli_flag(in, "configuration-version");
    json_t *v = NULL;
    if (ver && strcmp(ver, "0") && !(v = version_json(ver)))
        return cli_usage_error(c, in->cmd, "--configuration-version is a number, not \"%s\"", ver);
    if (respool && !cli_pool_path_ok(respool)) {
        json_decref(v);
        return cli_usage_error(c, in->cmd, "\"%s\": a pool's path starts with /", respool);
    }
    json_t *cfg = cli_load_yaml(c, in, &peloton__api__v0__job__job_config__descriptor, in->argv[1]);
    if (!cfg) {
        json_decref(v);
        return CLI_USAGE;
    }
    if (v) json_object_set_new(cfg, "changeLog", json_pack("{s:o}", "version", v));
    char pool[256] = "";
    int rc = CLI_OK;
    if (respool) rc = cli_lookup_pool(c, respool, pool, sizeof pool);
    else if (!json_object_get(cfg, "respoolID")) {
        json_t *resp;
        if (!(rc = cli_job_get(c, in->argv[0], &resp))) {
            cli_str(resp, "jobInfo.config.respoolID.value", pool, sizeof pool);
            json_decref(resp);
        }
    }
    if (rc) {
        json_decref(cfg);
        return rc;
    }
    if (pool[0]) json_object_set_new(cfg, "respoolID", cli_id_obj(pool));
    *out = cfg;
    return CLI_OK;
}

int cli_cmd_job_update(struct cli *c, const struct cli_inv *in) {
    json_t *cfg, *resp;
    int rc = cli_new_config(c, in, NULL, &cfg);
    if (rc) return rc;
    rc = cli_call(c, CLI_JOBMGR, &m_job_update, json_pack("{s:o,s:o}", "id", cli_id_obj(in->argv[0]), "config", cfg),
                  &resp);
    if (rc) return rc;
    char msg[512];
    if (c->json) cli_print_json(c, resp);
    else fprintf(c->out, "Job %s updated: %s\n", in->argv[0],
                 cli_str(resp, "message", msg, sizeof msg)[0] ? msg : "done");
    json_decref(resp);
    return CLI_OK;
}

int cli_cmd_job_refresh(struct cli *c, const struct cli_inv *in) {
    json_t *resp;
    int rc = cli_call(c, CLI_JOBMGR, &m_job_refresh, json_pack("{s:o}", "id", cli_id_obj(in->argv[0])), &resp);
    if (rc) return rc;
    if (c->json) cli_print_json(c, resp);
    else fprintf(c->out, "Job %s refreshed\n", in->argv[0]);
    json_decref(resp);
    return CLI_OK;
}

int cli_cmd_job_cache(struct cli *c, const struct cli_inv *in) {
    json_t *resp;
    int rc = cli_call(c, CLI_JOBMGR, &m_job_cache, json_pack("{s:o}", "id", cli_id_obj(in->argv[0])), &resp);
    if (rc) return rc;
    cli_print_reply_yaml(c, resp, NULL);
    json_decref(resp);
    return CLI_OK;
}

int cli_cmd_job_active(struct cli *c, const struct cli_inv *in) {
    (void)in;
    json_t *resp, *e;
    size_t i;
    int rc = cli_call(c, CLI_JOBMGR, &m_job_active, json_object(), &resp);
    if (rc) return rc;
    if (c->json) cli_print_json(c, resp);
    else {
        json_array_foreach(json_object_get(resp, "ids"), i, e) {
            char b[256];
            fprintf(c->out, "%s\n", cli_str(e, "value", b, sizeof b));
        }
        fprintf(c->err, "%zu active job(s)\n", json_array_size(json_object_get(resp, "ids")));
    }
    json_decref(resp);
    return CLI_OK;
}

/* task start|stop|restart <job> [-r from:to]... */
static int task_action(struct cli *c, const struct cli_inv *in, const struct clirpc_method *m, const char *key,
                       const char *done) {
    json_t *ranges, *resp;
    int rc = instance_ranges(c, in, in->argv[0], &ranges);
    if (rc) return rc;
    rc = cli_call(c, CLI_JOBMGR, m, json_pack("{s:{s:s},s:o}", "jobId", "value", in->argv[0], "ranges", ranges), &resp);
    if (rc) return rc;
    if (c->json) cli_print_json(c, resp);
    else {
        json_t *ids = key ? json_object_get(resp, key) : NULL, *e;
        size_t i;
        fprintf(c->out, "Job %s: %s", in->argv[0], done);
        if (!key) fprintf(c->out, " requested");
        else if (!json_array_size(ids)) fprintf(c->out, " none");
        json_array_foreach(ids, i, e) fprintf(c->out, "%s%lld", i ? "," : " ", (long long)json_integer_value(e));
        fputc('\n', c->out);
    }
    json_decref(resp);
    return CLI_OK;
}
int cli_cmd_task_start(struct cli *c, const struct cli_inv *in) {
    return task_action(c, in, &m_task_start, "startedInstanceIds", "started");
}
int cli_cmd_task_stop(struct cli *c, const struct cli_inv *in) {
    return task_action(c, in, &m_task_stop, "stoppedInstanceIds", "stopped");
}
int cli_cmd_task_restart(struct cli *c, const struct cli_inv *in) {
    return task_action(c, in, &m_task_restart, NULL, "restart");
}

int cli_cmd_task_events(struct cli *c, const struct cli_inv *in) {
    long long inst = cli_parse_uint(in->argv[1]);
    if (inst < 0) return cli_usage_error(c, in->cmd, "instance \"%s\" is not a number", in->argv[1]);
    json_t *resp, *req = json_pack("{s:{s:s},s:I}", "jobId", "value", in->argv[0], "instanceId", inst);
    const char *run = cli_flag(in, "run"), *limit = cli_flag(in, "limit");
    if (limit && cli_parse_uint(limit) < 0) {
        json_decref(req);
        return cli_usage_error(c, in->cmd, "--limit is a number, not \"%s\"", limit);
    }
    if (req && run) json_object_set_new(req, "runId", json_string(run));
    if (req && limit) json_object_set_new(req, "limit", json_integer(cli_parse_uint(limit)));
    int rc = cli_call(c, CLI_JOBMGR, &m_task_events, req, &resp);
    if (rc) return rc;
    if (c->json) cli_print_json(c, resp);
    else {
        static const char *const heads[] = {"TIME", "STATE", "GOAL", "HOST", "MESSAGE", "REASON"};
        struct cli_table *t = cli_table_new(6, heads);
        json_t *e;
        size_t i;
        json_array_foreach(json_object_get(resp, "result"), i, e) {
            char b[6][512];
            const char *row[6] = {cli_str(e, "timestamp", b[0], 512), cli_str(e, "actualState", b[1], 512),
                                  cli_str(e, "goalState", b[2], 512), cli_str(e, "hostname", b[3], 512),
                                  cli_str(e, "message", b[4], 512),   cli_str(e, "reason", b[5], 512)};
            cli_table_add(t, row);
        }
        cli_table_print(t, c->out);
        cli_table_free(t);
    }
    json_decref(resp);
    return CLI_OK;
}

