package sharding

import (
	"context"
	"fmt"
	"sync"

	"github.com/jackc/pgx/v5/pgxpool"
)

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
	return p.ForShard(ctx, s)
}

// ForShard returns the pool of shard s (ReadShards lists them), opened
// at the first call for its number.
func (p *Pools) ForShard(ctx context.Context, s Shard) (*pgxpool.Pool, error) {
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
