package client

import (
	"context"
	"fmt"
	"reflect"
	"sync"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgtype"
)

// mockDB is a strict, ordered expectation recorder for the DB interface,
// in the style of pgxmock (whose v3.4.0 does not build against pgx
// v5.12: pgx.Rows gained TypeMap in v5.11). It checks the exact SQL text and
// arguments of every call and returns the rows or error it was given.
type mockDB struct {
	mu   sync.Mutex
	exps []*mockExp
	next int
}

type mockExp struct {
	sql     string
	args    []any
	rows    *mockRows
	err     error
	matched bool
}

func newMockDB() *mockDB { return &mockDB{} }

func (m *mockDB) ExpectQuery(sql string) *mockExp {
	m.mu.Lock()
	defer m.mu.Unlock()
	e := &mockExp{sql: sql}
	m.exps = append(m.exps, e)
	return e
}

func (e *mockExp) WithArgs(args ...any) *mockExp       { e.args = args; return e }
func (e *mockExp) WillReturnRows(r *mockRows) *mockExp { e.rows = r; return e }
func (e *mockExp) WillReturnError(err error) *mockExp  { e.err = err; return e }
func newRows(cols []string) *mockRows                  { return &mockRows{cols: cols} }
func (r *mockRows) AddRow(values ...any) *mockRows     { r.rows = append(r.rows, values); return r }
func (m *mockDB) ExpectationsWereMet() error           { return m.unmet() }
func (m *mockDB) Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	_, err := m.match(sql, args)
	return pgconn.CommandTag{}, err
}

func (m *mockDB) unmet() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, e := range m.exps {
		if !e.matched {
			return fmt.Errorf("expected query was not run: %s", e.sql)
		}
	}
	return nil
}

func (m *mockDB) match(sql string, args []any) (*mockExp, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.next >= len(m.exps) {
		return nil, fmt.Errorf("unexpected query: %s %v", sql, args)
	}
	e := m.exps[m.next]
	if e.sql != sql {
		return nil, fmt.Errorf("query text mismatch:\n  want %s\n  got  %s", e.sql, sql)
	}
	if e.args != nil && !reflect.DeepEqual(e.args, args) {
		return nil, fmt.Errorf("arguments of %s:\n  want %#v\n  got  %#v", sql, e.args, args)
	}
	m.next++
	e.matched = true
	return e, nil
}

func (m *mockDB) Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error) {
	e, err := m.match(sql, args)
	if err != nil {
		return nil, err
	}
	if e.err != nil {
		return nil, e.err
	}
	r := e.rows
	if r == nil {
		r = &mockRows{}
	}
	return &mockCursor{r: r, i: -1}, nil
}

func (m *mockDB) QueryRow(ctx context.Context, sql string, args ...any) pgx.Row {
	rows, err := m.Query(ctx, sql, args...)
	return &mockRow{rows: rows, err: err}
}

type mockRows struct {
	cols []string
	rows [][]any
}

type mockRow struct {
	rows pgx.Rows
	err  error
}

func (r *mockRow) Scan(dest ...any) error {
	if r.err != nil {
		return r.err
	}
	defer r.rows.Close()
	if !r.rows.Next() {
		return pgx.ErrNoRows
	}
	return r.rows.Scan(dest...)
}

// mockCursor implements pgx.Rows over a mockRows.
type mockCursor struct {
	r *mockRows
	i int
}

func (c *mockCursor) Close()                        {}
func (c *mockCursor) Err() error                    { return nil }
func (c *mockCursor) CommandTag() pgconn.CommandTag { return pgconn.CommandTag{} }
func (c *mockCursor) Next() bool                    { c.i++; return c.i < len(c.r.rows) }
func (c *mockCursor) Values() ([]any, error)        { return c.r.rows[c.i], nil }
func (c *mockCursor) RawValues() [][]byte           { return nil }
func (c *mockCursor) Conn() *pgx.Conn               { return nil }
func (c *mockCursor) TypeMap() *pgtype.Map          { return pgtype.NewMap() }
func (c *mockCursor) FieldDescriptions() []pgconn.FieldDescription {
	fds := make([]pgconn.FieldDescription, len(c.r.cols))
	for i, n := range c.r.cols {
		fds[i].Name = n
	}
	return fds
}

// Scan assigns each value to its destination as pgx would after decoding:
// nil sets the zero value (a nil pointer), anything else must be assignable.
func (c *mockCursor) Scan(dest ...any) error {
	row := c.r.rows[c.i]
	if len(dest) != len(row) {
		return fmt.Errorf("scan: %d destinations for %d columns", len(dest), len(row))
	}
	for i, v := range row {
		dv := reflect.ValueOf(dest[i])
		if dv.Kind() != reflect.Pointer {
			return fmt.Errorf("scan: destination %d is not a pointer", i)
		}
		el := dv.Elem()
		if v == nil {
			el.Set(reflect.Zero(el.Type()))
			continue
		}
		vv := reflect.ValueOf(v)
		if !vv.Type().AssignableTo(el.Type()) {
			return fmt.Errorf("scan: column %d (%s): cannot assign %T to %s", i, c.r.cols[i], v, el.Type())
		}
		el.Set(vv)
	}
	return nil
}
