package main

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

var root = filepath.Join("..", "..")

// TestREADMEIsGenerated: every marked number in README.md is what the
// latest run in docs/benchmarks.md and the times in DEVELOPING.md say
// (make generate rewrites it).
func TestREADMEIsGenerated(t *testing.T) {
	have, want, err := generateAt(root)
	require.NoError(t, err)
	if have != want {
		hl, wl := strings.Split(have, "\n"), strings.Split(want, "\n")
		for i := range min(len(hl), len(wl)) {
			if hl[i] != wl[i] {
				t.Fatalf("README.md is out of date (make generate rewrites it); first difference at line %d:\n have %q\n want %q", i+1, hl[i], wl[i])
			}
		}
		t.Fatal("README.md is out of date (make generate rewrites it)")
	}
	// The README carries the numbers the generator knows of: none left out
	// by a hand edit that dropped its markers.
	for _, key := range []string{"river-ratio-range", "bench-date", "bench-commit", "held-last-jobs-s", "sql-held-last-jobs-s", "make-test-quiet-min", "make-test-busy-min"} {
		require.Contains(t, have, "<!-- gen:"+key+" -->", "README.md has no region %s", key)
	}
}

const benchmarks = "# Benchmarks\n\n## Current results\n\n" +
	"`go run ./bench` on 2027-01-02, commit `abc1234`, alone.\n\n" +
	"| target line | goal | result |\n|---|---|---|\n" +
	"| `worker-vs-river-burndown` | ≥ 1.50 | **2.40** (River 20,000 jobs/s) |\n" +
	"| `worker-vs-river-continuous` | ≥ 1.50 | 1.40 (River 30,000 jobs/s) |\n" +
	"| `worker-continuous-start-p50-ms` | ≤ 5 ms | **1.50** (River p50 100 ms) |\n" +
	"| `python-vs-go` / `typescript-vs-go` | ≥ 0.50 | **0.70 / 0.90** (1,000 and 2,000 jobs/s) |\n\n" +
	"## Held snapshot\n\n**2,000 jobs/s\noffered** by 2 producers.\n\n### Results\n\n" +
	"| run | completed/s, minutes 1–10 | backlog |\n|---|---|---|\n" +
	"| held, 5,000 | 1,999 1,998 | 0 |\n| sql, held | 1,500 300 | 9 |\n\n## Next\n"

const developing = "On the same machine quiet (nothing else, load 0.5) `make test` took 2 min 15 s on a local cluster.\n" +
	"`make test` passed in four runs in a row, taking 5 min 10 s (1 → 2), 3 min 29 s (2 → 3), 9 min 50 s and 6 min 0 s, and more.\n"

// TestGenerateReadsTheLatestRun: the values follow the recorded run, so a
// new run recorded in docs/benchmarks.md changes the README.
func TestGenerateReadsTheLatestRun(t *testing.T) {
	readme := "ran <!-- gen:river-ratio-range -->1.57-2.25<!-- /gen -->× River (<!-- gen:bench-date -->x<!-- /gen -->, " +
		"`<!-- gen:bench-commit --><!-- /gen -->`); held <!-- gen:held-last-jobs-s -->0<!-- /gen --> of <!-- gen:held-offered-jobs-s -->0<!-- /gen -->, " +
		"sql <!-- gen:sql-held-last-jobs-s -->0<!-- /gen -->; python <!-- gen:python-jobs-s -->0<!-- /gen -->; " +
		"tests <!-- gen:make-test-quiet-min -->0<!-- /gen --> and <!-- gen:make-test-busy-min -->0<!-- /gen --> minutes"
	got, err := Generate(readme, benchmarks, developing)
	require.NoError(t, err)
	require.Equal(t, "ran <!-- gen:river-ratio-range -->1.40-2.40<!-- /gen -->× River (<!-- gen:bench-date -->2027-01-02<!-- /gen -->, "+
		"`<!-- gen:bench-commit -->abc1234<!-- /gen -->`); held <!-- gen:held-last-jobs-s -->1,998<!-- /gen --> of <!-- gen:held-offered-jobs-s -->2,000<!-- /gen -->, "+
		"sql <!-- gen:sql-held-last-jobs-s -->300<!-- /gen -->; python <!-- gen:python-jobs-s -->1,000<!-- /gen -->; "+
		"tests <!-- gen:make-test-quiet-min -->2.3<!-- /gen --> and <!-- gen:make-test-busy-min -->3-10<!-- /gen --> minutes", got)
	again, err := Generate(got, benchmarks, developing)
	require.NoError(t, err)
	require.Equal(t, got, again, "generating twice changes nothing")
}

// TestGenerateRefusesWhatItCannotRead: a region with an unknown key, or a
// source whose row was reworded, is an error, not a stale number.
func TestGenerateRefusesWhatItCannotRead(t *testing.T) {
	_, err := Generate("<!-- gen:no-such-number -->1<!-- /gen -->", benchmarks, developing)
	require.ErrorContains(t, err, "no-such-number")
	_, err = Generate("", strings.Replace(benchmarks, "(River 20,000 jobs/s)", "(River: 20,000 jobs/s)", 1), developing)
	require.ErrorContains(t, err, "worker-vs-river-burndown")
	_, err = Generate("", strings.Replace(benchmarks, "| held, 5,000", "| held 5k", 1), developing)
	require.ErrorContains(t, err, "held, 5,000")
	_, err = Generate("", benchmarks, strings.Replace(developing, "took 2 min 15 s", "took 135 s", 1))
	require.ErrorContains(t, err, "DEVELOPING.md")
}
