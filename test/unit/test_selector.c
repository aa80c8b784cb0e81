/* Label and field selectors: grammar, errors (with Kubernetes' wording),
 * matching semantics, LabelSelector objects, per-kind field whitelists. */
#include <errno.h>
#include <jansson.h>
#include <stdlib.h>

#include "selector.h"
#include "test.h"

static json_t *js(const char *text) {
    json_error_t e;
    json_t *v = json_loads(text, JSON_DECODE_ANY, &e);
    if (!v) test_fail(__FILE__, __LINE__, "bad test JSON: %s", text);
    return v;
}

/* 1 match, 0 no match, -1 parse error. */
static int lmatch(const char *sel, const char *labels) {
    struct labelsel *s;
    char err[256];
    if (labelsel_parse(sel, &s, err, sizeof err) != 0) return -1;
    json_t *l = labels ? js(labels) : NULL;
    int m = labelsel_match(s, l);
    json_decref(l);
    labelsel_free(s);
    return m;
}

/* Parses sel, expects failure with rc and a message containing want. */
static void lerr(const char *sel, int rc_want, const char *want, int line) {
    struct labelsel *s = (struct labelsel *)1;
    char err[512] = "";
    int rc = labelsel_parse(sel, &s, err, sizeof err);
    if (rc != rc_want) test_fail(__FILE__, line, "labelsel_parse(\"%s\") = %d, want %d (%s)", sel, rc, rc_want, err);
    if (s) test_fail(__FILE__, line, "out not NULL on error");
    if (!strstr(err, want)) test_fail(__FILE__, line, "\"%s\": error \"%s\" lacks \"%s\"", sel, err, want);
    if (rc == 0) labelsel_free(s);
}
#define LERR(sel, rc, want) lerr(sel, rc, want, __LINE__)

static const char *fmt(const char *sel, char *buf, size_t len) {
    struct labelsel *s;
    char err[256];
    if (labelsel_parse(sel, &s, err, sizeof err) != 0) return "(error)";
    labelsel_format(s, buf, len);
    labelsel_free(s);
    return buf;
}

TEST(selector_forms_parse_to_ops) {
    struct labelsel *s;
    char err[256];
    REQUIRE(labelsel_parse("a=1,b==2,c!=3,d in (x,y),e notin (z),f,!g,h>5,i<7", &s, err, sizeof err) == 0);
    REQUIRE_I64(s->nreqs, 9);
    enum labelsel_op want[] = {LABELSEL_EQ, LABELSEL_EQ, LABELSEL_NE, LABELSEL_IN, LABELSEL_NOTIN,
                               LABELSEL_EXISTS, LABELSEL_NOT_EXISTS, LABELSEL_GT, LABELSEL_LT};
    const char *keys[] = {"a", "b", "c", "d", "e", "f", "g", "h", "i"};
    for (int i = 0; i < 9; i++) {
        CHECK_I64(s->reqs[i].op, want[i]);
        CHECK_STR(s->reqs[i].key, keys[i]);
    }
    CHECK_I64(s->reqs[3].nvalues, 2);
    CHECK_STR(s->reqs[3].values[0], "x");
    CHECK_STR(s->reqs[3].values[1], "y");
    CHECK_I64(s->reqs[5].nvalues, 0);
    CHECK_I64(s->reqs[7].num, 5);
    CHECK_I64(s->reqs[8].num, 7);
    CHECK(!s->nothing);
    labelsel_free(s);
}

TEST(selector_whitespace_and_format) {
    char b[256];
    CHECK_STR(fmt("  a = b ,  c  in  ( y , x ) , ! d ", b, sizeof b), "a=b,c in (x,y),!d");
    CHECK_STR(fmt("z=1,a=2", b, sizeof b), "a=2,z=1"); /* sorted by key */
    CHECK_STR(fmt("a==b", b, sizeof b), "a=b");
    CHECK_STR(fmt("x notin (b,a,b)", b, sizeof b), "x notin (a,b)"); /* a set */
    CHECK_STR(fmt("k>10,k<20", b, sizeof b), "k>10,k<20");
    CHECK_STR(fmt("example.com/app-name_x.y=v1.0-b_c", b, sizeof b), "example.com/app-name_x.y=v1.0-b_c");
    CHECK_STR(fmt("\tfoo\n", b, sizeof b), "foo");
    CHECK_STR(fmt("", b, sizeof b), "");
    /* snprintf semantics */
    struct labelsel *s;
    char err[64], small[5];
    REQUIRE(labelsel_parse("abc=def", &s, err, sizeof err) == 0);
    CHECK_I64(labelsel_format(s, small, sizeof small), 7);
    CHECK_STR(small, "abc=");
    labelsel_free(s);
}

TEST(selector_empty_values_and_keywords) {
    char b[256];
    CHECK_STR(fmt("a=", b, sizeof b), "a=");
    CHECK_STR(fmt("a=,b", b, sizeof b), "a=,b");
    CHECK_STR(fmt("a in ()", b, sizeof b), "a in ()");
    CHECK_STR(fmt("a in (,x)", b, sizeof b), "a in (,x)");
    CHECK_STR(fmt("a in (x,)", b, sizeof b), "a in (,x)");
    CHECK_STR(fmt("a in (x,,y)", b, sizeof b), "a in (,x,y)");
    /* "in"/"notin" are identifiers where a key or value is expected */
    CHECK_STR(fmt("in in (in,notin)", b, sizeof b), "in in (in,notin)");
    CHECK_STR(fmt("notin=in", b, sizeof b), "notin=in");
    CHECK_I64(lmatch("a=", "{\"a\":\"\"}"), 1);
    CHECK_I64(lmatch("a=", "{}"), 0);
    CHECK_I64(lmatch("a in (,x)", "{\"a\":\"\"}"), 1);
}

TEST(selector_match_semantics) {
    const char *l = "{\"app\":\"web\",\"tier\":\"front\",\"n\":\"10\",\"bad\":\"x1\"}";
    CHECK_I64(lmatch("app=web", l), 1);
    CHECK_I64(lmatch("app==web", l), 1);
    CHECK_I64(lmatch("app=db", l), 0);
    CHECK_I64(lmatch("app!=db", l), 1);
    CHECK_I64(lmatch("app!=web", l), 0);
    CHECK_I64(lmatch("missing!=x", l), 1);   /* != matches an absent key */
    CHECK_I64(lmatch("missing=x", l), 0);
    CHECK_I64(lmatch("app in (db,web)", l), 1);
    CHECK_I64(lmatch("app in (db)", l), 0);
    CHECK_I64(lmatch("missing in (a)", l), 0);
    CHECK_I64(lmatch("app notin (db)", l), 1);
    CHECK_I64(lmatch("app notin (web)", l), 0);
    CHECK_I64(lmatch("missing notin (a)", l), 1); /* notin matches an absent key */
    CHECK_I64(lmatch("app", l), 1);
    CHECK_I64(lmatch("missing", l), 0);
    CHECK_I64(lmatch("!missing", l), 1);
    CHECK_I64(lmatch("!app", l), 0);
    CHECK_I64(lmatch("n>9", l), 1);
    CHECK_I64(lmatch("n>10", l), 0);
    CHECK_I64(lmatch("n<11", l), 1);
    CHECK_I64(lmatch("n<10", l), 0);
    CHECK_I64(lmatch("n>-5", l), -1);  /* "-5" is not a valid label value */
    CHECK_I64(lmatch("bad>0", l), 0);   /* a non-integer label never compares */
    CHECK_I64(lmatch("missing<100", l), 0);
    CHECK_I64(lmatch("app=web,tier=front", l), 1);
    CHECK_I64(lmatch("app=web,tier=back", l), 0);
    CHECK_I64(lmatch("", l), 1);
    /* absent label map */
    CHECK_I64(lmatch("", NULL), 1);
    CHECK_I64(lmatch("a", NULL), 0);
    CHECK_I64(lmatch("!a", NULL), 1);
    CHECK_I64(lmatch("a!=b", NULL), 1);
    CHECK_I64(lmatch("a notin (b)", NULL), 1);
    CHECK_I64(lmatch("a=b", NULL), 0);
    CHECK_I64(lmatch("a in (b)", "{\"a\":5}"), 0); /* non-string label: absent */
    CHECK(!labelsel_match(NULL, NULL));
}

TEST(selector_syntax_errors_name_the_token) {
    LERR("a=b,", -EINVAL, "found '', expected: identifier after ','");
    LERR(",a", -EINVAL, "found ',', expected: !, identifier, or 'end of string'");
    LERR("a b", -EINVAL, "unable to parse requirement: found 'b', expected: in, notin, =, ==, !=, gt, lt");
    LERR("a=b c", -EINVAL, "found 'c', expected: ',' or 'end of string'");
    LERR("a in b", -EINVAL, "unable to parse requirement: found 'b', expected: '('");
    LERR("a in (b", -EINVAL, "found '', expected: ',' or ')'");
    LERR("a in (b c)", -EINVAL, "found 'c', expected: ',' or ')'");
    LERR("a in (=)", -EINVAL, "found '=', expected: ',', ')' or identifier");
    LERR("a in (b,=)", -EINVAL, "found '=', expected: ',', or identifier");
    LERR("a in", -EINVAL, "found '', expected: '('");
    LERR("a=(", -EINVAL, "found '(', expected: identifier");
    LERR("!", -EINVAL, "found '', expected: identifier");
    LERR("!a=b", -EINVAL, "found '=', expected: ',' or 'end of string'");
    LERR("a,,b", -EINVAL, "found ',', expected: identifier after ','");
    LERR("=a", -EINVAL, "found '=', expected: !, identifier");
    LERR("a!b", -EINVAL, "found '!', expected: in, notin");
}

TEST(selector_validation_errors) {
    LERR("-a=b", -EINVAL, "unable to parse requirement: invalid label key \"-a\": name part must consist of");
    LERR("a@b", -EINVAL, "invalid label key \"a@b\"");
    LERR("Example.com/a=b", -EINVAL, "prefix part a lowercase RFC 1123 subdomain");
    LERR("/a=b", -EINVAL, "prefix part must be non-empty");
    LERR("a/=b", -EINVAL, "name part must be non-empty");
    LERR("a/b/c=d", -EINVAL, "a qualified name must consist of");
    LERR("a=b@", -EINVAL, "invalid label value: \"b@\": at key: \"a\": a valid label must be an empty string");
    LERR("a in (x,-y)", -EINVAL, "invalid label value: \"-y\"");
    LERR("a>x", -EINVAL, "for 'Gt', 'Lt' operators, the value must be an integer");
    LERR("a>", -EINVAL, "for 'Gt', 'Lt' operators, the value must be an integer");
    LERR("a<99999999999999999999", -EINVAL, "must be an integer");
    char key[80], sel[200];
    memset(key, 'k', 64);
    key[64] = 0;
    snprintf(sel, sizeof sel, "%s=v", key);
    LERR(sel, -EINVAL, "name part must be no more than 63 characters");
    snprintf(sel, sizeof sel, "k=%s", key);
    LERR(sel, -EINVAL, "must be no more than 63 characters");
    key[63] = 0;
    snprintf(sel, sizeof sel, "%s=%s", key, key);
    CHECK_I64(lmatch(sel, "{}"), 0); /* 63 is fine for both */
}

TEST(selector_limits) {
    char *big = malloc(SELECTOR_MAX_LEN + 2);
    REQUIRE(big);
    memset(big, 'a', SELECTOR_MAX_LEN + 1);
    big[SELECTOR_MAX_LEN + 1] = 0;
    LERR(big, -E2BIG, "longer than 4096");
    /* 101 requirements */
    size_t o = 0;
    for (int i = 0; i <= SELECTOR_MAX_REQS; i++) o += (size_t)snprintf(big + o, 64, "%sk%d", i ? "," : "", i);
    LERR(big, -E2BIG, "more than 100 requirements");
    o = 0;
    for (int i = 0; i < SELECTOR_MAX_REQS; i++) o += (size_t)snprintf(big + o, 64, "%sk%d", i ? "," : "", i);
    CHECK_I64(lmatch(big, "{}"), 0);
    /* 101 values */
    o = (size_t)snprintf(big, 64, "k in (");
    for (int i = 0; i <= SELECTOR_MAX_VALUES; i++) o += (size_t)snprintf(big + o, 64, "%sv%d", i ? "," : "", i);
    snprintf(big + o, 4, ")");
    LERR(big, -E2BIG, "more than 100 values");
    free(big);
}

static int omatch(const char *sel, const char *labels, int *rc_out) {
    struct labelsel *s;
    char err[256];
    json_t *o = sel ? js(sel) : NULL;
    int rc = labelsel_from_object(o, &s, err, sizeof err);
    json_decref(o);
    if (rc_out) *rc_out = rc;
    if (rc) return -1;
    json_t *l = js(labels);
    int m = labelsel_match(s, l);
    json_decref(l);
    labelsel_free(s);
    return m;
}

TEST(selector_label_selector_objects) {
    const char *l = "{\"app\":\"web\",\"env\":\"prod\"}";
    CHECK_I64(omatch("{\"matchLabels\":{\"app\":\"web\"}}", l, NULL), 1);
    CHECK_I64(omatch("{\"matchLabels\":{\"app\":\"db\"}}", l, NULL), 0);
    CHECK_I64(omatch("{\"matchExpressions\":[{\"key\":\"env\",\"operator\":\"In\",\"values\":[\"dev\",\"prod\"]}]}", l, NULL), 1);
    CHECK_I64(omatch("{\"matchExpressions\":[{\"key\":\"env\",\"operator\":\"NotIn\",\"values\":[\"prod\"]}]}", l, NULL), 0);
    CHECK_I64(omatch("{\"matchExpressions\":[{\"key\":\"zone\",\"operator\":\"NotIn\",\"values\":[\"a\"]}]}", l, NULL), 1);
    CHECK_I64(omatch("{\"matchExpressions\":[{\"key\":\"app\",\"operator\":\"Exists\"}]}", l, NULL), 1);
    CHECK_I64(omatch("{\"matchExpressions\":[{\"key\":\"app\",\"operator\":\"DoesNotExist\"}]}", l, NULL), 0);
    CHECK_I64(omatch("{\"matchLabels\":{\"app\":\"web\"},\"matchExpressions\":[{\"key\":\"env\",\"operator\":\"In\",\"values\":[\"dev\"]}]}", l, NULL), 0);
    CHECK_I64(omatch("{}", l, NULL), 1);         /* empty: everything */
    CHECK_I64(omatch("{}", "{}", NULL), 1);
    CHECK_I64(omatch("null", l, NULL), 0);       /* null: nothing */
    CHECK_I64(omatch(NULL, "{}", NULL), 0);
    struct labelsel *s;
    char err[256] = "", b[128];
    json_t *o = js("{\"matchExpressions\":[{\"key\":\"b\",\"operator\":\"In\",\"values\":[\"2\",\"1\"]}],\"matchLabels\":{\"a\":\"x\"}}");
    REQUIRE(labelsel_from_object(o, &s, err, sizeof err) == 0);
    labelsel_format(s, b, sizeof b);
    CHECK_STR(b, "a=x,b in (1,2)");
    labelsel_free(s);
    json_decref(o);
}

static void oerr_at(const char *sel, const char *want, int line) {
    struct labelsel *s;
    char err[256] = "";
    json_t *o = js(sel);
    int rc = labelsel_from_object(o, &s, err, sizeof err);
    json_decref(o);
    if (rc != -EINVAL) test_fail(__FILE__, line, "%s: rc %d", sel, rc);
    if (!strstr(err, want)) test_fail(__FILE__, line, "%s: \"%s\" lacks \"%s\"", sel, err, want);
    if (rc == 0) labelsel_free(s);
}
#define oerr(sel, want) oerr_at(sel, want, __LINE__)

TEST(selector_label_selector_object_errors) {
    oerr("{\"matchExpressions\":[{\"key\":\"a\",\"operator\":\"Gt\",\"values\":[\"1\"]}]}",
         "\"Gt\" is not a valid label selector operator");
    oerr("{\"matchExpressions\":[{\"key\":\"a\",\"operator\":\"In\",\"values\":[]}]}",
         "for 'in', 'notin' operators, values set can't be empty");
    oerr("{\"matchExpressions\":[{\"key\":\"a\",\"operator\":\"In\"}]}", "values set can't be empty");
    oerr("{\"matchExpressions\":[{\"key\":\"a\",\"operator\":\"Exists\",\"values\":[\"x\"]}]}",
         "values set must be empty for exists and does not exist");
    oerr("{\"matchLabels\":{\"a b\":\"x\"}}", "invalid label key \"a b\"");
    oerr("{\"matchLabels\":{\"a\":\"x y\"}}", "invalid label value: \"x y\"");
    oerr("{\"matchLabels\":{\"a\":1}}", "label values must be strings");
    oerr("{\"matchLabels\":[]}", "matchLabels must be an object");
    oerr("{\"matchExpressions\":{}}", "matchExpressions must be an array");
    oerr("{\"matchExpressions\":[{\"operator\":\"In\"}]}", "key and operator must be strings");
    oerr("[]", "label selector must be an object");
}

TEST(selector_from_set) {
    struct labelsel *s;
    char err[256];
    json_t *set = js("{\"disk\":\"ssd\",\"zone\":\"a\"}");
    REQUIRE(labelsel_from_set(set, &s, err, sizeof err) == 0);
    json_t *yes = js("{\"disk\":\"ssd\",\"zone\":\"a\",\"x\":\"y\"}"), *no = js("{\"disk\":\"ssd\"}");
    CHECK(labelsel_match(s, yes));
    CHECK(!labelsel_match(s, no));
    labelsel_free(s);
    REQUIRE(labelsel_from_set(NULL, &s, err, sizeof err) == 0);
    CHECK(labelsel_match(s, no));
    labelsel_free(s);
    json_decref(set);
    json_decref(yes);
    json_decref(no);
}

/* ---- field selectors ---- */

static int fmatch(const char *kind, const char *sel, const char *obj) {
    struct fieldsel *s;
    char err[256];
    if (fieldsel_parse(kind, sel, &s, err, sizeof err) != 0) return -1;
    json_t *o = js(obj);
    int m = fieldsel_match(s, o);
    json_decref(o);
    fieldsel_free(s);
    return m;
}

static void ferr(const char *kind, const char *sel, int rc_want, const char *want, int line) {
    struct fieldsel *s = (struct fieldsel *)1;
    char err[512] = "";
    int rc = fieldsel_parse(kind, sel, &s, err, sizeof err);
    if (rc != rc_want) test_fail(__FILE__, line, "fieldsel_parse(\"%s\") = %d (%s)", sel, rc, err);
    if (s) test_fail(__FILE__, line, "out not NULL on error");
    if (!strstr(err, want)) test_fail(__FILE__, line, "\"%s\": \"%s\" lacks \"%s\"", sel, err, want);
    if (rc == 0) fieldsel_free(s);
}
#define FERR(k, sel, rc, want) ferr(k, sel, rc, want, __LINE__)

static const char *POD = "{\"metadata\":{\"name\":\"p1\",\"namespace\":\"default\"},"
                         "\"spec\":{\"nodeName\":\"n1\",\"restartPolicy\":\"Always\",\"schedulerName\":\"default-scheduler\","
                         "\"serviceAccountName\":\"sa\"},"
                         "\"status\":{\"phase\":\"Running\",\"podIP\":\"10.0.0.1\",\"nominatedNodeName\":\"n2\"}}";
static const char *UNBOUND = "{\"metadata\":{\"name\":\"p2\",\"namespace\":\"default\"},\"spec\":{}}";

TEST(fieldsel_pods) {
    CHECK_I64(fmatch("Pod", "spec.nodeName=n1", POD), 1);
    CHECK_I64(fmatch("pods", "spec.nodeName==n1", POD), 1);
    CHECK_I64(fmatch("pods", "spec.nodeName!=n1", POD), 0);
    CHECK_I64(fmatch("pods", "spec.nodeName=n2", POD), 0);
    CHECK_I64(fmatch("pods", "spec.nodeName=", UNBOUND), 1); /* unbound pods */
    CHECK_I64(fmatch("pods", "spec.nodeName=", POD), 0);
    CHECK_I64(fmatch("pods", "spec.nodeName!=", POD), 1);
    CHECK_I64(fmatch("pods", "metadata.name=p1,metadata.namespace=default", POD), 1);
    CHECK_I64(fmatch("pods", "metadata.name=p1,metadata.namespace=other", POD), 0);
    CHECK_I64(fmatch("pods", "status.phase=Running,spec.restartPolicy=Always", POD), 1);
    CHECK_I64(fmatch("pods", "spec.schedulerName=default-scheduler,spec.serviceAccountName=sa", POD), 1);
    CHECK_I64(fmatch("pods", "status.podIP=10.0.0.1,status.nominatedNodeName=n2", POD), 1);
    CHECK_I64(fmatch("pods", "status.phase!=Succeeded,status.phase!=Failed", POD), 1);
    CHECK_I64(fmatch("pods", "spec.hostNetwork=false", POD), 1); /* absent bool reads "false" */
    CHECK_I64(fmatch("pods", "spec.hostNetwork=true", "{\"spec\":{\"hostNetwork\":true}}"), 1);
    CHECK_I64(fmatch("pods", "", POD), 1);
    CHECK_I64(fmatch("pods", ",,", POD), 1);
    CHECK_I64(fmatch("pods", "metadata.name=p1", "[]"), 0); /* not an object: fields read "" */
}

TEST(fieldsel_events_nodes_other_kinds) {
    const char *ev = "{\"metadata\":{\"name\":\"e1\",\"namespace\":\"default\"},"
                     "\"involvedObject\":{\"kind\":\"Pod\",\"name\":\"p1\",\"namespace\":\"default\",\"uid\":\"u-1\","
                     "\"apiVersion\":\"v1\",\"resourceVersion\":\"42\",\"fieldPath\":\"spec.containers{c}\"},"
                     "\"reason\":\"Scheduled\",\"type\":\"Normal\",\"source\":{\"component\":\"peloton\"},"
                     "\"reportingComponent\":\"peloton-rc\"}";
    CHECK_I64(fmatch("Event", "involvedObject.name=p1,involvedObject.namespace=default,involvedObject.uid=u-1", ev), 1);
    CHECK_I64(fmatch("events", "involvedObject.kind=Pod,involvedObject.apiVersion=v1", ev), 1);
    CHECK_I64(fmatch("events", "involvedObject.resourceVersion=42,involvedObject.fieldPath=spec.containers{c}", ev), 1);
    CHECK_I64(fmatch("events", "reason=Scheduled,type=Normal", ev), 1);
    CHECK_I64(fmatch("events", "source=peloton", ev), 1); /* source.component */
    CHECK_I64(fmatch("events", "reportingComponent=peloton-rc", ev), 1);
    CHECK_I64(fmatch("events", "involvedObject.name=p2", ev), 0);
    CHECK_I64(fmatch("Node", "spec.unschedulable=false", "{\"spec\":{}}"), 1);
    CHECK_I64(fmatch("nodes", "spec.unschedulable=true", "{\"spec\":{\"unschedulable\":true}}"), 1);
    CHECK_I64(fmatch("nodes", "spec.unschedulable!=true", "{\"spec\":{\"unschedulable\":true}}"), 0);
    CHECK_I64(fmatch("ResourcePool", "metadata.name=a", "{\"metadata\":{\"name\":\"a\"}}"), 1);
    CHECK_I64(fmatch(NULL, "metadata.namespace=", "{\"metadata\":{\"name\":\"a\"}}"), 1);
    CHECK(fieldsel_supported("Pod", "spec.nodeName"));
    CHECK(fieldsel_supported("namespaces", "status.phase"));
    CHECK(fieldsel_supported("Secret", "type"));
    CHECK(!fieldsel_supported("Node", "spec.nodeName"));
    CHECK(!fieldsel_supported("Pod", "reason"));
    CHECK(fieldsel_supported("Job", "metadata.name"));
}

TEST(fieldsel_errors) {
    FERR("pods", "spec.foo=x", -EINVAL, "field label not supported: spec.foo");
    FERR("nodes", "spec.nodeName=x", -EINVAL, "field label not supported: spec.nodeName");
    FERR("ResourcePool", "spec.nodeName=x", -EINVAL, "field label not supported: spec.nodeName");
    FERR("events", "metadata.name=a,foo=b", -EINVAL, "field label not supported: foo");
    FERR("pods", "spec.nodeName", -EINVAL, "invalid selector: 'spec.nodeName'; can't understand 'spec.nodeName'");
    FERR("pods", "a=b,c", -EINVAL, "can't understand 'c'");
    FERR("pods", "metadata.name=a=b", -EINVAL, "unescaped character in value: '='");
    FERR("pods", "metadata.name=a\\x", -EINVAL, "invalid escape sequence: \\x");
    FERR("pods", "metadata.name=a\\", -EINVAL, "invalid escape sequence");
    FERR("pods", " metadata.name=a", -EINVAL, "field label not supported:  metadata.name");
    char *big = malloc(SELECTOR_MAX_LEN + 2);
    REQUIRE(big);
    memset(big, 'a', SELECTOR_MAX_LEN + 1);
    big[SELECTOR_MAX_LEN + 1] = 0;
    FERR("pods", big, -E2BIG, "longer than 4096");
    size_t o = 0;
    for (int i = 0; i <= SELECTOR_MAX_REQS; i++) o += (size_t)snprintf(big + o, 64, "%smetadata.name=x", i ? "," : "");
    FERR("pods", big, -E2BIG, "more than 100 terms");
    free(big);
}

TEST(fieldsel_escapes_and_exact) {
    struct fieldsel *s;
    char err[256];
    REQUIRE(fieldsel_parse("pods", "metadata.name=a\\,b\\=c\\\\d,spec.nodeName==n1", &s, err, sizeof err) == 0);
    REQUIRE_I64(s->nterms, 2);
    CHECK_STR(s->terms[0].value, "a,b=c\\d");
    CHECK_STR(fieldsel_exact(s, "spec.nodeName"), "n1");
    CHECK_STR(fieldsel_exact(s, "metadata.name"), "a,b=c\\d");
    CHECK(fieldsel_exact(s, "status.phase") == NULL);
    json_t *o = js("{\"metadata\":{\"name\":\"a,b=c\\\\d\"},\"spec\":{\"nodeName\":\"n1\"}}");
    CHECK(fieldsel_match(s, o));
    json_decref(o);
    fieldsel_free(s);
    REQUIRE(fieldsel_parse("pods", "spec.nodeName!=n1", &s, err, sizeof err) == 0);
    CHECK(fieldsel_exact(s, "spec.nodeName") == NULL); /* != is not an exact match */
    fieldsel_free(s);
    CHECK(fieldsel_match(NULL, NULL));
}

/* Property: the same requirements written as selector text and as a
 * LabelSelector object select the same label maps, and both agree with a
 * direct evaluation of the requirements. */
TEST(selector_property_text_vs_object_vs_oracle) {
    static const char *const keys[] = {"a", "b", "example.com/c"}, *const vals[] = {"x", "y", "z"};
    static const char *const ops[] = {"In", "NotIn", "Exists", "DoesNotExist"};
    uint64_t seed = 42;
    for (int iter = 0; iter < 400; iter++) {
        int nreq = (int)test_range(&seed, 0, 3), op[3], key[3], set[3];
        char text[512] = "";
        size_t o = 0;
        json_t *exprs = json_array();
        for (int r = 0; r < nreq; r++) {
            op[r] = (int)test_range(&seed, 0, 3);
            key[r] = (int)test_range(&seed, 0, 2);
            set[r] = (int)test_range(&seed, 1, 7); /* bit mask over vals */
            json_t *e = json_pack("{s:s,s:s}", "key", keys[key[r]], "operator", ops[op[r]]);
            o += (size_t)snprintf(text + o, sizeof text - o, "%s%s%s", r ? "," : "", op[r] == 3 ? "!" : "", keys[key[r]]);
            if (op[r] < 2) {
                json_t *vs = json_array();
                o += (size_t)snprintf(text + o, sizeof text - o, " %s (", op[r] ? "notin" : "in");
                for (int v = 0, first = 1; v < 3; v++) {
                    if (!(set[r] & (1 << v))) continue;
                    json_array_append_new(vs, json_string(vals[v]));
                    o += (size_t)snprintf(text + o, sizeof text - o, "%s%s", first ? "" : ",", vals[v]);
                    first = 0;
                }
                o += (size_t)snprintf(text + o, sizeof text - o, ")");
                json_object_set_new(e, "values", vs);
            }
            json_array_append_new(exprs, e);
        }
        json_t *obj = json_pack("{s:o}", "matchExpressions", exprs);
        struct labelsel *st, *so;
        char err[256];
        REQUIRE(labelsel_parse(text, &st, err, sizeof err) == 0);
        if (labelsel_from_object(obj, &so, err, sizeof err) != 0) {
            test_fail(__FILE__, __LINE__, "object for \"%s\": %s", text, err);
            labelsel_free(st);
            json_decref(obj);
            return;
        }
        for (int l = 0; l < 8; l++) {
            json_t *labels = json_object();
            int have[3];
            for (int k = 0; k < 3; k++) {
                have[k] = (int)test_range(&seed, -1, 2); /* -1: absent, else index into vals */
                if (have[k] >= 0) json_object_set_new(labels, keys[k], json_string(vals[have[k]]));
            }
            bool want = true;
            for (int r = 0; r < nreq; r++) {
                int h = have[key[r]];
                bool in = h >= 0 && (set[r] & (1 << h));
                bool ok = op[r] == 0 ? in : op[r] == 1 ? !in : op[r] == 2 ? h >= 0 : h < 0;
                want = want && ok;
            }
            if (labelsel_match(st, labels) != want || labelsel_match(so, labels) != want) {
                char *ls = json_dumps(labels, JSON_COMPACT);
                test_fail(__FILE__, __LINE__, "\"%s\" on %s: text %d object %d want %d", text, ls,
                          labelsel_match(st, labels), labelsel_match(so, labels), want);
                free(ls);
            }
            json_decref(labels);
        }
        labelsel_free(st);
        labelsel_free(so);
        json_decref(obj);
    }
}
