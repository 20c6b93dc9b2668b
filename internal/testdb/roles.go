package testdb

import (
	"context"
	"net/url"
	"testing"

	"github.com/jackc/pgx/v5"
)

// TempRole creates a role on the server under test named prefix plus
// random hex, with attrs (e.g. "LOGIN PASSWORD 'pw' IN ROLE
// backoff_worker"), dropped when the test ends after its sessions are
// ended. Roles are server-wide, so the name is random. A cleanup the test
// registers later runs first (e.g. dropping what the role owns).
func TempRole(t testing.TB, prefix, attrs string) string {
	t.Helper()
	ctx := context.Background()
	name := prefix + randomSuffix()
	admin, err := pgx.Connect(ctx, AdminURL(t))
	if err != nil {
		t.Fatalf("testdb: create role %s: %v", name, err)
	}
	defer admin.Close(ctx)
	if _, err := admin.Exec(ctx, "CREATE ROLE "+pgx.Identifier{name}.Sanitize()+" "+attrs); err != nil {
		t.Fatalf("testdb: create role %s: %v", name, err)
	}
	t.Cleanup(func() {
		c, err := pgx.Connect(ctx, AdminURL(t))
		if err != nil {
			t.Errorf("testdb: drop role %s: %v", name, err)
			return
		}
		defer c.Close(ctx)
		// Sessions of the role may still be closing.
		_, _ = c.Exec(ctx, "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE usename = $1", name)
		if _, err := c.Exec(ctx, "DROP ROLE "+pgx.Identifier{name}.Sanitize()); err != nil {
			t.Errorf("testdb: drop role %s: %v", name, err)
		}
	})
	return name
}

// LoginRole creates a LOGIN role that is a member of group (TempRole), and
// returns dbURL rewritten to log in as it.
func LoginRole(t testing.TB, dbURL, group string) string {
	t.Helper()
	name := TempRole(t, "backoff_test_", "LOGIN PASSWORD 'pw' IN ROLE "+pgx.Identifier{group}.Sanitize())
	u, err := url.Parse(dbURL)
	if err != nil {
		t.Fatalf("testdb: a database URL that is no URL: %v", err)
	}
	u.User = url.UserPassword(name, "pw")
	return u.String()
}
