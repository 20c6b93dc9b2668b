package main

import (
	"context"
	"fmt"
)

// isolation runs four Go Worker processes end to end in a database whose
// default_transaction_isolation is serializable, beside the same run in a
// database with the default left at read committed, alternating rounds.
// The Worker runs its calls at READ COMMITTED whatever the default
// (docs/adr/0080): the target is the serializable database's rate over
// the default one's.
func (b *bench) isolation(ctx context.Context) error {
	n := b.cfg.WorkerJobs
	fmt.Fprintf(b.out, "\n== 4 Go Worker processes end to end, the database's default isolation serializable vs read committed (%d jobs, Concurrency %d, BatchSize %d) ==\n",
		n, b.cfg.WorkerConcurrency, b.cfg.WorkerBatch)
	rates := map[string][]float64{}
	levels := []string{"read committed", "serializable"}
	for r := range b.cfg.Rounds {
		for i := range levels {
			level := levels[(i+r)%2]
			rate, err := b.workerAtDefaultIsolation(ctx, level, n)
			if err != nil {
				return fmt.Errorf("worker with default isolation %s: %w", level, err)
			}
			rates[level] = append(rates[level], rate)
		}
	}
	for _, level := range levels {
		fmt.Fprintf(b.out, "%-15s %8.0f jobs/s   rounds: %s\n", level+":", median(rates[level]), fmtRates(rates[level]))
	}
	b.target("worker-serializable-default", ratioOf(median(rates["serializable"]), median(rates["read committed"])), 0.9)
	return nil
}

// workerAtDefaultIsolation is one run of four Worker processes on n jobs in a fresh database
// whose sessions start at level.
func (b *bench) workerAtDefaultIsolation(ctx context.Context, level string, n int) (float64, error) {
	db, drop, err := b.freshDatabase(ctx)
	if err != nil {
		return 0, err
	}
	defer drop()
	if _, err := b.admin.Exec(ctx, fmt.Sprintf("ALTER DATABASE %s SET default_transaction_isolation = '%s'", db.name, level)); err != nil {
		return 0, err
	}
	db.pool.Reset() // sessions opened from now on start at level
	var got string
	if err := db.pool.QueryRow(ctx, "SHOW default_transaction_isolation").Scan(&got); err != nil {
		return 0, err
	}
	if got != level {
		return 0, fmt.Errorf("the database's sessions start at %s, not %s", got, level)
	}
	res, err := runWorkers(ctx, b.cfg, db, 4, n)
	return res.rate(), err
}
