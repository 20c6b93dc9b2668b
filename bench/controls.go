package main

import (
	"context"
	"fmt"
)

// --- queue controls (docs/adr/0045) --------------------------------

// The settings of the controlled side: a rate and a burst far above any
// rate a run reaches (the bucket never runs dry, so every claim goes
// through the controlled path and updates the bucket, but is never held
// back), and a breaker whose threshold a run never reaches within its
// window (every fail appends to the failure log, counts the window, prunes,
// and never opens). The threshold is not what a user would set: with every
// job failing, any realistic breaker opens at once and claims then return
// nothing; a short window keeps the count a fail reads small (it reads at
// most min(breaker_failures, failures in the window) index entries: the
// part of the cost this run does not show, docs/adr/0045).
const controlsSQL = `UPDATE backoff.queues SET rate = 1e9, burst = 1000000000,
	breaker_failures = 1000000, breaker_window = '1 millisecond', breaker_cooldown = '1 second', breaker_probes = 1
	WHERE name = $1`

// controlsSeed prepares one side of a controls line: always backoff.jobs
// (both sides are ours), the queue with its controls on the "ours" side
// (table oursTable) and without them on the other, the runtime state empty.
func controlsSeed(maxAttempts int, perClient int) func(context.Context, *bench, *database, string, int) error {
	return func(ctx context.Context, b *bench, db *database, table string, n int) error {
		for _, s := range []string{
			`TRUNCATE backoff.queue_failures, backoff.queue_breakers, backoff.queue_tokens`,
			`INSERT INTO backoff.queues (name, policy) VALUES ('` + queue + `', 'default')
			 ON CONFLICT (name) DO UPDATE SET rate = NULL, burst = NULL, breaker_failures = NULL,
			     breaker_window = NULL, breaker_cooldown = NULL, breaker_probes = 1`,
		} {
			if _, err := db.pool.Exec(ctx, s); err != nil {
				return fmt.Errorf("controls seed: %w", err)
			}
		}
		if table == oursTable {
			if _, err := db.pool.Exec(ctx, controlsSQL, queue); err != nil {
				return fmt.Errorf("controls seed: %w", err)
			}
		}
		if perClient > 0 {
			return seedDue(ctx, db, oursTable, perClient*n+100, maxAttempts)
		}
		return dueSeed(9000, maxAttempts)(ctx, b, db, oursTable, n)
	}
}

// controlScenarios compares the same work on the same queue, with the
// controls (the "ours" side of abScenario) and without them (its "limit"
// side): both through our functions on backoff.jobs.
func (b *bench) controlScenarios() []abScenario {
	cl := b.cfg.Clients
	return []abScenario{
		{name: "claim+complete 1/tx", key: "controls-claim-complete", path: "sql", clients: cl,
			seed: controlsSeed(0, 0), ours: fixed(oursClaimComplete), limit: fixed(oursClaimComplete)},
		{name: "claim+fail retry cycle", key: "controls-retry-cycle", path: "sql", clients: cl,
			seed: controlsSeed(1_000_000, 50), ours: fixed(oursRetryCycle), limit: fixed(oursRetryCycle)},
	}
}

// controls prints the cost of queue controls: jobs/s with a breaker and a
// rate configured (never limiting) / the same queue without.
func (b *bench) controls(ctx context.Context) error {
	fmt.Fprintf(b.out, "\n== queue controls: a queue with a breaker and a rate that never hold it back (ours) / the same queue without controls (limit), medians of %d rounds ==\n", b.cfg.Rounds)
	b.header()
	for _, s := range b.controlScenarios() {
		db, drop, err := b.freshDatabase(ctx)
		if err != nil {
			return err
		}
		for _, n := range b.clientsOf(s) {
			l, err := b.runAB(ctx, db, s, n)
			if err != nil {
				drop()
				return err
			}
			b.print(l)
			// WAL per job with / without; no target (the lead sets none yet).
			b.wal(l.targetName(), l.walOurs, l.walLimit)
		}
		drop()
	}
	return nil
}
