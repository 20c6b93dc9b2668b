package security

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"net/url"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/pgbackoff/pgbackoff/internal/testdb"
)

func TestMain(m *testing.M) { testdb.Main(m) }

// t0 is the clock of every test; functions get p_now explicitly.
var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// sqlState returns the SQLSTATE of err, or "" when it is not a server error.
func sqlState(err error) string {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		return pgErr.Code
	}
	return ""
}

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

// loginRole creates a LOGIN role that is a member of group, dropped when
// the test ends, and returns dbURL rewritten to log in as it. Roles are
// server-wide, so the name is random.
func loginRole(t *testing.T, dbURL, group string) string {
	t.Helper()
	ctx := context.Background()
	b := make([]byte, 5)
	_, _ = rand.Read(b)
	name := "backoff_test_" + hex.EncodeToString(b)
	admin, err := pgx.Connect(ctx, testdb.AdminURL(t))
	require.NoError(t, err)
	defer admin.Close(ctx)
	_, err = admin.Exec(ctx, "CREATE ROLE "+pgx.Identifier{name}.Sanitize()+" LOGIN PASSWORD 'pw' IN ROLE "+pgx.Identifier{group}.Sanitize())
	require.NoError(t, err)
	t.Cleanup(func() {
		c, err := pgx.Connect(ctx, testdb.AdminURL(t))
		if err != nil {
			t.Errorf("drop role %s: %v", name, err)
			return
		}
		defer c.Close(ctx)
		// Sessions of the role may still be closing; the role owns nothing.
		_, _ = c.Exec(ctx, "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE usename = $1", name)
		if _, err := c.Exec(ctx, "DROP ROLE "+pgx.Identifier{name}.Sanitize()); err != nil {
			t.Errorf("drop role %s: %v", name, err)
		}
	})
	u, err := url.Parse(dbURL)
	require.NoError(t, err, "testdb URLs are postgres:// URLs")
	u.User = url.UserPassword(name, "pw")
	return u.String()
}
