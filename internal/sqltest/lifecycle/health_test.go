package lifecycle_test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"
)

// healthRow is a row of backoff.health.
type healthRow struct {
	HolderKind     *string        `db:"holder_kind"`
	HolderPid      *int32         `db:"holder_pid"`
	HolderName     *string        `db:"holder_name"`
	HolderUser     *string        `db:"holder_user"`
	HolderState    *string        `db:"holder_state"`
	HolderSince    *time.Time     `db:"holder_since"`
	HolderAge      *time.Duration `db:"holder_age"`
	HolderXidAge   *int32         `db:"holder_xid_age"`
	JobsLive       *int64         `db:"jobs_live_tuples"`
	JobsDead       *int64         `db:"jobs_dead_tuples"`
	JobsLastVacuum *time.Time     `db:"jobs_last_vacuum"`
	JobsBytes      *int64         `db:"jobs_bytes"`
	Warning        *string        `db:"warning"`
}

func health(t testing.TB, q querier, maxAge string, now any) healthRow {
	t.Helper()
	rows, err := q.Query(context.Background(),
		`SELECT * FROM backoff.health(p_max_age => $1::interval, p_max_xid_age => 2000000000, p_now => $2)`, maxAge, now)
	require.NoError(t, err)
	h, err := pgx.CollectExactlyOneRow(rows, pgx.RowToStructByName[healthRow])
	require.NoError(t, err)
	return h
}

// TestHealthNamesTheSnapshotHolder holds a snapshot the way a forgotten
// report does (REPEATABLE READ, one read, then idle in its transaction) and
// once more with a transaction that wrote (it has an xid): health names the
// holder, and warns once the hold is older than p_max_age on the caller's
// clock (no sleep: p_now moves).
func TestHealthNamesTheSnapshotHolder(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	url := testdbURL(t)
	db := poolOn(t, url)
	enqueue(t, db, "mail", t0)

	// Nothing held in this database: no warning.
	h := health(t, db, "5 minutes", nil)
	require.Nil(t, h.Warning, "nothing holds a snapshot yet")
	require.NotNil(t, h.JobsBytes)
	require.Positive(t, *h.JobsBytes)

	for _, tc := range []struct{ name, begin string }{
		{"reader", "BEGIN ISOLATION LEVEL REPEATABLE READ; SELECT 1"},
		{"writer", "BEGIN; SELECT pg_catalog.txid_current()"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			holder := connOn(t, url)
			_, err := holder.Exec(ctx, "SET application_name = 'nightly-report-"+tc.name+"'")
			require.NoError(t, err)
			_, err = holder.Exec(ctx, tc.begin)
			require.NoError(t, err)
			var pid int32
			require.NoError(t, holder.QueryRow(ctx, "SELECT pg_catalog.pg_backend_pid()").Scan(&pid))

			h := health(t, db, "5 minutes", nil)
			require.NotNil(t, h.HolderKind)
			require.Equal(t, "session", *h.HolderKind)
			require.Equal(t, pid, *h.HolderPid)
			require.Equal(t, "nightly-report-"+tc.name, *h.HolderName)
			require.Equal(t, "idle in transaction", *h.HolderState)
			require.NotNil(t, h.HolderSince)
			require.Nil(t, h.Warning, "held for less than 5 minutes")

			var dbNow time.Time
			require.NoError(t, db.QueryRow(ctx, "SELECT now()").Scan(&dbNow))
			h = health(t, db, "5 minutes", dbNow.Add(10*time.Minute))
			require.NotNil(t, h.Warning, "held for 10 minutes on the caller's clock")
			require.Contains(t, *h.Warning, "nightly-report-"+tc.name)
			require.Contains(t, *h.Warning, "session")
			require.GreaterOrEqual(t, *h.HolderAge, 10*time.Minute)

			_, err = holder.Exec(ctx, "ROLLBACK")
			require.NoError(t, err)
			h = health(t, db, "5 minutes", dbNow.Add(10*time.Minute))
			if h.HolderPid != nil {
				require.NotEqual(t, pid, *h.HolderPid, "the released holder is no longer named")
			}
		})
	}
}

func TestHealthValidation(t *testing.T) {
	t.Parallel()
	db := newDB(t)
	requireCode(t, execErr(db, `SELECT * FROM backoff.health(p_max_age => interval '-1 second')`), "22023")
	requireCode(t, execErr(db, `SELECT * FROM backoff.health(p_max_age => NULL)`), "22023")
	requireCode(t, execErr(db, `SELECT * FROM backoff.health(p_max_xid_age => -1)`), "22023")
}
