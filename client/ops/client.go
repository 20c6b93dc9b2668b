package ops

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/pgbackoff/pgbackoff/client/internal/sqlapi"
	"github.com/pgbackoff/pgbackoff/client/jobtype"
)

// DB is what the operator client needs to run queries: the same method set
// as client.DB, so the pool, connection or transaction a worker's client
// uses serves here too. *pgxpool.Pool, *pgx.Conn, pgx.Tx and pgxmock's
// mocks satisfy it.
type DB interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// Client is the operator's API over the backoff schema's SQL functions. It
// is safe for concurrent use when its DB is (a pool is; a connection or a
// transaction is not).
type Client struct {
	db  DB
	now func() time.Time // nil: the database's now()
}

// Option configures a Client.
type Option func(*Client)

// WithClock makes every call pass p_now = now() instead of letting the
// database read its own clock, as client.WithClock does for a worker's
// client: for tests, simulations and `backoffctl --now`. A caller outside
// backoff_admin may pass only a time within backoff.settings.max_clock_skew
// of the database's clock (docs/adr/0057-a-clock-ahead-is-the-database-clock.md).
func WithClock(now func() time.Time) Option { return func(c *Client) { c.now = now } }

// New returns an operator client over db. It reads nothing: the first
// call that reaches a missing function or an older schema fails with the
// server's error. Build a client.Client on the same db (client.New checks
// the schema version) where that check matters.
func New(db DB, opts ...Option) *Client {
	c := &Client{db: db}
	for _, o := range opts {
		o(c)
	}
	return c
}

// With returns a client that runs its calls on db (a pgx.Tx, to act in
// the caller's transaction) with c's options.
func (c *Client) With(db DB) *Client { return &Client{db: db, now: c.now} }

// nowArg is the p_now every call passes: the clock's time with WithClock,
// else NULL (the database's now()).
func (c *Client) nowArg() any {
	if c.now != nil {
		return c.now()
	}
	return nil
}

// fn builds the call of backoff.name with its arguments and p_now.
func (c *Client) fn(name string, args ...sqlapi.Param) (string, []any) {
	return sqlapi.CallAt(name, c.nowArg(), args...)
}

// translate maps the database's errors to client's sentinels
// (client.ErrJobNotFound, ...), prefixed with the operation.
func translate(op string, err error) error { return sqlapi.Translate(op, err) }

func (c *Client) queryJob(ctx context.Context, sql string, args []any) (jobtype.Job, error) {
	return sqlapi.ScanJob(c.db.QueryRow(ctx, sql, args...))
}
