package cli

import (
	"bytes"
	"context"
	"math/rand/v2"
	"strings"
	"testing"
	"time"
)

// unreachableDB is where DATABASE_URL points during the argument fuzz: a
// loopback port nothing listens on, so commands that connect fail at once
// and no traffic leaves the machine.
const unreachableDB = "postgres://fuzz@127.0.0.1:1/fuzz?connect_timeout=1"

// safeArgs reports whether the fuzz may run args: nothing that names
// another server (--database-url, URLs, host=), starts the demo's server,
// or reads a device that never ends.
func safeArgs(args []string) bool {
	for _, a := range args {
		l := strings.ToLower(a)
		for _, bad := range []string{"database-url", "://", "host", "demo", "/dev", "/proc", "/sys", "service"} {
			if strings.Contains(l, bad) {
				return false
			}
		}
	}
	return true
}

// runArgs runs backoffctl with args and checks the contract: no panic, an
// exit code in {0, 1, 2}, and an answer within a few seconds.
func runArgs(t *testing.T, args []string) int {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	type result struct {
		code  int
		out   string
		panic any
	}
	done := make(chan result, 1)
	go func() {
		defer func() {
			if p := recover(); p != nil {
				done <- result{panic: p}
			}
		}()
		var out, errOut bytes.Buffer
		code := Main(ctx, args, &out, &errOut)
		done <- result{code: code, out: out.String() + errOut.String()}
	}()
	select {
	case r := <-done:
		if r.panic != nil {
			t.Fatalf("backoffctl %q panicked: %v", args, r.panic)
		}
		// Whatever the arguments carry, nothing a terminal acts on is
		// printed raw (ADR 0039): the error line is escaped.
		for _, bad := range []string{"\x1b", "\u009b", "\r", "\x07"} {
			if strings.Contains(r.out, bad) {
				t.Fatalf("backoffctl %q printed a raw %q:\n%s", args, bad, r.out)
			}
		}
		if r.code != ExitOK && r.code != ExitFailure && r.code != ExitUsage {
			t.Fatalf("backoffctl %q: exit code %d", args, r.code)
		}
		return r.code
	case <-time.After(15 * time.Second):
		t.Fatalf("backoffctl %q did not return", args)
		return -1
	}
}

// vocabulary the random argument lists are drawn from: every command,
// every flag, and hostile values.
var (
	fuzzWords = []string{
		"config", "validate", "show", "diff", "apply", "migrate", "up", "down", "status", "schedule",
		"jobs", "list", "show", "dlq", "replay", "reap", "stats", "enqueue", "help", "completion", "bash",
		"--config", "--env", "--policy", "--attempts", "--seed", "--target", "--limit", "--now", "--window",
		"--queue", "--status", "--all", "--json", "--format", "--run-at", "--priority", "--max-attempts",
		"--dedupe-key", "--prune", "--exit-code", "--help", "-h", "--", "-", "--bogus", "-x", "--yes", "--output", "json",
	}
	fuzzValues = []string{
		"", " ", "0", "-1", "1", "42", "2147483647", "-2147483648", "9223372036854775808", "1e9", "NaN", "Inf",
		"moderate", "test", "production", "emails", "'", `"`, `\`, "{}", `{"a":1}`, "{", "null", "[]",
		"1s", "-1s", "1h", "999999h", "2026-01-01T00:00:00Z", "yesterday", "ünï🙂", "\x01\x7f", "\n",
		"../../../../examples/backoff.toml", "testdata", "missing.toml", strings.Repeat("x", 10000),
		// Bounded input (ADR 0039): escapes, C1 CSI, names over 128
		// bytes, a year past 9999.
		"\x1b[2J", "q\u009b31m", "\r\x07", strings.Repeat("q", 129), "10000-01-01T00:00:00Z", "--\x1b[2J",
	}
)

// TestCLIRandomArgs runs 400 random argument lists (seeded, logged) drawn
// from the commands, flags and hostile values: backoffctl never panics,
// never hangs, and exits with 0, 1 or 2.
func TestCLIRandomArgs(t *testing.T) {
	t.Setenv("DATABASE_URL", unreachableDB)
	seed := rand.Uint64()
	t.Logf("seed %d", seed)
	r := rand.New(rand.NewPCG(seed, 1))
	codes := map[int]int{}
	for range 400 {
		n := r.IntN(6)
		args := make([]string, 0, n)
		for range n {
			if r.IntN(2) == 0 {
				args = append(args, fuzzWords[r.IntN(len(fuzzWords))])
			} else {
				args = append(args, fuzzValues[r.IntN(len(fuzzValues))])
			}
		}
		if !safeArgs(args) {
			continue
		}
		codes[runArgs(t, args)]++
	}
	t.Logf("exit codes: %v", codes)
	if codes[ExitUsage] == 0 {
		t.Fatal("no usage error in 400 random argument lists: the generator is broken")
	}
}

// FuzzCLI feeds arbitrary argument lists (NUL-separated) to backoffctl.
// `go test` runs the seeds; `go test -fuzz FuzzCLI ./internal/cli` explores.
func FuzzCLI(f *testing.F) {
	for _, seed := range [][]string{
		{"schedule", "--policy", "moderate", "--attempts", "5"},
		{"config", "validate", "--config", "../../../../examples/backoff.toml"},
		{"enqueue", "q", "{"},
		{"jobs", "show", "abc"},
		{"dlq", "replay", "--all", "1"},
		{"migrate", "down", "--target", "-1"},
		{"stats", "--window", "-1s"},
		{"enqueue", "q\x1b[2J", "{}"},
		{"jobs", "list", "--queue", "\u009b31m"},
		{"--\x1b[2J"},
		{"--bogus"},
		{},
	} {
		f.Add(strings.Join(seed, "\x00"))
	}
	f.Fuzz(func(t *testing.T, in string) {
		t.Setenv("DATABASE_URL", unreachableDB)
		args := strings.Split(in, "\x00")
		if in == "" {
			args = nil
		}
		if len(args) > 12 || !safeArgs(args) {
			t.Skipf("%d args, or an argument the fuzz must not run", len(args))
		}
		runArgs(t, args)
	})
}
