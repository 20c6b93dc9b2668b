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
