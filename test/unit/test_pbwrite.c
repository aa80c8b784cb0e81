/* pbwrite: the bytes of varints, tags, lengths and embedded messages, checked
 * against encodings worked out by hand from the protobuf wire format. */
#include <errno.h>
#include <stdlib.h>

#include "pbwrite.h"
#include "test.h"

/* Whether w's finished message is exactly the n bytes want (w is emptied). */
static bool take_is(struct pbw *w, const unsigned char *want, size_t n) {
    size_t len;
    unsigned char *got = pbw_take(w, &len);
    bool same = got && len == n && memcmp(got, want, n) == 0;
    if (got && !same) {
        fprintf(stderr, "  got %zu bytes:", len);
        for (size_t i = 0; i < len && i < 40; i++) fprintf(stderr, " %02x", got[i]);
        fputc('\n', stderr);
    }
    free(got);
    return same;
}
#define TAKE_IS(w, ...)                                                        \
    do {                                                                       \
        static const unsigned char want_[] = {__VA_ARGS__};                    \
        CHECK(take_is(w, want_, sizeof want_));                                \
    } while (0)

TEST(pbwrite_varints) {
    struct pbw w;
    pbw_init(&w, 0);
    pbw_varint(&w, 1, 0);
    pbw_varint(&w, 1, 1);
    pbw_varint(&w, 1, 127);
    pbw_varint(&w, 1, 128);
    pbw_varint(&w, 1, 300);
    TAKE_IS(&w, 0x08, 0x00, 0x08, 0x01, 0x08, 0x7f, 0x08, 0x80, 0x01, 0x08, 0xac, 0x02);
    pbw_varint(&w, 2, UINT64_MAX);
    TAKE_IS(&w, 0x10, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01);
    pbw_int64(&w, 3, -1); /* int64 -1: two's complement, ten bytes */
    pbw_int64(&w, 3, 1LL << 32);
    TAKE_IS(&w, 0x18, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01, 0x18, 0x80, 0x80, 0x80, 0x80, 0x10);
    pbw_bool(&w, 8, true);
    pbw_bool(&w, 27, false);
    TAKE_IS(&w, 0x40, 0x01, 0xd8, 0x01, 0x00);
    CHECK_I64(pbw_varint_size(0), 1);
    CHECK_I64(pbw_varint_size(127), 1);
    CHECK_I64(pbw_varint_size(128), 2);
    CHECK_I64(pbw_varint_size(16383), 2);
    CHECK_I64(pbw_varint_size(16384), 3);
    CHECK_I64(pbw_varint_size(UINT64_MAX), 10);
    pbw_free(&w);
}

TEST(pbwrite_tags_strings_doubles) {
    struct pbw w;
    pbw_init(&w, 0);
    pbw_string(&w, 1, "2.0"); /* an openapi_v2.Document starts so */
    pbw_string(&w, 31, "x");  /* field 31, wire type 2: tag 250 = f8|2 */
    pbw_string(&w, 4, "");
    pbw_string(&w, 5, NULL);
    pbw_bytes(&w, (1u << 29) - 1, "a", 1);
    TAKE_IS(&w, 0x0a, 0x03, '2', '.', '0', 0xfa, 0x01, 0x01, 'x', 0x22, 0x00, 0x2a, 0x00, 0xfa, 0xff, 0xff, 0xff,
            0x0f, 0x01, 'a');
    pbw_double(&w, 7, 1.0); /* 0x3ff0000000000000, little-endian */
    pbw_double(&w, 9, -2.5);
    TAKE_IS(&w, 0x39, 0, 0, 0, 0, 0, 0, 0xf0, 0x3f, 0x49, 0, 0, 0, 0, 0, 0, 0x04, 0xc0);
    pbw_free(&w);
}

TEST(pbwrite_nested_lengths) {
    struct pbw w;
    pbw_init(&w, 0);
    pbw_begin(&w, 2); /* empty */
    pbw_end(&w);
    pbw_begin(&w, 9);
    pbw_begin(&w, 1);
    pbw_string(&w, 1, "ab");
    pbw_end(&w);
    pbw_varint(&w, 2, 150);
    pbw_end(&w);
    TAKE_IS(&w, 0x12, 0x00, 0x4a, 0x09, 0x0a, 0x04, 0x0a, 0x02, 'a', 'b', 0x10, 0x96, 0x01);

    /* a body of 200 bytes needs a two-byte length; its parent's grows too */
    char big[201];
    memset(big, 'z', 200);
    big[200] = 0;
    pbw_begin(&w, 8);
    pbw_begin(&w, 2);
    pbw_string(&w, 1, big); /* 0a c8 01 + 200 = 203 bytes */
    pbw_end(&w);            /* 12 cb 01 + 203 = 206 */
    pbw_varint(&w, 3, 1);   /* + 2 = 208 */
    pbw_end(&w);
    size_t len;
    unsigned char *b = pbw_take(&w, &len);
    REQUIRE(b);
    CHECK_I64(len, 3 + 208);
    static const unsigned char head[] = {0x42, 0xd0, 0x01, 0x12, 0xcb, 0x01, 0x0a, 0xc8, 0x01, 'z'};
    CHECK(memcmp(b, head, sizeof head) == 0);
    CHECK(b[3 + 206] == 0x18 && b[3 + 207] == 0x01);
    free(b);

    /* 20,000 bytes (three-byte length) inside three levels */
    char *huge = malloc(20001);
    REQUIRE(huge);
    memset(huge, 'q', 20000);
    huge[20000] = 0;
    pbw_begin(&w, 1);
    pbw_begin(&w, 1);
    pbw_begin(&w, 1);
    pbw_string(&w, 4, huge);
    pbw_end(&w);
    pbw_end(&w);
    pbw_end(&w);
    b = pbw_take(&w, &len);
    free(huge);
    REQUIRE(b);
    /* innermost: 22 a0 9c 01 + 20000 = 20004; then 0a a4 9c 01 (20008), 0a a8 9c 01 (20012), 0a ac 9c 01 */
    static const unsigned char h3[] = {0x0a, 0xac, 0x9c, 0x01, 0x0a, 0xa8, 0x9c, 0x01, 0x0a, 0xa4, 0x9c, 0x01,
                                       0x22, 0xa0, 0x9c, 0x01, 'q'};
    CHECK_I64(len, 20016);
    CHECK(memcmp(b, h3, sizeof h3) == 0);
    CHECK(b[len - 1] == 'q');
    free(b);
    pbw_free(&w);
}

TEST(pbwrite_errors_are_sticky) {
    struct pbw w;
    size_t len;
    pbw_init(&w, 0);
    pbw_end(&w); /* no pbw_begin */
    CHECK_I64(pbw_error(&w), -EINVAL);
    pbw_string(&w, 1, "ignored");
    CHECK(pbw_take(&w, &len) == NULL && len == 0);
    pbw_free(&w);

    pbw_init(&w, 0);
    pbw_varint(&w, 0, 1); /* field 0 is not a field */
    CHECK_I64(pbw_error(&w), -EINVAL);
    pbw_free(&w);

    pbw_init(&w, 0);
    pbw_begin(&w, 1); /* still open */
    CHECK(pbw_take(&w, &len) == NULL);
    pbw_free(&w);

    pbw_init(&w, 0);
    for (int i = 0; i < PBW_MAX_DEPTH + 1; i++) pbw_begin(&w, 1);
    CHECK_I64(pbw_error(&w), -E2BIG);
    pbw_free(&w);

    pbw_init(&w, 16); /* a byte limit */
    pbw_string(&w, 1, "0123456789");
    CHECK_I64(pbw_error(&w), 0);
    pbw_string(&w, 1, "0123456789");
    CHECK_I64(pbw_error(&w), -E2BIG);
    pbw_free(&w);

    pbw_init(&w, 4); /* the length byte that grows must fit too */
    pbw_begin(&w, 1);
    pbw_end(&w);
    CHECK_I64(pbw_error(&w), 0);
    TAKE_IS(&w, 0x0a, 0x00);
    pbw_free(&w);

    pbw_init(&w, 0); /* nothing written: an empty message */
    unsigned char *b = pbw_take(&w, &len);
    CHECK(b != NULL && len == 0);
    free(b);
    pbw_free(&w);
}
