package ops

import (
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pgbackoff/pgbackoff/internal/testdb"
)

// SampleDatabase gives the runnable examples (package ops_test) a pool on
// a fresh migrated database, and a cleanup that closes the pool and drops
// the database.
func SampleDatabase() (*pgxpool.Pool, func()) { return testdb.ExamplePool() }
