// Command testsummary turns `go test -json` into what a reader of a test
// run needs: each package's closing line (ok, FAIL, ?), and the whole
// output of every test that failed, of a test still running when its
// package failed (a timeout, a panic), and of a package that failed
// outside its tests. What passing tests print (logs, benchmark lines,
// the errors that fault tests provoke) goes only to the log file, with
// everything else, as `go test -v` would have printed it. What the test
// harness says about the server ("testdb: server: ...", or that there is
// none) is printed once, whichever test said it. Lines that are not
// JSON (the go command's own messages) pass through.
//
// make test pipes both modules' runs through it:
//
//	go test -json ./... 2>&1 | go run ./internal/testsummary -log test-output.log
package main

import (
	"bufio"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"maps"
	"os"
	"slices"
	"strings"
)

func main() {
	logPath := flag.String("log", "test-output.log", "file for the whole output")
	flag.Parse()
	log, err := os.Create(*logPath)
	if err != nil {
		// Never lose the summary for want of a log.
		fmt.Fprintf(os.Stderr, "testsummary: %v\n", err)
		summarize(os.Stdin, os.Stdout, io.Discard)
		return
	}
	s := summarize(os.Stdin, os.Stdout, log)
	_ = log.Close()
	fmt.Printf("every test's output: %s", *logPath)
	if s.skipped > 0 {
		fmt.Printf(" (%d skipped, with the reason)", s.skipped)
	}
	fmt.Println()
}

// event is a line of `go test -json` (cmd/test2json).
type event struct {
	Action  string
	Package string
	Test    string
	Output  string
}

// test is the state of a top-level test, with its subtests.
type test struct {
	lines  []string // held until the test ends
	failed bool     // print what follows as it comes
	done   bool     // passed or skipped: drop what follows
}

type summary struct {
	out     io.Writer
	tests   map[string]*test    // by package and top-level test
	pkg     map[string][]string // a package's own lines, held until it ends
	seen    map[string]bool     // "testdb: " lines printed
	skipped int
}

func summarize(r io.Reader, out, log io.Writer) summary {
	s := summary{out: out, tests: map[string]*test{}, pkg: map[string][]string{}, seen: map[string]bool{}}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1024*1024), 64*1024*1024)
	for sc.Scan() {
		line := sc.Text()
		var e event
		if !strings.HasPrefix(line, "{") || json.Unmarshal([]byte(line), &e) != nil {
			fmt.Fprintln(log, line)
			fmt.Fprintln(out, line)
			continue
		}
		io.WriteString(log, e.Output)
		s.add(e)
	}
	return s
}

func (s *summary) add(e event) {
	switch {
	case e.Action == "build-output":
		io.WriteString(s.out, e.Output)
		return
	case strings.HasPrefix(e.Output, "testdb: "):
		// What the test harness says about the server, once, from
		// whichever test or package said it first.
		if !s.seen[e.Output] {
			s.seen[e.Output] = true
			io.WriteString(s.out, e.Output)
		}
		return
	}
	if e.Test == "" {
		s.addPackage(e)
		return
	}
	top, _, _ := strings.Cut(e.Test, "/")
	key := e.Package + " " + top
	t := s.tests[key]
	if t == nil {
		t = &test{}
		s.tests[key] = t
	}
	switch e.Action {
	case "output":
		switch {
		case t.done || bookkeeping(e.Output):
		case t.failed:
			io.WriteString(s.out, e.Output)
		default:
			t.lines = append(t.lines, e.Output)
		}
	case "skip":
		s.skipped++
		fallthrough
	case "pass":
		if e.Test == top && !t.failed {
			t.done, t.lines = true, nil
		}
	case "fail":
		if !t.failed {
			t.failed = true
			io.WriteString(s.out, strings.Join(t.lines, ""))
			t.lines = nil
		}
	}
}

// addPackage handles a line of the package itself: its closing line is
// printed; the rest only when the package fails.
func (s *summary) addPackage(e event) {
	if e.Action != "output" {
		return
	}
	o := e.Output
	switch {
	case strings.HasPrefix(o, "ok  \t"), strings.HasPrefix(o, "?   \t"):
		io.WriteString(s.out, o)
		s.endPackage(e.Package, false)
	case strings.HasPrefix(o, "FAIL\t"):
		s.endPackage(e.Package, true)
		io.WriteString(s.out, o)
	default:
		s.pkg[e.Package] = append(s.pkg[e.Package], o)
	}
}

// endPackage prints, for a package that failed, its own lines and those of
// tests that never ended, and forgets the package.
func (s *summary) endPackage(pkg string, failed bool) {
	keys := slices.Sorted(maps.Keys(s.tests))
	for _, key := range keys {
		t := s.tests[key]
		if !strings.HasPrefix(key, pkg+" ") {
			continue
		}
		if failed && !t.done && !t.failed {
			io.WriteString(s.out, strings.Join(t.lines, ""))
		}
		delete(s.tests, key)
	}
	if failed {
		io.WriteString(s.out, strings.Join(s.pkg[pkg], ""))
	}
	delete(s.pkg, pkg)
}

// bookkeeping reports go test -v's lines that only say which test runs.
func bookkeeping(o string) bool {
	for _, p := range []string{"=== RUN", "=== PAUSE", "=== CONT", "=== NAME", "--- PASS", "--- SKIP"} {
		if strings.HasPrefix(strings.TrimLeft(o, " "), p) {
			return true
		}
	}
	return false
}
