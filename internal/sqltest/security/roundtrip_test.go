package security

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/pgbackoff/pgbackoff/client"
	"github.com/pgbackoff/pgbackoff/internal/testdb"
)

// hostile are texts that must come back byte for byte: quotes,
// backslashes, format directives, unicode (astral, combining, bidi
// controls, BOM), control characters (NUL excluded: PostgreSQL text cannot
// hold it), binary-looking bytes as valid UTF-8, and 1 MB.
func hostile() map[string]string {
	var bin strings.Builder
	for r := rune(1); r < 0x800; r += 7 {
		bin.WriteRune(r)
	}
	return map[string]string{
		"quotes":    `it's "double" and 'single' and ''doubled'' and $$dollar$$ and $tag$x$tag$`,
		"backslash": `C:\path\to\file \n \t \\ \x00 \u0000 \' \"`,
		"format":    `%s %I %L %% %d {0} ${x} '; DROP TABLE backoff.jobs; --`,
		"unicode":   "ünïcødé 漢字 🙂👩‍👩‍👧 e\u0301 \u202eevil\u202c \ufeffbom \u2028 \U0010FFFF",
		"control":   "\x01\x02\x07\x08\t\n\v\f\r\x1b[31m\x7f",
		"binary":    bin.String(),
		"huge":      strings.Repeat("0123456789abcdef", 1<<16), // 1 MB
	}
}

// nameFor is s when it is a valid name, else a valid stand-in of its own
// for each text (names with control or format characters or over 128
// bytes are refused, see TestNameLimits and TestNameFormatCharacters):
// every subtest works in a queue no other subtest uses.
func nameFor(prefix, s, text string) string {
	if client.ValidName(prefix + s) {
		return prefix + s
	}
	return prefix + "stand-in-" + text
}

// roomForHuge raises max_payload_bytes above the 1 MB text of hostile():
// here it must come back unchanged (the limit is TestPayloadLimit's).
func roomForHuge(t *testing.T, pool *pgxpool.Pool) {
	t.Helper()
	_, err := pool.Exec(context.Background(), `UPDATE backoff.settings SET max_payload_bytes = 4194304`)
	require.NoError(t, err)
}

// requireStoredError checks an error text as stored: unchanged up to 8192
// bytes, else cut at a character boundary with the size marker.
func requireStoredError(t *testing.T, sent, stored string) {
	t.Helper()
	if len(sent) <= 8192 {
		require.Equal(t, sent, stored)
		return
	}
	require.LessOrEqual(t, len(stored), 8192)
	require.True(t, utf8.ValidString(stored))
	marker := fmt.Sprintf(" [truncated: %d bytes]", len(sent))
	require.True(t, strings.HasSuffix(stored, marker), "%q", stored[len(stored)-60:])
	require.True(t, strings.HasPrefix(sent, strings.TrimSuffix(stored, marker)))
}

// TestRoundTripSQL: error texts, dedupe keys, cancel reasons and payloads
// come back unchanged through the SQL functions (error texts up to their
// 8 KiB cap); names do too when they are valid names (docs/reliability.md).
func TestRoundTripSQL(t *testing.T) {
	ctx := context.Background()
	pool := testdb.New(t)
	roomForHuge(t, pool)
	for name, s := range hostile() {
		t.Run(name, func(t *testing.T) {
			queue := nameFor("", s, name)
			key := nameFor("k", s, name)
			worker := nameFor("w", s, name)
			payload, err := json.Marshal(map[string]string{"text": s, s[:min(len(s), 100)]: "key"})
			require.NoError(t, err)
			var id int64
			require.NoError(t, pool.QueryRow(ctx, `SELECT backoff.enqueue($1, $2::jsonb, p_dedupe_key => $3, p_now => $4)`,
				queue, string(payload), key, t0).Scan(&id))
			var gotQueue, gotPayload, gotKey string
			var attempt int
			require.NoError(t, pool.QueryRow(ctx, `SELECT queue, payload::text, dedupe_key, attempts FROM backoff.claim($1, $2, 1, NULL, $3)`,
				queue, worker, t0).Scan(&gotQueue, &gotPayload, &gotKey, &attempt))
			require.Equal(t, queue, gotQueue)
			require.Equal(t, key, gotKey)
			requireSameJSON(t, string(payload), gotPayload)
			var lastError, histError, histWorker string
			require.NoError(t, pool.QueryRow(ctx, `SELECT last_error, errors -> -1 ->> 'error', errors -> -1 ->> 'worker' FROM backoff.fail($1, $2, $3, NULL, true, $4)`,
				id, attempt, s, t0).Scan(&lastError, &histError, &histWorker))
			requireStoredError(t, s, lastError)
			requireStoredError(t, s, histError)
			require.Equal(t, worker, histWorker, "locked_by, as recorded in the history")
			var reason string
			require.NoError(t, pool.QueryRow(ctx, `SELECT last_error FROM backoff.cancel($1, $2, $3)`, id, s, t0).Scan(&reason))
			requireStoredError(t, s, reason)
		})
	}
}

// TestRoundTripClient: the same texts through the Go client.
func TestRoundTripClient(t *testing.T) {
	ctx := context.Background()
	pool := testdb.New(t)
	roomForHuge(t, pool)
	c, err := client.New(ctx, pool)
	require.NoError(t, err)
	for name, s := range hostile() {
		t.Run(name, func(t *testing.T) {
			queue := nameFor("", s, name)
			payload := map[string]string{"text": s}
			id, err := c.Enqueue(ctx, queue, payload)
			require.NoError(t, err)
			jobs, err := c.Claim(ctx, queue, 1, time.Minute)
			require.NoError(t, err)
			require.Len(t, jobs, 1)
			require.Equal(t, id, jobs[0].ID)
			require.Equal(t, queue, jobs[0].Queue)
			var got map[string]string
			require.NoError(t, jobs[0].UnmarshalPayload(&got))
			require.Equal(t, payload, got)
			j, err := c.Fail(ctx, id, jobs[0].Token, s)
			require.NoError(t, err)
			requireStoredError(t, s, j.LastError)
			requireStoredError(t, s, j.Errors[len(j.Errors)-1].Error)
			back, err := c.Get(ctx, id)
			require.NoError(t, err)
			requireStoredError(t, s, back.LastError)
			require.Equal(t, queue, back.Queue)
		})
	}
}

func requireSameJSON(t *testing.T, want, got string) {
	t.Helper()
	var w, g any
	require.NoError(t, json.Unmarshal([]byte(want), &w))
	require.NoError(t, json.Unmarshal([]byte(got), &g))
	require.Equal(t, w, g)
}
