/* Shared by the HTTP layer's integration tests: an echo server on its own
 * libuv loop in a thread (the test thread is the client), a libcurl request
 * helper and raw-socket helpers. The echo server's paths pick behaviours
 * (/stream, /hold, /defer, /empty?status=N, /big, ...): see http_fixture.c. */
#ifndef PELOTON_TEST_HTTP_FIXTURE_H
#define PELOTON_TEST_HTTP_FIXTURE_H

#include <curl/curl.h>
#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <sys/socket.h>
#include <time.h>
#include <uv.h>

#include "server.h"

struct srv {
    int stream_closes;
    struct http_stream *held; /* /hold's stream, left open */
    uv_loop_t loop;
    uv_async_t stop;
    uv_async_t ask; /* srv_stats: read the counts on the loop thread */
    pthread_mutex_t ask_mu;
    pthread_cond_t ask_cv;
    bool asked;
    struct http_server_stats answer;
    struct http_server *http;
    pthread_t thread;
    int port;
    int requests;
};

struct buf {
    char *p;
    size_t n;
};

int srv_start_cfg(struct srv *s, struct http_server_config cfg, char *err_out, size_t errlen);
int srv_start_timeouts(struct srv *s, size_t max_body, unsigned idle_ms, unsigned head_ms);
int srv_start(struct srv *s, size_t max_body);
void srv_stop(struct srv *s);
/* The server's counts (http_server_stats), read on its loop thread while the
 * test thread waits: no connection of the test's own is counted in them. */
void srv_stats(struct srv *s, struct http_server_stats *out);
size_t on_data(char *d, size_t sz, size_t nm, void *ud);
long req(CURL *c, const char *method, const char *url, const char *body, long body_len, struct curl_slist *hdrs, struct buf *out);
int connect_timed(int fd, const struct sockaddr *a, socklen_t len);
int raw_connect(int port);
bool raw_send(int fd, const char *p, size_t n);
bool raw_sends(int fd, const char *p);
void raw_read(int fd, struct buf *b, const char *needle, int want, bool *closed);
bool raw_closed(int fd);
double ms_since(const struct timespec *t0);

/* A self-signed certificate and key in a new directory under /tmp, for a
 * TLS server (tls_cert_ensure); tls_files_remove deletes all three. */
struct tls_files {
    char dir[64], crt[128], key[128];
};
int tls_files_make(struct tls_files *t);
void tls_files_remove(const struct tls_files *t);

#endif
