/* A singleton role's lease in Redis (docs/architecture.md, "Roles and processes"):
 * the key peloton:<role>:leader holds the holder's id for lease_ms; the
 * holder renews it every third of that, by a script that extends it only
 * while it still holds the holder's id. A contender takes it by a script
 * that sets it when it is free or still holds the contender's own id (a
 * key that outlived the contender's last term: nobody took the lease
 * since), and in the same call bumps peloton:<role>:epoch, the fencing
 * token of the term.
 *
 * A renewal that fails ends the term. A holder paused or blocked past its
 * lease finds out at its next renewal: if the key still holds its id,
 * nobody took the lease meanwhile (an acquisition replaces the value) and
 * the term goes on; otherwise the term ends then. Whatever the loop ran
 * between the end of such a pause and that renewal is not covered: that
 * window is what the epoch (a fencing token checked where writes land) is
 * for. A clean stop deletes the key, so a successor does not wait the
 * lease out. The first attempt is made within ctl_lease_start.
 *
 * A holder acts only until four fifths of a lease after its last renewal
 * was sent (the lease in Redis lasts at least a whole one from then): a
 * holder that cannot renew ends its term by its own clock before anyone
 * else can take the lease. The term's writes to Redis go through the fence
 * script (ctl_lease_defer): Redis runs them only while the role's epoch key
 * still holds the term's epoch; a refused one is logged (`<role>: write
 * refused, stale epoch`, once a term), counted, and ends the term.
 *
 * on_change(ud, true, epoch) when a term begins, (ud, false, epoch) when it
 * ends (lost, or the lease stopped while held). Loop thread only. */
#ifndef PELOTON_CTL_LEASE_H
#define PELOTON_CTL_LEASE_H

#include <hiredis/hiredis.h>
#include <stdbool.h>
#include <uv.h>

struct ctl_db;
struct ctl_lease;
struct metrics;
typedef void (*ctl_lease_fn)(void *ud, bool leader, long long epoch);

#define CTL_LEASE_DEFAULT_MS 10000

/* role: "jobmgr", "hostmgr", "mesos"…; id: this process (unique among the
 * contenders). NULL when out of memory. */
struct ctl_lease *ctl_lease_start(uv_loop_t *loop, struct ctl_db *db, const char *role, const char *id,
                                  unsigned lease_ms, ctl_lease_fn on_change, void *ud);
/* The same in two steps: made (no attempt yet), then begun (the first
 * attempt now): the caller can keep the lease before a term begins. */
struct ctl_lease *ctl_lease_new(uv_loop_t *loop, struct ctl_db *db, const char *role, const char *id,
                                unsigned lease_ms, ctl_lease_fn on_change, void *ud);
void ctl_lease_begin(struct ctl_lease *l);
/* Counts refused writes in reg (peloton_lease_writes_refused_total{role}); call on the loop's thread. */
void ctl_lease_metrics(struct ctl_lease *l, struct metrics *reg);
/* Releases the lease if held (on_change(false) is called first) and frees
 * it once its timer has closed (run the loop). NULL-safe. */
void ctl_lease_stop(struct ctl_lease *l);
/* A term is held, no write of it was refused, and its time by the local clock has not run out. */
bool ctl_lease_held(const struct ctl_lease *l);
long long ctl_lease_epoch(const struct ctl_lease *l);

/* A write of the current term (a hiredis format of at most ~1,000 bytes;
 * its arguments as ctl_redis_defer's), deferred; Redis runs it through the
 * fence script only while the epoch key holds the term's epoch. l NULL: an
 * unfenced write on db (a role run without a lease). 0 when queued; -1 when
 * not sent: no term, a write of it already refused, or its time run out
 * (the term then ends, from the loop). */
int ctl_lease_defer(struct ctl_lease *l, struct ctl_db *db, const char *fmt, ...);
/* The same, synchronous: its reply, NULL when not sent, refused or failed. */
redisReply *ctl_lease_redis(struct ctl_lease *l, struct ctl_db *db, const char *fmt, ...);

#endif
