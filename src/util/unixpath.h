/* Unix-domain socket addresses as the daemons take them: "unix:///path" or
 * "unix:/path" (kclient server URLs, pelotond --redis), and the longest path
 * a socket address holds. */
#ifndef PELOTON_UTIL_UNIXPATH_H
#define PELOTON_UTIL_UNIXPATH_H

#include <string.h>
#include <sys/un.h>

/* The longest socket path: sun_path less its terminating NUL (107 on Linux). */
#define UNIX_SOCKET_PATH_MAX (sizeof(((struct sockaddr_un *)0)->sun_path) - 1)

/* What follows "unix://" or "unix:" in s (the path, which the caller checks
 * is absolute); NULL when s has neither prefix. */
static inline const char *unix_url_rest(const char *s) {
    if (strncmp(s, "unix:", 5)) return NULL;
    return strncmp(s + 5, "//", 2) ? s + 5 : s + 7;
}

#endif
