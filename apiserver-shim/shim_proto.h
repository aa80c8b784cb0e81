/* shim_proto: Kubernetes' protobuf encoding of the built-in kinds
 * (application/vnd.kubernetes.protobuf), as kubectl and client-go send it:
 * the 4 bytes "k8s\0", then a runtime.Unknown whose typeMeta names the
 * apiVersion and kind and whose raw is the object's message (proto/k8s/).
 *
 * Decoding gives the JSON object the JSON encoding of the same object gives,
 * so that everything after the body's decoding is one path: the generic walk
 * of the message over its protobuf-c descriptor (fields under their proto
 * names, which are Kubernetes' JSON names; repeated fields as arrays, maps as
 * objects, bytes as base64), with Kubernetes' own mapping on top:
 *
 *   - meta/v1 Time as RFC 3339 in UTC to the second, MicroTime to the
 *     microsecond; an empty message is Go's zero time (JSON's null), while
 *     seconds 0 written is 1970-01-01T00:00:00Z;
 *   - resource.Quantity as its string, intstr.IntOrString as a number or a
 *     string, runtime.RawExtension and meta/v1 FieldsV1 as the JSON their
 *     raw bytes hold;
 *   - the fields of Go's embedded structs (volumeSource,
 *     localObjectReference, a Probe's handler) inlined into their parent;
 *   - scalars at their zero value left out ("", 0, false: Go writes every
 *     non-pointer field, JSON leaves them out with omitempty) except the
 *     pointer fields whose zero means something (SHIM_PB_KEEP_ZERO in .c).
 *
 * Fields not declared in proto/k8s are skipped (a newer client's fields);
 * malformed input (a truncated varint or length, a wire type that is not the
 * field's, a group, a string that is not UTF-8, an envelope of another
 * encoding, an unknown kind) is refused with one line naming the field's
 * path. Bounded: at most SHIM_PB_MAX_DEPTH nested messages and
 * SHIM_PB_MAX_ITEMS repeated elements and map entries in all.
 *
 * Ownership: returned JSON values are new references; inputs are borrowed.
 * Pure; no global state. */
#ifndef PELOTON_SHIM_PROTO_H
#define PELOTON_SHIM_PROTO_H

#include <jansson.h>
#include <protobuf-c/protobuf-c.h>
#include <stdbool.h>
#include <stddef.h>

#define SHIM_PB_MEDIA "application/vnd.kubernetes.protobuf"
#define SHIM_PB_MAX_DEPTH 64
#define SHIM_PB_MAX_ITEMS (1u << 20)

struct http_request;
struct http_response;

/* The message of apiVersion and kind, or NULL when not one decoded here. */
const ProtobufCMessageDescriptor *shim_pb_descriptor(const char *api_version, const char *kind);

/* A message's bytes (no envelope) as JSON by descriptor d; NULL with err. */
json_t *shim_pb_message_json(const ProtobufCMessageDescriptor *d, const void *buf, size_t len, char *err,
                             size_t errlen);

/* A whole body (envelope and object): the object with apiVersion and kind
 * set from the envelope; NULL with err. */
json_t *shim_pb_decode(const void *buf, size_t len, char *err, size_t errlen);

/* The JSON object obj (borrowed) in the envelope, for apiVersion and kind
 * from obj: malloc'd bytes in *out (the caller frees), 0; or -ENOENT for a
 * kind not encoded here, -EINVAL (err says why: a value of the wrong type)
 * or -ENOMEM. */
int shim_pb_encode(const json_t *obj, unsigned char **out, size_t *outlen, char *err, size_t errlen);

/* ---- the API server's use of them ---- */
/* True when the request's body is protobuf. */
bool shim_pb_request(const struct http_request *req);
/* The body decoded as an object of kind (for the error's wording); NULL
 * after a 400 Status naming what was wrong. */
json_t *shim_pb_body(const char *kind, const struct http_request *req, struct http_response *resp);

/* After a reply is made: its JSON object in protobuf when the request's
 * Accept lists protobuf before JSON and the kind is encoded here; a 406
 * Status when Accept names protobuf, allows no JSON and the kind is not
 * encoded; else unchanged. */
void shim_pb_reply(const struct http_request *req, struct http_response *resp);
/* Whether a reply of a kind not encoded here (a List, a Table) may be JSON:
 * Accept does not name protobuf, or allows JSON too (else shim_pb_reply
 * refuses it with 406). */
bool shim_pb_json_ok(const struct http_request *req);

#endif
