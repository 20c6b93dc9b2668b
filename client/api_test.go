package client

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/pashagolub/pgxmock/v3"
	"github.com/stretchr/testify/require"

	"github.com/pgbackoff/pgbackoff/client/internal/mockdb"
)

// These tests pin the SQL text, the arguments (values, types and order) and
// the error mapping of the typed API with pgxmock. What the SQL does is
// tested against PostgreSQL (integration_test.go and the SQL tests).

// The harness (client/internal/mockdb), under the names these tests use.
var (
	mockNow     = mockdb.Now
	newMockConn = mockdb.NewConn
	jobRows     = mockdb.JobRows
	addJob      = mockdb.AddJob
	wantJob     = mockdb.WantJob
)

// newMock returns a client over a mock on which New's schema check has
// already run.
func newMock(t *testing.T, opts ...Option) (*Client, pgxmock.PgxConnIface) {
	t.Helper()
	mock := newMockConn(t)
	mock.ExpectQuery("SELECT backoff.schema_version()").WithArgs().
		WillReturnRows(pgxmock.NewRows([]string{"schema_version"}).AddRow(ptr(requiredSchema)))
	c, err := New(context.Background(), mock, append([]Option{WithWorkerID("w1")}, opts...)...)
	require.NoError(t, err)
	require.NoError(t, mock.ExpectationsWereMet())
	return c, mock
}

func ptr[T any](v T) *T { return &v }

func TestNewChecksSchemaVersion(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		set  func(pgxmock.PgxConnIface)
		want string
	}{
		{"older", func(m pgxmock.PgxConnIface) {
			m.ExpectQuery("SELECT backoff.schema_version()").
				WillReturnRows(pgxmock.NewRows([]string{"v"}).AddRow(ptr(requiredSchema - 1)))
		}, fmt.Sprintf("the database is at version %d, this client needs %d", requiredSchema-1, requiredSchema)},
		{"no version recorded", func(m pgxmock.PgxConnIface) {
			m.ExpectQuery("SELECT backoff.schema_version()").
				WillReturnRows(pgxmock.NewRows([]string{"v"}).AddRow((*int32)(nil)))
		}, "the database is at version 0"},
		{"not installed", func(m pgxmock.PgxConnIface) {
			m.ExpectQuery("SELECT backoff.schema_version()").
				WillReturnError(&pgconn.PgError{Code: "3F000", Message: `schema "backoff" does not exist`})
		}, "not installed"},
		{"no function", func(m pgxmock.PgxConnIface) {
			m.ExpectQuery("SELECT backoff.schema_version()").
				WillReturnError(&pgconn.PgError{Code: "42883", Message: "function backoff.schema_version() does not exist"})
		}, "not installed"},
		{"partly installed", func(m pgxmock.PgxConnIface) {
			m.ExpectQuery("SELECT backoff.schema_version()").
				WillReturnError(&pgconn.PgError{Code: "42P01", Message: `relation "backoff.schema_migrations" does not exist`})
		}, "not installed"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			mock := newMockConn(t)
			tc.set(mock)
			_, err := New(context.Background(), mock)
			require.ErrorIs(t, err, ErrSchemaTooOld)
			require.ErrorContains(t, err, tc.want)
			require.ErrorContains(t, err, "backoffctl migrate up")
			require.NoError(t, mock.ExpectationsWereMet())
		})
	}
	t.Run("other errors are not a schema verdict", func(t *testing.T) {
		t.Parallel()
		mock := newMockConn(t)
		boom := errors.New("connection refused")
		mock.ExpectQuery("SELECT backoff.schema_version()").WillReturnError(boom)
		_, err := New(context.Background(), mock)
		require.ErrorIs(t, err, boom)
		require.NotErrorIs(t, err, ErrSchemaTooOld)
		require.ErrorContains(t, err, "check pgbackoff schema: ")
		require.NoError(t, mock.ExpectationsWereMet())
	})
}

func TestNewAcceptsNewerSchema(t *testing.T) {
	t.Parallel()
	for _, v := range []int32{requiredSchema, requiredSchema + 1} {
		mock := newMockConn(t)
		mock.ExpectQuery("SELECT backoff.schema_version()").
			WillReturnRows(pgxmock.NewRows([]string{"v"}).AddRow(ptr(v)))
		_, err := New(context.Background(), mock)
		require.NoError(t, err, "version %d", v)
		require.NoError(t, mock.ExpectationsWereMet())
	}
}

const enqueueSQL = "SELECT backoff.enqueue(p_queue => $1::text, p_payload => $2::jsonb, p_run_at => $3::timestamptz, " +
	"p_max_attempts => $4::integer, p_priority => $5::integer, p_dedupe_key => $6::text, p_policy => $7::text"

func TestEnqueueSQL(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c, mock := newMock(t)
	runAt := mockNow.Add(time.Minute)
	mock.ExpectQuery(enqueueSQL+", p_now => $8::timestamptz)").
		WithArgs("emails", `{"to":"a@b"}`, runAt, 3, 7, "k1", "slow", nil).
		WillReturnRows(pgxmock.NewRows([]string{"enqueue"}).AddRow(int64(42)))
	id, err := c.Enqueue(ctx, "emails", map[string]string{"to": "a@b"},
		RunAt(runAt), MaxAttempts(3), Priority(7), DedupeKey("k1"), UsePolicy("slow"))
	require.NoError(t, err)
	require.Equal(t, int64(42), id)
	require.NoError(t, mock.ExpectationsWereMet())

	// Defaults are NULLs (the function's defaults); p_now is NULL without a
	// clock (the database's now()) and the clock's time with one: the same
	// SQL text either way.
	c2, mock2 := newMock(t, WithClock(func() time.Time { return mockNow }))
	mock2.ExpectQuery(enqueueSQL+", p_now => $8::timestamptz)").
		WithArgs("emails", `{}`, nil, nil, 0, nil, nil, mockNow).
		WillReturnRows(pgxmock.NewRows([]string{"enqueue"}).AddRow(int64(43)))
	id, err = c2.Enqueue(ctx, "emails", nil)
	require.NoError(t, err)
	require.Equal(t, int64(43), id)

	// Raw JSON goes as it is.
	mock2.ExpectQuery(enqueueSQL+", p_now => $8::timestamptz)").
		WithArgs("emails", `{"raw": true}`, nil, nil, 0, nil, "slow", mockNow).
		WillReturnRows(pgxmock.NewRows([]string{"enqueue"}).AddRow(int64(44)))
	id, err = c2.Enqueue(ctx, "emails", []byte(`{"raw": true}`), UsePolicy("slow"))
	require.NoError(t, err)
	require.Equal(t, int64(44), id)

	// An unknown policy is the database's 22023.
	mock2.ExpectQuery(enqueueSQL+", p_now => $8::timestamptz)").
		WithArgs("emails", `{}`, nil, nil, 0, nil, "nope", mockNow).
		WillReturnError(&pgconn.PgError{Code: "22023", Message: `unknown policy "nope"`})
	_, err = c2.Enqueue(ctx, "emails", nil, UsePolicy("nope"))
	require.ErrorIs(t, err, ErrInvalidArgument)
	require.ErrorContains(t, err, `enqueue job in "emails": `)
	require.ErrorContains(t, err, `unknown policy "nope"`)

	// A queue the login is not granted (backoff.grant_queue) is 42501.
	mock2.ExpectQuery(enqueueSQL+", p_now => $8::timestamptz)").
		WithArgs("billing", `{}`, nil, nil, 0, nil, nil, mockNow).
		WillReturnError(&pgconn.PgError{Code: "42501", Message: `permission denied: role "mailer" may not produce into queue "billing"`})
	_, err = c2.Enqueue(ctx, "billing", nil)
	require.ErrorIs(t, err, ErrPermissionDenied)
	require.ErrorContains(t, err, `queue "billing"`)

	// A queue moving away from the shard is 55006; not on a pool (here a
	// connection or transaction), the client does not try again.
	mock2.ExpectQuery(enqueueSQL+", p_now => $8::timestamptz)").
		WithArgs("billing", `{}`, nil, nil, 0, nil, nil, mockNow).
		WillReturnError(&pgconn.PgError{Code: "55006", Message: `queue "billing" is moving to shard 2: enqueue again`})
	_, err = c2.Enqueue(ctx, "billing", nil)
	require.ErrorIs(t, err, ErrQueueMoving)

	// A payload that cannot be encoded never reaches the database.
	_, err = c2.Enqueue(ctx, "emails", func() {})
	require.ErrorContains(t, err, `enqueue job in "emails": encode payload: `)
	require.NoError(t, mock2.ExpectationsWereMet())
}

func TestEnqueueManyIsOneStatement(t *testing.T) {
	t.Parallel()
	c, mock := newMock(t, WithClock(func() time.Time { return mockNow }))
	runAt := mockNow.Add(time.Hour)
	mock.ExpectQuery("SELECT id FROM backoff.enqueue(p_queues => $1::text[], p_payloads => $2::jsonb[], "+
		"p_run_ats => $3::timestamptz[], p_max_attempts => $4::integer[], p_priorities => $5::integer[], "+
		"p_dedupe_keys => $6::text[], p_policies => $7::text[], p_now => $8::timestamptz) AS t(id)").
		WithArgs([]string{"a", "b"}, []string{`{"n":1}`, `{"n":2}`}, []*time.Time{nil, &runAt},
			[]*int32{ptr(int32(2)), nil}, []int32{0, 5}, []*string{nil, ptr("k")}, []*string{ptr("slow"), nil}, mockNow).
		WillReturnRows(pgxmock.NewRows([]string{"enqueue"}).AddRow(int64(1)).AddRow(int64(2))).
		RowsWillBeClosed()
	ids, err := c.EnqueueMany(context.Background(), []NewJob{
		{Queue: "a", Payload: map[string]int{"n": 1}, MaxAttempts: 2, Policy: "slow"},
		{Queue: "b", Payload: []byte(`{"n":2}`), RunAt: runAt, Priority: 5, DedupeKey: "k"},
	})
	require.NoError(t, err)
	require.Equal(t, []int64{1, 2}, ids)

	// Without a clock p_now is NULL, in the same SQL text; a column no job
	// sets is a NULL array; an empty batch sends nothing.
	c2, mock2 := newMock(t)
	mock2.ExpectQuery("SELECT id FROM backoff.enqueue(p_queues => $1::text[], p_payloads => $2::jsonb[], "+
		"p_run_ats => $3::timestamptz[], p_max_attempts => $4::integer[], p_priorities => $5::integer[], "+
		"p_dedupe_keys => $6::text[], p_policies => $7::text[], p_now => $8::timestamptz) AS t(id)").
		WithArgs([]string{"a"}, []string{`{}`}, []*time.Time(nil), []*int32(nil), []int32(nil), []*string(nil), []*string{ptr("nope")}, nil).
		WillReturnError(&pgconn.PgError{Code: "22023", Message: `unknown policy "nope"`})
	_, err = c2.EnqueueMany(context.Background(), []NewJob{{Queue: "a", Policy: "nope"}})
	require.ErrorIs(t, err, ErrInvalidArgument)
	require.ErrorContains(t, err, "enqueue 1 jobs: ")
	ids, err = c2.EnqueueMany(context.Background(), nil)
	require.NoError(t, err)
	require.Empty(t, ids)
}

func TestSettleCallsSQL(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c, mock := newMock(t, WithClock(func() time.Time { return mockNow }))
	sel := "SELECT " + jobColumns + " FROM "

	mock.ExpectQuery(sel+"backoff.claim(p_queue => $1::text, p_worker => $2::text, p_limit => $3::integer, p_lease => $4::interval, p_now => $5::timestamptz)").
		WithArgs("emails", "w1", 10, 5*time.Second, mockNow).
		WillReturnRows(addJob(addJob(jobRows(), 1, StatusRunning, 1), 2, StatusRunning, 3)).
		RowsWillBeClosed()
	jobs, err := c.Claim(ctx, "emails", 10, 5*time.Second)
	require.NoError(t, err)
	require.Equal(t, []Job{wantJob(1, StatusRunning, 1), wantJob(2, StatusRunning, 3)}, jobs)
	require.Equal(t, int64(2), jobs[1].ID)
	require.Equal(t, 3, jobs[1].Token)
	require.Equal(t, "boom", jobs[0].LastError)
	require.Equal(t, "w1", jobs[0].LockedBy)
	require.Equal(t, "", jobs[0].Policy)
	require.Equal(t, []AttemptError{{Token: 1, AttemptNumber: 1, At: mockNow, Error: "boom", Worker: "w1", Kind: "error"}}, jobs[0].Errors)
	var payload struct{ To string }
	require.NoError(t, jobs[0].UnmarshalPayload(&payload))
	require.Equal(t, "a@b", payload.To)

	mock.ExpectQuery(sel+"backoff.acquire(p_job_id => $1::bigint, p_worker => $2::text, p_lease => $3::interval, p_now => $4::timestamptz)").
		WithArgs(int64(7), "w1", nil, mockNow).WillReturnRows(addJob(jobRows(), 7, StatusRunning, 1))
	j, err := c.Acquire(ctx, 7, 0)
	require.NoError(t, err)
	require.Equal(t, wantJob(7, StatusRunning, 1), j)

	mock.ExpectQuery(sel+"backoff.complete(p_job_id => $1::bigint, p_attempt => $2::integer, p_now => $3::timestamptz)").
		WithArgs(int64(7), 1, mockNow).WillReturnRows(addJob(jobRows(), 7, StatusCompleted, 1))
	j, err = c.Complete(ctx, 7, 1)
	require.NoError(t, err)
	require.Equal(t, wantJob(7, StatusCompleted, 1), j)

	mock.ExpectQuery("SELECT id FROM backoff.complete_many(p_job_ids => $1::bigint[], p_attempts => $2::integer[], p_now => $3::timestamptz) AS t(id)").
		WithArgs([]int64{1, 2}, []int32{1, 3}, mockNow).WillReturnRows(pgxmock.NewRows([]string{"id"}).AddRow(int64(2))).
		RowsWillBeClosed()
	done, err := c.CompleteMany(ctx, []int64{1, 2}, []int{1, 3})
	require.NoError(t, err)
	require.Equal(t, []int64{2}, done)
	_, err = c.CompleteMany(ctx, []int64{1}, nil)
	require.ErrorIs(t, err, ErrInvalidArgument)

	failSQL := sel + "backoff.fail(p_job_id => $1::bigint, p_attempt => $2::integer, p_error => $3::text, p_retry_in => $4::interval, p_retryable => $5::boolean, p_now => $6::timestamptz)"
	mock.ExpectQuery(failSQL).WithArgs(int64(7), 2, "boom", nil, true, mockNow).
		WillReturnRows(addJob(jobRows(), 7, StatusRetrying, 2))
	j, err = c.Fail(ctx, 7, 2, "boom")
	require.NoError(t, err)
	require.Equal(t, wantJob(7, StatusRetrying, 2), j)
	mock.ExpectQuery(failSQL).WithArgs(int64(7), 2, "slow down", 90*time.Second, true, mockNow).
		WillReturnRows(addJob(jobRows(), 7, StatusRetrying, 2))
	j, err = c.Fail(ctx, 7, 2, "slow down", RetryIn(90*time.Second))
	require.NoError(t, err)
	require.Equal(t, wantJob(7, StatusRetrying, 2), j)
	mock.ExpectQuery(failSQL).WithArgs(int64(7), 2, "bad input", nil, false, mockNow).
		WillReturnRows(addJob(jobRows(), 7, StatusDeadLettered, 2))
	j, err = c.Fail(ctx, 7, 2, "bad input", NonRetryable())
	require.NoError(t, err)
	require.Equal(t, wantJob(7, StatusDeadLettered, 2), j)

	mock.ExpectQuery("SELECT backoff.heartbeat(p_job_id => $1::bigint, p_attempt => $2::integer, p_extend => $3::interval, p_now => $4::timestamptz)").
		WithArgs(int64(7), 2, time.Minute, mockNow).
		WillReturnRows(pgxmock.NewRows([]string{"heartbeat"}).AddRow(mockNow.Add(time.Minute)))
	until, err := c.Heartbeat(ctx, 7, 2, time.Minute)
	require.NoError(t, err)
	require.Equal(t, mockNow.Add(time.Minute), until)

	mock.ExpectQuery(sel+"backoff.snooze(p_job_id => $1::bigint, p_attempt => $2::integer, p_delay => $3::interval, p_now => $4::timestamptz)").
		WithArgs(int64(7), 2, 10*time.Second, mockNow).WillReturnRows(addJob(jobRows(), 7, StatusPending, 1))
	j, err = c.Snooze(ctx, 7, 2, 10*time.Second)
	require.NoError(t, err)
	require.Equal(t, wantJob(7, StatusPending, 1), j)

	mock.ExpectQuery("SELECT backoff.reap(p_now => $1::timestamptz)").WithArgs(mockNow).
		WillReturnRows(pgxmock.NewRows([]string{"reap"}).AddRow(int32(3)))
	n, err := c.Reap(ctx, 0)
	require.NoError(t, err)
	require.Equal(t, 3, n)

	require.NoError(t, mock.ExpectationsWereMet())
}

func TestReadCallsSQL(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c, mock := newMock(t)

	mock.ExpectQuery("SELECT " + jobColumns + " FROM backoff.job($1)").WithArgs(int64(7)).
		WillReturnRows(addJob(jobRows(), 7, StatusRetrying, 2))
	j, err := c.Get(ctx, 7)
	require.NoError(t, err)
	require.Equal(t, wantJob(7, StatusRetrying, 2), j)

	require.NoError(t, mock.ExpectationsWereMet())
}

// TestWithRunsOnAnotherDB: With(tx) sends the calls to the transaction,
// without another schema check.
func TestWithRunsOnAnotherDB(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c, _ := newMock(t)
	db := newMockConn(t)
	db.ExpectBegin()
	db.ExpectQuery(enqueueSQL+", p_now => $8::timestamptz)").
		WithArgs("emails", `{}`, nil, nil, 0, nil, nil, nil).
		WillReturnRows(pgxmock.NewRows([]string{"enqueue"}).AddRow(int64(5)))
	db.ExpectCommit()
	tx, err := db.Begin(ctx)
	require.NoError(t, err)
	id, err := c.With(tx).Enqueue(ctx, "emails", nil)
	require.NoError(t, err)
	require.Equal(t, int64(5), id)
	require.NoError(t, tx.Commit(ctx))
	require.NoError(t, db.ExpectationsWereMet())
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
			mock.ExpectQuery("SELECT "+jobColumns+" FROM backoff.complete(p_job_id => $1::bigint, p_attempt => $2::integer, p_now => $3::timestamptz)").
				WithArgs(int64(9), 2, nil).WillReturnError(pgErr)
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
			require.True(t, strings.HasPrefix(err.Error(), "complete job 9 (token 2): "), err.Error())
			require.NoError(t, mock.ExpectationsWereMet())
		})
	}
	t.Run("claim names the queue", func(t *testing.T) {
		t.Parallel()
		c, mock := newMock(t)
		mock.ExpectQuery("SELECT "+jobColumns+" FROM backoff.claim(p_queue => $1::text, p_worker => $2::text, p_limit => $3::integer, p_lease => $4::interval, p_now => $5::timestamptz)").
			WithArgs("emails", "w1", 0, nil, nil).
			WillReturnError(&pgconn.PgError{Code: "22023", Message: `limit must be at least 1, got "0"`})
		_, err := c.Claim(context.Background(), "emails", 0, 0)
		require.ErrorIs(t, err, ErrInvalidArgument)
		require.ErrorContains(t, err, `claim jobs in "emails": `)
		require.NoError(t, mock.ExpectationsWereMet())
	})
	t.Run("other errors pass through", func(t *testing.T) {
		t.Parallel()
		c, mock := newMock(t)
		boom := errors.New("connection reset")
		mock.ExpectQuery("SELECT backoff.reap(p_now => $1::timestamptz)").WithArgs(nil).WillReturnError(boom)
		_, err := c.Reap(context.Background(), 0)
		require.ErrorIs(t, err, boom)
		require.Equal(t, "reap expired leases: connection reset", err.Error(), "unchanged, prefixed with the operation")
		for _, sentinel := range []error{ErrInvalidArgument, ErrJobNotFound, ErrStaleAttempt, ErrInvalidTransition, ErrNotReady} {
			require.NotErrorIs(t, err, sentinel)
		}
		require.NoError(t, mock.ExpectationsWereMet())
	})
	t.Run("other SQLSTATEs pass through", func(t *testing.T) {
		t.Parallel()
		c, mock := newMock(t)
		pgErr := &pgconn.PgError{Code: "40001", Message: "could not serialize access"}
		mock.ExpectQuery("SELECT backoff.reap(p_limit => $1::integer, p_now => $2::timestamptz)").WithArgs(50, nil).WillReturnError(pgErr)
		_, err := c.Reap(context.Background(), 50)
		var got *pgconn.PgError
		require.ErrorAs(t, err, &got)
		require.Same(t, pgErr, got)
		require.ErrorContains(t, err, "reap expired leases: ")
		for _, sentinel := range []error{ErrInvalidArgument, ErrJobNotFound, ErrStaleAttempt, ErrInvalidTransition, ErrNotReady} {
			require.NotErrorIs(t, err, sentinel)
		}
		require.NoError(t, mock.ExpectationsWereMet())
	})
	t.Run("get of a missing id", func(t *testing.T) {
		t.Parallel()
		c, mock := newMock(t)
		mock.ExpectQuery("SELECT " + jobColumns + " FROM backoff.job($1)").WithArgs(int64(1)).
			WillReturnRows(jobRows()) // no row
		_, err := c.Get(context.Background(), 1)
		require.ErrorIs(t, err, ErrJobNotFound)
		require.ErrorContains(t, err, "get job 1: ")
		require.NoError(t, mock.ExpectationsWereMet())
	})
}

func TestNotReadyErrorCarriesRetryAtAndToken(t *testing.T) {
	t.Parallel()
	runAt := time.Date(2025, 3, 4, 5, 6, 7, 123456000, time.UTC)
	for _, tc := range []struct {
		name, msg, detail, hint string
		retryAt                 time.Time
		attempts                int
	}{
		{"as backoff.acquire raises it", `job "9" is not ready until "2025-03-04T05:06:07.123456Z" (attempts "2")`,
			"2025-03-04T05:06:07.123456Z", "attempts=2", runAt, 2},
		{"the message is not parsed", `job "9" is not ready until "2099-01-01T00:00:00.000000Z" (attempts "7")`,
			"2025-03-04T05:06:07.123456Z", "attempts=2", runAt, 2},
		{"only the documented layout", `job 9 not ready`, "2025-03-04 05:06:07.123456+00", "2 attempts", time.Time{}, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			c, mock := newMock(t)
			mock.ExpectQuery("SELECT "+jobColumns+" FROM backoff.acquire(p_job_id => $1::bigint, p_worker => $2::text, p_lease => $3::interval, p_now => $4::timestamptz)").
				WithArgs(int64(9), "w1", nil, nil).
				WillReturnError(&pgconn.PgError{Code: "BK004", Message: tc.msg, Detail: tc.detail, Hint: tc.hint})
			_, err := c.Acquire(context.Background(), 9, 0)
			var nr *NotReadyError
			require.ErrorAs(t, err, &nr)
			require.ErrorIs(t, err, ErrNotReady)
			require.True(t, tc.retryAt.Equal(nr.RetryAt), "RetryAt %s", nr.RetryAt)
			require.Equal(t, tc.attempts, nr.Token)
			require.Equal(t, int64(9), nr.JobID)
			require.ErrorContains(t, err, "acquire job 9: ")
			var pgErr *pgconn.PgError
			require.ErrorAs(t, err, &pgErr)
			require.Equal(t, "BK004", pgErr.Code)
			require.NoError(t, mock.ExpectationsWereMet())
		})
	}
}
