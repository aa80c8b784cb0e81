/* The CLI's output: proto3 JSON as indented JSON (-j), as YAML, and tables. */
#include <ctype.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "cli.h"

/* A double in the fewest digits that read back as the same double (jansson
 * always writes 17: 0.1 would print as 0.10000000000000001). */
static void real_text(double v, char *buf, size_t len) {
    for (int p = 15; p <= 17; p++) {
        snprintf(buf, len, "%.*g", p, v);
        if (strtod(buf, NULL) == v) return;
    }
}

static void put_scalar(FILE *f, const json_t *v) {
    char b[40];
    if (json_is_real(v)) {
        real_text(json_real_value(v), b, sizeof b);
        fputs(b, f);
        return;
    }
    char *s = json_dumps(v, JSON_ENCODE_ANY);
    if (s) fputs(s, f);
    free(s);
}

static void put_json(FILE *f, const json_t *v, int indent) {
    bool obj = json_is_object(v);
    if (!obj && !json_is_array(v)) {
        put_scalar(f, v);
        return;
    }
    size_t n = obj ? json_object_size(v) : json_array_size(v);
    if (!n) {
        fputs(obj ? "{}" : "[]", f);
        return;
    }
    fputs(obj ? "{\n" : "[\n", f);
    if (obj) {
        size_t i = 0;
        for (void *it = json_object_iter((json_t *)v); it; it = json_object_iter_next((json_t *)v, it), i++) {
            json_t *k = json_string(json_object_iter_key(it));
            fprintf(f, "%*s", indent + 2, "");
            put_scalar(f, k);
            json_decref(k);
            fputs(": ", f);
            put_json(f, json_object_iter_value(it), indent + 2);
            fputs(i + 1 < n ? ",\n" : "\n", f);
        }
    } else {
        for (size_t i = 0; i < n; i++) {
            fprintf(f, "%*s", indent + 2, "");
            put_json(f, json_array_get(v, i), indent + 2);
            fputs(i + 1 < n ? ",\n" : "\n", f);
        }
    }
    fprintf(f, "%*s%c", indent, "", obj ? '}' : ']');
}

void cli_print_json(struct cli *c, const json_t *v) {
    put_json(c->out, v, 0);
    fputc('\n', c->out);
}

/* A string that reads back as the same string in YAML without quotes. */
static bool plain_ok(const char *s) {
    static const char *const words[] = {"true", "false", "yes", "no", "on", "off", "null", "~", "y", "n"};
    if (!*s || strchr("-?:,[]{}#&*!|>'\"%@` ", *s)) return false;
    for (size_t i = 0; i < sizeof words / sizeof *words; i++)
        if (!strcasecmp(s, words[i])) return false;
    char *end;
    (void)strtod(s, &end);
    if (!*end) return false; /* would read as a number */
    for (const char *p = s; *p; p++)
        if (!(isalnum((unsigned char)*p) || strchr("._/-+=()@", *p) || (*p == ' ' && p[1] && p[1] != '#') ||
              (*p == ':' && p[1] && p[1] != ' ')))
            return false;
    return s[strlen(s) - 1] != ' ';
}

static void yaml_scalar(FILE *f, const json_t *v) {
    if (json_is_string(v) && plain_ok(json_string_value(v))) {
        fputs(json_string_value(v), f);
        return;
    }
    put_scalar(f, v); /* JSON's scalars are YAML's flow scalars */
}

static bool is_empty_coll(const json_t *v) {
    return (json_is_object(v) && json_object_size(v) == 0) || (json_is_array(v) && json_array_size(v) == 0);
}

void cli_print_yaml(FILE *f, const json_t *v, int indent) {
    if (json_is_object(v)) {
        const char *k;
        json_t *m;
        void *it = json_object_iter((json_t *)v);
        for (; it; it = json_object_iter_next((json_t *)v, it)) {
            k = json_object_iter_key(it);
            m = json_object_iter_value(it);
            fprintf(f, "%*s", indent, "");
            json_t *key = json_string(k);
            yaml_scalar(f, key);
            json_decref(key);
            if ((json_is_object(m) || json_is_array(m)) && !is_empty_coll(m)) {
                fputs(":\n", f);
                cli_print_yaml(f, m, indent + (json_is_array(m) ? 0 : 2));
            } else {
                fputs(": ", f);
                if (is_empty_coll(m)) fputs(json_is_array(m) ? "[]" : "{}", f);
                else yaml_scalar(f, m);
                fputc('\n', f);
            }
        }
    } else if (json_is_array(v)) {
        size_t i;
        json_t *e;
        json_array_foreach(v, i, e) {
            fprintf(f, "%*s- ", indent, "");
            if (json_is_object(e) && json_object_size(e)) {
                /* the first member on the dash's line, the rest under it */
                char *s = NULL;
                size_t n = 0;
                FILE *mem = open_memstream(&s, &n);
                if (!mem) return;
                cli_print_yaml(mem, e, indent + 2);
                fclose(mem);
                fputs(s + indent + 2, f);
                free(s);
            } else if (json_is_array(e) && json_array_size(e)) {
                fputc('\n', f);
                cli_print_yaml(f, e, indent + 2);
            } else {
                if (is_empty_coll(e)) fputs(json_is_array(e) ? "[]" : "{}", f);
                else yaml_scalar(f, e);
                fputc('\n', f);
            }
        }
    } else {
        fprintf(f, "%*s", indent, "");
        yaml_scalar(f, v);
        fputc('\n', f);
    }
}

const char *cli_str(const json_t *v, const char *path, char *buf, size_t len) {
    char part[128];
    buf[0] = 0;
    while (v && *path) {
        const char *dot = strchr(path, '.');
        size_t n = dot ? (size_t)(dot - path) : strlen(path);
        if (n >= sizeof part) return buf;
        memcpy(part, path, n);
        part[n] = 0;
        v = json_object_get(v, part);
        path += n + (dot != NULL);
    }
    if (!v) return buf;
    if (json_is_string(v)) snprintf(buf, len, "%s", json_string_value(v));
    else if (json_is_integer(v)) snprintf(buf, len, "%lld", (long long)json_integer_value(v));
    else if (json_is_real(v)) real_text(json_real_value(v), buf, len);
    else if (json_is_boolean(v)) snprintf(buf, len, "%s", json_is_true(v) ? "true" : "false");
    else {
        char *s = json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY);
        if (s) snprintf(buf, len, "%s", s);
        free(s);
    }
    return buf;
}

struct cli_table {
    int ncols;
    size_t nrows, cap;
    char **cells; /* nrows * ncols, row 0 the heads */
};

struct cli_table *cli_table_new(int ncols, const char *const *heads) {
    struct cli_table *t = calloc(1, sizeof *t);
    if (!t) return NULL;
    t->ncols = ncols;
    cli_table_add(t, heads);
    return t;
}

void cli_table_add(struct cli_table *t, const char *const *cells) {
    if (!t) return;
    if (t->nrows == t->cap) {
        size_t cap = t->cap ? t->cap * 2 : 16;
        char **c = realloc(t->cells, cap * (size_t)t->ncols * sizeof *c);
        if (!c) return;
        t->cells = c;
        t->cap = cap;
    }
    for (int i = 0; i < t->ncols; i++) {
        char *s = strdup(cells[i] ? cells[i] : "");
        if (!s) s = calloc(1, 1);
        /* one line per row: newlines and tabs in messages become spaces */
        for (char *p = s; p && *p; p++)
            if (*p == '\n' || *p == '\r' || *p == '\t') *p = ' ';
        t->cells[t->nrows * (size_t)t->ncols + (size_t)i] = s;
    }
    t->nrows++;
}

void cli_table_print(struct cli_table *t, FILE *f) {
    if (!t) return;
    size_t w[32] = {0};
    int nc = t->ncols < 32 ? t->ncols : 32;
    for (size_t r = 0; r < t->nrows; r++)
        for (int i = 0; i < nc; i++) {
            const char *s = t->cells[r * (size_t)t->ncols + (size_t)i];
            size_t n = s ? strlen(s) : 0;
            if (n > w[i]) w[i] = n;
        }
    for (size_t r = 0; r < t->nrows; r++) {
        int last = nc - 1; /* empty cells at the end leave no trailing blanks */
        while (last > 0) {
            const char *s = t->cells[r * (size_t)t->ncols + (size_t)last];
            if (s && s[0]) break;
            last--;
        }
        for (int i = 0; i <= last; i++) {
            const char *s = t->cells[r * (size_t)t->ncols + (size_t)i];
            if (i == last) fprintf(f, "%s\n", s ? s : "");
            else fprintf(f, "%-*s  ", (int)w[i], s ? s : "");
        }
    }
}

void cli_table_free(struct cli_table *t) {
    if (!t) return;
    for (size_t i = 0; i < t->nrows * (size_t)t->ncols; i++) free(t->cells[i]);
    free(t->cells);
    free(t);
}
