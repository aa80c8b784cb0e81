/* Open connections counted in all and per client address, for both ports,
 * and by socket fd for the TLS port (http_int.h). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "http_int.h"

int http_conn_bounds_admit(struct http_conn_bounds *b, const char *peer) {
    if (b->open >= b->max) {
        b->refused++;
        return HTTP_REFUSED_ALL;
    }
    uintptr_t mine = peer[0] ? (uintptr_t)strmap_get(&b->per_client, peer) : 0;
    if (peer[0] && mine >= b->max_per_client) {
        b->refused++;
        return HTTP_REFUSED_CLIENT;
    }
    b->open++;
    /* no room to count the client: it stays bounded in all */
    if (peer[0]) strmap_put(&b->per_client, peer, (void *)(mine + 1), NULL);
    return 0;
}

void http_conn_bounds_release(struct http_conn_bounds *b, const char *peer) {
    b->open--;
    if (!peer[0]) return;
    uintptr_t mine = (uintptr_t)strmap_get(&b->per_client, peer);
    if (mine <= 1) strmap_del(&b->per_client, peer); /* 0: its admission found no room to count it */
    else strmap_put(&b->per_client, peer, (void *)(mine - 1), NULL); /* replaces: no allocation */
}

void http_conn_bounds_free(struct http_conn_bounds *b) { strmap_free(&b->per_client); }

int http_fd_conns_open(struct http_fd_conns *f, int fd, const char *peer) {
    if (fd < 0) return -EBADF;
    if ((size_t)fd >= f->nslots) {
        size_t n = f->nslots ? f->nslots : 64;
        while (n <= (size_t)fd) n *= 2;
        struct http_fd_slot *t = realloc(f->slots, n * sizeof *t);
        if (!t) return -ENOMEM;
        memset(t + f->nslots, 0, (n - f->nslots) * sizeof *t);
        f->slots = t;
        f->nslots = n;
    }
    struct http_fd_slot *sl = &f->slots[fd];
    if (sl->open) http_fd_conns_close(f, fd);
    int rc = http_conn_bounds_admit(&f->bounds, peer);
    if (rc) return rc;
    sl->open = true;
    snprintf(sl->peer, sizeof sl->peer, "%s", peer);
    return 0;
}

void http_fd_conns_close(struct http_fd_conns *f, int fd) {
    if (fd < 0 || (size_t)fd >= f->nslots || !f->slots[fd].open) return;
    f->slots[fd].open = false;
    http_conn_bounds_release(&f->bounds, f->slots[fd].peer);
}

void http_fd_conns_free(struct http_fd_conns *f) {
    http_conn_bounds_free(&f->bounds);
    free(f->slots);
    f->slots = NULL;
    f->nslots = 0;
}
