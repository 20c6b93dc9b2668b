package router

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/pgbackoff/pgbackoff/client/sharding"
)

// Placement (docs/adr/0091-placement-table.md): the router decides a
// queue's shard from its layout, two tables of the router database that an
// install keeps:
//
//   - backoff.router_layout, one row: the layout's version (raised by every
//     change), the number of shards, and hash_shards, the shard count of the
//     first install, which the hash rule keeps for ever;
//   - backoff.router_placements: queue → shard, for the queues placed
//     explicitly (backoff.router_place_queue).
//
// A queue without a placement lives on md5(queue) mod hash_shards. Adding
// shards changes neither, so it moves no queue; a new shard takes the
// queues placed on it.

// Layout is the router's layout as an install reads and keeps it (the
// client's view of it, sharding.Layout).
type Layout = sharding.Layout

// readLayout reads the layout a router holds (ok false when the router
// database holds none: a first install, or a router installed before
// placements existed, whose queues all follow the hash of its shard count).
func readLayout(ctx context.Context, tx pgx.Tx) (l Layout, ok bool, err error) {
	if err := tx.QueryRow(ctx, `SELECT pg_catalog.to_regclass('backoff.router_layout') IS NOT NULL`).Scan(&ok); err != nil || !ok {
		return l, false, err
	}
	err = tx.QueryRow(ctx, `
SELECT l.version, l.hash_shards, l.shards,
       (SELECT coalesce(pg_catalog.jsonb_object_agg(p.queue, p.shard), '{}') FROM backoff.router_placements AS p)
FROM backoff.router_layout AS l`).Scan(&l.Version, &l.HashShards, &l.Shards, &l.Placed)
	if err != nil {
		return l, false, fmt.Errorf("read the router's layout: %w", err)
	}
	return l, true, nil
}

// nextLayout is the layout an install over n shards writes, given the one
// the router held (had): the hash rule and the placements stay; the
// version rises when the shard count changes. Fewer shards than the
// layout needs are refused: shards are only ever added.
func nextLayout(old Layout, had bool, n int) (Layout, error) {
	if !had {
		return Layout{Version: 1, HashShards: n, Shards: n, Placed: map[string]int{}}, nil
	}
	if n < old.Shards {
		return Layout{}, fmt.Errorf("the router has %d shards and %d given: shards are only added (give the registered shards first, in their order, then the new ones)", old.Shards, n)
	}
	l := old
	l.Shards = n
	if n != old.Shards {
		l.Version++
	}
	return l, nil
}

// layoutSQL creates the layout tables and the functions that read and
// change them, and writes l into them.
func layoutSQL(l Layout) ([]string, error) {
	out := []string{
		`CREATE TABLE backoff.router_layout (
    one         boolean     PRIMARY KEY DEFAULT true CHECK (one),
    version     bigint      NOT NULL CHECK (version > 0),
    hash_shards integer     NOT NULL CHECK (hash_shards > 0),
    shards      integer     NOT NULL CHECK (shards >= hash_shards),
    changed_at  timestamptz NOT NULL DEFAULT now()
)`,
		`COMMENT ON TABLE backoff.router_layout IS 'Router only: the layout''s version (raised by every change), the number of shards, and hash_shards, the shard count of the first install: a queue that is not placed lives on md5(queue) mod hash_shards, whatever shards are added.'`,
		`CREATE TABLE backoff.router_placements (
    queue     text        PRIMARY KEY CHECK (queue <> ''),
    shard     integer     NOT NULL CHECK (shard >= 0),
    placed_at timestamptz NOT NULL DEFAULT now()
)`,
		`COMMENT ON TABLE backoff.router_placements IS 'Router only: the queues placed on a shard explicitly (backoff.router_place_queue); every other queue follows the hash rule of backoff.router_layout.'`,
		fmt.Sprintf(`INSERT INTO backoff.router_layout (version, hash_shards, shards) VALUES (%d, %d, %d)`, l.Version, l.HashShards, l.Shards),
	}
	if len(l.Placed) > 0 {
		placed, err := json.Marshal(l.Placed)
		if err != nil {
			return nil, err
		}
		out = append(out, fmt.Sprintf(`INSERT INTO backoff.router_placements (queue, shard)
SELECT p.key, p.value::integer FROM jsonb_each_text(%s::jsonb) AS p`, literal(string(placed))))
	}
	out = append(out,
		// The queue's shard: its placement, else the frozen hash rule.
		// Read on every routed call (one primary-key probe of a table the
		// router caches): a change applies to the next call of every
		// session, without a reconnect. PL/pgSQL, not SQL: PL/Proxy runs
		// RUN ON's function as a query of its own on every call, and a SQL
		// function with a subquery cannot be inlined, so its body was
		// parsed and planned again each time (a third of the router's CPU
		// per forwarded call); PL/pgSQL keeps the plan for the session.
		`CREATE FUNCTION backoff._queue_shard(p_queue text) RETURNS integer
LANGUAGE plpgsql STABLE PARALLEL SAFE
AS $$
BEGIN
    RETURN coalesce((SELECT p.shard FROM backoff.router_placements AS p WHERE p.queue OPERATOR(pg_catalog.=) p_queue),
                    backoff._hash_shard(p_queue));
END
$$`,
		// The shard of a queue on which a placement would act: jobs,
		// schedules, wake-up registrations, controls' state or dedupe keys
		// of the queue there. Run on that shard by the router (PL/Proxy's
		// own SELECT: nothing to install on the shards).
		`CREATE FUNCTION backoff._queue_in_use(p_queue text, p_shard integer) RETURNS boolean
LANGUAGE plproxy VOLATILE AS $p$
`+cluster+`
RUN ON p_shard;
SELECT EXISTS (SELECT FROM backoff.jobs AS t WHERE t.queue OPERATOR(pg_catalog.=) p_queue)
    OR EXISTS (SELECT FROM backoff.schedules AS t WHERE t.queue OPERATOR(pg_catalog.=) p_queue)
    OR EXISTS (SELECT FROM backoff.waiting_workers AS t WHERE t.queue OPERATOR(pg_catalog.=) p_queue)
    OR EXISTS (SELECT FROM backoff.queue_failures AS t WHERE t.queue OPERATOR(pg_catalog.=) p_queue)
    OR EXISTS (SELECT FROM backoff.queue_breakers AS t WHERE t.queue OPERATOR(pg_catalog.=) p_queue)
    OR EXISTS (SELECT FROM backoff.queue_tokens AS t WHERE t.queue OPERATOR(pg_catalog.=) p_queue)
    OR EXISTS (SELECT FROM backoff.dedupe_keys AS t WHERE t.queue OPERATOR(pg_catalog.=) p_queue);
$p$`,
		`CREATE FUNCTION backoff.router_placement(p_queue text, OUT shard integer, OUT placed boolean, OUT layout_version bigint)
LANGUAGE sql STABLE SET search_path = pg_catalog, pg_temp
AS $$
    SELECT backoff._queue_shard(p_queue),
           EXISTS (SELECT FROM backoff.router_placements AS p WHERE p.queue = p_queue),
           (SELECT l.version FROM backoff.router_layout AS l)
$$`,
		`COMMENT ON FUNCTION backoff.router_placement(text) IS 'Router only: the shard of a queue, whether it was placed there explicitly (else the hash rule decided), and the layout''s version.'`,
		`CREATE FUNCTION backoff.router_place_queue(p_queue text, p_shard integer) RETURNS boolean
LANGUAGE plpgsql VOLATILE SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_shards integer;
    v_placed integer;
    v_from   integer;
BEGIN
    IF p_queue IS NULL OR p_queue = '' THEN
        RAISE EXCEPTION 'cannot place queue "%": a queue name is not empty', coalesce(p_queue, 'NULL')
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    -- One change of the layout at a time (an install locks the row too).
    SELECT l.shards INTO v_shards FROM backoff.router_layout AS l FOR UPDATE;
    IF p_shard IS NULL OR p_shard < 0 OR p_shard >= v_shards THEN
        RAISE EXCEPTION 'cannot place queue "%" on shard %: the router has shards 0 to %', p_queue, coalesce(p_shard::text, 'NULL'), v_shards - 1
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    SELECT p.shard INTO v_placed FROM backoff.router_placements AS p WHERE p.queue = p_queue;
    IF v_placed = p_shard THEN
        RETURN false;
    END IF;
    v_from := backoff._queue_shard(p_queue);
    IF v_from <> p_shard AND backoff._queue_in_use(p_queue, v_from) THEN
        RAISE EXCEPTION 'cannot place queue "%" on shard %: it has jobs, schedules or controls on shard %, where it lives now', p_queue, p_shard, v_from
            USING ERRCODE = 'object_in_use',
                  HINT = 'Place a queue before its first job; move a queue that has jobs with backoffctl shards move QUEUE --to K.';
    END IF;
    INSERT INTO backoff.router_placements AS p (queue, shard) VALUES (p_queue, p_shard)
    ON CONFLICT (queue) DO UPDATE SET shard = EXCLUDED.shard, placed_at = now();
    UPDATE backoff.router_layout SET version = version + 1, changed_at = now();
    RETURN true;
END
$$`,
		// The flip of a move (docs/adr/0092): the mover has marked the
		// queue 'out' on the shard it leaves and 'in' on p_shard, so the
		// jobs left behind are its to copy, not a reason to refuse.
		`CREATE FUNCTION backoff._router_flip_queue(p_queue text, p_shard integer) RETURNS boolean
LANGUAGE plpgsql VOLATILE SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_shards integer;
BEGIN
    SELECT l.shards INTO v_shards FROM backoff.router_layout AS l FOR UPDATE;
    IF p_queue IS NULL OR p_queue = '' OR p_shard IS NULL OR p_shard < 0 OR p_shard >= v_shards THEN
        RAISE EXCEPTION 'cannot move queue "%" to shard %: the router has shards 0 to %', coalesce(p_queue, 'NULL'), coalesce(p_shard::text, 'NULL'), v_shards - 1
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF backoff._queue_shard(p_queue) = p_shard THEN
        RETURN false;
    END IF;
    INSERT INTO backoff.router_placements AS p (queue, shard) VALUES (p_queue, p_shard)
    ON CONFLICT (queue) DO UPDATE SET shard = EXCLUDED.shard, placed_at = now();
    UPDATE backoff.router_layout SET version = version + 1, changed_at = now();
    RETURN true;
END
$$`,
		`REVOKE ALL ON FUNCTION backoff._router_flip_queue(text, integer) FROM PUBLIC`,
		`GRANT EXECUTE ON FUNCTION backoff._router_flip_queue(text, integer) TO backoff_admin`,
		`COMMENT ON FUNCTION backoff.router_place_queue(text, integer) IS 'Router only (admins): place a queue on a shard; true if the placement changed. Refused (55006) when the queue has jobs, schedules or controls on the shard it lives on now.'`,
		`ALTER TABLE backoff.router_layout OWNER TO backoff_owner`,
		`ALTER TABLE backoff.router_placements OWNER TO backoff_owner`,
		`REVOKE ALL ON FUNCTION backoff.router_placement(text), backoff.router_place_queue(text, integer), backoff._queue_in_use(text, integer) FROM PUBLIC`,
		// Every routed call reads the placements as its caller.
		`GRANT SELECT ON backoff.router_layout, backoff.router_placements TO backoff_producer, backoff_worker, backoff_admin`,
		`GRANT EXECUTE ON FUNCTION backoff.router_placement(text) TO backoff_producer, backoff_worker, backoff_admin`,
		`GRANT INSERT, UPDATE ON backoff.router_placements TO backoff_admin`,
		`GRANT UPDATE ON backoff.router_layout TO backoff_admin`,
		`GRANT EXECUTE ON FUNCTION backoff.router_place_queue(text, integer), backoff._queue_in_use(text, integer) TO backoff_admin`,
	)
	return out, nil
}
