// Package client is the Go side of pgbackoff: a typed API over the SQL
// functions of the backoff schema, a Worker that runs handlers for a queue,
// and Retry for in-process retries with the same backoff math.
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
// Run claims jobs in batches (and claims again at once when a batch came back
// full), runs up to Concurrency handlers, wakes on LISTEN/NOTIFY when a job is
// enqueued (polling every PollInterval as a fallback, for retries coming due),
// and reaps expired leases of crashed workers (safe from many workers).
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
// the job), never applied to a later attempt; if the database
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
// ShutdownTimeout for running handlers. Then it cancels the rest and fails
// their jobs as retryable with the error "worker shutdown", due at once for
// another worker, so no job is left running. A handler that ignores its
// context keeps its goroutine until it returns, but its result is dropped.
//
// # The typed API
//
// Client exposes every SQL function: Enqueue, EnqueueMany (one statement for
// a batch), Claim, Acquire, Complete, CompleteMany, Fail, Heartbeat, Snooze,
// Cancel, Replay, Reap, Prune, plus Get, List and Stats. It runs on any DB: a
// *pgxpool.Pool, a *pgx.Conn, a pgx.Tx. To enqueue atomically with your own
// writes, run the call on your transaction:
//
//	tx, _ := pool.Begin(ctx)
//	// ... your INSERT on tx ...
//	c.With(tx).Enqueue(ctx, "emails", msg)
//	tx.Commit(ctx)
//
// Enqueue's options set the job's first run (RunAt), priority, max_attempts,
// a dedupe key, and its retry policy: a job follows its queue's policy
// unless WithPolicy names another row of backoff.policies, which the job
// then records for its whole life.
//
// Every call that settles a claimed job carries the attempt it was claimed
// with (Job.Attempts), the fencing token that keeps a stale worker from
// completing someone else's attempt. Attempts counts every claim of the job
// and never goes down, not on snooze, cancel or replay, so no later claim
// shares a token (docs/adr/0020-tokens-that-never-repeat.md). The retry
// budget is counted apart: Job.CountedAttempts (Attempts minus
// UncountedAttempts: a snooze and a replay give budget back) is what
// max_attempts bounds and what the backoff delay grows with.
//
// # Errors
//
// The SQL functions' SQLSTATEs are translated in one place to errors for
// errors.Is: ErrInvalidArgument (22023), ErrJobNotFound (BK001),
// ErrStaleAttempt (BK002), ErrInvalidTransition (BK003), and for Acquire a
// *NotReadyError (BK004, errors.Is ErrNotReady) holding RetryAt and Attempts.
// The *pgconn.PgError stays reachable with errors.As. Every error names the
// operation: `claim jobs in "emails": pgbackoff: invalid argument: ...`.
//
// # Time
//
// By default the database's clock decides, which is what many workers on many
// hosts need. WithClock passes p_now to every call instead, so tests and
// simulations drive time without sleeping.
//
// # Retry
//
// Retry is for work that need not be durable: it retries a function in
// process with a policy's math (policy.Policy.Delay, bit for bit the SQL's),
// a per-attempt timeout (AttemptTimeout; a timed-out attempt is not retried
// unless RetryTimeouts is given), a predicate (RetryIf), Permanent to stop,
// and the last error returned after MaxAttempts.
//
//	err := client.Retry(ctx, policy.Profiles()["aggressive"], func(ctx context.Context) error {
//		return ping(ctx)
//	}, client.AttemptTimeout(2*time.Second))
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
// log/slog (WithLogger; slog.Default() by default).
package client
