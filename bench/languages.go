package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"time"

	"github.com/pgbackoff/pgbackoff/internal/conformance"
)

// languages runs each language's worker (the conformance suite's adapters:
// the Go Worker, the Python Worker, the TypeScript Worker, each a process
// of its own with the same settings) on the same number of no-op jobs, in
// alternating rounds, and records the Python and TypeScript rates as
// ratios to Go's. The rate is read from the database: jobs over the span
// from the first claim to the last completion, so a runtime's start-up
// does not count. Without Node.js or psycopg the section says so and
// records no target.
func (b *bench) languages(ctx context.Context) error {
	n := b.cfg.LanguageJobs
	const concurrency = 100
	fmt.Fprintf(b.out, "\n== one worker per language, one process each (%d no-op jobs, Concurrency %d; medians of %d rounds) ==\n",
		n, concurrency, b.cfg.Rounds)
	root, err := repoRoot()
	if err != nil {
		return err
	}
	dir, err := os.MkdirTemp("", "pgbackoff-bench-languages-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	adapters, err := conformance.Build(ctx, root, dir)
	if errors.Is(err, conformance.ErrMissingTool) {
		fmt.Fprintf(b.out, "skipped: %v\n", err)
		return nil
	}
	if err != nil {
		return fmt.Errorf("build the language adapters: %w", err)
	}
	rates := map[string][]float64{}
	for r := range b.cfg.Rounds {
		for i := range adapters {
			a := adapters[(i+r)%len(adapters)] // each round starts with another language
			rate, err := b.languageRun(ctx, a, n, concurrency)
			if err != nil {
				return fmt.Errorf("%s worker: %w", a.Language, err)
			}
			rates[a.Language] = append(rates[a.Language], rate)
		}
	}
	for _, a := range adapters {
		fmt.Fprintf(b.out, "%-11s %8.0f jobs/s   rounds: %s\n", a.Language, median(rates[a.Language]), fmtRates(rates[a.Language]))
	}
	goRate := median(rates["go"])
	b.target("python-vs-go", ratioOf(median(rates["python"]), goRate), 0.5)
	b.target("typescript-vs-go", ratioOf(median(rates["typescript"]), goRate), 0.5)
	return nil
}

// languageRun enqueues n no-op jobs into a fresh database, runs one worker
// of the adapter's language until they are completed and returns its rate.
func (b *bench) languageRun(ctx context.Context, a conformance.Adapter, n, concurrency int) (float64, error) {
	db, drop, err := b.freshDatabase(ctx)
	if err != nil {
		return 0, err
	}
	defer drop()
	const queue = "languages"
	if _, err := db.pool.Exec(ctx, `SELECT backoff.enqueue(p_queues => array_fill('languages'::text, ARRAY[$1::int]),
		p_payloads => array_fill('{"steps": ["noop"]}'::jsonb, ARRAY[$1::int]), p_run_ats => NULL::timestamptz[],
		p_max_attempts => NULL::integer[], p_priorities => NULL::integer[], p_dedupe_keys => NULL::text[])`, n); err != nil {
		return 0, fmt.Errorf("enqueue: %w", err)
	}
	settings, err := json.Marshal(map[string]any{"queue": queue, "language": a.Language, "concurrency": concurrency, "poll_ms": 100})
	if err != nil {
		return 0, err
	}
	cmd := a.Command(db.url, string(settings))
	out := &limitedOutput{}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		return 0, err
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	defer func() {
		if cmd.ProcessState == nil {
			_ = cmd.Process.Kill()
			<-exited
		}
	}()
	deadline := time.Now().Add(10 * time.Minute)
	for {
		var left int
		if err := db.pool.QueryRow(ctx, `SELECT count(*) FROM backoff.jobs WHERE queue = $1 AND status <> 'completed'`, queue).Scan(&left); err != nil {
			return 0, err
		}
		if left == 0 {
			break
		}
		select {
		case err := <-exited:
			return 0, fmt.Errorf("exited with %d jobs left (%v):\n%s", left, err, out)
		case <-ctx.Done():
			return 0, ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return 0, fmt.Errorf("%d jobs left after 10 minutes", left)
		}
	}
	_ = cmd.Process.Signal(syscall.SIGTERM)
	if err := <-exited; err != nil {
		return 0, fmt.Errorf("exit after SIGTERM: %w\n%s", err, out)
	}
	var span float64
	if err := db.pool.QueryRow(ctx, `SELECT extract(epoch FROM max(completed_at) - min(last_attempted_at))::float8 FROM backoff.jobs WHERE queue = $1`, queue).Scan(&span); err != nil {
		return 0, err
	}
	if span <= 0 {
		return 0, fmt.Errorf("no time between the first claim and the last completion")
	}
	return float64(n) / span, nil
}

// repoRoot is the checkout's root: the directory above the working
// directory that holds conformance/scenarios.json (go run ./bench runs in
// the root, the package's tests in bench/).
func repoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "conformance", "scenarios.json")); err == nil {
			return dir, nil
		}
		up := filepath.Dir(dir)
		if up == dir {
			return "", errors.New("the per-language lines need the checkout (conformance/): run the bench from it")
		}
		dir = up
	}
}

// limitedOutput keeps the first 64 KiB a worker process prints, for an
// error message.
type limitedOutput struct{ b []byte }

func (l *limitedOutput) Write(p []byte) (int, error) {
	if room := 64<<10 - len(l.b); room > 0 {
		l.b = append(l.b, p[:min(len(p), room)]...)
	}
	return len(p), nil
}

func (l *limitedOutput) String() string { return string(l.b) }
