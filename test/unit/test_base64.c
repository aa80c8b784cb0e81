/* base64.h: both alphabets against RFC 4648's vectors, and the check of
 * standard base64 as Go's decoder (and so kube-apiserver) takes it. */
#include <string.h>

#include "base64.h"
#include "test.h"

TEST(base64_encode_and_check) {
    char out[64];
    static const struct {
        const char *in, *std, *url;
    } cases[] = {{"", "", ""}, {"f", "Zg==", "Zg"}, {"fo", "Zm8=", "Zm8"}, {"foo", "Zm9v", "Zm9v"},
                 {"foob", "Zm9vYg==", "Zm9vYg"}, {"\xfb\xff", "+/8=", "-_8"}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        size_t n = strlen(cases[i].in);
        CHECK_I64(b64_encode(cases[i].in, n, false, true, out), b64_encoded_len(n, true));
        CHECK_STR(out, cases[i].std);
        CHECK_I64(b64_encode(cases[i].in, n, true, false, out), b64_encoded_len(n, false));
        CHECK_STR(out, cases[i].url);
        CHECK_I64(b64_std_check(cases[i].std, strlen(cases[i].std), NULL), (long)n);
    }
    size_t bad = 99;
    CHECK_I64(b64_std_check("Zg", 2, &bad), -1);
    CHECK_I64(bad, 2);
    CHECK_I64(b64_std_check("Z===", 4, &bad), -1);
    CHECK_I64(bad, 1);
    CHECK_I64(b64_std_check("Zg==Zg==", 8, &bad), -1);
    CHECK_I64(bad, 4);
    CHECK_I64(b64_std_check("Zm9v-_8=", 8, &bad), -1);
    CHECK_I64(bad, 4);
    CHECK_I64(b64_std_check("Zm9v\nYg==\r\n", 11, &bad), 4);
}

TEST(base64_std_decode) {
    static const struct {
        const char *b64, *raw;
        size_t n;
    } cases[] = {{"", "", 0}, {"Zg==", "f", 1}, {"Zm8=", "fo", 2}, {"Zm9v", "foo", 3}, {"Zm9vYg==", "foob", 4},
                 {"+/8=", "\xfb\xff", 2}, {"AP8=", "\x00\xff", 2}, {"Zm9v\r\nYg==", "foob", 4}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        unsigned char out[16];
        size_t len = strlen(cases[i].b64);
        CHECK_I64(b64_std_check(cases[i].b64, len, NULL), (long)cases[i].n);
        CHECK_I64(b64_std_decode(cases[i].b64, len, out), cases[i].n);
        CHECK(memcmp(out, cases[i].raw, cases[i].n) == 0);
    }
}
