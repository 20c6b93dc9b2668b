package security

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pgbackoff/pgbackoff/internal/testdb"
)

func TestMain(m *testing.M) { testdb.Main(m) }

// t0 is the clock of every test; functions get p_now explicitly.
var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// sqlState is the SQLSTATE of err, or "" when it is not a server error.
var sqlState = testdb.SQLState

// asRole runs one statement in a transaction under SET LOCAL ROLE role and
// rolls it back, so that fixtures can be reused by every check.
func asRole(ctx context.Context, pool *pgxpool.Pool, role, sql string, args ...any) error {
	tx, err := pool.Begin(ctx)
	if err != nil {
		return err
	}
	defer func() { _ = tx.Rollback(ctx) }()
	if _, err := tx.Exec(ctx, "SET LOCAL ROLE "+pgx.Identifier{role}.Sanitize()); err != nil {
		return err
	}
	rows, err := tx.Query(ctx, sql, args...)
	if err != nil {
		return err
	}
	rows.Close()
	return rows.Err()
}
