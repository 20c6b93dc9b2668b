package shardtest

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// BenchmarkPlacementRule prices, on the router's server, the ways of
// deciding a queue's shard that docs/adr/0091-placement-table.md compares:
// the hash alone, the placement table over the hash (what the router does),
// the placements baked into the function's text (a CASE of 1,000 names) and
// consistent hashing (a ring of 100 points per shard, four shards). One op
// is one decision for a queue that is not placed, the common case, inside
// a statement of 10,000.
func BenchmarkPlacementRule(b *testing.B) {
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, env.RouterURL)
	if err != nil {
		b.Fatal(err)
	}
	defer conn.Close(ctx)
	for _, s := range placementRules {
		if _, err := conn.Exec(ctx, s); err != nil {
			b.Fatal(err)
		}
	}
	b.Cleanup(func() { _, _ = conn.Exec(ctx, `DROP SCHEMA placement_bench CASCADE`) })
	const calls = 10_000
	for _, rule := range []string{"hash_shard", "table_shard", "baked_shard", "ring_shard"} {
		b.Run(rule, func(b *testing.B) {
			q := fmt.Sprintf(`SELECT count(placement_bench.%s('queue-' || g)) FROM generate_series(1, %d) AS g`, rule, calls)
			var took time.Duration
			for b.Loop() {
				t0 := time.Now()
				if _, err := conn.Exec(ctx, q); err != nil {
					b.Fatal(err)
				}
				took += time.Since(t0)
			}
			b.ReportMetric(0, "ns/op")
			b.ReportMetric(float64(took.Nanoseconds())/float64(b.N*calls), "ns/decision")
		})
	}
}

var placementRules = []string{
	`DROP SCHEMA IF EXISTS placement_bench CASCADE`,
	`CREATE SCHEMA placement_bench`,
	`CREATE TABLE placement_bench.placements (queue text PRIMARY KEY, shard integer NOT NULL)`,
	`INSERT INTO placement_bench.placements SELECT 'placed-' || g, g % 4 FROM generate_series(1, 1000) AS g`,
	`CREATE FUNCTION placement_bench.hash_shard(p_queue text) RETURNS integer LANGUAGE sql IMMUTABLE
RETURN coalesce(((('x' || substr(md5(p_queue), 1, 8))::bit(32)::int4 & 2147483647) % 4), 0)`,
	`CREATE FUNCTION placement_bench.table_shard(p_queue text) RETURNS integer LANGUAGE plpgsql STABLE AS $$
BEGIN
    RETURN coalesce((SELECT p.shard FROM placement_bench.placements AS p WHERE p.queue = p_queue),
                    placement_bench.hash_shard(p_queue));
END $$`,
	`DO $do$
BEGIN
    EXECUTE 'CREATE FUNCTION placement_bench.baked_shard(p_queue text) RETURNS integer LANGUAGE plpgsql IMMUTABLE AS $f$ BEGIN RETURN CASE p_queue '
        || (SELECT string_agg(format('WHEN %L THEN %s', p.queue, p.shard), ' ') FROM placement_bench.placements AS p)
        || ' ELSE placement_bench.hash_shard(p_queue) END; END $f$';
END $do$`,
	`CREATE TABLE placement_bench.ring (point bigint PRIMARY KEY, shard integer NOT NULL)`,
	`INSERT INTO placement_bench.ring
SELECT DISTINCT ON (x.p) x.p, x.s FROM (
    SELECT ('x' || substr(md5('shard-' || s || '-' || v), 1, 8))::bit(32)::bigint AS p, s
    FROM generate_series(0, 3) AS s, generate_series(1, 100) AS v) AS x`,
	`CREATE FUNCTION placement_bench.ring_shard(p_queue text) RETURNS integer LANGUAGE plpgsql STABLE AS $$
DECLARE
    h bigint := ('x' || substr(md5(p_queue), 1, 8))::bit(32)::bigint;
BEGIN
    RETURN coalesce((SELECT r.shard FROM placement_bench.ring AS r WHERE r.point >= h ORDER BY r.point LIMIT 1),
                    (SELECT r.shard FROM placement_bench.ring AS r ORDER BY r.point LIMIT 1));
END $$`,
}

// BenchmarkEveryShard is a call the router sends to every shard (unfinished_job of a queue without jobs, an index probe)
// against the same call on one shard: the price of each partition in a
// layout of many (over-partitioning) is the difference over the shard
// count.
func BenchmarkEveryShard(b *testing.B) {
	for _, name := range []string{"direct", "router"} {
		b.Run(name, func(b *testing.B) {
			p := benchTargets(b)[name]
			ctx := context.Background()
			for b.Loop() {
				if _, err := p.Exec(ctx, `SELECT count(*) FROM backoff.unfinished_job(ARRAY['bench-no-such-queue'])`); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
