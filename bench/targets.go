package main

import (
	"fmt"
	"io"
)

// A target is one goal of docs/benchmarks.md. Every scenario that has a goal
// records its targets with bench.target or bench.targetAtMost, and the run
// prints them all at the very end, one line each, so that a script can grep
// them:
//
//	target NAME: VALUE (goal >= G) met|MISS
//	target NAME: VALUE (goal <= G) met|MISS
//
// NAME is a lowercase slug with the client count last (e.g.
// claim-complete-1tx-sql-8c); VALUE is a ratio to the raw-SQL limit unless
// the name says otherwise (a "-ms" suffix: milliseconds).
type target struct {
	name   string
	value  float64
	goal   float64
	atMost bool // the goal is an upper bound (latencies)
}

func (t target) met() bool {
	if t.atMost {
		return t.value <= t.goal
	}
	return t.value >= t.goal
}

func (t target) String() string {
	op := ">="
	if t.atMost {
		op = "<="
	}
	return fmt.Sprintf("target %s: %.2f (goal %s %.2f) %s", t.name, t.value, op, t.goal, metMiss(t.met()))
}

// target records a goal that value must reach (value >= goal).
func (b *bench) target(name string, value, goal float64) {
	b.targets = append(b.targets, target{name: name, value: value, goal: goal})
}

// targetAtMost records a goal that value must not exceed (value <= goal).
func (b *bench) targetAtMost(name string, value, goal float64) {
	b.targets = append(b.targets, target{name: name, value: value, goal: goal, atMost: true})
}

// wal records the WAL bytes per job of a scenario line, ours and the limit's:
//
//	wal NAME: ours N B/job, limit M B/job (ratio R)
func (b *bench) wal(name string, ours, limit float64) {
	b.walLines = append(b.walLines, fmt.Sprintf("wal %s: ours %.0f B/job, limit %.0f B/job (ratio %.2f)", name, ours, limit, ratioOf(ours, limit)))
}

func ratioOf(a, b float64) float64 {
	if b == 0 {
		return 0
	}
	return a / b
}

// printTargets writes the machine-readable block that closes a run.
func (b *bench) printTargets(out io.Writer) {
	if len(b.targets) == 0 && len(b.walLines) == 0 {
		return
	}
	fmt.Fprintf(out, "\n== targets (machine-readable) ==\n")
	for _, t := range b.targets {
		fmt.Fprintln(out, t)
	}
	for _, w := range b.walLines {
		fmt.Fprintln(out, w)
	}
}
