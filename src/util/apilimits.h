/* Sizes the two ends of the Kubernetes API must agree on: what the server
 * stores and sends, and what a client (kclient: the controllers,
 * kubelet-sim, the extender) is willing to buffer. A paged list is cut by
 * bytes as well as by count, so that any page the server sends fits the
 * client: the largest page is API_LIST_PAGE_BYTES of objects, or one object
 * when a single one is larger, plus the list's envelope. */
#ifndef PELOTON_UTIL_APILIMITS_H
#define PELOTON_UTIL_APILIMITS_H

#include "objlimits.h" /* OBJ_MAX_BYTES: one stored object */

#define API_LIST_PAGE_BYTES (32u << 20)  /* a page with a limit is cut before its objects pass this */
#define API_BODY_MAX (64u << 20)         /* the largest response body a client buffers */

_Static_assert(API_LIST_PAGE_BYTES + OBJ_MAX_BYTES + (4u << 20) <= API_BODY_MAX,
               "a full list page (objects, one more object, the envelope) must fit a client's body bound");

#endif
