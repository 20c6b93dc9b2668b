package shardtest

import (
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func examplesDir(t *testing.T) string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..", "examples")
}

// TestPsqlExampleThroughRouter runs examples/psql/worker.sql, unchanged,
// against the router.
func TestPsqlExampleThroughRouter(t *testing.T) {
	psql, err := exec.LookPath("psql")
	require.NoError(t, err, "psql is needed (postgresql-client)")
	cmd := exec.Command(psql, "-X", "-v", "ON_ERROR_STOP=1", "-f", "psql/worker.sql", env.RouterURL)
	cmd.Dir = examplesDir(t)
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, string(out))
	text := string(out)
	require.Contains(t, text, "enqueued 9 jobs")
	require.Equal(t, 3, strings.Count(text, "failed, now retrying"), text)
	require.Equal(t, 9, strings.Count(text, " completed\n"), text)
}

// TestPythonExampleThroughRouter runs examples/python/worker.py, unchanged,
// against the router.
func TestPythonExampleThroughRouter(t *testing.T) {
	if err := exec.Command("/usr/bin/python3", "-c", "import psycopg, psycopg_pool").Run(); err != nil {
		t.Fatalf("python3 with psycopg and psycopg_pool is needed (python3-psycopg, python3-psycopg-pool): %v", err)
	}
	cmd := exec.Command("/usr/bin/python3", "python/worker.py", env.RouterURL)
	cmd.Dir = examplesDir(t)
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, string(out))
	require.Contains(t, string(out), "completed=19 dead_lettered=1 retried=4")
	require.Contains(t, string(out), "dead-lettered: payload 7 is malformed")
}
