package client

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// The SQLSTATEs of the SQL API (docs/design.md §4). They are translated to
// the errors below in one place, [translate], and nowhere else.
const (
	codeInvalidArgument   = "22023"
	codeJobNotFound       = "BK001"
	codeStaleAttempt      = "BK002"
	codeInvalidTransition = "BK003"
	codeNotReady          = "BK004"
)

// Sentinel errors of the SQL API. Every error the client returns for one of
// these conditions matches the sentinel with errors.Is, and still unwraps to
// the *pgconn.PgError it came from (errors.As) for the server's message.
var (
	// ErrInvalidArgument: an argument was refused (SQLSTATE 22023), e.g. an
	// empty queue, a limit below 1, a negative interval or an unknown policy.
	ErrInvalidArgument = errors.New("pgbackoff: invalid argument")
	// ErrJobNotFound: no job has that id (SQLSTATE BK001).
	ErrJobNotFound = errors.New("pgbackoff: job not found")
	// ErrStaleAttempt: the attempt number (the fencing token) is not the
	// job's running attempt, because the lease was reaped or another attempt
	// holds the job (SQLSTATE BK002). A worker that gets it has lost the job
	// and must stop working on it.
	ErrStaleAttempt = errors.New("pgbackoff: stale attempt")
	// ErrInvalidTransition: the job's status does not allow the call, e.g.
	// completing a dead-lettered job or replaying a pending one (SQLSTATE
	// BK003).
	ErrInvalidTransition = errors.New("pgbackoff: transition not allowed")
	// ErrNotReady: Acquire on a job whose run_at is still in the future
	// (SQLSTATE BK004). The error is a *NotReadyError that says when.
	ErrNotReady = errors.New("pgbackoff: job not ready")
	// ErrSchemaTooOld: the database's pgbackoff schema is older than this
	// client needs; run `backoffctl migrate up`.
	ErrSchemaTooOld = errors.New("pgbackoff: database schema is older than this client needs")
)

// NotReadyError is what Acquire returns for a job that is not due yet
// (SQLSTATE BK004): the orchestrator should come back at RetryAt.
// errors.Is(err, ErrNotReady) is true for it.
type NotReadyError struct {
	JobID    int64
	RetryAt  time.Time // the job's run_at
	Attempts int       // the job's Attempts: claims so far (see Job.CountedAttempts for the budget)
	Err      *pgconn.PgError
}

func (e *NotReadyError) Error() string {
	return fmt.Sprintf("pgbackoff: job %d not ready until %s (%d attempts so far)",
		e.JobID, e.RetryAt.Format(time.RFC3339Nano), e.Attempts)
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
// errors: it maps the documented SQLSTATEs to the sentinels above, keeps the
// *pgconn.PgError reachable with errors.As, and prefixes the operation
// ("claim jobs in \"emails\": ..."). jobID is used by NotReadyError only.
func translate(op string, jobID int64, err error) error {
	if err == nil {
		return nil
	}
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		switch pgErr.Code {
		case codeInvalidArgument:
			return fmt.Errorf("%s: %w: %w", op, ErrInvalidArgument, err)
		case codeJobNotFound:
			return fmt.Errorf("%s: %w: %w", op, ErrJobNotFound, err)
		case codeStaleAttempt:
			return fmt.Errorf("%s: %w: %w", op, ErrStaleAttempt, err)
		case codeInvalidTransition:
			return fmt.Errorf("%s: %w: %w", op, ErrInvalidTransition, err)
		case codeNotReady:
			return fmt.Errorf("%s: %w", op, notReady(jobID, pgErr))
		}
	}
	if errors.Is(err, pgx.ErrNoRows) {
		return fmt.Errorf("%s: %w", op, ErrJobNotFound)
	}
	return fmt.Errorf("%s: %w", op, err)
}

// notReady reads BK004's payload: DETAIL carries run_at in ISO 8601 (either
// alone or as "run_at=...", with "attempts=N" beside it), and the message
// gives the attempt count as "... N attempts ..." or "attempts N"/"attempt N".
func notReady(jobID int64, pgErr *pgconn.PgError) *NotReadyError {
	e := &NotReadyError{JobID: jobID, Err: pgErr}
	for _, text := range []string{pgErr.Detail, pgErr.Hint, pgErr.Message} {
		if e.RetryAt.IsZero() {
			e.RetryAt = findTimestamp(text)
		}
		if e.Attempts == 0 {
			e.Attempts = findAttempts(text)
		}
	}
	return e
}

var timestampLayouts = []string{
	time.RFC3339Nano,
	"2006-01-02T15:04:05.999999Z07",
	"2006-01-02 15:04:05.999999Z07:00",
	"2006-01-02 15:04:05.999999Z07",
}

// findTimestamp returns the first ISO 8601 timestamp in text, or zero.
func findTimestamp(text string) time.Time {
	for _, field := range strings.FieldsFunc(text, func(r rune) bool {
		return r == ' ' || r == '"' || r == ',' || r == ';' || r == '(' || r == ')' || r == '='
	}) {
		field = strings.TrimSpace(field)
		for _, layout := range timestampLayouts {
			if t, err := time.Parse(layout, field); err == nil {
				return t
			}
		}
	}
	// "2025-01-02 03:04:05+00" spans a space: try the whole text and
	// pairs of words.
	words := strings.Fields(text)
	for i := 0; i+1 < len(words); i++ {
		cand := strings.Trim(words[i]+" "+words[i+1], `"(),;`)
		for _, layout := range timestampLayouts {
			if t, err := time.Parse(layout, cand); err == nil {
				return t
			}
		}
	}
	return time.Time{}
}

// findAttempts returns N from "attempts=N", "attempts N", "attempt N" or
// "N attempts" in text, or 0.
func findAttempts(text string) int {
	words := strings.FieldsFunc(strings.ToLower(text), func(r rune) bool {
		return r == ' ' || r == '=' || r == ':' || r == ',' || r == ';' || r == '(' || r == ')' || r == '"'
	})
	for i, w := range words {
		if w != "attempts" && w != "attempt" && w != "attempt(s)" {
			continue
		}
		if i+1 < len(words) {
			if n, err := strconv.Atoi(words[i+1]); err == nil {
				return n
			}
		}
		if i > 0 {
			if n, err := strconv.Atoi(words[i-1]); err == nil {
				return n
			}
		}
	}
	return 0
}
