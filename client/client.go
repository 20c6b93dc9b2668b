package client

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/metric/noop"
)

// DB is what the client needs to run queries. *pgxpool.Pool, *pgx.Conn,
// pgx.Tx and pgxmock's mocks all satisfy it, so a call can join the caller's
// transaction.
type DB interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// Client is the typed API over the backoff schema's SQL functions. It is
// safe for concurrent use when its DB is (a pool is; a connection or a
// transaction is not).
type Client struct {
	db  DB
	cfg *config
	// pool: db when it is a pool, where WaitForOutput takes a connection
	// to LISTEN on; nil otherwise (it polls).
	pool *pgxpool.Pool
}

type config struct {
	now      func() time.Time // nil: the database's now()
	logger   *slog.Logger
	meters   metric.MeterProvider
	workerID string
	metrics  *metrics
}

// Option configures a Client or a Worker.
type Option func(*config)

// WithClock makes every call pass p_now = now() instead of letting the
// database read its own clock, so tests and simulations drive time. Without
// it the database's clock is authoritative, which is what production wants:
// workers on many hosts then agree on time. A caller outside backoff_admin
// may pass only a time within backoff.settings.max_clock_skew (default 5
// minutes) of the database's clock, unless the database has time injection
// switched on (ErrInvalidArgument otherwise); a time ahead of the database's
// clock within that skew counts as the database's clock
// (docs/adr/0057-a-clock-ahead-is-the-database-clock.md).
func WithClock(now func() time.Time) Option { return func(c *config) { c.now = now } }

// WithLogger sets the structured logger (default slog.Default()).
func WithLogger(l *slog.Logger) Option { return func(c *config) { c.logger = l } }

// WithMeterProvider sets the OpenTelemetry meter provider the client and
// its workers record metrics with (default: a no-op provider).
func WithMeterProvider(mp metric.MeterProvider) Option {
	return func(c *config) { c.meters = mp }
}

// WithWorkerID names this process in locked_by and in the error history
// (default: host name, process id and a random suffix).
func WithWorkerID(id string) Option { return func(c *config) { c.workerID = id } }

func newConfig(opts []Option) (*config, error) {
	c := &config{}
	for _, o := range opts {
		o(c)
	}
	if c.logger == nil {
		c.logger = slog.Default()
	}
	if c.meters == nil {
		c.meters = noop.NewMeterProvider()
	}
	if c.workerID == "" {
		c.workerID = defaultWorkerID()
	}
	m, err := newMetrics(c.meters)
	if err != nil {
		return nil, fmt.Errorf("create metrics: %w", err)
	}
	c.metrics = m
	return c, nil
}

func defaultWorkerID() string {
	host, _ := os.Hostname()
	if host == "" {
		host = "worker"
	}
	b := make([]byte, 3)
	_, _ = rand.Read(b)
	return fmt.Sprintf("%s-%d-%s", host, os.Getpid(), hex.EncodeToString(b))
}

// requiredSchema is the migration version this build needs: the number of
// the latest migration in sql/migrations. It is a constant so that the
// client does not import the migration tooling (tern); TestRequiredSchema
// keeps it equal to the embedded migrations.
const requiredSchema int32 = 6

// New returns a client over db after checking, once, that the database's
// pgbackoff schema is at least the version this build needs. An older (or
// missing) schema is refused with an error that wraps ErrSchemaTooOld and
// says to run `backoffctl migrate up`.
func New(ctx context.Context, db DB, opts ...Option) (*Client, error) {
	cfg, err := newConfig(opts)
	if err != nil {
		return nil, err
	}
	if err := checkSchema(ctx, db); err != nil {
		return nil, err
	}
	pool, _ := db.(*pgxpool.Pool)
	if db, err = readCommittedIfNeeded(ctx, db); err != nil {
		return nil, fmt.Errorf("new client: %w", err)
	}
	return &Client{db: db, cfg: cfg, pool: pool}, nil
}

func checkSchema(ctx context.Context, db DB) error {
	need := requiredSchema
	var have *int32
	err := db.QueryRow(ctx, "SELECT backoff.schema_version()").Scan(&have)
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && (pgErr.Code == "3F000" || pgErr.Code == "42883" || pgErr.Code == "42P01") {
		// invalid_schema_name, undefined_function, undefined_table: nothing
		// (or only part of the schema) is installed.
		return fmt.Errorf("check pgbackoff schema: %w: it is not installed (need version %d): run `backoffctl migrate up`",
			ErrSchemaTooOld, need)
	}
	if err != nil {
		return fmt.Errorf("check pgbackoff schema: %w", err)
	}
	if have == nil || *have < need {
		v := int32(0)
		if have != nil {
			v = *have
		}
		return fmt.Errorf("check pgbackoff schema: %w: the database is at version %d, this client needs %d: run `backoffctl migrate up`",
			ErrSchemaTooOld, v, need)
	}
	return nil
}

// With returns a client that runs its calls on db (typically a pgx.Tx, to
// enqueue in the caller's transaction) and shares c's options. It does not
// check the schema again.
func (c *Client) With(db DB) *Client {
	pool, _ := db.(*pgxpool.Pool)
	return &Client{db: db, cfg: c.cfg, pool: pool}
}

// WorkerID is the name this client writes into locked_by.
func (c *Client) WorkerID() string { return c.cfg.workerID }

// nowArg is the p_now every call passes: the clock's time with WithClock,
// else NULL (the database's now()).
func (c *Client) nowArg() any {
	if c.cfg.now != nil {
		return c.cfg.now()
	}
	return nil
}

// clock is the client's notion of the current time, for durations the
// worker computes locally (remaining lease).
func (c *Client) clock() time.Time {
	if c.cfg.now != nil {
		return c.cfg.now()
	}
	return time.Now()
}
