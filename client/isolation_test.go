package client

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/pgbackoff/pgbackoff/internal/testdb"
)

// TestCallsRunAtReadCommitted: in a database whose default isolation is
// REPEATABLE READ or SERIALIZABLE, a client over a pool or a connection
// runs each statement at READ COMMITTED (docs/adr/0080), in one round trip
// with its BEGIN and COMMIT; a failed statement leaves its connection idle,
// not in a failed transaction; a connection inside the caller's
// transaction runs the statement there.
func TestCallsRunAtReadCommitted(t *testing.T) {
	t.Parallel()
	for _, level := range []string{"repeatable read", "serializable"} {
		t.Run(level, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			url := testdb.NewURL(t)
			testdb.SetDefaultIsolation(t, url, level)
			pool := testdb.Pool(t, url)
			conn, err := pgx.Connect(ctx, url)
			require.NoError(t, err)
			defer conn.Close(ctx)

			for name, db := range map[string]DB{"pool": pool, "connection": conn} {
				c, err := New(ctx, db, WithLogger(testLogger(t)))
				require.NoError(t, err)
				var got string
				require.NoError(t, c.db.QueryRow(ctx, `SHOW transaction_isolation`).Scan(&got), name)
				require.Equal(t, "read committed", got, name)
				rows, err := c.db.Query(ctx, `SELECT current_setting('transaction_isolation') FROM generate_series(1, 3)`)
				require.NoError(t, err)
				levels, err := pgx.CollectRows(rows, pgx.RowTo[string])
				require.NoError(t, err, name)
				require.Equal(t, []string{"read committed", "read committed", "read committed"}, levels, name)
				tag, err := c.db.Exec(ctx, `UPDATE backoff.settings SET segment_jobs = segment_jobs`)
				require.NoError(t, err, name)
				require.EqualValues(t, 1, tag.RowsAffected(), name)

				// A failing statement: its error, and the connection back idle.
				_, err = c.db.Exec(ctx, `SELECT 1/0`)
				require.ErrorContains(t, err, "division by zero", name)
				require.ErrorContains(t, c.db.QueryRow(ctx, `SELECT 1/0`).Scan(new(int)), "division by zero", name)
				require.NoError(t, c.db.QueryRow(ctx, `SHOW transaction_isolation`).Scan(&got), name)
				require.Equal(t, "read committed", got, name)

				// The client's own calls, end to end.
				id, err := c.Enqueue(ctx, "q-"+name, nil)
				require.NoError(t, err, name)
				jobs, err := c.Claim(ctx, "q-"+name, 1, 0)
				require.NoError(t, err, name)
				require.Len(t, jobs, 1, name)
				require.Equal(t, id, jobs[0].ID, name)
				_, err = c.Complete(ctx, jobs[0].ID, jobs[0].Token)
				require.NoError(t, err, name)
			}
			require.Equal(t, byte('I'), conn.PgConn().TxStatus())

			// In the caller's transaction: its level.
			c, err := New(ctx, conn)
			require.NoError(t, err)
			_, err = conn.Exec(ctx, `BEGIN`)
			require.NoError(t, err)
			var got string
			require.NoError(t, c.db.QueryRow(ctx, `SHOW transaction_isolation`).Scan(&got))
			require.Equal(t, level, got, "a statement inside the caller's transaction runs at its level")
			require.Equal(t, byte('T'), conn.PgConn().TxStatus(), "and leaves it open")
			_, err = conn.Exec(ctx, `ROLLBACK`)
			require.NoError(t, err)
		})
	}
}
