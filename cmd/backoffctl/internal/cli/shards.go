package cli

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/spf13/cobra"

	"github.com/pgbackoff/pgbackoff/client/sharding"
	"github.com/pgbackoff/pgbackoff/migrations"
)

// target is one database a configuration command reads or writes: the
// database of --database-url, or, when that is a PL/Proxy router
// (docs/sharding.md), each of its shards.
type target struct {
	// label is "" for a plain database, else "shard K (host:port/db)".
	label string
	conn  *pgx.Conn
	// layout is the router's placement of queues (nil for a plain
	// database): which shard holds a queue.
	layout *sharding.Layout
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
	layout, err := sharding.ReadLayout(ctx, conn)
	if err != nil {
		return nil, err
	}
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
		out = append(out, target{label: label, conn: c, layout: &layout})
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
	// The router's placement, else the hash rule of its first install.
	k, _ := targets[0].layout.QueueShard(queue)
	if k >= len(targets) {
		closeTargets(ctx, targets)
		return nil, fmt.Errorf("queue %q is placed on shard %d, which the router does not list", queue, k)
	}
	for i, t := range targets {
		if i != k {
			t.conn.Close(ctx)
		}
	}
	return targets[k].conn, nil
}

func init() { register(newShardsCommand) }

func newShardsCommand() *cobra.Command {
	cmd := groupCommand(&cobra.Command{
		Use:   "shards",
		Short: "Show the shards behind a router and where it places queues; add a shard; place or move a queue",
		Long: `Behind a PL/Proxy router (docs/sharding.md), a queue placed explicitly
lives on its shard; any other on md5(queue) mod the shard count of the
router's first install. Adding a shard therefore moves no queue: a new
shard takes the queues placed on it. A queue is placed before its first
job: placing a queue that has jobs, schedules or controls on its shard is
refused; "shards move" moves a live queue with its jobs.`,
		Example: `  backoffctl shards list --database-url postgres://admin@router/jobs
  backoffctl shards add postgres://admin@db3/jobs --database-url postgres://admin@router/jobs
  backoffctl shards placement emails
  backoffctl shards placement emails --shard 3
  backoffctl shards move emails --to 3`,
	})
	cmd.AddCommand(newShardsListCommand(), newShardsAddCommand(), newShardsPlacementCommand(), newShardsMoveCommand())
	return cmd
}

// connectRouter connects to --database-url and refuses a database that is
// not a router.
func connectRouter(ctx context.Context, cmd *cobra.Command) (*pgx.Conn, error) {
	conn, err := connect(ctx, cmd)
	if err != nil {
		return nil, err
	}
	ok, err := isRouter(ctx, conn)
	if err == nil && !ok {
		err = usagef("%s: the database is not a pgbackoff router (docs/sharding.md)", cmd.CommandPath())
	}
	if err != nil {
		conn.Close(ctx)
		return nil, err
	}
	return conn, nil
}

// shardRow is one shard as shards list shows it.
type shardRow struct {
	Shard        int    `json:"shard"`
	Conninfo     string `json:"conninfo"`
	PlacedQueues int    `json:"placed_queues"`
}

func newShardsListCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "list",
		Short: "List the shards behind the router, with the number of queues placed on each, and the layout's version",
		Example: `  backoffctl shards list
  backoffctl shards list --output json`,
		Args: exactArgs(0, ""),
		RunE: withOutput(func(cmd *cobra.Command, _ []string, jsonOut bool) error {
			ctx := cmd.Context()
			conn, err := connectRouter(ctx, cmd)
			if err != nil {
				return err
			}
			defer conn.Close(ctx)
			layout, err := sharding.ReadLayout(ctx, conn)
			if err != nil {
				return err
			}
			rows, err := conn.Query(ctx, `SELECT shard, conninfo FROM backoff.router_shards() ORDER BY shard`)
			if err != nil {
				return fmt.Errorf("list the router's shards: %w", err)
			}
			shards, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (shardRow, error) {
				var s shardRow
				return s, r.Scan(&s.Shard, &s.Conninfo)
			})
			if err != nil {
				return fmt.Errorf("list the router's shards: %w", err)
			}
			for i := range shards {
				for _, k := range layout.Placed {
					if k == shards[i].Shard {
						shards[i].PlacedQueues++
					}
				}
			}
			w := cmd.OutOrStdout()
			if jsonOut {
				return writeJSON(w, map[string]any{
					"layout_version": layout.Version, "hash_shards": layout.HashShards, "shards": shards,
				})
			}
			fmt.Fprintf(w, "layout version %d: %d shard(s); a queue not placed lives on md5(queue) mod %d\n",
				layout.Version, len(shards), layout.HashShards)
			tw := newTable(w)
			row(tw, "SHARD", "ADDRESS", "PLACED QUEUES")
			for _, s := range shards {
				row(tw, strconv.Itoa(s.Shard), esc(s.Conninfo), strconv.Itoa(s.PlacedQueues))
			}
			return tw.Flush()
		}),
	}
}

func newShardsAddCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "add SHARD_URL",
		Short: "Register a new shard database behind the router, moving no queue",
		Long: `add migrates the database of SHARD_URL to the latest version, gives it
the next shard number and its range of job ids, and regenerates the router
over its shards and the new one (as migrate up --router does; a superuser
login). No queue moves: queues not placed keep the hash rule of the first
install, placed queues their shard. Place queues on the new shard with
"shards placement QUEUE --shard K" before their first jobs. The shards
already registered are reached at the addresses the router lists, with the
user, password and TLS settings of --database-url.`,
		Example: `  backoffctl shards add postgres://admin@db3/jobs --database-url postgres://admin@router/jobs`,
		Args:    exactArgs(1, "SHARD_URL"),
		RunE: withOutput(func(cmd *cobra.Command, args []string, jsonOut bool) error {
			shardCfg, err := parseConnConfig(args[0])
			if err != nil {
				return usagef("shards add: SHARD_URL: %v", err)
			}
			ctx := cmd.Context()
			conn, err := connectRouter(ctx, cmd)
			if err != nil {
				return err
			}
			defer conn.Close(ctx)
			base, err := connConfig(cmd)
			if err != nil {
				return err
			}
			k, err := migrations.AddRouterShard(ctx, conn, base, args[0])
			if err != nil {
				return err
			}
			layout, err := sharding.ReadLayout(ctx, conn)
			if err != nil {
				return err
			}
			w := cmd.OutOrStdout()
			if jsonOut {
				return writeJSON(w, map[string]any{"shard": k, "layout_version": layout.Version})
			}
			fmt.Fprintf(w, "added shard %d (%s:%d/%s), migrated to version %d; no queue moved (layout version %d)\n",
				k, esc(shardCfg.Host), shardCfg.Port, esc(shardCfg.Database), migrations.Latest(), layout.Version)
			return nil
		}),
	}
}

func newShardsPlacementCommand() *cobra.Command {
	var shard int
	cmd := &cobra.Command{
		Use:   "placement QUEUE",
		Short: "Show a queue's shard and how it was decided, or place the queue on a shard (--shard)",
		Long: `Without --shard, placement prints the shard that holds QUEUE and whether
it was placed there explicitly or by the hash rule. With --shard K it
places QUEUE on shard K (an admin), which the router follows at once; a
queue that has jobs, schedules or controls on its shard is refused (move
it with "shards move"). A move of QUEUE under way is shown too.`,
		Example: `  backoffctl shards placement emails
  backoffctl shards placement emails --shard 3`,
		Args: exactArgs(1, "QUEUE"),
		RunE: withOutput(func(cmd *cobra.Command, args []string, jsonOut bool) error {
			queue := args[0]
			set := cmd.Flags().Changed("shard")
			if set && shard < 0 {
				return usagef("--shard %d: want a shard number, 0 or more", shard)
			}
			ctx := cmd.Context()
			conn, err := connectRouter(ctx, cmd)
			if err != nil {
				return err
			}
			defer conn.Close(ctx)
			changed := false
			if set {
				if err := conn.QueryRow(ctx, `SELECT backoff.router_place_queue($1, $2)`, queue, shard).Scan(&changed); err != nil {
					return fmt.Errorf("place queue %q: %w", queue, err)
				}
			}
			var k int
			var placed bool
			var version int64
			err = conn.QueryRow(ctx, `SELECT shard, placed, layout_version FROM backoff.router_placement($1)`, queue).
				Scan(&k, &placed, &version)
			if err != nil {
				return fmt.Errorf("find the shard of queue %q: %w", queue, err)
			}
			decided := "hash"
			if placed {
				decided = "placement"
			}
			mv, err := moveUnderWay(ctx, conn, queue)
			if err != nil {
				return err
			}
			w := cmd.OutOrStdout()
			if jsonOut {
				out := map[string]any{"queue": queue, "shard": k, "decided_by": decided, "layout_version": version}
				if set {
					out["changed"] = changed
				}
				if mv != nil {
					out["moving"] = mv
				}
				return writeJSON(w, out)
			}
			switch {
			case mv != nil && mv.To != nil:
				defer fmt.Fprintf(w, "a move of queue %s from shard %d to shard %d is under way: finish it with \"shards move %s --to %d\", or undo it with \"shards move %s --abort\"\n",
					esc(queue), mv.From, *mv.To, esc(queue), *mv.To, esc(queue))
			case mv != nil:
				defer fmt.Fprintf(w, "a move of queue %s from shard %d is under way: run the same \"shards move\" again to finish it, or undo it with \"shards move %s --abort\"\n",
					esc(queue), mv.From, esc(queue))
			}
			switch {
			case set && changed:
				fmt.Fprintf(w, "placed queue %s on shard %d (layout version %d)\n", esc(queue), k, version)
			case set:
				fmt.Fprintf(w, "queue %s is already placed on shard %d (layout version %d)\n", esc(queue), k, version)
			case placed:
				fmt.Fprintf(w, "queue %s: shard %d, placed explicitly (layout version %d)\n", esc(queue), k, version)
			default:
				fmt.Fprintf(w, "queue %s: shard %d, by the hash rule (not placed; layout version %d)\n", esc(queue), k, version)
			}
			return nil
		}),
	}
	cmd.Flags().IntVar(&shard, "shard", 0, "place the queue on this shard (an admin; refused while the queue has jobs, schedules or controls on its shard)")
	return cmd
}

func newShardsMoveCommand() *cobra.Command {
	var (
		to    int
		abort bool
		wait  time.Duration
		batch int
		share float64
	)
	cmd := &cobra.Command{
		Use:   "move QUEUE (--to K | --abort)",
		Short: "Move a live queue, with its waiting jobs, dead letters, schedules and controls, to shard K",
		Long: `move moves QUEUE to shard K while producers and workers go on through the
router (docs/sharding.md, "Moving a queue"): the old shard stops handing
out the queue's jobs and taking its enqueues, the router sends both to
shard K, and the queue's waiting jobs (pending, retrying) and dead letters
are copied to shard K under new ids, with their whole state, then deleted
on the old shard (in batches that work a quarter of the time, --share); its schedules and the state of its breaker, token
bucket and failure log go along. Jobs running on the old shard finish (or
are reaped) there; move waits for them (--wait), then finishes. Finished
jobs stay on the old shard as history. A queue with blocked jobs or jobs
in a workflow is refused.

Every step can be repeated: after any failure (a timeout, a lost
connection, the command killed) run the same command again and it goes on
where it stopped. --abort moves a queue whose move is under way back to
the shard it came from, with everything copied so far; an abort that is
interrupted is itself a move under way, finished with "move QUEUE --to"
the shard it came from. The login must be an admin on the router and the
shards, reached at the addresses the router lists with the user, password
and TLS settings of --database-url.`,
		Example: `  backoffctl shards move emails --to 3
  backoffctl shards move emails --to 3 --wait 30m
  backoffctl shards move emails --abort`,
		Args: exactArgs(1, "QUEUE"),
		RunE: withOutput(func(cmd *cobra.Command, args []string, jsonOut bool) error {
			queue := args[0]
			set := cmd.Flags().Changed("to")
			if set == abort {
				return usagef("shards move: give --to K or --abort")
			}
			if set && to < 0 {
				return usagef("--to %d: want a shard number, 0 or more", to)
			}
			if !set {
				to = -1
			}
			if batch < 1 {
				return usagef("--batch %d: want 1 or more", batch)
			}
			if !(share > 0 && share <= 1) {
				return usagef("--share %g: want more than 0 and at most 1", share)
			}
			ctx := cmd.Context()
			conn, err := connectRouter(ctx, cmd)
			if err != nil {
				return err
			}
			defer conn.Close(ctx)
			base, err := connConfig(cmd)
			if err != nil {
				return err
			}
			res, err := migrations.MoveRouterQueue(ctx, conn, base, queue, to, migrations.MoveOptions{
				Abort: abort, Wait: wait, Batch: batch, Share: share,
			})
			if err != nil {
				return err
			}
			w := cmd.OutOrStdout()
			if jsonOut {
				return writeJSON(w, res)
			}
			if !res.Changed {
				fmt.Fprintf(w, "queue %s is on shard %d already; nothing to move\n", esc(queue), res.To)
				return nil
			}
			fmt.Fprintf(w, "moved queue %s from shard %d to shard %d: %d waiting or dead-lettered job(s) and %d schedule(s) copied by this run\n",
				esc(queue), res.From, res.To, res.Jobs, res.Schedules)
			return nil
		}),
	}
	cmd.Flags().IntVar(&to, "to", 0, "the shard to move the queue to")
	cmd.Flags().BoolVar(&abort, "abort", false, "move a queue whose move is under way back to the shard it came from")
	cmd.Flags().DurationVar(&wait, "wait", 10*time.Minute, "how long to wait for the jobs running on the old shard (the move stays resumable past it)")
	cmd.Flags().IntVar(&batch, "batch", 100, "jobs copied per batch")
	cmd.Flags().Float64Var(&share, "share", 0.25, "the share of the time the copy works, pausing after each batch so that the shards' other queues keep their CPU (1: no pause, the fastest move)")
	return cmd
}

// queueMove is a move of a queue under way, as the shards' marks
// (backoff.queue_moves, read through the router) show it.
type queueMove struct {
	From int  `json:"from"`
	To   *int `json:"to"` // nil until the origin is marked
}

// moveUnderWay reads the move of queue under way, if any (nil without one,
// or for a role that may not read the marks).
func moveUnderWay(ctx context.Context, conn *pgx.Conn, queue string) (*queueMove, error) {
	var may bool
	if err := conn.QueryRow(ctx, `SELECT has_table_privilege('backoff.queue_moves', 'SELECT')`).Scan(&may); err != nil || !may {
		return nil, err
	}
	var mv queueMove
	err := conn.QueryRow(ctx, `
SELECT i.peer, (SELECT o.peer FROM backoff.queue_moves AS o
                WHERE o.queue = i.queue AND o.direction = 'out' AND o.generation = i.generation)
FROM backoff.queue_moves AS i
WHERE i.queue = $1 AND i.direction = 'in'
ORDER BY i.generation DESC
LIMIT 1`, queue).Scan(&mv.From, &mv.To)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read the moves of queue %q: %w", queue, err)
	}
	return &mv, nil
}
