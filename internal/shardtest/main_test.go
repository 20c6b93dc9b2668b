// Package shardtest runs pgbackoff behind a PL/Proxy router over three shard
// clusters (docs/sharding.md), which internal/shardcluster starts: four
// local PostgreSQL clusters, so it runs only when BACKOFF_SHARDED=1 (make
// test-sharded); then a missing PL/Proxy is a failure, not a skip.
// BACKOFF_SHARDED_URL=postgres://... instead puts the router and the shards
// in databases of that one server (quicker while developing; the shard
// restart test is skipped there).
package shardtest

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/pgbackoff/pgbackoff/internal/shardcluster"
)

// NShards is how many shards the tests put behind the router.
const NShards = shardcluster.Shards

var env *shardcluster.Cluster

func TestMain(m *testing.M) {
	if os.Getenv("BACKOFF_SHARDED") == "" && os.Getenv(shardcluster.URLEnv) == "" {
		fmt.Println("shardtest: skipped (set BACKOFF_SHARDED=1, or run make test-sharded)")
		os.Exit(0)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	c, err := shardcluster.Start(ctx)
	cancel()
	if err != nil {
		fmt.Fprintln(os.Stderr, "shardtest:", err)
		stop(c)
		os.Exit(1)
	}
	env = c
	code := m.Run()
	stop(c)
	os.Exit(code)
}

func stop(c *shardcluster.Cluster) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := c.Stop(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "shardtest:", err)
	}
}
