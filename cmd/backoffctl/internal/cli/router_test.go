package cli

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/pgbackoff/pgbackoff/client/sharding"
	"github.com/pgbackoff/pgbackoff/internal/testdb"
)

// TestBackoffctlThroughRouter: migrate up --router installs a router over
// three shards (databases of the test server) and refuses them in another
// order; config apply writes every shard in one command, config diff names
// a shard that drifted, and the read commands and dlq replay work against
// the router.
func TestBackoffctlThroughRouter(t *testing.T) {
	if testdb.ReachedThroughForwardedPort(t) {
		// The router connects to its shards with the URLs the CLI migrates
		// them with; inside a container those name a port that is only
		// published outside. make test-sharded runs this test on local
		// clusters (CI runs it on PostgreSQL 15).
		t.Skip("a router in a container cannot reach its shards at the host's URLs: run make test-sharded")
	}
	testdb.RequireServerExtension(t, "plproxy", "postgresql-15-plproxy")
	const nShards = 3
	routerURL := testdb.NewEmptyURL(t)
	var shardURLs []string
	for range nShards {
		shardURLs = append(shardURLs, testdb.NewEmptyURL(t))
	}
	backoffctl := func(args ...string) (string, int) {
		t.Helper()
		code, out, errOut := run(t, append(args, "--database-url", routerURL)...)
		return out + errOut, code
	}
	cfg := "../../../../examples/backoff.toml"

	var shardArgs, swapped []string
	for k, u := range shardURLs {
		shardArgs = append(shardArgs, "--shard", u)
		swapped = append(swapped, "--shard", shardURLs[(k+1)%nShards])
	}
	out, code := backoffctl(append([]string{"migrate", "up", "--router"}, shardArgs...)...)
	require.Equal(t, ExitOK, code, out)
	require.Contains(t, out, fmt.Sprintf("router installed over %d shard(s)", nShards))

	out, code = backoffctl("migrate", "status")
	require.Equal(t, ExitUsage, code, out)
	require.Contains(t, out, "is a pgbackoff router")

	// Installing again (after an upgrade) re-migrates the shards and
	// regenerates the router; shards in another order are refused.
	out, code = backoffctl(append([]string{"migrate", "up", "--router"}, shardArgs...)...)
	require.Equal(t, ExitOK, code, out)
	out, code = backoffctl(append([]string{"migrate", "up", "--router"}, swapped...)...)
	require.Equal(t, ExitFailure, code, out)
	require.Contains(t, out, "registered as shard 1's")
	out, code = backoffctl("migrate", "up", "--router")
	require.Equal(t, ExitUsage, code, out)

	out, code = backoffctl("config", "apply", "--config", cfg)
	require.Equal(t, ExitOK, code, out)
	for k := range nShards {
		require.Contains(t, out, fmt.Sprintf("shard %d (", k))
	}
	out, code = backoffctl("config", "diff", "--config", cfg, "--exit-code")
	require.Equal(t, ExitOK, code, out)
	require.Equal(t, nShards, strings.Count(out, "no differences"), out)

	// Shard 2 drifts: someone changed it directly.
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, shardURLs[2])
	require.NoError(t, err)
	_, err = conn.Exec(ctx, `UPDATE backoff.policies SET max_attempts = 99 WHERE name = 'moderate'`)
	conn.Close(ctx)
	require.NoError(t, err)
	out, code = backoffctl("config", "diff", "--config", cfg, "--exit-code")
	require.Equal(t, ExitFailure, code, out)
	require.Equal(t, nShards-1, strings.Count(out, "no differences"), out)
	drift := out[strings.Index(out, "shard 2 ("):]
	require.Contains(t, drift, "~ policy moderate")
	require.Contains(t, drift, "99 -> 5")

	out, code = backoffctl("config", "apply", "--config", cfg)
	require.Equal(t, ExitOK, code, out)
	require.Equal(t, nShards-1, strings.Count(out, "no change"), out)
	out, code = backoffctl("config", "diff", "--config", cfg, "--exit-code")
	require.Equal(t, ExitOK, code, out)

	// Operator commands through the router.
	out, code = backoffctl("enqueue", "cli-q", `{"x": 1}`)
	require.Equal(t, ExitOK, code, out)
	out, code = backoffctl("stats")
	require.Equal(t, ExitOK, code, out)
	require.Contains(t, out, "cli-q")
	out, code = backoffctl("jobs", "list", "--queue", "cli-q")
	require.Equal(t, ExitOK, code, out)
	require.Contains(t, out, "cli-q")

	// A dead letter on the queue's shard, replayed with --all.
	conn, err = pgx.Connect(ctx, routerURL)
	require.NoError(t, err)
	defer conn.Close(ctx)
	var id int64
	require.NoError(t, conn.QueryRow(ctx, `SELECT id FROM backoff.claim('cli-q', 'w')`).Scan(&id))
	_, err = conn.Exec(ctx, `SELECT backoff.fail($1, 1, 'bad', p_retryable => false)`, id)
	require.NoError(t, err)
	out, code = backoffctl("dlq", "list", "--queue", "cli-q")
	require.Equal(t, ExitOK, code, out)
	require.Contains(t, out, "bad")
	out, code = backoffctl("dlq", "replay", "--queue", "cli-q", "--all", "--yes")
	require.Equal(t, ExitOK, code, out)
	require.Contains(t, out, "replayed 1 dead-lettered job(s) of queue cli-q")

	// Shards: a fourth is added moving no queue; a queue is placed on it
	// before its first job; one with jobs stays where it is.
	out, code = backoffctl("shards", "list")
	require.Equal(t, ExitOK, code, out)
	require.Contains(t, out, "layout version 1: 3 shard(s); a queue not placed lives on md5(queue) mod 3")
	out, code = backoffctl("shards", "placement", "cli-q")
	require.Equal(t, ExitOK, code, out)
	home := sharding.QueueShard("cli-q", nShards)
	require.Contains(t, out, fmt.Sprintf("queue cli-q: shard %d, by the hash rule", home))
	out, code = backoffctl("shards", "placement", "cli-q", "--shard", strconv.Itoa((home+1)%nShards))
	require.Equal(t, ExitFailure, code, out)
	require.Equal(t, 1, strings.Count(out, "\n"), out)
	require.Contains(t, out, fmt.Sprintf("it has jobs, schedules or controls on shard %d", home))

	fourth := testdb.NewEmptyURL(t)
	out, code = backoffctl("shards", "add", fourth)
	require.Equal(t, ExitOK, code, out)
	require.Contains(t, out, "added shard 3 (")
	require.Contains(t, out, "no queue moved (layout version 2)")
	out, code = backoffctl("shards", "placement", "cli-q")
	require.Equal(t, ExitOK, code, out)
	require.Contains(t, out, fmt.Sprintf("queue cli-q: shard %d, by the hash rule", home), "adding a shard moved no queue")
	out, code = backoffctl("shards", "placement", "cli-new", "--shard", "3")
	require.Equal(t, ExitOK, code, out)
	require.Contains(t, out, "placed queue cli-new on shard 3 (layout version 3)")
	out, code = backoffctl("shards", "placement", "cli-new", "--shard", "3", "--output", "json")
	require.Equal(t, ExitOK, code, out)
	require.JSONEq(t, `{"queue": "cli-new", "shard": 3, "decided_by": "placement", "layout_version": 3, "changed": false}`, out)
	out, code = backoffctl("enqueue", "cli-new", `{"x": 2}`)
	require.Equal(t, ExitOK, code, out)
	sc, err := pgx.Connect(ctx, fourth)
	require.NoError(t, err)
	var n int
	err = sc.QueryRow(ctx, `SELECT count(*) FROM backoff.jobs WHERE queue = 'cli-new'`).Scan(&n)
	sc.Close(ctx)
	require.NoError(t, err)
	require.Equal(t, 1, n, "the placed queue's job is on the new shard")
	out, code = backoffctl("shards", "list")
	require.Equal(t, ExitOK, code, out)
	require.Contains(t, out, "layout version 3: 4 shard(s); a queue not placed lives on md5(queue) mod 3")
	require.Regexp(t, `(?m)^3 +host=\S+ port=\d+ dbname=\S+ +1$`, out)

	// A queue with jobs moves with them (docs/adr/0092).
	away := (home + 1) % nShards
	out, code = backoffctl("shards", "move", "cli-q", "--to", strconv.Itoa(away))
	require.Equal(t, ExitOK, code, out)
	require.Contains(t, out, fmt.Sprintf("moved queue cli-q from shard %d to shard %d: ", home, away))
	out, code = backoffctl("shards", "placement", "cli-q")
	require.Equal(t, ExitOK, code, out)
	require.Contains(t, out, fmt.Sprintf("queue cli-q: shard %d, placed explicitly", away))
	out, code = backoffctl("shards", "move", "cli-q", "--to", strconv.Itoa(away), "--output", "json")
	require.Equal(t, ExitOK, code, out)
	require.JSONEq(t, fmt.Sprintf(`{"queue": "cli-q", "from": %d, "to": %d, "jobs": 0, "schedules": 0, "changed": false}`, away, away), out)

	// A move that stops while a job runs on the old shard is under way
	// (placement says so) until it is run again or aborted.
	mvHome := sharding.QueueShard("cli-mv", nShards)
	mvAway := (mvHome + 1) % nShards
	for range 3 {
		out, code = backoffctl("enqueue", "cli-mv", `{}`)
		require.Equal(t, ExitOK, code, out)
	}
	var mvID int64
	var mvToken int
	require.NoError(t, conn.QueryRow(ctx, `SELECT id, attempts FROM backoff.claim('cli-mv', 'w')`).Scan(&mvID, &mvToken))
	out, code = backoffctl("shards", "move", "cli-mv", "--to", strconv.Itoa(mvAway), "--wait", "1ms")
	require.Equal(t, ExitFailure, code, out)
	require.Equal(t, 1, strings.Count(out, "\n"), out)
	require.Contains(t, out, "the move waits")
	out, code = backoffctl("shards", "placement", "cli-mv")
	require.Equal(t, ExitOK, code, out)
	require.Contains(t, out, fmt.Sprintf("a move of queue cli-mv from shard %d to shard %d is under way", mvHome, mvAway))
	out, code = backoffctl("shards", "placement", "cli-mv", "--output", "json")
	require.Equal(t, ExitOK, code, out)
	require.JSONEq(t, fmt.Sprintf(`{"queue": "cli-mv", "shard": %d, "decided_by": "placement", "layout_version": 5, "moving": {"from": %d, "to": %d}}`,
		mvAway, mvHome, mvAway), out)
	_, err = conn.Exec(ctx, `SELECT backoff.complete($1, $2)`, mvID, mvToken)
	require.NoError(t, err)
	out, code = backoffctl("shards", "move", "cli-mv", "--abort")
	require.Equal(t, ExitOK, code, out)
	require.Contains(t, out, fmt.Sprintf("moved queue cli-mv from shard %d to shard %d: 2 waiting or dead-lettered job(s)", mvAway, mvHome))
	out, code = backoffctl("shards", "placement", "cli-mv")
	require.Equal(t, ExitOK, code, out)
	require.Contains(t, out, fmt.Sprintf("queue cli-mv: shard %d, placed explicitly", mvHome))
	require.NotContains(t, out, "under way")

	// Bad input: one line, non-zero exit.
	for _, bad := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"shards", "placement", "x", "--shard", "9"}, ExitFailure, "the router has shards 0 to 3"},
		{[]string{"shards", "placement", "x", "--shard", "-1"}, ExitUsage, "want a shard number"},
		{[]string{"shards", "placement"}, ExitUsage, "QUEUE"},
		{[]string{"shards", "add", "postgres://%zz"}, ExitUsage, "SHARD_URL"},
		{[]string{"shards", "add", fourth}, ExitFailure, "is already shard 3"},
		{[]string{"shards", "move", "cli-q"}, ExitUsage, "give --to K or --abort"},
		{[]string{"shards", "move", "cli-q", "--to", "1", "--abort"}, ExitUsage, "give --to K or --abort"},
		{[]string{"shards", "move", "cli-q", "--abort"}, ExitFailure, "no move of this queue is under way"},
		{[]string{"shards", "move", "cli-q", "--to", "9"}, ExitFailure, "the router has shards 0 to 3"},
	} {
		out, code = backoffctl(bad.args...)
		require.Equal(t, bad.code, code, "%v: %s", bad.args, out)
		require.Equal(t, 1, strings.Count(out, "\n"), "%v: %s", bad.args, out)
		require.Contains(t, out, bad.want, "%v", bad.args)
	}
	code, out, errOut := run(t, "shards", "list", "--database-url", shardURLs[0])
	require.Equal(t, ExitUsage, code, out+errOut)
	require.Contains(t, errOut, "not a pgbackoff router")
}
