package shardtest

import (
	"context"
	"net/url"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/pgbackoff/pgbackoff/internal/testdb"
)

// asRole creates login role name, a member of group, on the router's and
// every shard's server (dropped when the test ends), and returns the
// router's URL logging in as it.
func asRole(t *testing.T, name, group string) string {
	t.Helper()
	ctx := context.Background()
	for _, u := range append([]string{env.RouterURL}, env.ShardURLs...) {
		conn, err := pgx.Connect(ctx, u)
		require.NoError(t, err)
		var exists bool
		require.NoError(t, conn.QueryRow(ctx, `SELECT EXISTS (SELECT FROM pg_roles WHERE rolname = $1)`, name).Scan(&exists))
		if !exists {
			_, err = conn.Exec(ctx, "CREATE ROLE "+name+" LOGIN IN ROLE "+group)
			require.NoError(t, err)
			t.Cleanup(func() {
				c, err := pgx.Connect(context.Background(), u)
				if err == nil {
					_, _ = c.Exec(context.Background(), "DROP ROLE IF EXISTS "+name)
					c.Close(context.Background())
				}
			})
		}
		conn.Close(ctx)
	}
	ru, err := url.Parse(env.RouterURL)
	require.NoError(t, err)
	ru.User = url.User(name)
	return ru.String()
}

var sqlstate = testdb.SQLState

// TestPrivilegesThroughRouter: a caller reaches the shards as its own
// login, so the router and the shards grant what a single database grants.
// A producer enqueues but cannot claim; a worker claims but cannot
// enqueue; neither may inject a clock far from the database's (the shard
// checks the session's role, not a service login's).
func TestPrivilegesThroughRouter(t *testing.T) {
	ctx := context.Background()
	q := queuesOnEveryShard(t, "priv")[1]
	prodURL := asRole(t, "shardtest_producer", "backoff_producer")
	workURL := asRole(t, "shardtest_worker", "backoff_worker")
	// A new install requires queue grants (docs/adr/0058); grant_queue
	// through the router writes every shard.
	admin, err := pgx.Connect(ctx, env.RouterURL)
	require.NoError(t, err)
	defer admin.Close(ctx)
	_, err = admin.Exec(ctx, `SELECT backoff.grant_queue('shardtest_producer', $1, 'produce'), backoff.grant_queue('shardtest_worker', $1, 'work')`, q)
	require.NoError(t, err)

	prod, err := pgx.Connect(ctx, prodURL)
	require.NoError(t, err)
	defer prod.Close(ctx)
	var id int64
	require.NoError(t, prod.QueryRow(ctx, `SELECT backoff.enqueue($1)`, q).Scan(&id))
	_, err = prod.Exec(ctx, `SELECT * FROM backoff.claim($1, 'w')`, q)
	require.Equal(t, "42501", sqlstate(err), "a producer cannot claim: %v", err)
	_, err = prod.Exec(ctx, `SELECT backoff.enqueue($1, p_now => $2)`, q, time.Now().Add(24*time.Hour))
	require.Equal(t, "22023", sqlstate(err), "the shard refuses a producer's skewed clock: %v", err)

	work, err := pgx.Connect(ctx, workURL)
	require.NoError(t, err)
	defer work.Close(ctx)
	var got int64
	require.NoError(t, work.QueryRow(ctx, `SELECT id FROM backoff.claim($1, 'w')`, q).Scan(&got))
	require.Equal(t, id, got)
	_, err = work.Exec(ctx, `SELECT backoff.complete($1, 1)`, id)
	require.NoError(t, err)
	_, err = work.Exec(ctx, `SELECT backoff.enqueue($1)`, q)
	require.Equal(t, "42501", sqlstate(err), "a worker cannot enqueue: %v", err)
	// A worker reads a job by id (backoff.job applies its scope on the
	// job's shard), never the table (docs/adr/0058).
	var status string
	require.NoError(t, work.QueryRow(ctx, `SELECT status FROM backoff.job($1)`, id).Scan(&status))
	require.Equal(t, "completed", status, "a worker reads its job through the router")
	_, err = work.Exec(ctx, `SELECT count(*) FROM backoff.jobs`)
	require.Equal(t, "42501", sqlstate(err), "a worker read the jobs table through the router: %v", err)
}
