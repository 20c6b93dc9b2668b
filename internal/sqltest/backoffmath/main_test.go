package backoffmath_test

import (
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pgbackoff/pgbackoff/internal/testdb"
)

func TestMain(m *testing.M) { testdb.Main(m) }

// newPool is a fresh migrated database with an empty search_path, which
// proves every reference in the functions is schema-qualified.
func newPool(t *testing.T) *pgxpool.Pool {
	t.Helper()
	return testdb.QualifiedPool(t, testdb.NewURL(t), 20)
}
