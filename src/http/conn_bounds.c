/* Open connections counted in all and per client address, for both ports
 * (http_int.h). */
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
