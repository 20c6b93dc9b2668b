package router

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/pgbackoff/pgbackoff/client/sharding"
	"github.com/pgbackoff/pgbackoff/internal/testdb"
)

func TestMain(m *testing.M) { testdb.Main(m) }

// TestEveryFunctionRouted fails when a public function of the shard schema
// has no routing rule, or a rule names an argument the function lacks: a
// function added to sql/functions must be routed on purpose before the
// router can be installed.
func TestEveryFunctionRouted(t *testing.T) {
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, testdb.NewURL(t))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	c, err := readCatalog(ctx, conn)
	if err != nil {
		t.Fatal(err)
	}
	if len(c.functions) < 15 {
		t.Fatalf("read only %d public functions", len(c.functions))
	}
	if u := c.unrouted(); len(u) > 0 {
		t.Errorf("functions without a routing rule (add them to Rules in internal/router/rules.go):\n  %s", strings.Join(u, "\n  "))
	}
	if _, err := c.routerSQL(Layout{Version: 1, HashShards: 3, Shards: 3}); err != nil {
		t.Errorf("router SQL: %v", err)
	}
	// A rule may come before its function (written for another branch's
	// function); it is only reported.
	names := map[string]bool{}
	for _, f := range c.functions {
		names[f.name] = true
	}
	for n := range Rules {
		if !names[n] {
			t.Logf("Rules routes backoff.%s, which the shard schema does not have (yet)", n)
		}
	}
}

// TestUnroutedFunctionFailsInstall: a new public function without a rule
// stops the router's generation, naming it.
func TestUnroutedFunctionFailsInstall(t *testing.T) {
	c := &catalog{functions: []function{{name: "frobnicate", identity: "p_queue text", inputs: []string{"p_queue"}, retType: "integer", result: "integer", volatility: "v"}}}
	_, err := c.routerSQL(Layout{Version: 1, HashShards: 2, Shards: 2})
	if err == nil || !strings.Contains(err.Error(), "backoff.frobnicate(p_queue text) has no routing rule") {
		t.Fatalf("err = %v, want the unrouted function named", err)
	}
	c.functions[0].name = "claim" // a rule whose argument it lacks
	c.functions[0].inputs = []string{"p_other"}
	c.functions[0].identity = "p_other text"
	if _, err := c.routerSQL(Layout{Version: 1, HashShards: 2, Shards: 2}); err == nil || !strings.Contains(err.Error(), "no rule of \"claim\" matches") {
		t.Fatalf("err = %v, want the argument mismatch named", err)
	}
}

// TestQueueShardMatchesSQL: the Go helper and the router's SQL hash put
// every queue on the same shard.
func TestQueueShardMatchesSQL(t *testing.T) {
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, testdb.AdminURL(t))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	sqls, err := (&catalog{}).routerSQL(Layout{Version: 1, HashShards: 3, Shards: 3})
	if err != nil {
		t.Fatal(err)
	}
	fn := strings.Replace(sqls[0], "backoff._hash_shard", "pg_temp.queue_shard", 1)
	if _, err := conn.Exec(ctx, fn); err != nil {
		t.Fatal(err)
	}
	for i := range 500 {
		q := fmt.Sprintf("queue-%d-ü", i)
		var got int
		if err := conn.QueryRow(ctx, "SELECT pg_temp.queue_shard($1)", q).Scan(&got); err != nil {
			t.Fatal(err)
		}
		if want := QueueShard(q, 3); got != want {
			t.Fatalf("queue %q: SQL shard %d, Go %d", q, got, want)
		}
	}
}

func TestIDRange(t *testing.T) {
	for k := range 4 {
		lo, hi := IDRange(k)
		if ShardOfJob(lo) != k || ShardOfJob(hi) != k || ShardOfJob(hi+1) != k+1 {
			t.Fatalf("shard %d: range %d..%d", k, lo, hi)
		}
	}
}

// TestRolesFromMigration: the router creates the roles with migration
// 003's own loop (no second copy to drift), and that loop creates exactly
// the four roles, with nothing of the shard-only part (the grant to the
// installer).
func TestRolesFromMigration(t *testing.T) {
	for _, role := range []string{"backoff_owner", "backoff_producer", "backoff_worker", "backoff_admin"} {
		if !strings.Contains(rolesSQL, "'"+role+"'") {
			t.Errorf("rolesSQL does not create %s:\n%s", role, rolesSQL)
		}
	}
	if strings.Contains(rolesSQL, "GRANT") {
		t.Errorf("rolesSQL grants something; the router only creates roles:\n%s", rolesSQL)
	}
	if !strings.HasPrefix(rolesSQL, "DO $$") || !strings.HasSuffix(rolesSQL, "END LOOP;\nEND\n$$") {
		t.Errorf("rolesSQL is not one DO block:\n%s", rolesSQL)
	}
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, testdb.NewURL(t))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, rolesSQL); err != nil {
		t.Fatalf("run rolesSQL: %v", err)
	}
}

// TestShardOfJobTwin: the client's twin (sharding.ShardOfJob, which a
// Worker in direct mode routes by-id calls with) agrees with the router's
// rule on every shard's id range, at its edges and inside.
func TestShardOfJobTwin(t *testing.T) {
	if sharding.ShardBits != ShardBits {
		t.Fatalf("sharding.ShardBits = %d, router's %d", sharding.ShardBits, ShardBits)
	}
	for k := range MaxShards {
		lo, hi := IDRange(k)
		for _, id := range []int64{lo, lo + 1, lo + (hi-lo)/2, hi - 1, hi} {
			if got, want := sharding.ShardOfJob(id), ShardOfJob(id); got != want || want != k {
				t.Fatalf("job %d: sharding.ShardOfJob %d, router.ShardOfJob %d, want shard %d", id, got, want, k)
			}
		}
	}
}
