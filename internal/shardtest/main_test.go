// Package shardtest runs pgbackoff behind a PL/Proxy router over three shard
// clusters (docs/sharding.md). It starts four local PostgreSQL clusters, so
// it runs only when BACKOFF_SHARDED=1 (make test-sharded); then a missing
// PL/Proxy is a failure, not a skip. BACKOFF_SHARDED_URL=postgres://...
// instead puts the router and the shards in databases of that one server
// (quicker while developing; the shard restart test is skipped there).
package shardtest

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgbackoff/pgbackoff/internal/pgserver"
	"github.com/pgbackoff/pgbackoff/internal/router"
)

// NShards is how many shards the tests put behind the router.
const NShards = 3

// cluster is the router and its shards.
type cluster struct {
	routerURL string
	shardURLs []string
	// servers are the local clusters: [0] the router's, [1..] the shards'
	// (nil when BACKOFF_SHARDED_URL is used).
	servers []restartable
}

var env *cluster

func TestMain(m *testing.M) {
	if os.Getenv("BACKOFF_SHARDED") == "" && os.Getenv("BACKOFF_SHARDED_URL") == "" {
		fmt.Println("shardtest: skipped (set BACKOFF_SHARDED=1, or run make test-sharded)")
		os.Exit(0)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	c, err := start(ctx)
	cancel()
	if err != nil {
		fmt.Fprintln(os.Stderr, "shardtest:", err)
		c.stop()
		os.Exit(1)
	}
	env = c
	code := m.Run()
	c.stop()
	os.Exit(code)
}

func (c *cluster) stop() {
	if c == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for _, s := range c.servers {
		if err := s.Stop(ctx); err != nil {
			fmt.Fprintln(os.Stderr, "shardtest:", err)
		}
	}
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

func start(ctx context.Context) (*cluster, error) {
	c := &cluster{}
	if url := os.Getenv("BACKOFF_SHARDED_URL"); url != "" {
		suffix := fmt.Sprintf("%d", rand.IntN(1_000_000))
		names := []string{"bk_router_" + suffix}
		for k := range NShards {
			names = append(names, fmt.Sprintf("bk_shard%d_%s", k, suffix))
		}
		admin, err := pgx.Connect(ctx, url)
		if err != nil {
			return c, err
		}
		defer admin.Close(ctx)
		for i, n := range names {
			if _, err := admin.Exec(ctx, "CREATE DATABASE "+n); err != nil {
				return c, err
			}
			u := withDatabase(url, n)
			if i == 0 {
				c.routerURL = u
			} else {
				c.shardURLs = append(c.shardURLs, u)
			}
		}
		c.servers = append(c.servers, &dropDatabases{url: url, names: names})
	} else {
		bin, err := binaries()
		if err != nil {
			return c, err
		}
		servers := make([]*pgserver.Server, NShards+1)
		errs := make([]error, NShards+1)
		var wg sync.WaitGroup
		for i := range servers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				servers[i], errs[i] = pgserver.StartLocalWith(ctx, bin, "max_connections=100", "fsync=off")
			}()
		}
		wg.Wait()
		for i, s := range servers {
			if s != nil {
				c.servers = append(c.servers, &localServer{s})
			}
			if errs[i] != nil {
				return c, errs[i]
			}
		}
		for i, s := range servers {
			admin, err := pgx.Connect(ctx, s.URL)
			if err != nil {
				return c, err
			}
			name := "backoff"
			if i == 0 {
				name = "router"
			}
			_, err = admin.Exec(ctx, "CREATE DATABASE "+name)
			admin.Close(ctx)
			if err != nil {
				return c, err
			}
			if i == 0 {
				c.routerURL = withDatabase(s.URL, name)
			} else {
				c.shardURLs = append(c.shardURLs, withDatabase(s.URL, name))
			}
		}
	}
	if err := c.install(ctx); err != nil {
		return c, err
	}
	return c, nil
}

// install (re)installs the router over the shards.
func (c *cluster) install(ctx context.Context) error {
	conn, err := pgx.Connect(ctx, c.routerURL)
	if err != nil {
		return err
	}
	defer conn.Close(ctx)
	var shards []router.Shard
	for _, u := range c.shardURLs {
		shards = append(shards, router.Shard{URL: u})
	}
	return router.Install(ctx, conn, shards)
}

// local reports whether the router and the shards are local clusters
// (which the tests can restart).
func (c *cluster) local() bool {
	_, ok := c.servers[0].(*localServer)
	return ok
}

// restartable is a server the test harness can stop (and maybe restart).
type restartable interface {
	Stop(context.Context) error
	Restart(context.Context) error
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
	for _, n := range d.names {
		if _, err := admin.Exec(ctx, "DROP DATABASE IF EXISTS "+n+" WITH (FORCE)"); err != nil {
			return err
		}
	}
	return nil
}

func (d *dropDatabases) Restart(context.Context) error {
	return fmt.Errorf("restart: not with BACKOFF_SHARDED_URL")
}

func withDatabase(url, name string) string {
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
