/* openapi_pb: an OpenAPI 2.0 (Swagger) document given as JSON, encoded as the
 * protobuf message openapi.v2.Document of gnostic's OpenAPIv2.proto, which is
 * what kube-apiserver answers at /openapi/v2 to a client that accepts
 * application/com.github.proto-openapi.spec.v2@v1.0+protobuf (kubectl up to
 * 1.26 reads its explain, dry-run and validation schemas from it).
 *
 * Encoded: the document's swagger, info (title, version, description), host,
 * basePath, schemes, consumes, produces, paths and definitions; path items'
 * operations and parameters; operations' tags, summary, description,
 * operationId, produces, consumes, parameters, responses, schemes,
 * deprecated; parameters (body, query, path, header, formData) and responses;
 * schemas' $ref, format, title, description, default, the numeric and length
 * bounds, pattern, uniqueItems, required, enum, additionalProperties, type,
 * items, allOf, properties, discriminator, readOnly and example. Every "x-"
 * key becomes a vendor extension (NamedAny). A value that the proto holds as
 * Any (extensions, enum members, default, example) is written as its JSON
 * text in Any.yaml: JSON is YAML, and Kubernetes clients read Any.yaml only.
 * Anything else (security, tags, externalDocs, xml, response headers) is left
 * out; keys of the wrong JSON type are skipped.
 *
 * Limits: schemas nested deeper than OPENAPI_PB_MAX_DEPTH and documents over
 * max bytes (0: PBW_DEFAULT_MAX) are refused with -E2BIG.
 *
 * Returns 0 with *out (malloc'd, the caller frees it) and *len, or a negative
 * errno (-EINVAL: doc is not an object; -ENOMEM). */
#ifndef PELOTON_K8S_OPENAPI_PB_H
#define PELOTON_K8S_OPENAPI_PB_H

#include <jansson.h>
#include <stddef.h>

#define OPENAPI_PB_MAX_DEPTH 80 /* schema nodes, one inside another (CRD schemas: at most 64) */

int openapi_pb_encode(const json_t *doc, size_t max, unsigned char **out, size_t *len);

#endif
