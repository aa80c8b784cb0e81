/* Updates and hosts: update create|get|list|cache|pause|resume|rollback|abort
 * over v0 UpdateService and --wait's following of an update;
 * host query and host maintenance start|complete|query over v0 HostService. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "clicmd.h"

static const struct clirpc_method
    m_upd_create = UM_("CreateUpdate", create_update_request, create_update_response),
    m_upd_get = UM_("GetUpdate", get_update_request, get_update_response),
    m_upd_list = UM_("ListUpdates", list_updates_request, list_updates_response),
    m_upd_pause = UM_("PauseUpdate", pause_update_request, pause_update_response),
    m_upd_resume = UM_("ResumeUpdate", resume_update_request, resume_update_response),
    m_upd_rollback = UM_("RollbackUpdate", rollback_update_request, rollback_update_response),
    m_upd_abort = UM_("AbortUpdate", abort_update_request, abort_update_response),
    m_upd_cache = UM_("GetUpdateCache", get_update_cache_request, get_update_cache_response),
    m_host_query = HM_("QueryHosts", query_hosts_request, query_hosts_response),
    m_host_start = HM_("StartMaintenance", start_maintenance_request, start_maintenance_response),
    m_host_complete = HM_("CompleteMaintenance", complete_maintenance_request, complete_maintenance_response);

/* Polls GetUpdate until the update ends or pauses, or wait_ms passes; a
 * line on stderr at each change. SUCCEEDED and PAUSED end with 0; ABORTED,
 * FAILED and ROLLED_BACK with 1. */
int cli_update_wait(struct cli *c, const char *uid, long wait_ms) {
    struct timespec t0;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    char last[512] = "", line[512], st[64];
    for (;;) {
        json_t *resp;
        int rc = cli_call(c, CLI_JOBMGR, &m_upd_get, json_pack("{s:{s:s}}", "updateId", "value", uid), &resp);
        if (rc) return rc;
        json_t *s = json_object_get(json_object_get(resp, "updateInfo"), "status");
        long long done = json_integer_value(json_object_get(s, "numTasksDone"));
        long long failed = json_integer_value(json_object_get(s, "numTasksFailed"));
        long long left = json_integer_value(json_object_get(s, "numTasksRemaining"));
        cli_str(s, "state", st, sizeof st);
        json_decref(resp);
        if (!st[0]) snprintf(st, sizeof st, "INVALID");
        if (!strcmp(st, "INITIALIZED")) /* not seen by the job manager yet: the counts are the last update's */
            snprintf(line, sizeof line, "update %.200s: %s", uid, st);
        else snprintf(line, sizeof line, "update %.200s: %s, %lld/%lld instances done, %lld failed", uid, st, done,
                      done + failed + left, failed);
        if (strcmp(line, last)) fprintf(c->err, "%s\n", line);
        snprintf(last, sizeof last, "%s", line);
        if (!strcmp(st, "SUCCEEDED")) return CLI_OK;
        if (!strcmp(st, "PAUSED")) {
            fprintf(c->err, "update %s is paused: 'peloton update resume %s' goes on\n", uid, uid);
            return CLI_OK;
        }
        if (!strcmp(st, "ABORTED") || !strcmp(st, "FAILED") || !strcmp(st, "ROLLED_BACK")) {
            fprintf(c->err, "peloton: error: update %s ended %s\n", uid, st);
            return CLI_ERR;
        }
        if (cli_elapsed_ms(&t0) >= wait_ms) {
            fprintf(c->err, "peloton: error: deadline-exceeded: update %s not done after %ld ms (%s)\n", uid,
                    wait_ms, last);
            return CLI_ERR;
        }
        usleep(300 * 1000);
    }
}

/* ------------------------------------------------------------------- update */

static json_t *upd_req(const char *uid) { return json_pack("{s:{s:s}}", "updateId", "value", uid); }

static const char *const upd_heads[] = {"UPDATE-ID", "JOB", "STATE", "DONE", "FAILED", "REMAINING", "BATCH-SIZE"};

static void upd_row(struct cli_table *t, const json_t *u) {
    char b[7][256];
    const char *row[7] = {cli_str(u, "updateId.value", b[0], 256),        cli_str(u, "jobId.value", b[1], 256),
                          cli_str(u, "status.state", b[2], 256),          cli_str(u, "status.numTasksDone", b[3], 256),
                          cli_str(u, "status.numTasksFailed", b[4], 256), cli_str(u, "status.numTasksRemaining", b[5], 256),
                          cli_str(u, "config.batchSize", b[6], 256)};
    if (!b[2][0]) snprintf(b[2], 256, "INVALID");
    for (int k = 3; k < 7; k++) /* proto3 JSON leaves zeros out */
        if (!b[k][0]) snprintf(b[k], 256, "0");
    cli_table_add(t, row);
}

/* update create <job> <config.yaml> [batch-size] [respool-path] */
int cli_cmd_update_create(struct cli *c, const struct cli_inv *in) {
    long wait_ms = cli_wait_bound(c, in);
    if (wait_ms < 0) return CLI_USAGE;
    json_t *uc = json_object();
    if (in->argc > 2) {
        long long n = cli_parse_uint(in->argv[2]);
        if (n < 0) {
            json_decref(uc);
            return cli_usage_error(c, in->cmd, "batch size \"%s\" is not a number", in->argv[2]);
        }
        json_object_set_new(uc, "batchSize", json_integer(n));
    }
    static const char *const counts[][2] = {{"maxattempts", "maxInstanceAttempts"},
                                            {"maxfailureInstances", "maxFailureInstances"}};
    for (size_t i = 0; i < 2; i++) {
        const char *s = cli_flag(in, counts[i][0]);
        long long n = cli_parse_uint(s);
        if (n < 0) {
            json_decref(uc);
            return cli_usage_error(c, in->cmd, "--%s is a number, not \"%s\"", counts[i][0], s ? s : "");
        }
        if (n) json_object_set_new(uc, counts[i][1], json_integer(n));
    }
    const char *pct = cli_flag(in, "batch-percentage");
    if (pct) {
        char *end;
        double p = strtod(pct, &end);
        if (!*pct || *end || !(p > 0 && p <= 100)) {
            json_decref(uc);
            return cli_usage_error(c, in->cmd, "--batch-percentage is a number in (0, 100], not \"%s\"", pct);
        }
        json_object_set_new(uc, "batchPercentage", json_real(p));
    }
    static const char *const sw[][2] = {
        {"rollbackOnFailure", "rollbackOnFailure"}, {"start-paused", "startPaused"}, {"in-place", "inPlace"}};
    for (size_t i = 0; i < 3; i++)
        if (cli_switch(in, sw[i][0])) json_object_set_new(uc, sw[i][1], json_true());
    json_t *cfg, *resp;
    int rc = cli_new_config(c, in, in->argc > 3 ? in->argv[3] : NULL, &cfg);
    if (rc) {
        json_decref(uc);
        return rc;
    }
    rc = cli_call(c, CLI_JOBMGR, &m_upd_create,
                  json_pack("{s:o,s:o,s:o}", "jobId", cli_id_obj(in->argv[0]), "jobConfig", cfg, "updateConfig", uc),
                  &resp);
    if (rc) return rc;
    char uid[256];
    cli_str(resp, "updateID.value", uid, sizeof uid);
    if (c->json) cli_print_json(c, resp);
    else fprintf(c->out, "Update %s created for job %s\n", uid, in->argv[0]);
    json_decref(resp);
    return wait_ms ? cli_update_wait(c, uid, wait_ms) : CLI_OK;
}

int cli_cmd_update_get(struct cli *c, const struct cli_inv *in) {
    json_t *resp;
    int rc = cli_call(c, CLI_JOBMGR, &m_upd_get, upd_req(in->argv[0]), &resp);
    if (rc) return rc;
    if (c->json) cli_print_json(c, resp);
    else {
        struct cli_table *t = cli_table_new(7, upd_heads);
        upd_row(t, json_object_get(resp, "updateInfo"));
        cli_table_print(t, c->out);
        cli_table_free(t);
    }
    json_decref(resp);
    return CLI_OK;
}

int cli_cmd_update_list(struct cli *c, const struct cli_inv *in) {
    json_t *resp, *u;
    int rc = cli_call(c, CLI_JOBMGR, &m_upd_list, json_pack("{s:{s:s}}", "jobID", "value", in->argv[0]), &resp);
    if (rc) return rc;
    if (c->json) cli_print_json(c, resp);
    else {
        json_t *all = json_object_get(resp, "updateInfo");
        struct cli_table *t = cli_table_new(7, upd_heads);
        size_t i;
        json_array_foreach(all, i, u) upd_row(t, u);
        cli_table_print(t, c->out);
        cli_table_free(t);
        fprintf(c->err, "%zu update(s)\n", json_array_size(all));
    }
    json_decref(resp);
    return CLI_OK;
}

int cli_cmd_update_cache(struct cli *c, const struct cli_inv *in) {
    json_t *resp;
    int rc = cli_call(c, CLI_JOBMGR, &m_upd_cache, upd_req(in->argv[0]), &resp);
    if (rc) return rc;
    cli_print_reply_yaml(c, resp, NULL);
    json_decref(resp);
    return CLI_OK;
}

static int update_action(struct cli *c, const struct cli_inv *in, const struct clirpc_method *m, const char *done) {
    json_t *resp;
    int rc = cli_call(c, CLI_JOBMGR, m, upd_req(in->argv[0]), &resp);
    if (rc) return rc;
    if (c->json) cli_print_json(c, resp);
    else fprintf(c->out, "Update %s %s\n", in->argv[0], done);
    json_decref(resp);
    return CLI_OK;
}

int cli_cmd_update_pause(struct cli *c, const struct cli_inv *in) {
    return update_action(c, in, &m_upd_pause, "paused");
}
int cli_cmd_update_resume(struct cli *c, const struct cli_inv *in) {
    return update_action(c, in, &m_upd_resume, "resumed");
}
int cli_cmd_update_rollback(struct cli *c, const struct cli_inv *in) {
    return update_action(c, in, &m_upd_rollback, "rolling back");
}
int cli_cmd_update_abort(struct cli *c, const struct cli_inv *in) {
    return update_action(c, in, &m_upd_abort, "aborted");
}

/* --------------------------------------------------------------------- host */

/* States given as "draining,HOST_STATE_UP": the enum names. */
static int host_states(struct cli *c, const struct cli_inv *in, json_t **out) {
    static const char *const names[] = {"UNKNOWN", "UP", "DRAINING", "DRAINED", "DOWN"};
    json_t *a = cli_state_list(cli_flag(in, "states")), *v;
    size_t i;
    json_array_foreach(a, i, v) {
        const char *s = json_string_value(v);
        if (!strncmp(s, "HOST_STATE_", 11)) s += 11;
        size_t k = 0;
        while (k < sizeof names / sizeof *names && strcmp(s, names[k])) k++;
        if (k == sizeof names / sizeof *names) {
            int rc = cli_usage_error(c, in->cmd,
                                     "--states: \"%s\" is not a host state (up, draining, drained, down, unknown)",
                                     json_string_value(v));
            json_decref(a);
            return rc;
        }
        char full[32];
        snprintf(full, sizeof full, "HOST_STATE_%s", names[k]);
        json_array_set_new(a, i, json_string(full));
    }
    *out = a;
    return CLI_OK;
}

int cli_cmd_host_query(struct cli *c, const struct cli_inv *in) {
    json_t *states = NULL, *resp, *h;
    int rc = host_states(c, in, &states);
    if (rc) return rc;
    if ((rc = cli_call(c, CLI_HOSTMGR, &m_host_query, json_pack("{s:o}", "hostStates", states), &resp))) return rc;
    if (c->json) cli_print_json(c, resp);
    else {
        static const char *const heads[] = {"HOSTNAME", "IP", "STATE", "GOAL-STATE"};
        json_t *all = json_object_get(resp, "hostInfos");
        struct cli_table *t = cli_table_new(4, heads);
        size_t i;
        json_array_foreach(all, i, h) {
            char b[4][256];
            const char *row[4] = {cli_str(h, "hostname", b[0], 256), cli_str(h, "ip", b[1], 256),
                                  cli_str(h, "state", b[2], 256), cli_str(h, "goalState", b[3], 256)};
            cli_table_add(t, row);
        }
        cli_table_print(t, c->out);
        cli_table_free(t);
        fprintf(c->err, "%zu host(s)\n", json_array_size(all));
    }
    json_decref(resp);
    return CLI_OK;
}

/* host maintenance start|complete <host,host,...>: one call a host, in
 * order, stopping at the first refusal (the hosts before it stay changed). */
static int host_maintenance(struct cli *c, const struct cli_inv *in, const struct clirpc_method *m, const char *done) {
    json_t *hosts = cli_split_list(in->argv[0]), *h;
    size_t i;
    int rc = CLI_OK;
    if (!json_array_size(hosts)) rc = cli_usage_error(c, in->cmd, "no hostname given");
    json_array_foreach(hosts, i, h) {
        json_t *resp;
        if (rc || (rc = cli_call(c, CLI_HOSTMGR, m, json_pack("{s:O}", "hostname", h), &resp))) break;
        if (c->json) cli_print_json(c, resp);
        else fprintf(c->out, "Host %s: %s\n", json_string_value(h), done);
        json_decref(resp);
    }
    json_decref(hosts);
    return rc;
}

int cli_cmd_host_maint_start(struct cli *c, const struct cli_inv *in) {
    return host_maintenance(c, in, &m_host_start, "maintenance started");
}
int cli_cmd_host_maint_complete(struct cli *c, const struct cli_inv *in) {
    return host_maintenance(c, in, &m_host_complete, "maintenance completed");
}

