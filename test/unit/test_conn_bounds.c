/* The HTTP layer's connection counts (src/http/conn_bounds.c), shared by
 * the plain and the TLS port. */
#include <errno.h>

#include "http_int.h"
#include "test.h"

TEST(conn_bounds_per_client_and_in_all) {
    struct http_conn_bounds b = {.max = 5, .max_per_client = 2};
    CHECK_I64(http_conn_bounds_admit(&b, "10.0.0.1"), 0);
    CHECK_I64(http_conn_bounds_admit(&b, "10.0.0.1"), 0);
    CHECK_I64(http_conn_bounds_admit(&b, "10.0.0.1"), HTTP_REFUSED_CLIENT);
    CHECK_I64(http_conn_bounds_admit(&b, "10.0.0.2"), 0);
    /* no address (a Unix-domain socket's peer): counted in all only */
    CHECK_I64(http_conn_bounds_admit(&b, ""), 0);
    CHECK_I64(http_conn_bounds_admit(&b, ""), 0);
    CHECK_I64(http_conn_bounds_admit(&b, "10.0.0.3"), HTTP_REFUSED_ALL);
    CHECK_I64(b.open, 5);
    CHECK_I64(b.refused, 2);
    /* a freed place is taken again, by its client or another */
    http_conn_bounds_release(&b, "10.0.0.1");
    CHECK_I64(http_conn_bounds_admit(&b, "10.0.0.1"), 0);
    http_conn_bounds_release(&b, "");
    CHECK_I64(http_conn_bounds_admit(&b, "10.0.0.3"), 0);
    http_conn_bounds_release(&b, "10.0.0.1");
    http_conn_bounds_release(&b, "10.0.0.1");
    http_conn_bounds_release(&b, "10.0.0.2");
    http_conn_bounds_release(&b, "10.0.0.3");
    http_conn_bounds_release(&b, "");
    CHECK_I64(b.open, 0);
    CHECK_I64(strmap_count(&b.per_client), 0); /* a client with none left is forgotten */
    http_conn_bounds_free(&b);
}

/* A client whose admission found no room in the map (out of memory) was
 * counted in all only: its release leaves the map as it is. Before, the
 * plain port stored 0 - 1 for it, and the address was refused for good. */
TEST(conn_bounds_release_of_an_uncounted_client) {
    struct http_conn_bounds b = {.max = 4, .max_per_client = 2};
    b.open = 1; /* admitted, the map without room for it */
    http_conn_bounds_release(&b, "10.0.0.9");
    CHECK_I64(b.open, 0);
    CHECK(!strmap_get(&b.per_client, "10.0.0.9"));
    CHECK_I64(http_conn_bounds_admit(&b, "10.0.0.9"), 0);
    CHECK_I64(http_conn_bounds_admit(&b, "10.0.0.9"), 0);
    http_conn_bounds_free(&b);
}
