package ops

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/pashagolub/pgxmock/v3"
	"github.com/stretchr/testify/require"

	"github.com/pgbackoff/pgbackoff/client/internal/mockdb"
	"github.com/pgbackoff/pgbackoff/client/internal/sqlapi"
	"github.com/pgbackoff/pgbackoff/client/jobtype"
)

// These tests pin the SQL text, the arguments (values, types and order) and
// the error mapping of the operator's calls with pgxmock. What the SQL does
// is tested against PostgreSQL (the other tests of this package and the SQL
// tests).

var (
	mockNow = mockdb.Now
	jobRows = mockdb.JobRows
	addJob  = mockdb.AddJob
	wantJob = mockdb.WantJob
	ptr     = mockdb.Ptr[string]
)

func TestActionCallsSQL(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	mock := mockdb.NewConn(t)
	o := New(mock, WithClock(func() time.Time { return mockNow }))
	sel := "SELECT " + sqlapi.JobColumns + " FROM "

	mock.ExpectQuery(sel+"backoff.cancel(p_job_id => $1::bigint, p_reason => $2::text, p_now => $3::timestamptz)").
		WithArgs(int64(7), "obsolete", mockNow).WillReturnRows(addJob(jobRows(), 7, jobtype.StatusCancelled, 1))
	j, err := o.Cancel(ctx, 7, "obsolete")
	require.NoError(t, err)
	require.Equal(t, wantJob(7, jobtype.StatusCancelled, 1), j)

	mock.ExpectQuery(sel+"backoff.replay(p_job_id => $1::bigint, p_now => $2::timestamptz)").
		WithArgs(int64(7), mockNow).WillReturnRows(addJob(jobRows(), 7, jobtype.StatusPending, 0))
	j, err = o.Replay(ctx, 7)
	require.NoError(t, err)
	require.Equal(t, wantJob(7, jobtype.StatusPending, 0), j)

	mock.ExpectQuery("SELECT backoff.prune(p_older_than => $1::interval, p_limit => $2::integer, p_now => $3::timestamptz)").
		WithArgs(24*time.Hour, 500, mockNow).WillReturnRows(pgxmock.NewRows([]string{"prune"}).AddRow(int32(9)))
	n, err := o.Prune(ctx, 24*time.Hour, 500)
	require.NoError(t, err)
	require.Equal(t, 9, n)
	require.NoError(t, mock.ExpectationsWereMet())
}

func TestReadCallsSQL(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	mock := mockdb.NewConn(t)
	o := New(mock)

	// List calls backoff.list_jobs with every filter, NULL where unset,
	// and one row more than the page to know whether there is a next one.
	detailRows := func(ids ...int64) *pgxmock.Rows {
		rows := pgxmock.NewRows(append(strings.Split(sqlapi.JobColumns, ", "), "effective_policy", "effective_max_attempts", "errors", "schedule", "schedule_slot", "scan_end"))
		for _, id := range ids {
			lease := mockNow.Add(30 * time.Second)
			failed := mockNow
			rows.AddRow(id, "emails", []byte(`{"to":"a@b"}`), string(jobtype.StatusRetrying), int32(0), int32(2), int32(1), (*int32)(nil),
				(*string)(nil), mockNow.Add(4*time.Second), &lease, ptr("w1"), &mockNow, &failed, ptr("boom"),
				[]byte(`[{"attempt":1,"counted":1,"at":"2025-03-04T05:06:07Z","error":"boom","worker":"w1","kind":"error"}]`),
				(*string)(nil), (*string)(nil), mockNow, (*time.Time)(nil), "p", int32(5), []byte(`[]`), ptr("nightly"), &mockNow, false)
		}
		return rows
	}
	listed := ListParams{Queue: "emails", Statuses: []jobtype.Status{jobtype.StatusPending, jobtype.StatusRetrying},
		ErrorContains: "boom", Schedule: "nightly", Order: NewestFirst, Cursor: "9", Limit: 2}
	mock.ExpectQuery("SELECT "+sqlapi.JobColumns+", effective_policy, effective_max_attempts, errors, schedule, schedule_slot"+
		", scan_end FROM backoff.list_jobs(p_queue => $1::text, "+
		"p_statuses => $2::text[], p_policy => $3::text, p_dead_letter_reason => $4::text, p_error_contains => $5::text, "+
		"p_created_from => $6::timestamptz, p_created_to => $7::timestamptz, p_finished_from => $8::timestamptz, "+
		"p_finished_to => $9::timestamptz, p_schedule => $10::text, p_order => $11::text, p_after_id => $12::bigint, "+
		"p_after_completed_at => $13::timestamptz, p_limit => $14::integer, p_payloads => $15::boolean, "+
		"p_scan_limit => $16::integer)").
		WithArgs("emails", []string{"pending", "retrying"}, nil, nil, "boom", nil, nil, nil, nil, "nightly", "newest", int64(9), nil, 3, true, ErrorScanLimit).
		WillReturnRows(detailRows(8, 6, 5)).RowsWillBeClosed()
	page, err := o.List(ctx, listed)
	require.NoError(t, err)
	require.Len(t, page.Jobs, 2)
	require.Equal(t, "6", page.Next)
	require.Equal(t, JobDetail{Job: wantJob(8, jobtype.StatusRetrying, 2), EffectivePolicy: "p", EffectiveMaxAttempts: 5,
		ErrorsJSON: []byte(`[]`), Schedule: "nightly", ScheduleSlot: &mockNow}, page.Jobs[0])
	_, err = o.List(ctx, ListParams{Order: RecentlyFinishedFirst, Cursor: "7"})
	require.ErrorIs(t, err, sqlapi.ErrInvalidArgument, "a cursor of another order")

	// UpcomingFires calls backoff.upcoming_fires with the names, the count
	// and the time given (the clock's when zero, else NULL).
	mock.ExpectQuery("SELECT name, fire_at, wall_time FROM backoff.upcoming_fires(p_names => $1::text[], p_count => $2::integer, p_now => $3::timestamptz)").
		WithArgs([]string{"nightly"}, 3, mockNow).
		WillReturnRows(pgxmock.NewRows([]string{"name", "fire_at", "wall_time"}).
			AddRow("nightly", mockNow.Add(time.Hour), mockNow.Add(2*time.Hour)).
			AddRow("nightly", mockNow.Add(25*time.Hour), mockNow.Add(26*time.Hour))).RowsWillBeClosed()
	fires, err := o.UpcomingFires(ctx, []string{"nightly"}, mockNow, 3)
	require.NoError(t, err)
	require.Equal(t, map[string][]FireTime{"nightly": {{mockNow.Add(time.Hour), mockNow.Add(2 * time.Hour)},
		{mockNow.Add(25 * time.Hour), mockNow.Add(26 * time.Hour)}}}, fires)
	mock.ExpectQuery("SELECT name, fire_at, wall_time FROM backoff.upcoming_fires(p_names => $1::text[], p_count => $2::integer, p_now => $3::timestamptz)").
		WithArgs(nil, 0, nil).
		WillReturnError(&pgconn.PgError{Code: "22023", Message: `upcoming fires: count must be between 1 and 1000, got "0"`})
	_, err = o.UpcomingFires(ctx, nil, time.Time{}, 0)
	require.ErrorIs(t, err, sqlapi.ErrInvalidArgument)

	// Stats reads the SQL function backoff.stats: one source of truth.
	statsSQL := "SELECT queue, pending, running, expired, retrying, completed, dead_lettered, cancelled, " +
		"due, COALESCE(oldest_due_age, interval '0'), retries, dead_letters, paused, blocked FROM backoff.stats("
	statsCols := []string{"queue", "pending", "running", "expired", "retrying", "completed", "dead_lettered", "cancelled",
		"due", "coalesce", "retries", "dead_letters", "paused", "blocked"}
	mock.ExpectQuery(statsSQL+"p_window => $1::interval, p_now => $2::timestamptz)").WithArgs(15*time.Minute, nil).
		WillReturnRows(pgxmock.NewRows(statsCols).
			AddRow("emails", int64(1), int64(2), int64(1), int64(3), int64(4), int64(5), int64(6), int64(7), 90*time.Second, int64(8), int64(9), true, int64(2)).
			AddRow("sms", int64(0), int64(0), int64(0), int64(0), int64(1), int64(0), int64(0), int64(0), time.Duration(0), int64(0), int64(0), false, int64(0))).
		RowsWillBeClosed()
	stats, err := o.Stats(ctx, 15*time.Minute)
	require.NoError(t, err)
	require.Equal(t, []QueueStats{
		{Queue: "emails", Pending: 1, Running: 2, Expired: 1, Retrying: 3, Completed: 4, DeadLettered: 5, Cancelled: 6,
			Due: 7, OldestDueAge: 90 * time.Second, Retries: 8, DeadLetters: 9, Paused: true, Blocked: 2},
		{Queue: "sms", Completed: 1},
	}, stats)
	mock.ExpectQuery(statsSQL + "p_now => $1::timestamptz)").WithArgs(nil).
		WillReturnError(&pgconn.PgError{Code: "22023", Message: `window must not be negative, got "-1 seconds"`})
	_, err = o.Stats(ctx, 0)
	require.ErrorIs(t, err, sqlapi.ErrInvalidArgument)
	require.ErrorContains(t, err, "read job stats: ")
	require.NoError(t, mock.ExpectationsWereMet())
}
