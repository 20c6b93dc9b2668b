package client

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/stretchr/testify/require"
)

// These tests pin the SQL text, the arguments and the error mapping of the
// typed API with a strict query recorder (mockdb_test.go). What the SQL does is tested against PostgreSQL
// (integration_test.go and the SQL tests).

var mockNow = time.Date(2025, 3, 4, 5, 6, 7, 0, time.UTC)

func newMock(t *testing.T, opts ...Option) (*Client, *mockDB) {
	t.Helper()
	mock := newMockDB()
	t.Cleanup(func() {
		require.NoError(t, mock.ExpectationsWereMet())
	})
	mock.ExpectQuery("SELECT backoff.schema_version()").
		WillReturnRows(newRows([]string{"schema_version"}).AddRow(ptr(requiredSchema())))
	c, err := New(context.Background(), mock, append([]Option{WithWorkerID("w1")}, opts...)...)
	require.NoError(t, err)
	return c, mock
}

func ptr[T any](v T) *T { return &v }

func jobRows() *mockRows {
	return newRows(strings.Split(jobColumns, ", "))
}

// addJob adds a row for job id in the given status to rows.
func addJob(rows *mockRows, id int64, status Status, attempts int32) *mockRows {
	lease := mockNow.Add(30 * time.Second)
	failed := mockNow
	return rows.AddRow(id, "emails", []byte(`{"to":"a@b"}`), string(status), int32(0), attempts, (*int32)(nil),
		(*string)(nil), mockNow.Add(4*time.Second), &lease, ptr("w1"), &mockNow, &failed, ptr("boom"),
		[]byte(`[{"attempt":1,"at":"2025-03-04T05:06:07Z","error":"boom","worker":"w1","kind":"error"}]`),
		(*string)(nil), (*string)(nil), mockNow, (*time.Time)(nil))
}

func TestNewChecksSchemaVersion(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		set  func(*mockDB)
		want string
	}{
		{"older", func(m *mockDB) {
			m.ExpectQuery("SELECT backoff.schema_version()").
				WillReturnRows(newRows([]string{"v"}).AddRow(ptr(requiredSchema() - 1)))
		}, "is at version"},
		{"not installed", func(m *mockDB) {
			m.ExpectQuery("SELECT backoff.schema_version()").
				WillReturnError(&pgconn.PgError{Code: "3F000", Message: `schema "backoff" does not exist`})
		}, "not installed"},
		{"no function", func(m *mockDB) {
			m.ExpectQuery("SELECT backoff.schema_version()").
				WillReturnError(&pgconn.PgError{Code: "42883", Message: "function backoff.schema_version() does not exist"})
		}, "not installed"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			mock := newMockDB()
			tc.set(mock)
			_, err := New(context.Background(), mock)
			require.ErrorIs(t, err, ErrSchemaTooOld)
			require.ErrorContains(t, err, tc.want)
			require.ErrorContains(t, err, "backoffctl migrate up")
			require.NoError(t, mock.ExpectationsWereMet())
		})
	}
}

func TestNewAcceptsNewerSchema(t *testing.T) {
	t.Parallel()
	mock := newMockDB()
	mock.ExpectQuery("SELECT backoff.schema_version()").
		WillReturnRows(newRows([]string{"v"}).AddRow(ptr(requiredSchema() + 1)))
	_, err := New(context.Background(), mock)
	require.NoError(t, err)
}

func TestEnqueueSQL(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c, mock := newMock(t)
	runAt := mockNow.Add(time.Minute)
	mock.ExpectQuery("SELECT backoff.enqueue(p_queue => $1::text, p_payload => $2::jsonb, p_run_at => $3::timestamptz, "+
		"p_max_attempts => $4::integer, p_priority => $5::integer, p_dedupe_key => $6::text)").
		WithArgs("emails", `{"to":"a@b"}`, runAt, 3, 7, "k1").
		WillReturnRows(newRows([]string{"enqueue"}).AddRow(int64(42)))
	id, err := c.Enqueue(ctx, "emails", map[string]string{"to": "a@b"}, RunAt(runAt), MaxAttempts(3), Priority(7), DedupeKey("k1"))
	require.NoError(t, err)
	require.Equal(t, int64(42), id)

	// Defaults are NULLs (the function's defaults); a clock adds p_now.
	c2, mock2 := newMock(t, WithClock(func() time.Time { return mockNow }))
	mock2.ExpectQuery("SELECT backoff.enqueue(p_queue => $1::text, p_payload => $2::jsonb, p_run_at => $3::timestamptz, "+
		"p_max_attempts => $4::integer, p_priority => $5::integer, p_dedupe_key => $6::text, p_now => $7::timestamptz)").
		WithArgs("emails", `{}`, nil, nil, 0, nil, mockNow).
		WillReturnRows(newRows([]string{"enqueue"}).AddRow(int64(43)))
	id, err = c2.Enqueue(ctx, "emails", nil)
	require.NoError(t, err)
	require.Equal(t, int64(43), id)
}

func TestEnqueueManyIsOneStatement(t *testing.T) {
	t.Parallel()
	c, mock := newMock(t, WithClock(func() time.Time { return mockNow }))
	runAt := mockNow.Add(time.Hour)
	mock.ExpectQuery("SELECT id FROM backoff.enqueue(p_queues => $1::text[], p_payloads => $2::jsonb[], "+
		"p_run_ats => $3::timestamptz[], p_max_attempts => $4::integer[], p_priorities => $5::integer[], "+
		"p_dedupe_keys => $6::text[], p_now => $7::timestamptz) AS t(id)").
		WithArgs([]string{"a", "b"}, []string{`{"n":1}`, `{"n":2}`}, []*time.Time{nil, &runAt},
			[]*int32{ptr(int32(2)), nil}, []int32{0, 5}, []*string{nil, ptr("k")}, mockNow).
		WillReturnRows(newRows([]string{"enqueue"}).AddRow(int64(1)).AddRow(int64(2)))
	ids, err := c.EnqueueMany(context.Background(), []NewJob{
		{Queue: "a", Payload: map[string]int{"n": 1}, MaxAttempts: 2},
		{Queue: "b", Payload: []byte(`{"n":2}`), RunAt: runAt, Priority: 5, DedupeKey: "k"},
	})
	require.NoError(t, err)
	require.Equal(t, []int64{1, 2}, ids)
}

func TestSettleCallsSQL(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c, mock := newMock(t, WithClock(func() time.Time { return mockNow }))
	sel := "SELECT " + jobColumns + " FROM "

	mock.ExpectQuery(sel+"backoff.claim(p_queue => $1::text, p_worker => $2::text, p_limit => $3::integer, p_lease => $4::interval, p_now => $5::timestamptz)").
		WithArgs("emails", "w1", 10, 5*time.Second, mockNow).
		WillReturnRows(addJob(addJob(jobRows(), 1, StatusRunning, 1), 2, StatusRunning, 3))
	jobs, err := c.Claim(ctx, "emails", 10, 5*time.Second)
	require.NoError(t, err)
	require.Len(t, jobs, 2)
	require.Equal(t, int64(2), jobs[1].ID)
	require.Equal(t, 3, jobs[1].Attempt())
	require.Equal(t, "boom", jobs[0].LastError)
	require.Equal(t, "w1", jobs[0].LockedBy)
	require.Equal(t, "", jobs[0].Policy)
	require.Equal(t, []AttemptError{{Attempt: 1, At: mockNow, Error: "boom", Worker: "w1", Kind: "error"}}, jobs[0].Errors)
	var payload struct{ To string }
	require.NoError(t, jobs[0].UnmarshalPayload(&payload))
	require.Equal(t, "a@b", payload.To)

	mock.ExpectQuery(sel+"backoff.acquire(p_job_id => $1::bigint, p_worker => $2::text, p_lease => $3::interval, p_now => $4::timestamptz)").
		WithArgs(int64(7), "w1", nil, mockNow).WillReturnRows(addJob(jobRows(), 7, StatusRunning, 1))
	j, err := c.Acquire(ctx, 7, 0)
	require.NoError(t, err)
	require.Equal(t, StatusRunning, j.Status)

	mock.ExpectQuery(sel+"backoff.complete(p_job_id => $1::bigint, p_attempt => $2::integer, p_now => $3::timestamptz)").
		WithArgs(int64(7), 1, mockNow).WillReturnRows(addJob(jobRows(), 7, StatusCompleted, 1))
	_, err = c.Complete(ctx, 7, 1)
	require.NoError(t, err)

	mock.ExpectQuery("SELECT id FROM backoff.complete_many(p_job_ids => $1::bigint[], p_attempts => $2::integer[], p_now => $3::timestamptz) AS t(id)").
		WithArgs([]int64{1, 2}, []int32{1, 3}, mockNow).WillReturnRows(newRows([]string{"id"}).AddRow(int64(2)))
	done, err := c.CompleteMany(ctx, []int64{1, 2}, []int{1, 3})
	require.NoError(t, err)
	require.Equal(t, []int64{2}, done)
	_, err = c.CompleteMany(ctx, []int64{1}, nil)
	require.ErrorIs(t, err, ErrInvalidArgument)

	failSQL := sel + "backoff.fail(p_job_id => $1::bigint, p_attempt => $2::integer, p_error => $3::text, p_retry_in => $4::interval, p_retryable => $5::boolean, p_now => $6::timestamptz)"
	mock.ExpectQuery(failSQL).WithArgs(int64(7), 2, "boom", nil, true, mockNow).
		WillReturnRows(addJob(jobRows(), 7, StatusRetrying, 2))
	_, err = c.Fail(ctx, 7, 2, "boom")
	require.NoError(t, err)
	mock.ExpectQuery(failSQL).WithArgs(int64(7), 2, "slow down", 90*time.Second, true, mockNow).
		WillReturnRows(addJob(jobRows(), 7, StatusRetrying, 2))
	_, err = c.Fail(ctx, 7, 2, "slow down", WithRetryIn(90*time.Second))
	require.NoError(t, err)
	mock.ExpectQuery(failSQL).WithArgs(int64(7), 2, "bad input", nil, false, mockNow).
		WillReturnRows(addJob(jobRows(), 7, StatusDeadLettered, 2))
	_, err = c.Fail(ctx, 7, 2, "bad input", NonRetryable())
	require.NoError(t, err)

	mock.ExpectQuery("SELECT backoff.heartbeat(p_job_id => $1::bigint, p_attempt => $2::integer, p_extend => $3::interval, p_now => $4::timestamptz)").
		WithArgs(int64(7), 2, time.Minute, mockNow).
		WillReturnRows(newRows([]string{"heartbeat"}).AddRow(mockNow.Add(time.Minute)))
	until, err := c.Heartbeat(ctx, 7, 2, time.Minute)
	require.NoError(t, err)
	require.Equal(t, mockNow.Add(time.Minute), until)

	mock.ExpectQuery(sel+"backoff.snooze(p_job_id => $1::bigint, p_attempt => $2::integer, p_delay => $3::interval, p_now => $4::timestamptz)").
		WithArgs(int64(7), 2, 10*time.Second, mockNow).WillReturnRows(addJob(jobRows(), 7, StatusPending, 1))
	_, err = c.Snooze(ctx, 7, 2, 10*time.Second)
	require.NoError(t, err)

	mock.ExpectQuery(sel+"backoff.cancel(p_job_id => $1::bigint, p_reason => $2::text, p_now => $3::timestamptz)").
		WithArgs(int64(7), "obsolete", mockNow).WillReturnRows(addJob(jobRows(), 7, StatusCancelled, 1))
	_, err = c.Cancel(ctx, 7, "obsolete")
	require.NoError(t, err)

	mock.ExpectQuery(sel+"backoff.replay(p_job_id => $1::bigint, p_now => $2::timestamptz)").
		WithArgs(int64(7), mockNow).WillReturnRows(addJob(jobRows(), 7, StatusPending, 0))
	_, err = c.Replay(ctx, 7)
	require.NoError(t, err)

	mock.ExpectQuery("SELECT backoff.reap(p_now => $1::timestamptz)").WithArgs(mockNow).
		WillReturnRows(newRows([]string{"reap"}).AddRow(int32(3)))
	n, err := c.Reap(ctx, 0)
	require.NoError(t, err)
	require.Equal(t, 3, n)

	mock.ExpectQuery("SELECT backoff.prune(p_older_than => $1::interval, p_limit => $2::integer, p_now => $3::timestamptz)").
		WithArgs(24*time.Hour, 500, mockNow).WillReturnRows(newRows([]string{"prune"}).AddRow(int32(9)))
	n, err = c.Prune(ctx, 24*time.Hour, 500)
	require.NoError(t, err)
	require.Equal(t, 9, n)
}

func TestWithRunsOnAnotherDB(t *testing.T) {
	t.Parallel()
	c, _ := newMock(t)
	tx := newMockDB() // stands for a pgx.Tx: no schema check on it
	tx.ExpectQuery("SELECT backoff.enqueue(p_queue => $1::text, p_payload => $2::jsonb, p_run_at => $3::timestamptz, "+
		"p_max_attempts => $4::integer, p_priority => $5::integer, p_dedupe_key => $6::text)").
		WithArgs("emails", `{}`, nil, nil, 0, nil).
		WillReturnRows(newRows([]string{"enqueue"}).AddRow(int64(5)))
	_, err := c.With(tx).Enqueue(context.Background(), "emails", nil)
	require.NoError(t, err)
	require.NoError(t, tx.ExpectationsWereMet())
}

// TestErrorMapping: every documented SQLSTATE becomes its sentinel, keeps
// the server's error reachable and names the operation.
func TestErrorMapping(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		code string
		want error
	}{
		{"22023", ErrInvalidArgument},
		{"BK001", ErrJobNotFound},
		{"BK002", ErrStaleAttempt},
		{"BK003", ErrInvalidTransition},
		{"BK004", ErrNotReady},
	} {
		t.Run(tc.code, func(t *testing.T) {
			t.Parallel()
			c, mock := newMock(t)
			pgErr := &pgconn.PgError{Code: tc.code, Message: "job 9: something"}
			mock.ExpectQuery("SELECT "+jobColumns+" FROM backoff.complete(p_job_id => $1::bigint, p_attempt => $2::integer)").
				WithArgs(int64(9), 2).WillReturnError(pgErr)
			_, err := c.Complete(context.Background(), 9, 2)
			require.ErrorIs(t, err, tc.want)
			for _, other := range []error{ErrInvalidArgument, ErrJobNotFound, ErrStaleAttempt, ErrInvalidTransition, ErrNotReady} {
				if other != tc.want {
					require.NotErrorIs(t, err, other)
				}
			}
			var got *pgconn.PgError
			require.ErrorAs(t, err, &got)
			require.Equal(t, tc.code, got.Code)
			require.True(t, strings.HasPrefix(err.Error(), "complete job 9 (attempt 2): "), err.Error())
		})
	}
	t.Run("claim names the queue", func(t *testing.T) {
		t.Parallel()
		c, mock := newMock(t)
		mock.ExpectQuery("SELECT "+jobColumns+" FROM backoff.claim(p_queue => $1::text, p_worker => $2::text, p_limit => $3::integer, p_lease => $4::interval)").
			WithArgs("emails", "w1", 0, nil).
			WillReturnError(&pgconn.PgError{Code: "22023", Message: `limit must be at least 1, got "0"`})
		_, err := c.Claim(context.Background(), "emails", 0, 0)
		require.ErrorIs(t, err, ErrInvalidArgument)
		require.ErrorContains(t, err, `claim jobs in "emails": `)
	})
	t.Run("other errors pass through", func(t *testing.T) {
		t.Parallel()
		c, mock := newMock(t)
		boom := errors.New("connection reset")
		mock.ExpectQuery("SELECT backoff.reap()").WillReturnError(boom)
		_, err := c.Reap(context.Background(), 0)
		require.ErrorIs(t, err, boom)
		require.NotErrorIs(t, err, ErrJobNotFound)
	})
	t.Run("get of a missing id", func(t *testing.T) {
		t.Parallel()
		c, mock := newMock(t)
		mock.ExpectQuery("SELECT " + jobColumns + " FROM backoff.jobs WHERE id = $1").WithArgs(int64(1)).
			WillReturnError(pgx.ErrNoRows)
		_, err := c.Get(context.Background(), 1)
		require.ErrorIs(t, err, ErrJobNotFound)
	})
}

func TestNotReadyErrorCarriesRetryAtAndAttempts(t *testing.T) {
	t.Parallel()
	runAt := time.Date(2025, 3, 4, 5, 6, 7, 123456000, time.UTC)
	for _, tc := range []struct{ name, msg, detail string }{
		{"detail is the timestamp", `job 9 is not ready until 2025-03-04 05:06:07.123456+00 (2 attempts so far)`, "2025-03-04T05:06:07.123456+00:00"},
		{"as backoff.acquire raises it", `job "9" is not ready until "2025-03-04T05:06:07.123456Z" (attempts "2")`, "2025-03-04T05:06:07.123456Z"},
		{"detail as key=value", `job 9 not ready`, "run_at=2025-03-04T05:06:07.123456Z attempts=2"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			c, mock := newMock(t)
			mock.ExpectQuery("SELECT "+jobColumns+" FROM backoff.acquire(p_job_id => $1::bigint, p_worker => $2::text, p_lease => $3::interval)").
				WithArgs(int64(9), "w1", nil).
				WillReturnError(&pgconn.PgError{Code: "BK004", Message: tc.msg, Detail: tc.detail})
			_, err := c.Acquire(context.Background(), 9, 0)
			var nr *NotReadyError
			require.ErrorAs(t, err, &nr)
			require.ErrorIs(t, err, ErrNotReady)
			require.True(t, runAt.Equal(nr.RetryAt), "RetryAt %s", nr.RetryAt)
			require.Equal(t, 2, nr.Attempts)
			require.Equal(t, int64(9), nr.JobID)
			require.ErrorContains(t, err, "acquire job 9: ")
		})
	}
}
