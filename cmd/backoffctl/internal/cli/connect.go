package cli

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/spf13/cobra"

	"github.com/pgbackoff/pgbackoff/client"
	"github.com/pgbackoff/pgbackoff/client/ops"
)

// statementTimeout bounds every statement backoffctl sends, so an operator's
// command never hangs behind a lock.
const statementTimeout = 30 * time.Second

// databaseURL returns --database-url, or DATABASE_URL.
func databaseURL(cmd *cobra.Command) (string, error) {
	u, _ := cmd.Flags().GetString("database-url")
	if u == "" {
		u = os.Getenv("DATABASE_URL")
	}
	if u == "" {
		return "", usagef("no database: pass --database-url or set DATABASE_URL")
	}
	return u, nil
}

func connConfig(cmd *cobra.Command) (*pgx.ConnConfig, error) {
	u, err := databaseURL(cmd)
	if err != nil {
		return nil, err
	}
	return parseConnConfig(u)
}

// parseConnConfig reads a URL with backoffctl's connection settings: a
// connect timeout, its application_name and the statement timeout.
func parseConnConfig(u string) (*pgx.ConnConfig, error) {
	cfg, err := pgx.ParseConfig(u)
	if err != nil {
		return nil, usageError{fmt.Errorf("invalid database URL: %w", rootCause(err))}
	}
	if cfg.ConnectTimeout == 0 {
		cfg.ConnectTimeout = 10 * time.Second
	}
	cfg.RuntimeParams["application_name"] = "backoffctl"
	cfg.RuntimeParams["statement_timeout"] = fmt.Sprint(statementTimeout.Milliseconds())
	return cfg, nil
}

// connect opens one connection for a command.
func connect(ctx context.Context, cmd *cobra.Command) (*pgx.Conn, error) {
	cfg, err := connConfig(cmd)
	if err != nil {
		return nil, err
	}
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("connect to %s:%d: %w", cfg.Host, cfg.Port, rootCause(err))
	}
	return conn, nil
}

// connectPool opens a pool with cfg's settings, for commands that run
// workers (demo).
func connectPool(ctx context.Context, cfg *pgx.ConnConfig, maxConns int32) (*pgxpool.Pool, error) {
	pcfg, err := pgxpool.ParseConfig("")
	if err != nil {
		return nil, err
	}
	pcfg.ConnConfig = cfg
	pcfg.MaxConns = maxConns
	pool, err := pgxpool.NewWithConfig(ctx, pcfg)
	if err != nil {
		return nil, err
	}
	if err := pool.Ping(ctx); err != nil {
		pool.Close()
		return nil, fmt.Errorf("connect to %s:%d: %w", cfg.Host, cfg.Port, rootCause(err))
	}
	return pool, nil
}

// rootCause drops pgx's wrapping down to the innermost error, which is the
// part an operator can act on ("connection refused", "password
// authentication failed").
func rootCause(err error) error {
	for {
		var next error
		switch e := err.(type) {
		case interface{ Unwrap() []error }:
			if errs := e.Unwrap(); len(errs) > 0 {
				next = errs[len(errs)-1] // the last attempt (e.g. after TLS was refused)
			}
		case interface{ Unwrap() error }:
			next = e.Unwrap()
		}
		if next == nil {
			return err
		}
		err = next
	}
}

// openClient is how a command that reads or changes jobs and queues
// reaches the database: it reads --now (the client's clock, for tests and
// simulations), connects, and returns the Go client over that connection
// and the function that closes it. backoffctl has no SQL of its own
// against backoff.jobs: it asks the client, as a program would.
func openClient(ctx context.Context, cmd *cobra.Command) (*client.Client, func(), error) {
	return clientOn(ctx, cmd, func() (*pgx.Conn, error) { return connect(ctx, cmd) })
}

// withClient is the preamble of every command that reads or changes jobs
// and queues, in one place: it reads --now and the database URL, connects,
// builds the client (which checks the schema version), runs fn with it and
// closes the connection whatever fn returns. Errors go back to Main, which
// prints them as one line with their exit code.
func withClient(cmd *cobra.Command, fn func(ctx context.Context, c *client.Client) error) error {
	ctx := cmd.Context()
	c, done, err := openClient(ctx, cmd)
	if err != nil {
		return err
	}
	defer done()
	return fn(ctx, c)
}

// withConn is withClient for the commands that work below the client (the
// migrator, shard discovery, schedules' SQL): one connection, closed after
// fn.
func withConn(cmd *cobra.Command, fn func(ctx context.Context, conn *pgx.Conn) error) error {
	ctx := cmd.Context()
	conn, err := connect(ctx, cmd)
	if err != nil {
		return err
	}
	defer conn.Close(ctx)
	return fn(ctx, conn)
}

func clientOn(ctx context.Context, cmd *cobra.Command, dial func() (*pgx.Conn, error)) (*client.Client, func(), error) {
	c, _, done, err := clientsOn(ctx, cmd, dial)
	return c, done, err
}

// clientsOn is clientOn with the operator's client (client/ops) on the
// same connection and clock: commands that list, inspect and act on jobs
// and queues use it, and the worker's client only where they enqueue or
// read a queue's live state.
func clientsOn(ctx context.Context, cmd *cobra.Command, dial func() (*pgx.Conn, error)) (*client.Client, *ops.Client, func(), error) {
	now, err := nowFlag(cmd)
	if err != nil {
		return nil, nil, nil, err
	}
	conn, err := dial()
	if err != nil {
		return nil, nil, nil, err
	}
	var opts []client.Option
	var opsOpts []ops.Option
	if now != nil {
		t := *now
		clock := func() time.Time { return t }
		opts = append(opts, client.WithClock(clock))
		opsOpts = append(opsOpts, ops.WithClock(clock))
	}
	c, err := client.New(ctx, conn, opts...)
	if err != nil {
		conn.Close(ctx)
		return nil, nil, nil, err
	}
	return c, ops.New(conn, opsOpts...), func() { conn.Close(ctx) }, nil
}

// withOps is withClient for the operator's calls: fn gets the worker's
// client and the operator's (clientsOn) on one connection.
func withOps(cmd *cobra.Command, fn func(ctx context.Context, c *client.Client, o *ops.Client) error) error {
	ctx := cmd.Context()
	c, o, done, err := clientsOn(ctx, cmd, func() (*pgx.Conn, error) { return connect(ctx, cmd) })
	if err != nil {
		return err
	}
	defer done()
	return fn(ctx, c, o)
}

// withOpsForQueue is withOps on the database that holds queue's jobs
// (openClientForQueue).
func withOpsForQueue(cmd *cobra.Command, queue string, fn func(ctx context.Context, c *client.Client, o *ops.Client) error) error {
	ctx := cmd.Context()
	c, o, done, err := clientsOn(ctx, cmd, func() (*pgx.Conn, error) { return connectForQueue(ctx, cmd, queue) })
	if err != nil {
		return err
	}
	defer done()
	return fn(ctx, c, o)
}
