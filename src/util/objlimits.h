/* The bounds on one Kubernetes object, in one place: what the store keeps
 * (store.h takes its byte bound from here), what a patch may grow an object
 * to while it applies (patch.h), and what the JSON reader nests (jansson's
 * JSON_PARSER_MAX_DEPTH, which jparse and jdump use).
 *
 * OBJ_MAX_BYTES  serialized size of a stored object (etcd's default request
 *                limit, as kube-apiserver's storage has it)
 * OBJ_MAX_NODES  JSON values in one object: every value takes at least two
 *                bytes with its separator, so an object of OBJ_MAX_BYTES holds
 *                no more than this many
 * OBJ_MAX_DEPTH  nested arrays and objects: deeper text is refused by the
 *                reader and cannot be written back by jdump */
#ifndef PELOTON_UTIL_OBJLIMITS_H
#define PELOTON_UTIL_OBJLIMITS_H

#include <jansson.h>

#define OBJ_MAX_BYTES (1536u * 1024u)
#define OBJ_MAX_NODES (OBJ_MAX_BYTES / 2)
#define OBJ_MAX_DEPTH JSON_PARSER_MAX_DEPTH

#endif
