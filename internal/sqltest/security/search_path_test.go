package security

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/pgbackoff/pgbackoff/internal/testdb"
)

// plants are functions and operators an attacker with CREATE on a schema
// of the caller's search_path could plant to hijack unqualified names in a
// SECURITY DEFINER function. Each raises, so a call is an error.
var plants = []string{
	`CREATE FUNCTION public.now() RETURNS timestamptz LANGUAGE plpgsql AS
	 $$BEGIN RAISE EXCEPTION 'planted now() called'; END$$`,
	`CREATE FUNCTION public.md5(text) RETURNS text LANGUAGE plpgsql AS
	 $$BEGIN RAISE EXCEPTION 'planted md5() called'; END$$`,
	`CREATE FUNCTION public.pg_notify(text, text) RETURNS void LANGUAGE plpgsql AS
	 $$BEGIN RAISE EXCEPTION 'planted pg_notify() called'; END$$`,
	`CREATE FUNCTION public.jsonb_build_object(text, int, text, timestamptz, text, text, text, text, text, text) RETURNS jsonb LANGUAGE plpgsql AS
	 $$BEGIN RAISE EXCEPTION 'planted jsonb_build_object() called'; END$$`,
	`CREATE FUNCTION public.evil_eq(text, text) RETURNS boolean LANGUAGE plpgsql AS
	 $$BEGIN RAISE EXCEPTION 'planted text = text called'; END$$`,
	`CREATE OPERATOR public.= (LEFTARG = text, RIGHTARG = text, FUNCTION = public.evil_eq)`,
	`CREATE FUNCTION public.evil_add(timestamptz, interval) RETURNS timestamptz LANGUAGE plpgsql AS
	 $$BEGIN RAISE EXCEPTION 'planted timestamptz + interval called'; END$$`,
	`CREATE OPERATOR public.+ (LEFTARG = timestamptz, RIGHTARG = interval, FUNCTION = public.evil_add)`,
	`CREATE FUNCTION public.evil_le(timestamptz, timestamptz) RETURNS boolean LANGUAGE plpgsql AS
	 $$BEGIN RAISE EXCEPTION 'planted timestamptz <= timestamptz called'; END$$`,
	`CREATE OPERATOR public.<= (LEFTARG = timestamptz, RIGHTARG = timestamptz, FUNCTION = public.evil_le)`,
	// A table named like ours, for a body that forgot its schema.
	`CREATE TABLE public.jobs (id bigint)`,
	`GRANT ALL ON public.jobs TO PUBLIC`,
}

// TestPlantedFunctionsNeverCalled plants functions and operators in public,
// puts public BEFORE pg_catalog on the callers' search_path, proves the
// plants are live (an unqualified now() or text = text in the session calls
// them), then runs the whole life cycle through every role: no planted
// object is ever called, because every public function pins
// search_path = pg_catalog, pg_temp.
func TestPlantedFunctionsNeverCalled(t *testing.T) {
	ctx := context.Background()
	pool := testdb.New(t)
	for _, p := range plants {
		_, err := pool.Exec(ctx, p)
		require.NoError(t, err, p)
	}

	conn, err := pool.Acquire(ctx)
	require.NoError(t, err)
	defer conn.Release()
	c := conn.Conn()
	_, err = c.Exec(ctx, `SET search_path = public, pg_catalog`)
	require.NoError(t, err)
	// The plants are live for this session's own unqualified SQL.
	for _, probe := range []string{`SELECT now()`, `SELECT 'a'::text = 'a'::text`, `SELECT now() + interval '1 s'`} {
		_, err = c.Exec(ctx, probe)
		require.ErrorContains(t, err, "planted", "probe %q should hit the plant", probe)
	}

	as := func(role, sql string, args ...any) pgx.Row {
		_, err := c.Exec(ctx, "SET ROLE "+role)
		require.NoError(t, err)
		return c.QueryRow(ctx, sql, args...)
	}
	now := t0
	var id int64
	// Defaults included: p_now's DEFAULT now() must not resolve to the plant.
	require.NoError(t, as(producer, `SELECT backoff.enqueue('mail', '{"x": 1}', p_dedupe_key => 'k')`).Scan(&id))
	require.NoError(t, as(producer, `SELECT backoff.enqueue('mail', '{"x": 2}', p_now => $1)`, now).Scan(&id))
	var attempt int
	var got int64
	require.NoError(t, as(worker, `SELECT id, attempts FROM backoff.claim('mail', 'w1', 10, NULL, $1) ORDER BY id DESC LIMIT 1`, now.Add(time.Second)).Scan(&got, &attempt))
	var status string
	require.NoError(t, as(worker, `SELECT status FROM backoff.fail($1, $2, 'boom', NULL, true, $3)`, got, attempt, now.Add(2*time.Second)).Scan(&status))
	require.Equal(t, "retrying", status)
	require.NoError(t, as(worker, `SELECT id, attempts FROM backoff.acquire($1, 'w1', NULL, $2)`, got, now.Add(time.Hour)).Scan(&got, &attempt))
	var lease time.Time
	require.NoError(t, as(worker, `SELECT backoff.heartbeat($1, $2, NULL, $3)`, got, attempt, now.Add(time.Hour)).Scan(&lease))
	require.NoError(t, as(worker, `SELECT status FROM backoff.snooze($1, $2, '1 second', $3)`, got, attempt, now.Add(time.Hour)).Scan(&status))
	require.NoError(t, as(worker, `SELECT id, attempts FROM backoff.claim('mail', 'w1', 1, '1 second', $1)`, now.Add(2*time.Hour)).Scan(&got, &attempt))
	var n int
	require.NoError(t, as(worker, `SELECT backoff.reap($1)`, now.Add(3*time.Hour)).Scan(&n))
	require.Equal(t, 1, n)
	require.NoError(t, as(worker, `SELECT id, attempts FROM backoff.claim('mail', 'w1', 1, NULL, $1)`, now.Add(4*time.Hour)).Scan(&got, &attempt))
	require.NoError(t, as(worker, `SELECT status FROM backoff.complete($1, $2, $3)`, got, attempt, now.Add(4*time.Hour)).Scan(&status))
	require.Equal(t, "completed", status)
	var ids []int64
	require.NoError(t, as(worker, `SELECT array_agg(x) FROM backoff.claim('mail', 'w1', 5) AS c, backoff.complete_many(ARRAY[c.id], ARRAY[c.attempts]) AS x`).Scan(&ids))
	require.Len(t, ids, 1, "the job enqueued at the real now() is due now")
	var d time.Duration
	require.NoError(t, as(worker, `SELECT backoff.retry_delay('moderate', 3, 42)`).Scan(&d))
	require.Positive(t, d)
	require.NoError(t, as(admin, `SELECT backoff.enqueue('other', p_now => $1)`, now).Scan(&got))
	require.NoError(t, as(admin, `SELECT status FROM backoff.cancel($1, 'no', $2)`, got, now.Add(5*time.Hour)).Scan(&status))
	require.Equal(t, "cancelled", status)
	require.NoError(t, as(admin, `SELECT status FROM backoff.replay($1, $2)`, got, now.Add(5*time.Hour)).Scan(&status))
	require.Equal(t, "pending", status)
	require.NoError(t, as(admin, `SELECT status FROM backoff.cancel($1, 'done', $2)`, got, now.Add(5*time.Hour)).Scan(&status))
	require.Equal(t, "cancelled", status)
	require.NoError(t, as(admin, `SELECT count(*) FROM backoff.stats()`).Scan(&n))
	require.NoError(t, as(admin, `SELECT count(*) FROM backoff.schedule('moderate', 5)`).Scan(&n))
	require.NoError(t, as(admin, `SELECT backoff.prune('1 second', 100, $1)`, time.Now().Add(time.Hour)).Scan(&n))
	require.Equal(t, 3, n, "two completed jobs and one cancelled")
	require.NoError(t, as(admin, `SELECT backoff.schema_version()`).Scan(&n))
	_, err = c.Exec(ctx, `RESET ROLE`)
	require.NoError(t, err)

	var planted int
	require.NoError(t, c.QueryRow(ctx, `SELECT count(*) FROM public.jobs`).Scan(&planted))
	require.Zero(t, planted, "a function wrote to the planted public.jobs")
}
