/* pbmsg: decoding and encoding protobuf-c messages from untrusted bytes.
 *
 * protobuf-c's unpacker recurses once per nested message with no bound, so
 * a few megabytes of nested length prefixes would exhaust the stack. Before
 * unpacking, pbmsg_check walks the wire format once, following the
 * descriptors into message-typed fields, and refuses nesting deeper than
 * PBMSG_MAX_DEPTH, truncated or malformed fields and groups (which proto3
 * does not have); only then is protobuf_c_message_unpack called.
 *
 * Ownership: pbmsg_unpack returns a message to free with
 * protobuf_c_message_free_unpacked(m, NULL); pbmsg_pack a malloc'd buffer
 * (free). Errors: NULL or a negative errno with one line in err. */
#ifndef PELOTON_NATIVE_PBMSG_H
#define PELOTON_NATIVE_PBMSG_H

#include <protobuf-c/protobuf-c.h>
#include <stddef.h>
#include <stdint.h>

#define PBMSG_MAX_DEPTH 64

/* 0 when len bytes at p are well-formed wire data for d nested at most
 * max_depth messages deep; -EINVAL (malformed) or -E2BIG (too deep). */
int pbmsg_check(const ProtobufCMessageDescriptor *d, const uint8_t *p, size_t len, int max_depth, char *err,
                size_t errlen);
ProtobufCMessage *pbmsg_unpack(const ProtobufCMessageDescriptor *d, const uint8_t *p, size_t len, char *err,
                               size_t errlen);
/* m serialized, with its length in *len; NULL when out of memory. */
uint8_t *pbmsg_pack(const ProtobufCMessage *m, size_t *len);

#endif
