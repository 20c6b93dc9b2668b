package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
)

func (b *bench) runAll(ctx context.Context) error {
	began := time.Now()
	var lines []line
	if b.cfg.wants("throughput") {
		fmt.Fprintf(b.out, "\n== throughput: ours / limit (hand-written SQL on public.raw_jobs), medians of %d rounds ==\n", b.cfg.Rounds)
		b.header()
		for _, s := range b.scenarios() {
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
				b.record(l)
				lines = append(lines, l)
			}
			drop()
		}
	}
	if b.cfg.wants("controls") {
		if err := b.controls(ctx); err != nil {
			return err
		}
	}
	if b.cfg.Only == "latency" {
		if err := b.riverSideBySide(ctx, b.cfg.WorkerJobs); err != nil {
			return err
		}
	} else if b.cfg.wants("worker") || b.cfg.wants("river") {
		ls, err := b.workerSection(ctx)
		if err != nil {
			return err
		}
		lines = append(lines, ls...)
	}
	if b.cfg.wants("isolation") {
		if err := b.isolation(ctx); err != nil {
			return err
		}
	}
	if b.cfg.wants("languages") {
		if err := b.languages(ctx); err != nil {
			return err
		}
	}
	if b.cfg.wants("idle") {
		if err := b.idle(ctx); err != nil {
			return err
		}
	}
	if b.cfg.wants("profile") {
		if err := b.profile(ctx); err != nil {
			return err
		}
	}
	if b.cfg.WakeupSamples > 0 && b.cfg.wants("wakeup") {
		if err := b.wakeup(ctx); err != nil {
			return err
		}
	}
	if b.cfg.wants("scaling") {
		if err := b.scaling(ctx); err != nil {
			return err
		}
	}
	if b.cfg.wants("ui") {
		if err := b.uiPages(ctx); err != nil {
			return err
		}
	}
	if b.cfg.wants("workflows") {
		if err := b.workflows(ctx); err != nil {
			return err
		}
	}
	if b.cfg.wants("outputs") {
		if err := b.outputs(ctx); err != nil {
			return err
		}
	}
	if b.cfg.wants("schedules") {
		if err := b.schedules(ctx); err != nil {
			return err
		}
	}
	if b.cfg.Sustained > 0 && b.cfg.wants("sustained") {
		if err := b.sustained(ctx); err != nil {
			return err
		}
	}
	if b.cfg.MVCC > 0 && b.cfg.wants("mvcc") {
		if err := b.mvcc(ctx); err != nil {
			return err
		}
	}
	b.summary(lines)
	fmt.Fprintf(b.out, "\ntotal time: %s\n", time.Since(began).Round(time.Second))
	b.printTargets(b.out)
	return nil
}

// clientsOf is the client counts a scenario runs at: all of them, or in a
// trimmed run, for a line without a target only the fewest and the most.
func (b *bench) clientsOf(s abScenario) []int {
	if !b.cfg.Trim || s.target > 0 || len(s.clients) <= 2 {
		return s.clients
	}
	return []int{s.clients[0], s.clients[len(s.clients)-1]}
}

// record keeps a line's target and WAL bytes per job for the closing block.
func (b *bench) record(l line) {
	if l.key == "" {
		return
	}
	if l.target > 0 {
		b.target(l.targetName(), l.ratio(), l.target)
	}
	b.wal(l.targetName(), l.walOurs, l.walLimit)
}

func (b *bench) header() {
	fmt.Fprintf(b.out, "%-30s %-4s %7s %12s %12s %7s %15s %7s\n", "scenario", "path", "clients", "ours jobs/s", "limit jobs/s", "ratio", "round ratios", "target")
}

func (b *bench) print(l line) {
	target := ""
	if l.target > 0 {
		mark := "met"
		if l.ratio() < l.target {
			mark = "MISS"
		}
		target = fmt.Sprintf(">=%.2f %s", l.target, mark)
	}
	fmt.Fprintf(b.out, "%-30s %-4s %7d %12.0f %12.0f %7.2f %7.2f..%-6.2f %s\n",
		l.name, l.path, l.clients, l.ours, l.limit, l.ratio(), l.lo, l.hi, target)
	if l.hi > 0 {
		b.noise = append(b.noise, (l.hi-l.lo)/((l.hi+l.lo)/2))
	}
}

func (b *bench) summary(lines []line) {
	if len(lines) == 0 {
		return
	}
	fmt.Fprintf(b.out, "\n== targets ==\n")
	for _, l := range lines {
		if l.target > 0 {
			b.print(l)
		}
	}
	if len(b.noise) > 0 {
		fmt.Fprintf(b.out, "noise: median spread of the per-round ratios of a line: %.0f%% (max %.0f%%)\n",
			100*median(b.noise), 100*maxOf(b.noise))
	}
	if la, err := os.ReadFile("/proc/loadavg"); err == nil {
		fmt.Fprintf(b.out, "load average at end: %s\n", strings.TrimSpace(string(la)))
	}
}

func maxOf(xs []float64) float64 {
	m := xs[0]
	for _, x := range xs {
		m = max(m, x)
	}
	return m
}

// --- the Go Worker end to end, the raw limit and River --------------------

var discard = slog.New(slog.NewTextHandler(io.Discard, nil))

// runWorkers pre-inserts n jobs and works them with w Workers (no-op
// handler): one in this process (runWorkerSetup), several each in an OS
// process of its own (runWorkerProcesses).
func runWorkers(ctx context.Context, cfg Config, db *database, workers, n int) (result, error) {
	if workers > 1 {
		return runWorkerProcesses(ctx, cfg, db, workers, n)
	}
	return runWorkerSetup(ctx, cfg, db, workerSetup{workers: 1, queues: 1}, n)
}

func (b *bench) workerSection(ctx context.Context) ([]line, error) {
	n := b.cfg.WorkerJobs
	fmt.Fprintf(b.out, "\n== Go Worker end to end (no-op handler, %d pre-inserted jobs, Concurrency %d, BatchSize %d) vs the raw claim 100 + complete loop ==\n",
		n, b.cfg.WorkerConcurrency, b.cfg.WorkerBatch)
	b.header()
	var lines []line
	for _, workers := range []int{1, 4} {
		db, drop, err := b.freshDatabase(ctx)
		if err != nil {
			return nil, err
		}
		s := abScenario{name: "worker end to end", path: "go", maxOps: int64(n), runFor: 10 * time.Minute,
			seed: func(ctx context.Context, _ *bench, db *database, table string, _ int) error {
				if table == rawTable {
					return seedDue(ctx, db, table, n, 0)
				}
				return nil
			},
			limit: fixed(rawClaimBatch)}
		var ours, limit, ratios []float64
		for r := range b.cfg.Rounds {
			var o, l float64
			for _, isOurs := range []bool{r%2 == 0, r%2 == 1} {
				if err := truncate(ctx, db); err != nil {
					drop()
					return nil, err
				}
				var res result
				if isOurs {
					res, err = runWorkers(ctx, b.cfg, db, workers, n)
					o = res.rate()
				} else {
					_ = s.seed(ctx, b, db, rawTable, workers)
					res, err = runClients(ctx, db.pool, workers, s.runFor, s.maxOps, s.limit)
					l = res.rate()
				}
				if err != nil {
					drop()
					return nil, err
				}
			}
			ours, limit, ratios = append(ours, o), append(limit, l), append(ratios, o/l)
		}
		drop()
		lo, hi := minMax(ratios)
		name := "worker end to end"
		if workers > 1 {
			name = "workers, a process each"
		}
		l := line{name: name, path: "go", clients: workers, ours: median(ours), limit: median(limit), lo: lo, hi: hi}
		b.print(l)
		lines = append(lines, l)
		if workers == 4 {
			b.target("workers-4-processes", l.ratio(), 0.9)
		}
	}
	if err := b.multiQueue(ctx, n); err != nil {
		return nil, err
	}
	if err := b.riverSideBySide(ctx, n); err != nil {
		return nil, err
	}
	return lines, nil
}

// multiQueue compares one Worker on 4 queues with the same Worker on one
// queue: the same total jobs, Concurrency and BatchSize split over the
// queues, alternating rounds.
func (b *bench) multiQueue(ctx context.Context, n int) error {
	fmt.Fprintf(b.out, "\n== one Worker on 4 queues vs one queue (%d jobs in all; Concurrency %d and BatchSize %d split over the queues) ==\n",
		n, b.cfg.WorkerConcurrency, b.cfg.WorkerBatch)
	var one, four []float64
	for r := range b.cfg.Rounds {
		for _, queues := range []int{1 + 3*(r%2), 4 - 3*(r%2)} {
			db, drop, err := b.freshDatabase(ctx)
			if err != nil {
				return err
			}
			res, err := runWorkerSetup(ctx, b.cfg, db, workerSetup{workers: 1, queues: queues}, n)
			drop()
			if err != nil {
				return fmt.Errorf("multi-queue (%d queues): %w", queues, err)
			}
			if queues == 1 {
				one = append(one, res.rate())
			} else {
				four = append(four, res.rate())
			}
		}
	}
	fmt.Fprintf(b.out, "1 queue:  %8.0f jobs/s   rounds: %s\n4 queues: %8.0f jobs/s   rounds: %s\n",
		median(one), fmtRates(one), median(four), fmtRates(four))
	b.target("multi-queue-4", median(four)/median(one), 0.9)
	return nil
}

// riverSideBySide runs our Worker and River v0.51.1 (bench/river, built
// once) on the same number of jobs, alternating, in River's two modes:
// burn-down (pre-inserted jobs) and continuous (a pre-inserted backlog
// worked while more jobs are inserted at the fixed -continuous-rate; the
// window closes at 3/4 of the backlog, so the worker, not the inserter, is
// the limit; see runWorkerContinuous). Then both insert at half of our
// continuous rate with no backlog, for the enqueue -> start latency.
// Without -river only our side runs (the latency target needs only ours).
func (b *bench) riverSideBySide(ctx context.Context, n int) error {
	bin := ""
	if b.cfg.RiverDir != "" {
		bin = filepath.Join(os.TempDir(), "pgbackoff-river-bench-"+randomSuffix())
		build := exec.CommandContext(ctx, "go", "build", "-o", bin, ".")
		build.Dir = b.cfg.RiverDir
		// bench/river is its own module with River's pins, outside the
		// repository's go.work (ADR 0042).
		build.Env = append(os.Environ(), "GOWORK=off")
		if out, err := build.CombinedOutput(); err != nil {
			fmt.Fprintf(b.out, "river: not run: build %s: %v: %s\n", b.cfg.RiverDir, err, bytes.TrimSpace(out))
			bin = ""
		} else {
			defer os.Remove(bin)
		}
	}
	var oursCont float64
	modes := []string{"burndown", "continuous"}
	if b.cfg.Only == "latency" {
		if b.cfg.LatencyRate <= 0 {
			return errors.New("-only=latency needs -latency-rate (the rate otherwise comes from the continuous mode's line)")
		}
		modes = nil
	}
	for _, mode := range modes {
		what := fmt.Sprintf("%d pre-inserted jobs", n)
		if mode == "continuous" {
			what = fmt.Sprintf("a backlog of %d jobs worked while %.0f jobs/s are inserted; window: 3/4 of the backlog run", n, b.cfg.ContinuousRate)
		}
		if bin != "" {
			fmt.Fprintf(b.out, "\n== side by side with River v0.51.1, %s (%s, no-op worker; same server, %d alternating rounds%s) ==\n",
				mode, what, b.cfg.Rounds, fewRounds(b.cfg.Rounds))
		} else {
			fmt.Fprintf(b.out, "\n== Go Worker, %s (%s, no-op worker) ==\n", mode, what)
		}
		var ours, river []float64
		var oursIns, riverIns []int
		for r := range b.cfg.Rounds {
			for _, isOurs := range []bool{r%2 == 0, r%2 == 1} {
				if !isOurs && bin == "" {
					continue
				}
				var run sideRun
				var err error
				if isOurs {
					run, err = b.oursRun(ctx, mode, n, b.cfg.ContinuousRate)
					ours, oursIns = append(ours, run.rate), append(oursIns, run.inserted)
				} else {
					run, err = b.riverRun(ctx, bin, mode, n, b.cfg.ContinuousRate)
					river, riverIns = append(river, run.rate), append(riverIns, run.inserted)
				}
				if err != nil {
					return err
				}
			}
		}
		inserted := func(ins []int) string {
			if mode != "continuous" {
				return ""
			}
			s := make([]string, len(ins))
			for i, k := range ins {
				s[i] = strconv.Itoa(k)
			}
			return "   inserted in the window: " + strings.Join(s, " ")
		}
		fmt.Fprintf(b.out, "pgbackoff Worker (1 worker, Concurrency %d, BatchSize %d): %8.0f jobs/s   rounds: %s%s\n",
			b.cfg.WorkerConcurrency, b.cfg.WorkerBatch, median(ours), fmtRates(ours), inserted(oursIns))
		if mode == "continuous" {
			oursCont = median(ours)
		}
		if bin != "" {
			fmt.Fprintf(b.out, "River (MaxWorkers 10000):                     %8.0f jobs/s   rounds: %s%s\n", median(river), fmtRates(river), inserted(riverIns))
			b.target("worker-vs-river-"+mode, median(ours)/median(river), 1.5)
		}
	}

	rate, why := oursCont/2, "half of our continuous rate"
	if b.cfg.LatencyRate > 0 {
		rate, why = b.cfg.LatencyRate, "-latency-rate"
	}
	// At least LatencyWindow of inserts: a run of a second (n/2 jobs at
	// 21k/s) ended before a plan made on the empty table could show its
	// cost as the table grew (docs/adr/0053).
	jobs := max(n/2, int(rate*b.cfg.LatencyWindow.Seconds()))
	if b.cfg.LatencyJobs > 0 {
		jobs = b.cfg.LatencyJobs
	}
	return b.startLatency(ctx, bin, jobs, rate, why)
}

// startLatency is the enqueue -> handler start line: both sides insert n
// jobs at rate (why: half of our continuous rate, or -latency-rate) with no backlog, in Rounds
// alternating rounds; the medians over the rounds of each side's p50 and
// p99 are printed, from the commit (the target) and from created_at.
func (b *bench) startLatency(ctx context.Context, bin string, n int, rate float64, why string) error {
	fmt.Fprintf(b.out, "\n== enqueue -> handler start, no backlog, inserted at %.0f jobs/s (%s), %d jobs, medians of %d rounds%s ==\n",
		rate, why, n, b.cfg.Rounds, fewRounds(b.cfg.Rounds))
	fmt.Fprintln(b.out, "from commit: from the return of the insert call that committed the job (what a worker can see); "+
		"from created_at: from the start of the inserter's transaction (its own batch up to the commit counts too)")
	type side struct{ p50, p99, c50, c99, ins []float64 }
	var ours, river side
	add := func(sd *side, run sideRun) {
		sd.p50, sd.p99 = append(sd.p50, msf(run.lats[0])), append(sd.p99, msf(run.lats[1]))
		sd.c50, sd.c99 = append(sd.c50, msf(run.lats[2])), append(sd.c99, msf(run.lats[3]))
		sd.ins = append(sd.ins, run.insertRate)
	}
	for r := range b.cfg.Rounds {
		for _, isOurs := range []bool{r%2 == 0, r%2 == 1} {
			if !isOurs && bin == "" {
				continue
			}
			if isOurs {
				run, err := b.oursRun(ctx, "latency", n, rate)
				if err != nil {
					return err
				}
				add(&ours, run)
			} else {
				run, err := b.riverRun(ctx, bin, "latency", n, rate)
				if err != nil {
					return err
				}
				add(&river, run)
			}
		}
	}
	show := func(name string, sd side) {
		fmt.Fprintf(b.out, "%-17s from commit p50 %.1fms p99 %.1fms   from created_at p50 %.1fms p99 %.1fms   p50 rounds: %s   insert rate reached: %.0f jobs/s\n",
			name+":", median(sd.p50), median(sd.p99), median(sd.c50), median(sd.c99), fmtMs(sd.p50), median(sd.ins))
	}
	show("pgbackoff Worker", ours)
	if bin != "" {
		show("River", river)
	}
	b.targetAtMost("worker-continuous-start-p50-ms", median(ours.p50), 5)
	return nil
}

// fewRounds notes a round count below what the River targets ask for.
func fewRounds(rounds int) string {
	if rounds >= 3 {
		return ""
	}
	return " (the targets ask for at least 3: -rounds 3)"
}

func msf(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

func fmtMs(xs []float64) string {
	s := make([]string, len(xs))
	for i, x := range xs {
		s[i] = strconv.FormatFloat(x, 'f', 1, 64)
	}
	return strings.Join(s, " ")
}

// sideRun is one run of one side (ours or River) in one mode.
type sideRun struct {
	rate       float64         // jobs/s: all of them (burndown) or the window's (continuous)
	inserted   int             // continuous: jobs inserted during the window
	lats       []time.Duration // latency: p50 and p99 from the commit, then from created_at
	insertRate float64         // latency: the insert rate reached
}

// oursRun is one run of our Worker in mode on a fresh database.
func (b *bench) oursRun(ctx context.Context, mode string, n int, rate float64) (sideRun, error) {
	db, drop, err := b.freshDatabase(ctx)
	if err != nil {
		return sideRun{}, err
	}
	defer drop()
	switch mode {
	case "burndown":
		res, err := runWorkers(ctx, b.cfg, db, 1, n)
		return sideRun{rate: res.rate()}, err
	case "continuous":
		res, k, err := runWorkerContinuous(ctx, b.cfg, db, n, rate)
		return sideRun{rate: res.rate(), inserted: k}, err
	default:
		res, err := runWorkerLatency(ctx, b.cfg, db, n, rate)
		return sideRun{lats: []time.Duration{pctDur(res.fromCommit, 0.5), pctDur(res.fromCommit, 0.99),
			pctDur(res.fromCreated, 0.5), pctDur(res.fromCreated, 0.99)}, insertRate: res.insertRate}, err
	}
}

// riverRun is one run of the River binary in mode on a fresh database.
func (b *bench) riverRun(ctx context.Context, bin, mode string, n int, rate float64) (sideRun, error) {
	name := "bench_river_" + randomSuffix()
	if _, err := b.admin.Exec(ctx, "CREATE DATABASE "+name); err != nil {
		return sideRun{}, err
	}
	defer func() { _, _ = b.admin.Exec(context.Background(), "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)") }()
	cmd := exec.CommandContext(ctx, bin, "-database-url", withDatabase(b.adminURL, name), "-jobs", strconv.Itoa(n),
		"-mode", mode, "-rate", strconv.FormatFloat(rate, 'f', 0, 64))
	out, err := cmd.Output()
	if err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			err = fmt.Errorf("%w: %s", err, bytes.TrimSpace(ee.Stderr))
		}
		return sideRun{}, fmt.Errorf("river run: %w", err)
	}
	var run sideRun
	if run.rate, err = parseRiver(out); err != nil {
		return sideRun{}, err
	}
	switch mode {
	case "continuous":
		k, err := parseRiverField(out, "inserted=")
		if err != nil {
			return sideRun{}, err
		}
		run.inserted = int(k)
	case "latency":
		for _, key := range []string{"latency_p50_ms=", "latency_p99_ms=", "created_p50_ms=", "created_p99_ms="} {
			v, err := parseRiverField(out, key)
			if err != nil {
				return sideRun{}, err
			}
			run.lats = append(run.lats, time.Duration(v*float64(time.Millisecond)))
		}
		if run.insertRate, err = parseRiverField(out, "insert_jobs_per_s="); err != nil {
			return sideRun{}, err
		}
	}
	return run, nil
}

func parseRiver(out []byte) (float64, error) {
	return parseRiverField(out, "work_jobs_per_s=")
}

func parseRiverField(out []byte, key string) (float64, error) {
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		for _, f := range strings.Fields(sc.Text()) {
			if v, ok := strings.CutPrefix(f, key); ok {
				return strconv.ParseFloat(v, 64)
			}
		}
	}
	return 0, fmt.Errorf("no %s in River's output %q", key, out)
}

func fmtRates(xs []float64) string {
	s := make([]string, len(xs))
	for i, x := range xs {
		s[i] = strconv.FormatFloat(x, 'f', 0, 64)
	}
	return strings.Join(s, " ")
}

func metMiss(ok bool) string {
	if ok {
		return "met"
	}
	return "MISS"
}

// --- claim latency by backlog ---------------------------------------------

// latency claims (and completes) one job at a time with one client and
// returns the claim latencies.
func latency(ctx context.Context, db *database, samples int) ([]time.Duration, error) {
	conn, err := db.pool.Acquire(ctx)
	if err != nil {
		return nil, err
	}
	defer conn.Release()
	lat := make([]time.Duration, 0, samples)
	for i := 0; i < samples+50; i++ {
		t := time.Now()
		c, err := queryClaimed(ctx, conn, `SELECT id, attempts, payload FROM backoff.claim($1::text, $2::text, 1)`, queue, "bench-worker")
		d := time.Since(t)
		if err != nil || len(c.ids) == 0 {
			return nil, fmt.Errorf("claim: %v (%d rows)", err, len(c.ids))
		}
		if _, err := conn.Exec(ctx, `SELECT backoff.complete($1::bigint, $2::integer)`, c.ids[0], c.attempts[0]); err != nil {
			return nil, err
		}
		if i >= 50 { // the first calls plan and warm the cache
			lat = append(lat, d)
		}
	}
	return lat, nil
}

func percentile(ds []time.Duration, p float64) time.Duration {
	s := append([]time.Duration(nil), ds...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	return s[min(len(s)-1, int(p*float64(len(s))))]
}

func (b *bench) scaling(ctx context.Context) error {
	fmt.Fprintf(b.out, "\n== claim latency by backlog (1 client, claim 1 + complete, %d samples; table vacuumed and analyzed after loading) ==\n", b.cfg.Samples)
	fmt.Fprintf(b.out, "%-36s %10s %10s %10s %8s\n", "backlog", "p50", "p99", "max", "load s")
	type point struct {
		label    string
		due, fin int
	}
	var pts []point
	for _, n := range b.cfg.Backlogs {
		pts = append(pts, point{label: fmt.Sprintf("%d due", n), due: n})
	}
	pts = append(pts, point{label: fmt.Sprintf("%d due + %d finished", b.cfg.Backlogs[0], b.cfg.Finished), due: b.cfg.Backlogs[0], fin: b.cfg.Finished})
	var p99s []time.Duration
	for _, p := range pts {
		db, drop, err := b.freshDatabase(ctx)
		if err != nil {
			return err
		}
		t := time.Now()
		if p.fin > 0 {
			if _, err := db.pool.Exec(ctx, `INSERT INTO backoff.jobs (queue, payload, policy, status, attempts, run_at, created_at, last_attempted_at, completed_at, segment)
				SELECT $1, '{}', 'default', 'completed', 1, now() - interval '1 hour', now() - interval '1 hour', now() - interval '1 hour', now() - interval '1 hour', 0
				FROM generate_series(1, $2)`, queue, p.fin); err != nil {
				drop()
				return fmt.Errorf("load finished rows: %w", err)
			}
		}
		if err := loadDue(ctx, db, p.due); err != nil {
			drop()
			return err
		}
		load := time.Since(t)
		lat, err := latency(ctx, db, b.cfg.Samples)
		drop()
		if err != nil {
			return err
		}
		p99 := percentile(lat, 0.99)
		if p.fin == 0 {
			p99s = append(p99s, p99)
		}
		fmt.Fprintf(b.out, "%-36s %10s %10s %10s %8.0f\n", p.label, us(percentile(lat, 0.5)), us(p99), us(percentile(lat, 1)), load.Seconds())
	}
	r := float64(p99s[len(p99s)-1]) / float64(p99s[0])
	fmt.Fprintf(b.out, "p99(%d due) / p99(%d due) = %.2f (target <= 1.5: %s)\n", b.cfg.Backlogs[len(b.cfg.Backlogs)-1], b.cfg.Backlogs[0], r, metMiss(r <= 1.5))
	return nil
}

// loadDue inserts n due jobs in chunks (so that a 10M load does not hold
// one huge transaction), then vacuums and analyzes.
func loadDue(ctx context.Context, db *database, n int) error {
	const chunk = 1_000_000
	for done := 0; done < n; done += chunk {
		k := min(chunk, n-done)
		if _, err := db.pool.Exec(ctx, `INSERT INTO backoff.jobs (queue, payload, policy, run_at, created_at, segment)
			SELECT $1, '{}', 'default', now() - interval '1 minute', now() - interval '1 minute', `+currentSegment+`
			FROM generate_series(1, $2)`, queue, k); err != nil {
			return fmt.Errorf("load %d due jobs: %w", n, err)
		}
	}
	return settle(ctx, db, oursTable)
}

func us(d time.Duration) string {
	return fmt.Sprintf("%.0fµs", float64(d)/float64(time.Microsecond))
}

// --- what limits throughput: CPU and wait events ----------------------------

// cpuTimes reads the machine's busy and total jiffies from /proc/stat.
func cpuTimes() (busy, total uint64, ok bool) {
	data, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0, 0, false
	}
	f := strings.Fields(strings.SplitN(string(data), "\n", 2)[0])
	if len(f) < 5 || f[0] != "cpu" {
		return 0, 0, false
	}
	for i, v := range f[1:] {
		x, _ := strconv.ParseUint(v, 10, 64)
		total += x
		if i != 3 && i != 4 { // idle, iowait
			busy += x
		}
	}
	return busy, total, true
}

// profile runs claim+complete 1/tx (ours) with 1 and 8 clients while
// sampling the machine's CPU use and the backends' wait events.
func (b *bench) profile(ctx context.Context) error {
	fmt.Fprintf(b.out, "\n== what limits throughput: machine CPU busy and wait events of the benchmark's active backends, sampled every 5ms ==\n")
	db, drop, err := b.freshDatabase(ctx)
	if err != nil {
		return err
	}
	defer drop()
	type probe struct {
		name  string
		n     int
		table string
		seed  bool
		mk    makeStep
	}
	probes := []probe{
		{"claim+complete 1/tx, ours", 1, oursTable, true, fixed(oursClaimComplete)},
		{"claim+complete 1/tx, ours", 8, oursTable, true, fixed(oursClaimComplete)},
		{"claim+complete 1/tx, limit", 8, rawTable, true, fixed(rawClaimComplete)},
		{"enqueue 1/tx, ours", 8, oursTable, false, fixed(oursEnqueue)},
		{"enqueue 1/tx, limit", 8, rawTable, false, fixed(rawEnqueue)},
	}
	for _, p := range probes {
		n := p.n
		if err := truncate(ctx, db); err != nil {
			return err
		}
		if p.seed {
			if err := seedDue(ctx, db, p.table, int(9000*b.cfg.RunFor.Seconds()*2), 0); err != nil {
				return err
			}
		}
		waits := map[string]int{}
		samples := 0
		stop := make(chan struct{})
		var wg sync.WaitGroup
		wg.Add(1)
		mon, err := pgxpool.New(ctx, b.adminURL)
		if err != nil {
			return err
		}
		go func() {
			defer wg.Done()
			t := time.NewTicker(5 * time.Millisecond)
			defer t.Stop()
			for {
				select {
				case <-stop:
					return
				case <-t.C:
				}
				rows, err := mon.Query(ctx, `SELECT coalesce(wait_event_type || ':' || wait_event, 'CPU') FROM pg_stat_activity
					WHERE datname = $1 AND state = 'active' AND backend_type = 'client backend'`, db.name)
				if err != nil {
					return
				}
				for rows.Next() {
					var w string
					if rows.Scan(&w) == nil {
						waits[w]++
						samples++
					}
				}
				rows.Close()
			}
		}()
		b0, t0, _ := cpuTimes()
		res, err := runClients(ctx, db.pool, n, 2*b.cfg.RunFor, 0, p.mk)
		b1, t1, ok := cpuTimes()
		close(stop)
		wg.Wait()
		mon.Close()
		if err != nil {
			return err
		}
		cpu := "n/a"
		if ok && t1 > t0 {
			cpu = fmt.Sprintf("%.0f%%", 100*float64(b1-b0)/float64(t1-t0))
		}
		type kv struct {
			k string
			v int
		}
		var top []kv
		for k, v := range waits {
			top = append(top, kv{k, v})
		}
		sort.Slice(top, func(i, j int) bool { return top[i].v > top[j].v })
		var parts []string
		for i, e := range top {
			if i == 6 {
				break
			}
			parts = append(parts, fmt.Sprintf("%s %.0f%%", e.k, 100*float64(e.v)/float64(max(samples, 1))))
		}
		fmt.Fprintf(b.out, "%-27s %2d clients: %6.0f jobs/s, machine CPU busy %s; active backends: %s\n", p.name, n, res.rate(), cpu, strings.Join(parts, ", "))
	}
	return nil
}
