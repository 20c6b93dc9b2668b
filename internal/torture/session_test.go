package torture

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// outcome is how one call ended, as its caller saw it.
type outcome int

const (
	okCommitted outcome = iota // COMMIT returned OK: acknowledged
	refused                    // the call raised an error it documents (BK001-BK004): rolled back
	gaveUp                     // serialization failures or deadlocks, tried maxTries times: rolled back
	cutBefore                  // the connection was lost before COMMIT was sent: rolled back by the server
	cutInCommit                // the connection was lost during COMMIT: uncertain
	unexpected                 // any other error: rolled back, and reported
)

// maxTries bounds the retries of a call that fails to serialize: a call
// that never gets through is recorded as not acknowledged.
const maxTries = 20

// session is one client on its own connection: its backend is what the
// killer terminates.
type session struct {
	id    int
	run   *run
	rng   *rand.Rand
	conn  *pgx.Conn
	lvl   level
	stats counts
}

// counts are a session's totals, summed into the summary line.
type counts struct {
	calls, acknowledged, refused, gaveUp, retries, cut, uncertain, unexpected int
}

func (c *counts) add(o counts) {
	c.calls += o.calls
	c.acknowledged += o.acknowledged
	c.refused += o.refused
	c.gaveUp += o.gaveUp
	c.retries += o.retries
	c.cut += o.cut
	c.uncertain += o.uncertain
	c.unexpected += o.unexpected
}

// connect (again) after a kill or a restart, until ctx ends.
func (s *session) connect(ctx context.Context) error {
	if s.conn != nil && !s.conn.IsClosed() {
		return nil
	}
	for {
		cfg, err := pgx.ParseConfig(s.run.dbURL())
		if err != nil {
			return err
		}
		cfg.RuntimeParams["application_name"] = fmt.Sprintf("torture-client-%d", s.id)
		cfg.ConnectTimeout = 5 * time.Second
		conn, err := pgx.ConnectConfig(ctx, cfg)
		if err == nil {
			s.conn = conn
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// call runs body in one transaction at the session's isolation level and
// commits, retrying serialization failures and deadlocks. think, when
// positive, is how long the transaction stays open after body, as an
// application's would around its enqueue. The returned error is the one
// that decided the outcome, for a report.
func (s *session) call(ctx context.Context, think time.Duration, body func(context.Context, pgx.Tx) error) (outcome, error) {
	s.stats.calls++
	for try := 1; ; try++ {
		if err := s.connect(ctx); err != nil {
			return cutBefore, err
		}
		o, err := s.once(ctx, think, body)
		if o == gaveUp && try < maxTries {
			s.stats.retries++
			time.Sleep(time.Duration(s.rng.IntN(5*try)) * time.Millisecond)
			continue
		}
		switch o {
		case okCommitted:
			s.stats.acknowledged++
		case refused:
			s.stats.refused++
		case gaveUp:
			s.stats.gaveUp++
		case cutBefore:
			s.stats.cut++
		case cutInCommit:
			s.stats.uncertain++
		case unexpected:
			s.stats.unexpected++
		}
		return o, err
	}
}

// callTimeout bounds one try of a call; the run's end does not cut a call
// short, so that stopping the sessions leaves no outcome unknown.
const callTimeout = 30 * time.Second

// callAt is call at another isolation level than the session's.
func (s *session) callAt(iso pgx.TxIsoLevel) func(context.Context, time.Duration, func(context.Context, pgx.Tx) error) (outcome, error) {
	return func(ctx context.Context, think time.Duration, body func(context.Context, pgx.Tx) error) (outcome, error) {
		saved := s.lvl
		s.lvl.iso = iso
		defer func() { s.lvl = saved }()
		return s.call(ctx, think, body)
	}
}

func (s *session) once(ctx context.Context, think time.Duration, body func(context.Context, pgx.Tx) error) (outcome, error) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), callTimeout)
	defer cancel()
	tx, err := s.conn.BeginTx(ctx, pgx.TxOptions{IsoLevel: s.lvl.iso})
	if err != nil {
		return s.failed(ctx, nil, err), err
	}
	if err := body(ctx, tx); err != nil {
		return s.failed(ctx, tx, err), err
	}
	if think > 0 {
		time.Sleep(think)
	}
	err = tx.Commit(ctx)
	switch {
	case err == nil:
		return okCommitted, nil
	case s.conn.IsClosed() || isConnectionError(err):
		// The server may have committed before the connection went.
		s.drop(ctx)
		return cutInCommit, err
	default:
		// The server answered: it did not commit (a serialization
		// failure at COMMIT, or ErrTxCommitRollback).
		return s.failed(ctx, nil, err), err
	}
}

// failed classifies an error before COMMIT; the transaction is rolled back
// (by the server when the connection is gone).
func (s *session) failed(ctx context.Context, tx pgx.Tx, err error) outcome {
	if s.conn.IsClosed() || isConnectionError(err) {
		s.drop(ctx)
		return cutBefore
	}
	if tx != nil {
		if rerr := tx.Rollback(ctx); rerr != nil {
			s.drop(ctx)
		}
	}
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) {
		if errors.Is(err, pgx.ErrTxCommitRollback) {
			return gaveUp
		}
		return unexpected
	}
	switch pgErr.Code {
	case "40001", "40P01": // serialization failure, deadlock: try again
		return gaveUp
	case "BK001", "BK002", "BK003", "BK004":
		return refused
	}
	return unexpected
}

// drop closes a connection whose state is unknown; the next call connects
// again.
func (s *session) drop(ctx context.Context) {
	if s.conn != nil {
		cctx, cancel := context.WithTimeout(ctx, time.Second)
		_ = s.conn.Close(cctx)
		cancel()
	}
	s.conn = nil
}

// isConnectionError: the backend was terminated or the server shut down
// (SQLSTATE classes 57 and 08). A failed socket closes the connection,
// which the callers check first.
func isConnectionError(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && (pgErr.Code[:2] == "57" || pgErr.Code[:2] == "08")
}
