/* The JSON encoding of the Mesos v1 scheduler API (scheduler.proto and
 * mesos.proto in Mesos 1.x), shared by mesos-master-sim and the host
 * manager's Mesos driver: each side encodes what it sends and decodes, with
 * the master's own checks, what it receives.
 *
 * The encoding is protobuf's JSON mapping as Mesos uses it: snake_case
 * field names, enum values as their names ("TASK_RUNNING"), bytes (the
 * status update uuid) as standard base64, IDs as {"value": "..."}.
 * Unknown members are ignored, as the master's JSON-to-protobuf conversion
 * ignores them.
 *
 * Builders return a new jansson value the caller owns (json_decref), or
 * NULL when out of memory. Decoders fill a struct whose strings and values
 * are borrowed from the json_t they were given (keep it alive while using
 * them) and write a message in the master's words into err on refusal. */
#ifndef PELOTON_MESOS_JSON_H
#define PELOTON_MESOS_JSON_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

/* Bounds on what a decoder accepts from the other side. */
#define MESOS_ID_MAX 256         /* bytes of an ID value (framework, agent, offer, task) */
#define MESOS_CALL_MAX_IDS 10000 /* offer ids in one ACCEPT/DECLINE, tasks in one RECONCILE */
#define MESOS_MAX_TASKS_PER_ACCEPT 10000
#define MESOS_UUID_LEN 16        /* a status update uuid: 16 raw bytes */

/* ---- enums: the numbers are the protos' ---- */
enum mesos_call_type {
    MESOS_CALL_UNKNOWN = 0,
    MESOS_CALL_SUBSCRIBE = 1,
    MESOS_CALL_TEARDOWN = 2,
    MESOS_CALL_ACCEPT = 3,
    MESOS_CALL_DECLINE = 4,
    MESOS_CALL_REVIVE = 5,
    MESOS_CALL_KILL = 6,
    MESOS_CALL_SHUTDOWN = 7,
    MESOS_CALL_ACKNOWLEDGE = 8,
    MESOS_CALL_RECONCILE = 9,
    MESOS_CALL_MESSAGE = 10,
    MESOS_CALL_REQUEST = 11,
    MESOS_CALL_SUPPRESS = 12,
    MESOS_CALL_ACCEPT_INVERSE_OFFERS = 13,
    MESOS_CALL_DECLINE_INVERSE_OFFERS = 14,
    MESOS_CALL_ACKNOWLEDGE_OPERATION_STATUS = 15,
    MESOS_CALL_RECONCILE_OPERATIONS = 16,
    MESOS_CALL_UPDATE_FRAMEWORK = 17,
};

enum mesos_event_type {
    MESOS_EVENT_UNKNOWN = 0,
    MESOS_EVENT_SUBSCRIBED = 1,
    MESOS_EVENT_OFFERS = 2,
    MESOS_EVENT_RESCIND = 3,
    MESOS_EVENT_UPDATE = 4,
    MESOS_EVENT_MESSAGE = 5,
    MESOS_EVENT_FAILURE = 6,
    MESOS_EVENT_ERROR = 7,
    MESOS_EVENT_HEARTBEAT = 8,
    MESOS_EVENT_INVERSE_OFFERS = 9,
    MESOS_EVENT_RESCIND_INVERSE_OFFER = 10,
    MESOS_EVENT_UPDATE_OPERATION_STATUS = 11,
};

enum mesos_task_state {
    MESOS_TASK_STARTING = 0,
    MESOS_TASK_RUNNING = 1,
    MESOS_TASK_FINISHED = 2,
    MESOS_TASK_FAILED = 3,
    MESOS_TASK_KILLED = 4,
    MESOS_TASK_LOST = 5,
    MESOS_TASK_STAGING = 6,
    MESOS_TASK_ERROR = 7,
    MESOS_TASK_KILLING = 8,
    MESOS_TASK_DROPPED = 9,
    MESOS_TASK_UNREACHABLE = 10,
    MESOS_TASK_GONE = 11,
    MESOS_TASK_GONE_BY_OPERATOR = 12,
    MESOS_TASK_UNKNOWN = 13,
};

enum mesos_status_source { MESOS_SOURCE_MASTER = 0, MESOS_SOURCE_AGENT = 1, MESOS_SOURCE_EXECUTOR = 2 };

/* Names as the JSON carries them ("SUBSCRIBE", "TASK_RUNNING",
 * "SOURCE_MASTER"); NULL for a number without one. The parsers return -1
 * for a name that is not one. */
const char *mesos_call_type_name(int type);
int mesos_call_type_parse(const char *name);
const char *mesos_event_type_name(int type);
int mesos_event_type_parse(const char *name);
const char *mesos_task_state_name(int state);
int mesos_task_state_parse(const char *name);
const char *mesos_source_name(int source);
/* Whether a task in this state is over (no further update follows). */
bool mesos_task_state_terminal(int state);

/* ---- resources: the scalar ones the project schedules ---- */
struct mesos_scalars {
    double cpus, mem, disk, gpus; /* mem and disk in MB, as Mesos counts them */
};

/* A Resource array of the non-zero scalars (role "*"). */
json_t *mesos_resources_json(const struct mesos_scalars *r);
/* Sums a Resource array into out. Scalars other than the four, and RANGES
 * and SET resources, are checked for shape and counted in *other (may be
 * NULL). -1 with err for a malformed array. */
int mesos_resources_parse(const json_t *arr, struct mesos_scalars *out, int *other, char *err, size_t errlen);
/* Whether a fits in b (each scalar, with Mesos' 0.001 fixed-point). */
bool mesos_scalars_fit(const struct mesos_scalars *a, const struct mesos_scalars *b);
void mesos_scalars_add(struct mesos_scalars *a, const struct mesos_scalars *b);
void mesos_scalars_sub(struct mesos_scalars *a, const struct mesos_scalars *b);

/* {"value": v} */
json_t *mesos_id(const char *v);
/* The value of an {"value": "..."} member of obj, NULL when absent or not
 * that shape or longer than MESOS_ID_MAX. */
const char *mesos_id_get(const json_t *obj, const char *member);

/* ---- calls (the driver builds them; the sim decodes them) ---- */
struct mesos_framework_info {
    const char *user, *name, *id;   /* id NULL on a first subscription */
    const char *const *roles;       /* nroles names */
    int nroles;
    const char *const *capabilities; /* e.g. "GPU_RESOURCES", "PARTITION_AWARE" */
    int ncapabilities;
    double failover_timeout;        /* seconds */
    const char *hostname;           /* may be NULL */
};

/* A Call envelope: {"framework_id":{"value":fid},"type":NAME}; fid may be
 * NULL (SUBSCRIBE of a new framework). */
json_t *mesos_call_new(enum mesos_call_type type, const char *fid);
json_t *mesos_call_subscribe(const struct mesos_framework_info *fi);
/* task_infos: an array of TaskInfo values, stolen (also on failure). refuse
 * < 0: no filters member. */
json_t *mesos_call_accept(const char *fid, const char *const *offer_ids, int n, json_t *task_infos, double refuse);
json_t *mesos_call_decline(const char *fid, const char *const *offer_ids, int n, double refuse);
json_t *mesos_call_kill(const char *fid, const char *task_id, const char *agent_id);
/* tasks: n task ids and their agent ids (agent_ids or an entry may be
 * NULL); n 0 is implicit reconciliation. */
json_t *mesos_call_reconcile(const char *fid, const char *const *task_ids, const char *const *agent_ids, int n);
/* uuid_b64: the uuid member of the update, as it came. */
json_t *mesos_call_acknowledge(const char *fid, const char *agent_id, const char *task_id, const char *uuid_b64);
/* The same ACKNOWLEDGE as text for mclient_call_members: its members after
 * framework_id, appended to the growing buffer (*buf, *len, *cap, as
 * jdump_append); the bytes jdump writes of mesos_call_acknowledge's tree.
 * 0, or -1 when out of memory or a string is not UTF-8 (*len then past
 * what it was: the caller drops the buffer). */
int mesos_ack_members(char **buf, size_t *len, size_t *cap, const char *agent_id, const char *task_id,
                      const char *uuid_b64);
/* REVIVE or SUPPRESS for roles (nroles 0: every role of the framework). */
json_t *mesos_call_roles(enum mesos_call_type type, const char *fid, const char *const *roles, int nroles);

struct mesos_task_spec {
    const char *name, *task_id, *agent_id;
    struct mesos_scalars res;
    const char *command;           /* shell command, or NULL */
    const char *const *args;       /* nargs arguments (shell false when given) */
    int nargs;
    const char *image;             /* Docker image run by the Mesos containerizer, or NULL */
    const char *const *env;        /* nenv "NAME=value" strings */
    int nenv;
    const char *const *labels;     /* nlabels "key=value" strings */
    int nlabels;
};
json_t *mesos_task_info(const struct mesos_task_spec *t);
/* The same TaskInfo as text appended to the growing buffer (*buf, *len,
 * *cap, as jdump_append): the bytes jdump writes of mesos_task_info's tree.
 * 0, or -1 (out of memory, a string not UTF-8, a scalar not finite). */
int mesos_task_info_text(char **buf, size_t *len, size_t *cap, const struct mesos_task_spec *t);
/* An ACCEPT with one LAUNCH as text for mclient_call_members (its members
 * after framework_id): task_infos is tlen bytes of TaskInfos written by
 * mesos_task_info_text, comma-separated; refuse < 0: no filters. The
 * bytes jdump writes of mesos_call_accept's tree. 0, or -1. */
int mesos_accept_members(char **buf, size_t *len, size_t *cap, const char *const *offer_ids, int n,
                         const char *task_infos, size_t tlen, double refuse);

/* A decoded Call: type, framework id and the type's member (borrowed). */
struct mesos_call {
    enum mesos_call_type type;
    const char *framework_id; /* NULL when absent */
    const json_t *body;       /* the member named after the type, or NULL */
};

/* Decodes and validates a Call as the master does (field types, required
 * fields, then the scheduler::Call validation). 0, or -1 with err starting
 * "Failed to convert JSON into Call protobuf: " or "Failed to validate
 * scheduler::Call: " as the master's 400 bodies do. */
int mesos_call_parse(const json_t *root, struct mesos_call *out, char *err, size_t errlen);

/* The offer ids of an ACCEPT or DECLINE body, into ids (at most max). -1
 * with err when malformed. */
int mesos_call_offer_ids(const json_t *body, const char **ids, int max, int *n, char *err, size_t errlen);
/* filters.refuse_seconds of an ACCEPT or DECLINE body (default 5). */
double mesos_call_refuse_seconds(const json_t *body);

/* A TaskInfo, checked and decoded. */
struct mesos_task_decl {
    const char *name, *task_id, *agent_id;
    struct mesos_scalars res;
    int other_resources; /* resources the sim does not model */
    const json_t *info;  /* the TaskInfo itself */
};
int mesos_task_info_parse(const json_t *ti, struct mesos_task_decl *out, char *err, size_t errlen);
/* The value of the label key of a TaskInfo (labels.labels[]), or NULL. */
const char *mesos_task_label(const json_t *ti, const char *key);
/* The value of environment variable name in the TaskInfo's command, or NULL. */
const char *mesos_task_env(const json_t *ti, const char *name);

/* Decodes a status update uuid (22 base64 characters, padded or not, either
 * alphabet) into 16 bytes: 0, or -1 when it is not one. */
int mesos_uuid_decode(const char *b64, unsigned char out[MESOS_UUID_LEN]);

/* ---- events (the sim builds them; the driver decodes them) ---- */
json_t *mesos_event_subscribed(const char *fid, double heartbeat_seconds, const char *master_id);
json_t *mesos_event_heartbeat(void);
json_t *mesos_event_error(const char *message);
/* offers: an array of Offer values, stolen. */
json_t *mesos_event_offers(json_t *offers);
json_t *mesos_event_rescind(const char *offer_id);
json_t *mesos_event_failure(const char *agent_id);

struct mesos_attr {
    const char *name, *text; /* TEXT attributes only */
};
struct mesos_offer_spec {
    const char *id, *framework_id, *agent_id, *hostname;
    struct mesos_scalars res;
    const struct mesos_attr *attrs;
    int nattrs;
    const char *role; /* allocation role, "*" when NULL */
};
json_t *mesos_offer(const struct mesos_offer_spec *o);

struct mesos_task_status {
    const char *task_id, *agent_id;
    enum mesos_task_state state;
    enum mesos_status_source source;
    const char *reason;  /* e.g. "REASON_RECONCILIATION", or NULL */
    const char *message; /* or NULL */
    double timestamp;    /* seconds since the epoch */
    bool has_uuid;
    unsigned char uuid[MESOS_UUID_LEN];
    const char *uuid_b64; /* decoded side: the member as it came */
};
json_t *mesos_event_update(const struct mesos_task_status *s);

/* A decoded Event: the type and, per type, what the driver needs. */
struct mesos_event {
    enum mesos_event_type type;
    const char *framework_id;      /* SUBSCRIBED */
    double heartbeat_seconds;      /* SUBSCRIBED (15 when absent) */
    const json_t *offers;          /* OFFERS: the array, checked with mesos_offer_parse */
    const char *offer_id;          /* RESCIND */
    struct mesos_task_status status; /* UPDATE */
    const char *agent_id;          /* FAILURE */
    const char *message;           /* ERROR */
};
int mesos_event_parse(const json_t *root, struct mesos_event *out, char *err, size_t errlen);

struct mesos_offer_decl {
    const char *id, *agent_id, *hostname;
    struct mesos_scalars res;
    const json_t *attributes; /* the array, or NULL */
};
int mesos_offer_parse(const json_t *offer, struct mesos_offer_decl *out, char *err, size_t errlen);

#endif
