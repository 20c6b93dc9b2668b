package shardtest

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/stretchr/testify/require"

	"github.com/pgbackoff/pgbackoff/client/sharding"
	"github.com/pgbackoff/pgbackoff/internal/router"
	"github.com/pgbackoff/pgbackoff/internal/shardcluster"
)

// layoutRouter is a router of its own over shard databases of its own,
// made on the test clusters' servers (the router's and the shards', in
// turn), so that adding a shard does not change the router the other tests
// share.
type layoutRouter struct {
	routerURL string
	shardURLs []string // the shards installed so far
	spare     []string // databases made for the shards to add
}

// newLayoutRouter installs a router over n shards and makes extra empty
// databases for shards to add later.
func newLayoutRouter(ctx context.Context, n, extra int) (*layoutRouter, func(), error) {
	suffix := fmt.Sprintf("%d", rand.IntN(1_000_000))
	l := &layoutRouter{}
	type db struct{ admin, name string }
	var made []db
	cleanup := func() {
		// The router first: its backends hold connections to the shards.
		for _, d := range made {
			if c, err := pgx.Connect(context.Background(), d.admin); err == nil {
				_, _ = c.Exec(context.Background(), "DROP DATABASE IF EXISTS "+d.name+" WITH (FORCE)")
				c.Close(context.Background())
			}
		}
	}
	create := func(server, name string) (string, error) {
		admin := shardcluster.WithDatabase(server, "postgres")
		c, err := pgx.Connect(ctx, admin)
		if err != nil {
			return "", err
		}
		defer c.Close(ctx)
		if _, err := c.Exec(ctx, "CREATE DATABASE "+name); err != nil {
			return "", err
		}
		made = append(made, db{admin, name})
		return shardcluster.WithDatabase(server, name), nil
	}
	var err error
	if l.routerURL, err = create(env.RouterURL, "layout_router_"+suffix); err != nil {
		return nil, cleanup, err
	}
	for k := range n + extra {
		u, err := create(env.ShardURLs[k%len(env.ShardURLs)], fmt.Sprintf("layout_shard%d_%s", k, suffix))
		if err != nil {
			return nil, cleanup, err
		}
		if k < n {
			l.shardURLs = append(l.shardURLs, u)
		} else {
			l.spare = append(l.spare, u)
		}
	}
	conn, err := pgx.Connect(ctx, l.routerURL)
	if err != nil {
		return nil, cleanup, err
	}
	defer conn.Close(ctx)
	var shards []router.Shard
	for _, u := range l.shardURLs {
		shards = append(shards, router.Shard{URL: u})
	}
	return l, cleanup, router.Install(ctx, conn, shards)
}

// addShard adds the next spare database as a shard, as backoffctl shards
// add does.
func (l *layoutRouter) addShard(ctx context.Context) (int, error) {
	conn, err := pgx.Connect(ctx, l.routerURL)
	if err != nil {
		return 0, err
	}
	defer conn.Close(ctx)
	base, err := pgx.ParseConfig(l.routerURL)
	if err != nil {
		return 0, err
	}
	k, err := router.AddShard(ctx, conn, base, router.Shard{URL: l.spare[0]})
	if err != nil {
		return 0, err
	}
	l.shardURLs, l.spare = append(l.shardURLs, l.spare[0]), l.spare[1:]
	return k, nil
}

// queueShards asks the router for the shard of each queue.
func queueShards(ctx context.Context, conn *pgx.Conn, queues []string) ([]int32, error) {
	var out []int32
	err := conn.QueryRow(ctx, `
SELECT array_agg(backoff.router_queue_shard(u.q) ORDER BY u.i) FROM unnest($1::text[]) WITH ORDINALITY AS u(q, i)`, queues).Scan(&out)
	return out, err
}

// shardAddMovedShare is the share of 1,000 queue names whose shard changes
// when a fifth shard is added to a router over four.
func shardAddMovedShare(ctx context.Context) (float64, error) {
	l, cleanup, err := newLayoutRouter(ctx, 4, 1)
	defer cleanup()
	if err != nil {
		return 0, err
	}
	queues := make([]string, 1000)
	for i := range queues {
		queues[i] = fmt.Sprintf("moved-share-%d", i)
	}
	conn, err := pgx.Connect(ctx, l.routerURL)
	if err != nil {
		return 0, err
	}
	defer conn.Close(ctx)
	before, err := queueShards(ctx, conn, queues)
	if err != nil {
		return 0, err
	}
	if _, err := l.addShard(ctx); err != nil {
		return 0, err
	}
	after, err := queueShards(ctx, conn, queues)
	if err != nil {
		return 0, err
	}
	moved := 0
	for i := range queues {
		if before[i] != after[i] {
			moved++
		}
	}
	return float64(moved) / float64(len(queues)), nil
}

// TestAddShardMovesNoQueue: adding a fifth shard to four changes the shard
// of none of 1,000 queue names.
func TestAddShardMovesNoQueue(t *testing.T) {
	share, err := shardAddMovedShare(context.Background())
	require.NoError(t, err)
	require.Zero(t, share, "share of the queues whose shard changed when a shard was added")
}

// TestPlacement: a queue placed on a shard (the new one) has its enqueues
// and claims there; a session opened before the shard was added and the
// queue placed follows both without reconnecting; a queue with jobs is not
// moved; a reinstall keeps the layout, and fewer shards are refused.
func TestPlacement(t *testing.T) {
	ctx := context.Background()
	l, cleanup, err := newLayoutRouter(ctx, 4, 1)
	t.Cleanup(cleanup)
	require.NoError(t, err)

	// held is opened before every change and used through PL/Proxy, so
	// that its cached cluster has four shards.
	held, err := pgx.Connect(ctx, l.routerURL)
	require.NoError(t, err)
	defer held.Close(ctx)
	_, err = held.Exec(ctx, `SELECT backoff.enqueue('warm-up')`)
	require.NoError(t, err)
	admin, err := pgx.Connect(ctx, l.routerURL)
	require.NoError(t, err)
	defer admin.Close(ctx)

	var version int64
	require.NoError(t, admin.QueryRow(ctx, `SELECT version FROM backoff.router_layout`).Scan(&version))
	_, err = admin.Exec(ctx, `SELECT backoff.router_place_queue('placed', 4)`)
	var pgErr *pgconn.PgError
	require.ErrorAs(t, err, &pgErr)
	require.Equal(t, "22023", pgErr.Code)
	require.Contains(t, pgErr.Message, `cannot place queue "placed" on shard 4: the router has shards 0 to 3`)

	k, err := l.addShard(ctx)
	require.NoError(t, err)
	require.Equal(t, 4, k)
	var hashShards, shards int
	var v2 int64
	require.NoError(t, admin.QueryRow(ctx, `SELECT version, hash_shards, shards FROM backoff.router_layout`).Scan(&v2, &hashShards, &shards))
	require.Equal(t, []int{4, 5}, []int{hashShards, shards})
	require.Greater(t, v2, version, "adding a shard raises the layout's version")

	// Placed on the new shard: enqueue and claim through the session
	// opened before, which follows without reconnecting.
	var changed bool
	require.NoError(t, admin.QueryRow(ctx, `SELECT backoff.router_place_queue('placed', 4)`).Scan(&changed))
	require.True(t, changed)
	require.NoError(t, admin.QueryRow(ctx, `SELECT backoff.router_place_queue('placed', 4)`).Scan(&changed))
	require.False(t, changed, "placed there already")
	var shard int
	var placed bool
	var v3 int64
	require.NoError(t, held.QueryRow(ctx, `SELECT shard, placed, layout_version FROM backoff.router_placement('placed')`).Scan(&shard, &placed, &v3))
	require.Equal(t, 4, shard)
	require.True(t, placed)
	require.Equal(t, v2+1, v3)
	var id int64
	require.NoError(t, held.QueryRow(ctx, `SELECT backoff.enqueue('placed')`).Scan(&id))
	require.Equal(t, 4, router.ShardOfJob(id), "the job is on the shard the queue was placed on")
	var claimed int64
	require.NoError(t, held.QueryRow(ctx, `SELECT id FROM backoff.claim('placed', 'w')`).Scan(&claimed))
	require.Equal(t, id, claimed)
	onShard := func(k int, queue string) int {
		c, err := pgx.Connect(ctx, l.shardURLs[k])
		require.NoError(t, err)
		defer c.Close(ctx)
		var n int
		require.NoError(t, c.QueryRow(ctx, `SELECT count(*) FROM backoff.jobs WHERE queue = $1`, queue).Scan(&n))
		return n
	}
	require.Equal(t, 1, onShard(4, "placed"))
	require.Zero(t, onShard(router.QueueShard("placed", 4), "placed"), "nothing on the hash rule's shard")

	// A placement change reaches a session that already routed the queue.
	var from int
	require.NoError(t, held.QueryRow(ctx, `SELECT backoff.router_queue_shard('moving')`).Scan(&from))
	to := (from + 1) % 5
	_, err = admin.Exec(ctx, `SELECT backoff.router_place_queue('moving', $1)`, to)
	require.NoError(t, err)
	require.NoError(t, held.QueryRow(ctx, `SELECT backoff.enqueue('moving')`).Scan(&id))
	require.Equal(t, to, router.ShardOfJob(id))

	// A queue with jobs stays where they are.
	_, err = admin.Exec(ctx, `SELECT backoff.router_place_queue('placed', 0)`)
	require.ErrorAs(t, err, &pgErr)
	require.Equal(t, "55006", pgErr.Code)
	require.Contains(t, pgErr.Message, `cannot place queue "placed" on shard 0: it has jobs, schedules or controls on shard 4, where it lives now`)

	// A reinstall over the same shards keeps the layout; fewer are refused.
	conn, err := pgx.Connect(ctx, l.routerURL)
	require.NoError(t, err)
	defer conn.Close(ctx)
	var all []router.Shard
	for _, u := range l.shardURLs {
		all = append(all, router.Shard{URL: u})
	}
	require.NoError(t, router.Install(ctx, conn, all))
	require.NoError(t, held.QueryRow(ctx, `SELECT shard, placed, layout_version FROM backoff.router_placement('placed')`).Scan(&shard, &placed, &v3))
	require.Equal(t, []any{4, true, v2 + 2}, []any{shard, placed, v3})
	err = router.Install(ctx, conn, all[:4])
	require.ErrorContains(t, err, "the router has 5 shards and 4 given: shards are only added")

	// The Go client reads the same layout.
	lay, err := sharding.ReadLayout(ctx, held)
	require.NoError(t, err)
	require.Equal(t, []int{4, 5}, []int{lay.HashShards, lay.Shards})
	require.Equal(t, map[string]int{"placed": 4, "moving": to}, lay.Placed)
	queues := []string{"placed", "moving"}
	for i := range 50 {
		queues = append(queues, fmt.Sprintf("layout-%d", i))
	}
	want, err := queueShards(ctx, held, queues)
	require.NoError(t, err)
	for i, q := range queues {
		got, placed := lay.QueueShard(q)
		require.Equal(t, int(want[i]), got, "queue %q", q)
		require.Equal(t, i < 2, placed, "queue %q", q)
	}
	s, err := sharding.Lookup(ctx, held, "placed")
	require.NoError(t, err)
	require.Equal(t, 4, s.Number)
}

// TestEnqueueGraphThroughRouter: a workflow goes to the shard of its
// queues; one whose queues, or the jobs it depends on, live on different
// shards is refused with 0A000, naming each with its shard.
func TestEnqueueGraphThroughRouter(t *testing.T) {
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, env.RouterURL)
	require.NoError(t, err)
	defer conn.Close(ctx)
	qs := queuesOnEveryShard(t, "graph")
	graph := func(jobs string) ([]int64, error) {
		rows, err := conn.Query(ctx, `SELECT job_id FROM backoff.enqueue_graph($1::jsonb)`, jobs)
		if err != nil {
			return nil, err
		}
		return pgx.CollectRows(rows, pgx.RowTo[int64])
	}
	// Leave nothing pending for the other tests: a cancelled parent
	// cancels its children.
	cancel := func(ids []int64) {
		_, err := conn.Exec(ctx, `SELECT backoff.cancel($1)`, ids[0])
		require.NoError(t, err)
	}

	for k := range NShards {
		ids, err := graph(fmt.Sprintf(`[{"ref": "a", "queue": %q}, {"ref": "b", "queue": %q, "depends_on": ["a"]}]`, qs[k], qs[k]))
		require.NoError(t, err, "a graph on shard %d", k)
		require.Len(t, ids, 2)
		for _, id := range ids {
			require.Equal(t, k, router.ShardOfJob(id), "shard %d's graph", k)
		}
		defer cancel(ids)
	}
	ids, err := graph(fmt.Sprintf(`[{"ref": "a", "queue": %q}]`, qs[0]))
	require.NoError(t, err)
	defer cancel(ids)

	var pgErr *pgconn.PgError
	_, err = graph(fmt.Sprintf(`[{"ref": "a", "queue": %q}, {"ref": "b", "queue": %q, "depends_on": ["a"]}]`, qs[0], qs[2]))
	require.ErrorAs(t, err, &pgErr)
	require.Equal(t, "0A000", pgErr.Code)
	require.Contains(t, pgErr.Message, fmt.Sprintf(`enqueue_graph: the graph spans shards (queue "%s" on shard 0, queue "%s" on shard 2)`, qs[0], qs[2]))

	// A parent that exists already, on another shard than the graph's queue.
	_, err = graph(fmt.Sprintf(`[{"ref": "b", "queue": %q, "depends_on": [%d]}]`, qs[1], ids[0]))
	require.ErrorAs(t, err, &pgErr)
	require.Equal(t, "0A000", pgErr.Code)
	require.Contains(t, pgErr.Message, fmt.Sprintf(`queue "%s" on shard 1, job %d on shard 0`, qs[1], ids[0]))

	// What the shard refuses is still the shard's error.
	_, err = graph(`[]`)
	require.ErrorAs(t, err, &pgErr)
	require.Equal(t, "22023", pgErr.Code)
}

// TestPlacementPrivileges: every router role reads a queue's placement;
// only an admin places a queue, and the check on the queue's shard runs
// as that admin (not a superuser): it sees the queue's jobs there.
func TestPlacementPrivileges(t *testing.T) {
	ctx := context.Background()
	adminURL := asRole(t, "shardtest_placer", "backoff_admin")
	workURL := asRole(t, "shardtest_placement_reader", "backoff_worker")
	super, err := pgx.Connect(ctx, env.RouterURL)
	require.NoError(t, err)
	defer super.Close(ctx)
	fresh := fmt.Sprintf("placement-priv-%d", rand.IntN(1_000_000))
	to := (router.QueueShard(fresh, NShards) + 1) % NShards
	t.Cleanup(func() {
		_, _ = super.Exec(context.Background(), `DELETE FROM backoff.router_placements WHERE queue = $1`, fresh)
	})

	worker, err := pgx.Connect(ctx, workURL)
	require.NoError(t, err)
	defer worker.Close(ctx)
	var shard int
	var placed bool
	require.NoError(t, worker.QueryRow(ctx, `SELECT shard, placed FROM backoff.router_placement($1)`, fresh).Scan(&shard, &placed))
	require.Equal(t, router.QueueShard(fresh, NShards), shard)
	require.False(t, placed)
	_, err = worker.Exec(ctx, `SELECT backoff.router_place_queue($1, $2)`, fresh, to)
	require.Equal(t, "42501", sqlstate(err), "a worker does not place queues: %v", err)

	admin, err := pgx.Connect(ctx, adminURL)
	require.NoError(t, err)
	defer admin.Close(ctx)
	var changed bool
	require.NoError(t, admin.QueryRow(ctx, `SELECT backoff.router_place_queue($1, $2)`, fresh, to).Scan(&changed))
	require.True(t, changed)
	require.NoError(t, worker.QueryRow(ctx, `SELECT shard, placed FROM backoff.router_placement($1)`, fresh).Scan(&shard, &placed))
	require.Equal(t, []any{to, true}, []any{shard, placed})

	busy := queuesOnEveryShard(t, "placement-busy")[0]
	var id int64
	require.NoError(t, super.QueryRow(ctx, `SELECT backoff.enqueue($1)`, busy).Scan(&id))
	defer func() {
		_, err := super.Exec(ctx, `SELECT backoff.cancel($1)`, id)
		require.NoError(t, err)
	}()
	_, err = admin.Exec(ctx, `SELECT backoff.router_place_queue($1, 1)`, busy)
	require.Equal(t, "55006", sqlstate(err), "%v", err)
}
