package config

import (
	"errors"
	"slices"
	"strconv"
	"strings"

	"github.com/pelletier/go-toml/v2"
	"github.com/pelletier/go-toml/v2/unstable"
)

// node is a decoded TOML value that remembers where it was written: the
// dotted key path as it appears in the file and the line of that key.
// Overlays replace nodes, so a value taken from [env.test...] keeps the
// env.test... key and line, which is what an error must point at.
type node struct {
	key  string // dotted path as written, e.g. env.test.policies.moderate.max
	line int
	// One of: string, int64, float64, bool, []*node (array), map[string]*node
	// (table), or another TOML value (dates), which no key accepts.
	val any
}

func (n *node) table() (map[string]*node, bool) {
	m, ok := n.val.(map[string]*node)
	return m, ok
}

// parseTree decodes data with go-toml (which checks the TOML grammar,
// duplicate keys and redefined tables) and attaches to every value the line
// of its key, found with go-toml's position-keeping parser.
func parseTree(file string, data []byte, ps *problems) (*node, bool) {
	var raw map[string]any
	if err := toml.Unmarshal(data, &raw); err != nil {
		var de *toml.DecodeError
		if errors.As(err, &de) {
			line, _ := de.Position()
			ps.add(line, strings.Join(de.Key(), "."), "%s", strings.TrimPrefix(de.Error(), "toml: "))
		} else {
			ps.add(1, "", "%s", strings.TrimPrefix(err.Error(), "toml: "))
		}
		return nil, false
	}
	lines := keyLines(data)
	return build(nil, raw, lines, 1), true
}

// pathKey is the index key of a path: its parts joined by NUL, so that a
// quoted key containing a dot cannot collide with a dotted path.
func pathKey(path []string) string { return strings.Join(path, "\x00") }

// displayKey renders a path as a dotted key, quoting parts that are not bare
// keys.
func displayKey(path []string) string {
	parts := make([]string, len(path))
	for i, p := range path {
		parts[i] = displayPart(p)
	}
	return strings.Join(parts, ".")
}

func displayPart(p string) string {
	if p == "" {
		return `""`
	}
	for _, r := range p {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '_' || r == '-') {
			return strconv.Quote(p)
		}
	}
	return p
}

// keyLines maps every key path (tables, keys, array elements as "[i]") to
// the line where it first appears.
func keyLines(data []byte) map[string]int {
	lines := map[string]int{}
	var p unstable.Parser
	p.Reset(data)
	var table []string
	arrayCount := map[string]int{}
	record := func(path []string, r unstable.Range) {
		k := pathKey(path)
		if _, ok := lines[k]; !ok {
			lines[k] = p.Shape(r).Start.Line
		}
	}
	var walkValue func(path []string, v *unstable.Node)
	walkKeyValue := func(prefix []string, kv *unstable.Node) {
		path := slices.Clone(prefix)
		it := kv.Key()
		for it.Next() {
			path = append(path, string(it.Node().Data))
			record(path, it.Node().Raw)
		}
		walkValue(path, kv.Value())
	}
	walkValue = func(path []string, v *unstable.Node) {
		switch v.Kind {
		case unstable.InlineTable:
			it := v.Children()
			for it.Next() {
				walkKeyValue(path, it.Node())
			}
		case unstable.Array:
			it := v.Children()
			i := 0
			for it.Next() {
				el := it.Node()
				elPath := append(slices.Clone(path), "["+strconv.Itoa(i)+"]")
				if el.Raw.Length > 0 {
					record(elPath, el.Raw)
				}
				walkValue(elPath, el)
				i++
			}
		}
	}
	for p.NextExpression() {
		e := p.Expression()
		switch e.Kind {
		case unstable.Table, unstable.ArrayTable:
			table = table[:0]
			it := e.Key()
			for it.Next() {
				table = append(table, string(it.Node().Data))
				record(table, it.Node().Raw)
			}
			if e.Kind == unstable.ArrayTable {
				// Elements of an array of tables get their own index so
				// their keys point at the right header.
				k := pathKey(table)
				i := arrayCount[k]
				arrayCount[k]++
				table = append(table, "["+strconv.Itoa(i)+"]")
				it := e.Key()
				for it.Next() {
					record(table, it.Node().Raw)
				}
			}
		case unstable.KeyValue:
			walkKeyValue(table, e)
		}
	}
	return lines
}

// build turns go-toml's generic value into nodes carrying key and line.
// A path not in the index (an implicit table) takes its parent's line.
func build(path []string, v any, lines map[string]int, parentLine int) *node {
	line, ok := lines[pathKey(path)]
	if !ok {
		line = parentLine
	}
	n := &node{key: displayKey(path), line: line}
	switch v := v.(type) {
	case map[string]any:
		m := make(map[string]*node, len(v))
		for k, child := range v {
			m[k] = build(append(slices.Clone(path), k), child, lines, line)
		}
		n.val = m
		if !ok {
			// Implicit table: point at its first key instead.
			first := 0
			for _, c := range m {
				if first == 0 || c.line < first {
					first = c.line
				}
			}
			if first > 0 {
				n.line = first
			}
		}
	case []any:
		arr := make([]*node, len(v))
		for i, el := range v {
			arr[i] = build(append(slices.Clone(path), "["+strconv.Itoa(i)+"]"), el, lines, line)
			arr[i].key = n.key + "[" + strconv.Itoa(i) + "]"
		}
		n.val = arr
	default:
		n.val = v
	}
	return n
}

// merge lays overlay over base: tables merge key by key, anything else is
// replaced. Neither argument is modified.
func merge(base, overlay *node) *node {
	bt, bok := base.table()
	ot, ook := overlay.table()
	if !bok || !ook {
		return overlay
	}
	out := &node{key: base.key, line: base.line}
	m := make(map[string]*node, len(bt)+len(ot))
	for k, v := range bt {
		m[k] = v
	}
	for k, v := range ot {
		if b, ok := m[k]; ok {
			m[k] = merge(b, v)
		} else {
			m[k] = v
		}
	}
	out.val = m
	return out
}

// sortedKeys returns a table's keys in file order (then by name).
func sortedKeys(m map[string]*node) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b string) int {
		if m[a].line != m[b].line {
			return m[a].line - m[b].line
		}
		return strings.Compare(a, b)
	})
	return keys
}
