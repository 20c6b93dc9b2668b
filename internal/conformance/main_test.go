package conformance_test

import (
	"flag"
	"fmt"
	"os"
	"testing"

	"github.com/pgbackoff/pgbackoff/internal/testdb"
)

func TestMain(m *testing.M) {
	// The suite runs from make conformance (once in CI), not in every
	// make test: the Python and TypeScript packages' own tests run there
	// on every version (internal/clienttest).
	if os.Getenv("BACKOFF_CONFORMANCE") == "" {
		fmt.Println("conformance: skipped (set BACKOFF_CONFORMANCE=1, or run make conformance)")
		os.Exit(0)
	}
	// The scenarios mostly wait for their workers (leases, hangs,
	// shutdowns), so more of them run at once than the default of
	// GOMAXPROCS; an explicit -parallel still wins (flag.Parse, in m.Run,
	// only sets the flags given).
	testing.Init()
	_ = flag.Set("test.parallel", "6")
	testdb.Main(m, func() {
		if tmpDir != "" {
			_ = os.RemoveAll(tmpDir)
		}
	})
}
