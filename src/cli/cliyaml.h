/* cliyaml: Peloton's YAML configs (JobConfig, ResourcePoolConfig, any
 * message) read into the message, driven by protobuf-c's descriptors alone,
 * so every field of every message works without a list of names here.
 *
 * The YAML is read event by event (libyaml) while walking the message's
 * descriptor: a mapping key names a field by its proto name, its JSON name,
 * or either compared without case and underscores ("instancecount",
 * "instance_count" and "instanceCount" are one field, as the YAML of
 * Peloton's Go CLI wrote them); a scalar is typed by its field (so `name:
 * 123` is the string "123", `cpuLimit: 1` the number 1, `preemptible: yes`
 * true, `type: 1` or `type: SERVICE` the enum); a sequence fills a repeated
 * field, a mapping a map<K, V> field; `null`, `~` or nothing leaves a field
 * unset. The result is the message's proto3 JSON (jansson), which
 * pbjson_to_msg (src/native/pbjson.h) turns into the message.
 *
 * Refused, with the file's line and the field's path ("job.yaml:12:
 * defaultConfig.resource.cpuLimit: expected a number, got \"lots\""): YAML
 * syntax errors, unknown fields, a field given twice, a scalar where a
 * mapping or sequence belongs and the reverse, numbers that do not parse or
 * do not fit the field, unknown enum names, aliases and anchors (no
 * expansion bombs), tags other than the core ones, more than one document,
 * nesting deeper than CLIYAML_MAX_DEPTH, more than CLIYAML_MAX_NODES values
 * and input over CLIYAML_MAX_BYTES.
 *
 * Ownership: cliyaml_to_json returns a new JSON object (json_decref);
 * cliyaml_to_msg a message to free with protobuf_c_message_free_unpacked(m,
 * NULL). name (the file's name, for messages) and buf are borrowed. Errors:
 * NULL with one line in err. Pure; no global state. */
#ifndef PELOTON_CLI_CLIYAML_H
#define PELOTON_CLI_CLIYAML_H

#include <jansson.h>
#include <protobuf-c/protobuf-c.h>
#include <stddef.h>
#include <stdio.h>

#define CLIYAML_MAX_DEPTH 48
#define CLIYAML_MAX_NODES 200000
#define CLIYAML_MAX_BYTES (4u << 20)

json_t *cliyaml_to_json(const ProtobufCMessageDescriptor *d, const char *name, const char *buf, size_t len,
                        char *err, size_t errlen);
/* The same, but unknown fields are skipped (what Peloton's Go CLI did,
 * silently), each named in one line on skipped: "warning: job.yaml:12: sla:
 * unknown field "x" in SlaConfig skipped". skipped NULL: as cliyaml_to_json. */
json_t *cliyaml_to_json_skipping(const ProtobufCMessageDescriptor *d, const char *name, const char *buf, size_t len,
                                 FILE *skipped, char *err, size_t errlen);
ProtobufCMessage *cliyaml_to_msg(const ProtobufCMessageDescriptor *d, const char *name, const char *buf,
                                 size_t len, char *err, size_t errlen);

/* Reads the file at path ("-": stdin), at most CLIYAML_MAX_BYTES, into a
 * malloc'd NUL-terminated buffer (free) with its length in *len; NULL with
 * one line in err. */
char *cliyaml_read_file(const char *path, size_t *len, char *err, size_t errlen);

#endif
