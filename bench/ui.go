package main

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"time"

	"github.com/pgbackoff/pgbackoff/client"
	"github.com/pgbackoff/pgbackoff/client/ops"
	"github.com/pgbackoff/pgbackoff/webui"
)

// uiPages measures the web UI's server time per page (the handler, its
// client calls and the rendering; no browser, no network) with
// cfg.Finished jobs in the table: 90% completed, 5% dead-lettered, and the
// rest pending or retrying, over five queues. Targets (docs/adr/0048): the
// overview within 100 ms and a jobs page within 50 ms, at the median; the
// dead letters page within 100 ms (ADR 0055).
func (b *bench) uiPages(ctx context.Context) error {
	n := b.cfg.Finished
	overviewSamples, jobsSamples := max(3, b.cfg.Samples/30), max(6, b.cfg.Samples/10)
	fmt.Fprintf(b.out, "\n== web UI server time per page, %d jobs (table vacuumed and analyzed after loading) ==\n", n)
	fmt.Fprintf(b.out, "%-44s %8s %10s %10s %10s\n", "page", "samples", "p50", "p99", "max")
	db, drop, err := b.freshDatabase(ctx)
	if err != nil {
		return err
	}
	defer drop()
	if _, err := db.pool.Exec(ctx, `INSERT INTO backoff.jobs (queue, payload, policy, status, attempts, run_at, created_at,
			last_attempted_at, last_failed_at, last_error, dead_letter_reason, completed_at, segment)
		SELECT 'q' || (i % 5), jsonb_build_object('order', i), 'default', s.status,
			CASE WHEN s.status = 'pending' THEN 0 ELSE 1 END,
			CASE WHEN s.status = 'retrying' THEN now() + interval '1 minute' ELSE now() - interval '1 hour' END,
			now() - interval '2 hours' + i * interval '1 millisecond',
			CASE WHEN s.status = 'pending' THEN NULL ELSE now() - interval '1 hour' END,
			CASE WHEN s.status IN ('dead_lettered', 'retrying') THEN now() - interval '1 hour' END,
			CASE WHEN s.status IN ('dead_lettered', 'retrying') THEN 'upstream 503 for order ' || i END,
			CASE WHEN s.status = 'dead_lettered' THEN 'max_attempts' END,
			CASE WHEN s.status IN ('completed', 'dead_lettered') THEN now() - interval '1 hour' + i * interval '1 millisecond' END,
			CASE WHEN s.status IN ('pending', 'retrying') THEN `+currentSegment+` ELSE 0 END
		FROM generate_series(1, $1) AS i
		CROSS JOIN LATERAL (SELECT CASE i % 20 WHEN 0 THEN 'dead_lettered' WHEN 1 THEN 'pending' WHEN 2 THEN 'retrying'
			ELSE 'completed' END AS status) AS s`, n); err != nil {
		return fmt.Errorf("load jobs for the UI: %w", err)
	}
	if _, err := db.pool.Exec(ctx, "VACUUM ANALYZE backoff.jobs"); err != nil {
		return fmt.Errorf("vacuum: %w", err)
	}
	c, err := client.New(ctx, db.pool)
	if err != nil {
		return err
	}
	// In-process requests (httptest.NewRequest) name the host example.com.
	o := ops.New(db.pool)
	h, err := webui.New(c, o, webui.Options{Logger: slog.New(slog.DiscardHandler), Hosts: []string{"example.com"}})
	if err != nil {
		return err
	}
	// A cursor from the middle of the table, for a page far from the start.
	page, err := o.List(ctx, ops.ListParams{Order: ops.NewestFirst, Limit: n / 2})
	if err != nil {
		return err
	}
	mid := page.Next
	measure := func(label string, samples int, paths ...string) (time.Duration, error) {
		var lat []time.Duration
		for i := range samples {
			path := paths[i%len(paths)]
			req := httptest.NewRequest(http.MethodGet, path, nil).WithContext(ctx)
			rec := httptest.NewRecorder()
			t := time.Now()
			h.ServeHTTP(rec, req)
			lat = append(lat, time.Since(t))
			if rec.Code != http.StatusOK {
				return 0, fmt.Errorf("GET %s: %d %s", path, rec.Code, rec.Body.String())
			}
		}
		p50, p99 := percentile(lat, 0.5), percentile(lat, 0.99)
		fmt.Fprintf(b.out, "%-44s %8d %10s %10s %10s\n", label, samples, ms(p50), ms(p99), ms(percentile(lat, 1)))
		return p50, nil
	}
	p50, err := measure("overview (/)", overviewSamples, "/")
	if err != nil {
		return err
	}
	b.targetAtMost("ui-overview-1m", float64(p50)/float64(time.Millisecond), 100)
	p50, err = measure("jobs page (first, filtered, middle)", jobsSamples,
		"/jobs", "/jobs?queue=q1&status=dead_lettered", "/jobs?cursor="+mid)
	if err != nil {
		return err
	}
	b.targetAtMost("ui-jobs-page-1m", float64(p50)/float64(time.Millisecond), 50)
	if _, err := measure("jobs page filtered by error text", max(3, jobsSamples/10), "/jobs?error=order+77&status=dead_lettered"); err != nil {
		return err
	}
	// The dead letters page groups the most recent 10,000 dead letters
	// and counts the rest per reason from an index (ADR 0055): its time
	// should not grow with the table's 50,000 dead letters.
	p50, err = measure("dead letters (/dead-letters)", max(3, overviewSamples/3), "/dead-letters")
	if err != nil {
		return err
	}
	b.targetAtMost("ui-dead-letters-1m", float64(p50)/float64(time.Millisecond), 100)
	return b.uiRefreshCost(ctx, db.pool, h)
}

// uiRefreshCost compares the Go claim+complete rate of 4 clients with and
// without the overview open, in alternating rounds on the same table, twice:
// as an open page loads it (its table, /overview/table, every RefreshEvery,
// 5 s by default: the target), and as a stress (the whole page, /, every
// second, five times the page's rate; printed, no goal). A round lasts at
// least four refreshes.
func (b *bench) uiRefreshCost(ctx context.Context, pool client.DB, h http.Handler) error {
	const clients = 4
	// A due backlog per client that no run exhausts: 50,000 each beside
	// the 1M rows (a fifth of the rows in the test mode's tiny table).
	// Every run starts with the same backlog: topUp adds back what the
	// run before claimed (a round at the page's rate runs for 20 s, and the
	// clients would drain a fixed backlog before the section ends, which
	// cut their runs short).
	per := max(200, b.cfg.Finished/20)
	topUp := func() error {
		_, err := pool.Exec(ctx, `INSERT INTO backoff.jobs (queue, payload, policy, status, run_at, created_at, segment)
			SELECT q.queue, '{}', 'default', 'pending', now() - interval '1 minute', now() - interval '1 minute',
			       `+currentSegment+`
			FROM (SELECT 'ui-bench-' || k AS queue FROM generate_series(0, $1 - 1) AS k) AS q
			CROSS JOIN LATERAL generate_series(1, $2 - (SELECT count(*) FROM backoff.jobs AS j
			                                            WHERE j.queue = q.queue AND j.status = 'pending')::int)`,
			clients, per)
		if err != nil {
			return fmt.Errorf("load the claim backlog: %w", err)
		}
		return nil
	}
	if err := topUp(); err != nil {
		return err
	}
	if _, err := pool.Exec(ctx, "ANALYZE backoff.jobs"); err != nil {
		return err
	}
	workers := make([]*client.Client, clients)
	for k := range workers {
		c, err := client.New(ctx, pool, client.WithWorkerID(fmt.Sprintf("ui-bench-%d", k)))
		if err != nil {
			return err
		}
		workers[k] = c
	}
	// rate runs the clients for d, with path requested every "every" when
	// path is not empty.
	rate := func(path string, every, d time.Duration) (float64, error) {
		if err := topUp(); err != nil {
			return 0, err
		}
		rctx, cancel := context.WithTimeout(ctx, d)
		// The page's refreshes end before the next round's top-up: a
		// request cut off at the round's end leaves no cancelled call
		// behind on a connection the top-up could take.
		var refresher sync.WaitGroup
		defer refresher.Wait()
		defer cancel()
		if path != "" {
			refresher.Add(1)
			go func() {
				defer refresher.Done()
				for rctx.Err() == nil {
					rec := httptest.NewRecorder()
					h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil).WithContext(rctx))
					select {
					case <-rctx.Done():
					case <-time.After(every):
					}
				}
			}()
		}
		var ops atomic.Int64
		var wg sync.WaitGroup
		errs := make(chan error, clients)
		start := time.Now()
		for k := range clients {
			wg.Add(1)
			go func() {
				defer wg.Done()
				c := workers[k]
				queue := fmt.Sprintf("ui-bench-%d", k)
				// The round's end stops the loop between calls, never a
				// call, as runClients does: a call cancelled mid-flight can
				// leave its pooled connection unusable, and the next round's
				// top-up once failed on one with an i/o timeout.
				for rctx.Err() == nil {
					jobs, err := c.Claim(ctx, queue, 1, 0)
					if err != nil || len(jobs) == 0 {
						if err != nil {
							errs <- err
						}
						return
					}
					if _, err := c.Complete(ctx, jobs[0].ID, jobs[0].Token); err != nil {
						errs <- err
						return
					}
					ops.Add(1)
				}
			}()
		}
		wg.Wait()
		close(errs)
		if err := <-errs; err != nil {
			return 0, err
		}
		return float64(ops.Load()) / time.Since(start).Seconds(), nil
	}
	compare := func(path string, every time.Duration) (without, with, ratio float64, err error) {
		d := max(b.cfg.RunFor, 4*every)
		for range b.cfg.Rounds {
			a, err := rate("", 0, d)
			if err != nil {
				return 0, 0, 0, err
			}
			u, err := rate(path, every, d)
			if err != nil {
				return 0, 0, 0, err
			}
			without, with = without+a, with+u
		}
		n := float64(b.cfg.Rounds)
		return without / n, with / n, ratioOf(with, without), nil
	}
	pageEvery := b.cfg.UIRefresh // webui.Options.RefreshEvery's default but in the test mode
	without, with, ratio, err := compare("/overview/table", pageEvery)
	if err != nil {
		return err
	}
	fmt.Fprintf(b.out, "claim+complete, %d Go clients, %d rounds: %.0f jobs/s without the UI, %.0f with the overview open (its table every %s, as the page refreshes) (ratio %.2f)\n",
		clients, b.cfg.Rounds, without, with, pageEvery, ratio)
	sWithout, sWith, sRatio, err := compare("/", pageEvery/5)
	if err != nil {
		return err
	}
	fmt.Fprintf(b.out, "claim+complete, %d Go clients, %d rounds: %.0f jobs/s without the UI, %.0f with the whole overview page loaded every %s, a stress (ratio %.2f)\n",
		clients, b.cfg.Rounds, sWithout, sWith, pageEvery/5, sRatio)
	b.target("ui-refresh-throughput-1m", ratio, 0.95)
	return nil
}
