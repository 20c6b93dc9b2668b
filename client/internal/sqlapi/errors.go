package sqlapi

import (
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// The SQLSTATEs of the SQL API (docs/design.md#errors). They are translated
// to the errors below here, and nowhere else.
const (
	codeInvalidArgument   = "22023"
	codeJobNotFound       = "BK001"
	codeStaleAttempt      = "BK002"
	codeInvalidTransition = "BK003"
	// CodeNotReady is BK004, which only backoff.acquire raises: package
	// client reads it into its NotReadyError before calling Translate.
	CodeNotReady         = "BK004"
	codePermissionDenied = "42501"
	codeQueueMoving      = "55006"
)

// The sentinel errors of the SQL API. Package client exports them under the
// same names (client.ErrJobNotFound is ErrJobNotFound), where their
// documentation is.
var (
	ErrInvalidArgument   = errors.New("pgbackoff: invalid argument")
	ErrJobNotFound       = errors.New("pgbackoff: job not found")
	ErrStaleAttempt      = errors.New("pgbackoff: stale attempt")
	ErrInvalidTransition = errors.New("pgbackoff: transition not allowed")
	ErrNotReady          = errors.New("pgbackoff: job not ready")
	ErrPermissionDenied  = errors.New("pgbackoff: permission denied")
	ErrSchemaTooOld      = errors.New("pgbackoff: database schema is older than this client needs")
	ErrQueueMoving       = errors.New("pgbackoff: queue is moving to another shard")
)

// Translate is the one boundary where database errors become the API's
// errors: it maps the documented SQLSTATEs to the sentinels above, keeps
// the *pgconn.PgError reachable with errors.As, and prefixes the operation
// ("claim jobs in \"emails\": ..."). A missing row is ErrJobNotFound.
func Translate(op string, err error) error {
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
		case codePermissionDenied:
			return fmt.Errorf("%s: %w: %w", op, ErrPermissionDenied, err)
		case codeQueueMoving:
			return fmt.Errorf("%s: %w: %w", op, ErrQueueMoving, err)
		}
	}
	if errors.Is(err, pgx.ErrNoRows) {
		return fmt.Errorf("%s: %w", op, ErrJobNotFound)
	}
	return fmt.Errorf("%s: %w", op, err)
}
