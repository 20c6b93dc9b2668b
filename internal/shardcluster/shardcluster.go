// Package shardcluster starts pgbackoff behind a PL/Proxy router over
// shards for the tests that need one (internal/shardtest, and the
// conformance suite's sharded run in internal/conformance): four local
// PostgreSQL clusters, the router's and three shards', with the router
// installed over the shards (docs/sharding.md). With BACKOFF_SHARDED_URL
// set, the router and the shards are databases of that one server instead
// (quicker while developing; they cannot be restarted).
package shardcluster

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"sync"

	"github.com/jackc/pgx/v5"

	"github.com/pgbackoff/pgbackoff/internal/pgserver"
	"github.com/pgbackoff/pgbackoff/internal/router"
)

// Shards is how many shards a cluster puts behind its router.
const Shards = 3

// URLEnv names a server whose databases hold the router and the shards
// instead of local clusters.
const URLEnv = "BACKOFF_SHARDED_URL"

// Cluster is a router installed over Shards shard databases.
type Cluster struct {
	RouterURL string
	// ShardURLs are the shards in their router order: ShardURLs[k] is shard k.
	ShardURLs []string
	// servers are the local clusters, [0] the router's and [1..] the
	// shards', or the databases of BACKOFF_SHARDED_URL's server.
	servers []server
}

// server is what Stop and Restart act on.
type server interface {
	Stop(context.Context) error
	Restart(context.Context) error
}

// Start starts the clusters (or makes the databases), creates the router's
// and the shards' databases and installs the router. On an error the
// returned Cluster holds what was started: Stop it.
func Start(ctx context.Context) (*Cluster, error) {
	c := &Cluster{}
	if url := os.Getenv(URLEnv); url != "" {
		return c, c.startDatabases(ctx, url)
	}
	if err := c.startLocal(ctx); err != nil {
		return c, err
	}
	return c, c.Install(ctx)
}

func (c *Cluster) startDatabases(ctx context.Context, url string) error {
	suffix := fmt.Sprintf("%d", rand.IntN(1_000_000))
	names := []string{"bk_router_" + suffix}
	for k := range Shards {
		names = append(names, fmt.Sprintf("bk_shard%d_%s", k, suffix))
	}
	admin, err := pgx.Connect(ctx, url)
	if err != nil {
		return err
	}
	defer admin.Close(ctx)
	d := &dropDatabases{url: url}
	c.servers = append(c.servers, d)
	for i, n := range names {
		if _, err := admin.Exec(ctx, "CREATE DATABASE "+n); err != nil {
			return err
		}
		d.names = append(d.names, n)
		u := WithDatabase(url, n)
		if i == 0 {
			c.RouterURL = u
		} else {
			c.ShardURLs = append(c.ShardURLs, u)
		}
	}
	return c.Install(ctx)
}

func (c *Cluster) startLocal(ctx context.Context) error {
	bin, err := binaries()
	if err != nil {
		return err
	}
	servers := make([]*pgserver.Server, Shards+1)
	errs := make([]error, Shards+1)
	var wg sync.WaitGroup
	for i := range servers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			servers[i], errs[i] = pgserver.StartLocalWith(ctx, bin, "max_connections=100", "fsync=off")
		}()
	}
	wg.Wait()
	for _, s := range servers {
		if s != nil {
			c.servers = append(c.servers, localServer{s})
		}
	}
	if err := errors.Join(errs...); err != nil {
		return err
	}
	for i, s := range servers {
		admin, err := pgx.Connect(ctx, s.URL)
		if err != nil {
			return err
		}
		name := "backoff"
		if i == 0 {
			name = "router"
		}
		_, err = admin.Exec(ctx, "CREATE DATABASE "+name)
		admin.Close(ctx)
		if err != nil {
			return err
		}
		if i == 0 {
			c.RouterURL = WithDatabase(s.URL, name)
		} else {
			c.ShardURLs = append(c.ShardURLs, WithDatabase(s.URL, name))
		}
	}
	return nil
}

// Install (re)installs the router over the shards.
func (c *Cluster) Install(ctx context.Context) error {
	conn, err := pgx.Connect(ctx, c.RouterURL)
	if err != nil {
		return err
	}
	defer conn.Close(ctx)
	var shards []router.Shard
	for _, u := range c.ShardURLs {
		shards = append(shards, router.Shard{URL: u})
	}
	return router.Install(ctx, conn, shards)
}

// Stop stops the local clusters (or drops the databases). A nil Cluster
// has nothing to stop.
func (c *Cluster) Stop(ctx context.Context) error {
	if c == nil {
		return nil
	}
	var errs []error
	for _, s := range c.servers {
		errs = append(errs, s.Stop(ctx))
	}
	return errors.Join(errs...)
}

// Local reports whether the router and the shards are local clusters,
// which Restart can restart.
func (c *Cluster) Local() bool {
	if len(c.servers) == 0 {
		return false
	}
	_, ok := c.servers[0].(localServer)
	return ok
}

// RestartShard restarts shard k's cluster (Local clusters only).
func (c *Cluster) RestartShard(ctx context.Context, k int) error {
	if !c.Local() {
		return fmt.Errorf("shardcluster: restart shard %d: not with %s", k, URLEnv)
	}
	return c.servers[k+1].Restart(ctx)
}

// QueuesOnEveryShard returns, for each shard k, a queue name with prefix that the
// router places on shard k by the hash rule (no placement): prefix-0,
// prefix-1, ... until every shard has one.
func QueuesOnEveryShard(prefix string) []string {
	out := make([]string, Shards)
	found := 0
	for i := 0; found < Shards; i++ {
		q := fmt.Sprintf("%s-%d", prefix, i)
		if k := router.QueueShard(q, Shards); out[k] == "" {
			out[k] = q
			found++
		}
	}
	return out
}

// binaries picks the PostgreSQL server binaries for the clusters: those
// pgserver finds ($BACKOFF_PG_BINDIR first) when they have PL/Proxy; else,
// unless BACKOFF_PG_BINDIR names them, a Debian installation that has it.
func binaries() (pgserver.Binaries, error) {
	bin, err := pgserver.FindBinaries()
	if err == nil && bin.HasExtension("plproxy") {
		return bin, nil
	}
	if os.Getenv(pgserver.BinDirEnv) == "" {
		libs, _ := filepath.Glob("/usr/lib/postgresql/*/lib/plproxy.so")
		for _, l := range libs {
			os.Setenv(pgserver.BinDirEnv, filepath.Join(filepath.Dir(filepath.Dir(l)), "bin"))
			other, err := pgserver.FindBinaries()
			os.Unsetenv(pgserver.BinDirEnv)
			if err == nil && other.HasExtension("plproxy") {
				return other, nil
			}
		}
	}
	if err != nil {
		return bin, err
	}
	return bin, fmt.Errorf("PL/Proxy is not installed for %s (apt-get install postgresql-%d-plproxy; .ci/run does)", bin, bin.Major)
}

// localServer is one of the local clusters.
type localServer struct{ *pgserver.Server }

// dropDatabases drops the databases made on BACKOFF_SHARDED_URL's server.
type dropDatabases struct {
	url   string
	names []string
}

func (d *dropDatabases) Stop(ctx context.Context) error {
	admin, err := pgx.Connect(ctx, d.url)
	if err != nil {
		return err
	}
	defer admin.Close(ctx)
	// The router first: its backends hold connections to the shards.
	for _, n := range d.names {
		if _, err := admin.Exec(ctx, "DROP DATABASE IF EXISTS "+n+" WITH (FORCE)"); err != nil {
			return err
		}
	}
	return nil
}

func (d *dropDatabases) Restart(context.Context) error {
	return fmt.Errorf("restart: not with %s", URLEnv)
}

// WithDatabase is url (its user, host, port and query) naming database name.
func WithDatabase(url, name string) string {
	cfg, err := pgx.ParseConfig(url)
	if err != nil {
		panic(err)
	}
	q := ""
	if i := strings.Index(url, "?"); i >= 0 {
		q = url[i:]
	}
	return fmt.Sprintf("postgres://%s@%s:%d/%s%s", cfg.User, cfg.Host, cfg.Port, name, q)
}
