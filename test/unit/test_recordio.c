/* RecordIO codec (src/mesos/recordio.c): records in any split of the
 * stream, the bound, malformed lengths, truncation, and the encoder. */
#include <errno.h>
#include <stdlib.h>

#include "recordio.h"
#include "test.h"

struct got {
    int n;
    char rec[16][64];
    size_t len[16];
    int stop_at; /* return 7 from this record on (1-based), 0: never */
};

static int collect(void *ud, const char *data, size_t len) {
    struct got *g = ud;
    if (g->n < 16 && len < 64) {
        memcpy(g->rec[g->n], data, len);
        g->rec[g->n][len] = 0;
        g->len[g->n] = len;
    }
    g->n++;
    return g->stop_at && g->n >= g->stop_at ? 7 : 0;
}

static const char STREAM[] = "5\nhello0\n11\n{\"a\":\"bcd\"}3\nxyz";

TEST(recordio_whole_stream_in_one_feed) {
    struct recordio_decoder d;
    struct got g = {0};
    recordio_decoder_init(&d, 0);
    CHECK_I64(recordio_decode(&d, STREAM, sizeof STREAM - 1, collect, &g), 0);
    REQUIRE_I64(g.n, 4);
    CHECK_STR(g.rec[0], "hello");
    CHECK_I64(g.len[1], 0);
    CHECK_STR(g.rec[2], "{\"a\":\"bcd\"}");
    CHECK_STR(g.rec[3], "xyz");
    CHECK(recordio_at_boundary(&d));
    CHECK_I64(recordio_finish(&d), 0);
    recordio_decoder_free(&d);
}

/* Every split into two and three feeds, and one byte at a time, gives the same records. */
TEST(recordio_any_split_gives_same_records) {
    size_t n = sizeof STREAM - 1;
    for (size_t a = 0; a <= n; a++) {
        for (size_t b = a; b <= n; b++) {
            struct recordio_decoder d;
            struct got g = {0};
            recordio_decoder_init(&d, 0);
            CHECK_I64(recordio_decode(&d, STREAM, a, collect, &g), 0);
            CHECK_I64(recordio_decode(&d, STREAM + a, b - a, collect, &g), 0);
            CHECK_I64(recordio_decode(&d, STREAM + b, n - b, collect, &g), 0);
            CHECK_I64(g.n, 4);
            CHECK_STR(g.rec[2], "{\"a\":\"bcd\"}");
            CHECK_STR(g.rec[3], "xyz");
            recordio_decoder_free(&d);
        }
    }
    struct recordio_decoder d;
    struct got g = {0};
    recordio_decoder_init(&d, 0);
    for (size_t i = 0; i < n; i++) CHECK_I64(recordio_decode(&d, STREAM + i, 1, collect, &g), 0);
    CHECK_I64(g.n, 4);
    CHECK_STR(g.rec[0], "hello");
    CHECK_I64(d.records, 4);
    recordio_decoder_free(&d);
}

TEST(recordio_bound_refused_before_data) {
    struct recordio_decoder d;
    struct got g = {0};
    recordio_decoder_init(&d, 10);
    CHECK_I64(recordio_decode(&d, "10\n0123456789", 13, collect, &g), 0);
    CHECK_I64(g.n, 1);
    /* 11 is refused at its second digit, before the newline or any data */
    CHECK_I64(recordio_decode(&d, "11", 2, collect, &g), -EMSGSIZE);
    CHECK_HAS(d.err, "bound of 10 bytes");
    /* failed for good */
    CHECK_I64(recordio_decode(&d, "1\na", 3, collect, &g), -EMSGSIZE);
    CHECK_I64(g.n, 1);
    recordio_decoder_free(&d);

    /* a bound below a single digit (found by the fuzz target: the check wrapped) */
    recordio_decoder_init(&d, 1);
    CHECK_I64(recordio_decode(&d, "5\nabcde", 7, collect, &g), -EMSGSIZE);
    recordio_decoder_free(&d);

    /* a length that would overflow 64 bits is refused too, not wrapped */
    recordio_decoder_init(&d, (size_t)-1);
    CHECK_I64(recordio_decode(&d, "99999999999999999999999\n", 24, collect, &g), -EMSGSIZE);
    recordio_decoder_free(&d);
    recordio_decoder_init(&d, (size_t)-1);
    CHECK_I64(recordio_decode(&d, "000000000000000000001\n", 22, collect, &g), -EBADMSG);
    CHECK_HAS(d.err, "too many digits");
    recordio_decoder_free(&d);
}

TEST(recordio_malformed_lengths_refused) {
    static const char *bad[] = {"\nabc", "-1\na", " 1\na", "1 \na", "1\r\na", "x", "1a\n", "+3\nabc", "0x1\na"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        struct recordio_decoder d;
        struct got g = {0};
        recordio_decoder_init(&d, 0);
        CHECK_I64(recordio_decode(&d, bad[i], strlen(bad[i]), collect, &g), -EBADMSG);
        CHECK_HAS(d.err, "malformed record length");
        CHECK_I64(g.n, 0);
        CHECK(!recordio_at_boundary(&d));
        recordio_decoder_free(&d);
    }
    /* the error names the offending byte */
    struct recordio_decoder d;
    recordio_decoder_init(&d, 0);
    CHECK_I64(recordio_decode(&d, "1\nA2x", 5, NULL, NULL), -EBADMSG);
    CHECK_HAS(d.err, "0x78");
    recordio_decoder_free(&d);
}

TEST(recordio_truncated_stream_detected) {
    struct recordio_decoder d;
    recordio_decoder_init(&d, 0);
    CHECK_I64(recordio_decode(&d, "5\nhel", 5, NULL, NULL), 0);
    CHECK(!recordio_at_boundary(&d));
    CHECK_I64(recordio_finish(&d), -EPIPE);
    CHECK_HAS(d.err, "3 of 5 bytes");
    recordio_decoder_free(&d);
    recordio_decoder_init(&d, 0);
    CHECK_I64(recordio_decode(&d, "12", 2, NULL, NULL), 0);
    CHECK_I64(recordio_finish(&d), -EPIPE);
    CHECK_HAS(d.err, "inside a record length");
    recordio_decoder_free(&d);
}

TEST(recordio_callback_stops_decoding) {
    struct recordio_decoder d;
    struct got g = {.stop_at = 2};
    recordio_decoder_init(&d, 0);
    CHECK_I64(recordio_decode(&d, STREAM, sizeof STREAM - 1, collect, &g), 7);
    CHECK_I64(g.n, 2);
    recordio_decoder_free(&d);
}

/* Encoding then decoding in random splits gives back the records. */
TEST(recordio_encode_roundtrip_random_splits) {
    uint64_t seed = 19;
    for (int round = 0; round < 200; round++) {
        char *out = NULL;
        size_t olen = 0, ocap = 0;
        int nrec = (int)test_range(&seed, 0, 12);
        char recs[12][64];
        size_t lens[12];
        for (int i = 0; i < nrec; i++) {
            lens[i] = (size_t)test_range(&seed, 0, 63);
            for (size_t j = 0; j < lens[i]; j++) recs[i][j] = (char)test_range(&seed, 0, 255);
            REQUIRE_I64(recordio_encode(&out, &olen, &ocap, recs[i], lens[i]), 0);
        }
        struct recordio_decoder d;
        struct got g = {0};
        recordio_decoder_init(&d, 64);
        size_t off = 0;
        while (off < olen) {
            size_t take = (size_t)test_range(&seed, 1, 40);
            if (take > olen - off) take = olen - off;
            REQUIRE_I64(recordio_decode(&d, out + off, take, collect, &g), 0);
            off += take;
        }
        CHECK_I64(g.n, nrec);
        for (int i = 0; i < nrec && i < g.n; i++) {
            CHECK_I64(g.len[i], lens[i]);
            CHECK(memcmp(g.rec[i], recs[i], lens[i]) == 0);
        }
        CHECK_I64(recordio_finish(&d), 0);
        recordio_decoder_free(&d);
        free(out);
    }
}
