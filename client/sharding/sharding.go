// Package sharding finds, through a pgbackoff router (PL/Proxy over several
// shard databases, docs/sharding.md), the shard database that holds a
// queue, and connects to it.
//
// A Worker can call the shards of its queues and jobs directly
// (client.WorkerConfig.DirectShards, docs/adr/0093): it reads the layout
// (ReadLayout) and the shards (ReadShards) once, opens their pools
// (Pools.ForShard) and routes a job's calls by its id (ShardOfJob).
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

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// Querier is what Lookup reads the router with (a pool, a connection or a
// transaction on the router database).
type Querier interface {
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// QueueShard is the hash rule alone: the first four bytes of the MD5 of
// the queue's name, as a non-negative int32, modulo n. It is the Go twin
// of the router's backoff._hash_shard (a test compares them). It is the
// shard of a queue only for a queue that is not placed explicitly, and
// only with n the layout's hash shard count (the number of shards of the
// router's first install, not the number of shards now): ask the router
// (Lookup, or ReadLayout and Layout.QueueShard) for a queue's shard.
func QueueShard(queue string, n int) int {
	sum := md5.Sum([]byte(queue))
	return int(binary.BigEndian.Uint32(sum[:4])&0x7fffffff) % n
}

// Layout is how a router places queues (docs/sharding.md, "Adding a shard
// and placing a queue"): a queue placed explicitly lives on its shard; any
// other on QueueShard(queue, HashShards), the hash rule frozen at the
// router's first install, so that adding shards moves no queue.
type Layout struct {
	// Version is raised by every change of the layout.
	Version int64
	// HashShards is the shard count of the hash rule.
	HashShards int
	// Shards is the number of shards behind the router.
	Shards int
	// Placed is the queues placed explicitly, with their shards.
	Placed map[string]int
}

// ReadLayout reads the router's layout (one query). A router installed
// before placements existed has the hash of its shard count and nothing
// placed.
func ReadLayout(ctx context.Context, router Querier) (Layout, error) {
	l := Layout{Placed: map[string]int{}}
	var has bool
	if err := router.QueryRow(ctx, `SELECT to_regclass('backoff.router_layout') IS NOT NULL`).Scan(&has); err != nil {
		return Layout{}, fmt.Errorf("read the router's layout: %w", err)
	}
	if !has {
		err := router.QueryRow(ctx, `SELECT count(*) FROM backoff.router_shards()`).Scan(&l.Shards)
		if err != nil {
			return Layout{}, fmt.Errorf("read the router's layout: %w", err)
		}
		l.HashShards = l.Shards
		return l, nil
	}
	err := router.QueryRow(ctx, `
SELECT l.version, l.hash_shards, l.shards,
       (SELECT coalesce(jsonb_object_agg(p.queue, p.shard), '{}') FROM backoff.router_placements AS p)
FROM backoff.router_layout AS l`).Scan(&l.Version, &l.HashShards, &l.Shards, &l.Placed)
	if err != nil {
		return Layout{}, fmt.Errorf("read the router's layout: %w", err)
	}
	return l, nil
}

// QueueShard is the shard that holds queue in the layout, and whether the
// queue was placed there explicitly (else the hash rule decided).
func (l Layout) QueueShard(queue string) (shard int, placed bool) {
	if k, ok := l.Placed[queue]; ok {
		return k, true
	}
	return QueueShard(queue, l.HashShards), false
}

// Shard is one shard database behind a router.
type Shard struct {
	// Number is the shard's number (the high bits of its job ids).
	Number int
	// Conninfo is the shard's address as the router reaches it: a libpq
	// connection string with host, port and database only (no user,
	// password or other setting). backoff.router_shards() gives it to
	// producers, workers and admins.
	Conninfo string
}

// Lookup asks the router which shard holds queue (its placement, else the
// hash rule), on every call: a placement changed meanwhile is followed.
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
