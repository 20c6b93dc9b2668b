package docstest

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite docs/adr/README.md from the records' headers")

var adrDir = filepath.Join(root, "docs", "adr")

// An ADR's file is NNNN-short-title.md; its first line "# NNNN. Title";
// then, before "## Context", only header lines:
//
//	Status: accepted
//	Amends [ADR NNNN](NNNN-….md): what it changes there.
//	Amended by [ADR NNNN](NNNN-….md): what changed here.
//	Superseded by [ADR NNNN](NNNN-….md): why.
//
// one line each, one record linked per line.
var (
	adrFile    = regexp.MustCompile(`^(\d{4})-[a-z0-9-]+\.md$`)
	adrTitle   = regexp.MustCompile(`^# (\d{4})\. (\S.*)$`)
	adrStatus  = regexp.MustCompile(`^Status: (accepted|proposed|superseded)\b(.*)$`)
	adrRelated = regexp.MustCompile(`^(Amends|Amended by|Superseded by) \[ADR (\d{4})\]\((\d{4})-[a-z0-9-]+\.md\): \S`)
)

type adr struct {
	num, file, title, status string
	amends, amendedBy        []string
	supersededBy             string
}

// readADRs parses every record's header; it fails the test for a header
// that does not follow the format.
func readADRs(t *testing.T) map[string]*adr {
	t.Helper()
	entries, err := os.ReadDir(adrDir)
	if err != nil {
		t.Fatal(err)
	}
	files := map[string]string{}
	for _, e := range entries {
		if m := adrFile.FindStringSubmatch(e.Name()); m != nil {
			files[m[1]] = e.Name()
		}
	}
	adrs := map[string]*adr{}
	for num, name := range files {
		body, err := os.ReadFile(filepath.Join(adrDir, name))
		if err != nil {
			t.Fatal(err)
		}
		lines := strings.Split(string(body), "\n")
		a := &adr{num: num, file: name}
		m := adrTitle.FindStringSubmatch(lines[0])
		if m == nil || m[1] != num {
			t.Errorf("%s:1: the first line must be \"# %s. Title\", got %q", name, num, lines[0])
			continue
		}
		a.title = m[2]
		for i := 1; i < len(lines) && !strings.HasPrefix(lines[i], "## "); i++ {
			line := lines[i]
			if line == "" {
				continue
			}
			if s := adrStatus.FindStringSubmatch(line); s != nil {
				if a.status != "" {
					t.Errorf("%s:%d: a second Status line", name, i+1)
				}
				a.status = s[1] + s[2]
				continue
			}
			r := adrRelated.FindStringSubmatch(line)
			if r == nil || r[2] != r[3] {
				t.Errorf("%s:%d: not a header line (Status: …, or Amends / Amended by / Superseded by [ADR NNNN](NNNN-….md): …): %q", name, i+1, line)
				continue
			}
			if other, ok := files[r[2]]; !ok || !strings.Contains(line, "("+other+")") {
				t.Errorf("%s:%d: links ADR %s, which is not %v", name, i+1, r[2], other)
			}
			switch r[1] {
			case "Amends":
				a.amends = append(a.amends, r[2])
			case "Amended by":
				a.amendedBy = append(a.amendedBy, r[2])
			case "Superseded by":
				a.supersededBy = r[2]
			}
		}
		if a.status == "" {
			t.Errorf("%s: no Status line before ## Context", name)
		}
		if (a.supersededBy != "") != strings.HasPrefix(a.status, "superseded") {
			t.Errorf("%s: Status %q and Superseded by %q disagree", name, a.status, a.supersededBy)
		}
		adrs[num] = a
	}
	if len(adrs) < 50 {
		t.Fatalf("read only %d records in %s", len(adrs), adrDir)
	}
	return adrs
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// TestADRBackLinks: a record that amends another is named in the other's
// header as "Amended by", and the other way round.
func TestADRBackLinks(t *testing.T) {
	adrs := readADRs(t)
	for _, a := range adrs {
		for _, y := range a.amends {
			if b := adrs[y]; b != nil && !contains(b.amendedBy, a.num) {
				t.Errorf("%s amends ADR %s, whose header has no \"Amended by [ADR %s](%s)\"", a.file, y, a.num, a.file)
			}
		}
		for _, x := range a.amendedBy {
			if b := adrs[x]; b != nil && !contains(b.amends, a.num) {
				t.Errorf("%s says it is amended by ADR %s, whose header has no \"Amends [ADR %s](%s)\"", a.file, x, a.num, a.file)
			}
		}
	}
}

// adrIndex is docs/adr/README.md as the headers say it should be.
func adrIndex(adrs map[string]*adr) string {
	var nums []string
	for n := range adrs {
		nums = append(nums, n)
	}
	sort.Strings(nums)
	ref := func(list []string) string {
		var out []string
		for _, n := range list {
			out = append(out, fmt.Sprintf("[%s](%s)", n, adrs[n].file))
		}
		return strings.Join(out, ", ")
	}
	var b strings.Builder
	b.WriteString(`# Architecture decision records

One decision per record: its context, the decision, the alternatives and
the consequences. A record keeps the reasoning of its day; a later record
that changes it says so in its header ("Amends"), and the older record links
back ("Amended by", "Superseded by"), so that reading a record and then its
amendments gives the rule as it holds today.

This index is generated from the records' headers by ` + "`make generate`" + `;
` + "`go test ./internal/docstest`" + ` fails when it is out of date, when a header
does not follow the format, or when an amendment has no back-link.

A record's header, between its title and "## Context":

` + "```" + `
# NNNN. Title

Status: accepted
Amends [ADR NNNN](NNNN-title.md): what it changes there.
Amended by [ADR NNNN](NNNN-title.md): what changed here.
Superseded by [ADR NNNN](NNNN-title.md): why.
` + "```" + `

| ADR | Title | Status | Amends | Amended by |
|---|---|---|---|---|
`)
	prev := 0
	for _, n := range nums {
		cur, _ := strconv.Atoi(n)
		for u := prev + 1; u < cur; u++ {
			fmt.Fprintf(&b, "| %04d | not used | | | |\n", u)
		}
		prev = cur
		a := adrs[n]
		status := a.status
		if a.supersededBy != "" {
			status = "superseded by " + ref([]string{a.supersededBy})
		}
		fmt.Fprintf(&b, "| [%s](%s) | %s | %s | %s | %s |\n", n, a.file,
			strings.ReplaceAll(a.title, "|", `\|`), strings.ReplaceAll(status, "|", `\|`), ref(a.amends), ref(a.amendedBy))
	}
	return b.String()
}

// TestADRIndex: docs/adr/README.md lists every record with its number,
// title, status and amendments as its header says, and the numbers never
// used. With -update it is rewritten (make generate).
func TestADRIndex(t *testing.T) {
	adrs := readADRs(t)
	want := adrIndex(adrs)
	path := filepath.Join(adrDir, "README.md")
	if *update {
		if err := os.WriteFile(path, []byte(want), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	got, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (make generate writes it)", err)
	}
	if string(got) != want {
		gl, wl := strings.Split(string(got), "\n"), strings.Split(want, "\n")
		for i := 0; i < len(gl) || i < len(wl); i++ {
			var g, w string
			if i < len(gl) {
				g = gl[i]
			}
			if i < len(wl) {
				w = wl[i]
			}
			if g != w {
				t.Fatalf("docs/adr/README.md is out of date (make generate rewrites it); first difference at line %d:\n have %q\n want %q", i+1, g, w)
			}
		}
	}
}
