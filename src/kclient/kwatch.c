/* Watches: one long GET each on the watch multi. The curl write callback
 * only buffers bytes (and enforces KC_LINE_MAX); complete lines are parsed
 * and handed to on_event after curl_multi_socket_action returns
 * (kc__watch_flush_all), so handlers may call anything, kc_watch_stop on
 * their own watch included (the free waits until the loop callback unwinds). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kclient_int.h"
#include "jparse.h"

enum kc_watch_state { KW_LIVE, KW_ENDING, KW_DEAD };

struct kc_watch {
    struct kc_xfer x;
    struct kclient *c;
    CURL *easy;
    struct curl_slist *hdrs;
    kc_event_fn on_event;
    kc_line_fn on_line; /* raw watches: lines undecoded */
    jparse_keep_fn keep; /* filtered watches: the members of the object to build */
    void *keep_ud;
    kc_watch_end_fn on_end;
    void *ud;
    char *buf;         /* bytes received, lines from start */
    size_t start, len, cap;
    size_t scan;       /* no newline in [start, scan) */
    size_t linelen;    /* bytes since the last newline seen by the write callback */
    long status;       /* the HTTP status, once the body starts */
    bool pending;      /* unread complete lines in buf */
    bool overflow;     /* a line exceeded KC_LINE_MAX */
    enum kc_watch_state state;
    const char *line;  /* the event line on_event is called for, and its length (NULL outside on_event) */
    size_t line_n;
    struct kc_watch *prev, *next;
    char errbuf[CURL_ERROR_SIZE];
};

static void watch_free(struct kc_watch *w) {
    if (w->easy) curl_easy_cleanup(w->easy);
    curl_slist_free_all(w->hdrs);
    free(w->buf);
    free(w);
}

static void unlink_live(struct kc_watch *w) {
    struct kclient *c = w->c;
    if (w->prev) w->prev->next = w->next;
    else c->watches = w->next;
    if (w->next) w->next->prev = w->prev;
    w->prev = w->next = NULL;
}

/* Off the live list, onto the dead one; freed by kc__watch_reap. */
static void bury(struct kc_watch *w) {
    struct kclient *c = w->c;
    unlink_live(w);
    w->state = KW_DEAD;
    w->next = c->dead;
    c->dead = w;
}

void kc__watch_reap(struct kclient *c) {
    while (c->dead) {
        struct kc_watch *w = c->dead;
        c->dead = w->next;
        watch_free(w);
    }
}

static size_t watch_write(char *p, size_t sz, size_t n, void *ud) {
    struct kc_watch *w = ud;
    size_t k = sz * n;
    if (w->state != KW_LIVE) return 0;
    if (!w->status) {
        curl_easy_getinfo(w->easy, CURLINFO_RESPONSE_CODE, &w->status);
        if (!w->status) w->status = 200;
    }
    if (w->status != 200) { /* keep the start of the body for its Status */
        if (w->len >= KC_ERRBODY_MAX) return k;
        if (k > KC_ERRBODY_MAX - w->len) k = KC_ERRBODY_MAX - w->len;
    } else {
        const char *nl = memrchr(p, '\n', k);
        w->linelen = nl ? (size_t)(p + k - nl - 1) : w->linelen + k;
        if (w->linelen > KC_LINE_MAX) {
            w->overflow = true;
            return 0;
        }
        if (nl) w->pending = true;
    }
    if (w->len + k + 1 > w->cap) {
        size_t nc = w->cap ? w->cap : 16384;
        while (nc < w->len + k + 1) nc *= 2;
        char *nb = realloc(w->buf, nc);
        if (!nb) return 0;
        w->buf = nb;
        w->cap = nc;
    }
    memcpy(w->buf + w->len, p, k);
    w->len += k;
    w->buf[w->len] = 0;
    return sz * n;
}

static bool blank(const char *p, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (p[i] != ' ' && p[i] != '\t' && p[i] != '\r' && p[i] != '\n') return false;
    return true;
}

/* A filtered watch's filter over a whole event line: the members of its
 * object go to the consumer's, with the path from the object. */
static bool event_keep(void *ud, const struct jparse_seg *path, int depth, const char *key, size_t len) {
    struct kc_watch *w = ud;
    if (depth < 1 || !JPARSE_SEG_IS(&path[0], "object")) return true;
    return w->keep(w->keep_ud, path + 1, depth - 1, key, len);
}

/* One line: 0, or -EPROTO when it is not an event. */
static int deliver(struct kc_watch *w, const char *line, size_t n) {
    if (blank(line, n)) return 0;
    if (w->on_line) {
        while (n && line[n - 1] == '\r') n--; /* CRLF-terminated lines come without their CR */
        w->on_line(w->ud, line, n);
        return 0;
    }
    json_t *ev = w->keep ? jparse_filtered(line, n, 0, event_keep, w) : jparse_loadb(line, n, 0, NULL);
    const char *type = json_string_value(json_object_get(ev, "type"));
    json_t *obj = json_object_get(ev, "object");
    if (!type || !json_is_object(obj)) {
        json_decref(ev);
        return -EPROTO;
    }
    w->line = line;
    w->line_n = n;
    w->on_event(w->ud, type, obj);
    w->line = NULL;
    json_decref(ev);
    return 0;
}

const char *kc__watch_object_text(const struct kc_watch *w, const char *type, size_t *len) {
    if (!w || !w->line || w->keep) return NULL;
    return kc__event_object_text(w->line, w->line_n, type, len);
}

static bool ws(char ch) { return ch == ' ' || ch == '\t' || ch == '\r' || ch == '\n'; }

const char *kc__event_object_text(const char *p, size_t n, const char *type, size_t *len) {
    if (!p || !type) return NULL;
    size_t tl = strlen(type);
    while (n && ws(p[n - 1])) n--;
    static const char a[] = "{\"type\":\"", b[] = "\",\"object\":";
    size_t head = sizeof a - 1 + tl + sizeof b - 1;
    if (n < head + 3 || memcmp(p, a, sizeof a - 1) || memcmp(p + sizeof a - 1, type, tl) ||
        memcmp(p + sizeof a - 1 + tl, b, sizeof b - 1) || p[head] != '{' || p[n - 1] != '}')
        return NULL;
    n--; /* the event's closing brace */
    while (n > head && ws(p[n - 1])) n--;
    if (n <= head || p[n - 1] != '}') return NULL;
    /* the object's first brace must close at the end of the span (not before:
     * a member after the object, or "object" named twice) */
    int depth = 0;
    bool in_str = false;
    for (size_t i = head; i < n; i++) {
        char ch = p[i];
        if (in_str) {
            if (ch == '\\') i++;
            else if (ch == '"') in_str = false;
        } else if (ch == '"') {
            in_str = true;
        } else if (ch == '{' || ch == '[') {
            depth++;
        } else if ((ch == '}' || ch == ']') && --depth == 0 && i != n - 1) {
            return NULL;
        }
    }
    if (depth != 0 || in_str) return NULL;
    *len = n - head;
    return p + head;
}

static void end_watch(struct kc_watch *w, long status, const char *error);

/* Hands the complete lines to on_event; stops at a stop or an error. */
static void dispatch(struct kc_watch *w) {
    w->pending = false;
    while (w->state == KW_LIVE && w->len > w->scan && !w->c->free_pending) {
        char *nl = memchr(w->buf + w->scan, '\n', w->len - w->scan);
        if (!nl) {
            w->scan = w->len;
            break;
        }
        size_t s = w->start, n = (size_t)(nl - (w->buf + s));
        w->start = w->scan = (size_t)(nl - w->buf) + 1;
        if (deliver(w, w->buf + s, n)) {
            kc__multi_remove(w->c->watchm, w->easy);
            end_watch(w, 200, "watch: malformed event line");
            return;
        }
    }
    if (w->state == KW_LIVE && w->start) { /* compact */
        memmove(w->buf, w->buf + w->start, w->len - w->start);
        w->len -= w->start;
        w->scan -= w->start;
        w->start = 0;
        if (w->cap > (1u << 20) && w->len < w->cap / 4) { /* give back what a long line took */
            size_t nc = w->len * 2 > 16384 ? w->len * 2 : 16384;
            char *nb = realloc(w->buf, nc);
            if (nb) {
                w->buf = nb;
                w->cap = nc;
            }
        }
    }
}

void kc__watch_flush_all(struct kclient *c) {
    for (;;) {
        struct kc_watch *w = c->watches;
        while (w && !w->pending) w = w->next;
        if (!w) return;
        dispatch(w);
    }
}

static void end_watch(struct kc_watch *w, long status, const char *error) {
    w->state = KW_ENDING;
    if (w->on_end) w->on_end(w->ud, status, error);
    bury(w);
}

static void watch_done(struct kc_xfer *x, CURLcode rc) {
    struct kc_watch *w = (struct kc_watch *)x;
    if (w->state != KW_LIVE) return;
    long status = w->status;
    if (!status) curl_easy_getinfo(w->easy, CURLINFO_RESPONSE_CODE, &status);
    if (status == 200) {
        dispatch(w);
        if (w->state != KW_LIVE) return;
        if (rc == CURLE_OK && w->buf && !blank(w->buf + w->start, w->len - w->start) &&
            deliver(w, w->buf + w->start, w->len - w->start)) {
            end_watch(w, 200, "watch: malformed event line");
            return;
        }
        if (w->state != KW_LIVE) return;
        const char *err = NULL;
        if (rc != CURLE_OK)
            err = w->overflow ? "watch: event line exceeds KC_LINE_MAX" : *w->errbuf ? w->errbuf : curl_easy_strerror(rc);
        end_watch(w, 200, err);
        return;
    }
    if (!status) {
        end_watch(w, 0, *w->errbuf ? w->errbuf : curl_easy_strerror(rc));
        return;
    }
    json_t *body = w->len ? json_loadb(w->buf, w->len, 0, NULL) : NULL;
    const char *msg, *reason;
    kc__status_error(status, body, &msg, &reason);
    end_watch(w, status, msg);
    json_decref(body);
}

static struct kc_watch *watch_start(struct kclient *c, const char *path, const char *query, const char *rv,
                                    kc_event_fn on_event, kc_line_fn on_line, kc_watch_end_fn on_end, void *ud) {
    if (!c || c->freeing || c->free_pending || !path || path[0] != '/' || (!on_event && !on_line)) return NULL;
    size_t rvlen = rv ? strlen(rv) : 0;
    size_t cap = strlen(path) + (query ? strlen(query) : 0) + 3 * rvlen + 80;
    char *full = malloc(cap);
    if (!full) return NULL;
    int n = snprintf(full, cap, "%s%cwatch=1&allowWatchBookmarks=true", path, strchr(path, '?') ? '&' : '?');
    if (rvlen) {
        n += snprintf(full + n, cap - (size_t)n, "&resourceVersion=");
        n += kc_escape(rv, full + n, cap - (size_t)n);
    }
    if (query && *query) snprintf(full + n, cap - (size_t)n, "&%s", query);

    struct kc_watch *w = calloc(1, sizeof *w);
    if (!w) {
        free(full);
        return NULL;
    }
    w->x.kind = KC_XFER_WATCH;
    w->x.on_done = watch_done;
    w->c = c;
    w->on_event = on_event;
    w->on_line = on_line;
    w->on_end = on_end;
    w->ud = ud;
    w->easy = kc__easy_new(c, "GET", full, NULL, false, true, &w->hdrs, w->errbuf);
    free(full);
    if (!w->easy) {
        watch_free(w);
        return NULL;
    }
    curl_easy_setopt(w->easy, CURLOPT_WRITEFUNCTION, watch_write);
    curl_easy_setopt(w->easy, CURLOPT_WRITEDATA, w);
    curl_easy_setopt(w->easy, CURLOPT_PRIVATE, (char *)&w->x);
    if (kc__multi_add(c->watchm, w->easy)) {
        watch_free(w);
        return NULL;
    }
    w->next = c->watches;
    if (c->watches) c->watches->prev = w;
    c->watches = w;
    return w;
}

struct kc_watch *kclient_watch(struct kclient *c, const char *path, const char *query, const char *rv,
                               kc_event_fn on_event, kc_watch_end_fn on_end, void *ud) {
    return watch_start(c, path, query, rv, on_event, NULL, on_end, ud);
}

struct kc_watch *kclient_watch_filtered(struct kclient *c, const char *path, const char *query, const char *rv,
                                        jparse_keep_fn keep, void *keep_ud, kc_event_fn on_event,
                                        kc_watch_end_fn on_end, void *ud) {
    struct kc_watch *w = watch_start(c, path, query, rv, on_event, NULL, on_end, ud);
    if (w) {
        w->keep = keep;
        w->keep_ud = keep_ud;
    }
    return w;
}

struct kc_watch *kclient_watch_raw(struct kclient *c, const char *path, const char *query, const char *rv,
                                   kc_line_fn on_line, kc_watch_end_fn on_end, void *ud) {
    return watch_start(c, path, query, rv, NULL, on_line, on_end, ud);
}

bool kc__watch_answered(const struct kc_watch *w) {
    long code = 0;
    if (!w || w->state != KW_LIVE) return true;
    if (w->status) return true;
    curl_easy_getinfo(w->easy, CURLINFO_RESPONSE_CODE, &code);
    return code != 0;
}

void kc_watch_stop(struct kc_watch *w) {
    if (!w || w->state != KW_LIVE) return; /* inside on_end: freed when it returns */
    struct kclient *c = w->c;
    kc__multi_remove(c->watchm, w->easy);
    bury(w);
    if (c->depth == 0) kc__watch_reap(c);
}

void kc__watch_destroy_all(struct kclient *c) {
    while (c->watches) {
        struct kc_watch *w = c->watches;
        kc__multi_remove(c->watchm, w->easy);
        bury(w);
    }
}
