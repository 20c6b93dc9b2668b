package conformance_test

import (
	"context"
	"flag"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/pgbackoff/pgbackoff/internal/testdb"
)

func TestMain(m *testing.M) {
	// The suite runs from make conformance (once in CI), not in every
	// make test: the Python and TypeScript packages' own tests run there
	// on every version (internal/clienttest). BACKOFF_CONFORMANCE_SHARDED
	// runs it against a sharded install instead (make test-sharded).
	shardedRun := os.Getenv(shardedEnv) != ""
	if os.Getenv("BACKOFF_CONFORMANCE") == "" && !shardedRun {
		fmt.Println("conformance: skipped (set BACKOFF_CONFORMANCE=1, or run make conformance)")
		os.Exit(0)
	}
	// The scenarios mostly wait for their workers (leases, hangs,
	// shutdowns), so more of them run at once than the default of
	// GOMAXPROCS; an explicit -parallel still wins (flag.Parse, in m.Run,
	// only sets the flags given).
	testing.Init()
	_ = flag.Set("test.parallel", "6")
	if shardedRun {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		err := startSharded(ctx)
		cancel()
		if err != nil {
			fmt.Fprintln(os.Stderr, "conformance: the sharded install:", err)
			stopSharded()
			os.Exit(1)
		}
	}
	testdb.Main(m, stopSharded, func() {
		if tmpDir != "" {
			_ = os.RemoveAll(tmpDir)
		}
	})
}
