package conformance_test

import (
	"flag"
	"os"
	"testing"

	"github.com/pgbackoff/pgbackoff/internal/testdb"
)

func TestMain(m *testing.M) {
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
