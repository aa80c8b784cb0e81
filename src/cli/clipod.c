/* Pods: pod get|restart|events-v1alpha over v1alpha PodService (a pod by
 * its name, <job-id>-<instance>); pod events is v0's TaskManager.GetPodEvents
 * (cli_cmd_task_events with --run and --limit). */
#include <stdlib.h>
#include <string.h>

#include "clicmd.h"
#include "peloton/api/v1alpha/pod/svc/pod_svc.pb-c.h"

#define PM_(m, rq, rs)                                                                                              \
    {"peloton.api.v1alpha.pod.svc.PodService::" m, "peloton-jobmgr",                                               \
     &peloton__api__v1alpha__pod__svc__##rq##__descriptor, &peloton__api__v1alpha__pod__svc__##rs##__descriptor}

static const struct clirpc_method m_pod_get = PM_("GetPod", get_pod_request, get_pod_response),
                                  m_pod_events = PM_("GetPodEvents", get_pod_events_request, get_pod_events_response),
                                  m_pod_restart = PM_("RestartPod", restart_pod_request, restart_pod_response);

static json_t *pod_req(const char *name) { return json_pack("{s:{s:s}}", "podName", "value", name); }

int cli_cmd_pod_get(struct cli *c, const struct cli_inv *in) {
    json_t *req = pod_req(in->argv[0]), *resp;
    if (req && cli_switch(in, "statusonly")) json_object_set_new(req, "statusOnly", json_true());
    int rc = cli_call(c, CLI_JOBMGR, &m_pod_get, req, &resp);
    if (rc) return rc;
    if (cli_switch(in, "currentonly")) json_object_del(resp, "previous");
    cli_print_reply_yaml(c, resp, NULL);
    json_decref(resp);
    return CLI_OK;
}

int cli_cmd_pod_restart(struct cli *c, const struct cli_inv *in) {
    json_t *resp;
    int rc = cli_call(c, CLI_JOBMGR, &m_pod_restart, pod_req(in->argv[0]), &resp);
    if (rc) return rc;
    if (c->json) cli_print_json(c, resp);
    else fprintf(c->out, "Pod %s restarting\n", in->argv[0]);
    json_decref(resp);
    return CLI_OK;
}

int cli_cmd_pod_events_v1(struct cli *c, const struct cli_inv *in) {
    json_t *req = pod_req(in->argv[0]), *resp, *e;
    const char *id = cli_flag(in, "id");
    if (req && id) json_object_set_new(req, "podId", cli_id_obj(id));
    int rc = cli_call(c, CLI_JOBMGR, &m_pod_events, req, &resp);
    if (rc) return rc;
    if (c->json) cli_print_json(c, resp);
    else {
        static const char *const heads[] = {"TIME", "POD-ID", "STATE", "DESIRED", "HOST", "MESSAGE", "REASON"};
        struct cli_table *t = cli_table_new(7, heads);
        size_t i;
        json_array_foreach(json_object_get(resp, "events"), i, e) {
            char b[7][512];
            const char *row[7] = {cli_str(e, "timestamp", b[0], 512),    cli_str(e, "podId.value", b[1], 512),
                                  cli_str(e, "actualState", b[2], 512),  cli_str(e, "desiredState", b[3], 512),
                                  cli_str(e, "hostname", b[4], 512),     cli_str(e, "message", b[5], 512),
                                  cli_str(e, "reason", b[6], 512)};
            cli_table_add(t, row);
        }
        cli_table_print(t, c->out);
        cli_table_free(t);
    }
    json_decref(resp);
    return CLI_OK;
}
