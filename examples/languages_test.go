package examples_test

import (
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/pgbackoff/pgbackoff/internal/testdb"
)

func TestMain(m *testing.M) { testdb.Main(m) }

// requireTool finds an external program; it skips on a developer machine
// that lacks it and fails in CI, where .ci/run installs it.
func requireTool(t *testing.T, name string, probe ...string) string {
	t.Helper()
	path, err := exec.LookPath(name)
	if err == nil && len(probe) > 0 {
		err = exec.Command(path, probe...).Run()
	}
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("%s is needed for this test (CI is set): %v", name, err)
		}
		t.Skipf("%s is not available: %v", name, err)
	}
	return path
}

func TestPsqlWorkerLoop(t *testing.T) {
	t.Parallel()
	psql := requireTool(t, "psql", "--version")
	out, err := exec.Command(psql, "-X", "-v", "ON_ERROR_STOP=1", "-f", "psql/worker.sql", testdb.NewURL(t)).CombinedOutput()
	require.NoError(t, err, string(out))
	text := string(out)
	t.Log(text)
	require.Contains(t, text, "enqueued 9 jobs")
	require.Equal(t, 3, strings.Count(text, "failed, now retrying"), "jobs 3, 6 and 9 fail once")
	require.Equal(t, 9, strings.Count(text, " completed\n"), "every job completes in the end")
	for _, id := range []string{"3", "6", "9"} {
		require.Contains(t, text, "job "+id+" attempt 2 completed")
	}
}

func TestPythonWorker(t *testing.T) {
	t.Parallel()
	python := requireTool(t, "/usr/bin/python3", "-c", "import psycopg, psycopg_pool")
	out, err := exec.Command(python, "python/worker.py", testdb.NewURL(t)).CombinedOutput()
	require.NoError(t, err, string(out))
	text := string(out)
	t.Log(text)
	require.Contains(t, text, "completed=19 dead_lettered=1 retried=4")
	require.Contains(t, text, "dead-lettered: payload 7 is malformed")
}
