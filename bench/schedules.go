package main

import (
	"context"
	"fmt"
	"time"
)

// schedules measures periodic jobs (docs/schedules.md, docs/adr/0068):
//
//   - the probe every Worker makes each ScheduleInterval when nothing is
//     due: a client's call of backoff.fire_schedules(), round trip
//     included, in µs (goal: at most 500 µs, so a worker probing every
//     second spends under 0.05% of a core on it), printed beside the
//     hand-written SELECT min(next_fire_at) a superuser could run (a
//     function for workers pays SECURITY DEFINER and SET search_path, which
//     cost about as much as fire_schedules' own work: docs/adr/0068);
//   - firing 10,000 due schedules in one call (p_limit 10000): goal within
//     2 s.
//
// Time is a parameter: the schedules are put at t0 and fired at t0 + 1h1m,
// so every one of them is due whatever the clock says.
func (b *bench) schedules(ctx context.Context) error {
	n, probes := 10_000, 2000
	if b.cfg.Mode == "test" {
		n, probes = 50, 20
	}
	fmt.Fprintf(b.out, "\n== periodic jobs: %d schedules ==\n", n)
	db, drop, err := b.freshDatabase(ctx)
	if err != nil {
		return err
	}
	defer drop()
	t0 := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	if _, err := db.pool.Exec(ctx, `SELECT count(backoff.put_schedule('s' || i, 'q' || (i % 10), p_every => '1 hour',
		p_payload => jsonb_build_object('i', i), p_now => $2)) FROM generate_series(1, $1) AS i`, n, t0); err != nil {
		return fmt.Errorf("put schedules: %w", err)
	}
	if _, err := db.pool.Exec(ctx, "VACUUM ANALYZE backoff.schedules"); err != nil {
		return fmt.Errorf("vacuum: %w", err)
	}
	conn, err := db.pool.Acquire(ctx)
	if err != nil {
		return err
	}
	defer conn.Release()

	// Nothing is due at t0 + 30m: the probe's cost, alternated with the
	// hand-written read so both see the same machine.
	quiet := t0.Add(30 * time.Minute)
	var fireTotal, minTotal time.Duration
	for i := range probes {
		measureFire := func() error {
			start := time.Now()
			rows, err := conn.Query(ctx, "SELECT schedule, slot, job_id FROM backoff.fire_schedules(p_now => $1)", quiet)
			if err != nil {
				return err
			}
			k := 0
			for rows.Next() {
				k++
			}
			rows.Close()
			if err := rows.Err(); err != nil {
				return err
			}
			if k != 0 {
				return fmt.Errorf("fire_schedules fired %d jobs with nothing due", k)
			}
			fireTotal += time.Since(start)
			return nil
		}
		measureMin := func() error {
			start := time.Now()
			var next time.Time
			if err := conn.QueryRow(ctx, "SELECT min(next_fire_at) FROM backoff.schedules WHERE NOT paused").Scan(&next); err != nil {
				return err
			}
			minTotal += time.Since(start)
			return nil
		}
		first, second := measureFire, measureMin
		if i%2 == 1 {
			first, second = measureMin, measureFire
		}
		if err := first(); err != nil {
			return fmt.Errorf("probe: %w", err)
		}
		if err := second(); err != nil {
			return fmt.Errorf("probe: %w", err)
		}
	}
	fireUS := float64(fireTotal.Microseconds()) / float64(probes)
	minUS := float64(minTotal.Microseconds()) / float64(probes)
	fmt.Fprintf(b.out, "nothing due, per call (round trip included): fire_schedules() %.1f µs, SELECT min(next_fire_at) %.1f µs\n",
		fireUS, minUS)
	fmt.Fprintf(b.out, "fire_schedules() / min(next_fire_at): %.2f\n", ratioOf(fireUS, minUS))
	b.targetAtMost("schedules-probe-us", fireUS, 500)

	// Every schedule due: one call fires them all.
	start := time.Now()
	var fired int
	if err := conn.QueryRow(ctx, "SELECT count(*) FROM backoff.fire_schedules($1, $2)", n, t0.Add(time.Hour+time.Minute)).
		Scan(&fired); err != nil {
		return fmt.Errorf("fire %d schedules: %w", n, err)
	}
	took := time.Since(start)
	if fired != n {
		return fmt.Errorf("fired %d jobs of %d due schedules", fired, n)
	}
	fmt.Fprintf(b.out, "fire %d due schedules in one call: %s (%.1f µs per job)\n", n, took.Round(time.Millisecond),
		float64(took.Microseconds())/float64(n))
	if b.cfg.Mode != "test" {
		b.targetAtMost("schedules-fire-10k-ms", float64(took.Milliseconds()), 2000)
	} else {
		b.targetAtMost("schedules-fire-50-ms", float64(took.Milliseconds()), 2000)
	}
	return nil
}
