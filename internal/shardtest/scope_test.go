package shardtest

import (
	"context"
	"net/url"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"
)

// onEveryServer runs sql as the superuser on the router's and every shard's
// server.
func onEveryServer(t *testing.T, sql string) {
	t.Helper()
	ctx := context.Background()
	for _, u := range append([]string{env.RouterURL}, env.ShardURLs...) {
		conn, err := pgx.Connect(ctx, u)
		require.NoError(t, err)
		_, err = conn.Exec(ctx, sql)
		conn.Close(ctx)
		require.NoError(t, err, sql)
	}
}

// withUser is dbURL logging in as name.
func withUser(t *testing.T, dbURL, name string) string {
	t.Helper()
	u, err := url.Parse(dbURL)
	require.NoError(t, err)
	u.User = url.User(name)
	return u.String()
}

// claimAs connects to dbURL, SET ROLEs to role when it is not "", and
// claims from queue; it returns the payloads claimed.
func claimAs(t *testing.T, dbURL, role, queue string) ([]string, error) {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, dbURL)
	require.NoError(t, err)
	defer conn.Close(ctx)
	if role != "" {
		_, err := conn.Exec(ctx, "SET ROLE "+pgx.Identifier{role}.Sanitize())
		require.NoError(t, err)
	}
	rows, err := conn.Query(ctx, `SELECT payload::text FROM backoff.claim($1, 'w')`, queue)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, pgx.RowTo[string])
}

// TestScopeFollowsTheLoginThroughRouter: a login scoped to one queue and a
// member of an unscoped login role may not shed its scope with SET ROLE,
// through the router as on a shard. PL/Proxy logs into the shard as the
// role in effect, so the shard alone cannot see the login: the router
// refuses a call made under another role than the login's, unless the
// login is a superuser (who narrows itself by SET ROLE, and whose SET ROLE
// role's scope the shard then applies).
func TestScopeFollowsTheLoginThroughRouter(t *testing.T) {
	ctx := context.Background()
	qs := queuesOnEveryShard(t, "scope")
	mail, billing := qs[0], qs[1]
	bShard := 1
	asRole(t, "shardtest_svc", "backoff_worker")
	w5 := asRole(t, "shardtest_w5", "backoff_worker")
	onEveryServer(t, "GRANT shardtest_svc TO shardtest_w5")

	admin, err := pgx.Connect(ctx, env.RouterURL)
	require.NoError(t, err)
	defer admin.Close(ctx)
	_, err = admin.Exec(ctx, `SELECT backoff.grant_queue('shardtest_w5', $1, 'work')`, mail)
	require.NoError(t, err)
	t.Cleanup(func() {
		c, err := pgx.Connect(context.Background(), env.RouterURL)
		require.NoError(t, err)
		defer c.Close(context.Background())
		_, err = c.Exec(context.Background(), `SELECT backoff.revoke_queue('shardtest_w5', $1, 'work')`, mail)
		require.NoError(t, err)
		for k := range NShards {
			sc, err := pgx.Connect(context.Background(), env.ShardURLs[k])
			require.NoError(t, err)
			_, err = sc.Exec(context.Background(), `DELETE FROM backoff.jobs WHERE queue = ANY($1)`, qs)
			sc.Close(context.Background())
			require.NoError(t, err)
		}
	})
	_, err = admin.Exec(ctx, `SELECT backoff.enqueue($1, '{"card": "4111"}')`, billing)
	require.NoError(t, err)

	// On the shard itself, the login's scope wins over SET ROLE.
	_, err = claimAs(t, withUser(t, env.ShardURLs[bShard], "shardtest_w5"), "shardtest_svc", billing)
	require.Equal(t, "42501", sqlstate(err), "on the shard: %v", err)

	// Through the router, the same.
	got, err := claimAs(t, w5, "shardtest_svc", billing)
	require.Equal(t, "42501", sqlstate(err), "through the router, SET ROLE svc claimed %v (err %v)", got, err)
	require.Empty(t, got)

	// Nor the payloads through the router's views, nor maintenance of
	// every queue.
	conn, err := pgx.Connect(ctx, w5)
	require.NoError(t, err)
	defer conn.Close(ctx)
	_, err = conn.Exec(ctx, `SET ROLE shardtest_svc`)
	require.NoError(t, err)
	var payloads []string
	err = conn.QueryRow(ctx, `SELECT coalesce(array_agg(payload::text), '{}') FROM backoff.jobs WHERE queue = $1`, billing).Scan(&payloads)
	require.Equal(t, "42501", sqlstate(err), "through the router, SET ROLE svc read %v (err %v)", payloads, err)
	_, err = conn.Exec(ctx, `SELECT backoff.reap()`)
	require.Equal(t, "42501", sqlstate(err), "reap: %v", err)
	_, err = conn.Exec(ctx, `RESET ROLE`)
	require.NoError(t, err)

	// The login itself still works on its queue through the router.
	_, err = admin.Exec(ctx, `SELECT backoff.enqueue($1, '{"to": "a@example.com"}')`, mail)
	require.NoError(t, err)
	got, err = claimAs(t, w5, "", mail)
	require.NoError(t, err)
	require.Equal(t, []string{`{"to": "a@example.com"}`}, got)

	// A superuser session that SET ROLEs to the scoped login gets its
	// scope on the shard: refused on billing.
	_, err = claimAs(t, env.RouterURL, "shardtest_w5", billing)
	require.Equal(t, "42501", sqlstate(err), "superuser as w5: %v", err)
	require.Equal(t, 1, shardCount(t, bShard, "queue = $1 AND status = 'pending'", billing), "the billing job is still pending")
}

// TestRouterShardsAddressesOnly: the shards' connection strings stay
// hidden; backoff.router_shards() gives producers (enqueue in their own
// transaction on a queue's shard), workers (direct mode,
// docs/adr/0093-workers-call-shards-directly.md) and admins each shard's
// address only, not other options of the connection string (a password an
// operator put there). A worker reads neither the SQL/MED server's options
// from the catalog.
func TestRouterShardsAddressesOnly(t *testing.T) {
	ctx := context.Background()
	admin, err := pgx.Connect(ctx, env.RouterURL)
	require.NoError(t, err)
	defer admin.Close(ctx)
	var p0 string
	require.NoError(t, admin.QueryRow(ctx, `
		SELECT substr(o, 4) FROM pg_foreign_server AS s, unnest(s.srvoptions) AS o
		WHERE s.srvname = 'backoff_shards' AND o LIKE 'p0=%'`).Scan(&p0))
	_, err = admin.Exec(ctx, `ALTER SERVER backoff_shards OPTIONS (SET p0 '`+p0+` password=hunter2 sslmode=disable')`)
	require.NoError(t, err)
	t.Cleanup(func() {
		c, err := pgx.Connect(context.Background(), env.RouterURL)
		require.NoError(t, err)
		defer c.Close(context.Background())
		_, err = c.Exec(context.Background(), `ALTER SERVER backoff_shards OPTIONS (SET p0 '`+p0+`')`)
		require.NoError(t, err)
	})

	// addresses reads router_shards() as a login and checks that it gives
	// every shard's host, port and database and no other keyword.
	addresses := func(who string, conn *pgx.Conn) {
		t.Helper()
		var infos []string
		require.NoError(t, conn.QueryRow(ctx, `SELECT array_agg(conninfo ORDER BY shard) FROM backoff.router_shards()`).Scan(&infos), who)
		require.Len(t, infos, NShards, who)
		for k, info := range infos {
			require.NotContains(t, info, "hunter2", "%s: shard %d", who, k)
			require.NotContains(t, info, "sslmode", "%s: shard %d", who, k)
			for _, kv := range strings.Fields(info) {
				key, _, _ := strings.Cut(kv, "=")
				require.Contains(t, []string{"host", "hostaddr", "port", "dbname"}, key, "%s: shard %d: %s", who, k, info)
			}
			cfg, err := pgx.ParseConfig(info)
			require.NoError(t, err, info)
			want, err := pgx.ParseConfig(env.ShardURLs[k])
			require.NoError(t, err)
			require.Equal(t, []any{want.Host, want.Port, want.Database}, []any{cfg.Host, cfg.Port, cfg.Database}, "%s: shard %d: %s", who, k, info)
		}
	}

	work, err := pgx.Connect(ctx, asRole(t, "shardtest_worker", "backoff_worker"))
	require.NoError(t, err)
	defer work.Close(ctx)
	addresses("worker", work)
	var s string
	err = work.QueryRow(ctx, `SELECT srvoptions::text FROM pg_catalog.pg_foreign_server WHERE srvname = 'backoff_shards'`).Scan(&s)
	require.Equal(t, "42501", sqlstate(err), "a worker read the server's options: %q (err %v)", s, err)
	err = work.QueryRow(ctx, `SELECT coalesce(string_agg(option_value, ' '), '') FROM information_schema.foreign_server_options`).Scan(&s)
	if err == nil {
		require.NotContains(t, s, "hunter2", "a worker read the server's options from information_schema")
	} else {
		require.Equal(t, "42501", sqlstate(err), "%v", err)
	}
	// Workers still route (given a queue: a new install requires grants).
	q := queuesOnEveryShard(t, "hidden")[0]
	_, err = admin.Exec(ctx, `SELECT backoff.grant_queue('shardtest_worker', $1, 'work')`, q)
	require.NoError(t, err)
	var n int
	require.NoError(t, work.QueryRow(ctx, `SELECT count(*) FROM backoff.claim($1, 'w')`, q).Scan(&n))

	prod, err := pgx.Connect(ctx, asRole(t, "shardtest_producer", "backoff_producer"))
	require.NoError(t, err)
	defer prod.Close(ctx)
	addresses("producer", prod)
	addresses("admin", admin)
}
