/* Regular expressions for CRD `pattern`s, with the syntax and semantics of
 * RE2 (Go's regexp, which kube-apiserver uses) and RE2's guarantee: matching
 * takes time linear in the subject and memory bounded by the compiled
 * program, whatever the pattern. Nothing backtracks.
 *
 * regex_compile parses a pattern into a tree, checks it against the limits
 * below and emits a Thompson-construction program (counted repetitions
 * expanded). regex_match runs the program over the subject as a set of
 * states (a Pike VM without captures): each character moves every live state
 * at most once, so a search visits at most 2 x instructions states per
 * character, and needs 16 bytes of scratch per instruction.
 *
 * Dialect (docs/crd-validation.md has the table): literals, `.` (any
 * character but \n), [classes] with ranges, negation, \d \w \s (ASCII, as
 * RE2) and [[:alpha:]]-style POSIX classes, ^ $ \A \z (text anchors, as RE2
 * without (?m)), \b \B (ASCII word boundaries), ( ), (?: ), (?P<n> ), (?<n> ),
 * |, * + ? {n} {n,} {n,m} and their lazy forms, \Q...\E, escapes \t \n \r \f
 * \v \a \0oo \xHH \x{H...}. Patterns and subjects are UTF-8 and matched by
 * code point; a subject byte that is not valid UTF-8 is one character
 * (U+FFFD), as Go decodes it. Refused, as RE2 refuses them: back-references,
 * lookaround, possessive and stacked quantifiers, \C, \Z; refused here
 * though RE2 has them: inline flags (?i) and \p{..} Unicode classes.
 * A search is unanchored unless the pattern anchors (JSON Schema `pattern`).
 *
 * Ownership: regex_compile returns a new struct regex the caller frees with
 * regex_free (NULL-safe). A compiled regex is read-only: regex_match keeps
 * its scratch per call, so threads may share one.
 * Errors: 0; -EINVAL a syntax error or a refused construct (err says which,
 * naming it); -E2BIG past a limit below; -ENOMEM.
 * Named re2lite, not regex, so as not to shadow the C library's <regex.h>
 * on the include path (-Isrc/k8s). POSIX regexes are not used: they
 * backtrack and expand counted repetitions without bound. */
#ifndef PELOTON_K8S_RE2LITE_H
#define PELOTON_K8S_RE2LITE_H

#include <stdbool.h>
#include <stddef.h>

#define REGEX_MAX_LEN 4096     /* bytes of pattern */
#define REGEX_MAX_REPEAT 1000  /* a {n,m} count, and the product of nested counts (RE2's limit) */
#define REGEX_MAX_INSTS 10000  /* program instructions, {n,m} expanded (~8 bytes each) */
#define REGEX_MAX_DEPTH 100    /* nested groups */

struct regex;

/* Compiles pattern (NUL-terminated UTF-8). On failure *out is NULL and err
 * holds a message without the pattern, e.g. "back-references (\1) are not
 * supported". */
int regex_compile(const char *pattern, struct regex **out, char *err, size_t errlen);

void regex_free(struct regex *re);

/* Searches s[0, len) for a match of re. Each program state visited adds one
 * to *steps; when *steps passes max_steps the search stops. Returns 1 on a
 * match, 0 without one, -E2BIG when the steps ran out first (no answer),
 * -ENOMEM. */
int regex_match(const struct regex *re, const char *s, size_t len, size_t *steps, size_t max_steps);

/* The program's size in instructions, and the bytes the compiled regex holds. */
size_t regex_insts(const struct regex *re);
size_t regex_bytes(const struct regex *re);

#endif
