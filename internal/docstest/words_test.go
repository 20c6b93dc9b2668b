package docstest

import (
	"bufio"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// root is the repository, two levels above this package.
const root = "../.."

// historyWords are citations a reader cannot follow from the repository: a
// design brief's sections ("DESIGN §" and a number, "docs/design.md §4"), work rounds,
// sessions and issue numbers. A rule is cited by the ADR or the document
// (and its heading) that holds it.
var historyWords = []*regexp.Regexp{
	regexp.MustCompile(`§`),
	regexp.MustCompile(`\bDESIGN (rule|section)\b`),
	regexp.MustCompile(`(?i)\bround[ -]?[0-9]+\b`),
	regexp.MustCompile(`(?i)\bsessions? [0-9]+\b`),
	regexp.MustCompile(`(?i)\bissues? #?[0-9]+\b`),
	regexp.MustCompile(`(?i)\bcontract-[0-9]+\b`),
}

// checkedFile reports whether a file's words are checked: sources,
// documentation and build files.
func checkedFile(path string) bool {
	switch filepath.Ext(path) {
	case ".go", ".sql", ".md", ".toml", ".sh", ".ts", ".py", ".json", ".yml", ".yaml":
		return true
	}
	return filepath.Base(path) == "Makefile"
}

// frozen are the files whose words are not checked: released text that is
// never edited (migrations 001-003 and the function snapshots),
// dist/backoff.sql, which is generated from it, the changelog, which may
// speak of history, and this package, whose tests quote the patterns.
func frozen(rel string) bool {
	rel = filepath.ToSlash(rel)
	switch {
	case strings.HasPrefix(rel, "sql/migrations/snapshots/"),
		strings.HasPrefix(rel, "sql/migrations/001_"),
		strings.HasPrefix(rel, "sql/migrations/002_"),
		strings.HasPrefix(rel, "sql/migrations/003_"),
		strings.HasPrefix(rel, "dist/"),
		rel == "CHANGELOG.md",
		strings.HasPrefix(rel, "internal/docstest/"):
		return true
	}
	return false
}

// skippedDir: version control, dependencies and build output that are not
// the repository's own text.
func skippedDir(name string) bool {
	return name == ".git" || name == "node_modules" || name == "__pycache__" ||
		name == "bin" || (strings.HasPrefix(name, ".") && name != ".")
}

// TestNoHistoryWords fails naming file:line for every citation of a round,
// a session, an issue or a section of a design brief, and for a file whose
// name says when it was written rather than what it holds.
func TestNoHistoryWords(t *testing.T) {
	checked := 0
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		if d.IsDir() {
			if rel != "." && skippedDir(d.Name()) {
				return filepath.SkipDir
			}
			return nil
		}
		if frozen(rel) {
			return nil
		}
		// In a name, "_" and "-" separate words ("004_round2.sql").
		name := strings.NewReplacer("_", " ", "-", " ").Replace(d.Name())
		for _, re := range historyWords {
			if re.MatchString(name) {
				t.Errorf("%s: the file's name cites history (%q); name it after what it holds", rel, re.FindString(name))
			}
		}
		if !checkedFile(path) {
			return nil
		}
		checked++
		f, err := os.Open(path)
		if err != nil {
			return err
		}
		defer f.Close()
		sc := bufio.NewScanner(f)
		sc.Buffer(make([]byte, 0, 64*1024), 16*1024*1024)
		for n := 1; sc.Scan(); n++ {
			line := sc.Text()
			for _, re := range historyWords {
				if m := re.FindString(line); m != "" {
					t.Errorf("%s:%d: %q cites history; cite the ADR or document that holds the rule", rel, n, m)
				}
			}
		}
		return sc.Err()
	})
	if err != nil {
		t.Fatal(err)
	}
	if checked < 100 {
		t.Fatalf("checked only %d files under %s: is this the repository?", checked, root)
	}
}

// TestHistoryWordsMatch keeps the patterns honest: each catches what it is
// for, and none catches ordinary words.
func TestHistoryWordsMatch(t *testing.T) {
	// Spelled in pieces, so that a grep of the tree for these words finds
	// only what this test has not caught.
	caught := []string{"DESIGN §1" + "1.2", "docs/design.md §4", "round" + " 2", "Round-2", "round2", "a round2 b",
		"session" + " 4's quiet run", "issue 19", "issues 14 and 15", "Issue #22", "contract-19",
		"DESIGN rule 6"}
	for _, s := range caught {
		hit := false
		for _, re := range historyWords {
			hit = hit || re.MatchString(s)
		}
		if !hit {
			t.Errorf("%q is not caught", s)
		}
	}
	clean := []string{"3 rounds of the quick mode", "a round trip", "rounded to 2 digits",
		"the session's search_path", "an issue with the plan", "SET SESSION AUTHORIZATION",
		"sessions of 5 minutes are not", "contract"}
	for _, s := range clean {
		for _, re := range historyWords {
			if re.MatchString(s) {
				t.Errorf("%q is caught by %v", s, re)
			}
		}
	}
}
