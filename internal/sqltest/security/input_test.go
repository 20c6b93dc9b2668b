package security

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/pgbackoff/pgbackoff/client"
	"github.com/pgbackoff/pgbackoff/internal/testdb"
)

// nameCalls are the calls that take a name, each with the bad name as $1
// and p_now as $2: every one must refuse what backoff._check_name refuses.
var nameCalls = map[string]string{
	"enqueue queue":      `SELECT backoff.enqueue($1, p_now => $2)`,
	"enqueue dedupe key": `SELECT backoff.enqueue('q', p_dedupe_key => $1, p_now => $2)`,
	"enqueue policy":     `SELECT backoff.enqueue('q', p_policy => $1, p_now => $2)`,
	"bulk queue":         `SELECT * FROM backoff.enqueue(ARRAY['ok', $1], NULL, NULL, NULL, NULL, NULL, $2)`,
	"bulk dedupe key":    `SELECT * FROM backoff.enqueue(ARRAY['ok', 'ok'], NULL, NULL, NULL, NULL, ARRAY['k', $1], $2)`,
	"bulk policy":        `SELECT * FROM backoff.enqueue(ARRAY['ok'], NULL, NULL, NULL, NULL, NULL, $2, ARRAY[$1])`,
	"claim queue":        `SELECT * FROM backoff.claim($1, 'w', 1, NULL, $2)`,
	"claim worker":       `SELECT * FROM backoff.claim('q', $1, 1, NULL, $2)`,
	"acquire worker":     `SELECT * FROM backoff.acquire(1, $1, NULL, $2)`,
	"grant_queue queue":  `SELECT backoff.grant_queue('backoff_worker', $1, 'work') WHERE $2::timestamptz IS NOT NULL`,
	// The operator's queue switches: a name enqueue refuses is no queue
	// to pause, resume or replay.
	"pause_queue":          `SELECT backoff.pause_queue($1) WHERE $2::timestamptz IS NOT NULL`,
	"resume_queue":         `SELECT backoff.resume_queue($1) WHERE $2::timestamptz IS NOT NULL`,
	"replay_dead_letters":  `SELECT * FROM backoff.replay_dead_letters($1, $2)`,
	"stop_waiting queue":   `SELECT backoff.stop_waiting($1, 'w') WHERE $2::timestamptz IS NOT NULL`,
	"stop_waiting worker":  `SELECT backoff.stop_waiting('q', $1) WHERE $2::timestamptz IS NOT NULL`,
	"wait_for_jobs queue":  `SELECT backoff.wait_for_jobs($1, 'w') WHERE $2::timestamptz IS NOT NULL`,
	"wait_for_jobs worker": `SELECT backoff.wait_for_jobs('q', $1) WHERE $2::timestamptz IS NOT NULL`,
}

// TestNameLimits: queue, policy, worker and dedupe key are names of 1 to
// 128 bytes without control characters, everywhere they come in (also the
// operator's pause_queue, resume_queue and replay_dead_letters, and a
// worker's wait_for_jobs and stop_waiting); anything
// else is 22023 naming the value (ADR 0039). Version 3 stored an
// 8,000-byte queue name that could never be notified or replayed, and
// escape sequences that reached the operator's terminal.
func TestNameLimits(t *testing.T) {
	ctx := context.Background()
	pool := testdb.New(t)
	ok128 := strings.Repeat("é", 64) // 128 bytes
	bad := map[string]string{
		"empty":   "",
		"129":     strings.Repeat("a", 129),
		"8000":    strings.Repeat("q", 8000),
		"escape":  "mail\x1b[2J",
		"newline": "mail\nforged log line",
		"del":     "mail\x7f",
		"c1 csi":  "mail\u009b31m",
		"tab":     "mail\tx",
	}
	for call, sql := range nameCalls {
		for what, v := range bad {
			if what == "empty" && strings.Contains(call, "dedupe") {
				continue // an empty dedupe key has its own message
			}
			_, err := pool.Exec(ctx, sql, v, t0)
			if !assert.Equal(t, "22023", sqlState(err), "%s with %s name: %v", call, what, err) {
				continue
			}
			assert.Contains(t, err.Error(), "1 to 128 bytes", "%s with %s", call, what)
			assert.NotContains(t, err.Error(), "\x1b", "the message must not carry the escape itself")
		}
	}
	require.Zero(t, countOf(t, pool, `SELECT count(*) FROM backoff.queues`), "no refused pause created a queue row")
	// 128 bytes is fine everywhere.
	var id int64
	require.NoError(t, pool.QueryRow(ctx, `SELECT backoff.enqueue($1, p_dedupe_key => $1, p_now => $2)`, ok128, t0).Scan(&id))
	var got int64
	require.NoError(t, pool.QueryRow(ctx, `SELECT id FROM backoff.claim($1, $1, 1, NULL, $2)`, ok128, t0).Scan(&got))
	require.Equal(t, id, got)
	var n int
	require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM backoff.jobs`).Scan(&n))
	require.Equal(t, 1, n, "no refused call inserted anything")
}

// TestNameFormatCharacters: names refuse Unicode format characters
// (general category Cf: zero-width characters, bidi embeddings, overrides
// and isolates, the byte order mark, tags), everywhere _check_name checks
// them, with 22023 naming the value with the character escaped. A queue
// "emails\u200b" looked like "emails" beside the Pause button; a bidi
// override reversed the name it was printed in.
func TestNameFormatCharacters(t *testing.T) {
	ctx := context.Background()
	pool := testdb.New(t)
	bad := map[string]string{
		"zero width space":   "emails\u200b",
		"zero width joiner":  "e\u200dmails",
		"left-to-right":      "emails\u200e",
		"rl override":        "\u202eslaime",
		"word joiner":        "emails\u2060",
		"rl isolate":         "emails\u2067x\u2069",
		"byte order mark":    "\ufeffemails",
		"soft hyphen":        "em\u00adails",
		"arabic letter mark": "emails\u061c",
		"tag":                "emails\U000e0041",
	}
	for call, sql := range nameCalls {
		for what, v := range bad {
			_, err := pool.Exec(ctx, sql, v, t0)
			if !assert.Equal(t, "22023", sqlState(err), "%s with a %s: %v", call, what, err) {
				continue
			}
			assert.Contains(t, err.Error(), "format characters", "%s with a %s", call, what)
			for _, r := range v {
				if !client.ValidName(string(r)) {
					assert.NotContains(t, err.Error(), string(r), "%s with a %s: the message names it escaped", call, what)
				}
			}
		}
	}
	var msg string
	_, err := pool.Exec(ctx, `SELECT backoff.enqueue($1, p_now => $2)`, "emails\u200b", t0)
	if assert.Error(t, err) {
		msg = err.Error()
	}
	assert.Contains(t, msg, `"emails\u200B"`, "the message shows the character escaped")
	require.Zero(t, countOf(t, pool, `SELECT count(*) FROM backoff.jobs`), "no refused call inserted anything")
	require.Zero(t, countOf(t, pool, `SELECT count(*) FROM backoff.queues`), "no refused pause created a queue row")
	// Letters around them are fine: joiners inside an emoji sequence are
	// refused too, but ordinary scripts are not.
	for _, ok := range []string{"emails", "почта", "メール", "البريد", "a-b_c.d:e/f"} {
		_, err := pool.Exec(ctx, `SELECT backoff.enqueue($1, p_now => $2)`, ok, t0)
		require.NoError(t, err, ok)
	}
}

// TestNameCharactersAgreeWithConfig: the characters backoff._check_name
// refuses are exactly those client.ValidName refuses, over every
// code point, so a name `config validate` accepts is never refused by
// `config apply`, and the other way round; and they include every format
// character (Cf) of the Unicode tables of this Go.
func TestNameCharactersAgreeWithConfig(t *testing.T) {
	ctx := context.Background()
	pool := testdb.New(t)
	rows, err := pool.Query(ctx, `
SELECT c FROM pg_catalog.generate_series(1, 1114111) AS c
WHERE c NOT BETWEEN 55296 AND 57343
  AND pg_catalog.chr(c) OPERATOR(pg_catalog.~) backoff._bad_name_chars()
ORDER BY c`)
	require.NoError(t, err)
	sqlRefused, err := pgx.CollectRows(rows, pgx.RowTo[int32])
	require.NoError(t, err)
	var goRefused []int32
	for r := rune(1); r <= unicode.MaxRune; r++ {
		if utf8.ValidRune(r) && !client.ValidName(string(r)) {
			goRefused = append(goRefused, r)
		}
		if unicode.Is(unicode.Cf, r) {
			require.False(t, client.ValidName("a"+string(r)), "format character U+%04X", r)
		}
	}
	require.Equal(t, goRefused, sqlRefused)
}

// TestPriorityBounds: a priority is -32768 to 32767 (docs/adr/0059), in
// the single and the bulk enqueue; anything else is 22023 naming the value.
// Before, any int4 was taken.
func TestPriorityBounds(t *testing.T) {
	ctx := context.Background()
	pool := testdb.New(t)
	for _, p := range []int64{32768, -32769, 2147483647, -2147483648} {
		_, err := pool.Exec(ctx, `SELECT backoff.enqueue('q', p_priority => $1::integer, p_now => $2)`, p, t0)
		if assert.Equal(t, "22023", sqlState(err), "priority %d: %v", p, err) {
			assert.Contains(t, err.Error(), fmt.Sprintf(`priority must be between -32768 and 32767, got "%d"`, p))
		}
		_, err = pool.Exec(ctx, `SELECT * FROM backoff.enqueue(ARRAY['q', 'q'], NULL, NULL, NULL, ARRAY[0, $1::integer], NULL, $2)`, p, t0)
		if assert.Equal(t, "22023", sqlState(err), "bulk priority %d: %v", p, err) {
			assert.Contains(t, err.Error(), fmt.Sprintf(`priority must be between -32768 and 32767, got "%d"`, p))
		}
		_, err = pool.Exec(ctx, `SELECT * FROM backoff.enqueue(ARRAY['q'], NULL, NULL, NULL, ARRAY[$1::integer], ARRAY['k'], $2)`, p, t0)
		assert.Equal(t, "22023", sqlState(err), "bulk priority %d with a dedupe key: %v", p, err)
	}
	require.Zero(t, countOf(t, pool, `SELECT count(*) FROM backoff.jobs`), "no refused call inserted anything")
	for _, p := range []int{32767, -32768, 0} {
		_, err := pool.Exec(ctx, `SELECT backoff.enqueue('q', p_priority => $1::integer, p_now => $2)`, p, t0)
		require.NoError(t, err, "priority %d", p)
		_, err = pool.Exec(ctx, `SELECT * FROM backoff.enqueue(ARRAY['q'], NULL, NULL, NULL, ARRAY[$1::integer], NULL, $2)`, p, t0)
		require.NoError(t, err, "bulk priority %d", p)
	}
}

// TestPayloadLimit: enqueue refuses a payload over
// backoff.settings.max_payload_bytes (1 MiB by default), single and bulk,
// with 22023 naming the size and the limit; the size is the jsonb's,
// uncompressed, also for a payload read from a table (which reaches enqueue
// compressed). Before, any size was stored.
func TestPayloadLimit(t *testing.T) {
	ctx := context.Background()
	pool := testdb.New(t)
	big := `{"a": "` + strings.Repeat("x", 1<<20) + `"}` // 1 MiB and a few bytes
	const bigSize = 1<<20 + 17                           // its jsonb size
	calls := map[string]string{
		"enqueue":            `SELECT backoff.enqueue('q', $1::jsonb, p_now => $2)`,
		"enqueue with a key": `SELECT backoff.enqueue('q', $1::jsonb, p_dedupe_key => 'k', p_now => $2)`,
		"bulk":               `SELECT * FROM backoff.enqueue(ARRAY['q', 'q'], ARRAY['{}', $1::jsonb], NULL, NULL, NULL, NULL, $2)`,
		"bulk with a key":    `SELECT * FROM backoff.enqueue(ARRAY['q', 'q'], ARRAY['{}', $1::jsonb], NULL, NULL, NULL, ARRAY['k1', 'k2'], $2)`,
	}
	for call, sql := range calls {
		_, err := pool.Exec(ctx, sql, big, t0)
		if assert.Equal(t, "22023", sqlState(err), "%s: %v", call, err) {
			assert.Contains(t, err.Error(), fmt.Sprintf("%d bytes, over max_payload_bytes (1048576 bytes)", bigSize), call)
		}
	}
	// A payload read from a table column arrives compressed (a few kB):
	// its uncompressed size counts.
	tx, err := pool.Begin(ctx)
	require.NoError(t, err)
	defer func() { _ = tx.Rollback(ctx) }()
	_, err = tx.Exec(ctx, `CREATE TEMP TABLE stored (v jsonb)`)
	require.NoError(t, err)
	_, err = tx.Exec(ctx, `INSERT INTO stored VALUES ($1::jsonb)`, big)
	require.NoError(t, err)
	var stored int
	require.NoError(t, tx.QueryRow(ctx, `SELECT pg_column_size(v) FROM stored`).Scan(&stored))
	require.Less(t, stored, 1<<16, "the stored copy is compressed")
	_, err = tx.Exec(ctx, `SELECT backoff.enqueue('q', v, p_now => $1) FROM stored`, t0)
	require.Equal(t, "22023", sqlState(err), "a compressed payload: %v", err)
	require.NoError(t, tx.Rollback(ctx))
	require.Zero(t, countOf(t, pool, `SELECT count(*) FROM backoff.jobs`), "no refused call inserted anything")

	// The limit is a setting: 1 KiB to the largest jsonb.
	_, err = pool.Exec(ctx, `UPDATE backoff.settings SET max_payload_bytes = 2048`)
	require.NoError(t, err)
	small := `{"a": "` + strings.Repeat("x", 2000) + `"}`
	_, err = pool.Exec(ctx, `SELECT backoff.enqueue('q', $1::jsonb, p_now => $2)`, small, t0)
	require.NoError(t, err, "2017 bytes are within 2048")
	small = `{"a": "` + strings.Repeat("x", 2100) + `"}`
	_, err = pool.Exec(ctx, `SELECT backoff.enqueue('q', $1::jsonb, p_now => $2)`, small, t0)
	require.Equal(t, "22023", sqlState(err))
	require.Contains(t, err.Error(), "payload is 2117 bytes, over max_payload_bytes (2048 bytes)")
	_, err = pool.Exec(ctx, `SELECT * FROM backoff.enqueue(ARRAY['q', 'q', 'q'], ARRAY['{}', '{}', $1::jsonb], NULL, NULL, NULL, NULL, $2)`, small, t0)
	require.Equal(t, "22023", sqlState(err))
	require.Contains(t, err.Error(), "payload 3 of the batch is 2117 bytes, over max_payload_bytes (2048 bytes)")
	for _, bad := range []int{1023, 268435456, 0, -1} {
		_, err = pool.Exec(ctx, `UPDATE backoff.settings SET max_payload_bytes = $1`, bad)
		require.Equal(t, "23514", sqlState(err), "max_payload_bytes %d: %v", bad, err)
	}
}

// TestErrorHistoryBounded: a worker that fails a job 30 times with 1 MB
// errors leaves at most 8 KiB per history entry and in last_error
// (ADR 0039). Version 3 kept the whole text: one job held 200 MB.
func TestErrorHistoryBounded(t *testing.T) {
	ctx := context.Background()
	pool := testdb.New(t)
	huge := strings.Repeat("ü", 512*1024) // 1 MB of 2-byte characters
	var id int64
	require.NoError(t, pool.QueryRow(ctx, `SELECT backoff.enqueue('q', p_max_attempts => 100, p_now => $1)`, t0).Scan(&id))
	now := t0
	for i := 0; i < 30; i++ {
		var attempt int
		require.NoError(t, pool.QueryRow(ctx, `SELECT attempts FROM backoff.acquire($1, 'w', NULL, $2)`, id, now).Scan(&attempt))
		require.NoError(t, pool.QueryRow(ctx, `SELECT run_at FROM backoff.fail($1, $2, $3, '1 second', true, $4)`, id, attempt, huge, now).Scan(&now))
	}
	var lastLen, histBytes, entries, maxEntry int
	var tail string
	require.NoError(t, pool.QueryRow(ctx, `
SELECT octet_length(last_error), octet_length(errors::text), jsonb_array_length(errors),
       (SELECT max(octet_length(e ->> 'error')) FROM jsonb_array_elements(errors) AS e),
       right(last_error, 40)
FROM backoff.jobs WHERE id = $1`, id).Scan(&lastLen, &histBytes, &entries, &maxEntry, &tail))
	require.LessOrEqual(t, lastLen, 8192)
	require.LessOrEqual(t, maxEntry, 8192)
	require.Equal(t, 20, entries)
	require.Less(t, histBytes, 20*(8192+300), "the history is bounded in bytes")
	require.True(t, strings.HasSuffix(tail, " [truncated: 1048576 bytes]"), tail)
}

// TestTimeBounds: run_at and every time computed as a time plus an interval
// stay inside years 1 to 9999 (ADR 0039). Version 3 stored a run_at in
// year 10000+, which broke `backoffctl jobs list -o json`.
func TestTimeBounds(t *testing.T) {
	ctx := context.Background()
	pool := testdb.New(t)
	for _, runAt := range []string{"10000-01-01 00:00:00+00", "294276-01-01 00:00:00+00", "0001-01-01 00:00:00+00 BC"} {
		_, err := pool.Exec(ctx, `SELECT backoff.enqueue('q', p_run_at => $1::timestamptz, p_now => $2)`, runAt, t0)
		require.Equal(t, "22023", sqlState(err), "run_at %s: %v", runAt, err)
		_, err = pool.Exec(ctx, `SELECT * FROM backoff.enqueue(ARRAY['q'], NULL, ARRAY[$1::timestamptz], NULL, NULL, NULL, $2)`, runAt, t0)
		require.Equal(t, "22023", sqlState(err), "bulk run_at %s: %v", runAt, err)
	}
	late := time.Date(9999, 6, 1, 0, 0, 0, 0, time.UTC)
	end := time.Date(9999, 12, 31, 23, 59, 59, 999999000, time.UTC)
	var id int64
	require.NoError(t, pool.QueryRow(ctx, `SELECT backoff.enqueue('q', p_max_attempts => 10, p_now => $1)`, late).Scan(&id))
	var lease time.Time
	require.NoError(t, pool.QueryRow(ctx, `SELECT lease_until FROM backoff.claim('q', 'w', 1, '876600 hours', $1)`, late).Scan(&lease))
	require.True(t, lease.Equal(end), "claim lease %v", lease)
	require.NoError(t, pool.QueryRow(ctx, `SELECT backoff.heartbeat($1, 1, '876600 hours', $2)`, id, late).Scan(&lease))
	require.True(t, lease.Equal(end), "heartbeat lease %v", lease)
	var runAt time.Time
	require.NoError(t, pool.QueryRow(ctx, `SELECT run_at FROM backoff.snooze($1, 1, '876600 hours', $2)`, id, late).Scan(&runAt))
	require.True(t, runAt.Equal(end), "snooze run_at %v", runAt)
	require.NoError(t, pool.QueryRow(ctx, `SELECT lease_until FROM backoff.acquire($1, 'w', '876600 hours', $2)`, id, end).Scan(&lease))
	require.True(t, lease.Equal(end), "acquire lease %v", lease)
	var attempt int
	require.NoError(t, pool.QueryRow(ctx, `SELECT attempts FROM backoff.jobs WHERE id = $1`, id).Scan(&attempt))
	require.NoError(t, pool.QueryRow(ctx, `SELECT run_at FROM backoff.fail($1, $2, 'x', '876600 hours', true, $3)`, id, attempt, late).Scan(&runAt))
	require.True(t, !runAt.After(end), "fail run_at %v", runAt)
	var bad int
	require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM backoff.jobs WHERE run_at >= '10000-01-01' OR lease_until >= '10000-01-01'`).Scan(&bad))
	require.Zero(t, bad)
}

// countOf runs a count(*) query.
func countOf(t *testing.T, pool *pgxpool.Pool, sql string) int64 {
	t.Helper()
	var n int64
	require.NoError(t, pool.QueryRow(context.Background(), sql).Scan(&n))
	return n
}
