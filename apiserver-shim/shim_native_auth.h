/* RBAC for Peloton's native API (docs/security.md): native_authz_check is a
 * native_config.authorize (src/native/native.h). Each method maps to the
 * Kubernetes verbs and resources it touches (native_authz_map), checked for
 * the caller's token user at the cluster scope. One per native server, used
 * on its thread only; the caller frees it after the server. */
#ifndef PELOTON_SHIM_NATIVE_AUTH_H
#define PELOTON_SHIM_NATIVE_AUTH_H

#include <stdbool.h>
#include <stddef.h>

struct native_authz;
/* token_file: the API server's (NULL: no tokens); allow_anonymous: a call
 * without a token is system:anonymous in system:masters; redis_addr as
 * pelotond's --redis. NULL with err on a bad file or address. */
struct native_authz *native_authz_new(const char *token_file, bool allow_anonymous, const char *redis_addr,
                                      char *err, size_t errlen);
void native_authz_free(struct native_authz *z);
/* 0 (OK), 16 (UNAUTHENTICATED) or 7 (PERMISSION_DENIED) with msg. */
/* Without a bearer token, a verified client certificate (peer_cn, its O
 * entries '\n'-joined in peer_orgs) is the user, as on the API's TLS port. */
int native_authz_check(void *ud, const char *authz, const char *peer_cn, const char *peer_orgs,
                       const char *procedure, char *msg, size_t msglen);
/* The i-th (0, 1) check of procedure ("svc/Method" or "svc::Method"): its
 * verb with *group and *resource, or NULL (no more; none for an unknown method). */
const char *native_authz_map(const char *procedure, int i, const char **group, const char **resource);

#endif
