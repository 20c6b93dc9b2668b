package client

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// The queue's functions are written for READ COMMITTED (docs/adr/0080):
// a claim's FOR UPDATE SKIP LOCKED follows a row another session updated
// instead of failing, and rotate truncates only there. A database whose
// default_transaction_isolation is REPEATABLE READ or SERIALIZABLE would
// run each call at that level, where claims and settles under contention
// end in serialization failures. Over a pool or a connection whose
// sessions default to another level, the client therefore runs each
// statement in a READ COMMITTED transaction of its own, sent with its
// BEGIN and COMMIT in one round trip. In a caller's transaction (With(tx))
// the call runs at that transaction's level: the caller chose it.

// readCommittedIfNeeded returns db itself when its sessions already start
// at READ COMMITTED or it is not a pool or a connection, else db wrapped so
// that each statement runs at READ COMMITTED.
func readCommittedIfNeeded(ctx context.Context, db DB) (DB, error) {
	var acquire func(context.Context) (*pgx.Conn, func(), error)
	switch d := db.(type) {
	case *pgxpool.Pool:
		acquire = func(ctx context.Context) (*pgx.Conn, func(), error) {
			c, err := d.Acquire(ctx)
			if err != nil {
				return nil, nil, err
			}
			return c.Conn(), c.Release, nil
		}
	case *pgx.Conn:
		acquire = func(context.Context) (*pgx.Conn, func(), error) { return d, func() {}, nil }
	default:
		return db, nil
	}
	var level string
	if err := db.QueryRow(ctx, "SELECT current_setting('default_transaction_isolation')").Scan(&level); err != nil {
		return nil, fmt.Errorf("read default_transaction_isolation: %w", err)
	}
	if level == "read committed" {
		return db, nil
	}
	return readCommitted{acquire: acquire}, nil
}

// readCommitted runs each statement as BEGIN ISOLATION LEVEL READ
// COMMITTED, the statement, COMMIT, pipelined in one batch on one
// connection. A connection already inside a transaction (a *pgx.Conn the
// caller began one on) runs the statement as it is, in that transaction.
type readCommitted struct {
	acquire func(context.Context) (*pgx.Conn, func(), error)
}

const beginReadCommitted = "BEGIN ISOLATION LEVEL READ COMMITTED"

// send starts the batch; br's first result (the BEGIN) is read. With inTx
// the connection was in a transaction already and nothing was sent.
func (r readCommitted) send(ctx context.Context, sql string, args []any) (conn *pgx.Conn, release func(), br pgx.BatchResults, inTx bool, err error) {
	conn, release, err = r.acquire(ctx)
	if err != nil {
		return nil, nil, nil, false, err
	}
	if conn.PgConn().TxStatus() != 'I' {
		return conn, release, nil, true, nil
	}
	b := &pgx.Batch{}
	b.Queue(beginReadCommitted)
	b.Queue(sql, args...)
	b.Queue("COMMIT")
	br = conn.SendBatch(ctx, b)
	if _, err = br.Exec(); err != nil {
		finish(ctx, conn, release, br)
		return nil, nil, nil, false, err
	}
	return conn, release, br, false, nil
}

// finish closes the batch and, when a statement failed and left the
// transaction open, rolls it back, so that the connection goes back idle
// (a pool would otherwise close it).
func finish(ctx context.Context, conn *pgx.Conn, release func(), br pgx.BatchResults) {
	_ = br.Close()
	if !conn.IsClosed() && conn.PgConn().TxStatus() != 'I' {
		_, _ = conn.Exec(ctx, "ROLLBACK")
	}
	release()
}

func (r readCommitted) Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	conn, release, br, inTx, err := r.send(ctx, sql, args)
	if err != nil {
		return pgconn.CommandTag{}, err
	}
	if inTx {
		defer release()
		return conn.Exec(ctx, sql, args...)
	}
	defer finish(ctx, conn, release, br)
	tag, err := br.Exec()
	if err != nil {
		return tag, err
	}
	_, err = br.Exec()
	return tag, err
}

func (r readCommitted) Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error) {
	conn, release, br, inTx, err := r.send(ctx, sql, args)
	if err != nil {
		return nil, err
	}
	if inTx {
		rows, err := conn.Query(ctx, sql, args...)
		if err != nil {
			release()
			return nil, err
		}
		return &committedRows{Rows: rows, done: release}, nil
	}
	rows, err := br.Query()
	if err != nil {
		finish(ctx, conn, release, br)
		return nil, err
	}
	return &committedRows{Rows: rows, commit: br, done: func() { finish(ctx, conn, release, br) }}, nil
}

func (r readCommitted) QueryRow(ctx context.Context, sql string, args ...any) pgx.Row {
	rows, err := r.Query(ctx, sql, args...)
	return &committedRow{rows: rows, err: err}
}

// committedRows reads the COMMIT's result as soon as the statement's rows
// are read, so that Err after the loop reports a failed commit, and gives
// the connection back on Close.
type committedRows struct {
	pgx.Rows
	commit pgx.BatchResults // nil in the caller's transaction
	done   func()
	err    error
	closed bool
}

func (r *committedRows) Next() bool {
	if r.Rows.Next() {
		return true
	}
	if r.Rows.Err() == nil && r.commit != nil && r.err == nil {
		r.Rows.Close()
		if _, err := r.commit.Exec(); err != nil {
			r.err = err
		}
		r.commit = nil
	}
	return false
}

func (r *committedRows) Err() error {
	if err := r.Rows.Err(); err != nil {
		return err
	}
	return r.err
}

func (r *committedRows) Close() {
	if r.closed {
		return
	}
	r.closed = true
	r.Rows.Close()
	r.done()
}

// committedRow is QueryRow's one row: the first row is scanned, the rest
// read and discarded, as pgx's own Row does.
type committedRow struct {
	rows pgx.Rows
	err  error
}

func (r *committedRow) Scan(dest ...any) error {
	if r.err != nil {
		return r.err
	}
	defer r.rows.Close()
	if !r.rows.Next() {
		if err := r.rows.Err(); err != nil {
			return err
		}
		return pgx.ErrNoRows
	}
	if err := r.rows.Scan(dest...); err != nil {
		return err
	}
	for r.rows.Next() {
	}
	return r.rows.Err()
}
