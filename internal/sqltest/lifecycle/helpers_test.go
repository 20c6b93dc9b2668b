package lifecycle_test

import (
	"context"
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/pgbackoff/pgbackoff/internal/testdb"
)

func TestMain(m *testing.M) { testdb.Main(m) }

// t0 is the start of every scenario's clock; tests pass p_now explicitly.
var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func at(d time.Duration) time.Time { return t0.Add(d) }

// querier is what the helpers need: a pool, a connection or a transaction.
type querier interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// newDB returns a pool on a fresh migrated database whose sessions have an
// empty search_path, which proves that every reference in the functions is
// schema-qualified.
func newDB(t testing.TB) *pgxpool.Pool {
	t.Helper()
	return poolOn(t, testdb.NewURL(t))
}

func poolOn(t testing.TB, url string) *pgxpool.Pool {
	t.Helper()
	return testdb.QualifiedPool(t, sqlWorkerURL(url), 24)
}

// connOn opens one dedicated connection (for interleavings and LISTEN).
func connOn(t testing.TB, url string) *pgx.Conn {
	t.Helper()
	return connAtDefault(t, sqlWorkerURL(url))
}

// connAtDefault is connOn whose session starts at the database's default
// level in every run, for the tests of that default.
func connAtDefault(t testing.TB, url string) *pgx.Conn {
	t.Helper()
	cfg, err := pgx.ParseConfig(url)
	require.NoError(t, err)
	cfg.RuntimeParams["search_path"] = ""
	conn, err := pgx.ConnectConfig(context.Background(), cfg)
	require.NoError(t, err)
	t.Cleanup(func() { conn.Close(context.Background()) })
	return conn
}

// historyEntry is one element of backoff.jobs.errors.
type historyEntry struct {
	Attempt int     `json:"attempt"` // the fencing token of the failed attempt
	Counted *int    `json:"counted"` // its counted attempt (absent before migration 004)
	At      string  `json:"at"`
	Error   string  `json:"error"`
	Worker  *string `json:"worker"`
	Kind    string  `json:"kind"`
	Started *string `json:"started"` // when the failed attempt was claimed (absent before migration 005)
	Role    *string `json:"role"`    // the role of an operator's replay or cancel
}

// failures is the history without an operator's entries (replayed,
// cancelled): one entry per failed attempt.
func failures(h []historyEntry) []historyEntry {
	out := []historyEntry{}
	for _, e := range h {
		if e.Kind != "replayed" && e.Kind != "cancelled" {
			out = append(out, e)
		}
	}
	return out
}

// job is a backoff.jobs row.
type job struct {
	ID               int64          `db:"id"`
	Queue            string         `db:"queue"`
	Payload          map[string]any `db:"payload"`
	Status           string         `db:"status"`
	Priority         int32          `db:"priority"`
	Attempts         int32          `db:"attempts"`
	Uncounted        int32          `db:"uncounted_attempts"`
	MaxAttempts      *int32         `db:"max_attempts"`
	Policy           *string        `db:"policy"`
	RunAt            time.Time      `db:"run_at"`
	LeaseUntil       *time.Time     `db:"lease_until"`
	LockedBy         *string        `db:"locked_by"`
	LastAttemptedAt  *time.Time     `db:"last_attempted_at"`
	LastFailedAt     *time.Time     `db:"last_failed_at"`
	LastError        *string        `db:"last_error"`
	Errors           []historyEntry `db:"errors"`
	DeadLetterReason *string        `db:"dead_letter_reason"`
	DedupeKey        *string        `db:"dedupe_key"`
	CreatedAt        time.Time      `db:"created_at"`
	CompletedAt      *time.Time     `db:"completed_at"`
	LeaseExpiries    int32          `db:"lease_expiries"`
	Schedule         *string        `db:"schedule"`      // the schedule that enqueued it
	ScheduleSlot     *time.Time     `db:"schedule_slot"` // and the slot it fired for
	Segment          int16          `db:"segment"`       // where it lives: 0 finished, 1-3 live (docs/adr/0061)
}

// jobs runs a query returning backoff.jobs rows.
func jobs(t testing.TB, q querier, sql string, args ...any) []job {
	t.Helper()
	js, err := queryJobs(q, sql, args...)
	require.NoError(t, err)
	return js
}

func queryJobs(q querier, sql string, args ...any) ([]job, error) {
	rows, err := q.Query(context.Background(), sql, args...)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, pgx.RowToStructByName[job])
}

// one runs a query that must return exactly one backoff.jobs row.
func one(t testing.TB, q querier, sql string, args ...any) job {
	t.Helper()
	j, err := oneErr(q, sql, args...)
	require.NoError(t, err)
	return j
}

func oneErr(q querier, sql string, args ...any) (job, error) {
	rows, err := q.Query(context.Background(), sql, args...)
	if err != nil {
		return job{}, err
	}
	return pgx.CollectExactlyOneRow(rows, pgx.RowToStructByName[job])
}

func get(t testing.TB, q querier, id int64) job {
	t.Helper()
	return one(t, q, "SELECT * FROM backoff.jobs WHERE id = $1", id)
}

func enqueue(t testing.TB, q querier, queue string, now time.Time) int64 {
	t.Helper()
	var id int64
	require.NoError(t, q.QueryRow(context.Background(),
		"SELECT backoff.enqueue($1, p_now => $2)", queue, now).Scan(&id))
	return id
}

func claim(t testing.TB, q querier, queue, worker string, limit int, now time.Time) []job {
	t.Helper()
	return jobs(t, q, "SELECT * FROM backoff.claim($1, $2, $3, p_now => $4)", queue, worker, limit, now)
}

func claimOne(t testing.TB, q querier, queue string, now time.Time) job {
	t.Helper()
	js := claim(t, q, queue, "w1", 1, now)
	require.Len(t, js, 1)
	return js[0]
}

func exec(t testing.TB, q querier, sql string, args ...any) {
	t.Helper()
	_, err := q.Exec(context.Background(), sql, args...)
	require.NoError(t, err)
}

func scalar[T any](t testing.TB, q querier, sql string, args ...any) T {
	t.Helper()
	var v T
	require.NoError(t, q.QueryRow(context.Background(), sql, args...).Scan(&v))
	return v
}

// pgCode is the SQLSTATE of err, or "" when it is not a server error.
var pgCode = testdb.SQLState

// requireCode asserts that err is a server error with SQLSTATE code.
func requireCode(t testing.TB, err error, code string) *pgconn.PgError {
	t.Helper()
	require.Error(t, err)
	var pgErr *pgconn.PgError
	require.True(t, errors.As(err, &pgErr), "want SQLSTATE %s, got %v", code, err)
	require.Equal(t, code, pgErr.Code, "message: %s", pgErr.Message)
	return pgErr
}

// execErr runs a statement and returns its error (scanning forces the call).
func execErr(q querier, sql string, args ...any) error {
	rows, err := q.Query(context.Background(), sql, args...)
	if err != nil {
		return err
	}
	rows.Close()
	return rows.Err()
}

func ptr[T any](v T) *T { return &v }

// counted is a job's counted attempt: the claims that count against
// max_attempts (docs/adr/0020).
func (j job) counted() int32 { return j.Attempts - j.Uncounted }

// testdbURL is the URL of a fresh migrated database.
func testdbURL(t testing.TB) string {
	t.Helper()
	return testdb.NewURL(t)
}

// sqlWorkerURL is url for the sessions of these tests, which act as a
// worker of its own SQL would. In a run whose databases default to another
// level (BACKOFF_TEST_DEFAULT_ISOLATION, make test-serializable), they
// follow the one line docs/concepts.md ("Isolation levels") gives such a
// worker, and start their transactions at READ COMMITTED, the level the
// functions are written for: the run shows that line is all it takes.
func sqlWorkerURL(url string) string {
	if os.Getenv("BACKOFF_TEST_DEFAULT_ISOLATION") == "" {
		return url
	}
	sep := "?"
	if strings.Contains(url, "?") {
		sep = "&"
	}
	return url + sep + "default_transaction_isolation=read%20committed"
}
