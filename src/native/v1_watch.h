/* v1alpha peloton.api.v1alpha.watch.svc.WatchService over the API server's
 * watches (kclient): Watch streams changed pods (PodSummary) and stateless
 * Jobs (JobSummary) matching its filters, from the moment it starts, each
 * event one WatchResponse carrying the watch id and the object's
 * resourceVersion as revision; the first message carries the id alone.
 * Cancel ends a watch's stream with CANCELLED. A client that does not read
 * pauses the API-server watches (resumed from the last resourceVersion
 * when it reads again), so nothing piles up in pelotond; if the API server
 * no longer has those events (410) the stream ends with DEADLINE_EXCEEDED,
 * as Peloton's did for a client that fell behind. docs/native-api.md.
 *
 * Ownership: the service borrows kc for its life; v1_watch_free ends the
 * watches still open (the server's stop has normally ended them). */
#ifndef PELOTON_NATIVE_V1_WATCH_H
#define PELOTON_NATIVE_V1_WATCH_H

#include "kclient.h"
#include "native.h"

#define V1_WATCH_MAX 1000 /* open watches; more get RESOURCE_EXHAUSTED */

struct v1_watch;
struct v1_watch *v1_watch_new(struct kclient *kc);
void v1_watch_free(struct v1_watch *s);
int v1_watch_register(struct v1_watch *s, struct native_registry *r);
/* Watches open now. */
unsigned v1_watch_count(const struct v1_watch *s);

#endif
