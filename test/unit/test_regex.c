/* Unit tests for src/k8s/regex: RE2's dialect as CRD patterns use it, by
 * table (pattern x subject -> match), refusals with their messages, the
 * limits, and linear-time matching of patterns that are exponential for
 * backtracking engines (asserted on the step counter, not on time). */
#include <errno.h>
#include <stdlib.h>

#include "re2lite.h"
#include "test.h"

/* A search with an ample budget: 1, 0, or the negative error. */
static int search(const char *pattern, const char *s, size_t len) {
    struct regex *re = NULL;
    char err[256];
    int rc = regex_compile(pattern, &re, err, sizeof err);
    if (rc) {
        fprintf(stderr, "  pattern '%s' refused (%d): %s\n", pattern, rc, err);
        return rc;
    }
    size_t steps = 0;
    rc = regex_match(re, s, len, &steps, (size_t)-1);
    regex_free(re);
    return rc;
}

static const struct {
    const char *pattern, *subject;
    int len; /* -1: strlen(subject) */
    int match;
} cases[] = {
    /* literals and escapes */
    {"abc", "xabcx", -1, 1},
    {"abc", "ab", -1, 0},
    {"", "", -1, 1},
    {"", "anything", -1, 1},
    {"a\\.c", "a.c", -1, 1},
    {"a\\.c", "abc", -1, 0},
    {"a.c", "abc", -1, 1},
    {"\\\\", "a\\b", -1, 1},
    {"\\/", "a/b", -1, 1},
    {"^\\-\\]\\[\\{\\}\\(\\)\\*\\+\\?\\|\\^\\$\\.\\ $", "-][{}()*+?|^$. ", -1, 1},
    {"a\\tb", "a\tb", -1, 1},
    {"\\n", "x\ny", -1, 1},
    {"\\r\\f\\v\\a", "\r\f\v\a", -1, 1},
    {"^\\x41\\x62$", "Ab", -1, 1},
    {"^\\x{263A}$", "\xe2\x98\xba", -1, 1},
    {"^\\x{1F600}$", "\xf0\x9f\x98\x80", -1, 1},
    {"^a\\0b$", "a\0b", 3, 1},
    {"^\\012$", "\n", -1, 1},
    {"^[\\12]$", "\n", -1, 1}, /* octal, as in RE2: only \1 alone is a back-reference */
    {"^\\101$", "A", -1, 1},
    {"^a{02}$", "a{02}", -1, 1}, /* a count has no leading zero: this is no quantifier */
    {"^\\Qa.b*\\E$", "a.b*", -1, 1},
    {"^\\Qa.b*\\E$", "axbb", -1, 0},
    {"^\\Qab\\E+$", "abbb", -1, 1}, /* the quantifier takes the last character, as in RE2 */
    {"^\\Qab\\E+$", "abab", -1, 0},
    {"x\\Q(", "x(", -1, 1},
    {"^a{$", "a{", -1, 1}, /* a { that is no quantifier is itself */
    {"^a{,2}$", "a{,2}", -1, 1},
    {"^{$", "{", -1, 1},
    {"^x}]$", "x}]", -1, 1},
    {"^a{1", "a{1", -1, 1},
    /* . and UTF-8 */
    {".", "a", -1, 1},
    {".", "\n", -1, 0},
    {".", "", -1, 0},
    {"^.$", "\xc3\xa9", -1, 1},      /* é is one character */
    {"^..$", "\xc3\xa9", -1, 0},
    {"^.{2}$", "\xe6\x97\xa5\xe6\x9c\xac", -1, 1},
    {"^\xe6\x97\xa5\xe6\x9c\xac$", "\xe6\x97\xa5\xe6\x9c\xac", -1, 1},
    {"^\xc3\xa9+$", "\xc3\xa9\xc3\xa9\xc3\xa9", -1, 1},
    {"^.$", "\xff", -1, 1},           /* an invalid byte is one character */
    {"^.$", "\xc3", -1, 1},
    {"^..$", "\xe2\x98", -1, 1},      /* a cut sequence: one per byte, as Go decodes */
    {"^.$", "\xe2\x98", -1, 0},
    {"^..$", "\xed\xa0\x80", -1, 0},  /* a surrogate: three bad bytes */
    {"^...$", "\xed\xa0\x80", -1, 1},
    {"^.$", "\xc0\x80", -1, 0},       /* overlong NUL: two bad bytes */
    {"^\\x{FFFD}$", "\xff", -1, 1},
    {"^[^a]$", "\xff", -1, 1},
    {"a.c", "a\xf0\x9f\x98\x80" "c", -1, 1},
    /* classes */
    {"^[a-z0-9_-]+$", "ab_9-", -1, 1},
    {"^[a-z0-9_-]+$", "AB", -1, 0},
    {"^[^a-z]$", "A", -1, 1},
    {"^[^a-z]$", "a", -1, 0},
    {"^[^a-z]$", "\n", -1, 1}, /* negated classes match \n, as in RE2 */
    {"^[^a-z]$", "\xc3\xa9", -1, 1},
    {"^[]a]+$", "]a]", -1, 1},
    {"^[^]a]$", "b", -1, 1},
    {"^[^]a]$", "]", -1, 0},
    {"^[a-]$", "-", -1, 1},
    {"^[-a]$", "-", -1, 1},
    {"^[a-c-e]$", "-", -1, 1},
    {"^[a-c-e]$", "d", -1, 0},
    {"^[\\d]$", "5", -1, 1},
    {"^[\\D]$", "5", -1, 0},
    {"^[\\D]$", "x", -1, 1},
    {"^[\\w.]+$", "a.b_c", -1, 1},
    {"^[\\s]$", " ", -1, 1},
    {"^[\\s]$", "\v", -1, 0}, /* RE2's \s has no \v */
    {"^[\\S]$", "\v", -1, 1},
    {"^[\\].]$", "]", -1, 1},
    {"^[\\^]$", "^", -1, 1},
    {"^[a^]$", "^", -1, 1},
    {"^[\\x41-\\x43]+$", "ABC", -1, 1},
    {"^[\\x41-\\x43]+$", "ABCD", -1, 0},
    {"^[[:alpha:]]+$", "abcXYZ", -1, 1},
    {"^[[:alpha:]]+$", "ab1", -1, 0},
    {"^[[:^alpha:]]$", "1", -1, 1},
    {"^[[:^alpha:]]$", "a", -1, 0},
    {"^[[:digit:][:upper:]]+$", "A1", -1, 1},
    {"^[[:digit:][:upper:]]+$", "a", -1, 0},
    {"^[[:space:]]$", "\v", -1, 1},
    {"^[[:word:]]+$", "a_1", -1, 1},
    {"^[[:xdigit:]]+$", "09afAF", -1, 1},
    {"^[[:xdigit:]]+$", "g", -1, 0},
    {"^[[:punct:]]+$", "!/:@[`{~", -1, 1},
    {"^[[:alnum:][:blank:][:cntrl:][:graph:][:lower:][:print:][:ascii:]]$", "\x01", -1, 1},
    {"^[[:foo]$", "f", -1, 1}, /* no :] after it: [ is a member */
    {"^[\xc3\xa9-\xc3\xbc]$", "\xc3\xb1", -1, 1},
    {"^[\xc3\xa9-\xc3\xbc]$", "a", -1, 0},
    {"^[\\x{100}-\\x{200}]$", "\xc5\x90", -1, 1},
    {"^[\xe2\x98\xba]$", "\xe2\x98\xba", -1, 1},
    {"^[^\xe2\x98\xba]$", "\xe2\x98\xba", -1, 0},
    {"^[^\xe2\x98\xba]$", "a", -1, 1},
    {"^[a-zA-Z\xf0\x9f\x98\x80-\xf0\x9f\x98\x8f]+$", "a\xf0\x9f\x98\x85Z", -1, 1},
    /* shorthands: ASCII, as RE2 */
    {"^\\d+$", "0123", -1, 1},
    {"^\\d$", "\xd9\xa1", -1, 0}, /* an Arabic-Indic digit is no \d */
    {"^\\D$", "\xd9\xa1", -1, 1},
    {"^\\w+$", "a_Z9", -1, 1},
    {"^\\w$", "\xc3\xa9", -1, 0},
    {"^\\W$", "\xc3\xa9", -1, 1},
    {"^\\s+$", " \t\n\f\r", -1, 1},
    {"^\\s$", "\v", -1, 0},
    {"^\\S+$", "ab", -1, 1},
    {"^\\S$", " ", -1, 0},
    /* anchors */
    {"^abc", "abcd", -1, 1},
    {"^abc", "xabc", -1, 0},
    {"abc$", "xabc", -1, 1},
    {"abc$", "abc\n", -1, 0}, /* $ is the end of the text, as in RE2 without (?m) */
    {"\\Aabc\\z", "abc", -1, 1},
    {"\\Aabc\\z", "abcd", -1, 0},
    {"^$", "", -1, 1},
    {"^$", "a", -1, 0},
    {"a^b", "ab", -1, 0},
    {"$a", "a", -1, 0},
    {"(^|x)a", "xa", -1, 1},
    {"(^|x)a", "ya", -1, 0},
    {"(^|x)a", "a", -1, 1},
    {"^*a", "a", -1, 1},
    {"(?:^)+a", "ba", -1, 0},
    {"a$|^b", "xb", -1, 0},
    {"a$|^b", "xa", -1, 1},
    /* word boundaries (ASCII word characters) */
    {"\\bfoo\\b", "a foo b", -1, 1},
    {"\\bfoo\\b", "afoo", -1, 0},
    {"\\bfoo\\b", "foo", -1, 1},
    {"\\Bfoo", "afoo", -1, 1},
    {"\\Bfoo", "foo", -1, 0},
    {"\\b", "", -1, 0},
    {"\\B", "", -1, 1},
    {"\\b", "  ", -1, 0},
    {"\xc3\xa9\\b", "\xc3\xa9", -1, 0},
    {"a\\b", "a\xc3\xa9", -1, 1},
    {"^\\b\\w+\\b$", "word", -1, 1},
    /* groups */
    {"^(ab)+$", "abab", -1, 1},
    {"^(ab)+$", "aba", -1, 0},
    {"^(?:ab|cd)*$", "abcdab", -1, 1},
    {"^(?:ab|cd)*$", "abc", -1, 0},
    {"^(?P<x>a)b$", "ab", -1, 1},
    {"^(?<first_1>a)b$", "ab", -1, 1},
    {"()", "", -1, 1},
    {"^(a|)$", "", -1, 1},
    {"^((a)|(b(c)))+$", "abcabc", -1, 1},
    {"^((a)|(b(c)))+$", "ab", -1, 0},
    {"^((a)|(b(c)))+$", "abca", -1, 1},
    {"^(((((((((a)))))))))$", "a", -1, 1},
    /* alternation */
    {"cat|dog", "hotdog", -1, 1},
    {"^(cat|dog)$", "cats", -1, 0},
    {"a|b|c", "c", -1, 1},
    {"|", "x", -1, 1},
    {"^(a|ab)(c|bcd)$", "abcd", -1, 1},
    /* quantifiers, greedy and lazy */
    {"^a*$", "", -1, 1},
    {"^a+$", "", -1, 0},
    {"^a?$", "aa", -1, 0},
    {"^a{3}$", "aaa", -1, 1},
    {"^a{3}$", "aa", -1, 0},
    {"^a{3}$", "aaaa", -1, 0},
    {"^a{2,}$", "a", -1, 0},
    {"^a{2,}$", "aaaaa", -1, 1},
    {"^a{2,3}$", "aaaa", -1, 0},
    {"^a{2,3}$", "aa", -1, 1},
    {"^a{0}$", "", -1, 1},
    {"^a{0}$", "a", -1, 0},
    {"^a{0,0}b$", "b", -1, 1},
    {"^a{0,2}$", "aa", -1, 1},
    {"^a{0,2}$", "aaa", -1, 0},
    {"^a*?$", "aaa", -1, 1},
    {"^a+?b$", "aab", -1, 1},
    {"^a??b$", "ab", -1, 1},
    {"^a{2,3}?$", "aaa", -1, 1},
    {"^a{2,}?$", "aaaa", -1, 1},
    {"^(ab){2}$", "abab", -1, 1},
    {"^(a*)*$", "aaa", -1, 1},
    {"^(a*)+$", "", -1, 1},
    {"^(a?){3}a{3}$", "aaa", -1, 1},
    {"^(\\b)*x$", "x", -1, 1},
    {"^x{1000}$", NULL, 1000, 1}, /* NULL: len x's */
    {"^x{1000}$", NULL, 999, 0},
    {"^x{1,1000}$", NULL, 1000, 1},
    {"^x{1,1000}$", NULL, 1001, 0},
    /* what CRDs write */
    {"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$", "my-name", -1, 1},
    {"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$", "-bad", -1, 0},
    {"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$", "bad-", -1, 0},
    {"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?)*$", "a.b-c.example.com", -1, 1},
    {"^(\\d+|\\*)(/\\d+)?(\\s+(\\d+|\\*)(/\\d+)?){4}$", "*/5 0 * * 1", -1, 1},
    {"^(\\d+|\\*)(/\\d+)?(\\s+(\\d+|\\*)(/\\d+)?){4}$", "* * * *", -1, 0},
    {"^\\+?(([0-9]+(\\.[0-9]*)?)|(\\.[0-9]+))(([KMGTPE]i)|[numkMGTPE]|([eE](\\+|-)?(([0-9]+(\\.[0-9]*)?)|(\\.[0-9]+))))?$",
     "1.5Gi", -1, 1},
    {"^\\+?(([0-9]+(\\.[0-9]*)?)|(\\.[0-9]+))(([KMGTPE]i)|[numkMGTPE]|([eE](\\+|-)?(([0-9]+(\\.[0-9]*)?)|(\\.[0-9]+))))?$",
     "-3", -1, 0},
    {"^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$", "0f8fad5b-d9cb-469f-a165-70867728950e", -1, 1},
    {"^(?:[\\w.\\-]+?)@\\S+$", "a.b-c_d@host", -1, 1},
    {"^([0-9]+(\\.[0-9]+)?(ms|s|m|h))+$", "1h30m", -1, 1},
    {"^([0-9]+(\\.[0-9]+)?(ms|s|m|h))+$", "1d", -1, 0},
};

TEST(regex_table) {
    char many[1002];
    memset(many, 'x', sizeof many);
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const char *s = cases[i].subject ? cases[i].subject : many;
        size_t len = cases[i].len < 0 ? strlen(s) : (size_t)cases[i].len;
        int got = search(cases[i].pattern, s, len);
        if (got != cases[i].match)
            test_fail(__FILE__, __LINE__, "case %zu: /%s/ on \"%.40s\": %d, want %d", i, cases[i].pattern, s, got,
                      cases[i].match);
    }
}

static const struct {
    const char *pattern;
    int code;
    const char *message;
} refused[] = {
    {"(a)\\1", -EINVAL, "back-references (\\1) are not supported"},
    {"(a)\\8", -EINVAL, "back-references (\\8) are not supported"},
    {"(a)\\1x", -EINVAL, "back-references (\\1) are not supported"},
    {"(?=a)", -EINVAL, "lookaround `(?=` is not supported"},
    {"x(?!a)", -EINVAL, "lookaround `(?!` is not supported"},
    {"(?<=a)b", -EINVAL, "lookaround `(?<=` is not supported"},
    {"(?<!a)b", -EINVAL, "lookaround `(?<!` is not supported"},
    {"(?P=x)", -EINVAL, "named back-references `(?P=` are not supported"},
    {"a*+", -EINVAL, "possessive quantifier `*+` is not supported"},
    {"a++", -EINVAL, "possessive quantifier `++` is not supported"},
    {"a?+", -EINVAL, "possessive quantifier `?+` is not supported"},
    {"a{2}+", -EINVAL, "possessive quantifier `{2}+` is not supported"},
    {"a**", -EINVAL, "invalid nested repetition operator `**`"},
    {"a*?*", -EINVAL, "invalid nested repetition operator `*?*`"},
    {"a{2}{3}", -EINVAL, "invalid nested repetition operator `{2}{3}`"},
    {"a{1001}", -E2BIG, "repetition count in `{1001}` is over 1000"},
    {"a{2,1001}", -E2BIG, "repetition count in `{2,1001}` is over 1000"},
    {"a{99999999999}", -E2BIG, "is over 1000"},
    {"(a{100}){100}", -E2BIG, "nested repetitions multiply to over 1000 at `{100}`"},
    {"((a{10}){10}b){11}", -E2BIG, "nested repetitions multiply to over 1000"},
    {"a{3,2}", -EINVAL, "invalid repeat count `{3,2}`"},
    {"*a", -EINVAL, "missing argument to repetition operator `*`"},
    {"a|*", -EINVAL, "missing argument to repetition operator `*`"},
    {"(+)", -EINVAL, "missing argument to repetition operator `+`"},
    {"{2}", -EINVAL, "missing argument to repetition operator `{2}`"},
    {"(a", -EINVAL, "missing closing ) for `(a`"},
    {"x(?:a|b", -EINVAL, "missing closing ) for `(?:a|b`"},
    {"a)", -EINVAL, "unexpected ) at offset 1"},
    {"[a", -EINVAL, "missing closing ] in `[a`"},
    {"[]", -EINVAL, "missing closing ]"},
    {"[z-a]", -EINVAL, "invalid character class range `z-a`"},
    {"[a-\\d]", -EINVAL, "invalid character class range `a-\\d`"},
    {"\\", -EINVAL, "trailing backslash at end of pattern"},
    {"\\pL", -EINVAL, "Unicode classes (\\p{...}) are not supported"},
    {"\\P{Greek}", -EINVAL, "Unicode classes (\\P{...}) are not supported"},
    {"\\C", -EINVAL, "\\C (any byte) is not supported"},
    {"a\\Z", -EINVAL, "\\Z is not supported"},
    {"\\e", -EINVAL, "invalid escape `\\e`"},
    {"\\u0041", -EINVAL, "invalid escape `\\u`"},
    {"\\k<x>", -EINVAL, "invalid escape `\\k`"},
    {"[\\b]", -EINVAL, "invalid escape `\\b` inside [...]"},
    {"\\\xc3\xa9", -EINVAL, "invalid escape `\\\xc3\xa9`"},
    {"\\x{110000}", -EINVAL, "invalid escape `\\x{110000`"},
    {"\\xZZ", -EINVAL, "invalid escape `\\xZ`"},
    {"\\x{}", -EINVAL, "invalid escape `\\x{}`"},
    {"\\x4", -EINVAL, "invalid escape `\\x4`"},
    {"(?i)abc", -EINVAL, "inline flags `(?i)` are not supported"},
    {"(?s:.)", -EINVAL, "inline flags `(?s:` are not supported"},
    {"(?P<>a)", -EINVAL, "invalid named capture `(?P<>`"},
    {"(?<a-b>x)", -EINVAL, "invalid named capture `(?<a`"},
    {"[[:foo:]]", -EINVAL, "unknown POSIX class `[:foo:]`"},
    {"a\xff", -EINVAL, "invalid UTF-8 in the pattern"},
    {"[\xc3]", -EINVAL, "invalid UTF-8 in the pattern"},
};

TEST(regex_refusals) {
    for (size_t i = 0; i < sizeof refused / sizeof refused[0]; i++) {
        struct regex *re = (struct regex *)1;
        char err[256] = "";
        int rc = regex_compile(refused[i].pattern, &re, err, sizeof err);
        if (rc != refused[i].code || re)
            test_fail(__FILE__, __LINE__, "/%s/: %d (%s), want %d", refused[i].pattern, rc, err, refused[i].code);
        CHECK_HAS(err, refused[i].message);
    }
}

/* Builds a pattern of n copies of unit into buf (cap bytes). */
static const char *repeat(char *buf, size_t cap, const char *unit, int n, const char *tail) {
    size_t o = 0;
    for (int i = 0; i < n && o + strlen(unit) < cap; i++) o += (size_t)snprintf(buf + o, cap - o, "%s", unit);
    snprintf(buf + o, cap - o, "%s", tail);
    return buf;
}

TEST(regex_limits) {
    static char pat[REGEX_MAX_LEN * 2];
    struct regex *re = NULL;
    char err[256];
    /* 9 x 1,000 + 999 classes and the final match: exactly REGEX_MAX_INSTS */
    REQUIRE(regex_compile(repeat(pat, sizeof pat, "[a-z]{1000}", 9, "[a-z]{999}"), &re, err, sizeof err) == 0);
    CHECK_I64(regex_insts(re), REGEX_MAX_INSTS);
    CHECK(regex_bytes(re) <= 8 * REGEX_MAX_INSTS + 512); /* 8 bytes an instruction, and ten classes */
    regex_free(re);
    CHECK_I64(regex_compile(repeat(pat, sizeof pat, "[a-z]{1000}", 10, ""), &re, err, sizeof err), -E2BIG);
    CHECK_HAS(err, "it compiles to more than 10000 instructions");
    CHECK(re == NULL);
    CHECK_I64(regex_compile(repeat(pat, sizeof pat, "(a{1000}|b)", 10, ""), &re, err, sizeof err), -E2BIG);
    /* nesting */
    char deep[2 * REGEX_MAX_DEPTH + 8];
    memset(deep, '(', REGEX_MAX_DEPTH);
    memset(deep + REGEX_MAX_DEPTH, ')', REGEX_MAX_DEPTH);
    deep[2 * REGEX_MAX_DEPTH] = 0;
    REQUIRE(regex_compile(deep, &re, err, sizeof err) == 0);
    regex_free(re);
    memset(deep, '(', REGEX_MAX_DEPTH + 1);
    memset(deep + REGEX_MAX_DEPTH + 1, ')', REGEX_MAX_DEPTH + 1);
    deep[2 * REGEX_MAX_DEPTH + 2] = 0;
    CHECK_I64(regex_compile(deep, &re, err, sizeof err), -E2BIG);
    CHECK_HAS(err, "groups nested deeper than 100");
    /* length */
    memset(pat, 'a', REGEX_MAX_LEN + 1);
    pat[REGEX_MAX_LEN + 1] = 0;
    CHECK_I64(regex_compile(pat, &re, err, sizeof err), -E2BIG);
    CHECK_HAS(err, "longer than 4096 bytes");
    pat[REGEX_MAX_LEN] = 0;
    REQUIRE(regex_compile(pat, &re, err, sizeof err) == 0);
    regex_free(re);
    regex_free(NULL);
}

TEST(regex_typical_sizes) {
    /* what a compiled pattern costs: small for what CRDs write */
    static const struct {
        const char *pattern;
        size_t max_bytes;
    } typical[] = {
        {"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$", 256},
        {"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$", 1400},
        {"^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$", 512},
        {"^\\+?(([0-9]+(\\.[0-9]*)?)|(\\.[0-9]+))(([KMGTPE]i)|[numkMGTPE]|([eE](\\+|-)?(([0-9]+(\\.[0-9]*)?)|"
         "(\\.[0-9]+))))?$",
         768},
    };
    for (size_t i = 0; i < sizeof typical / sizeof typical[0]; i++) {
        struct regex *re = NULL;
        char err[256];
        REQUIRE(regex_compile(typical[i].pattern, &re, err, sizeof err) == 0);
        if (regex_bytes(re) > typical[i].max_bytes)
            test_fail(__FILE__, __LINE__, "/%s/: %zu bytes, %zu instructions", typical[i].pattern, regex_bytes(re),
                      regex_insts(re));
        regex_free(re);
    }
}

/* Patterns that take exponential time in a backtracking engine run here in
 * at most (len + 1) x 3 x instructions steps. */
TEST(regex_pathological_linear) {
    static const struct {
        const char *pattern;
        char fill, last;
        int match;
    } nasty[] = {
        {"(a*)*b", 'a', 'a', 0},      {"^(a|a)*b$", 'a', 'a', 0},     {"^(a|aa)*c$", 'a', 'a', 0},
        {"(x+x+)+y", 'x', 'x', 0},    {"^(a+)+$", 'a', '!', 0},       {"^(\\w+\\s?)*$", 'a', '!', 0},
        {"^(a?){25}a{25}$", 'a', 'a', 0}, {"^([a-z0-9]{1,10}){1,100}$", 'a', 'a', 0},
        {"(.*a){20}", 'a', 'a', 1},   {"^(a|a?)+$", 'a', 'a', 1},
    };
    enum { LEN = 10000 };
    char *s = malloc(LEN);
    REQUIRE(s);
    for (size_t i = 0; i < sizeof nasty / sizeof nasty[0]; i++) {
        memset(s, nasty[i].fill, LEN);
        s[LEN - 1] = nasty[i].last;
        struct regex *re = NULL;
        char err[256];
        if (regex_compile(nasty[i].pattern, &re, err, sizeof err)) {
            test_fail(__FILE__, __LINE__, "/%s/ refused: %s", nasty[i].pattern, err);
            continue;
        }
        size_t steps = 0, bound = (size_t)(LEN + 1) * 3 * regex_insts(re);
        int rc = regex_match(re, s, LEN, &steps, (size_t)-1);
        if (rc != nasty[i].match || steps > bound)
            test_fail(__FILE__, __LINE__, "/%s/: %d after %zu steps (bound %zu)", nasty[i].pattern, rc, steps, bound);
        regex_free(re);
    }
    free(s);
}

TEST(regex_step_budget) {
    struct regex *re = NULL;
    char err[256];
    REQUIRE(regex_compile("([a-z0-9]{1,1000})+!$", &re, err, sizeof err) == 0);
    enum { LEN = 10001 };
    char *s = malloc(LEN);
    REQUIRE(s);
    memset(s, 'a', LEN);
    size_t steps = 5, max = 1000000;
    CHECK_I64(regex_match(re, s, LEN, &steps, max), -E2BIG);
    CHECK(steps > max && steps < max + 4 * regex_insts(re)); /* stopped within a position of the budget */
    steps = 0;
    CHECK_I64(regex_match(re, s, 100, &steps, max), 0); /* a short subject fits */
    CHECK(steps > 0 && steps <= max);
    s[LEN - 1] = '!';
    steps = 0;
    CHECK_I64(regex_match(re, s + LEN - 50, 50, &steps, max), 1);
    steps = max + 1; /* already spent */
    CHECK_I64(regex_match(re, "a!", 2, &steps, max), -E2BIG);
    free(s);
    regex_free(re);
    /* an anchored pattern stops when no state is left */
    REQUIRE(regex_compile("^ab", &re, err, sizeof err) == 0);
    steps = 0;
    CHECK_I64(regex_match(re, "xbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb", 34, &steps, (size_t)-1), 0);
    CHECK(steps <= 4);
    regex_free(re);
}

/* Random bytes as subjects: never a crash, and the same answer twice. */
TEST(regex_random_subjects) {
    static const char *const patterns[] = {"^[^a]*$", "\\b.\\B", "[\\x{80}-\\x{10FFFF}]{2}", "^(.|\\n)*$", "a.c"};
    uint64_t seed = 7;
    unsigned char s[64];
    for (size_t p = 0; p < sizeof patterns / sizeof patterns[0]; p++) {
        struct regex *re = NULL;
        char err[256];
        REQUIRE(regex_compile(patterns[p], &re, err, sizeof err) == 0);
        for (int it = 0; it < 500; it++) {
            size_t len = (size_t)test_range(&seed, 0, sizeof s);
            for (size_t i = 0; i < len; i++) s[i] = (unsigned char)test_rand(&seed);
            size_t a = 0, b = 0;
            int r1 = regex_match(re, (const char *)s, len, &a, (size_t)-1);
            int r2 = regex_match(re, (const char *)s, len, &b, (size_t)-1);
            CHECK(r1 == r2 && a == b && (r1 == 0 || r1 == 1));
        }
        regex_free(re);
    }
    CHECK_I64(search("^(.|\\n)*$", "\xff\xfe\n\xc3", 4), 1);
}
