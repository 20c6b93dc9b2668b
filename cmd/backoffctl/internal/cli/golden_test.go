package cli

import (
	"context"
	"encoding/json"
	"encoding/xml"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/spf13/cobra"
	"github.com/stretchr/testify/require"

	"github.com/pgbackoff/pgbackoff/internal/testdb"
)

var update = flag.Bool("update", false, "rewrite testdata/*.golden")

// transcript runs commands and records each as a shell session:
//
//	$ backoffctl ARGS
//	stdout
//	stderr (prefixed "! ")
//	[exit N]            (only when not 0)
//
// The database URL is appended to every command and never printed; a fixed
// --now makes every timestamp deterministic, and a fresh database makes ids
// start at 1.
type transcript struct {
	t       *testing.T
	dbURL   string
	now     string
	replace map[string]string
	b       strings.Builder
}

func newTranscript(t *testing.T, dbURL string) *transcript {
	return &transcript{t: t, dbURL: dbURL, now: "2030-01-01T00:00:00Z", replace: map[string]string{}}
}

// run records one command and returns its exit code and stdout.
func (s *transcript) run(args ...string) (int, string) {
	s.t.Helper()
	full := append([]string{}, args...)
	if s.dbURL != "" {
		full = append(full, "--database-url", s.dbURL)
	}
	if s.now != "" {
		full = append(full, "--now", s.now)
	}
	code, out, errOut := run(s.t, full...)
	fmt.Fprintf(&s.b, "$ backoffctl %s\n", strings.Join(args, " "))
	s.b.WriteString(out)
	for _, line := range strings.SplitAfter(errOut, "\n") {
		if line != "" {
			s.b.WriteString("! " + line)
		}
	}
	if code != 0 {
		fmt.Fprintf(&s.b, "[exit %d]\n", code)
	}
	s.b.WriteString("\n")
	return code, out
}

// check compares the transcript with testdata/NAME.golden.
func (s *transcript) check(name string) {
	s.t.Helper()
	got := s.b.String()
	for from, to := range s.replace {
		got = strings.ReplaceAll(got, from, to)
	}
	golden(s.t, name, got)
}

func golden(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", name+".golden")
	if *update {
		require.NoError(t, os.MkdirAll("testdata", 0o755))
		require.NoError(t, os.WriteFile(path, []byte(got), 0o644))
	}
	want, err := os.ReadFile(path)
	require.NoError(t, err, "run go test -update to create it")
	require.Equal(t, string(want), got)
}

// sql runs a statement on the test database (for steps a worker would take).
func sqlExec(t *testing.T, url, sql string, args ...any) {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, url)
	require.NoError(t, err)
	defer conn.Close(ctx)
	_, err = conn.Exec(ctx, sql, args...)
	require.NoError(t, err)
}

const example = "../../../../examples/backoff.toml"

func TestGoldenConfig(t *testing.T) {
	t.Parallel()
	url := testdb.NewURL(t)
	s := newTranscript(t, url)
	s.run("config", "validate", "--config", example)
	s.run("config", "validate", "--config", "../config/testdata/bad.toml", "--env", "test")
	s.run("config", "validate", "--config", "testdata/missing.toml")
	// The file as an argument: the message says how to pass it.
	s.run("config", "validate", "my.toml")
	s.run("jobs", "list", "emails", "retrying")
	s.run("config", "show", "--config", example, "--env", "test")
	s.run("config", "diff", "--config", example, "--env", "test")
	code, _ := s.run("config", "apply", "--config", example, "--env", "test")
	require.Equal(t, 0, code)
	code, _ = s.run("config", "apply", "--config", example, "--env", "test")
	require.Equal(t, 0, code)
	s.run("config", "diff", "--config", example, "--env", "test", "--exit-code")
	// Back to the base file: only what the overlay changed differs.
	s.run("config", "diff", "--config", example, "--exit-code")
	s.run("config", "diff", "--config", example, "--output", "json")
	// Rows only in the database are kept, and deleted with --prune.
	sqlExec(t, url, `INSERT INTO backoff.policies (name) VALUES ('legacy');
		INSERT INTO backoff.queues (name, policy) VALUES ('old', 'legacy')`)
	s.run("config", "apply", "--config", example)
	// Rows only in the database are differences too: --exit-code exits 1.
	s.run("config", "diff", "--config", example, "--exit-code")
	s.run("config", "apply", "--config", example, "--prune")
	s.run("config", "diff", "--config", example, "--exit-code")
	s.run("config", "apply", "--config", example, "--prune", "--output", "json")
	// [settings] is written into backoff.settings; a file without it leaves
	// the row alone.
	var skew string
	var injection bool
	conn, err := pgx.Connect(context.Background(), url)
	require.NoError(t, err)
	defer conn.Close(context.Background())
	require.NoError(t, conn.QueryRow(context.Background(), `SELECT max_clock_skew::text, time_injection FROM backoff.settings`).Scan(&skew, &injection))
	require.Equal(t, "00:05:00", skew)
	require.False(t, injection, "the base file switches time injection off")
	// max_payload_bytes too: the file's value replaces the database's.
	sqlExec(t, url, `UPDATE backoff.settings SET max_payload_bytes = 2048`)
	code, out, errOut := run(t, "config", "apply", "--config", example, "--database-url", url)
	require.Equal(t, ExitOK, code, errOut)
	require.Contains(t, out, "max_payload_bytes")
	var maxPayload int
	require.NoError(t, conn.QueryRow(context.Background(), `SELECT max_payload_bytes FROM backoff.settings`).Scan(&maxPayload))
	require.Equal(t, 1048576, maxPayload)
	noSettings := filepath.Join(t.TempDir(), "plain.toml")
	require.NoError(t, os.WriteFile(noSettings, []byte("version = 1\n"), 0o644))
	sqlExec(t, url, `UPDATE backoff.settings SET time_injection = true, max_clock_skew = '1 minute'`)
	code, out, errOut = run(t, "config", "diff", "--config", noSettings, "--database-url", url, "--output", "json")
	require.Equal(t, ExitOK, code, errOut)
	require.NotContains(t, out, "settings")
	s.check("config")
}

func TestConfigApplyIsAtomic(t *testing.T) {
	t.Parallel()
	url := testdb.NewURL(t)
	// A policy that jobs still name cannot be pruned: the whole apply,
	// including its other changes, rolls back.
	sqlExec(t, url, `INSERT INTO backoff.policies (name) VALUES ('legacy')`)
	sqlExec(t, url, `INSERT INTO backoff.jobs (queue, policy, run_at, created_at) VALUES ('q', 'legacy', now(), now())`)
	code, _, errOut := run(t, "config", "apply", "--config", example, "--prune", "--database-url", url)
	require.Equal(t, ExitFailure, code)
	require.Equal(t, "backoffctl: apply ../../../../examples/backoff.toml: cannot delete policy \"legacy\": 1 job(s) that may run again name it\n", errOut)
	code, out, _ := run(t, "config", "diff", "--config", example, "--database-url", url, "--output", "json")
	require.Equal(t, ExitOK, code)
	var changes []map[string]any
	require.NoError(t, json.Unmarshal([]byte(out), &changes))
	require.Len(t, changes, 6, "nothing was applied: square, stepped, emails, webhooks to add, settings to update, legacy extra")
}

func TestGoldenSchedule(t *testing.T) {
	t.Parallel()
	s := newTranscript(t, "")
	s.now = ""
	dir := t.TempDir()
	s.replace[dir] = "$TMP"
	s.run("schedule", "--policy", "moderate")
	s.run("schedule", "--policy", "aggressive", "--seed", "42", "--seeds", "100")
	s.run("schedule", "--policy", "stepped", "--config", example, "--attempts", "8")
	s.run("schedule", "--policy", "moderate", "--config", example, "--env", "test", "--plot", filepath.Join(dir, "m.svg"))
	s.run("schedule", "--policy", "square", "--config", example, "--output", "json")
	s.run("schedule", "--policy", "nope")
	s.run("schedule")
	s.run("schedule", "--policy", "moderate", "--plot", "x.png")
	s.check("schedule")

	svg, err := os.ReadFile(filepath.Join(dir, "m.svg"))
	require.NoError(t, err)
	var doc struct {
		Polygons []struct {
			Points string `xml:"points,attr"`
		} `xml:"polygon"`
		Polylines []struct {
			Points string `xml:"points,attr"`
		} `xml:"polyline"`
		Circles []struct{} `xml:"circle"`
	}
	require.NoError(t, xml.Unmarshal(svg, &doc), "the plot is well-formed XML")
	require.Len(t, doc.Polygons, 1, "one jitter band")
	require.Len(t, strings.Fields(doc.Polygons[0].Points), 8, "4 attempts: max edge and min edge")
	require.Len(t, doc.Polylines, 1, "the un-jittered line")
	require.Len(t, doc.Circles, 4+1, "one dot per attempt, plus the legend's")
}

func TestScheduleReadsDatabasePolicy(t *testing.T) {
	t.Parallel()
	url := testdb.NewURL(t)
	code, _, errOut := run(t, "config", "apply", "--config", example, "--env", "test", "--database-url", url)
	require.Equal(t, ExitOK, code, errOut)
	code, fromDB, errOut := run(t, "schedule", "--policy", "moderate", "--database-url", url)
	require.Equal(t, ExitOK, code, errOut)
	code, fromFile, _ := run(t, "schedule", "--policy", "moderate", "--config", example, "--env", "test")
	require.Equal(t, ExitOK, code)
	require.Contains(t, fromDB, "policy moderate (database): exponential 1s ×2.0, max 2s")
	// Same table whichever source: what apply wrote reads back identical.
	require.Equal(t, fromFile[strings.Index(fromFile, "\n"):], fromDB[strings.Index(fromDB, "\n"):])
}

func TestGoldenOperator(t *testing.T) {
	t.Parallel()
	url := testdb.NewURL(t)
	s := newTranscript(t, url)
	// The install made segment 1 current at the real time: the
	// transcript's clock is fixed.
	sqlExec(t, url, `UPDATE backoff.segments SET switched_at = '2029-12-31T12:00:00Z'`)
	s.run("config", "apply", "--config", example)
	s.run("stats")
	s.run("jobs", "list")
	s.run("enqueue", "emails", `{"to": "ada@example.com"}`)
	s.run("enqueue", "emails", `{"to": "bob@example.com"}`, "--run-at", "5m", "--priority", "3", "--dedupe-key", "bob")
	s.run("enqueue", "emails", `{"to": "bob@example.com"}`, "--dedupe-key", "bob", "--output", "json")
	s.run("enqueue", "webhooks", `{"id": 7}`, "--run-at", "2030-01-01T01:00:00Z", "--max-attempts", "2")
	s.run("enqueue", "reports", `{}`)
	s.run("enqueue", "emails", `{not json`)

	// Workers: job 1 fails twice (retryable, then permanent); job 5 is
	// claimed and its worker dies.
	sqlExec(t, url, `
SELECT backoff.claim('emails', 'worker-a', 1, NULL, '2030-01-01T00:00:01Z');
SELECT backoff.fail(1, 1, 'smtp 451: try again later', NULL, true, '2030-01-01T00:00:02Z');
SELECT backoff.claim('emails', 'worker-b', 1, NULL, '2030-01-01T00:00:10Z');
SELECT backoff.fail(1, 2, 'smtp 550: no such user', NULL, false, '2030-01-01T00:00:11Z');
SELECT backoff.claim('reports', 'worker-c', 1, NULL, '2030-01-01T00:00:20Z');`)
	s.now = "2030-01-01T00:10:00Z"
	s.run("jobs", "list")
	s.run("jobs", "list", "--queue", "emails", "--status", "pending", "--limit", "1")
	s.run("jobs", "show", "1")
	s.run("jobs", "show", "1", "--output", "json")
	s.run("jobs", "show", "99")
	s.run("stats", "--window", "1h")
	s.run("stats", "--output", "json")
	s.run("dlq", "list")
	s.run("workers")
	s.run("reap")
	s.run("jobs", "show", "5")
	sqlExec(t, url, `SELECT backoff.cancel(2, 'not needed', '2030-01-01T00:09:00Z')`)
	s.run("dlq", "replay", "2")
	s.run("jobs", "show", "2", "--output", "json")
	s.run("dlq", "replay", "--queue", "emails", "--all")
	s.run("dlq", "replay", "--queue", "emails", "--all", "--yes")
	s.run("dlq", "replay", "1")
	// The replayed job 1: attempt 3 is snoozed, attempt 4 fails. Its
	// attempt numbers (the fencing tokens) go on from 2; its counted
	// attempts restart after the replay and skip the snooze.
	sqlExec(t, url, `
SELECT backoff.acquire(1, 'worker-d', NULL, '2030-01-01T00:10:01Z');
SELECT backoff.snooze(1, 3, '0 seconds', '2030-01-01T00:10:02Z');
SELECT backoff.acquire(1, 'worker-d', NULL, '2030-01-01T00:10:03Z');
SELECT backoff.fail(1, 4, 'smtp 451: greylisted', NULL, true, '2030-01-01T00:10:04Z');`)
	s.run("jobs", "show", "1")
	s.run("dlq", "list", "--output", "json")
	s.run("jobs", "list", "--status", "bogus")
	s.run("jobs", "show")
	s.run("jobs", "show", "abc")
	s.run("dlq", "replay", "1", "--all", "--queue", "emails")
	s.run("jobs", "list", "--output", "yaml")
	// A failure opens webhooks' breaker (its threshold lowered to 1 for
	// the transcript): list, show and stats say so, with the cooldown's end.
	sqlExec(t, url, `
UPDATE backoff.queues SET breaker_failures = 1 WHERE name = 'webhooks';
SELECT backoff.enqueue('webhooks', '{"id": 8}', p_now => '2030-01-01T00:09:00Z');
SELECT backoff.claim('webhooks', 'worker-e', 1, NULL, '2030-01-01T00:09:20Z');
SELECT backoff.fail(6, 1, 'POST https://hooks.example.com/in: 503', NULL, true, '2030-01-01T00:09:30Z');`)
	s.run("queue", "show", "webhooks")
	s.run("queue", "show", "webhooks", "--output", "json")
	s.run("queue", "show", "emails")
	s.run("queue", "show", "nosuch")
	s.run("queue", "show")
	s.run("stats")
	s.run("queue", "list")
	s.run("queue", "pause", "emails")
	s.run("queue", "pause", "emails")
	s.run("queue", "pause", "reports")
	s.run("queue", "pause", "nosuchqueue")
	s.run("queue", "resume", "nosuchqueue")
	s.run("queue", "pause", "nosuchqueue", "--create")
	s.run("queue", "list", "--output", "json")
	s.run("queue", "resume", "emails")
	s.run("queue", "resume", "emails")
	s.run("queue", "show", "emails")
	s.run("stats")
	s.run("queue", "pause", "")
	s.run("jobs", "list", "--limit", "2")
	s.run("jobs", "list", "--limit", "2", "--after", "4")
	s.run("jobs", "list", "--error", "SMTP", "--policy", "square")
	// Cancel one job by id; a second cancel, an unknown id and a missing id
	// are errors.
	s.run("jobs", "cancel", "4", "--reason", "customer asked to stop")
	s.run("jobs", "show", "4")
	s.run("jobs", "cancel", "4")
	s.run("jobs", "cancel", "2", "--output", "json")
	s.run("jobs", "cancel", "99")
	s.run("jobs", "cancel")
	// A Worker's maintenance loop ran (rotate names the worker): stats
	// says when, and warns of nothing.
	sqlExec(t, url, `
SELECT backoff.reap(p_now => '2030-01-01T00:10:00Z');
SELECT backoff.rotate(p_now => '2030-01-01T00:10:00Z', p_worker => 'worker-f');
SELECT backoff.fire_schedules(p_now => '2030-01-01T00:10:00Z');`)
	s.run("stats")
	s.check("operator")
}

// Every command has help with examples.
func TestHelpHasExamples(t *testing.T) {
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		if c.Name() == "help" || c.Name() == "completion" || c.Hidden {
			return
		}
		t.Run(c.CommandPath(), func(t *testing.T) {
			require.NotEmpty(t, c.Example, "%s has no examples", c.CommandPath())
			args := append(strings.Fields(c.CommandPath())[1:], "--help")
			code, out, _ := run(t, args...)
			require.Equal(t, ExitOK, code)
			require.Contains(t, out, "Examples:")
		})
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	root := newRootCommand()
	for _, c := range root.Commands() {
		walk(c)
	}
}

// config diff lists only the keys a policy's strategy and jitter use: a
// polynomial policy has no multiplier to add or to drift.
func TestConfigDiffOnlyStrategyKeys(t *testing.T) {
	t.Parallel()
	url := testdb.NewURL(t)
	code, out, errOut := run(t, "config", "diff", "--config", example, "--database-url", url)
	require.Equal(t, ExitOK, code, errOut)
	square := out[strings.Index(out, "+ policy square"):strings.Index(out, "+ policy stepped")]
	require.Contains(t, square, "exponent = 2")
	require.NotContains(t, square, "multiplier")
	require.NotContains(t, square, "schedule")
	require.NotContains(t, square, "jitter_ratio", "jitter none")
	code, _, errOut = run(t, "config", "apply", "--config", example, "--database-url", url)
	require.Equal(t, ExitOK, code, errOut)
	// A multiplier the polynomial strategy does not read changes nothing.
	sqlExec(t, url, `UPDATE backoff.policies SET multiplier = 3 WHERE name = 'square'`)
	code, out, errOut = run(t, "config", "diff", "--config", example, "--database-url", url, "--exit-code")
	require.Equal(t, ExitOK, code, out+errOut)
	// A strategy change shows the keys of both strategies that differ.
	sqlExec(t, url, `UPDATE backoff.policies SET strategy = 'exponential' WHERE name = 'square'`)
	code, out, _ = run(t, "config", "diff", "--config", example, "--database-url", url)
	require.Equal(t, ExitOK, code)
	require.Contains(t, out, "strategy: exponential -> polynomial")
	require.Contains(t, out, "multiplier: 3.0 -> 2.0")
}
