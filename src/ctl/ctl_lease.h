/* A singleton role's lease in Redis (docs/architecture.md, "Roles and processes"):
 * the key peloton:<role>:leader holds the holder's id for lease_ms (SET NX
 * PX); the holder renews it every third of that, by a script that extends
 * it only while it still holds the holder's id; every acquisition bumps
 * peloton:<role>:epoch, the fencing token of the term.
 *
 * The holder stops acting before the lease can have run out for anyone
 * else: a renewal that fails, or a check that finds the last renewal more
 * than two thirds of the lease ago (the process was paused, or its loop
 * blocked), ends the term at once, before the loop serves anything else
 * (libuv runs due timers before I/O). A clean stop deletes the key, so a
 * successor does not wait the lease out.
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
 * contenders). The first attempt is made at once. NULL when out of memory. */
struct ctl_lease *ctl_lease_start(uv_loop_t *loop, struct ctl_db *db, const char *role, const char *id,
                                  unsigned lease_ms, ctl_lease_fn on_change, void *ud);
/* Releases the lease if held (on_change(false) is called first) and frees
 * it once its timer has closed (run the loop). NULL-safe. */
void ctl_lease_stop(struct ctl_lease *l);
bool ctl_lease_held(const struct ctl_lease *l);

#endif
