package lifecycle_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"
)

// A transaction that has read backoff.jobs (a report, pg_dump) holds
// ACCESS SHARE on every segment it read until it ends, and rotate cannot
// truncate them: rotate then switches to a segment added for the purpose
// (docs/adr/0082), so that claims never walk the held segments' dead rows.

// segmentSizes is the size on disk of each live segment.
func segmentSizes(t testing.TB, q querier) map[int16]int64 {
	t.Helper()
	rows, err := q.Query(context.Background(), `SELECT segment, pg_relation_size(format('backoff.jobs_live_%s', segment)::regclass)
		FROM backoff.segments`)
	require.NoError(t, err)
	out := map[int16]int64{}
	for rows.Next() {
		var s int16
		var n int64
		require.NoError(t, rows.Scan(&s, &n))
		out[s] = n
	}
	require.NoError(t, rows.Err())
	return out
}

// holdReader opens a REPEATABLE READ transaction that reads backoff.jobs,
// as pg_dump or a report does, and keeps it open until the test ends it.
func holdReader(t testing.TB, url string) pgx.Tx {
	t.Helper()
	ctx := context.Background()
	conn := connOn(t, url)
	exec(t, conn, `SET application_name = 'nightly report'`)
	tx, err := conn.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead})
	require.NoError(t, err)
	t.Cleanup(func() { _ = tx.Rollback(context.Background()) })
	exec(t, tx, `SELECT count(*) FROM backoff.jobs`)
	return tx
}

// cycleJobs enqueues n jobs of queue, claims and completes them, and
// rotates: one segment's worth of work when n is segment_jobs.
func cycleJobs(t testing.TB, q querier, queue string, n int) rotation {
	t.Helper()
	for range n {
		enqueue(t, q, queue, t0)
	}
	done := claim(t, q, queue, "w", n, t0)
	require.Len(t, done, n, "every job enqueued is claimable")
	for _, j := range done {
		exec(t, q, `SELECT backoff.complete($1, $2, $3)`, j.ID, j.Attempts, t0)
	}
	return rotate(t, q)
}

func TestRotateAddsASegmentWhileAReaderHoldsThem(t *testing.T) {
	t.Parallel()
	url := testdbURL(t)
	db := poolOn(t, url)
	segmentJobs(t, db, 10)
	cycleJobs(t, db, "q", 10) // segment 1 has rows, 2 becomes current
	reader := holdReader(t, url)

	switches := 0
	for i := range 12 {
		r := cycleJobs(t, db, "q", 10)
		if r.SwitchedFrom == nil {
			continue
		}
		switches++
		sizes := segmentSizes(t, db)
		require.Zerof(t, sizes[r.Current], "cycle %d: switched to segment %d, which is not empty on disk (%v)", i, r.Current, sizes)
	}
	require.Equal(t, 12, switches, "every cycle switched: rotate was never stuck on a held segment")
	sizes := segmentSizes(t, db)
	require.Greater(t, len(sizes), 3, "segments were added")
	require.LessOrEqual(t, len(sizes), 8)
	for _, s := range []int16{1, 2} {
		require.NotZerof(t, sizes[s], "segment %d, held by the reader, keeps its files (%v)", s, sizes)
	}
	require.EqualValues(t, 130, scalar[int64](t, db, `SELECT count(*) FROM backoff.jobs WHERE status = 'completed'`))

	var waiting int32
	var heldBy, warning *string
	require.NoError(t, db.QueryRow(context.Background(),
		`SELECT segments_waiting, segments_held_by, warning FROM backoff.health()`).Scan(&waiting, &heldBy, &warning))
	require.GreaterOrEqual(t, waiting, int32(2))
	require.NotNil(t, heldBy)
	require.Contains(t, *heldBy, "'nightly report'")
	require.NotNil(t, warning)
	require.Contains(t, *warning, "wait to be truncated while pid")

	// The reader ends: the next rotate gives the space back.
	require.NoError(t, reader.Commit(context.Background()))
	r := rotate(t, db)
	require.Nil(t, r.SwitchedFrom)
	require.Nil(t, r.Note)
	for s, n := range segmentSizes(t, db) {
		if s != r.Current {
			require.Zerof(t, n, "segment %d truncated once the reader ended", s)
		}
	}
	require.NoError(t, db.QueryRow(context.Background(),
		`SELECT segments_waiting, segments_held_by, warning FROM backoff.health()`).Scan(&waiting, &heldBy, &warning))
	require.Zero(t, waiting)
	require.Nil(t, heldBy)
	require.Nil(t, warning)

	// The added segments stay, empty, and take their turn.
	for range 2 * len(sizes) {
		cycleJobs(t, db, "q", 10)
	}
	require.EqualValues(t, 130+20*len(sizes), scalar[int64](t, db, `SELECT count(*) FROM backoff.jobs WHERE status = 'completed'`))
	require.Len(t, segmentSizes(t, db), len(sizes))
}

// TestRotateAddsAtMostEightSegments: a reader that reads backoff.jobs
// again after every switch holds each segment added too. Past eight
// segments rotate switches as it did before it added any, to a segment
// that holds no row, and says so; no job is lost.
func TestRotateAddsAtMostEightSegments(t *testing.T) {
	t.Parallel()
	url := testdbURL(t)
	db := poolOn(t, url)
	segmentJobs(t, db, 10)
	reader := holdReader(t, url)
	var last rotation
	for range 12 {
		last = cycleJobs(t, db, "q", 10)
		exec(t, reader, `SELECT count(*) FROM backoff.jobs`)
	}
	require.Len(t, segmentSizes(t, db), 8)
	require.NotNil(t, last.SwitchedFrom, "rotate still switches")
	require.NotNil(t, last.Note)
	require.Contains(t, *last.Note, "there are 8, the most rotate adds")
	require.Contains(t, *last.Note, fmt.Sprintf("switched to segment %d, which holds only dead rows", last.Current))
	require.EqualValues(t, 120, scalar[int64](t, db, `SELECT count(*) FROM backoff.jobs WHERE status = 'completed'`))
}
