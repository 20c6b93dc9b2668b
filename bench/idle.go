package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/pgbackoff/pgbackoff/internal/conformance"
)

// The idle-cost budget: what a Worker with nothing to do costs the
// database. A deployment runs Workers all day on queues that are empty most
// of it, so each one's idle statements are a floor under the server's load.
const (
	idleQueues     = 10
	idleSchedules  = 100
	idleBudgetPerS = 2.0 // statements per second per Worker process
)

// idle starts each language's Worker (the conformance adapters, one
// process each) alone on a fresh database, serving 10 empty queues that
// 100 hourly schedules, none due within the run, point at, with the
// default intervals (poll, reap and rotate, fire_schedules, LISTEN), and
// idleWarmup is the wait before the idle window: longer than the 10 s a
// PostgreSQL backend that went idle may hold its statistics before it
// reports them (PGSTAT_IDLE_INTERVAL), so that the start-up's claims of an
// idle Worker's connections, reported late, do not count in the window.
const idleWarmup = 15 * time.Second

// counts what it sends over IdleWindow after IdleWarmup:
//
//   - statements per second: the database's xact_commit + xact_rollback
//     delta in pg_stat_database. Nothing else connects to that database
//     (the bench samples from its own), every call of the Workers outside
//     an explicit transaction is one transaction, and backends report their
//     counts up to a few seconds late, which a minute's window mostly
//     absorbs;
//   - the CPU the Worker's backends used (utime + stime from /proc, when
//     the server runs on this machine) and the CPU of the Worker's own
//     process, as a share of one core;
//   - with -pg-stat-statements, every statement's calls in the window.
func (b *bench) idle(ctx context.Context) error {
	fmt.Fprintf(b.out, "\n== idle cost: one Worker on %d queues, %d hourly schedules none due, default intervals; %s after %s ==\n",
		idleQueues, idleSchedules, b.cfg.IdleWindow, b.cfg.IdleWarmup)
	root, err := repoRoot()
	if err != nil {
		return err
	}
	dir, err := os.MkdirTemp("", "pgbackoff-bench-idle-")
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
	for _, a := range adapters {
		rate, err := b.idleRun(ctx, a)
		if err != nil {
			return fmt.Errorf("%s worker: %w", a.Language, err)
		}
		b.targetAtMost("idle-statements-per-s-"+a.Language, rate, idleBudgetPerS)
	}
	return nil
}

// idleRun measures one Worker and returns its statements per second.
func (b *bench) idleRun(ctx context.Context, a conformance.Adapter) (float64, error) {
	db, drop, err := b.freshDatabase(ctx)
	if err != nil {
		return 0, err
	}
	defer drop()
	names := make([]string, idleQueues)
	for i := range names {
		names[i] = fmt.Sprintf("idle-%d", i)
	}
	// The first slot of an hourly schedule put now is an hour away.
	if _, err := db.pool.Exec(ctx, `SELECT count(backoff.put_schedule('idle-' || i, 'idle-' || (i % $2), p_every => '1 hour',
		p_payload => '{"steps": ["noop"]}')) FROM generate_series(1, $1::integer) AS i`, idleSchedules, idleQueues); err != nil {
		return 0, fmt.Errorf("put schedules: %w", err)
	}
	statements := b.idleStatementsReady(ctx)
	db.pool.Close() // the Worker alone on the database from here

	settings, err := json.Marshal(map[string]any{"queue": names[0], "queues": names[1:], "language": a.Language})
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
	wait := func(d time.Duration) error {
		select {
		case err := <-exited:
			return fmt.Errorf("exited (%v):\n%s", err, out)
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(d):
			return nil
		}
	}
	if err := wait(b.cfg.IdleWarmup); err != nil {
		return 0, err
	}
	x0, err := b.xacts(ctx, db.name)
	if err != nil {
		return 0, err
	}
	pids, err := b.backendPIDs(ctx, db.name)
	if err != nil {
		return 0, err
	}
	s0 := b.statementCalls(ctx, statements, db.name)
	db0, dbOK := procCPU(pids...)
	w0, wOK := procCPU(cmd.Process.Pid)
	t0 := time.Now()
	if err := wait(b.cfg.IdleWindow); err != nil {
		return 0, err
	}
	x1, err := b.xacts(ctx, db.name)
	if err != nil {
		return 0, err
	}
	pids1, err := b.backendPIDs(ctx, db.name)
	if err != nil {
		return 0, err
	}
	db1, _ := procCPU(pids1...)
	w1, _ := procCPU(cmd.Process.Pid)
	s1 := b.statementCalls(ctx, statements, db.name)
	secs := time.Since(t0).Seconds()
	_ = cmd.Process.Signal(syscall.SIGTERM)
	if err := <-exited; err != nil {
		return 0, fmt.Errorf("exit after SIGTERM: %w\n%s", err, out)
	}
	rate := float64(x1-x0) / secs
	cpu := func(ok bool, d float64) string {
		if !ok {
			return "n/a (the server is not a process of this machine)"
		}
		return fmt.Sprintf("%.2f %%", 100*d/secs)
	}
	fmt.Fprintf(b.out, "%-11s %6.2f statements/s (%d transactions in %.0f s; %d backends)   database CPU %s of a core   Worker process CPU %s\n",
		a.Language, rate, x1-x0, secs, len(pids1), cpu(dbOK, cpuDelta(db0, db1)), cpu(wOK, cpuDelta(w0, w1)))
	if statements {
		printStatementCalls(b, s0, s1, secs)
	}
	return rate, nil
}

// xacts is the database's committed and rolled-back transactions so far,
// read from the bench's own connection (another database), so reading
// counts nothing.
func (b *bench) xacts(ctx context.Context, name string) (int64, error) {
	var n int64
	err := b.admin.QueryRow(ctx, `SELECT xact_commit + xact_rollback FROM pg_stat_database WHERE datname = $1`, name).Scan(&n)
	return n, err
}

func (b *bench) backendPIDs(ctx context.Context, name string) ([]int, error) {
	rows, err := b.admin.Query(ctx, `SELECT pid FROM pg_stat_activity WHERE datname = $1 AND backend_type = 'client backend'`, name)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var pids []int
	for rows.Next() {
		var pid int
		if err := rows.Scan(&pid); err != nil {
			return nil, err
		}
		pids = append(pids, pid)
	}
	return pids, rows.Err()
}

// procCPU is the user + system CPU seconds of each process that can be
// read, from /proc/PID/stat (fields 14 and 15, in clock ticks of 1/100 s
// on Linux); false when none can be (a server in a container or
// elsewhere).
func procCPU(pids ...int) (map[int]float64, bool) {
	cpu := map[int]float64{}
	for _, pid := range pids {
		raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil {
			continue
		}
		// The command name (field 2) may hold spaces: count from its ')'.
		s := string(raw)
		f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
		if len(f) < 13 {
			continue
		}
		u, err1 := strconv.ParseInt(f[11], 10, 64)
		k, err2 := strconv.ParseInt(f[12], 10, 64)
		if err1 == nil && err2 == nil {
			cpu[pid] = float64(u+k) / 100
		}
	}
	return cpu, len(cpu) > 0
}

// cpuDelta is the CPU the processes used between two samples: a process
// seen only at the end counts whole (it started in between), one seen only
// at the start is lost (it ended in between; the Workers keep their
// connections while idle).
func cpuDelta(before, after map[int]float64) float64 {
	var d float64
	for pid, t := range after {
		d += t - before[pid]
	}
	return d
}

// idleStatementsReady creates pg_stat_statements in the bench's own
// database, whose view lists every database's statements, when the server
// loads it, and says whether it did.
func (b *bench) idleStatementsReady(ctx context.Context) bool {
	if !b.cfg.PgStatStatements {
		return false
	}
	if _, err := b.admin.Exec(ctx, "CREATE EXTENSION IF NOT EXISTS pg_stat_statements"); err != nil {
		fmt.Fprintf(b.out, "pg_stat_statements: %v\n", err)
		return false
	}
	return true
}

// statementCalls is every statement's calls so far in the database (read
// through the bench's connection).
func (b *bench) statementCalls(ctx context.Context, on bool, name string) map[string]int64 {
	if !on {
		return nil
	}
	calls := map[string]int64{}
	rows, err := b.admin.Query(ctx, `SELECT s.query, s.calls FROM pg_stat_statements s JOIN pg_database d ON d.oid = s.dbid WHERE d.datname = $1`, name)
	if err != nil {
		fmt.Fprintf(b.out, "pg_stat_statements: %v\n", err)
		return nil
	}
	defer rows.Close()
	for rows.Next() {
		var q string
		var n int64
		if rows.Scan(&q, &n) == nil {
			calls[q] += n
		}
	}
	return calls
}

func printStatementCalls(b *bench, s0, s1 map[string]int64, secs float64) {
	for q, n := range s1 {
		if d := n - s0[q]; d > 0 {
			q = strings.Join(strings.Fields(q), " ")
			if len(q) > 110 {
				q = q[:110] + "…"
			}
			fmt.Fprintf(b.out, "    %7.3f/s  %s\n", float64(d)/secs, q)
		}
	}
}
