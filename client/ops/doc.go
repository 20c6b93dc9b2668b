// Package ops is the operator's API over the backoff schema: what a
// console, a dashboard or a script does to jobs and queues that workers
// run. backoffctl and the web UI (package webui) are built on it.
//
//	o := ops.New(pool) // the *pgxpool.Pool, *pgx.Conn or pgx.Tx a client.Client takes
//
// # Reads
//
//   - Jobs: List (filters as plain fields, keyset pages with an opaque
//     cursor, the bounded error search of ErrorScanLimit), Details,
//     Preview (a job with its payload cut to a size), CountJobs.
//   - Queues: Queues (configuration and controls), QueueNames (a bounded
//     page of names), QueueEvents (who paused and resumed), Policies.
//   - The dead letters: DeadLetters (exact counts per queue and reason, and
//     groups by error signature over a bounded sample), DeadLetterGroups.
//   - Schedules: UpcomingFires (the fires ahead of several schedules),
//     ScheduleJobs (a schedule's last jobs; List takes ListParams.Schedule
//     too). The schedules themselves are client.Client.Schedules, beside
//     their writes.
//   - Dashboards: Overview (per queue, without a scan of every job),
//     Stats (per queue, by status, with the window's retries and dead
//     letters), Activity and ActivitySince (outcomes per minute), Workers
//     (who holds running jobs, and whose leases have ended), Health (who
//     holds back vacuum).
//
// Every read is a documented SQL function (docs/sql/, docs/adr/0072), so
// psql, Python and TypeScript make the same reads; this package calls them
// and, behind a router, merges the shards' answers.
//
// # Actions
//
// Cancel and Replay one job; Bulk (with CountBulk for its confirmation)
// cancels or replays every job a filter matches, in bounded batches;
// ReplayDeadLetters replays a queue's dead letters in one statement and
// says why it left any; PauseQueue, ResumeQueue and SwitchQueue stop and
// start claims of a queue, recorded with the database role; Prune deletes
// finished jobs past their retention. A replay gives a job a fresh attempt
// budget; its token keeps counting, so a worker still running an old
// attempt cannot settle the new one (docs/adr/0020).
//
// # Errors, time and the worker's API
//
// Errors are client's: errors.Is(err, client.ErrJobNotFound),
// client.ErrInvalidArgument, client.ErrInvalidTransition (replaying a
// pending job), client.ErrPermissionDenied (most calls are for
// backoff_admin), and the *pgconn.PgError stays reachable with errors.As.
// Every error names the operation: `cancel job 7: pgbackoff: job not
// found`. Jobs are client's too (a JobDetail embeds a client.Job, which is
// a jobtype.Job).
//
// By default the database's clock decides; WithClock passes its time as
// p_now instead, as client.WithClock does, for tests and simulations.
//
// Enqueueing, claiming and settling jobs, the Worker, Reap and WaitIdle are
// package client's. ops.New does not check the schema version; build a
// client.Client on the same DB (client.New checks it once) where a clear
// "run `backoffctl migrate up`" matters.
package ops
