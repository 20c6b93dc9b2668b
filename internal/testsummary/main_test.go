package main

import (
	"os"
	"strings"
	"testing"
)

// testdata/events.json is `go test -json` of three packages: a passes a
// test that logs a benchmark target and an ERROR line, skips one and
// fails one with subtests; b passes; c times out in a test.
func TestSummary(t *testing.T) {
	in, err := os.Open("testdata/events.json")
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	var out, log strings.Builder
	s := summarize(in, &out, &log)
	want, err := os.ReadFile("testdata/summary.txt")
	if err != nil {
		t.Fatal(err)
	}
	if out.String() != string(want) {
		t.Errorf("summary:\n%s\nwant:\n%s", out.String(), want)
	}
	if s.skipped != 1 {
		t.Errorf("skipped %d, want 1", s.skipped)
	}
	for _, kept := range []string{"target x: 1 (goal >= 2) MISS", "level=ERROR msg=deliberate", "no pg_cron", "counts: 1000", "--- PASS: TestPasses"} {
		if !strings.Contains(log.String(), kept) {
			t.Errorf("the log has no %q", kept)
		}
	}
}
