// Package mockdb is the pgxmock harness of the client's and the operator
// API's tests: a strict connection that accepts only the exact SQL text,
// and one job row with the Job it must scan into.
package mockdb

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/pashagolub/pgxmock/v3"
	"github.com/stretchr/testify/require"

	"github.com/pgbackoff/pgbackoff/client/internal/sqlapi"
	"github.com/pgbackoff/pgbackoff/client/jobtype"
)

// Now is the time of the mocked rows and of the clocks the tests set.
var Now = time.Date(2025, 3, 4, 5, 6, 7, 0, time.UTC)

// ExactSQL accepts a query only when its text is, byte for byte, the
// expected one. pgxmock.QueryMatcherEqual alone compares the texts after
// collapsing whitespace; it runs first for its message.
var ExactSQL = pgxmock.QueryMatcherFunc(func(want, got string) error {
	if err := pgxmock.QueryMatcherEqual.Match(want, got); err != nil {
		return err
	}
	if want != got {
		return fmt.Errorf("actual sql %q differs from expected %q in whitespace", got, want)
	}
	return nil
})

// NewConn returns a strict, ordered pgxmock connection whose
// expectations must all have been met when the test ends.
func NewConn(t *testing.T) pgxmock.PgxConnIface {
	t.Helper()
	mock, err := pgxmock.NewConn(pgxmock.QueryMatcherOption(ExactSQL))
	require.NoError(t, err)
	t.Cleanup(func() {
		require.NoError(t, mock.ExpectationsWereMet())
	})
	return mock
}

// Ptr points at a copy of v.
func Ptr[T any](v T) *T { return &v }

// JobRows are the columns of a job (sqlapi.JobColumns), without rows.
func JobRows() *pgxmock.Rows {
	return pgxmock.NewRows(strings.Split(sqlapi.JobColumns, ", "))
}

// AddJob adds a row for job id in the given status to rows; WantJob is the
// Job that scanning it must give.
func AddJob(rows *pgxmock.Rows, id int64, status jobtype.Status, attempts int32) *pgxmock.Rows {
	lease := Now.Add(30 * time.Second)
	failed := Now
	return rows.AddRow(id, "emails", []byte(`{"to":"a@b"}`), string(status), int32(0), attempts, attempts/2, (*int32)(nil),
		(*string)(nil), Now.Add(4*time.Second), &lease, Ptr("w1"), &Now, &failed, Ptr("boom"),
		[]byte(`[{"attempt":1,"counted":1,"at":"2025-03-04T05:06:07Z","error":"boom","worker":"w1","kind":"error"}]`),
		(*string)(nil), (*string)(nil), Now, (*time.Time)(nil))
}

// WantJob is the Job a row of addJob scans into. Comparing whole jobs
// matters with pgxmock: its QueryRow ignores Scan's error, so a column that
// failed to scan shows up only as a zero field.
func WantJob(id int64, status jobtype.Status, attempts int) jobtype.Job {
	return jobtype.Job{
		ID: id, Queue: "emails", Payload: []byte(`{"to":"a@b"}`), Status: status, Token: attempts, UncountedAttempts: attempts / 2,
		RunAt: Now.Add(4 * time.Second), LeaseUntil: Ptr(Now.Add(30 * time.Second)), LockedBy: "w1",
		LastAttemptedAt: Ptr(Now), LastFailedAt: Ptr(Now), LastError: "boom",
		Errors:    []jobtype.AttemptError{{Token: 1, AttemptNumber: 1, At: Now, Error: "boom", Worker: "w1", Kind: "error"}},
		CreatedAt: Now,
	}
}
