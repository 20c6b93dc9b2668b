package torture

import (
	"context"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgbackoff/pgbackoff/internal/testdb"
)

// killer terminates the backend of a session that is inside a call (a
// statement running, or its transaction open) every 50 to 400 ms, from a
// connection of its own, until ctx ends.
func (r *run) killer(ctx context.Context, rng *rand.Rand) {
	var conn *pgx.Conn
	defer func() {
		if conn != nil {
			conn.Close(context.Background())
		}
	}()
	for {
		select {
		case <-ctx.Done():
			return
		case <-time.After(time.Duration(50+rng.IntN(350)) * time.Millisecond):
		}
		if conn == nil || conn.IsClosed() {
			c, err := pgx.Connect(ctx, r.dbURL())
			if err != nil {
				continue
			}
			conn = c
		}
		rows, err := conn.Query(ctx, `SELECT pid FROM pg_stat_activity
			WHERE datname = current_database() AND application_name LIKE 'torture-client-%' AND state <> 'idle'
			ORDER BY pid`)
		if err != nil {
			conn.Close(ctx)
			conn = nil
			continue
		}
		pids, err := pgx.CollectRows(rows, pgx.RowTo[int32])
		if err != nil || len(pids) == 0 {
			continue
		}
		var killed bool
		if err := conn.QueryRow(ctx, `SELECT pg_terminate_backend($1)`, pids[rng.IntN(len(pids))]).Scan(&killed); err == nil && killed {
			r.kills.Add(1)
		}
	}
}

// restarter restarts the server (fast shutdown, start) every 10 to 25 s
// until ctx ends. The sessions, killer and checks connect again.
func (r *run) restarter(ctx context.Context, rng *rand.Rand) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-time.After(time.Duration(10+rng.IntN(16)) * time.Second):
		}
		rctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		err := r.srv.Restart(rctx)
		if err == nil {
			err = testdb.Restarted(rctx)
		}
		cancel()
		if err != nil {
			r.harnessError(fmt.Errorf("restart the server: %w", err))
			return
		}
		r.restartCount.Add(1)
		r.serverMoved()
	}
}

// reader reads backoff.jobs the way a report or pg_dump does, until ctx
// ends: a REPEATABLE READ transaction that counts the jobs, sometimes
// counts them again, and stays open for 1 to 6 s, then a pause of up to
// 2 s. It holds ACCESS SHARE on every segment it read, which rotate
// cannot truncate while it lasts, and adds segments instead
// (docs/adr/0082): the checks then see whether anything was lost on the
// way.
func (r *run) reader(ctx context.Context, rng *rand.Rand) {
	for ctx.Err() == nil {
		cc, err := pgx.ParseConfig(r.dbURL())
		if err != nil {
			r.harnessError(err)
			return
		}
		cc.RuntimeParams["application_name"] = "torture-reader"
		conn, err := pgx.ConnectConfig(ctx, cc)
		if err != nil {
			sleepCtx(ctx, 100*time.Millisecond)
			continue
		}
		tx, err := conn.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead})
		if err == nil {
			if _, err = tx.Exec(ctx, `SELECT count(*) FROM backoff.jobs`); err == nil {
				r.reads.Add(1)
			}
			hold := time.Duration(1000+rng.IntN(5000)) * time.Millisecond
			if rng.IntN(3) == 0 {
				sleepCtx(ctx, hold/2)
				if _, err = tx.Exec(ctx, `SELECT count(*) FROM backoff.jobs`); err == nil {
					r.reads.Add(1)
				}
			}
			sleepCtx(ctx, hold)
			_ = tx.Rollback(context.Background())
		}
		conn.Close(context.Background())
		sleepCtx(ctx, time.Duration(rng.IntN(2000))*time.Millisecond)
	}
}

// sleepCtx waits d or until ctx ends.
func sleepCtx(ctx context.Context, d time.Duration) {
	select {
	case <-ctx.Done():
	case <-time.After(d):
	}
}
