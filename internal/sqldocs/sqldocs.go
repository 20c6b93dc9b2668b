// Package sqldocs generates the reference pages of pgbackoff's public SQL
// functions (docs/sql/) from the database catalog: signature, parameters and
// the function's COMMENT, plus the output of the example the comment
// carries, run against a real database. Public means every function of the
// backoff schema whose name does not start with "_".
package sqldocs

import (
	"context"
	"fmt"
	"regexp"
	"sort"
	"strings"

	"github.com/jackc/pgx/v5"
)

// Function is one public function (all its overloads share a page).
type Function struct {
	Name      string
	Overloads []Overload
}

// Overload is one signature of a function.
type Overload struct {
	Arguments  string // pg_get_function_arguments
	Result     string // "" for a procedure
	Volatility string // "procedure" for a procedure
	Comment    string // empty when the function has none
}

// Load reads every public function of the backoff schema.
func Load(ctx context.Context, conn *pgx.Conn) ([]Function, error) {
	rows, err := conn.Query(ctx, `
		SELECT p.proname,
		       pg_catalog.pg_get_function_arguments(p.oid),
		       coalesce(pg_catalog.pg_get_function_result(p.oid), ''),
		       CASE WHEN p.prokind = 'p' THEN 'procedure'
		            WHEN p.provolatile = 'i' THEN 'immutable' WHEN p.provolatile = 's' THEN 'stable' ELSE 'volatile' END,
		       coalesce(pg_catalog.obj_description(p.oid, 'pg_proc'), '')
		FROM pg_catalog.pg_proc p
		WHERE p.pronamespace = 'backoff'::regnamespace AND p.proname NOT LIKE '\_%'
		ORDER BY p.proname, pg_catalog.pg_get_function_arguments(p.oid)`)
	if err != nil {
		return nil, fmt.Errorf("read functions: %w", err)
	}
	defer rows.Close()
	var fns []Function
	for rows.Next() {
		var name string
		var o Overload
		if err := rows.Scan(&name, &o.Arguments, &o.Result, &o.Volatility, &o.Comment); err != nil {
			return nil, err
		}
		if o.Volatility == "procedure" { // its arguments say IN, which a function's omit
			o.Arguments = strings.TrimPrefix(strings.ReplaceAll(o.Arguments, ", IN ", ", "), "IN ")
		}
		if len(fns) == 0 || fns[len(fns)-1].Name != name {
			fns = append(fns, Function{Name: name})
		}
		fns[len(fns)-1].Overloads = append(fns[len(fns)-1].Overloads, o)
	}
	return fns, rows.Err()
}

// Parameter is one argument of a signature.
type Parameter struct{ Name, Type, Default string }

// Parameters splits pg_get_function_arguments output ("p_a integer, p_b
// text DEFAULT 'x'::text") into its parameters.
func Parameters(arguments string) []Parameter {
	var params []Parameter
	for _, part := range splitTopLevel(arguments) {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		var p Parameter
		if i := strings.Index(part, " DEFAULT "); i >= 0 {
			p.Default = part[i+len(" DEFAULT "):]
			part = part[:i]
		}
		for _, mode := range []string{"OUT ", "INOUT ", "VARIADIC "} {
			part = strings.TrimPrefix(part, mode)
		}
		name, typ, _ := strings.Cut(part, " ")
		p.Name, p.Type = name, typ
		params = append(params, p)
	}
	return params
}

func splitTopLevel(s string) []string {
	var parts []string
	depth, quoted, start := 0, false, 0
	for i, r := range s {
		switch {
		case r == '\'':
			quoted = !quoted
		case quoted:
		case r == '(' || r == '[':
			depth++
		case r == ')' || r == ']':
			depth--
		case r == ',' && depth == 0:
			parts = append(parts, s[start:i])
			start = i + 1
		}
	}
	return append(parts, s[start:])
}

// Example is the SQL after "Example:" in a comment, or "".
func Example(comment string) string {
	i := strings.Index(comment, "Example:")
	if i < 0 {
		return ""
	}
	return strings.TrimSpace(comment[i+len("Example:"):])
}

// Description is the comment without its example.
func Description(comment string) string {
	if i := strings.Index(comment, "Example:"); i >= 0 {
		comment = comment[:i]
	}
	return strings.TrimSpace(comment)
}

// RunExample runs sql in a transaction that is rolled back and returns the
// last result set as a psql-style aligned table.
func RunExample(ctx context.Context, conn *pgx.Conn, sql string) (string, error) {
	// A procedure's example (CALL) commits, which it may not do inside a
	// transaction block: it runs as it is, in the example's own database.
	if !strings.HasPrefix(strings.TrimSpace(sql), "CALL ") {
		tx, err := conn.Begin(ctx)
		if err != nil {
			return "", err
		}
		defer tx.Rollback(ctx) //nolint:errcheck // rollback is the point
	}
	results, err := conn.PgConn().Exec(ctx, sql).ReadAll()
	if err != nil {
		return "", err
	}
	for i := len(results) - 1; i >= 0; i-- {
		r := results[i]
		if r.Err != nil {
			return "", r.Err
		}
		if len(r.FieldDescriptions) == 0 {
			continue
		}
		header := make([]string, len(r.FieldDescriptions))
		for j, f := range r.FieldDescriptions {
			header[j] = f.Name
		}
		var table [][]string
		for _, row := range r.Rows {
			cells := make([]string, len(row))
			for j, v := range row {
				cells[j] = string(v)
			}
			table = append(table, cells)
		}
		return formatTable(header, table, len(r.Rows)), nil
	}
	return "", nil
}

func formatTable(header []string, rows [][]string, n int) string {
	widths := make([]int, len(header))
	for j, h := range header {
		widths[j] = len([]rune(h))
	}
	for _, row := range rows {
		for j, c := range row {
			widths[j] = max(widths[j], len([]rune(c)))
		}
	}
	var b strings.Builder
	line := func(cells []string, center bool) {
		for j, c := range cells {
			if j > 0 {
				b.WriteString(" | ")
			} else {
				b.WriteString(" ")
			}
			pad := widths[j] - len([]rune(c))
			if center {
				b.WriteString(strings.Repeat(" ", pad/2) + c + strings.Repeat(" ", pad-pad/2))
			} else {
				b.WriteString(c + strings.Repeat(" ", pad))
			}
		}
		b.WriteString("\n")
	}
	line(header, true)
	for j, w := range widths {
		if j > 0 {
			b.WriteString("+")
		}
		b.WriteString(strings.Repeat("-", w+2))
	}
	b.WriteString("\n")
	for _, row := range rows {
		line(row, false)
	}
	if n == 1 {
		b.WriteString("(1 row)\n")
	} else {
		fmt.Fprintf(&b, "(%d rows)\n", n)
	}
	lines := strings.Split(b.String(), "\n")
	for i, l := range lines {
		lines[i] = strings.TrimRight(l, " ")
	}
	return strings.Join(lines, "\n")
}

// Page renders one function's reference page; outputs holds each
// overload's example output (same order as the overloads).
func Page(fn Function, outputs []string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "# backoff.%s\n\n", fn.Name)
	b.WriteString("<!-- Generated from the database catalog by internal/sqldocs; run `make generate`. -->\n\n")
	for i, o := range fn.Overloads {
		if o.Volatility == "procedure" {
			fmt.Fprintf(&b, "```sql\nCALL backoff.%s(%s)\n```\n\n", fn.Name, o.Arguments)
			fmt.Fprintf(&b, "A procedure. %s\n\n", Description(o.Comment))
		} else {
			fmt.Fprintf(&b, "```sql\nbackoff.%s(%s) → %s\n```\n\n", fn.Name, o.Arguments, o.Result)
			fmt.Fprintf(&b, "%s. %s\n\n", strings.ToUpper(o.Volatility[:1])+o.Volatility[1:], Description(o.Comment))
		}
		if params := Parameters(o.Arguments); len(params) > 0 {
			b.WriteString("| parameter | type | default |\n|---|---|---|\n")
			for _, p := range params {
				def := p.Default
				if def == "" {
					def = "required"
				} else {
					def = "`" + def + "`"
				}
				fmt.Fprintf(&b, "| `%s` | `%s` | %s |\n", p.Name, p.Type, def)
			}
			b.WriteString("\n")
		}
		if ex := Example(o.Comment); ex != "" {
			fmt.Fprintf(&b, "Example:\n\n```sql\n%s\n```\n\n", ex)
			if outputs[i] != "" { // a CALL returns no rows
				fmt.Fprintf(&b, "```\n%s```\n\n", outputs[i])
			}
		}
	}
	return b.String()
}

// Index renders docs/sql/README.md: one line per function with the first
// sentence of its comment.
func Index(fns []Function) string {
	sorted := append([]Function(nil), fns...)
	sort.Slice(sorted, func(i, j int) bool { return sorted[i].Name < sorted[j].Name })
	var b strings.Builder
	b.WriteString("# SQL reference\n\n")
	b.WriteString("<!-- Generated from the database catalog by internal/sqldocs; run `make generate`. -->\n\n")
	b.WriteString("Every public function of the schema `backoff`. Errors use the SQLSTATEs of\n")
	b.WriteString("[the contract](../design.md#errors).\n\n")
	b.WriteString("| function | what it does |\n|---|---|\n")
	for _, fn := range sorted {
		fmt.Fprintf(&b, "| [`backoff.%s`](%s.md) | %s |\n", fn.Name, fn.Name, firstSentence(Description(fn.Overloads[0].Comment)))
	}
	return b.String()
}

func firstSentence(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	if i := strings.Index(s, ". "); i >= 0 {
		return s[:i+1]
	}
	return s
}

var volatile = regexp.MustCompile(`\d{4}-\d{2}-\d{2}[ T]\d{2}:\d{2}:\d{2}(\.\d+)?([+-]\d{2}(:\d{2})?)?`)

// MaskVolatile replaces timestamps, which change from run to run, so that
// a committed page can be compared with a fresh rendering.
func MaskVolatile(s string) string { return volatile.ReplaceAllString(s, "<timestamp>") }
