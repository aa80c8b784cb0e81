#include <errno.h>
#include <math.h>

#include "quantity.h"
#include "test.h"

static int64_t q(enum res_kind k, const char *s) {
    int64_t v = -1;
    char err[160];
    if (quantity_parse_kind(k, s, &v, err, sizeof err) != 0) return -1;
    return v;
}

TEST(quantity_cpu_forms) {
    CHECK_I64(q(RES_CPU, "250m"), 250);
    CHECK_I64(q(RES_CPU, "1.5"), 1500);
    CHECK_I64(q(RES_CPU, "2"), 2000);
    CHECK_I64(q(RES_CPU, "0.1"), 100);
    CHECK_I64(q(RES_CPU, ".5"), 500);
    CHECK_I64(q(RES_CPU, "5."), 5000);
    CHECK_I64(q(RES_CPU, "+3"), 3000);
    CHECK_I64(q(RES_CPU, "1e3"), 1000000);
    CHECK_I64(q(RES_CPU, "1E3"), 1000000);
    CHECK_I64(q(RES_CPU, "1e-3"), 1);
    CHECK_I64(q(RES_CPU, "100u"), 1);        /* 0.1m rounds up, as MilliValue does */
    CHECK_I64(q(RES_CPU, "1000000n"), 1);
    CHECK_I64(q(RES_CPU, "1500000n"), 2);
    CHECK_I64(q(RES_CPU, "0.0001"), 1);
    CHECK_I64(q(RES_CPU, "1k"), 1000000);
    CHECK_I64(q(RES_CPU, "0"), 0);
    CHECK_I64(q(RES_CPU, "-0"), 0);
    CHECK_I64(q(RES_CPU, "0.000"), 0);
    CHECK_I64(q(RES_GPU, "1"), 1000);
}

TEST(quantity_bytes_forms) {
    CHECK_I64(q(RES_MEMORY, "2Gi"), 2LL << 30);
    CHECK_I64(q(RES_MEMORY, "512M"), 512000000LL);
    CHECK_I64(q(RES_MEMORY, "0.5Ki"), 512);
    CHECK_I64(q(RES_MEMORY, "1.5Gi"), 3LL << 29);
    CHECK_I64(q(RES_MEMORY, "1e3"), 1000);
    CHECK_I64(q(RES_MEMORY, "1E"), 1000000000000000000LL);
    CHECK_I64(q(RES_MEMORY, "7Ei"), 7LL << 60);
    CHECK_I64(q(RES_DISK, "2Ti"), 2LL << 40);
    CHECK_I64(q(RES_MEMORY, "0.5"), 1);      /* rounds up to a whole byte */
    CHECK_I64(q(RES_MEMORY, "1.0000000000000000000000000000000000001Ki"), 1025);
    CHECK_I64(q(RES_MEMORY, "123456789"), 123456789);
    CHECK_I64(q(RES_MEMORY, "9223372036854775806"), 9223372036854775806LL);
}

TEST(quantity_rejects_with_named_value) {
    const char *bad[] = {"", "abc", "1.2.3", "1x", "--1", "1e", "1e+", "Ki", "1 Gi", "1Kb",
                         "1K", "1Gii", "1m5", "0x10", ".", "-", "1ee3", NULL};
    for (int i = 0; bad[i]; i++) {
        int64_t v;
        char err[160] = "";
        int rc = quantity_parse_kind(RES_MEMORY, bad[i], &v, err, sizeof err);
        if (rc != -EINVAL) test_fail(__FILE__, __LINE__, "accepted \"%s\"", bad[i]);
        CHECK_HAS(err, "quantity \"");
    }
    int64_t v;
    char err[160];
    CHECK(quantity_parse_kind(RES_CPU, "-1", &v, err, sizeof err) == -EINVAL);
    CHECK_HAS(err, "\"-1\": must not be negative");
    CHECK(quantity_parse_kind(RES_MEMORY, "8Ei", &v, err, sizeof err) == -ERANGE);
    CHECK_HAS(err, "\"8Ei\": too large");
    CHECK(quantity_parse_kind(RES_CPU, "1e400", &v, err, sizeof err) == -ERANGE);
    CHECK(quantity_parse_kind(RES_CPU, "9223372036854775807", &v, err, sizeof err) == -ERANGE);
    CHECK(quantity_parse_kind(RES_MEMORY, "99999999999999999999", &v, err, sizeof err) == -ERANGE);
    CHECK(quantity_parse_kind(RES_CPU, "1e999999999", &v, err, sizeof err) == -ERANGE);
    char longq[QUANTITY_MAX_LEN + 8];
    memset(longq, '1', sizeof longq - 1);
    longq[sizeof longq - 1] = 0;
    CHECK(quantity_parse_kind(RES_CPU, longq, &v, err, sizeof err) == -EINVAL);
    CHECK_HAS(err, "too long");
}

TEST(quantity_tiny_positive_rounds_up) {
    CHECK_I64(q(RES_CPU, "1e-900"), 1);
    CHECK_I64(q(RES_MEMORY, "0.000000000000000000000000000000000000000001"), 1);
}

TEST(quantity_format_roundtrip) {
    char buf[64];
    quantity_format(RES_CPU, 250, buf, sizeof buf);       CHECK_STR(buf, "250m");
    quantity_format(RES_CPU, 2000, buf, sizeof buf);      CHECK_STR(buf, "2");
    quantity_format(RES_MEMORY, 2LL << 30, buf, sizeof buf); CHECK_STR(buf, "2Gi");
    quantity_format(RES_MEMORY, 512000000, buf, sizeof buf); CHECK_STR(buf, "512M");
    quantity_format(RES_MEMORY, 1000, buf, sizeof buf);   CHECK_STR(buf, "1k");
    quantity_format(RES_MEMORY, 1023, buf, sizeof buf);   CHECK_STR(buf, "1023");
    quantity_format(RES_MEMORY, 0, buf, sizeof buf);      CHECK_STR(buf, "0");
    quantity_format(RES_MEMORY, RES_UNLIMITED, buf, sizeof buf); CHECK_STR(buf, "unlimited");
    uint64_t seed = 42;
    for (int i = 0; i < 20000; i++) {
        enum res_kind k = (enum res_kind)(i % RES_NKINDS);
        int64_t v = (int64_t)(test_rand(&seed) >> (test_rand(&seed) % 63 + 1));
        if (i % 3 == 0) v = (v % 100000) * 1024;
        quantity_format(k, v, buf, sizeof buf);
        int64_t back = q(k, buf);
        if (back != v) { test_fail(__FILE__, __LINE__, "roundtrip %" PRId64 " -> %s -> %" PRId64, v, buf, back); break; }
    }
}

TEST(native_units) {
    int64_t v;
    CHECK(res_from_native(RES_CPU, 0.1, &v) == 0); CHECK_I64(v, 100);
    CHECK(res_from_native(RES_CPU, 1.5, &v) == 0); CHECK_I64(v, 1500);
    CHECK(res_from_native(RES_MEMORY, 512, &v) == 0); CHECK_I64(v, 512LL << 20);
    CHECK(res_from_native(RES_CPU, 0.0001, &v) == 0); CHECK_I64(v, 1);
    CHECK(res_from_native(RES_CPU, -1, &v) == -EINVAL);
    CHECK(res_from_native(RES_CPU, NAN, &v) == -EINVAL);
    CHECK(res_from_native(RES_MEMORY, 1e300, &v) == -ERANGE);
    CHECK(res_to_native(RES_MEMORY, 3LL << 20) == 3.0);
    CHECK(res_to_native(RES_GPU, 500) == 0.5);
    CHECK(isinf(res_to_native(RES_CPU, RES_UNLIMITED)));
}
