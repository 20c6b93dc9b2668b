// Package lifecycle holds the tests of the job lifecycle functions in SQL
// (sql/functions: enqueue, claim, acquire, complete, complete_many, fail,
// reap, heartbeat, snooze, cancel, replay, prune, stats) against a real
// PostgreSQL: their normal paths and SQLSTATEs, interleavings on two
// connections, a concurrency test with many workers and reapers, and the
// plans of the hot statements at a million rows. Time is always passed as
// p_now; nothing sleeps waiting for a backoff.
package lifecycle
