package shardtest

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/pgbackoff/pgbackoff/client"
	"github.com/pgbackoff/pgbackoff/client/ops"
	"github.com/pgbackoff/pgbackoff/internal/router"
)

// TestSchedulesThroughRouter: a schedule put through the router lives on
// its queue's shard, fire_schedules through the router fires every shard's
// schedules once per slot, and a change by name reaches the one shard that
// holds it (docs/adr/0063); the reads of the UI's and the CLI's schedule
// pages (the list, the fires ahead, the last jobs) come from every shard
// through their functions (docs/adr/0072).
func TestSchedulesThroughRouter(t *testing.T) {
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, env.RouterURL)
	require.NoError(t, err)
	defer conn.Close(ctx)
	start := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	queues := queuesOnEveryShard(t, "periodic")
	names := make([]string, len(queues))
	for k, q := range queues {
		names[k] = fmt.Sprintf("router-schedule-%d", k)
		_, err := conn.Exec(ctx, `SELECT backoff.put_schedule($1, $2, p_cron => '* * * * *', p_catch_up => 'all', p_now => $3)`,
			names[k], q, start)
		require.NoError(t, err)
	}
	t.Cleanup(func() {
		for k := range NShards {
			sc, err := pgx.Connect(ctx, env.ShardURLs[k])
			require.NoError(t, err)
			_, err = sc.Exec(ctx, `DELETE FROM backoff.jobs WHERE schedule LIKE 'router-schedule-%'`)
			require.NoError(t, err)
			_, err = sc.Exec(ctx, `DELETE FROM backoff.schedules WHERE name LIKE 'router-schedule-%'`)
			require.NoError(t, err)
			sc.Close(ctx)
		}
	})

	// Two firers through the router at the same simulated time, then again.
	count := func(now time.Time) int {
		var n int
		require.NoError(t, conn.QueryRow(ctx, `SELECT count(*) FROM backoff.fire_schedules(100, $1)`, now).Scan(&n))
		return n
	}
	require.Equal(t, 3*len(queues), count(start.Add(3*time.Minute)))
	require.Zero(t, count(start.Add(3*time.Minute)))
	for k := range NShards {
		sc, err := pgx.Connect(ctx, env.ShardURLs[k])
		require.NoError(t, err)
		var mine, others int
		err = sc.QueryRow(ctx, `SELECT count(*) FILTER (WHERE schedule = $1 AND queue = $2),
		                               count(*) FILTER (WHERE schedule <> $1)
		                        FROM backoff.jobs WHERE schedule LIKE 'router-schedule-%'`, names[k], queues[k]).Scan(&mine, &others)
		sc.Close(ctx)
		require.NoError(t, err)
		require.Equal(t, 3, mine, "shard %d fires its own schedule", k)
		require.Zero(t, others, "shard %d fires no other shard's schedule", k)
	}

	var n int
	require.NoError(t, conn.QueryRow(ctx, `SELECT count(*) FROM backoff.schedule_fires($1::text, $2::timestamptz, 2)`, names[1], start).Scan(&n))
	require.Equal(t, 2, n, "the preview by name comes from the shard that holds it")
	var changed bool
	require.NoError(t, conn.QueryRow(ctx, `SELECT backoff.pause_schedule($1)`, names[1]).Scan(&changed))
	require.True(t, changed)
	require.NoError(t, conn.QueryRow(ctx, `SELECT backoff.pause_schedule($1)`, names[1]).Scan(&changed))
	require.False(t, changed)
	require.Equal(t, len(queues)-1, count(start.Add(4*time.Minute)), "the paused schedule fires nothing")
	// A manual fire through the router: only the holder answers, with one
	// job on its own shard; an unknown name gets no row from any shard.
	var triggered int
	require.NoError(t, conn.QueryRow(ctx, `SELECT count(*) FROM backoff.trigger_schedule($1, $2)`, names[1], start.Add(4*time.Minute)).Scan(&triggered))
	require.Equal(t, 1, triggered)
	require.NoError(t, conn.QueryRow(ctx, `SELECT count(*) FROM backoff.trigger_schedule('router-schedule-none', $1)`, start).Scan(&triggered))
	require.Zero(t, triggered)
	holder, err := pgx.Connect(ctx, env.ShardURLs[1])
	require.NoError(t, err)
	require.NoError(t, holder.QueryRow(ctx, `SELECT count(*) FROM backoff.jobs WHERE schedule = $1 AND schedule_slot IS NULL`, names[1]).Scan(&triggered))
	holder.Close(ctx)
	require.Equal(t, 1, triggered, "the manual fire is on the schedule's shard")

	// What `backoffctl schedules list|show` and the UI read, through the
	// router: each shard answers for its own schedules and jobs.
	c, err := client.New(ctx, conn)
	require.NoError(t, err)
	o := ops.New(conn)
	list, err := c.Schedules(ctx)
	require.NoError(t, err)
	var mine []client.Schedule
	for _, s := range list {
		if len(s.Name) > 16 && s.Name[:16] == "router-schedule-" {
			mine = append(mine, s)
		}
	}
	require.Len(t, mine, len(queues))
	for k, s := range mine {
		require.Equal(t, names[k], s.Name, "by name across shards")
		require.Equal(t, k, router.ShardOfJob(s.LastJobID), "the job of the latest slot, from the schedule's shard")
		last := start.Add(4 * time.Minute)
		if k == 1 {
			last = start.Add(3 * time.Minute) // paused before the fourth
		}
		require.Equal(t, last, s.LastJobSlot.UTC())
	}
	s, found, err := c.ScheduleByName(ctx, names[1])
	require.NoError(t, err)
	require.True(t, found)
	require.True(t, s.Paused)
	fires, err := o.UpcomingFires(ctx, names, start.Add(4*time.Minute), 2)
	require.NoError(t, err)
	require.Len(t, fires, len(queues))
	for _, name := range names {
		require.Equal(t, []time.Time{start.Add(5 * time.Minute), start.Add(6 * time.Minute)},
			[]time.Time{fires[name][0].At.UTC(), fires[name][1].At.UTC()}, name)
	}
	jobs, err := o.ScheduleJobs(ctx, names[1], 10)
	require.NoError(t, err)
	require.Len(t, jobs, 4, "three slots and the manual fire")
	require.True(t, jobs[0].Slot.IsZero(), "the manual fire, newest")
	for i, slot := range []time.Duration{3 * time.Minute, 2 * time.Minute, time.Minute} {
		require.Equal(t, start.Add(slot), jobs[i+1].Slot.UTC())
		require.Equal(t, 1, router.ShardOfJob(jobs[i+1].ID))
	}
	require.NoError(t, conn.QueryRow(ctx, `SELECT backoff.drop_schedule($1)`, names[2]).Scan(&changed))
	require.True(t, changed)
	require.Equal(t, len(queues)-2, count(start.Add(5*time.Minute)))
}
