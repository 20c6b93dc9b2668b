// Package sharding finds, through a pgbackoff router (PL/Proxy over several
// shard databases, docs/sharding.md), the shard database that holds a
// queue, and connects to it.
//
// Every call works through the router except enqueue inside your own
// transaction: a router forwards each call in a transaction of its own on
// the shard, which commits whatever your transaction on the router does.
// To enqueue atomically with your own writes, keep those writes and the
// enqueue in one transaction on the queue's shard:
//
//	pools := sharding.NewPools(routerPool, baseConfig)
//	shard, err := pools.ForQueue(ctx, "emails")
//	tx, err := shard.Begin(ctx)
//	// ... your writes on the shard ...
//	id, err := c.With(tx).Enqueue(ctx, "emails", payload)
//	err = tx.Commit(ctx)
package sharding

import (
	"context"
	"crypto/md5"
	"encoding/binary"
	"fmt"
	"sync"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Querier is what Lookup reads the router with (a pool, a connection or a
// transaction on the router database).
type Querier interface {
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// QueueShard is the number of the shard that holds queue among n shards:
// the first four bytes of the MD5 of its name, as a non-negative int32,
// modulo n. It is the Go twin of the router's backoff._queue_shard (a test
// compares them), for a program that knows its shards without asking the
// router (Lookup asks it).
func QueueShard(queue string, n int) int {
	sum := md5.Sum([]byte(queue))
	return int(binary.BigEndian.Uint32(sum[:4])&0x7fffffff) % n
}

// Shard is one shard database behind a router.
type Shard struct {
	// Number is the shard's number (the high bits of its job ids).
	Number int
	// Conninfo is the shard's address as the router reaches it: a libpq
	// connection string with host, port and database only (no user,
	// password or other setting). backoff.router_shards() gives it to
	// producers and admins, not to workers.
	Conninfo string
}

// Lookup asks the router which shard holds queue.
func Lookup(ctx context.Context, router Querier, queue string) (Shard, error) {
	var s Shard
	err := router.QueryRow(ctx, `
SELECT s.shard, s.conninfo FROM backoff.router_shards() AS s
WHERE s.shard = backoff.router_queue_shard($1)`, queue).Scan(&s.Number, &s.Conninfo)
	if err != nil {
		return Shard{}, fmt.Errorf("find the shard of queue %q: %w", queue, err)
	}
	return s, nil
}

// ConnConfig is base (the user, password, TLS and runtime settings you
// connect with) pointed at the shard's host, port and database.
func (s Shard) ConnConfig(base *pgx.ConnConfig) (*pgx.ConnConfig, error) {
	at, err := pgx.ParseConfig(s.Conninfo)
	if err != nil {
		return nil, fmt.Errorf("shard %d: connection string %q: %w", s.Number, s.Conninfo, err)
	}
	cfg := base.Copy()
	cfg.Host, cfg.Port, cfg.Database = at.Host, at.Port, at.Database
	if cfg.TLSConfig != nil {
		cfg.TLSConfig = cfg.TLSConfig.Clone()
		cfg.TLSConfig.ServerName = at.Host
	}
	// Keep one fallback per TLS choice of base (sslmode=prefer: TLS, then
	// plain), at the shard's address.
	var fallbacks []*pgconn.FallbackConfig
	seen := map[bool]bool{cfg.TLSConfig != nil: true}
	for _, f := range base.Fallbacks {
		if seen[f.TLSConfig != nil] {
			continue
		}
		seen[f.TLSConfig != nil] = true
		fc := *f
		fc.Host, fc.Port = at.Host, at.Port
		if fc.TLSConfig != nil {
			fc.TLSConfig = fc.TLSConfig.Clone()
			fc.TLSConfig.ServerName = at.Host
		}
		fallbacks = append(fallbacks, &fc)
	}
	cfg.Fallbacks = fallbacks
	return cfg, nil
}

// Pools opens (once) and keeps a pool per shard, found through a router.
// It is safe for concurrent use; Close closes the shard pools (not the
// router's).
type Pools struct {
	router Querier
	base   *pgxpool.Config

	mu    sync.Mutex
	pools map[int]*pgxpool.Pool
}

// NewPools finds shards through router and connects to them with base's
// settings (user, password, TLS, pool sizes), at each shard's address.
func NewPools(router Querier, base *pgxpool.Config) *Pools {
	return &Pools{router: router, base: base, pools: map[int]*pgxpool.Pool{}}
}

// ForQueue returns the pool of the shard that holds queue.
func (p *Pools) ForQueue(ctx context.Context, queue string) (*pgxpool.Pool, error) {
	s, err := Lookup(ctx, p.router, queue)
	if err != nil {
		return nil, err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if pool, ok := p.pools[s.Number]; ok {
		return pool, nil
	}
	cc, err := s.ConnConfig(p.base.ConnConfig)
	if err != nil {
		return nil, err
	}
	cfg := p.base.Copy()
	cfg.ConnConfig = cc
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("connect to shard %d: %w", s.Number, err)
	}
	p.pools[s.Number] = pool
	return pool, nil
}

// Close closes every shard pool opened.
func (p *Pools) Close() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for k, pool := range p.pools {
		pool.Close()
		delete(p.pools, k)
	}
}
