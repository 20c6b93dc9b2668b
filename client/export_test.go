package client

import (
	"context"
	"fmt"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pgbackoff/pgbackoff/internal/testdb"
)

// SampleDatabase gives the runnable examples (package client_test) a pool
// on a fresh migrated database, and a cleanup that closes the pool and
// drops the database.
func SampleDatabase() (*pgxpool.Pool, func()) {
	tb := &exampleTB{}
	url := testdb.NewURL(tb)
	pool, err := pgxpool.New(context.Background(), url)
	if err != nil {
		panic(err)
	}
	return pool, func() {
		pool.Close()
		for i := len(tb.cleanups) - 1; i >= 0; i-- {
			tb.cleanups[i]()
		}
	}
}

// exampleTB is the part of testing.TB the harness uses, for examples,
// which have no *testing.T.
type exampleTB struct {
	testing.TB
	cleanups []func()
}

func (*exampleTB) Helper()                   {}
func (t *exampleTB) Cleanup(f func())        { t.cleanups = append(t.cleanups, f) }
func (*exampleTB) Fatalf(f string, a ...any) { panic(fmt.Sprintf(f, a...)) }
func (*exampleTB) Skipf(f string, a ...any) {
	panic("example needs PostgreSQL: " + fmt.Sprintf(f, a...))
}
func (*exampleTB) Errorf(f string, a ...any) { fmt.Printf(f+"\n", a...) }
func (*exampleTB) Logf(string, ...any)       {}
