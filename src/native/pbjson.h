/* pbjson: proto3's JSON mapping for any protobuf-c message, driven by the
 * generated descriptors alone (one mapping for every service: the YARPC JSON
 * encoding, the CLI's -o json, test fixtures).
 *
 * Writing (pbjson_from_msg): members under their JSON names (lowerCamelCase
 * of the field name: "owning_team" -> "owningTeam", "changeLog" and "Force"
 * stay as they are); fields at their default value left out (proto3
 * implicit presence), a set oneof member or an optional field with presence
 * always written; enums by value name (a number when the value has no name);
 * 64-bit integers as decimal strings, 32-bit ones as numbers; doubles and
 * floats as numbers, or "NaN", "Infinity", "-Infinity"; bytes as standard
 * base64 with padding; repeated fields as arrays; maps (repeated XEntry
 * messages with key 1 and value 2) as objects keyed by the key's text;
 * google.protobuf.Timestamp as RFC 3339 text in UTC ("2019-01-02T03:04:05Z",
 * with 3, 6 or 9 fraction digits when there are nanoseconds).
 *
 * Reading (pbjson_to_msg): the inverse, accepting what proto3 parsers accept:
 * the JSON name or the field name; null for a field's default; integers as
 * numbers (an integral real too) or decimal strings, range-checked for the
 * field's type; enums by name or number; bytes in standard or URL base64,
 * padded or not; floats from numbers or the three strings. Refused, with the
 * field's path in err (e.g. `config.resources[1].reservation: expected a
 * number, got "x"`): unknown members, a field given twice (by both names),
 * two members of one oneof, wrong JSON types, out-of-range numbers, and input
 * deeper than PBJSON_MAX_DEPTH messages or with more than PBJSON_MAX_ITEMS
 * repeated elements and map entries in all.
 *
 * Ownership: pbjson_from_msg returns a new JSON value (json_decref); the
 * message is borrowed. pbjson_to_msg returns a message allocated with the
 * system allocator, freed with protobuf_c_message_free_unpacked(m, NULL);
 * j is borrowed. Errors: NULL with one line in err. Pure; no global state. */
#ifndef PELOTON_NATIVE_PBJSON_H
#define PELOTON_NATIVE_PBJSON_H

#include <jansson.h>
#include <protobuf-c/protobuf-c.h>
#include <stddef.h>

#define PBJSON_MAX_DEPTH 64        /* nested messages (a map entry counts as one) */
#define PBJSON_MAX_ITEMS (1u << 20) /* repeated elements and map entries in one message tree */

json_t *pbjson_from_msg(const ProtobufCMessage *m, char *err, size_t errlen);
ProtobufCMessage *pbjson_to_msg(const ProtobufCMessageDescriptor *d, const json_t *j, char *err, size_t errlen);

/* The same from and to text. pbjson_parse reads len bytes of JSON (at most
 * JSON_PARSER_MAX_DEPTH deep, duplicate keys refused); pbjson_dump returns a
 * compact NUL-terminated text (free) with its length in *len (may be NULL). */
ProtobufCMessage *pbjson_parse(const ProtobufCMessageDescriptor *d, const char *buf, size_t len, char *err,
                               size_t errlen);
char *pbjson_dump(const ProtobufCMessage *m, size_t *len, char *err, size_t errlen);

/* Field f's JSON name into out (at least strlen(f->name) + 1 bytes). */
void pbjson_field_name(const ProtobufCFieldDescriptor *f, char *out);

#endif
