package faulttest

import (
	"context"
	"errors"
	"net/url"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/pgbackoff/pgbackoff/client"
	"github.com/pgbackoff/pgbackoff/internal/testdb"
)

// TestSettleReplyLost: a Worker's settle call (complete_many, fail, snooze,
// heartbeat) reaches the server and commits, but the proxy drops its reply
// and cuts the connection, so the Worker repeats the call on a new
// connection (client/worker.go retries settle calls cut by a transient
// error, and the heartbeat loop tries again at its next tick). Where the
// job can move on, another worker claims it before the repeat arrives: the
// repeat carries a token that no longer holds the job and is refused
// (docs/adr/0020); the new attempt is untouched. Each
// attempt is settled exactly once, as the job's history and the
// completion log show. A completion's repeat is refused too, but the
// Worker sees that its own attempt completed the job and counts it as
// completed, not as a lost lease.
//
// Only a proxy and a server are needed (no restart, no pause): these run
// with TEST_DATABASE_URL too.
func TestSettleReplyLost(t *testing.T) {
	for _, tc := range []struct {
		name    string
		trigger string // the SQL text whose reply is dropped
		handler client.Handler
		// moved says the first call has committed and the job may be taken
		// by someone else (the window before the proxy cuts the connection).
		moved func(admin *pgxpool.Pool, id int64) bool
		// steal claims the job as another worker; false: nothing to steal
		// (a completed job).
		steal bool
	}{
		{
			name: "complete", trigger: "backoff.complete_many(",
			handler: func(context.Context, *client.Job) error { return nil },
			moved: func(admin *pgxpool.Pool, id int64) bool {
				return count(admin, `SELECT count(*) FROM backoff.jobs WHERE id = $1 AND status = 'completed'`, id) == 1
			},
		},
		{
			name: "fail", trigger: "backoff.fail(", steal: true,
			handler: func(context.Context, *client.Job) error {
				return client.RetryAfter(errors.New("downstream 503"), 0)
			},
			moved: func(admin *pgxpool.Pool, id int64) bool {
				return count(admin, `SELECT count(*) FROM backoff.jobs WHERE id = $1 AND status = 'retrying'`, id) == 1
			},
		},
		{
			name: "snooze", trigger: "backoff.snooze(", steal: true,
			handler: func(context.Context, *client.Job) error { return client.Snooze(0) },
			moved: func(admin *pgxpool.Pool, id int64) bool {
				return count(admin, `SELECT count(*) FROM backoff.jobs WHERE id = $1 AND status = 'pending' AND last_attempted_at IS NOT NULL`, id) == 1
			},
		},
		{
			// The first heartbeat extends the lease; while its reply is held
			// the lease is reaped (clock moved on) and the job re-claimed.
			name: "heartbeat", trigger: "backoff.heartbeat(", steal: true,
			handler: func(ctx context.Context, _ *client.Job) error { <-ctx.Done(); return ctx.Err() },
			moved: func(admin *pgxpool.Pool, id int64) bool {
				extended := count(admin, `SELECT count(*) FROM backoff.jobs
					WHERE id = $1 AND lease_until > last_attempted_at + interval '10 seconds'`, id) == 1
				return extended && count(admin, `SELECT backoff.reap(now() + interval '1 hour')`) == 1
			},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			dbURL, admin := newFaultDB(t)
			p, err := newProxy(func() string { return hostPort(t, dbURL) })
			require.NoError(t, err)
			defer p.close()
			queue := "lost-" + tc.name
			id := enqueue(t, admin, queue, 1)[0]

			// Hold the reply 1.5 s after the server ran the call, then cut.
			p.arm(tc.trigger, false, 1500*time.Millisecond)
			var stale, confirmed atomic.Int64
			stop := runLoggedWorkers(t, testdb.Pool(t, simpleProtocolVia(t, dbURL, p)), 1, client.WorkerConfig{
				Queue: queue, Concurrency: 1, Lease: 10 * time.Second, HeartbeatInterval: 200 * time.Millisecond,
				PollInterval: 50 * time.Millisecond, ReapInterval: -1, ShutdownTimeout: 2 * time.Second,
				Handler: tc.handler,
			}, staleLog{stale: &stale, confirmed: &confirmed})

			waitFor(t, 10*time.Second, "the settle call to commit", func() bool { return tc.moved(admin, id) })
			require.Equal(t, 1, p.cutCount(), "the proxy held the reply of %s", tc.trigger)
			var thief struct{ attempts, uncounted int32 }
			var thiefLease time.Time
			if tc.steal {
				// Another worker takes the job before the repeat arrives.
				now := "now()"
				if tc.name == "heartbeat" {
					now = "now() + interval '2 hours'" // past the reaped job's retry delay
				}
				require.NoError(t, admin.QueryRow(ctx, `SELECT attempts, uncounted_attempts, lease_until FROM backoff.claim($1, 'thief', 1, NULL, `+now+`)`, queue).
					Scan(&thief.attempts, &thief.uncounted, &thiefLease))
				require.Equal(t, int32(2), thief.attempts, "a new token")
			}
			// The cut comes; the Worker repeats its call, which is refused; a
			// completion's refusal is recognised as the Worker's own.
			if tc.steal {
				waitFor(t, 15*time.Second, "the repeated call to be refused", func() bool { return stale.Load() >= 1 })
			} else {
				waitFor(t, 15*time.Second, "the completion to be confirmed", func() bool { return confirmed.Load() >= 1 })
			}
			stop()
			if !tc.steal {
				require.Zero(t, stale.Load(), "a completion made by the call whose reply was lost is not a lost lease")
			}

			var status string
			var attempts, uncounted, history, logged int
			var lockedBy *string
			var lease *time.Time
			require.NoError(t, admin.QueryRow(ctx, `SELECT status, attempts, uncounted_attempts, jsonb_array_length(errors), locked_by, lease_until
				FROM backoff.jobs WHERE id = $1`, id).Scan(&status, &attempts, &uncounted, &history, &lockedBy, &lease))
			if !tc.steal {
				require.Equal(t, "completed", status)
				require.Equal(t, 1, attempts)
			} else {
				// The thief's attempt is untouched by the repeat.
				require.Equal(t, "running", status)
				require.Equal(t, 2, attempts)
				require.Equal(t, int(thief.uncounted), uncounted)
				require.Equal(t, "thief", *lockedBy)
				require.True(t, thiefLease.Equal(*lease), "the thief's lease was not extended by a stale heartbeat")
				switch tc.name {
				case "snooze":
					require.Equal(t, 1, uncounted, "snoozed once")
					require.Zero(t, history)
				case "fail":
					require.Equal(t, 1, history, "attempt 1 failed once")
				case "heartbeat":
					require.Equal(t, 1, history, "attempt 1 reaped once")
				}
				_, err := admin.Exec(ctx, `SELECT backoff.complete($1, 2, now() + interval '2 hours')`, id)
				require.NoError(t, err)
			}
			if history > 0 {
				var attempt, counted int
				require.NoError(t, admin.QueryRow(ctx, `SELECT (errors -> 0 ->> 'attempt')::int, (errors -> 0 ->> 'counted')::int FROM backoff.jobs WHERE id = $1`, id).
					Scan(&attempt, &counted))
				require.Equal(t, 1, attempt)
				require.Equal(t, 1, counted)
			}
			require.NoError(t, admin.QueryRow(ctx, `SELECT count(*) FROM public.completion_log WHERE job_id = $1`, id).Scan(&logged))
			require.Equal(t, 1, logged, "completed exactly once")
			t.Logf("%s: reply dropped once, the repeat refused (%d refusal(s) logged); final status %s", tc.name, stale.Load(), status)
		})
	}
}

// simpleProtocolVia is dbURL through p with the simple protocol, so that
// every call carries its SQL text for the proxy to match.
func simpleProtocolVia(t *testing.T, dbURL string, p *proxy) string {
	t.Helper()
	u, err := url.Parse(viaProxy(t, dbURL, p))
	require.NoError(t, err)
	q := u.Query()
	q.Set("default_query_exec_mode", "simple_protocol")
	u.RawQuery = q.Encode()
	return u.String()
}
