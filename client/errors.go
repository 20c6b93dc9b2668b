package client

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/pgbackoff/pgbackoff/client/internal/sqlapi"
)

// Sentinel errors of the SQL API. Every error the client (and package
// client/ops) returns for one of these conditions matches the sentinel
// with errors.Is, and still unwraps to the *pgconn.PgError it came from
// (errors.As) for the server's message.
var (
	// ErrInvalidArgument: an argument was refused (SQLSTATE 22023), e.g. an
	// empty queue, a limit below 1, a negative interval or an unknown policy.
	ErrInvalidArgument = sqlapi.ErrInvalidArgument
	// ErrJobNotFound: no job has that id (SQLSTATE BK001).
	ErrJobNotFound = sqlapi.ErrJobNotFound
	// ErrStaleAttempt: the fencing token (Job.Token) is not the job's
	// running attempt's, because the lease was reaped or another attempt
	// holds the job (SQLSTATE BK002). A worker that gets it has lost the job
	// and must stop working on it.
	ErrStaleAttempt = sqlapi.ErrStaleAttempt
	// ErrInvalidTransition: the job's status does not allow the call, e.g.
	// completing a dead-lettered job or replaying a pending one (SQLSTATE
	// BK003).
	ErrInvalidTransition = sqlapi.ErrInvalidTransition
	// ErrNotReady: Acquire on a job whose run_at is still in the future
	// (SQLSTATE BK004). The error is a *NotReadyError that says when.
	ErrNotReady = sqlapi.ErrNotReady
	// ErrPermissionDenied: the login may not make this call (SQLSTATE
	// 42501): its role lacks the function, or it is scoped by
	// backoff.grant_queue and the queue (of the job) is not one of its
	// queues. Retrying does not help; the server's message names the queue.
	ErrPermissionDenied = sqlapi.ErrPermissionDenied
	// ErrSchemaTooOld: the database's pgbackoff schema is older than this
	// client needs; run `backoffctl migrate up`.
	ErrSchemaTooOld = sqlapi.ErrSchemaTooOld
	// ErrQueueMoving: the queue is moving away from this shard (SQLSTATE
	// 55006; backoffctl shards move, docs/sharding.md): enqueue again,
	// through the router, which sends it to the new shard once the move
	// flips. A client on a pool does so by itself (see Enqueue); in the
	// caller's transaction it cannot, and returns this.
	ErrQueueMoving = sqlapi.ErrQueueMoving
)

// NotReadyError is what Acquire returns for a job that is not due yet
// (SQLSTATE BK004): the orchestrator should come back at RetryAt.
// errors.Is(err, ErrNotReady) is true for it.
type NotReadyError struct {
	JobID   int64
	RetryAt time.Time // the job's run_at
	Token   int       // the job's Token: its claims so far, 0 if never claimed (HINT attempts=N)
	Err     *pgconn.PgError
}

func (e *NotReadyError) Error() string {
	return fmt.Sprintf("pgbackoff: job %d not ready until %s (%d claims so far)",
		e.JobID, e.RetryAt.Format(time.RFC3339Nano), e.Token)
}

// Is reports ErrNotReady as a match.
func (e *NotReadyError) Is(target error) bool { return target == ErrNotReady }

// Unwrap returns the server's error.
func (e *NotReadyError) Unwrap() error {
	if e.Err == nil {
		return nil
	}
	return e.Err
}

// translate is the one boundary where database errors become the client's
// errors: BK004 becomes a NotReadyError for jobID, every other documented
// SQLSTATE the sentinel above (sqlapi.Translate, which package client/ops
// calls too), and the *pgconn.PgError stays reachable with errors.As. The
// operation prefixes the message ("claim jobs in \"emails\": ...").
func translate(op string, jobID int64, err error) error {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && pgErr.Code == sqlapi.CodeNotReady {
		return fmt.Errorf("%s: %w", op, notReady(jobID, pgErr))
	}
	return sqlapi.Translate(op, err)
}

// notReadyRunAt is the layout of BK004's DETAIL, backoff._iso8601: run_at
// in UTC with microseconds, "2026-01-02T03:04:05.000006Z".
const notReadyRunAt = "2006-01-02T15:04:05.000000Z"

// notReady reads BK004 as backoff.acquire documents it: DETAIL is the job's
// run_at (notReadyRunAt) and HINT is "attempts=N". The message is for
// people and is not parsed. A field that does not read stays zero: the
// error is still a NotReadyError, and the PgError keeps the server's text.
func notReady(jobID int64, pgErr *pgconn.PgError) *NotReadyError {
	e := &NotReadyError{JobID: jobID, Err: pgErr}
	if t, err := time.Parse(notReadyRunAt, pgErr.Detail); err == nil {
		e.RetryAt = t
	}
	if n, ok := strings.CutPrefix(pgErr.Hint, "attempts="); ok {
		e.Token, _ = strconv.Atoi(n)
	}
	return e
}

// transient reports whether err may go away by itself: anything but an
// answer of the database about the call (its SQLSTATE), except the answers
// that mean the connection or the transaction, not the call, failed: those
// of [IsConnectionError], and 40 transaction rollback (deadlock,
// serialization), 53 insufficient resources, 57 operator intervention
// (a statement cancelled or timed out, the server shutting down). The
// Worker repeats settle calls that fail with it.
func transient(err error) bool {
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) {
		return !errors.Is(err, ErrInvalidArgument) && !errors.Is(err, context.Canceled) &&
			!errors.Is(err, context.DeadlineExceeded)
	}
	if IsConnectionError(err) {
		return true
	}
	switch pgErr.Code[:2] {
	case "40", "53", "57":
		return true
	}
	return false
}

// IsConnectionError reports whether err says that reaching the database
// failed, not the call: the server could not be dialled or the connection
// broke (a network error, EOF, reset, refused, broken pipe, a timeout, a
// closed connection or pool, an error pgx marks safe to retry because
// nothing was sent), or the server answered with SQLSTATE class 08
// (connection exception) or 57P (shutting down, crashed, not accepting
// connections yet). Such a call may succeed once the database is back; any
// other answer of the database is about the call itself. The Worker,
// which repeats a settle call that failed so, and the web UI's "cannot be
// reached" banner decide with it.
func IsConnectionError(err error) bool {
	if err == nil {
		return false
	}
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		return strings.HasPrefix(pgErr.Code, "08") || strings.HasPrefix(pgErr.Code, "57P")
	}
	var netErr net.Error
	var connErr *pgconn.ConnectError
	return errors.As(err, &netErr) || errors.As(err, &connErr) || errors.Is(err, context.DeadlineExceeded) ||
		errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) || errors.Is(err, net.ErrClosed) ||
		errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.EPIPE) ||
		pgconn.SafeToRetry(err) || pgconn.Timeout(err) ||
		// pgxpool and pgx say these with errors of their own, not exported.
		strings.Contains(err.Error(), "closed pool") || strings.Contains(err.Error(), "conn closed")
}
