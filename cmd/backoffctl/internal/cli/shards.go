package cli

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/spf13/cobra"

	"github.com/pgbackoff/pgbackoff/client/sharding"
)

// target is one database a configuration command reads or writes: the
// database of --database-url, or, when that is a PL/Proxy router
// (docs/sharding.md), each of its shards.
type target struct {
	// label is "" for a plain database, else "shard K (host:port/db)".
	label string
	conn  *pgx.Conn
}

// isRouter reports whether conn is a pgbackoff router database.
func isRouter(ctx context.Context, conn *pgx.Conn) (bool, error) {
	var ok bool
	if err := conn.QueryRow(ctx, `SELECT to_regprocedure('backoff.router_shards()') IS NOT NULL`).Scan(&ok); err != nil {
		return false, fmt.Errorf("detect a router: %w", err)
	}
	return ok, nil
}

// withTargets is the preamble of the commands that write or compare every
// shard (config apply, config diff): connectTargets, fn, closeTargets.
func withTargets(cmd *cobra.Command, fn func(ctx context.Context, targets []target) error) error {
	ctx := cmd.Context()
	targets, err := connectTargets(ctx, cmd)
	if err != nil {
		return err
	}
	defer closeTargets(ctx, targets)
	return fn(ctx, targets)
}

// connectTargets connects to the database of the command, or to every shard
// behind it when it is a router: a shard is reached at the address and
// database the router lists, with the user, password and TLS settings of
// --database-url. Close the targets with closeTargets.
func connectTargets(ctx context.Context, cmd *cobra.Command) ([]target, error) {
	conn, err := connect(ctx, cmd)
	if err != nil {
		return nil, err
	}
	router, err := isRouter(ctx, conn)
	if err != nil || !router {
		if err != nil {
			conn.Close(ctx)
			return nil, err
		}
		return []target{{conn: conn}}, nil
	}
	defer conn.Close(ctx)
	rows, err := conn.Query(ctx, `SELECT shard, conninfo FROM backoff.router_shards()`)
	if err != nil {
		return nil, fmt.Errorf("list the router's shards: %w", err)
	}
	type shard struct {
		n        int32
		conninfo string
	}
	shards, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (shard, error) {
		var s shard
		return s, r.Scan(&s.n, &s.conninfo)
	})
	if err != nil {
		return nil, fmt.Errorf("list the router's shards: %w", err)
	}
	var out []target
	for _, s := range shards {
		cfg, err := connConfig(cmd)
		if err != nil {
			closeTargets(ctx, out)
			return nil, err
		}
		// The shard's address with the user, password and TLS choices of
		// --database-url.
		cfg, err = sharding.Shard{Number: int(s.n), Conninfo: s.conninfo}.ConnConfig(cfg)
		if err != nil {
			closeTargets(ctx, out)
			return nil, err
		}
		label := fmt.Sprintf("shard %d (%s:%d/%s)", s.n, cfg.Host, cfg.Port, cfg.Database)
		c, err := pgx.ConnectConfig(ctx, cfg)
		if err != nil {
			closeTargets(ctx, out)
			return nil, fmt.Errorf("connect to %s: %w", label, rootCause(err))
		}
		out = append(out, target{label: label, conn: c})
	}
	return out, nil
}

func closeTargets(ctx context.Context, ts []target) {
	for _, t := range ts {
		t.conn.Close(ctx)
	}
}

// connectForQueue connects to the database that holds queue's jobs: the
// database of the command, or the queue's shard when it is a router (for
// statements a router cannot forward, such as SELECT ... FOR UPDATE).
func connectForQueue(ctx context.Context, cmd *cobra.Command, queue string) (*pgx.Conn, error) {
	targets, err := connectTargets(ctx, cmd)
	if err != nil {
		return nil, err
	}
	if len(targets) == 1 && targets[0].label == "" {
		return targets[0].conn, nil
	}
	k := sharding.QueueShard(queue, len(targets))
	for i, t := range targets {
		if i != k {
			t.conn.Close(ctx)
		}
	}
	return targets[k].conn, nil
}
