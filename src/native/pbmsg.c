/* Bounded decoding of protobuf-c messages (pbmsg.h). */
#include "pbmsg.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

/* A varint at *p (before end): 0 and advances, or -1 when truncated or
 * longer than ten bytes. */
static int read_varint(const uint8_t **p, const uint8_t *end, uint64_t *out) {
    uint64_t v = 0;
    for (int shift = 0; shift < 70; shift += 7) {
        if (*p >= end) return -1;
        uint8_t b = *(*p)++;
        v |= (uint64_t)(b & 0x7f) << (shift < 64 ? shift : 63);
        if (!(b & 0x80)) {
            *out = v;
            return 0;
        }
    }
    return -1;
}

static int check(const ProtobufCMessageDescriptor *d, const uint8_t *p, size_t len, int depth, int max_depth,
                 char *err, size_t errlen) {
    if (depth > max_depth) {
        if (err) snprintf(err, errlen, "messages nested deeper than %d", max_depth);
        return -E2BIG;
    }
    const uint8_t *end = p + len;
    while (p < end) {
        uint64_t key, n;
        if (read_varint(&p, end, &key)) goto bad;
        uint32_t id = (uint32_t)(key >> 3);
        if (key >> 3 > 0x1fffffff || id == 0) goto bad;
        switch (key & 7) {
        case 0:
            if (read_varint(&p, end, &n)) goto bad;
            break;
        case 1:
            if (end - p < 8) goto bad;
            p += 8;
            break;
        case 5:
            if (end - p < 4) goto bad;
            p += 4;
            break;
        case 2: {
            if (read_varint(&p, end, &n) || n > (uint64_t)(end - p)) goto bad;
            const ProtobufCFieldDescriptor *f = d ? protobuf_c_message_descriptor_get_field(d, id) : NULL;
            if (f && f->type == PROTOBUF_C_TYPE_MESSAGE) {
                int rc = check(f->descriptor, p, (size_t)n, depth + 1, max_depth, err, errlen);
                if (rc) return rc;
            }
            p += n;
            break;
        }
        default: goto bad; /* groups (3, 4) and the unused 6, 7 */
        }
    }
    return 0;
bad:
    if (err) snprintf(err, errlen, "malformed protobuf in %s", d ? d->name : "message");
    return -EINVAL;
}

int pbmsg_check(const ProtobufCMessageDescriptor *d, const uint8_t *p, size_t len, int max_depth, char *err,
                size_t errlen) {
    return check(d, p, len, 0, max_depth, err, errlen);
}

ProtobufCMessage *pbmsg_unpack(const ProtobufCMessageDescriptor *d, const uint8_t *p, size_t len, char *err,
                               size_t errlen) {
    if (pbmsg_check(d, p, len, PBMSG_MAX_DEPTH, err, errlen)) return NULL;
    ProtobufCMessage *m = protobuf_c_message_unpack(d, NULL, len, p);
    if (!m && err) snprintf(err, errlen, "cannot decode %s (a field has the wrong type or a bad value)", d->name);
    return m;
}

uint8_t *pbmsg_pack(const ProtobufCMessage *m, size_t *len) {
    size_t n = protobuf_c_message_get_packed_size(m);
    uint8_t *buf = malloc(n ? n : 1);
    if (!buf) return NULL;
    *len = protobuf_c_message_pack(m, buf);
    return buf;
}
