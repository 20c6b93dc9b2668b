// Package backoffmath holds the PostgreSQL tests of pgbackoff's backoff
// math: the shared vectors (client/policy/testdata/vectors.json) checked in
// SQL, a randomized cross-check of the SQL against the Go mirror
// (client/policy), and the SQL-only functions (compute_delay, schedule,
// retry_delay, calculate_step_next_retry_time). It has no non-test code.
package backoffmath
