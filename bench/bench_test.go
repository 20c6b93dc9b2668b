package main

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/pgbackoff/pgbackoff/internal/testdb"
)

// TestMain runs a worker process instead of the tests when the bench
// re-executes the test binary for one (process.go).
func TestMain(m *testing.M) {
	processMain()
	testdb.Main(m)
}

// TestEveryScenarioRuns runs the whole driver with tiny counts, so that
// the benchmark cannot rot: every scenario, ours and the limit, must do its
// work without error (each step checks what it claimed was completed or
// failed), and every section must print. The numbers mean nothing here.
// The held-snapshot section is left out (-skip mvcc): it runs for seconds
// by the clock whatever the counts, and TestMVCCSection runs it, checking
// more of its lines than this test would.
func TestEveryScenarioRuns(t *testing.T) {
	cfg := Config{Mode: "test", DatabaseURL: testdb.AdminURL(t), Skip: "mvcc"}
	require.NoError(t, cfg.setDefaults())
	var out bytes.Buffer
	require.NoError(t, run(t.Context(), cfg, &out))
	text := out.String()
	t.Log(text)
	for _, want := range []string{
		"server settings: server_version=", "fsync=", "queue grants: none",
		"enqueue 1/tx", "enqueue 100/tx (EnqueueMany)", "claim+complete 1/tx", "claim 100+complete_many",
		"claim+fail retry cycle", "reap 300 expired", "worker end to end",
		"== queue controls: ", "wal controls-claim-complete-2c: ours ", "wal controls-retry-cycle-2c: ours ",
		"what limits throughput", "1000 due", "100 due + 1000 finished", "p99(1000 due) / p99(100 due)",
		"sustained load (production shape)", "last period / first period", "enqueue -> handler start with an idle Worker",
		"== targets ==", "== targets (machine-readable) ==",
		"target enqueue-1tx-2c: ", "target enqueue-many-2c: ", "target claim-complete-1tx-sql-2c: ",
		"target claim-complete-1tx-go-2c: ", "target claim100-complete-many-sql-2c: ", "target reap-300: ",
		"target enqueue-start-idle-p50-ms: ",
		"workers, a process each", "one Worker on 4 queues vs one queue", "Go Worker, burndown", "Go Worker, continuous",
		"target workers-4-processes: ", "target multi-queue-4: ", "target worker-serializable-default: ", "target worker-continuous-start-p50-ms: ",
		"pgbackoff Worker: from commit p50 ",
		"web UI server time per page", "target ui-overview-1m: ", "target ui-jobs-page-1m: ", "target ui-dead-letters-1m: ",
		"target ui-refresh-throughput-1m: ",
		"== periodic jobs: ", "target schedules-probe-us: ", "target schedules-fire-50-ms: ", "target schedules-probe-claim-cost-pct-50: ",
		"wal enqueue-1tx-2c: ours ", "wal claim-complete-1tx-sql-2c: ours ", "wal reap-300: ours ",
	} {
		require.Contains(t, text, want)
	}
	require.NotContains(t, text, "mvcc", "-skip mvcc leaves the held-snapshot section out")
	// The per-language lines: skipped only on a machine without Node.js or
	// psycopg, never in CI.
	require.Contains(t, text, "== one worker per language, one process each (")
	if os.Getenv("CI") != "" || !strings.Contains(text, "skipped: conformance: a language's runtime is missing") {
		for _, want := range []string{"target python-vs-go: ", "target typescript-vs-go: "} {
			require.Regexp(t, `(?m)^`+want+`[0-9.]+ \(goal >= 0\.50\) (met|MISS)$`, text)
		}
		require.Regexp(t, `(?m)^python +[0-9]+ jobs/s`, text)
		// The idle-cost lines: a rate per Worker process and its target.
		for _, lang := range []string{"go", "python", "typescript"} {
			require.Regexp(t, `(?m)^`+lang+` +[0-9]+\.[0-9]{2} statements/s \([0-9]+ transactions in `, text)
			require.Regexp(t, `(?m)^target idle-statements-per-s-`+lang+`: [0-9.]+ \(goal <= 2\.00\) (met|MISS)$`, text)
		}
	}
	require.Contains(t, text, "== idle cost: one Worker on 10 queues, 100 hourly schedules none due")
	// One line per scenario, path and client count, with both rates set.
	lines := 0
	for _, l := range strings.Split(text, "\n") {
		if strings.Contains(l, "..") && (strings.Contains(l, " sql ") || strings.Contains(l, " go ")) {
			f := strings.Fields(l)
			require.NotContains(t, f, "0", "a zero rate in %q", l)
			lines++
		}
	}
	require.GreaterOrEqual(t, lines, 9+2+2)
	// The machine-readable block closes the output, one well-formed line each.
	block := text[strings.Index(text, "== targets (machine-readable) =="):]
	for _, l := range strings.Split(strings.TrimSpace(block), "\n")[1:] {
		require.Regexp(t, `^(target [a-z0-9-]+: [0-9.]+ \(goal (>=|<=) [0-9.]+\) (met|MISS)|wal [a-z0-9-]+: ours [0-9]+ B/job, limit [0-9]+ B/job \(ratio [0-9.]+\))$`, l)
	}
}

// TestSchedulesSection runs only the periodic jobs' lines at tiny sizes.
func TestSchedulesSection(t *testing.T) {
	cfg := Config{Mode: "test", DatabaseURL: testdb.AdminURL(t), Only: "schedules"}
	require.NoError(t, cfg.setDefaults())
	var out bytes.Buffer
	require.NoError(t, run(t.Context(), cfg, &out))
	text := out.String()
	t.Log(text)
	require.Contains(t, text, "nothing due, per call (round trip included): fire_schedules() ")
	require.Contains(t, text, "fire 50 due schedules in one call: ")
	require.Regexp(t, `(?m)^target schedules-probe-us: [0-9.]+ \(goal <= 500.00\) (met|MISS)$`, text)
	for _, defined := range []int{0, 50} {
		require.Regexp(t, fmt.Sprintf(`(?m)^claim loop, one claimer, batch 10, %d schedules \(none due\): [0-9]+ jobs/s alone, [0-9]+ jobs/s with a fire_schedules\(\) probe after every claim \(-?[0-9.]+%% fewer; [0-9.]+µs a probe\); at the Worker's one probe a second: [0-9.]+%%$`, defined), text)
	}
	require.Regexp(t, `(?m)^target schedules-probe-claim-cost-pct-50: -?[0-9.]+ \(goal <= 1.00\) (met|MISS)$`, text)
	require.NotContains(t, text, "mvcc", "another section's targets")
}

// TestWorkflowsSection runs the workflow shapes at tiny sizes: every
// graph is worked to its last job (checkCompleted fails the run otherwise)
// and the child of a fan-in is claimable right after its last parent's
// completion commits.
func TestWorkflowsSection(t *testing.T) {
	cfg := Config{Mode: "test", DatabaseURL: testdb.AdminURL(t), Only: "workflows"}
	require.NoError(t, cfg.setDefaults())
	var out bytes.Buffer
	require.NoError(t, run(t.Context(), cfg, &out))
	text := out.String()
	t.Log(text)
	for _, shape := range []string{"fan-out", "fan-in", "layers", "chain"} {
		require.Regexp(t, fmt.Sprintf(`(?m)^%-8s +[0-9]+ +[0-9]+ +[0-9.]+ +[0-9. ]+ +[0-9.]+ +[0-9.]+/[0-9.]+ ms `, shape), text)
	}
	for _, name := range []string{"fan-out", "fan-in", "layers"} {
		require.Regexp(t, `(?m)^target workflow-`+name+`-vs-plain: [0-9.]+ \(goal >= 0.[89]0\) (met|MISS)$`, text)
	}
	require.Regexp(t, `(?m)^fan-in, the last parent's completion: [0-9]+ buffers with 9 parents, [0-9]+ with 59 `, text)
	require.Regexp(t, `(?m)^target workflow-fanin-last-complete-buffers-ratio: [0-9.]+ \(goal <= 1.50\) (met|MISS)$`, text)
	require.Regexp(t, `(?m)^completions that release a child, 4 clients: [0-9]+/s over 1,000 queues, [0-9]+/s over 1 `, text)
	require.Regexp(t, `(?m)^target workflow-complete-1000-queues-vs-1: [0-9.]+ \(goal >= 0.90\) (met|MISS)$`, text)
}

// TestOutputsSection runs the output lines at tiny sizes: both variants
// complete jobs, the sampler claims beside the 1 MiB outputs.
func TestOutputsSection(t *testing.T) {
	cfg := Config{Mode: "test", DatabaseURL: testdb.AdminURL(t), Only: "outputs"}
	require.NoError(t, cfg.setDefaults())
	var out bytes.Buffer
	require.NoError(t, run(t.Context(), cfg, &out))
	text := out.String()
	t.Log(text)
	require.Regexp(t, `(?m)^claim\+complete, 1 job a transaction, 4 clients: [0-9]+ jobs/s with a 1 KiB output, [0-9]+ without `, text)
	require.Regexp(t, `(?m)^target output-1kib-vs-none-4c: [0-9.]+ \(goal >= 0.95\) (met|MISS)$`, text)
	require.Regexp(t, `(?m)^claim p99 of a sampler .*: [0-9.]+ ms with 1 MiB outputs at 100 jobs/s in another queue, [0-9.]+ ms without `, text)
	require.Regexp(t, `(?m)^target output-1mib-claim-p99-ratio: [0-9.]+ \(goal <= 1.10\) (met|MISS)$`, text)
	require.Regexp(t, `(?m)^await a job's output, 5 waits: woken [0-9.]+ ms p50, [0-9.]+ ms p99 after the completion's commit`, text)
	require.Regexp(t, `(?m)^target await-wake-p50-ms: [0-9.]+ \(goal <= 10.00\) (met|MISS)$`, text)
}

// TestControlsSection runs only the queue-controls lines at
// tiny sizes: both sides must do their work (a claim that finds nothing
// fails the step), and the controlled side must really be controlled.
func TestControlsSection(t *testing.T) {
	cfg := Config{Mode: "test", DatabaseURL: testdb.AdminURL(t), Only: "controls"}
	require.NoError(t, cfg.setDefaults())
	var out bytes.Buffer
	require.NoError(t, run(t.Context(), cfg, &out))
	text := out.String()
	t.Log(text)
	require.Contains(t, text, "== queue controls: ")
	n := 0
	for _, l := range strings.Split(text, "\n") {
		if strings.Contains(l, "..") && strings.Contains(l, " sql ") {
			require.NotContains(t, strings.Fields(l), "0", "a zero rate in %q", l)
			n++
		}
	}
	require.Equal(t, 2*len(cfg.Clients), n, "two scenarios per client count")
	require.NotContains(t, text, "mvcc", "another section's targets")

	// The controlled side runs the controlled paths: a claim creates the
	// bucket's 16 slots and takes a token, a fail is logged for the
	// breaker; the other side touches neither.
	b, err := newBench(t.Context(), cfg, cfg.DatabaseURL, &out)
	require.NoError(t, err)
	defer b.close()
	db, drop, err := b.freshDatabase(t.Context())
	require.NoError(t, err)
	defer drop()
	for _, side := range []string{oursTable, rawTable} {
		require.NoError(t, controlsSeed(1_000_000, 1)(t.Context(), b, db, side, 1))
		conn, err := db.pool.Acquire(t.Context())
		require.NoError(t, err)
		k, err := oursRetryCycle(t.Context(), conn)
		conn.Release()
		require.NoError(t, err)
		require.Equal(t, 1, k)
		var buckets, failures int
		require.NoError(t, db.pool.QueryRow(t.Context(),
			`SELECT (SELECT count(*) FROM backoff.queue_tokens), (SELECT count(*) FROM backoff.queue_failures)`).Scan(&buckets, &failures))
		if side == oursTable {
			require.Equal(t, [2]int{16, 1}, [2]int{buckets, failures}, "controlled side")
		} else {
			require.Equal(t, [2]int{0, 0}, [2]int{buckets, failures}, "side without controls")
		}
	}
}

func TestTargetLine(t *testing.T) {
	require.Equal(t, "target reap-100k: 0.81 (goal >= 0.80) met", target{name: "reap-100k", value: 0.812, goal: 0.8}.String())
	require.Equal(t, "target claim-complete-1tx-go-8c: 0.70 (goal >= 0.85) MISS", target{name: "claim-complete-1tx-go-8c", value: 0.7, goal: 0.85}.String())
	require.Equal(t, "target enqueue-start-idle-p50-ms: 7.00 (goal <= 5.00) MISS", target{name: "enqueue-start-idle-p50-ms", value: 7, goal: 5, atMost: true}.String())
}

func TestParseRiver(t *testing.T) {
	rate, err := parseRiver([]byte("noise\nriver jobs=10 insert_s=0.1 work_s=0.5 work_jobs_per_s=20\n"))
	require.NoError(t, err)
	require.InDelta(t, 20.0, rate, 1e-9)
	_, err = parseRiver([]byte("river failed"))
	require.Error(t, err)
}

// The River module must stay outside the main module: its own go.mod, and
// no River import anywhere in this module.
func TestRiverStaysInItsOwnModule(t *testing.T) {
	_, err := os.Stat(filepath.Join("river", "go.mod"))
	require.NoError(t, err)
	gomod, err := os.ReadFile(filepath.Join("..", "go.mod"))
	require.NoError(t, err)
	require.NotContains(t, string(gomod), "riverqueue")
}

// -jobs-reloptions reaches both tables of every database the run copies.
func TestJobsReloptions(t *testing.T) {
	cfg := Config{Mode: "test", DatabaseURL: testdb.AdminURL(t), JobsReloptions: "fillfactor=90, autovacuum_vacuum_scale_factor=0"}
	require.NoError(t, cfg.setDefaults())
	var out bytes.Buffer
	b, err := newBench(t.Context(), cfg, cfg.DatabaseURL, &out)
	require.NoError(t, err)
	defer b.close()
	db, drop, err := b.freshDatabase(t.Context())
	require.NoError(t, err)
	defer drop()
	// backoff.jobs's partitions (docs/adr/0061), and raw_jobs.
	for _, table := range []string{"backoff.jobs_finished", "backoff.jobs_live_1", "backoff.jobs_live_2", "backoff.jobs_live_3", rawTable} {
		var opts []string
		require.NoError(t, db.pool.QueryRow(t.Context(), `SELECT reloptions FROM pg_class WHERE oid = $1::regclass`, table).Scan(&opts))
		require.Equal(t, []string{"fillfactor=90", "autovacuum_vacuum_scale_factor=0"}, opts, table)
	}
	require.Contains(t, out.String(), "SET (fillfactor=90, autovacuum_vacuum_scale_factor=0)")
}

// TestGrantsFlag: -grants present puts queue grants (of a role the bench
// never uses) into the template every scenario database is copied from;
// an unknown value is refused.
func TestGrantsFlag(t *testing.T) {
	cfg := Config{Mode: "test", DatabaseURL: testdb.AdminURL(t), Grants: "present"}
	require.NoError(t, cfg.setDefaults())
	var out bytes.Buffer
	b, err := newBench(t.Context(), cfg, cfg.DatabaseURL, &out)
	require.NoError(t, err)
	defer b.close()
	require.Contains(t, out.String(), "queue grants: present")
	conn, err := pgx.Connect(t.Context(), withDatabase(cfg.DatabaseURL, b.template))
	require.NoError(t, err)
	defer conn.Close(t.Context())
	var n int
	require.NoError(t, conn.QueryRow(t.Context(), `SELECT count(*) FROM backoff.queue_grants`).Scan(&n))
	require.Equal(t, 2, n)

	cfg.Grants = "bogus"
	_, err = newBench(t.Context(), cfg, cfg.DatabaseURL, &out)
	require.ErrorContains(t, err, `-grants "bogus"`)
}

// insertPaced keeps to its rate (it never runs ahead of rate x elapsed
// + 1), stops at n, and with n < 0 runs until stop is closed.
func TestInsertPaced(t *testing.T) {
	var calls, total int
	began := time.Now()
	k, err := insertPaced(t.Context(), 50, 1000, nil, func(k int) error {
		calls++
		total += k
		require.LessOrEqual(t, total, int(1000*time.Since(began).Seconds())+1)
		return nil
	})
	require.NoError(t, err)
	require.Equal(t, 50, k)
	require.Equal(t, 50, total)
	require.Greater(t, calls, 1, "paced in several batches")

	stop := make(chan struct{})
	time.AfterFunc(50*time.Millisecond, func() { close(stop) })
	k, err = insertPaced(t.Context(), -1, 1000, stop, func(int) error { return nil })
	require.NoError(t, err)
	require.Greater(t, k, 0)
	require.Less(t, k, 1000, "stopped by stop, not by a count")
}

// -rounds replaces the mode's rounds for every line; a negative count is
// refused.
func TestRoundsOverride(t *testing.T) {
	for _, mode := range []string{"quick", "full"} {
		cfg := Config{Mode: mode, RoundsOverride: 5}
		require.NoError(t, cfg.setDefaults())
		require.Equal(t, 5, cfg.Rounds)
	}
	cfg := Config{Mode: "quick"}
	require.NoError(t, cfg.setDefaults())
	require.Equal(t, 2, cfg.Rounds)
	require.ErrorContains(t, (&Config{Mode: "quick", RoundsOverride: -1}).setDefaults(), "-rounds -1")
}

// -only picks the sections whose name contains its word, -skip drops them.
func TestOnlyAndSkipPickSections(t *testing.T) {
	for _, c := range []struct {
		only, skip, section string
		want                bool
	}{
		{"", "", "mvcc", true},
		{"mvcc", "", "mvcc", true},
		{"mvcc", "", "ui", false},
		{"", "mvcc", "mvcc", false},
		{"", "mvcc", "throughput", true},
		{"worker", "river", "river", false},
	} {
		require.Equal(t, c.want, Config{Only: c.only, Skip: c.skip}.wants(c.section), "%+v", c)
	}
}
