/* Kubernetes' protobuf encoding of the built-in kinds (shim_proto.h): a walk
 * of the wire bytes over the protobuf-c descriptors of proto/k8s, with the
 * Kubernetes JSON mapping's few special types on top. */
#include <errno.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "shim_proto.h"
#include "base64.h"
#include "jparse.h"
#include "pbwrite.h"
#include "server.h"
#include "shim.h"
#include "k8s/apps.pb-c.h"
#include "k8s/authorization.pb-c.h"
#include "k8s/autoscaling.pb-c.h"
#include "k8s/batch.pb-c.h"
#include "k8s/core.pb-c.h"
#include "k8s/intstr.pb-c.h"
#include "k8s/meta.pb-c.h"
#include "k8s/policy.pb-c.h"
#include "k8s/rbac.pb-c.h"
#include "k8s/resource.pb-c.h"
#include "k8s/runtime.pb-c.h"

#define D_TIME k8s__io__apimachinery__pkg__apis__meta__v1__time__descriptor
#define D_MICROTIME k8s__io__apimachinery__pkg__apis__meta__v1__micro_time__descriptor
#define D_FIELDSV1 k8s__io__apimachinery__pkg__apis__meta__v1__fields_v1__descriptor
#define D_RAWEXT k8s__io__apimachinery__pkg__runtime__raw_extension__descriptor
#define D_QUANTITY k8s__io__apimachinery__pkg__api__resource__quantity__descriptor
#define D_INTSTR k8s__io__apimachinery__pkg__util__intstr__int_or_string__descriptor

static const unsigned char MAGIC[4] = {'k', '8', 's', 0};

#define RBAC "rbac.authorization.k8s.io/v1"

/* The kinds, by apiVersion: policy/v1beta1's Eviction and
 * PodDisruptionBudget, and batch/v1beta1's CronJob, have their v1 field
 * numbers. */
static const struct {
    const char *api_version, *kind;
    const ProtobufCMessageDescriptor *d;
} KINDS[] = {
    {"v1", "Namespace", &k8s__io__api__core__v1__namespace__descriptor},
    {"v1", "Pod", &k8s__io__api__core__v1__pod__descriptor},
    {"v1", "Node", &k8s__io__api__core__v1__node__descriptor},
    {"v1", "ConfigMap", &k8s__io__api__core__v1__config_map__descriptor},
    {"v1", "Secret", &k8s__io__api__core__v1__secret__descriptor},
    {"v1", "Service", &k8s__io__api__core__v1__service__descriptor},
    {"v1", "Event", &k8s__io__api__core__v1__event__descriptor},
    {"v1", "Binding", &k8s__io__api__core__v1__binding__descriptor},
    {"v1", "Status", &k8s__io__apimachinery__pkg__apis__meta__v1__status__descriptor},
    {"v1", "DeleteOptions", &k8s__io__apimachinery__pkg__apis__meta__v1__delete_options__descriptor},
    {"meta.k8s.io/v1", "DeleteOptions", &k8s__io__apimachinery__pkg__apis__meta__v1__delete_options__descriptor},
    {"policy/v1", "DeleteOptions", &k8s__io__apimachinery__pkg__apis__meta__v1__delete_options__descriptor},
    {"policy/v1beta1", "DeleteOptions", &k8s__io__apimachinery__pkg__apis__meta__v1__delete_options__descriptor},
    {"policy/v1", "Eviction", &k8s__io__api__policy__v1__eviction__descriptor},
    {"policy/v1beta1", "Eviction", &k8s__io__api__policy__v1__eviction__descriptor},
    {"policy/v1", "PodDisruptionBudget", &k8s__io__api__policy__v1__pod_disruption_budget__descriptor},
    {"policy/v1beta1", "PodDisruptionBudget", &k8s__io__api__policy__v1__pod_disruption_budget__descriptor},
    {"apps/v1", "Deployment", &k8s__io__api__apps__v1__deployment__descriptor},
    {"apps/v1", "StatefulSet", &k8s__io__api__apps__v1__stateful_set__descriptor},
    {"apps/v1", "DaemonSet", &k8s__io__api__apps__v1__daemon_set__descriptor},
    {"apps/v1", "ReplicaSet", &k8s__io__api__apps__v1__replica_set__descriptor},
    {"apps/v1", "ControllerRevision", &k8s__io__api__apps__v1__controller_revision__descriptor},
    {"batch/v1", "Job", &k8s__io__api__batch__v1__job__descriptor},
    {"batch/v1", "CronJob", &k8s__io__api__batch__v1__cron_job__descriptor},
    {"batch/v1beta1", "CronJob", &k8s__io__api__batch__v1__cron_job__descriptor}, /* v1's numbers, as for PDBs */
    {"autoscaling/v1", "Scale", &k8s__io__api__autoscaling__v1__scale__descriptor},
    {RBAC, "Role", &k8s__io__api__rbac__v1__role__descriptor},
    {RBAC, "RoleBinding", &k8s__io__api__rbac__v1__role_binding__descriptor},
    {RBAC, "ClusterRole", &k8s__io__api__rbac__v1__cluster_role__descriptor},
    {RBAC, "ClusterRoleBinding", &k8s__io__api__rbac__v1__cluster_role_binding__descriptor},
    {"authorization.k8s.io/v1", "SelfSubjectAccessReview",
     &k8s__io__api__authorization__v1__self_subject_access_review__descriptor},
};

const ProtobufCMessageDescriptor *shim_pb_descriptor(const char *api_version, const char *kind) {
    if (!api_version || !kind) return NULL;
    for (size_t i = 0; i < sizeof KINDS / sizeof KINDS[0]; i++)
        if (!strcmp(KINDS[i].api_version, api_version) && !strcmp(KINDS[i].kind, kind)) return KINDS[i].d;
    return NULL;
}

/* Go's pointer fields among those declared: present on the wire only when
 * set, so a zero there is a value (gracePeriodSeconds: 0 deletes at once).
 * "Message.field" names the field of one message only (a Deployment's
 * spec.replicas is a pointer, its status.replicas is not). */
static const char *const KEEP_ZERO[] = {
    "DeploymentSpec.replicas", "StatefulSetSpec.replicas", "ReplicaSetSpec.replicas", "ScaleSpec.replicas",
    "parallelism", "completions", "backoffLimit", "ttlSecondsAfterFinished", "manualSelector",
    "completionMode", "suspend", "ready", "startingDeadlineSeconds", "successfulJobsHistoryLimit",
    "failedJobsHistoryLimit", "timeZone", "revisionHistoryLimit", "progressDeadlineSeconds", "partition",
    "collisionCount", "storageClassName", "volumeMode",
    "gracePeriodSeconds", "deletionGracePeriodSeconds", "orphanDependents", "immutable", "optional",
    "defaultMode", "mode", "automountServiceAccountToken", "enableServiceLinks", "setHostnameAsFQDN",
    "shareProcessNamespace", "terminationGracePeriodSeconds", "activeDeadlineSeconds", "priority",
    "controller", "blockOwnerDeletion", "allocateLoadBalancerNodePorts", "started", "timeoutSeconds",
    "tolerationSeconds", "remainingItemCount", "privileged", "runAsUser", "runAsGroup", "runAsNonRoot",
    "readOnlyRootFilesystem", "allowPrivilegeEscalation", "fsGroup",
};

static bool keep_zero(const ProtobufCMessageDescriptor *md, const char *name) {
    size_t n = strlen(md->short_name);
    for (size_t i = 0; i < sizeof KEEP_ZERO / sizeof KEEP_ZERO[0]; i++) {
        const char *k = KEEP_ZERO[i];
        if (!strncmp(k, md->short_name, n) && k[n] == '.') k += n + 1;
        else if (strchr(k, '.')) continue;
        if (!strcmp(k, name)) return true;
    }
    return false;
}

/* Go's embedded structs: their fields are the parent's in JSON. */
static bool inlined(const ProtobufCFieldDescriptor *f) {
    return f->type == PROTOBUF_C_TYPE_MESSAGE &&
           (!strcmp(f->name, "volumeSource") || !strcmp(f->name, "localObjectReference") ||
            !strcmp(f->name, "handler"));
}

static bool is_map_entry(const ProtobufCFieldDescriptor *f) {
    if (f->type != PROTOBUF_C_TYPE_MESSAGE || f->label != PROTOBUF_C_LABEL_REPEATED) return false;
    const ProtobufCMessageDescriptor *e = f->descriptor;
    size_t n = strlen(e->name);
    return e->n_fields == 2 && n > 5 && !strcmp(e->name + n - 5, "Entry") && e->fields[0].id == 1 &&
           e->fields[1].id == 2;
}

/* ---- decoding ---- */

struct dec {
    char *err;
    size_t errlen;
    bool failed;
    unsigned items;
    char path[256]; /* the field being read, for errors: metadata.labels[app] */
};

static void fail(struct dec *d, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void fail(struct dec *d, const char *fmt, ...) {
    if (d->failed) return;
    d->failed = true;
    char msg[200];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (d->path[0]) snprintf(d->err, d->errlen, "%s: %s", d->path, msg);
    else snprintf(d->err, d->errlen, "%s", msg);
}

struct cur {
    const uint8_t *p, *end, *start;
};

static bool rd_varint(struct dec *d, struct cur *c, uint64_t *v) {
    uint64_t x = 0;
    for (int shift = 0; shift < 64; shift += 7) {
        if (c->p == c->end) return fail(d, "truncated varint at byte %zu", (size_t)(c->p - c->start)), false;
        uint8_t b = *c->p++;
        if (shift == 63 && b > 1) return fail(d, "varint overflows 64 bits"), false;
        x |= (uint64_t)(b & 0x7f) << shift;
        if (!(b & 0x80)) {
            *v = x;
            return true;
        }
    }
    return fail(d, "varint longer than 10 bytes"), false;
}

/* A length-delimited value: its bytes in *sub. */
static bool rd_len(struct dec *d, struct cur *c, struct cur *sub) {
    uint64_t n;
    if (!rd_varint(d, c, &n)) return false;
    if (n > (uint64_t)(c->end - c->p))
        return fail(d, "length %llu past the end of the message", (unsigned long long)n), false;
    *sub = (struct cur){c->p, c->p + n, c->start};
    c->p += n;
    return true;
}

static bool skip(struct dec *d, struct cur *c, int wt) {
    uint64_t v;
    struct cur sub;
    switch (wt) {
    case 0: return rd_varint(d, c, &v);
    case 1:
    case 5: {
        size_t n = wt == 1 ? 8 : 4;
        if ((size_t)(c->end - c->p) < n) return fail(d, "truncated fixed-width value"), false;
        c->p += n;
        return true;
    }
    case 2: return rd_len(d, c, &sub);
    default: return fail(d, "wire type %d not supported", wt), false;
    }
}

static int wire_type_of(ProtobufCType t) {
    switch (t) {
    case PROTOBUF_C_TYPE_FIXED64:
    case PROTOBUF_C_TYPE_SFIXED64:
    case PROTOBUF_C_TYPE_DOUBLE: return 1;
    case PROTOBUF_C_TYPE_FIXED32:
    case PROTOBUF_C_TYPE_SFIXED32:
    case PROTOBUF_C_TYPE_FLOAT: return 5;
    case PROTOBUF_C_TYPE_STRING:
    case PROTOBUF_C_TYPE_BYTES:
    case PROTOBUF_C_TYPE_MESSAGE: return 2;
    default: return 0;
    }
}

static json_t *message(struct dec *d, const ProtobufCMessageDescriptor *md, struct cur c, int depth, bool raw);

/* One value of field f with wire type wt (already checked). Message values
 * may come back as JSON null (a zero Time). */
static json_t *value(struct dec *d, const ProtobufCFieldDescriptor *f, struct cur *c, int depth) {
    uint64_t v = 0;
    struct cur sub;
    json_t *j;
    switch (f->type) {
    case PROTOBUF_C_TYPE_STRING:
        if (!rd_len(d, c, &sub)) return NULL;
        j = json_stringn((const char *)sub.p, (size_t)(sub.end - sub.p));
        if (!j) fail(d, "string is not valid UTF-8");
        return j;
    case PROTOBUF_C_TYPE_BYTES: {
        if (!rd_len(d, c, &sub)) return NULL;
        size_t n = (size_t)(sub.end - sub.p);
        char *b = malloc(b64_encoded_len(n, true) + 1);
        if (!b) return fail(d, "out of memory"), NULL;
        size_t k = b64_encode(sub.p, n, false, true, b);
        j = json_stringn(b, k);
        free(b);
        return j;
    }
    case PROTOBUF_C_TYPE_MESSAGE:
        if (!rd_len(d, c, &sub)) return NULL;
        return message(d, f->descriptor, sub, depth + 1, false);
    case PROTOBUF_C_TYPE_FIXED64:
    case PROTOBUF_C_TYPE_SFIXED64:
    case PROTOBUF_C_TYPE_DOUBLE:
    case PROTOBUF_C_TYPE_FIXED32:
    case PROTOBUF_C_TYPE_SFIXED32:
    case PROTOBUF_C_TYPE_FLOAT:
        return fail(d, "fixed-width fields are not used by Kubernetes"), NULL; /* none declared */
    case PROTOBUF_C_TYPE_BOOL:
        if (!rd_varint(d, c, &v)) return NULL;
        return json_boolean(v != 0);
    case PROTOBUF_C_TYPE_INT32:
    case PROTOBUF_C_TYPE_ENUM:
        if (!rd_varint(d, c, &v)) return NULL;
        return json_integer((int32_t)(uint32_t)v);
    case PROTOBUF_C_TYPE_SINT32:
    case PROTOBUF_C_TYPE_SINT64:
        if (!rd_varint(d, c, &v)) return NULL;
        return json_integer((json_int_t)((v >> 1) ^ (~(v & 1) + 1)));
    case PROTOBUF_C_TYPE_UINT32:
        if (!rd_varint(d, c, &v)) return NULL;
        return json_integer((uint32_t)v);
    default: /* int64, uint64 */
        if (!rd_varint(d, c, &v)) return NULL;
        return json_integer((json_int_t)v);
    }
}

static bool zero(const json_t *j) {
    return (json_is_string(j) && !json_string_length(j)) || (json_is_integer(j) && !json_integer_value(j)) ||
           json_is_false(j);
}

static size_t path_push(struct dec *d, const char *fmt, const char *name) {
    size_t at = strlen(d->path);
    snprintf(d->path + at, sizeof d->path - at, fmt, at ? "." : "", name);
    return at;
}

/* A map entry (key 1, value 2) into obj. */
static bool map_entry(struct dec *d, const ProtobufCFieldDescriptor *f, struct cur c, int depth, json_t *obj) {
    const ProtobufCMessageDescriptor *e = f->descriptor;
    json_t *key = NULL, *val = NULL;
    while (c.p < c.end && !d->failed) {
        uint64_t tag;
        if (!rd_varint(d, &c, &tag)) break;
        int wt = (int)(tag & 7);
        uint64_t id = tag >> 3;
        const ProtobufCFieldDescriptor *ef = id == 1 ? &e->fields[0] : id == 2 ? &e->fields[1] : NULL;
        if (!ef) {
            skip(d, &c, wt);
            continue;
        }
        if (wt != wire_type_of(ef->type)) {
            fail(d, "wire type %d for the map's %s", wt, ef->name);
            break;
        }
        json_t *v = value(d, ef, &c, depth + 1);
        if (!v) break;
        json_t **slot = id == 1 ? &key : &val;
        json_decref(*slot);
        *slot = v;
    }
    if (!d->failed && key && !json_is_string(key)) fail(d, "map key is not a string");
    if (!d->failed) {
        if (!val) {
            const ProtobufCFieldDescriptor *vf = &e->fields[1];
            val = vf->type == PROTOBUF_C_TYPE_MESSAGE ? message(d, vf->descriptor, (struct cur){0}, depth + 1, false)
                  : vf->type == PROTOBUF_C_TYPE_STRING || vf->type == PROTOBUF_C_TYPE_BYTES ? json_string("")
                  : json_integer(0);
        }
        if (val) json_object_set(obj, key ? json_string_value(key) : "", val);
    }
    json_decref(key);
    json_decref(val);
    return !d->failed;
}

static json_t *special(struct dec *d, const ProtobufCMessageDescriptor *md, json_t *o);

/* The message md in c as a JSON object (or a special type's value); raw:
 * every field as read, for special(). */
static json_t *message(struct dec *d, const ProtobufCMessageDescriptor *md, struct cur c, int depth, bool raw) {
    if (depth > SHIM_PB_MAX_DEPTH) return fail(d, "nested deeper than %d messages", SHIM_PB_MAX_DEPTH), NULL;
    bool sp = !raw && (md == &D_TIME || md == &D_MICROTIME || md == &D_FIELDSV1 || md == &D_RAWEXT ||
                       md == &D_QUANTITY || md == &D_INTSTR);
    json_t *o = json_object();
    if (!o) return fail(d, "out of memory"), NULL;
    while (c.p < c.end && !d->failed) {
        uint64_t tag;
        if (!rd_varint(d, &c, &tag)) break;
        int wt = (int)(tag & 7);
        uint64_t id = tag >> 3;
        if (id == 0 || id > 536870911u) {
            fail(d, "field number %llu out of range", (unsigned long long)id);
            break;
        }
        const ProtobufCFieldDescriptor *f = protobuf_c_message_descriptor_get_field(md, (unsigned)id);
        if (!f) { /* a field we do not declare: a newer client's */
            skip(d, &c, wt);
            continue;
        }
        size_t at = path_push(d, "%s%s", f->name);
        bool packed = f->label == PROTOBUF_C_LABEL_REPEATED && wt == 2 && wire_type_of(f->type) == 0;
        if (wt != wire_type_of(f->type) && !packed) {
            fail(d, "wire type %d, expected %d", wt, wire_type_of(f->type));
            break;
        }
        if (f->label == PROTOBUF_C_LABEL_REPEATED && ++d->items > SHIM_PB_MAX_ITEMS) {
            fail(d, "more than %u repeated elements", SHIM_PB_MAX_ITEMS);
            break;
        }
        if (is_map_entry(f)) {
            json_t *m = json_object_get(o, f->name);
            if (!m) json_object_set_new(o, f->name, m = json_object());
            struct cur sub;
            if (rd_len(d, &c, &sub)) map_entry(d, f, sub, depth, m);
        } else if (f->label == PROTOBUF_C_LABEL_REPEATED) {
            json_t *a = json_object_get(o, f->name);
            if (!a) json_object_set_new(o, f->name, a = json_array());
            if (packed) {
                struct cur sub;
                if (rd_len(d, &c, &sub))
                    while (sub.p < sub.end && !d->failed) {
                        json_t *v = value(d, f, &sub, depth);
                        if (v) json_array_append_new(a, v);
                    }
            } else {
                json_t *v = value(d, f, &c, depth);
                if (v) json_array_append_new(a, v);
            }
        } else {
            json_t *v = value(d, f, &c, depth);
            if (v && inlined(f) && json_is_object(v)) {
                json_object_update(o, v);
                json_decref(v);
            } else if (v && !raw && !sp && f->type != PROTOBUF_C_TYPE_MESSAGE && zero(v) &&
                       !keep_zero(md, f->name)) { /* an IntOrString 0 is a value */
                json_decref(v);
            } else if (v) {
                json_object_set_new(o, f->name, v);
            }
        }
        d->path[at] = 0;
    }
    if (d->failed) {
        json_decref(o);
        return NULL;
    }
    return sp ? special(d, md, o) : o;
}

/* Seconds since the epoch within years 1 to 9999, as RFC 3339. */
static bool rfc3339(int64_t secs, int micros, char *buf, size_t len) {
    if (secs < -62135596800LL || secs > 253402300799LL) return false;
    time_t t = (time_t)secs;
    struct tm tm;
    if (!gmtime_r(&t, &tm)) return false;
    size_t n = strftime(buf, len, "%Y-%m-%dT%H:%M:%S", &tm);
    if (micros >= 0) n += (size_t)snprintf(buf + n, len - n, ".%06d", micros);
    snprintf(buf + n, len - n, "Z");
    return true;
}

static json_int_t int_of(const json_t *o, const char *k) { return json_integer_value(json_object_get(o, k)); }

/* The Kubernetes JSON of a special type from its fields (o, taken). */
static json_t *special(struct dec *d, const ProtobufCMessageDescriptor *md, json_t *o) {
    json_t *out = NULL;
    if (md == &D_TIME || md == &D_MICROTIME) {
        json_int_t secs = int_of(o, "seconds"), nanos = int_of(o, "nanos");
        char buf[64];
        if (!json_object_size(o)) out = json_null(); /* Go's zero Time is an empty message; 0 is 1970 */
        else if (nanos < 0 || nanos > 999999999 || !rfc3339(secs, md == &D_MICROTIME ? (int)(nanos / 1000) : -1,
                                                            buf, sizeof buf))
            fail(d, "time out of range");
        else out = json_string(buf);
    } else if (md == &D_QUANTITY) {
        const char *s = json_string_value(json_object_get(o, "string"));
        out = json_string(s && s[0] ? s : "0");
    } else if (md == &D_INTSTR) {
        if (int_of(o, "type") == 1) {
            const char *s = json_string_value(json_object_get(o, "strVal"));
            out = json_string(s ? s : "");
        } else {
            out = json_integer(int_of(o, "intVal"));
        }
    } else { /* RawExtension, FieldsV1: JSON in bytes */
        json_t *b = json_object_get(o, md == &D_FIELDSV1 ? "Raw" : "raw");
        if (!b || !json_string_length(b)) {
            out = json_null();
        } else {
            size_t n = json_string_length(b);
            unsigned char *raw = malloc(n);
            long k = b64_std_check(json_string_value(b), n, NULL);
            json_error_t je;
            if (raw && k >= 0) {
                size_t m = b64_std_decode(json_string_value(b), n, raw);
                out = jparse_loadb((const char *)raw, m, JSON_REJECT_DUPLICATES, &je);
            }
            free(raw);
            if (!out) fail(d, "embedded object is not JSON");
        }
    }
    json_decref(o);
    return out;
}

json_t *shim_pb_message_json(const ProtobufCMessageDescriptor *md, const void *buf, size_t len, char *err,
                             size_t errlen) {
    struct dec d = {.err = err, .errlen = errlen};
    const uint8_t *p = buf ? buf : (const uint8_t *)"";
    json_t *o = message(&d, md, (struct cur){p, p + len, p}, 0, false);
    if (!o && !d.failed) snprintf(err, errlen, "out of memory");
    return o;
}

/* A string or bytes field's bytes, into a NUL-terminated buf of len bytes
 * (longer values are refused: the envelope's names are short). */
static bool rd_text(struct dec *d, struct cur *c, char *buf, size_t len) {
    struct cur sub;
    if (!rd_len(d, c, &sub)) return false;
    size_t n = (size_t)(sub.end - sub.p);
    if (n >= len) return fail(d, "%zu bytes, more than %zu", n, len - 1), false;
    memcpy(buf, sub.p, n);
    buf[n] = 0;
    return true;
}

/* The envelope's runtime.Unknown, read in place: the object's message is
 * not copied. */
struct envelope {
    char api_version[128], kind[128], encoding[64], content_type[128];
    struct cur raw;
};

static bool rd_envelope(struct dec *d, struct cur c, struct envelope *e) {
    while (c.p < c.end && !d->failed) {
        uint64_t tag;
        if (!rd_varint(d, &c, &tag)) break;
        int wt = (int)(tag & 7);
        uint64_t id = tag >> 3;
        if (id < 1 || id > 4) {
            skip(d, &c, wt);
            continue;
        }
        if (wt != 2) {
            fail(d, "wire type %d, expected 2", wt);
            break;
        }
        static const char *const names[] = {"", "typeMeta", "raw", "contentEncoding", "contentType"};
        size_t at = path_push(d, "%s%s", names[id]);
        if (id == 1) {
            struct cur tm;
            if (!rd_len(d, &c, &tm)) break;
            while (tm.p < tm.end && !d->failed) {
                if (!rd_varint(d, &tm, &tag)) break;
                if ((tag >> 3 == 1 || tag >> 3 == 2) && (tag & 7) == 2)
                    rd_text(d, &tm, tag >> 3 == 1 ? e->api_version : e->kind, sizeof e->kind);
                else if ((tag >> 3 == 1 || tag >> 3 == 2)) fail(d, "wire type %d, expected 2", (int)(tag & 7));
                else skip(d, &tm, (int)(tag & 7));
            }
        } else if (id == 2) {
            rd_len(d, &c, &e->raw);
        } else {
            rd_text(d, &c, id == 3 ? e->encoding : e->content_type, id == 3 ? sizeof e->encoding
                                                                              : sizeof e->content_type);
        }
        d->path[at] = 0;
    }
    return !d->failed;
}

json_t *shim_pb_decode(const void *buf, size_t len, char *err, size_t errlen) {
    if (len < sizeof MAGIC || memcmp(buf, MAGIC, sizeof MAGIC)) {
        snprintf(err, errlen, "the protobuf body does not start with the \"k8s\\x00\" envelope");
        return NULL;
    }
    struct dec d = {.err = err, .errlen = errlen};
    const uint8_t *p = (const uint8_t *)buf + sizeof MAGIC;
    struct envelope e = {.raw = {p, p, p}};
    if (!rd_envelope(&d, (struct cur){p, p + len - sizeof MAGIC, p}, &e)) return NULL;
    const ProtobufCMessageDescriptor *md = shim_pb_descriptor(e.api_version, e.kind);
    if (e.encoding[0]) {
        snprintf(err, errlen, "content encoding \"%.40s\" not supported", e.encoding);
        return NULL;
    }
    if (e.content_type[0] && strcmp(e.content_type, SHIM_PB_MEDIA)) {
        snprintf(err, errlen, "embedded content type \"%.60s\" not supported", e.content_type);
        return NULL;
    }
    if (!md) {
        snprintf(err, errlen, "no kind \"%.60s\" is registered for version \"%.60s\" in protobuf", e.kind,
                 e.api_version);
        return NULL;
    }
    json_t *obj = message(&d, md, e.raw, 0, false);
    if (!obj) {
        if (!d.failed) snprintf(err, errlen, "out of memory");
        return NULL;
    }
    if (json_object_set_new(obj, "apiVersion", json_string(e.api_version)) ||
        json_object_set_new(obj, "kind", json_string(e.kind))) {
        json_decref(obj);
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    return obj;
}

/* ---- encoding ---- */

struct enc {
    struct pbw w;
    char *err;
    size_t errlen;
    bool failed;
};

static void efail(struct enc *e, const char *what, const char *name) {
    if (e->failed) return;
    e->failed = true;
    snprintf(e->err, e->errlen, "%s: %s", name, what);
}

static void enc_message(struct enc *e, const ProtobufCMessageDescriptor *md, const json_t *o, int depth);

/* "2006-01-02T15:04:05[.fraction]Z" (or with an offset) into seconds and nanos. */
static bool parse_time(const char *s, int64_t *secs, int32_t *nanos) {
    struct tm tm = {0};
    const char *p = strptime(s, "%Y-%m-%dT%H:%M:%S", &tm);
    if (!p) return false;
    int64_t ns = 0, scale = 100000000;
    if (*p == '.')
        for (p++; *p >= '0' && *p <= '9'; p++, scale /= 10) ns += (*p - '0') * scale;
    long off = 0;
    if (*p == 'Z') p++;
    else if ((*p == '+' || *p == '-') && strlen(p) == 6 && p[3] == ':') {
        off = ((p[1] - '0') * 10 + (p[2] - '0')) * 3600 + ((p[4] - '0') * 10 + (p[5] - '0')) * 60;
        if (*p == '+') off = -off;
        p += 6;
    } else return false;
    if (*p) return false;
    *secs = (int64_t)timegm(&tm) + off;
    *nanos = (int32_t)ns;
    return true;
}

static void enc_special(struct enc *e, const ProtobufCFieldDescriptor *f, const json_t *v) {
    const ProtobufCMessageDescriptor *md = f->descriptor;
    struct pbw *w = &e->w;
    if (md == &D_TIME || md == &D_MICROTIME) {
        int64_t secs;
        int32_t nanos;
        if (!json_is_string(v) || !parse_time(json_string_value(v), &secs, &nanos))
            return efail(e, "expected an RFC 3339 time", f->name);
        pbw_begin(w, f->id);
        pbw_int64(w, 1, secs);
        pbw_int64(w, 2, md == &D_TIME ? 0 : nanos / 1000 * 1000);
        pbw_end(w);
    } else if (md == &D_QUANTITY) {
        char num[32];
        const char *s = json_string_value(v);
        if (json_is_integer(v)) snprintf(num, sizeof num, "%lld", (long long)json_integer_value(v)), s = num;
        if (!s) return efail(e, "expected a quantity", f->name);
        pbw_begin(w, f->id);
        pbw_string(w, 1, s);
        pbw_end(w);
    } else if (md == &D_INTSTR) {
        if (!json_is_integer(v) && !json_is_string(v)) return efail(e, "expected an integer or a string", f->name);
        pbw_begin(w, f->id);
        pbw_int64(w, 1, json_is_string(v) ? 1 : 0);
        pbw_int64(w, 2, json_is_integer(v) ? (int32_t)json_integer_value(v) : 0);
        pbw_string(w, 3, json_is_string(v) ? json_string_value(v) : "");
        pbw_end(w);
    } else { /* RawExtension, FieldsV1 */
        char *s = json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY);
        if (!s) return efail(e, "out of memory", f->name);
        pbw_begin(w, f->id);
        pbw_bytes(w, 1, s, strlen(s));
        pbw_end(w);
        free(s);
    }
}

static bool is_special(const ProtobufCMessageDescriptor *md) {
    return md == &D_TIME || md == &D_MICROTIME || md == &D_FIELDSV1 || md == &D_RAWEXT || md == &D_QUANTITY ||
           md == &D_INTSTR;
}

static void enc_value(struct enc *e, const ProtobufCFieldDescriptor *f, const json_t *v, int depth) {
    struct pbw *w = &e->w;
    switch (f->type) {
    case PROTOBUF_C_TYPE_STRING:
        if (!json_is_string(v)) return efail(e, "expected a string", f->name);
        pbw_bytes(w, f->id, json_string_value(v), json_string_length(v));
        return;
    case PROTOBUF_C_TYPE_BYTES: {
        size_t n = json_string_length(v);
        if (!json_is_string(v) || b64_std_check(json_string_value(v), n, NULL) < 0)
            return efail(e, "expected base64", f->name);
        unsigned char *b = malloc(n ? n : 1);
        if (!b) return efail(e, "out of memory", f->name);
        pbw_bytes(w, f->id, b, b64_std_decode(json_string_value(v), n, b));
        free(b);
        return;
    }
    case PROTOBUF_C_TYPE_BOOL:
        if (!json_is_boolean(v)) return efail(e, "expected a boolean", f->name);
        pbw_bool(w, f->id, json_is_true(v));
        return;
    case PROTOBUF_C_TYPE_MESSAGE:
        if (is_special(f->descriptor)) return enc_special(e, f, v);
        if (!json_is_object(v)) return efail(e, "expected an object", f->name);
        pbw_begin(w, f->id);
        enc_message(e, f->descriptor, v, depth + 1);
        pbw_end(w);
        return;
    default:
        if (!json_is_integer(v)) return efail(e, "expected an integer", f->name);
        pbw_int64(w, f->id, json_integer_value(v));
        return;
    }
}

static void enc_message(struct enc *e, const ProtobufCMessageDescriptor *md, const json_t *o, int depth) {
    if (depth > SHIM_PB_MAX_DEPTH) return efail(e, "nested too deep", md->short_name);
    for (unsigned i = 0; i < md->n_fields && !e->failed; i++) {
        const ProtobufCFieldDescriptor *f = &md->fields[i];
        if (inlined(f)) { /* the parent's own members */
            pbw_begin(&e->w, f->id);
            enc_message(e, f->descriptor, o, depth + 1);
            pbw_end(&e->w);
            continue;
        }
        const json_t *v = json_object_get(o, f->name);
        if (!v || json_is_null(v)) continue;
        if (is_map_entry(f)) {
            if (!json_is_object(v)) return efail(e, "expected an object", f->name);
            const char *k;
            json_t *mv;
            json_object_foreach((json_t *)v, k, mv) {
                pbw_begin(&e->w, f->id);
                pbw_string(&e->w, 1, k);
                enc_value(e, &((const ProtobufCMessageDescriptor *)f->descriptor)->fields[1], mv, depth + 1);
                pbw_end(&e->w);
            }
        } else if (f->label == PROTOBUF_C_LABEL_REPEATED) {
            if (!json_is_array(v)) return efail(e, "expected an array", f->name);
            size_t k;
            json_t *x;
            json_array_foreach(v, k, x) enc_value(e, f, x, depth);
        } else {
            enc_value(e, f, v, depth);
        }
    }
}

int shim_pb_encode(const json_t *obj, unsigned char **out, size_t *outlen, char *err, size_t errlen) {
    const char *av = json_string_value(json_object_get(obj, "apiVersion"));
    const char *kind = json_string_value(json_object_get(obj, "kind"));
    const ProtobufCMessageDescriptor *md = shim_pb_descriptor(av, kind);
    if (!md) return snprintf(err, errlen, "kind not encoded in protobuf"), -ENOENT;
    struct enc e = {.err = err, .errlen = errlen};
    pbw_init(&e.w, API_BODY_MAX);
    enc_message(&e, md, obj, 0);
    size_t n = 0;
    unsigned char *raw = e.failed ? NULL : pbw_take(&e.w, &n);
    pbw_free(&e.w);
    if (e.failed) return -EINVAL;
    if (!raw) return snprintf(err, errlen, "out of memory"), -ENOMEM;
    /* the envelope: magic, then Unknown{typeMeta, raw} */
    struct pbw w;
    pbw_init(&w, API_BODY_MAX);
    pbw_begin(&w, 1);
    pbw_string(&w, 1, av);
    pbw_string(&w, 2, kind);
    pbw_end(&w);
    pbw_bytes(&w, 2, raw, n);
    free(raw);
    size_t m = 0;
    unsigned char *u = pbw_take(&w, &m);
    pbw_free(&w);
    unsigned char *buf = u ? malloc(m + sizeof MAGIC) : NULL;
    if (!buf) {
        free(u);
        return snprintf(err, errlen, "out of memory"), -ENOMEM;
    }
    memcpy(buf, MAGIC, sizeof MAGIC);
    memcpy(buf + sizeof MAGIC, u, m);
    free(u);
    *out = buf;
    *outlen = m + sizeof MAGIC;
    return 0;
}

/* ---- the API server's use ---- */

bool shim_pb_request(const struct http_request *req) {
    return !strncmp(req->content_type, SHIM_PB_MEDIA, strlen(SHIM_PB_MEDIA));
}

json_t *shim_pb_body(const char *kind, const struct http_request *req, struct http_response *resp) {
    char err[400];
    json_t *obj = shim_pb_decode(req->body, req->body_len, err, sizeof err);
    if (!obj) shim_status(resp, 400, "BadRequest", NULL, "the body of the request could not be decoded as a %s: %s",
                          kind, err);
    return obj;
}

/* Where media type t first appears in accept (its length if absent). */
static size_t accept_at(const char *accept, const char *t) {
    const char *p = strstr(accept, t);
    return p ? (size_t)(p - accept) : strlen(accept);
}

/* Where JSON (or a wildcard that covers it) first appears in accept. */
static size_t json_at(const char *a) {
    size_t js = accept_at(a, "application/json");
    size_t any = accept_at(a, "*/*") < accept_at(a, "application/*") ? accept_at(a, "*/*") : accept_at(a, "application/*");
    return any < js ? any : js;
}

bool shim_pb_json_ok(const struct http_request *req) {
    size_t n = strlen(req->accept);
    return accept_at(req->accept, SHIM_PB_MEDIA) == n || json_at(req->accept) < n;
}

void shim_pb_reply(const struct http_request *req, struct http_response *resp) {
    const char *a = req->accept;
    size_t pb = accept_at(a, SHIM_PB_MEDIA), n = strlen(a);
    if (pb == n || !resp->body || !resp->content_type || strcmp(resp->content_type, "application/json")) return;
    size_t js = json_at(a);
    unsigned char *out = NULL;
    size_t outlen = 0;
    if (pb < js) {
        json_error_t je;
        json_t *obj = jparse_loadb(resp->body, resp->body_len, 0, &je);
        char err[200];
        int rc = obj ? shim_pb_encode(obj, &out, &outlen, err, sizeof err) : -EINVAL;
        json_decref(obj);
        if (rc == 0) {
            free(resp->body);
            resp->body = (char *)out;
            resp->body_len = outlen;
            resp->content_type = SHIM_PB_MEDIA;
            return;
        }
    }
    if (js < n) return; /* JSON is acceptable too */
    free(resp->body);
    resp->body = NULL;
    resp->body_len = 0;
    shim_status(resp, 406, "NotAcceptable", NULL, "only the following media types are accepted: application/json, "
                SHIM_PB_MEDIA " (for the built-in kinds)");
}
