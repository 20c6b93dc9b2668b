package shardtest

import (
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/pgbackoff/pgbackoff/internal/backoffctltest"
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
	cmd := exec.Command(psql, "-X", "-v", "ON_ERROR_STOP=1", "-f", "psql/worker.sql", env.routerURL)
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
	cmd := exec.Command("/usr/bin/python3", "python/worker.py", env.routerURL)
	cmd.Dir = examplesDir(t)
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, string(out))
	require.Contains(t, string(out), "completed=19 dead_lettered=1 retried=4")
	require.Contains(t, string(out), "dead-lettered: payload 7 is malformed")
}

func backoffctl(t *testing.T, args ...string) (string, int) {
	t.Helper()
	out, errOut, code := backoffctltest.Run(t, append(args, "--database-url", env.routerURL)...)
	return out + errOut, code
}

// TestBackoffctlThroughRouter: config apply writes every shard in one
// command, config diff names a shard that drifted, and the read commands
// and dlq replay work against the router.
func TestBackoffctlThroughRouter(t *testing.T) {
	cfg := filepath.Join(examplesDir(t), "backoff.toml")

	out, code := backoffctl(t, "migrate", "status")
	require.Equal(t, 2, code, out)
	require.Contains(t, out, "is a pgbackoff router")

	// Installing again (after an upgrade) re-migrates the shards and
	// regenerates the router; shards in another order are refused.
	var shardArgs, swapped []string
	for k, u := range env.shardURLs {
		shardArgs = append(shardArgs, "--shard", u)
		swapped = append(swapped, "--shard", env.shardURLs[(k+1)%NShards])
	}
	out, code = backoffctl(t, append([]string{"migrate", "up", "--router"}, shardArgs...)...)
	require.Equal(t, 0, code, out)
	require.Contains(t, out, fmt.Sprintf("router installed over %d shard(s)", NShards))
	out, code = backoffctl(t, append([]string{"migrate", "up", "--router"}, swapped...)...)
	require.Equal(t, 1, code, out)
	require.Contains(t, out, "registered as shard 1's")
	out, code = backoffctl(t, "migrate", "up", "--router")
	require.Equal(t, 2, code, out)

	out, code = backoffctl(t, "config", "apply", "--config", cfg)
	require.Equal(t, 0, code, out)
	for k := range NShards {
		require.Contains(t, out, fmt.Sprintf("shard %d (", k))
	}
	out, code = backoffctl(t, "config", "diff", "--config", cfg, "--exit-code")
	require.Equal(t, 0, code, out)
	require.Equal(t, NShards, strings.Count(out, "no differences"), out)

	// Shard 2 drifts: someone changed it directly.
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, env.shardURLs[2])
	require.NoError(t, err)
	_, err = conn.Exec(ctx, `UPDATE backoff.policies SET max_attempts = 99 WHERE name = 'moderate'`)
	conn.Close(ctx)
	require.NoError(t, err)
	out, code = backoffctl(t, "config", "diff", "--config", cfg, "--exit-code")
	require.Equal(t, 1, code, out)
	require.Equal(t, NShards-1, strings.Count(out, "no differences"), out)
	drift := out[strings.Index(out, "shard 2 ("):]
	require.Contains(t, drift, "~ policy moderate")
	require.Contains(t, drift, "99 -> 5")

	out, code = backoffctl(t, "config", "apply", "--config", cfg)
	require.Equal(t, 0, code, out)
	require.Equal(t, NShards-1, strings.Count(out, "no change"), out)
	out, code = backoffctl(t, "config", "diff", "--config", cfg, "--exit-code")
	require.Equal(t, 0, code, out)

	// Operator commands through the router.
	out, code = backoffctl(t, "enqueue", "cli-q", `{"x": 1}`)
	require.Equal(t, 0, code, out)
	out, code = backoffctl(t, "stats")
	require.Equal(t, 0, code, out)
	require.Contains(t, out, "cli-q")
	out, code = backoffctl(t, "jobs", "list", "--queue", "cli-q")
	require.Equal(t, 0, code, out)
	require.Contains(t, out, "cli-q")

	// A dead letter on the queue's shard, replayed with --all.
	conn, err = pgx.Connect(ctx, env.routerURL)
	require.NoError(t, err)
	defer conn.Close(ctx)
	var id int64
	require.NoError(t, conn.QueryRow(ctx, `SELECT id FROM backoff.claim('cli-q', 'w')`).Scan(&id))
	_, err = conn.Exec(ctx, `SELECT backoff.fail($1, 1, 'bad', p_retryable => false)`, id)
	require.NoError(t, err)
	out, code = backoffctl(t, "dlq", "list", "--queue", "cli-q")
	require.Equal(t, 0, code, out)
	require.Contains(t, out, "bad")
	out, code = backoffctl(t, "dlq", "replay", "--queue", "cli-q", "--all", "--yes")
	require.Equal(t, 0, code, out)
	require.Contains(t, out, "replayed 1 dead-lettered job(s) of queue cli-q")
}
