package config

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
)

// Problem is one thing wrong with a configuration file, at a line and key.
type Problem struct {
	File    string
	Line    int    // 1-based; every problem has one
	Key     string // dotted path as written in the file, e.g. policies.moderate.max; empty for syntax errors
	Message string
}

// String renders the problem as FILE:LINE: key: message.
func (p Problem) String() string {
	if p.Key == "" {
		return fmt.Sprintf("%s:%d: %s", p.File, p.Line, p.Message)
	}
	return fmt.Sprintf("%s:%d: %s: %s", p.File, p.Line, p.Key, p.Message)
}

// Errors is every problem found in a configuration file, in line order.
// Load returns it (as *Errors) when the file is not valid.
type Errors struct {
	File     string
	Problems []Problem
}

// Error renders one problem per line.
func (e *Errors) Error() string {
	lines := make([]string, len(e.Problems))
	for i, p := range e.Problems {
		lines[i] = p.String()
	}
	return strings.Join(lines, "\n")
}

// problems collects problems while a file is decoded; duplicates (the same
// base-file problem seen again through every environment) are dropped.
type problems struct {
	file string
	seen map[string]bool
	list []Problem
	adds int // calls to add, duplicates included
}

func (ps *problems) add(line int, key, format string, args ...any) {
	ps.adds++
	if line < 1 {
		line = 1
	}
	p := Problem{File: ps.file, Line: line, Key: key, Message: fmt.Sprintf(format, args...)}
	s := p.String()
	if ps.seen == nil {
		ps.seen = map[string]bool{}
	}
	if ps.seen[s] {
		return
	}
	ps.seen[s] = true
	ps.list = append(ps.list, p)
}

func (ps *problems) err() error {
	if len(ps.list) == 0 {
		return nil
	}
	list := slices.Clone(ps.list)
	slices.SortStableFunc(list, func(a, b Problem) int {
		return cmp.Or(cmp.Compare(a.Line, b.Line), cmp.Compare(a.Key, b.Key))
	})
	return &Errors{File: ps.file, Problems: list}
}

// suggest returns ` (did you mean "x"?)` when one candidate is within edit
// distance 2 of word (the closest, ties broken alphabetically), else "".
func suggest(word string, candidates []string) string {
	best, bestD := "", 3
	sorted := slices.Clone(candidates)
	slices.Sort(sorted)
	for _, c := range sorted {
		if d := levenshtein(strings.ToLower(word), strings.ToLower(c)); d < bestD {
			best, bestD = c, d
		}
	}
	if best == "" {
		return ""
	}
	return fmt.Sprintf(" (did you mean %q?)", best)
}

// keyHint is what an unknown key's problem suggests: the key a common
// misspelling (hints, by lower case) stands for, else the nearest of keys.
func keyHint(k string, keys []string, hints map[string]string) string {
	if h, ok := hints[strings.ToLower(k)]; ok {
		return fmt.Sprintf(" (did you mean %q?)", h)
	}
	return suggest(k, keys)
}

// integer reads n as an integer from lo to hi, or reports with fail why
// it is not one (example: a value to show).
func integer(n *node, lo, hi int64, example string, fail func(n *node, format string, args ...any)) (int, bool) {
	i, ok := n.val.(int64)
	switch {
	case !ok:
		fail(n, "must be an integer such as %s, got %s", example, describeValue(n.val))
	case i < lo || i > hi:
		fail(n, "must be between %d and %d, got %d", lo, hi, i)
	default:
		return int(i), true
	}
	return 0, false
}

// levenshtein is the edit distance between a and b, in runes.
func levenshtein(a, b string) int {
	ra, rb := []rune(a), []rune(b)
	prev := make([]int, len(rb)+1)
	cur := make([]int, len(rb)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(ra); i++ {
		cur[0] = i
		for j := 1; j <= len(rb); j++ {
			cost := 1
			if ra[i-1] == rb[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(rb)]
}
