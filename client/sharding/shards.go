package sharding

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
)

// Queryer is what ReadShards reads the router with (a pool, a connection
// or a transaction on the router database).
type Queryer interface {
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
}

// ReadShards lists the shards behind the router, by number, with each
// one's address (backoff.router_shards(): host, port and dbname only;
// admins, producers and workers may call it).
func ReadShards(ctx context.Context, router Queryer) ([]Shard, error) {
	rows, err := router.Query(ctx, `SELECT s.shard, s.conninfo FROM backoff.router_shards() AS s ORDER BY s.shard`)
	if err != nil {
		return nil, fmt.Errorf("read the router's shards: %w", err)
	}
	shards, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (Shard, error) {
		var s Shard
		err := r.Scan(&s.Number, &s.Conninfo)
		return s, err
	})
	if err != nil {
		return nil, fmt.Errorf("read the router's shards: %w", err)
	}
	return shards, nil
}
