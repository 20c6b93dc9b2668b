package ops_test

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/pgbackoff/pgbackoff/client"
	"github.com/pgbackoff/pgbackoff/client/ops"
	"github.com/pgbackoff/pgbackoff/internal/testdb"
)

func TestMain(m *testing.M) { testdb.MainWithExamples(m) }

// newTestClient is the worker's client that makes the jobs the operator's
// calls then read and act on.
func newTestClient(t *testing.T, pool *pgxpool.Pool, opts ...client.Option) *client.Client {
	t.Helper()
	c, err := client.New(context.Background(), pool,
		append([]client.Option{client.WithLogger(slog.New(slog.NewTextHandler(io.Discard, nil)))}, opts...)...)
	require.NoError(t, err)
	return c
}

// clientsAt is the worker's client (worker id "ops") and the operator's on
// pool, both on a clock that reads *now: a test moves time by setting it.
func clientsAt(t *testing.T, pool *pgxpool.Pool, now *time.Time) (*client.Client, *ops.Client) {
	t.Helper()
	clock := func() time.Time { return *now }
	return newTestClient(t, pool, client.WithClock(clock), client.WithWorkerID("ops")), ops.New(pool, ops.WithClock(clock))
}
