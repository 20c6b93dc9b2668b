package security

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

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

// TestRoundTripSQL: error texts, dedupe keys, cancel reasons and payloads
// come back unchanged through the SQL functions; queue names do too, up
// to the size an index entry allows (docs/reliability.md).
func TestRoundTripSQL(t *testing.T) {
	ctx := context.Background()
	pool := testdb.New(t)
	for name, s := range hostile() {
		t.Run(name, func(t *testing.T) {
			queue := s
			if len(queue) > 2000 {
				queue = queue[:2000]
			}
			payload, err := json.Marshal(map[string]string{"text": s, s[:min(len(s), 100)]: "key"})
			require.NoError(t, err)
			var id int64
			require.NoError(t, pool.QueryRow(ctx, `SELECT backoff.enqueue($1, $2::jsonb, p_dedupe_key => $3, p_now => $4)`,
				queue, string(payload), "k"+s[:min(len(s), 2000)], t0).Scan(&id))
			var gotQueue, gotPayload, gotKey string
			var attempt int
			require.NoError(t, pool.QueryRow(ctx, `SELECT queue, payload::text, dedupe_key, attempts FROM backoff.claim($1, $2, 1, NULL, $3)`,
				queue, s, t0).Scan(&gotQueue, &gotPayload, &gotKey, &attempt))
			require.Equal(t, queue, gotQueue)
			require.Equal(t, "k"+s[:min(len(s), 2000)], gotKey)
			requireSameJSON(t, string(payload), gotPayload)
			var lastError, histError, worker string
			require.NoError(t, pool.QueryRow(ctx, `SELECT last_error, errors -> -1 ->> 'error', errors -> -1 ->> 'worker' FROM backoff.fail($1, $2, $3, NULL, true, $4)`,
				id, attempt, s, t0).Scan(&lastError, &histError, &worker))
			require.Equal(t, s, lastError)
			require.Equal(t, s, histError)
			require.Equal(t, s, worker, "locked_by, as recorded in the history")
			var reason string
			require.NoError(t, pool.QueryRow(ctx, `SELECT last_error FROM backoff.cancel($1, $2, $3)`, id, s, t0).Scan(&reason))
			require.Contains(t, reason, s)
		})
	}
}

// TestRoundTripClient: the same texts through the Go client.
func TestRoundTripClient(t *testing.T) {
	ctx := context.Background()
	pool := testdb.New(t)
	c, err := client.New(ctx, pool)
	require.NoError(t, err)
	for name, s := range hostile() {
		t.Run(name, func(t *testing.T) {
			queue := s
			if len(queue) > 2000 {
				queue = queue[:2000]
			}
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
			j, err := c.Fail(ctx, id, jobs[0].Attempts, s)
			require.NoError(t, err)
			require.Equal(t, s, j.LastError)
			require.Equal(t, s, j.Errors[len(j.Errors)-1].Error)
			back, err := c.Get(ctx, id)
			require.NoError(t, err)
			require.Equal(t, s, back.LastError)
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
