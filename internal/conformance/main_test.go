package conformance_test

import (
	"os"
	"testing"

	"github.com/pgbackoff/pgbackoff/internal/testdb"
)

func TestMain(m *testing.M) {
	testdb.Main(m, func() {
		if tmpDir != "" {
			_ = os.RemoveAll(tmpDir)
		}
	})
}
