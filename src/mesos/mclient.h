/* mclient: the framework side of the Mesos v1 scheduler API on a libuv loop:
 * the transport of the host manager's Mesos driver. It keeps one
 * subscription alive (libcurl multi) and carries calls (to an http://
 * master over its own kept-alive, pipelined HTTP/1.1 connections, read by
 * mresp.h; to an https:// one over libcurl):
 *
 * - SUBSCRIBE on a long-lived POST, its chunked body decoded as RecordIO
 *   (records split across chunks or several in one, bounded by max_record;
 *   a malformed length, an oversize record, a record that is not JSON or not
 *   an Event, or a stream cut inside a record ends the stream with a reason);
 * - Mesos-Stream-Id and framework_id on every other call;
 * - a 307 from a master that does not lead is followed (the Location may be
 *   scheme-relative, as Mesos writes it): the subscription goes to the
 *   leader, which is remembered for calls;
 * - a heartbeat watchdog: no event for (missed_heartbeats + 1) heartbeat
 *   intervals drops the stream, and so does a stream that brings no
 *   SUBSCRIBED within subscribe_timeout_ms;
 * - after any loss, resubscription as the same framework (the id SUBSCRIBED
 *   gave, or the one configured) with backoff from backoff_min_ms doubling
 *   to backoff_max_ms, reset by a SUBSCRIBED;
 * - an ERROR event ends the subscription for good (the framework was removed
 *   or another scheduler took it over): the client does not come back on
 *   its own.
 *
 * Callbacks run on the loop thread, never inside a libcurl callback, so they
 * may make calls and may call mclient_stop. A call's answer over the
 * client's own connections is given from that connection's read callback
 * (its state settled first), one answer at a time, in the order sent. Ownership: the caller owns the
 * client; mclient_stop closes everything (loop thread), the loop then runs
 * dry, and mclient_free releases it. Calls still in flight at stop are
 * answered with -ECANCELED. */
#ifndef PELOTON_MESOS_MCLIENT_H
#define PELOTON_MESOS_MCLIENT_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>
#include <uv.h>

#include "mesos_json.h"

#define MCLIENT_URL_MAX 256
#define MCLIENT_REPLY_MAX (64u << 10) /* body kept from a call's reply */
#define MCLIENT_MAX_REDIRECTS 5       /* in a row, before backing off */

struct mclient;

/* A decoded event; root is the whole Event (borrowed for the call). */
typedef void (*mclient_event_fn)(void *ud, const struct mesos_event *ev, const json_t *root);
typedef void (*mclient_subscribed_fn)(void *ud, const char *framework_id);
/* The subscription is gone (why: a sentence); resubscribing follows unless
 * final (an ERROR event, or stopped). */
typedef void (*mclient_lost_fn)(void *ud, const char *why, bool final);
/* A call's answer: the HTTP status (202 for an accepted call; 307 when the
 * master no longer leads: the client then drops the stream and subscribes to
 * the leader, and the call is the caller's to make again) with the reply's
 * body, or a negative errno (-ECANCELED: stopped, -EIO: transport) with body
 * NULL. */
typedef void (*mclient_done_fn)(void *ud, int status, const char *body);

struct mclient_config {
    const char *master;               /* "http://host:port" */
    struct mesos_framework_info fi;   /* fi.id: resume as this framework */
    unsigned backoff_min_ms, backoff_max_ms; /* 0: 500, 15000 */
    unsigned missed_heartbeats;       /* 0: 5 */
    unsigned connect_timeout_ms, call_timeout_ms; /* 0: 10000, 30000 */
    unsigned subscribe_timeout_ms;    /* 0: 30000 */
    size_t max_record;                /* 0: RECORDIO_DEFAULT_MAX */
    unsigned max_connections;         /* https: to the master, the stream's included; 0: 16 (more calls
                                       * wait in line); http: calls use at most 4 of their own */
    mclient_subscribed_fn on_subscribed;
    mclient_event_fn on_event;        /* every event but SUBSCRIBED and HEARTBEAT */
    mclient_lost_fn on_lost;
    void *ud;
};

struct mclient_stats {
    uint64_t subscribes, subscribed, redirects, heartbeat_timeouts, stream_errors, events, calls, call_errors;
};

/* Copies what it needs from cfg and subscribes at once. 0, or a negative
 * errno with err set (a bad master URL, out of memory). */
int mclient_start(uv_loop_t *loop, const struct mclient_config *cfg, struct mclient **out, char *err, size_t errlen);
/* Sends call (stolen) with the framework id set; done (may be NULL) is
 * called once. Returns 0, or -ENOTCONN (no subscription: done is not called). */
int mclient_call(struct mclient *c, json_t *call, mclient_done_fn done, void *ud);
/* The same for a call written as text: members (len bytes, borrowed) are
 * the Call's members after framework_id, which the client writes first
 * ("\"type\":\"ACKNOWLEDGE\",\"acknowledge\":{...}"): the bytes mclient_call
 * sends for the same call built as a tree, without building it (the driver's
 * ACKNOWLEDGEs, two a launch). 0, -ENOTCONN (done not called) or -ENOMEM. */
int mclient_call_members(struct mclient *c, const char *members, size_t len, mclient_done_fn done, void *ud);
bool mclient_subscribed(const struct mclient *c);
const char *mclient_framework_id(const struct mclient *c); /* NULL before the first SUBSCRIBED */
const char *mclient_leader(const struct mclient *c);       /* the master URL in use */
void mclient_get_stats(const struct mclient *c, struct mclient_stats *out);
void mclient_stop(struct mclient *c);
void mclient_free(struct mclient *c);

/* The base URL ("http://host:port") a 307's Location names, resolved
 * against base: "//h:p/path", "http://h:p/path" or "/path". 0, or -1 when
 * it is none of those or too long. Pure; for tests. */
int mclient_redirect_base(const char *base, const char *location, char *out, size_t outlen);

#endif
