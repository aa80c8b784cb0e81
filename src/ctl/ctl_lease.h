/* A singleton role's lease in Redis (docs/architecture.md, "Roles and processes"):
 * the key peloton:<role>:leader holds the holder's id for lease_ms (SET NX
 * PX); the holder renews it every third of that, by a script that extends
 * it only while it still holds the holder's id; every acquisition bumps
 * peloton:<role>:epoch, the fencing token of the term.
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
 * on_change(ud, true, epoch) when a term begins, (ud, false, epoch) when it
 * ends (lost, or the lease stopped while held). Loop thread only. */
#ifndef PELOTON_CTL_LEASE_H
#define PELOTON_CTL_LEASE_H

#include <stdbool.h>
#include <uv.h>

struct ctl_db;
struct ctl_lease;
typedef void (*ctl_lease_fn)(void *ud, bool leader, long long epoch);

#define CTL_LEASE_DEFAULT_MS 10000

/* role: "jobmgr", "hostmgr", "mesos"…; id: this process (unique among the
 * contenders). NULL when out of memory. */
struct ctl_lease *ctl_lease_start(uv_loop_t *loop, struct ctl_db *db, const char *role, const char *id,
                                  unsigned lease_ms, ctl_lease_fn on_change, void *ud);
/* Releases the lease if held (on_change(false) is called first) and frees
 * it once its timer has closed (run the loop). NULL-safe. */
void ctl_lease_stop(struct ctl_lease *l);
bool ctl_lease_held(const struct ctl_lease *l);

#endif
