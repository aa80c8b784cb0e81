/* The commands' shared parts: the methods' macros, the helpers of clicmd.c
 * (arguments, YAML configs, Get and its --wait), of clictl.c (--wait's
 * bound, configs for updates) and of cliupdate.c (following an update),
 * and the command functions the table in clicmd.c names (clictl.c: job and
 * task control; cliupdate.c: updates and hosts; clipod.c: pods). Returned JSON is the
 * caller's; the cli_cmd_* return an exit code (cli.h). */
#ifndef PELOTON_CLI_CLICMD_H
#define PELOTON_CLI_CLICMD_H

#include <jansson.h>
#include <stdbool.h>
#include <time.h>

#include "cli.h"
#include "peloton/api/v0/host/svc/host_svc.pb-c.h"
#include "peloton/api/v0/job/job.pb-c.h"
#include "peloton/api/v0/respool/respool.pb-c.h"
#include "peloton/api/v0/task/task.pb-c.h"
#include "peloton/api/v0/update/svc/update_svc.pb-c.h"

/* A clirpc_method for a service's method by its request and reply names. */
#define JM_(m, rq, rs)                                                                                              \
    {"peloton.api.job.JobManager::" m, "peloton-jobmgr", &peloton__api__v0__job__##rq##__descriptor,              \
     &peloton__api__v0__job__##rs##__descriptor}
#define TM_(m, rq, rs)                                                                                              \
    {"peloton.api.task.TaskManager::" m, "peloton-jobmgr", &peloton__api__v0__task__##rq##__descriptor,           \
     &peloton__api__v0__task__##rs##__descriptor}
#define RM_(m, rq, rs)                                                                                              \
    {"peloton.api.respool.ResourceManager::" m, "peloton-resmgr", &peloton__api__v0__respool__##rq##__descriptor, \
     &peloton__api__v0__respool__##rs##__descriptor}

/* Peloton's clients send the package name of the *.svc services */
#define UM_(m, rq, rs)                                                                                              \
    {"peloton.api.v0.update.svc.UpdateService::" m, "peloton-jobmgr",                                              \
     &peloton__api__v0__update__svc__##rq##__descriptor, &peloton__api__v0__update__svc__##rs##__descriptor}
#define HM_(m, rq, rs)                                                                                              \
    {"peloton.api.v0.host.svc.HostService::" m, "peloton-hostmgr", &peloton__api__v0__host__svc__##rq##__descriptor, \
     &peloton__api__v0__host__svc__##rs##__descriptor}

/* {"value": v}: a JobID, ResourcePoolID, UpdateID. */
json_t *cli_id_obj(const char *v);
/* An unsigned 32-bit number; -1 when s is not one. */
long long cli_parse_uint(const char *s);
/* "a,b": a JSON array of the non-empty parts ([] for NULL). */
json_t *cli_split_list(const char *s);
/* "running,pending": the parts upper-cased. */
json_t *cli_state_list(const char *s);
/* The id of the pool at path (LookupResourcePoolID) into id. */
int cli_lookup_pool(struct cli *c, const char *path, char *id, size_t idlen);
/* The YAML file at path as d's proto3 JSON (--skip-unknown honoured); NULL after printing why. */
json_t *cli_load_yaml(struct cli *c, const struct cli_inv *in, const ProtobufCMessageDescriptor *d,
                      const char *path);
/* -j: the reply as JSON; else YAML of its member key (all when NULL). */
void cli_print_reply_yaml(struct cli *c, json_t *resp, const char *key);
bool cli_pool_path_ok(const char *p);
/* JobManager.Get of the job id. */
int cli_job_get(struct cli *c, const char *id, json_t **resp);
/* A JobInfo's instances running or succeeded. */
long long cli_job_up(const json_t *info);
/* --wait for a job: Get until every instance is up (docs/cli.md). */
int cli_job_wait(struct cli *c, const char *id, long wait_ms);
/* Milliseconds since t0 (CLOCK_MONOTONIC). */
long cli_elapsed_ms(const struct timespec *t0);
/* --wait's bound from --wait-timeout: 0 without --wait (or --progress), -1 after a usage error. */
long cli_wait_bound(struct cli *c, const struct cli_inv *in);
/* A JobConfig from argv[1]'s YAML, in the pool at respool (NULL: the job
 * argv[0]'s own), with -c's version as changeLog.version. */
int cli_new_config(struct cli *c, const struct cli_inv *in, const char *respool, json_t **out);
/* --wait for an update: GetUpdate until it ends or pauses (docs/cli.md). */
int cli_update_wait(struct cli *c, const char *uid, long wait_ms);

#define CLI_CMD(name) int cli_cmd_##name(struct cli *c, const struct cli_inv *in)
CLI_CMD(job_stop);
CLI_CMD(job_start);
CLI_CMD(job_restart);
CLI_CMD(job_update);
CLI_CMD(job_refresh);
CLI_CMD(job_cache);
CLI_CMD(job_active);
CLI_CMD(task_start);
CLI_CMD(task_stop);
CLI_CMD(task_restart);
CLI_CMD(task_events);
CLI_CMD(update_create);
CLI_CMD(update_get);
CLI_CMD(update_list);
CLI_CMD(update_cache);
CLI_CMD(update_pause);
CLI_CMD(update_resume);
CLI_CMD(update_rollback);
CLI_CMD(update_abort);
CLI_CMD(host_query);
CLI_CMD(host_maint_start);
CLI_CMD(host_maint_complete);
CLI_CMD(pod_get);
CLI_CMD(pod_restart);
CLI_CMD(pod_events_v1);
/* clistateless.c: v1alpha JobService and WatchService */
int cli_labels(struct cli *c, const struct cli_inv *in, const char *flag, json_t **out);
CLI_CMD(sl_create);
CLI_CMD(sl_get);
CLI_CMD(sl_replace);
CLI_CMD(sl_restart);
CLI_CMD(sl_pause);
CLI_CMD(sl_resume);
CLI_CMD(sl_abort);
CLI_CMD(sl_delete);
CLI_CMD(sl_query);
CLI_CMD(sl_list_pods);
CLI_CMD(sl_list);
CLI_CMD(watch_job);
CLI_CMD(watch_pod);

#endif
