/* Internals shared by kclient.c, kwatch.c and informer.c; not for users.
 *
 * Two curl multi handles share the loop: one for requests (at most
 * KC_MAX_CONNS connections, the rest queue inside curl) and one for watches
 * (a connection each on HTTP/1.1, so long streams never starve requests).
 * User callbacks never run inside a curl callback: watch bytes are buffered
 * by the write callback and dispatched after curl_multi_socket_action
 * returns, so handlers may start requests and stop watches freely.
 *
 * Re-entrancy: every entry from the loop brackets its work with
 * kc__enter/kc__leave; frees asked for while depth > 0 (kclient_free, a
 * watch stopped from its own handler) happen in kc__leave at depth 0. */
#ifndef PELOTON_KCLIENT_INT_H
#define PELOTON_KCLIENT_INT_H
#include <curl/curl.h>

#include "kclient.h"

#define KC_ERRBODY_MAX (64u << 10) /* body kept from a failed watch, for its Status */
#define KC_MAX_H2_STREAMS 16       /* concurrent streams per HTTP/2 connection */
#define KC_EASY_IDLE 64            /* request handles kept for reuse (curl_easy_init zeroes kilobytes) */
#define KC_HDR_LISTS 8             /* distinct header lists kept (one per content type) */

enum kc_xfer_kind { KC_XFER_REQ, KC_XFER_WATCH };
/* The first member of every transfer; CURLOPT_PRIVATE points at it. */
struct kc_xfer {
    enum kc_xfer_kind kind;
    void (*on_done)(struct kc_xfer *x, CURLcode rc); /* after curl_multi_remove_handle */
};

struct kc_multi;
struct kc_req;
struct kc_feed;
struct kh1;

struct kclient {
    uv_loop_t *loop;
    struct kc_config cfg;
    struct kc_multi *reqm, *watchm;
    struct kh1 *h1;                   /* requests to a plain http:// server, without libcurl (kh1.c); NULL: libcurl */
    struct kc_req *reqs;              /* in flight, doubly linked */
    size_t inflight;
    size_t active;                    /* of those, handed to curl (at most KC_MAX_CONNS) */
    struct kc_req *waitq, *waitq_tail; /* the others, in order */
    struct kc_watch *watches;         /* live, doubly linked */
    struct kc_watch *dead;            /* stopped, freed at depth 0 */
    struct kc_feed *feeds;            /* informers' shared list+watch feeds, doubly linked */
    CURL *sync;                       /* kclient_request_sync's handle */
    CURL *idle[KC_EASY_IDLE];         /* finished request handles, reset and reused */
    int nidle;
    struct kc_hdrs {                  /* request header lists, built once per content type */
        char *ctype;                  /* NULL: no body */
        struct curl_slist *list;
    } hdrs[KC_HDR_LISTS];
    int nhdrs;
    int depth;
    bool freeing, free_pending;
};

void kc__enter(struct kclient *c);
void kc__leave(struct kclient *c);

/* An easy handle with the URL, TLS, auth and common headers set (a reused
 * one when the client has one idle); *hdrs receives a header list the caller
 * frees after the transfer, or NULL when the list is the client's (shared,
 * freed with the client). watch: no overall timeout, TCP keep-alive. */
CURL *kc__easy_new(struct kclient *c, const char *method, const char *path, const char *content_type,
                   bool has_body, bool watch, struct curl_slist **hdrs, char *errbuf);
/* Apply the common options to an existing handle (kc__easy_new uses it). */
int kc__easy_setup(struct kclient *c, CURL *e, const char *method, const char *path, const char *content_type,
                   bool has_body, bool watch, struct curl_slist **hdrs, char *errbuf);
int kc__multi_add(struct kc_multi *m, CURL *e);
void kc__multi_remove(struct kc_multi *m, CURL *e);

/* The message and reason of a non-2xx reply (borrowed from body, or static). */
void kc__status_error(long status, json_t *body, const char **msg, const char **reason);

/* An async request whose completion can be abandoned (the callback is then
 * never called): what informers use for their lists. */
struct kc_req *kc__request(struct kclient *c, const char *method, const char *path, const json_t *body,
                           const char *content_type, kc_done_fn done, void *ud, int *rc);
void kc__request_abandon(struct kc_req *r);

/* kh1.c: requests to a plain http:// server over HTTP/1.1 on the loop. NULL
 * when the server is not http:// with a numeric address or localhost. */
struct kh1 *kh1_new(struct kclient *c, const char *server);
/* Closes every connection; no request is answered (kclient cancels them). */
void kh1_free(struct kh1 *h);
/* Sends r on an idle connection or a new one (at most KC_MAX_CONNS); body is
 * NUL-terminated or NULL. 0, -ENOMEM, -EBUSY (no connection free) or -EIO.
 * Its end comes through kc__h1_done, never from inside kh1_start. */
int kh1_start(struct kh1 *h, struct kc_req *r, const char *method, const char *path, const char *ctype,
              const char *body, bool has_body);
/* kclient.c: r's answer (status > 0, body owned by the callee, "" when
 * empty) or its failure (status 0, error). */
void kc__h1_done(struct kc_req *r, long status, char *body, size_t len, const char *error);

/* kwatch.c */
/* Inside on_event of a plain (not filtered) watch: the text of the event's
 * object as the server sent it, when the line is exactly
 * {"type":"<type>","object":{...}} (what kube-apiserver and the shim
 * write: no member before or after the object, whose braces close at the
 * line's end), else NULL. */
const char *kc__watch_object_text(const struct kc_watch *w, const char *type, size_t *len);
/* Whether the server has answered the watch's request (its status line
 * came): stopping a watch whose connection is still being made is left
 * until then (kc_informer_relist). */
bool kc__watch_answered(const struct kc_watch *w);
/* The same over one line (n bytes) whose decoded type is type: the object's
 * bytes within it (*len of them), or NULL when the line is not that shape. */
const char *kc__event_object_text(const char *line, size_t n, const char *type, size_t *len);
void kc__watch_flush_all(struct kclient *c);  /* dispatch buffered lines */
void kc__watch_destroy_all(struct kclient *c); /* kclient_free: stop every watch, no callbacks */
void kc__watch_reap(struct kclient *c);        /* free the dead list */

/* informer.c */
void kc__informer_destroy_all(struct kclient *c);

#endif
