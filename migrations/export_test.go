package migrations

import (
	"fmt"
	"testing"

	"github.com/pgbackoff/pgbackoff/internal/testdb"
)

func TestMain(m *testing.M) { testdb.MainWithExamples(m) }

// SampleDatabaseURL gives the runnable examples (package migrations_test)
// the URL of a fresh database with nothing installed, and a cleanup that
// drops it.
func SampleDatabaseURL() (string, func()) {
	tb := &exampleTB{}
	url := testdb.NewEmptyURL(tb)
	return url, func() {
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
