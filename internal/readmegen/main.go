// Command readmegen writes the numbers of README.md from where they were
// measured: the latest run recorded in docs/benchmarks.md (its "Current
// results" table and the held-snapshot results) and the test times in
// DEVELOPING.md. A number in the README is a marked region,
//
//	<!-- gen:KEY -->VALUE<!-- /gen -->
//
// whose VALUE the generator rewrites; the README's words around it are
// written by hand. A region with an unknown key, or a key whose source line
// cannot be read, is an error, so a reworded table fails loudly instead of
// leaving a stale number. make generate runs it from the repository's root;
// TestREADMEIsGenerated fails when README.md differs from what it would
// write.
//
//	go run ./internal/readmegen [-root DIR]
package main

import (
	"flag"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
)

func main() {
	root := flag.String("root", ".", "the repository's root")
	flag.Parse()
	if err := write(*root); err != nil {
		fmt.Fprintln(os.Stderr, "readmegen:", err)
		os.Exit(1)
	}
}

// write rewrites README.md under root, and leaves it untouched when nothing
// changed.
func write(root string) error {
	readme, want, err := generateAt(root)
	if err != nil {
		return err
	}
	if want == readme {
		return nil
	}
	return os.WriteFile(filepath.Join(root, "README.md"), []byte(want), 0o644)
}

// generateAt reads the three files under root and returns the README as it
// is and as the generator would write it.
func generateAt(root string) (have, want string, err error) {
	read := func(name string) (string, error) {
		b, err := os.ReadFile(filepath.Join(root, name))
		return string(b), err
	}
	readme, err := read("README.md")
	if err != nil {
		return "", "", err
	}
	bench, err := read(filepath.Join("docs", "benchmarks.md"))
	if err != nil {
		return "", "", err
	}
	dev, err := read("DEVELOPING.md")
	if err != nil {
		return "", "", err
	}
	want, err = Generate(readme, bench, dev)
	return readme, want, err
}

var region = regexp.MustCompile(`<!-- gen:([a-z0-9-]+) -->(.*?)<!-- /gen -->`)

// Generate returns readme with every marked region's value taken from
// benchmarks (docs/benchmarks.md) and developing (DEVELOPING.md).
func Generate(readme, benchmarks, developing string) (string, error) {
	values, err := Values(benchmarks, developing)
	if err != nil {
		return "", err
	}
	var missing []string
	out := region.ReplaceAllStringFunc(readme, func(m string) string {
		key := region.FindStringSubmatch(m)[1]
		v, ok := values[key]
		if !ok {
			missing = append(missing, key)
			return m
		}
		return "<!-- gen:" + key + " -->" + v + "<!-- /gen -->"
	})
	if len(missing) > 0 {
		return "", fmt.Errorf("README.md names values the generator does not know: %s", strings.Join(missing, ", "))
	}
	return out, nil
}

// Values are the README's numbers by key, each as the README prints it.
func Values(benchmarks, developing string) (map[string]string, error) {
	v := map[string]string{}
	cur, err := section(benchmarks, "## Current results")
	if err != nil {
		return nil, err
	}
	m := regexp.MustCompile("on (\\d{4}-\\d{2}-\\d{2}), commit\\s+`([0-9a-f]{7,40})`").FindStringSubmatch(cur)
	if m == nil {
		return nil, fmt.Errorf("docs/benchmarks.md, Current results: no \"on YYYY-MM-DD, commit `…`\" naming the run")
	}
	v["bench-date"], v["bench-commit"] = m[1], m[2]
	rows := tableRows(cur)
	cell := func(name string) (string, error) {
		c, ok := rows["`"+name+"`"]
		if !ok {
			return "", fmt.Errorf("docs/benchmarks.md, Current results: no row `%s`", name)
		}
		return c[len(c)-1], nil
	}
	num := `([0-9][0-9,]*(?:\.[0-9]+)?)`
	for _, r := range []struct {
		row, pattern string
		keys         []string
	}{
		{"worker-vs-river-burndown", num + `\** \(River ` + num + ` jobs/s\)`, []string{"river-burndown-ratio", "river-burndown-jobs-s"}},
		{"worker-vs-river-continuous", num + `\** \(River ` + num + ` jobs/s\)`, []string{"river-continuous-ratio", "river-continuous-jobs-s"}},
		{"worker-continuous-start-p50-ms", num + `\** \(River p50 ` + num + ` ms\)`, []string{"start-p50-ms", "river-start-p50-ms"}},
		{"python-vs-go` / `typescript-vs-go", num + ` / ` + num + `\** \(` + num + ` and ` + num + ` jobs/s\)`, []string{"python-vs-go", "typescript-vs-go", "python-jobs-s", "typescript-jobs-s"}},
	} {
		c, err := cell(r.row)
		if err != nil {
			return nil, err
		}
		m := regexp.MustCompile(`^\**` + r.pattern + `$`).FindStringSubmatch(c)
		if m == nil {
			return nil, fmt.Errorf("docs/benchmarks.md, Current results, `%s`: %q does not read as %s", r.row, c, r.pattern)
		}
		for i, k := range r.keys {
			v[k] = m[i+1]
		}
	}
	// The Worker's lead over River, as a range of the two modes.
	lo, hi := v["river-continuous-ratio"], v["river-burndown-ratio"]
	if f(lo) > f(hi) {
		lo, hi = hi, lo
	}
	v["river-ratio-range"] = lo + "-" + hi

	// The held-snapshot section's own results, not another section's.
	heldAt := strings.Index(benchmarks, "\n## Held snapshot\n")
	if heldAt < 0 {
		return nil, fmt.Errorf("docs/benchmarks.md: no section \"## Held snapshot\"")
	}
	held, err := section(benchmarks[heldAt:], "### Results")
	if err != nil {
		return nil, fmt.Errorf("docs/benchmarks.md, Held snapshot: %w", err)
	}
	hrows := tableRows(held)
	last := func(row string) (string, error) {
		c, ok := hrows[row]
		if !ok || len(c) < 1 {
			return "", fmt.Errorf("docs/benchmarks.md, held snapshot results: no row %q", row)
		}
		per := strings.Fields(c[0])
		return per[len(per)-1], nil
	}
	if v["held-last-jobs-s"], err = last("held, 5,000"); err != nil {
		return nil, err
	}
	if v["sql-held-last-jobs-s"], err = last("sql, held"); err != nil {
		return nil, err
	}
	m = regexp.MustCompile(`\*\*([0-9,]+) jobs/s\s+offered\*\*`).FindStringSubmatch(benchmarks)
	if m == nil {
		return nil, fmt.Errorf("docs/benchmarks.md, held snapshot: no \"**N jobs/s offered**\"")
	}
	v["held-offered-jobs-s"] = m[1]

	// make test: the quiet run, and the range of the runs beside a CPU hog.
	m = regexp.MustCompile("quiet \\([^)]*\\) `make test` took (\\d+) min (\\d+) s").FindStringSubmatch(strings.Join(strings.Fields(developing), " "))
	if m == nil {
		return nil, fmt.Errorf("DEVELOPING.md: no \"quiet (…) `make test` took N min N s\"")
	}
	v["make-test-quiet-min"] = strconv.FormatFloat(math.Round((f(m[1])+f(m[2])/60)*10)/10, 'f', -1, 64)
	busy := regexp.MustCompile(`passed in four runs in a row, taking (.*?), and `).FindStringSubmatch(strings.Join(strings.Fields(developing), " "))
	if busy == nil {
		return nil, fmt.Errorf("DEVELOPING.md: no \"passed in four runs in a row, taking …\"")
	}
	mins := []float64{}
	for _, t := range regexp.MustCompile(`(\d+) min (\d+) s`).FindAllStringSubmatch(busy[1], -1) {
		mins = append(mins, f(t[1])+f(t[2])/60)
	}
	if len(mins) == 0 {
		return nil, fmt.Errorf("DEVELOPING.md: no times in %q", busy[1])
	}
	bl, bh := mins[0], mins[0]
	for _, x := range mins {
		bl, bh = math.Min(bl, x), math.Max(bh, x)
	}
	v["make-test-busy-min"] = fmt.Sprintf("%.0f-%.0f", math.Round(bl), math.Round(bh))
	return v, nil
}

// section is the text from the heading line to the next heading of any
// level.
func section(doc, heading string) (string, error) {
	i := strings.Index(doc, "\n"+heading+"\n")
	if i < 0 {
		return "", fmt.Errorf("no section %q", heading)
	}
	rest := doc[i+len(heading)+2:]
	if j := strings.Index(rest, "\n#"); j >= 0 {
		rest = rest[:j]
	}
	return rest, nil
}

// tableRows maps the first cell of each row of the Markdown tables in text
// to the other cells, trimmed.
func tableRows(text string) map[string][]string {
	rows := map[string][]string{}
	for _, line := range strings.Split(text, "\n") {
		if !strings.HasPrefix(line, "|") || strings.HasPrefix(line, "|---") {
			continue
		}
		cells := strings.Split(strings.Trim(line, "|"), "|")
		for i := range cells {
			cells[i] = strings.TrimSpace(cells[i])
		}
		if len(cells) > 1 {
			rows[cells[0]] = cells[1:]
		}
	}
	return rows
}

func f(s string) float64 {
	x, _ := strconv.ParseFloat(strings.ReplaceAll(s, ",", ""), 64)
	return x
}
