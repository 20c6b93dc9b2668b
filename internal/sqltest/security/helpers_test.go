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

// tempRole creates a role named prefix plus random hex with the given
// attributes (e.g. "LOGIN PASSWORD 'pw' IN ROLE backoff_worker"), dropped
// when the test ends after its sessions are ended. Roles are server-wide,
// so the name is random. A cleanup the test registers later runs first
// (e.g. dropping what the role owns).
func tempRole(t *testing.T, prefix, attrs string) string {
	t.Helper()
	ctx := context.Background()
	b := make([]byte, 5)
	_, _ = rand.Read(b)
	name := prefix + hex.EncodeToString(b)
	admin, err := pgx.Connect(ctx, testdb.AdminURL(t))
	require.NoError(t, err)
	defer admin.Close(ctx)
	_, err = admin.Exec(ctx, "CREATE ROLE "+pgx.Identifier{name}.Sanitize()+" "+attrs)
	require.NoError(t, err)
	t.Cleanup(func() {
		c, err := pgx.Connect(ctx, testdb.AdminURL(t))
		if err != nil {
			t.Errorf("drop role %s: %v", name, err)
			return
		}
		defer c.Close(ctx)
		// Sessions of the role may still be closing.
		_, _ = c.Exec(ctx, "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE usename = $1", name)
		if _, err := c.Exec(ctx, "DROP ROLE "+pgx.Identifier{name}.Sanitize()); err != nil {
			t.Errorf("drop role %s: %v", name, err)
		}
	})
	return name
}

// loginRole creates a LOGIN role that is a member of group, dropped when
// the test ends, and returns dbURL rewritten to log in as it.
func loginRole(t *testing.T, dbURL, group string) string {
	t.Helper()
	name := tempRole(t, "backoff_test_", "LOGIN PASSWORD 'pw' IN ROLE "+pgx.Identifier{group}.Sanitize())
	u, err := url.Parse(dbURL)
	require.NoError(t, err, "testdb URLs are postgres:// URLs")
	u.User = url.UserPassword(name, "pw")
	return u.String()
}
