package lifecycle_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/pgbackoff/pgbackoff/internal/testdb"
)

// isolationLevels are the levels users run at, and set as a database's
// default: rotate must be safe at each.
var isolationLevels = []string{"read committed", "repeatable read", "serializable"}

// TestRotateNeverTruncatesACommittedJob: rotate decides that a segment is
// empty before it truncates it. In a transaction whose snapshot is older
// than a producer's commit (REPEATABLE READ or SERIALIZABLE, asked for or
// the database's default), that producer's job is invisible to it; a
// truncate on that view would destroy a committed job and orphan its
// dedupe key. Here the rotating transaction switches segments, a producer
// that does not see the switch yet commits a job into the segment switched
// from, and the same transaction rotates again. Run as a worker login with
// no queue grant, as anyone allowed to call rotate may.
func TestRotateNeverTruncatesACommittedJob(t *testing.T) {
	t.Parallel()
	for _, level := range isolationLevels {
		for _, how := range []string{"asked for", "database default"} {
			t.Run(level+", "+how, func(t *testing.T) {
				t.Parallel()
				ctx := context.Background()
				url := testdb.NewURL(t)
				admin := poolOn(t, url)
				segmentJobs(t, admin, 2)
				for range 3 {
					enqueue(t, admin, "done", t0)
				}
				for _, j := range claim(t, admin, "done", "w", 3, t0) {
					exec(t, admin, `SELECT backoff.complete($1, $2, $3)`, j.ID, j.Attempts, t0)
				}
				begin := "BEGIN ISOLATION LEVEL " + level
				if how == "database default" {
					testdb.SetDefaultIsolation(t, url, level)
					begin = "BEGIN"
				}

				rotator := connAtDefault(t, testdb.LoginRole(t, url, "backoff_worker"))
				producer := connAtDefault(t, url)
				exec(t, rotator, begin)
				// Segment 1 has taken its 2 jobs: the call switches to 2,
				// uncommitted.
				require.EqualValues(t, 1, scalar[int16](t, rotator, `SELECT switched_from FROM backoff.rotate()`))

				var id int64
				require.NoError(t, producer.QueryRow(ctx, `SELECT backoff.enqueue('victim', '{}', p_dedupe_key => 'k')`).Scan(&id))
				require.EqualValues(t, 1, scalar[int16](t, producer, `SELECT segment FROM backoff.jobs WHERE id = $1`, id),
					"the producer does not see the switch yet")

				// SERIALIZABLE may refuse the rotating transaction instead
				// (40001, nothing of it committed): that loses nothing either.
				err := execErr(rotator, `SELECT * FROM backoff.rotate()`)
				if err == nil {
					err = execErr(rotator, `COMMIT`)
				}
				if err != nil && level == "serializable" {
					requireCode(t, err, "40001")
					err = execErr(rotator, `ROLLBACK`)
				}
				require.NoError(t, err)

				require.Equal(t, "pending", get(t, admin, id).Status, "a committed job survives rotation")
				require.EqualValues(t, 1, scalar[int64](t, admin, `SELECT count(*) FROM backoff.dedupe_keys WHERE job_id = $1`, id))
				// The next call, whatever the level, moves the job into the
				// current segment and empties segment 1 for good.
				exec(t, rotator, `SELECT * FROM backoff.rotate()`)
				exec(t, admin, `SELECT * FROM backoff.rotate()`)
				require.Equal(t, "pending", get(t, admin, id).Status)
				require.EqualValues(t, 2, scalar[int16](t, admin, `SELECT segment FROM backoff.jobs WHERE id = $1`, id))
			})
		}
	}
}
