package conformance_test

import (
	"context"
	"errors"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/pgbackoff/pgbackoff/internal/conformance"
)

// root is the repository's root, from this package's directory.
const root = "../.."

var (
	buildOnce sync.Once
	adapters  []conformance.Adapter
	buildErr  error
	tmpDir    string
)

// languages are the adapters, built once per test binary. Without Node.js
// or psycopg it skips on a developer machine and fails in CI, which
// installs them.
func languages(t *testing.T) []conformance.Adapter {
	t.Helper()
	buildOnce.Do(func() {
		tmpDir, buildErr = os.MkdirTemp("", "pgbackoff-conformance-")
		if buildErr != nil {
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
		defer cancel()
		adapters, buildErr = conformance.Build(ctx, root, tmpDir)
	})
	if errors.Is(buildErr, conformance.ErrMissingTool) && os.Getenv("CI") == "" {
		t.Skipf("%v", buildErr)
	}
	require.NoError(t, buildErr, "build the adapters")
	return adapters
}
