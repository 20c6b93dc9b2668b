// Package client is the Go side of pgbackoff: a typed API over the SQL
// functions of the backoff schema and a Worker that runs handlers for a
// queue; package retry (client/retry) retries in process with the same
// backoff math (retry.Do).
//
// Everything that decides when a job runs again, or whether it runs at all,
// happens in PostgreSQL (docs/design.md). This package calls those functions,
// turns their errors into Go errors, and gets the hard parts of a worker
// loop right: leases, heartbeats, panics, shutdown.
//
// # Install the schema
//
//	backoffctl migrate up --database-url "$DATABASE_URL"
//
// New checks the schema version once and refuses an older one with
// ErrSchemaTooOld ("run `backoffctl migrate up`").
//
// # A worker in a dozen lines
//
//	pool, err := pgxpool.New(ctx, os.Getenv("DATABASE_URL"))
//	if err != nil { log.Fatal(err) }
//	w, err := client.NewWorker(pool, client.WorkerConfig{
//		Queue:       "emails",
//		Concurrency: 10,
//		Handler: func(ctx context.Context, job *client.Job) error {
//			var msg Email
//			if err := job.UnmarshalPayload(&msg); err != nil {
//				return client.Permanent(err) // dead-letter now
//			}
//			return send(ctx, msg) // nil completes; an error retries with backoff
//		},
//	})
//	if err != nil { log.Fatal(err) }
//	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
//	defer stop()
//	log.Fatal(w.Run(ctx)) // returns nil after a graceful drain
//
// Run claims jobs in batches into free handler slots (a finished handler
// frees a slot and triggers the next claim), runs up to Concurrency
// handlers, and reaps expired leases of crashed workers (safe from many
// workers). A queue found empty is woken at once by LISTEN/NOTIFY: the
// worker registers that it waits for the queue, and only then does
// backoff.enqueue notify, so a busy system takes no notify lock
// (docs/adr/0027). Jobs that come due later (retries, run_at ahead,
// snoozes) are found by the worker's one look, backoff.next_work, made every
// PollInterval for all its idle queues at once: an idle Worker sends about
// one statement a second, whatever the number of its queues
// (docs/adr/0083).
//
// # Several queues, one worker
//
// One Worker serves several queues, each with its own handler, concurrency
// and batch size; they share one LISTEN connection, one reaper and one
// batched completer:
//
//	w, err := client.NewWorker(pool, client.WorkerConfig{
//		Queues: []client.QueueConfig{
//			{Queue: "emails", Handler: client.HandlerFor(sendEmail), Concurrency: 20},
//			{Queue: "thumbnails", Handler: resize, Concurrency: 4, Lease: 5 * time.Minute},
//			{Queue: "webhooks", Handler: deliver, Concurrency: 50, BatchSize: 25},
//		},
//	})
//	if err != nil { log.Fatal(err) } // e.g. a pool too small: "... needs at least 5"
//	log.Fatal(w.Run(ctx))
//
// The pool must allow ConnectionsNeeded(cfg) connections (one claim per
// queue, the completer, the maintenance loop that reaps and fires
// schedules; LISTEN takes one more from the server, outside the pool);
// NewWorker refuses a smaller pool, naming the count.
//
// # Periodic jobs
//
// Every Worker fires the schedules that came due (backoff.put_schedule, or
// [schedules.NAME] in backoff.toml) every ScheduleInterval (default 1s),
// with no leader: any number of workers may, and each slot is enqueued
// once. Set ScheduleInterval negative when pg_cron fires them instead
// (docs/schedules.md). Client.FireSchedules does the same from any loop.
//
// # Typed handlers
//
// HandlerFor decodes the payload into a type before the handler runs; a
// payload that does not decode is dead-lettered at once (non-retryable):
//
//	type Email struct{ To, Subject string }
//	func sendEmail(ctx context.Context, job *client.Job, e Email) error { ... }
//	Handler: client.HandlerFor(sendEmail)
//
// # What a handler's error means
//
//	return nil                               // completed
//	return err                               // retried after the policy's delay, or dead-lettered when out of attempts
//	return client.Permanent(err)             // dead-lettered now (non_retryable)
//	return client.RetryAfter(err, 30*time.Second) // retried after 30s (the downstream's Retry-After), capped at the policy's max
//	return client.Snooze(time.Minute)        // put back for a minute; no attempt spent
//
// A panic is a failure too: its value and stack go into the job's error
// history, and the job is retried like any other failure.
//
// The worker records the outcome with a fenced call (complete, fail,
// snooze). When that call fails on the connection rather than with an
// answer from the database, it is sent again for about 3 s: a repeat of a
// call that did reach the database is refused (its token no longer holds
// the job), never applied to a later attempt; a refused completion whose
// attempt did complete the job is recognised as the first call's and
// counted as completed, not as a lost lease; if the database
// is still unreachable, the job stays running until its lease expires and
// the reaper retries it (the attempt then counts as a crash).
//
// # Leases, heartbeats and the handler's context
//
// A claim leases the job (WorkerConfig.Lease, or the policy's lease). While
// the handler runs, the worker extends the lease every HeartbeatInterval
// (default a third of the lease), so a handler may run far longer than one
// lease. The handler's context is cancelled, and context.Cause says why, when:
//
//   - the database refuses a heartbeat because the attempt is no longer the
//     job's (reaped, re-claimed, cancelled): ErrLeaseLost. Nothing the handler
//     does now can settle the job; it should stop.
//   - the lease runs out without a successful heartbeat: ErrLeaseExpired.
//     With heartbeats disabled (negative HeartbeatInterval) the lease is the
//     context's deadline.
//   - a shutdown's grace period ends: ErrWorkerShutdown.
//
// # Shutdown
//
// When Run's context ends the worker stops claiming and waits up to
// ShutdownTimeout for running handlers. Then it cancels the rest
// (ErrWorkerShutdown); a handler that returns an error then has its job
// failed as retryable with "worker shutdown", due at once for another
// worker. A handler that ignores its context still holds its job: the worker
// keeps extending the lease and Run returns only after that handler has
// returned and its outcome is recorded, so the job never runs twice at once
// (docs/adr/0028). If the process exits first, the handler dies with it and
// the lease expires before the reaper retries the job.
//
// A handler's error text is stored cleaned: NUL and invalid UTF-8, which
// PostgreSQL refuses in text, become U+FFFD.
//
// # The typed API
//
// Client exposes the SQL functions a worker and a producer call: Enqueue,
// EnqueueMany (one statement and one round trip for a batch, ids in input
// order), Claim, Acquire, Complete, CompleteMany, Fail, Heartbeat, Snooze,
// Reap, Rotate, Get, QueueState and WaitIdle; for workflows (jobs that
// depend on other jobs, docs/workflows.md) EnqueueGraph with a Graph,
// CompleteWithOutput, JobOutput, ParentOutputs and HeartbeatProgress, and
// in a Worker's handler SetOutput and ReportProgress; WaitForOutput waits
// for a job to finish and returns its output. It runs on any DB: a
// *pgxpool.Pool, a *pgx.Conn, a pgx.Tx. To enqueue atomically with your own
// writes, run the call on your transaction:
//
//	tx, _ := pool.Begin(ctx)
//	// ... your INSERT on tx ...
//	c.With(tx).Enqueue(ctx, "emails", msg)
//	tx.Commit(ctx)
//
// # The operator's calls are in client/ops
//
// Listing, inspecting, cancelling and replaying jobs, pausing queues, the
// dead letters, the overview, stats, activity, workers and vacuum health
// are package client/ops, over the same DB (docs/adr/0072):
//
//	o := ops.New(pool)
//	page, err := o.List(ctx, ops.ListParams{Queue: "emails", Statuses: []client.Status{client.StatusDeadLettered}})
//	_, err = o.Replay(ctx, page.Jobs[0].ID)
//
// # Waiting until the work is done
//
// WaitIdle returns once the given queues (every queue when none is given)
// have no unfinished job: none pending, running or retrying, whatever its
// run_at, so a retry due in an hour keeps its queue busy for that hour. A
// test or a batch program enqueues, runs a Worker, and waits:
//
//	ctx, cancel := context.WithTimeout(ctx, time.Minute)
//	defer cancel()
//	if err := c.WaitIdle(ctx, "emails"); err != nil {
//		log.Fatal(err) // `... context deadline exceeded (queue "emails" still has a retrying job)`
//	}
//
// Enqueue's options set the job's first run (RunAt), priority, max_attempts,
// a dedupe key, and its retry policy: a job follows its queue's policy
// unless UsePolicy names another row of backoff.policies, which the job
// then records for its whole life.
//
// "Which try is this?" has two answers, one name each (docs/adr/0065).
// Job (a jobtype.Job, which client/ops speaks of too) carries both.
// Job.Token is the fencing token: every call that settles or extends a
// claimed job carries the Token it was claimed with, so a stale worker
// cannot complete someone else's attempt. It counts every claim of the job
// and never goes down, not on snooze, cancel or replay, so no later claim
// shares a token (docs/adr/0020-tokens-that-never-repeat.md).
// Job.AttemptNumber() is the counted attempt: 1 for the first try, what
// MaxAttempts bounds and what the backoff delay grows with (Token minus
// UncountedAttempts: a snooze and a replay give budget back):
//
//	Handler: func(ctx context.Context, job *client.Job) error {
//		if job.AttemptNumber() > 1 { ... } // a retry
//		...
//	}
//	c.Complete(ctx, job.ID, job.Token) // outside a Worker: settle with the token
//
// # Errors
//
// The SQL functions' SQLSTATEs are translated in one place to errors for
// errors.Is: ErrInvalidArgument (22023), ErrJobNotFound (BK001),
// ErrStaleAttempt (BK002), ErrInvalidTransition (BK003), and for Acquire a
// *NotReadyError (BK004, errors.Is ErrNotReady) holding RetryAt and Token.
// The *pgconn.PgError stays reachable with errors.As. Every error names the
// operation: `claim jobs in "emails": pgbackoff: invalid argument: ...`.
//
// # Time
//
// By default the database's clock decides, which is what many workers on many
// hosts need: every call passes p_now NULL, the same SQL text either way.
// WithClock passes its time as p_now instead, so tests and simulations drive
// time without sleeping. Outside backoff_admin the database accepts a time
// at most backoff.settings.max_clock_skew (default 5 minutes) from its own
// clock, unless time_injection is switched on there (ErrInvalidArgument
// otherwise; docs/adr/0035-time-is-not-a-privilege.md), and a time ahead of
// its clock within that skew counts as its clock (docs/adr/0057).
//
// # Retry
//
// For work that need not be durable, package retry (client/retry) retries a
// function in process with a policy's math (policy.Policy.Delay, bit for
// bit the SQL's), a per-attempt timeout, a predicate, Permanent to stop and
// RetryAfter to wait a given delay:
//
//	err := retry.Do(ctx, policy.Profiles()["aggressive"], func(ctx context.Context) error {
//		return ping(ctx)
//	}, retry.AttemptTimeout(2*time.Second))
//
// # Behind a router
//
// Against a PL/Proxy router over several shard databases (docs/sharding.md)
// the client and the Worker work unchanged, with two differences: each
// call commits on its shard on its own, so enqueue inside your own
// transaction needs a transaction on the queue's shard (package
// client/sharding finds it: c.With(tx).Enqueue on a transaction of
// sharding.NewPools(router, cfg).ForQueue(ctx, queue)); and notifications
// do not pass the router, so workers wake up by polling (PollInterval).
//
// # Observability
//
// Metrics go through the OpenTelemetry API (WithMeterProvider; a no-op by
// default): pgbackoff.jobs.claimed, .completed, .failed, .retried,
// .dead_lettered, pgbackoff.leases.expired (reaped), pgbackoff.leases.lost,
// pgbackoff.handler.duration and pgbackoff.backoff.delay (seconds). Logs go to
// log/slog (WithLogger; slog.Default() by default), with the worker's id on
// every record: its start (queues=[emails thumbnails]) and stop at Info;
// each failed attempt at Debug ("job failed": queue, job, attempt, token,
// status, run_at, err) and, every 10 s in which attempts failed, one
// summary per queue at Info ("attempts failed": queue, failed,
// dead_lettered, in_last); a handler's panic, and errors the worker cannot
// return (a claim, a heartbeat, a settle call that failed), at Error.
package client
