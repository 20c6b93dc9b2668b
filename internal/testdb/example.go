package testdb

import (
	"context"
	"fmt"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"
)

// ExamplePool gives a package's runnable examples, which have no
// *testing.T, a pool on a fresh migrated database, and a cleanup that
// closes the pool and drops the database. It panics without a server:
// MainWithExamples leaves the examples out of such a run.
func ExamplePool() (*pgxpool.Pool, func()) {
	tb := &exampleTB{}
	url := NewURL(tb)
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

// exampleTB is the part of testing.TB the harness uses, for examples.
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
