// Package sqlapi is what the worker API (package client) and the operator
// API (package client/ops) share to call the backoff schema's functions:
// the call builder, the mapping of the documented SQLSTATEs to the
// sentinel errors, the scan of a job row and the error text cleaner. It is
// internal so that the two public packages stay the only way in.
package sqlapi

import (
	"context"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// DB is the query interface both APIs take (client.DB, ops.DB):
// *pgxpool.Pool, *pgx.Conn, pgx.Tx and pgxmock's mocks satisfy it.
type DB interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// Param is one named argument of a SQL function call. Naming the
// parameters (p_queue => $1) keeps calls correct when a function gains
// optional parameters, and the cast fixes the parameter's type for the
// planner.
type Param struct {
	name  string
	cast  string
	value any
}

// Arg is the argument name => value::cast.
func Arg(name, cast string, value any) Param { return Param{name: name, cast: cast, value: value} }

// CallAt builds the call "backoff.<name>(p_a => $1::t, ..., p_now => $n)"
// and its arguments. p_now is always there, so each method sends one SQL
// text whether or not a clock is set: now is the clock's time, or nil,
// which the functions read as the database's now() (ADR 0035).
func CallAt(name string, now any, args ...Param) (string, []any) {
	return Call(name, append(args, Arg("p_now", "timestamptz", now))...)
}

// Call writes a call of backoff.name with named, typed arguments, for the
// functions that take no time.
func Call(name string, args ...Param) (string, []any) {
	var b strings.Builder
	b.WriteString("backoff.")
	b.WriteString(name)
	b.WriteByte('(')
	values := make([]any, len(args))
	for i, a := range args {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(a.name)
		b.WriteString(" => $")
		b.WriteString(strconv.Itoa(i + 1))
		b.WriteString("::")
		b.WriteString(a.cast)
		values[i] = a.value
	}
	b.WriteByte(')')
	return b.String(), values
}

// NullDuration passes 0 as NULL (the function's default).
func NullDuration(d time.Duration) any {
	if d == 0 {
		return nil
	}
	return d
}

// NullInt passes 0 as NULL (the function's default).
func NullInt(n int) any {
	if n == 0 {
		return nil
	}
	return n
}

// NullString passes "" as NULL (no filter, or the function's default).
func NullString(s string) any {
	if s == "" {
		return nil
	}
	return s
}

// NullTime passes the zero time as NULL.
func NullTime(t time.Time) any {
	if t.IsZero() {
		return nil
	}
	return t
}
