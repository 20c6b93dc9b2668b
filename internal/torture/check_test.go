package torture

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// check compares the database with the record and with its own row log,
// in one snapshot. The tables are locked (ACCESS SHARE) before the
// snapshot is taken, so no TRUNCATE can empty a segment under it: a
// snapshot older than a truncation would see neither the rows truncated
// nor their moved copies. final adds the checks that need every session
// stopped. A check that cannot reach the server (a restart) returns
// nothing, except the final one, which waits for it.
func (r *run) check(ctx context.Context, final bool) []string {
	acts, fires, firstFire, lastFire := r.rec.snapshot()
	conn, err := r.checkConn(ctx, final)
	if err != nil {
		return nil
	}
	defer conn.Close(context.Background())
	tx, err := conn.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly})
	if err != nil {
		return r.checkFailed(final, err)
	}
	defer tx.Rollback(context.Background())
	// LOCK takes no snapshot: the first query after it does.
	if _, err := tx.Exec(ctx, `LOCK TABLE backoff.jobs, backoff.dedupe_keys IN ACCESS SHARE MODE`); err != nil {
		return r.checkFailed(final, err)
	}
	var v []string
	for _, c := range []func(context.Context, pgx.Tx, []act) ([]string, error){checkRows, checkCompletions, checkDedupeKeys, checkJobRules} {
		found, err := c(ctx, tx, acts)
		if err != nil {
			return r.checkFailed(final, err)
		}
		v = append(v, found...)
	}
	found, err := checkSlots(ctx, tx, fires, firstFire, lastFire, final)
	if err != nil {
		return r.checkFailed(final, err)
	}
	v = append(v, found...)
	v = append(v, checkTokens(acts)...)
	return v
}

// checkConn connects for a check; the final check waits up to two
// minutes for a server being restarted.
func (r *run) checkConn(ctx context.Context, final bool) (*pgx.Conn, error) {
	wait := time.Second
	if final {
		wait = 2 * time.Minute
	}
	deadline := time.Now().Add(wait)
	for {
		cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		conn, err := pgx.Connect(cctx, r.dbURL())
		cancel()
		if err == nil {
			return conn, nil
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			if final {
				r.harnessError(fmt.Errorf("final check: connect: %w", err))
			}
			return nil, err
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// checkFailed: a periodic check cut short by a kill or a restart is
// skipped; the final one must run.
func (r *run) checkFailed(final bool, err error) []string {
	if final {
		r.harnessError(fmt.Errorf("final check: %w", err))
	}
	return nil
}

// acknowledgedEnqueues are the distinct job ids that acknowledged calls
// returned as enqueued (a deduplicated enqueue returns the job holding the
// key; a fired slot, its job).
func acknowledgedEnqueues(acts []act) map[int64]act {
	m := map[int64]act{}
	for _, a := range acts {
		if a.kind == "enqueue" && a.fate == acknowledged {
			if _, ok := m[a.job]; !ok {
				m[a.job] = a
			}
		}
	}
	return m
}

func describe(a act) string {
	return fmt.Sprintf("%s by client %d, acknowledged at %.1f s", a.kind, a.session, a.end.Seconds())
}
