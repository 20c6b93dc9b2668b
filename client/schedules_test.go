package client

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/pgbackoff/pgbackoff/internal/testdb"
)

// lockedBuffer collects the log lines of several workers.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// TestWorkersFireSchedules: two Workers on a shared simulated clock fire an
// every-minute schedule as the clock moves; each slot gets exactly one job
// (the two race for every slot: they fire every 5ms), each job runs once,
// and a slot missed while the clock jumped follows the schedule's catch-up
// ('latest': only the latest missed slot fires). Nothing sleeps until a
// slot: the test moves the clock and waits for the job.
func TestWorkersFireSchedules(t *testing.T) {
	t.Parallel()
	pool := testdb.New(t)
	ctx := context.Background()
	t0 := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	var clock atomic.Int64
	clock.Store(t0.UnixMicro())
	now := func() time.Time { return time.UnixMicro(clock.Load()) }
	_, err := pool.Exec(ctx, "SELECT backoff.put_schedule('minutely', 'ticks', p_every => '1 minute', p_payload => '{\"n\": 1}', p_now => $1)", t0)
	require.NoError(t, err)

	var mu sync.Mutex
	ran := map[int64]int{}
	var logs lockedBuffer
	log := slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	for i := range 2 {
		w, err := NewWorker(pool, WorkerConfig{
			Queue: "ticks", Concurrency: 2, PollInterval: 10 * time.Millisecond, ReapInterval: -1,
			ScheduleInterval: 5 * time.Millisecond,
			Handler: func(ctx context.Context, job *Job) error {
				mu.Lock()
				ran[job.ID]++
				mu.Unlock()
				return nil
			},
		}, WithLogger(log), WithClock(now), WithWorkerID([]string{"w1", "w2"}[i]))
		require.NoError(t, err)
		startWorker(t, w)
	}

	completed := func(n int) func() bool {
		return func() bool {
			var c int
			require.NoError(t, pool.QueryRow(ctx, "SELECT count(*) FROM backoff.jobs WHERE status = 'completed'").Scan(&c))
			return c >= n
		}
	}
	// Minute by minute for ten minutes, then a jump of an hour and a half.
	for m := 1; m <= 10; m++ {
		clock.Store(t0.Add(time.Duration(m) * time.Minute).UnixMicro())
		eventually(t, time.Minute, "the slot's job ran", completed(m))
	}
	clock.Store(t0.Add(100*time.Minute + 30*time.Second).UnixMicro())
	// 'latest': the latest slot (13:40) and those whose interval ended less
	// than max_clock_skew (5 minutes) before 13:40:30, from 13:35 on.
	eventually(t, time.Minute, "the latest missed slots' jobs ran", completed(16))

	rows, err := pool.Query(ctx, "SELECT schedule_slot, count(*) FROM backoff.jobs WHERE schedule = 'minutely' GROUP BY 1 ORDER BY 1")
	require.NoError(t, err)
	var slots []time.Time
	for rows.Next() {
		var slot time.Time
		var n int
		require.NoError(t, rows.Scan(&slot, &n))
		require.Equal(t, 1, n, "jobs for slot %s", slot)
		slots = append(slots, slot.UTC())
	}
	require.NoError(t, rows.Err())
	want := []time.Time{}
	for m := 1; m <= 10; m++ {
		want = append(want, t0.Add(time.Duration(m)*time.Minute))
	}
	for m := 95; m <= 100; m++ {
		want = append(want, t0.Add(time.Duration(m)*time.Minute))
	}
	require.Equal(t, want, slots)
	mu.Lock()
	require.Len(t, ran, 16)
	for id, n := range ran {
		require.Equal(t, 1, n, "job %d ran %d times", id, n)
	}
	mu.Unlock()
	// The firing call commits before its Worker has read the rows it
	// returns: the other Worker may run the job before the line is written.
	eventually(t, time.Minute, "fired jobs are logged at DEBUG", func() bool {
		return strings.Contains(logs.String(), `schedule=minutely slot=2026-03-01T13:40:00.000Z job=`)
	})
	requireNoneRunning(t, pool)
}

// TestScheduleIntervalNegativeNeverFires: a worker told not to fire leaves
// a due schedule alone (pg_cron or another process fires it).
func TestScheduleIntervalNegativeNeverFires(t *testing.T) {
	t.Parallel()
	pool := testdb.New(t)
	ctx := context.Background()
	t0 := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	_, err := pool.Exec(ctx, "SELECT backoff.put_schedule('off', 'idle', p_every => '1 minute', p_now => $1)", t0)
	require.NoError(t, err)
	var calls atomic.Int64
	w, err := NewWorker(pool, WorkerConfig{
		Queue: "idle", PollInterval: 10 * time.Millisecond, ReapInterval: -1, ScheduleInterval: -1,
		Handler: func(context.Context, *Job) error { return nil },
	}, WithLogger(testLogger(t)), WithClock(func() time.Time { calls.Add(1); return t0.Add(time.Hour) }))
	require.NoError(t, err)
	stop := startWorker(t, w)
	eventually(t, time.Minute, "the worker polled a few times", func() bool { return calls.Load() > 5 })
	stop()
	var n int
	require.NoError(t, pool.QueryRow(ctx, "SELECT count(*) FROM backoff.jobs").Scan(&n))
	require.Zero(t, n)
	require.Equal(t, 3, ConnectionsNeeded(WorkerConfig{Queue: "a", ReapInterval: -1}), "the schedule loop needs the maintenance connection")
	require.Equal(t, 2, ConnectionsNeeded(WorkerConfig{Queue: "a", ReapInterval: -1, ScheduleInterval: -1}))
}

// TestScheduleCalls: the operator's calls on a real database: the reads
// (with the job of the latest slot), pause and resume, a manual fire and
// what a job says of its schedule.
func TestScheduleCalls(t *testing.T) {
	t.Parallel()
	pool := testdb.New(t)
	ctx := context.Background()
	t0 := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	c := newTestClient(t, pool, WithClock(func() time.Time { return t0.Add(61 * time.Minute) }))
	_, err := pool.Exec(ctx, `SELECT backoff.put_schedule('hourly', 'reports', p_cron => '0 * * * *', p_time_zone => 'Europe/Berlin',
		p_payload => '{"kind": "hourly"}', p_max_attempts => 2, p_now => $1)`, t0)
	require.NoError(t, err)

	fired, err := c.FireSchedules(ctx, 0)
	require.NoError(t, err)
	require.Len(t, fired, 1, "13:00 is due at 13:01")
	require.Equal(t, "hourly", fired[0].Schedule)
	require.Equal(t, t0.Add(time.Hour), fired[0].Slot.UTC())
	require.Positive(t, fired[0].JobID)
	again, err := c.FireSchedules(ctx, 0)
	require.NoError(t, err)
	require.Empty(t, again)

	list, err := c.Schedules(ctx)
	require.NoError(t, err)
	require.Len(t, list, 1)
	s := list[0]
	require.Equal(t, "hourly", s.Name)
	require.Equal(t, "0 * * * *", s.Cron)
	require.Equal(t, "Europe/Berlin", s.TimeZone)
	require.JSONEq(t, `{"kind": "hourly"}`, string(s.Payload))
	require.Equal(t, 2, s.MaxAttempts)
	require.Equal(t, fired[0].JobID, s.LastJobID)
	require.Equal(t, t0.Add(time.Hour), s.LastJobSlot.UTC())
	require.Equal(t, t0.Add(2*time.Hour), s.NextFireAt.UTC())
	require.EqualValues(t, 1, s.Fired)

	changed, err := c.PauseSchedule(ctx, "hourly")
	require.NoError(t, err)
	require.True(t, changed)
	got, found, err := c.ScheduleByName(ctx, "hourly")
	require.NoError(t, err)
	require.True(t, found)
	require.True(t, got.Paused)
	changed, err = c.ResumeSchedule(ctx, "hourly")
	require.NoError(t, err)
	require.True(t, changed)
	_, found, err = c.ScheduleByName(ctx, "nope")
	require.NoError(t, err)
	require.False(t, found)

	id, found, err := c.TriggerSchedule(ctx, "hourly")
	require.NoError(t, err)
	require.True(t, found)
	name, slot, err := c.JobSchedule(ctx, id)
	require.NoError(t, err)
	require.Equal(t, "hourly", name)
	require.True(t, slot.IsZero(), "a manual fire has no slot")
	name, slot, err = c.JobSchedule(ctx, fired[0].JobID)
	require.NoError(t, err)
	require.Equal(t, "hourly", name)
	require.Equal(t, t0.Add(time.Hour), slot.UTC())
	_, found, err = c.TriggerSchedule(ctx, "nope")
	require.NoError(t, err)
	require.False(t, found)
	_, _, err = c.JobSchedule(ctx, 999999)
	require.ErrorIs(t, err, ErrJobNotFound)
}
