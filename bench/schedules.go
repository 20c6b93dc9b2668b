package main

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
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
//     2 s;
//   - the probe's cost on a claim loop: the jobs/s of one claimer calling
//     backoff.claim (the Worker's default batch, 10), alone and with a
//     fire_schedules() probe after every claim (the worst case), with no
//     schedule and with 1,000 schedules, none due; from the difference, a
//     probe's time, and its share of a second at the Worker's cadence (one
//     probe a ScheduleInterval, 1 s). The goal: with 1,000 schedules, at
//     most 1% of the Worker's time.
//
// Time is a parameter: the schedules are put at t0 and fired at t0 + 1h1m,
// so every one of them is due whatever the clock says.
func (b *bench) schedules(ctx context.Context) error {
	n, probes := 10_000, 2000
	// The claim loop: claim calls per variant and phase, in rounds of
	// loopRound, with loopSchedules schedules in its second phase.
	loopCalls, loopRound, loopSchedules := 1000, 50, 1000
	if b.cfg.Mode == "test" {
		n, probes = 50, 20
		loopCalls, loopRound, loopSchedules = 20, 5, 50
	}
	fmt.Fprintf(b.out, "\n== periodic jobs: %d schedules ==\n", n)
	db, drop, err := b.freshDatabase(ctx)
	if err != nil {
		return err
	}
	defer drop()
	t0 := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	// Nothing is due at t0 + 30m (every schedule's first slot is t0 + 1h).
	quiet := t0.Add(30 * time.Minute)
	put := func(from, to int) error {
		if _, err := db.pool.Exec(ctx, `SELECT count(backoff.put_schedule('s' || i, 'q' || (i % 10), p_every => '1 hour',
			p_payload => jsonb_build_object('i', i), p_now => $3)) FROM generate_series($1::integer, $2::integer) AS i`, from, to, t0); err != nil {
			return fmt.Errorf("put schedules: %w", err)
		}
		if _, err := db.pool.Exec(ctx, "VACUUM ANALYZE backoff.schedules"); err != nil {
			return fmt.Errorf("vacuum: %w", err)
		}
		return nil
	}
	conn, err := db.pool.Acquire(ctx)
	if err != nil {
		return err
	}
	defer conn.Release()

	// The claim loop, with no schedule, then with loopSchedules.
	if err := seedDue(ctx, db, oursTable, 2*2*loopCalls*claimLoopBatch, 0); err != nil {
		return err
	}
	for _, defined := range []int{0, loopSchedules} {
		if defined > 0 {
			if err := put(1, defined); err != nil {
				return err
			}
		}
		alone, probed, err := claimLoop(ctx, conn, loopCalls, loopRound, quiet)
		if err != nil {
			return fmt.Errorf("claim loop with %d schedules: %w", defined, err)
		}
		// A probe's time, taken from the loop: what a claim call with a
		// probe after it took more than one without.
		probe := max(0, claimLoopBatch/probed-claimLoopBatch/alone)
		// The Worker probes once a ScheduleInterval (1 s by default) on
		// its maintenance connection: that share of each second.
		cadence := 100 * probe / time.Second.Seconds()
		fmt.Fprintf(b.out, "claim loop, one claimer, batch %d, %d schedules (none due): %.0f jobs/s alone, %.0f jobs/s with a fire_schedules() probe after every claim (%.1f%% fewer; %s a probe); at the Worker's one probe a second: %.3f%%\n",
			claimLoopBatch, defined, alone, probed, 100*(1-ratioOf(probed, alone)), us(time.Duration(probe*float64(time.Second))), cadence)
		if defined > 0 {
			b.targetAtMost(fmt.Sprintf("schedules-probe-claim-cost-pct-%d", defined), cadence, 1)
		}
	}
	if err := put(loopSchedules+1, n); err != nil {
		return err
	}

	// The probe's cost, alternated with the hand-written read so both see
	// the same machine.
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

// claimLoopBatch is the claim loop's batch: the Worker's default
// (BatchSize defaults to Concurrency, 10).
const claimLoopBatch = 10

// claimLoop runs calls claims of claimLoopBatch jobs of the bench queue
// alone and calls claims each followed by a fire_schedules() probe at
// quiet (nothing due), in alternating rounds of round calls so both see
// the same machine and table, and returns the jobs claimed per second of
// each. The claimed jobs stay running: each claim takes the next due jobs.
func claimLoop(ctx context.Context, conn *pgxpool.Conn, calls, round int, quiet time.Time) (alone, probed float64, err error) {
	var tookAlone, tookProbed time.Duration
	var jobsAlone, jobsProbed int
	step := func(probe bool) (int, error) {
		var k int
		if err := conn.QueryRow(ctx, "SELECT count(*) FROM backoff.claim($1, 'bench-claimer', $2)", queue, claimLoopBatch).
			Scan(&k); err != nil {
			return 0, err
		}
		if k != claimLoopBatch {
			return 0, fmt.Errorf("claimed %d jobs, want %d: the seed ran out", k, claimLoopBatch)
		}
		if probe {
			var fired int
			if err := conn.QueryRow(ctx, "SELECT count(*) FROM backoff.fire_schedules(p_now => $1)", quiet).Scan(&fired); err != nil {
				return 0, err
			}
			if fired != 0 {
				return 0, fmt.Errorf("fire_schedules fired %d jobs with nothing due", fired)
			}
		}
		return k, nil
	}
	for done, r := 0, 0; done < calls; r++ {
		m := min(round, calls-done)
		order := []bool{false, true}
		if r%2 == 1 {
			order = []bool{true, false}
		}
		for _, probe := range order {
			start := time.Now()
			for range m {
				k, err := step(probe)
				if err != nil {
					return 0, 0, err
				}
				if probe {
					jobsProbed += k
				} else {
					jobsAlone += k
				}
			}
			if probe {
				tookProbed += time.Since(start)
			} else {
				tookAlone += time.Since(start)
			}
		}
		done += m
	}
	return float64(jobsAlone) / tookAlone.Seconds(), float64(jobsProbed) / tookProbed.Seconds(), nil
}
