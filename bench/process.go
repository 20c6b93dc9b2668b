package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pgbackoff/pgbackoff/client"
)

// Worker processes: the "workers, a process each" line runs every Worker in
// an OS process of its own, as a deployment of several worker processes
// would, each with its own pool, runtime and garbage collector. The parent
// re-executes its own binary (the bench binary, or the test binary in the
// package test) with workerProcessEnv set; processMain, called first by
// main and TestMain, then runs one Worker instead of the benchmark:
//
//	parent                         child (one per Worker)
//	start, env = settings   ->     connect, NewWorker, print "ready"
//	write "go" (clock starts) ->   Run on the queue
//	count completions in the database until all n are completed (clock stops)
//	close stdin             ->     stop Run (the completer flushes), exit 0
const workerProcessEnv = "PGBACKOFF_BENCH_WORKER_PROCESS"

// processSettings is what a worker process is told through its environment.
type processSettings struct {
	url         string
	id          string
	concurrency int
	batch       int
}

func (s processSettings) env() string {
	return strings.Join([]string{s.id, strconv.Itoa(s.concurrency), strconv.Itoa(s.batch), s.url}, " ")
}

func parseProcessSettings(v string) (processSettings, error) {
	f := strings.SplitN(v, " ", 4)
	if len(f) != 4 {
		return processSettings{}, fmt.Errorf("%s: want \"ID CONCURRENCY BATCH URL\", got %q", workerProcessEnv, v)
	}
	c, err1 := strconv.Atoi(f[1])
	b, err2 := strconv.Atoi(f[2])
	if err := errors.Join(err1, err2); err != nil {
		return processSettings{}, fmt.Errorf("%s: %w", workerProcessEnv, err)
	}
	return processSettings{id: f[0], concurrency: c, batch: b, url: f[3]}, nil
}

// processMain runs a worker process and exits when workerProcessEnv is set;
// otherwise it returns at once.
func processMain() {
	v := os.Getenv(workerProcessEnv)
	if v == "" {
		return
	}
	if err := runWorkerProcess(v, os.Stdin, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "bench worker process:", err)
		os.Exit(1)
	}
	os.Exit(0)
}

func runWorkerProcess(v string, in io.Reader, out io.Writer) error {
	s, err := parseProcessSettings(v)
	if err != nil {
		return err
	}
	ctx := context.Background()
	pc, err := pgxpool.ParseConfig(s.url)
	if err != nil {
		return err
	}
	pc.MaxConns = 10
	pool, err := pgxpool.NewWithConfig(ctx, pc)
	if err != nil {
		return err
	}
	defer pool.Close()
	if err := pool.Ping(ctx); err != nil {
		return err
	}
	noop := func(context.Context, *client.Job) error { return nil }
	w, err := client.NewWorker(pool, client.WorkerConfig{Queue: queue, Handler: noop,
		Concurrency: s.concurrency, BatchSize: s.batch, ReapInterval: -1, HeartbeatInterval: -1},
		client.WithLogger(discard), client.WithWorkerID(s.id))
	if err != nil {
		return err
	}
	fmt.Fprintln(out, "ready")
	lines := bufio.NewScanner(in)
	if !lines.Scan() || lines.Text() != "go" {
		return nil // the parent gave up before the start
	}
	runCtx, cancel := context.WithCancel(ctx)
	ran := make(chan error, 1)
	go func() { ran <- w.Run(runCtx) }()
	for lines.Scan() {
	}
	cancel() // stdin closed: the run is over
	if err := <-ran; err != nil && !errors.Is(err, context.Canceled) {
		return err
	}
	return nil
}

// runWorkerProcesses pre-inserts n jobs and works them with procs worker
// processes on the same queue; the time runs from "go" until the database
// shows all n completed (the parent polls it every 10 ms with a look-up on
// the two partial indexes, which find no row once all are done; the probe
// walks the index entries of the rows already claimed, about 250 buffers
// a call at 40,000 jobs, so polling every 2 ms took a few per cent of the
// server's CPU from the Workers, which the raw loop, counting in-process,
// does not pay).
func runWorkerProcesses(ctx context.Context, cfg Config, db *database, procs, n int) (result, error) {
	if err := seedQueues(ctx, db, n, 1); err != nil {
		return result{}, err
	}
	exe, err := os.Executable()
	if err != nil {
		return result{}, err
	}
	type child struct {
		cmd   *exec.Cmd
		stdin io.WriteCloser
		out   *bufio.Scanner
	}
	var children []child
	defer func() {
		for _, c := range children {
			_ = c.stdin.Close()
			_ = c.cmd.Wait()
		}
	}()
	for i := range procs {
		cmd := exec.CommandContext(ctx, exe)
		s := processSettings{url: db.url, id: fmt.Sprintf("bench-proc-%d", i), concurrency: cfg.WorkerConcurrency, batch: cfg.WorkerBatch}
		cmd.Env = append(os.Environ(), workerProcessEnv+"="+s.env())
		cmd.Stderr = os.Stderr
		stdin, err := cmd.StdinPipe()
		if err != nil {
			return result{}, err
		}
		stdout, err := cmd.StdoutPipe()
		if err != nil {
			return result{}, err
		}
		if err := cmd.Start(); err != nil {
			return result{}, fmt.Errorf("start worker process: %w", err)
		}
		children = append(children, child{cmd: cmd, stdin: stdin, out: bufio.NewScanner(stdout)})
	}
	for i, c := range children {
		if !c.out.Scan() || c.out.Text() != "ready" {
			return result{}, fmt.Errorf("worker process %d did not start (see its error above)", i)
		}
	}
	start := time.Now()
	for _, c := range children {
		if _, err := io.WriteString(c.stdin, "go\n"); err != nil {
			return result{}, err
		}
	}
	deadline := time.Now().Add(10 * time.Minute)
	for {
		var left bool
		err := db.pool.QueryRow(ctx, `SELECT EXISTS (SELECT FROM backoff.jobs WHERE status IN ('pending', 'retrying') AND queue = $1)
			OR EXISTS (SELECT FROM backoff.jobs WHERE lease_until IS NOT NULL)`, queue).Scan(&left)
		if err != nil {
			return result{}, fmt.Errorf("count completions: %w", err)
		}
		if !left {
			break
		}
		if time.Now().After(deadline) {
			return result{}, errors.New("worker processes: not done after 10 minutes")
		}
		time.Sleep(10 * time.Millisecond)
	}
	elapsed := time.Since(start)
	for i, c := range children {
		_ = c.stdin.Close()
		if err := c.cmd.Wait(); err != nil {
			children = children[i+1:]
			return result{}, fmt.Errorf("worker process %d: %w", i, err)
		}
	}
	children = nil
	return checkCompleted(ctx, db, n, elapsed)
}
