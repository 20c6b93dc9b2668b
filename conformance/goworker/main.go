// Command goworker is the Go adapter of the conformance suite
// (conformance/README.md): a client.Worker on one queue whose handler does
// what each job's payload says. It runs until SIGTERM or SIGINT, shuts
// down as the Worker does and exits 0.
//
//	goworker DATABASE_URL SETTINGS_JSON
package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pgbackoff/pgbackoff/client"
)

// settings are a scenario's worker settings (conformance/scenarios.json);
// 0 leaves the Worker's default.
type settings struct {
	Queue       string `json:"queue"`
	Language    string `json:"language"`
	Concurrency int    `json:"concurrency"`
	LeaseMS     int    `json:"lease_ms"`
	HeartbeatMS int    `json:"heartbeat_ms"`
	PollMS      int    `json:"poll_ms"`
	ReapMS      int    `json:"reap_ms"`
	ShutdownMS  int    `json:"shutdown_ms"`
	// Queues, when set, are served beside Queue by the same Worker, each
	// with the same handler and limits (the idle-cost benchmark's 10
	// queues).
	Queues []string `json:"queues"`
}

type payload struct {
	Steps []string `json:"steps"`
	// Name is the job's name in its scenario or graph, which the output
	// steps record.
	Name string `json:"name"`
}

// parentOutput is one parent as the fan_in step records it.
type parentOutput struct {
	Status string          `json:"status"`
	Output json.RawMessage `json:"output"`
}

func main() { os.Exit(run()) }

func run() int {
	if len(os.Args) != 3 {
		fmt.Fprintln(os.Stderr, "usage: goworker DATABASE_URL SETTINGS_JSON")
		return 2
	}
	var s settings
	if err := json.Unmarshal([]byte(os.Args[2]), &s); err != nil {
		fmt.Fprintf(os.Stderr, "goworker: settings: %v\n", err)
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	pc, err := pgxpool.ParseConfig(os.Args[1])
	if err != nil {
		fmt.Fprintf(os.Stderr, "goworker: %v\n", err)
		return 2
	}
	// The Worker needs a connection per queue's claims beside the
	// completer, the reaper and LISTEN.
	pc.MaxConns = max(pc.MaxConns, int32(len(s.Queues)+5))
	pool, err := pgxpool.NewWithConfig(context.Background(), pc)
	if err != nil {
		fmt.Fprintf(os.Stderr, "goworker: %v\n", err)
		return 1
	}
	defer pool.Close()

	c, err := client.New(context.Background(), pool)
	if err != nil {
		fmt.Fprintf(os.Stderr, "goworker: %v\n", err)
		return 1
	}
	h := handler{pool: pool, client: c, language: s.Language}
	cfg := client.WorkerConfig{
		Queue:             s.Queue,
		Handler:           h.handle,
		Concurrency:       s.Concurrency,
		Lease:             ms(s.LeaseMS),
		HeartbeatInterval: ms(s.HeartbeatMS),
		PollInterval:      ms(s.PollMS),
		ReapInterval:      ms(s.ReapMS),
		ShutdownTimeout:   ms(s.ShutdownMS),
	}
	if len(s.Queues) > 0 {
		for _, q := range append([]string{s.Queue}, s.Queues...) {
			cfg.Queues = append(cfg.Queues, client.QueueConfig{
				Queue: q, Handler: h.handle, Concurrency: s.Concurrency,
				Lease: ms(s.LeaseMS), HeartbeatInterval: ms(s.HeartbeatMS),
			})
		}
		cfg.Queue, cfg.Handler, cfg.Concurrency, cfg.Lease, cfg.HeartbeatInterval = "", nil, 0, 0, 0
	}
	if err := directShards(&cfg); err != nil {
		fmt.Fprintf(os.Stderr, "goworker: %v\n", err)
		return 2
	}
	w, err := client.NewWorker(pool, cfg)
	if err != nil {
		fmt.Fprintf(os.Stderr, "goworker: %v\n", err)
		return 1
	}
	if err := w.Run(ctx); err != nil && !errors.Is(err, context.Canceled) {
		fmt.Fprintf(os.Stderr, "goworker: %v\n", err)
		return 1
	}
	return 0
}

// directShards is the one place where BACKOFF_DIRECT_SHARDS=1 (the
// sharded conformance run) gives the Worker the direct shard mode, where
// it reads the router's layout and calls each queue's shard itself.
func directShards(cfg *client.WorkerConfig) error {
	switch os.Getenv("BACKOFF_DIRECT_SHARDS") {
	case "", "0":
		return nil
	case "1":
		cfg.DirectShards = true
		return nil
	default:
		return fmt.Errorf("BACKOFF_DIRECT_SHARDS=%q: want 1 or 0", os.Getenv("BACKOFF_DIRECT_SHARDS"))
	}
}

func ms(n int) time.Duration { return time.Duration(n) * time.Millisecond }

type handler struct {
	pool     *pgxpool.Pool
	client   *client.Client
	language string
}

// handle records its side effect, then does the payload's step for this
// attempt: the step at index token-1, the last one past the end.
func (h handler) handle(ctx context.Context, job *client.Job) error {
	var p payload
	if err := json.Unmarshal(job.Payload, &p); err != nil || len(p.Steps) == 0 {
		return client.Permanent(fmt.Errorf("conformance: bad payload %s", job.Payload))
	}
	step := p.Steps[min(job.Token, len(p.Steps))-1]
	if step == "noop" {
		return nil // the benchmarks' handler: no side effect to record
	}
	if _, err := h.pool.Exec(ctx, `INSERT INTO conformance_effects (job_id, attempt, language, step) VALUES ($1, $2, $3, $4)`,
		job.ID, job.Token, h.language, step); err != nil {
		return fmt.Errorf("conformance: record side effect: %w", err)
	}
	kind, arg := splitStep(step)
	msg := fmt.Sprintf("conformance: %s at attempt %d", kind, job.Token)
	switch kind {
	case "ok":
		return nil
	case "output":
		return client.SetOutput(ctx, map[string]string{"name": p.Name})
	case "big_output":
		return client.SetOutput(ctx, map[string]string{"name": p.Name, "pad": strings.Repeat("x", 300)})
	case "fan_in":
		parents, err := h.client.ParentOutputs(ctx, job.ID)
		if err != nil {
			return fmt.Errorf("conformance: read the parents: %w", err)
		}
		out := make([]parentOutput, len(parents))
		for i, p := range parents {
			out[i] = parentOutput{Status: string(p.Status), Output: p.Output}
			if p.Output == nil {
				out[i].Output = json.RawMessage("null")
			}
		}
		return client.SetOutput(ctx, map[string]any{"parents": out})
	case "fail":
		return errors.New(msg)
	case "permanent":
		return client.Permanent(errors.New(msg))
	case "retry_after":
		return client.RetryAfter(errors.New(msg), ms(arg))
	case "snooze":
		return client.Snooze(ms(arg))
	case "throw":
		panic(msg)
	case "hang":
		time.Sleep(ms(arg)) // ignores ctx on purpose: the scenario is a handler that does
		return nil
	case "wait_cancel":
		select {
		case <-ctx.Done():
			// Not the cause's text: the worker must say "worker shutdown" itself.
			return errors.New(msg + ": cancelled")
		case <-time.After(10 * time.Second):
			return errors.New(msg + ": never cancelled")
		}
	}
	return client.Permanent(fmt.Errorf("conformance: unknown step %q", step))
}

// splitStep splits "retry_after:50" into ("retry_after", 50).
func splitStep(step string) (string, int) {
	for i := 0; i < len(step); i++ {
		if step[i] == ':' {
			var n int
			_, _ = fmt.Sscanf(step[i+1:], "%d", &n)
			return step[:i], n
		}
	}
	return step, 0
}
