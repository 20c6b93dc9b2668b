package backoffmath_test

import (
	"context"
	"net/url"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pgbackoff/pgbackoff/internal/testdb"
)

func TestMain(m *testing.M) { testdb.Main(m) }

// newPool is a fresh migrated database with an empty search_path, which
// proves every reference in the functions is schema-qualified.
func newPool(t *testing.T) *pgxpool.Pool {
	t.Helper()
	u := testdb.NewURL(t)
	if strings.HasPrefix(u, "postgres://") || strings.HasPrefix(u, "postgresql://") {
		parsed, err := url.Parse(u)
		if err != nil {
			t.Fatalf("parse url: %v", err)
		}
		q := parsed.Query()
		q.Set("search_path", "")
		parsed.RawQuery = q.Encode()
		u = parsed.String()
	} else {
		u += " search_path=''"
	}
	pool := testdb.Pool(t, u)
	var sp string
	if err := pool.QueryRow(context.Background(), "SHOW search_path").Scan(&sp); err != nil {
		t.Fatalf("show search_path: %v", err)
	}
	if sp != `""` && sp != "" {
		t.Fatalf("search_path is %q, want empty", sp)
	}
	return pool
}
