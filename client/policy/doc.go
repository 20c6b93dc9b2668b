// Package policy is the pure Go mirror of pgbackoff's backoff math: the same
// policies as the backoff.policies table and the same delays as the SQL
// functions backoff.retry_delay, backoff.compute_delay and backoff.schedule,
// to the microsecond, with no database.
//
// A Policy names a strategy (none, fixed, linear, exponential, polynomial,
// schedule), a cap (Max) and a jitter (none, full, equal, proportional).
// For failed attempt n (1-based) the delay is computed in float64
// microseconds in exactly the order PostgreSQL computes it in float8:
// strategy, then the cap, then jitter with u in [0, 1) taken from the md5 of
// "SEED:ATTEMPT", then rounded down to a whole microsecond. The shared test
// vectors (testdata/vectors.json) and a randomized cross-check against
// PostgreSQL prove the two agree; docs/adr/0004 explains how.
//
// Delay never panics, never returns a negative duration and never exceeds
// Max, whatever the policy holds: on a policy that Validate rejects it
// computes with the nearest valid values (PostgreSQL would refuse such a
// policy). It costs well under a microsecond and allocates nothing, so it
// fits in-process retry loops.
package policy
