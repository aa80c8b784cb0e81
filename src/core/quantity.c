#include "quantity.h"

#include <errno.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

/* The number is held as a little array of decimal digits D (most significant
 * first) with a power of ten and a power of two: value = D * 10^e10 * 2^e2.
 * Doubling the digit array and splitting it at the decimal point keeps every
 * digit, so rounding up is exact whatever the input's length. */
#define MAXD (QUANTITY_MAX_LEN + 64)

struct bigdec {
    unsigned char d[MAXD];
    int n;
};

static void big_mul_small(struct bigdec *b, unsigned m) {
    unsigned carry = 0;
    for (int i = b->n - 1; i >= 0; i--) {
        unsigned x = b->d[i] * m + carry;
        b->d[i] = (unsigned char)(x % 10);
        carry = x / 10;
    }
    while (carry) { /* n stays < MAXD: at most 19 digits of growth from 2^60 */
        memmove(b->d + 1, b->d, (size_t)b->n);
        b->d[0] = (unsigned char)(carry % 10);
        carry /= 10;
        b->n++;
    }
}

static int fail(char *err, size_t errlen, const char *s, const char *why, int code) {
    if (err && errlen) snprintf(err, errlen, "quantity \"%.*s\": %s", 64, s, why);
    return code;
}

int quantity_parse(const char *s, int64_t unit_per_one, int64_t *out, char *err, size_t errlen) {
    if (!s) return fail(err, errlen, "", "missing", -EINVAL);
    size_t len = strlen(s);
    if (len == 0) return fail(err, errlen, s, "empty", -EINVAL);
    if (len > QUANTITY_MAX_LEN) return fail(err, errlen, s, "too long", -EINVAL);

    const char *p = s;
    bool neg = false;
    if (*p == '+' || *p == '-') neg = (*p++ == '-');

    struct bigdec b = {.n = 0};
    long e10 = 0;
    int e2 = 0, ndig = 0;
    bool dot = false;
    for (; (*p >= '0' && *p <= '9') || (*p == '.' && !dot); p++) {
        if (*p == '.') { dot = true; continue; }
        ndig++;
        if (b.n == 0 && *p == '0') { if (dot) e10--; continue; } /* leading zero */
        b.d[b.n++] = (unsigned char)(*p - '0');
        if (dot) e10--;
    }
    if (ndig == 0) return fail(err, errlen, s, "not a number", -EINVAL);

    /* Suffix. */
    switch (*p) {
    case '\0': break;
    case 'n': e10 -= 9; p++; break;
    case 'u': e10 -= 6; p++; break;
    case 'm': e10 -= 3; p++; break;
    case 'k': e10 += 3; p++; break;
    case 'M': case 'G': case 'T': case 'P': case 'E': {
        static const char order[] = "kMGTPE";
        int pow = (int)(strchr(order, *p) - order) + 1;
        if (p[1] == 'i') { e2 = 10 * pow; p += 2; }
        else if (*p == 'E' && (p[1] == '+' || p[1] == '-' || (p[1] >= '0' && p[1] <= '9'))) {
            goto exponent; /* "1E3" is an exponent, "1E" is exa */
        } else { e10 += 3 * pow; p++; }
        break;
    }
    case 'K':
        if (p[1] == 'i') { e2 = 10; p += 2; break; }
        return fail(err, errlen, s, "unknown suffix (use k or Ki)", -EINVAL);
    case 'e':
    exponent: {
        p++;
        bool eneg = false;
        if (*p == '+' || *p == '-') eneg = (*p++ == '-');
        if (!(*p >= '0' && *p <= '9')) return fail(err, errlen, s, "malformed exponent", -EINVAL);
        long ev = 0;
        for (; *p >= '0' && *p <= '9'; p++) {
            ev = ev * 10 + (*p - '0');
            if (ev > 100000) return fail(err, errlen, s, "exponent out of range", -ERANGE);
        }
        e10 += eneg ? -ev : ev;
        break;
    }
    default:
        return fail(err, errlen, s, "unknown suffix", -EINVAL);
    }
    if (*p != '\0') return fail(err, errlen, s, "trailing characters", -EINVAL);

    if (b.n == 0) { *out = 0; return 0; } /* zero, signed or not */
    if (neg) return fail(err, errlen, s, "must not be negative", -EINVAL);

    /* Scale to base units. */
    if (unit_per_one == 1000) e10 += 3;
    else if (unit_per_one != 1) return fail(err, errlen, s, "bad unit", -EINVAL);
    while (e2 >= 10) { big_mul_small(&b, 1024); e2 -= 10; }

    /* Split at the decimal point: integer digits and whether any fraction remains. */
    long nint = (long)b.n + e10; /* digits before the point */
    if (nint > 19) return fail(err, errlen, s, "too large", -ERANGE);
    uint64_t ival = 0;
    bool frac = false;
    for (long i = 0; i < nint; i++) {
        unsigned dgt = i < b.n ? b.d[i] : 0;
        if (ival > (UINT64_MAX - dgt) / 10) return fail(err, errlen, s, "too large", -ERANGE);
        ival = ival * 10 + dgt;
    }
    for (long i = nint < 0 ? 0 : nint; i < b.n; i++)
        if (b.d[i]) { frac = true; break; }
    if (frac) ival++;
    if (ival > (uint64_t)INT64_MAX - 1) return fail(err, errlen, s, "too large", -ERANGE);
    *out = (int64_t)ival;
    return 0;
}

int quantity_parse_kind(enum res_kind k, const char *s, int64_t *out, char *err, size_t errlen) {
    return quantity_parse(s, (k == RES_CPU || k == RES_GPU) ? 1000 : 1, out, err, errlen);
}

int quantity_format(enum res_kind k, int64_t v, char *buf, size_t len) {
    if (v == RES_UNLIMITED) return snprintf(buf, len, "unlimited");
    if (k == RES_CPU || k == RES_GPU) {
        if (v % 1000 == 0) return snprintf(buf, len, "%" PRId64, v / 1000);
        return snprintf(buf, len, "%" PRId64 "m", v);
    }
    if (v == 0) return snprintf(buf, len, "0");
    /* Largest binary and largest decimal suffix that divide exactly; the
     * shorter text wins, binary on a tie. */
    static const char *const bin[] = {"Ei", "Pi", "Ti", "Gi", "Mi", "Ki"};
    static const char *const dec[] = {"E", "P", "T", "G", "M", "k"};
    char b1[32] = "", b2[32] = "";
    for (int i = 0; i < 6 && !b1[0]; i++) {
        int64_t bunit = (int64_t)1 << (10 * (6 - i));
        if (v % bunit == 0) snprintf(b1, sizeof b1, "%" PRId64 "%s", v / bunit, bin[i]);
    }
    int64_t dunit = 1000000000000000000LL;
    for (int i = 0; i < 6 && !b2[0]; i++, dunit /= 1000)
        if (v % dunit == 0) snprintf(b2, sizeof b2, "%" PRId64 "%s", v / dunit, dec[i]);
    if (b1[0] && (!b2[0] || strlen(b1) <= strlen(b2))) return snprintf(buf, len, "%s", b1);
    if (b2[0]) return snprintf(buf, len, "%s", b2);
    return snprintf(buf, len, "%" PRId64, v);
}

/* Prints x with at most `decimals` decimals, trailing zeros dropped. */
static int fixed_trimmed(double x, int decimals, const char *suffix, char *buf, size_t len) {
    char tmp[64];
    snprintf(tmp, sizeof tmp, "%.*f", decimals, x);
    char *dot = strchr(tmp, '.');
    if (dot) {
        char *e = tmp + strlen(tmp) - 1;
        while (e > dot && *e == '0') *e-- = 0;
        if (e == dot) *e = 0;
    }
    return snprintf(buf, len, "%s%s", tmp, suffix);
}

int quantity_format_display(enum res_kind k, int64_t v, char *buf, size_t len) {
    if (v == RES_UNLIMITED) return snprintf(buf, len, "unlimited");
    if (v < 0) v = 0;
    if (k == RES_CPU || k == RES_GPU) return fixed_trimmed((double)v / 1000.0, 2, "", buf, len);
    static const char *const units[] = {"", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei"};
    int u = 0;
    double x = (double)v;
    /* 1023.6Mi rounds to 1024 at no decimals: that is 1Gi */
    while (u < 6 && x >= 1023.5) x /= 1024.0, u++;
    if (u == 0) return snprintf(buf, len, "%lld", (long long)v);
    /* three significant digits: 1.23, 12.3, 123 */
    int decimals = x < 10.0 ? 2 : x < 100.0 ? 1 : 0;
    if (decimals == 2 && x >= 9.995) decimals = 1; /* 9.999 rounds to 10.0, not 10.00 */
    if (decimals == 1 && x >= 99.95) decimals = 0;
    return fixed_trimmed(x, decimals, units[u], buf, len);
}
