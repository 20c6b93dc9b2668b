package cli

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/pgbackoff/pgbackoff/internal/testdb"
)

// hostileText carries what a producer or worker could send to reach an
// operator's terminal: an escape sequence that clears the screen, a C1
// CSI, a forged second line, a bidi override, a bell, and format
// characters a terminal applies unseen (a zero-width space, a tag
// character beyond U+FFFF).
const hostileText = "boom\x1b[2J\u009b31m\nforged: ok\r\u202eevil\a\u200bz\U000e0041"

// requireInert checks that text output carries none of hostileText's
// control characters raw, and keeps one record per line.
func requireInert(t *testing.T, out string) {
	t.Helper()
	for _, bad := range []string{"\x1b", "\u009b", "\r", "\u202e", "\a", "\u200b", "\U000e0041"} {
		require.NotContains(t, out, bad, "raw %q in output:\n%s", bad, out)
	}
	require.NotContains(t, out, "\nforged: ok", "a forged line")
}

// TestOutputEscapesControlCharacters: jobs show/list, dlq list and stats
// escape control characters of producer and worker data in text output;
// JSON output is still the exact value (ADR 0039). The rows are
// written as the owner would have found them before names were bounded:
// a queue, worker and dedupe key with escape sequences.
func TestOutputEscapesControlCharacters(t *testing.T) {
	ctx := context.Background()
	dbURL := testdb.NewURL(t)
	pool := testdb.Pool(t, dbURL)
	queue := "q\x1b[2J\u009b"
	var id int64
	require.NoError(t, pool.QueryRow(ctx, `
INSERT INTO backoff.jobs (queue, payload, status, attempts, max_attempts, run_at, created_at, completed_at,
                          locked_by, last_error, dead_letter_reason, dedupe_key, errors)
VALUES ($1, jsonb_build_object('text', $2::text), 'dead_lettered', 1, 1, '2029-12-31', '2029-12-31', '2029-12-31',
        NULL, $2, 'max_attempts', $2,
        jsonb_build_array(jsonb_build_object('attempt', 1, 'at', '2029-12-31T00:00:00Z', 'error', $2::text,
                                             'worker', $2::text, 'kind', 'error')))
RETURNING id`, queue, hostileText).Scan(&id))

	for _, args := range [][]string{
		{"jobs", "show", "1"},
		{"jobs", "list"},
		{"dlq", "list"},
		{"stats"},
	} {
		code, out, errOut := run(t, append(args, "--database-url", dbURL, "--now", "2030-01-01T00:00:00Z")...)
		require.Equal(t, 0, code, "%v: %s", args, errOut)
		requireInert(t, out)
		requireInert(t, errOut)
		require.Contains(t, out, `\x1b[2J`, "%v: the escape is shown, escaped", args)

		code, out, errOut = run(t, append(args, "-o", "json", "--database-url", dbURL, "--now", "2030-01-01T00:00:00Z")...)
		require.Equal(t, 0, code, "%v -o json: %s", args, errOut)
		requireInert(t, out)
		var v any
		require.NoError(t, json.Unmarshal([]byte(out), &v), "%v: JSON output must parse", args)
		require.Contains(t, out, `\u001b[2J`, "%v: JSON keeps the value", args)
	}
	code, out, _ := run(t, "jobs", "show", "1", "-o", "json", "--database-url", dbURL)
	require.Equal(t, 0, code)
	var j struct {
		Queue     string `json:"queue"`
		LastError string `json:"last_error"`
		Payload   struct {
			Text string `json:"text"`
		} `json:"payload"`
	}
	require.NoError(t, json.Unmarshal([]byte(out), &j))
	require.Equal(t, queue, j.Queue, "JSON is faithful")
	require.Equal(t, hostileText, j.LastError, "JSON is faithful")
	require.Equal(t, hostileText, j.Payload.Text, "JSON is faithful")
}

// TestJobsListYear10000: a run_at beyond year 9999 (stored before the
// bound, or by hand) still lists as JSON. An earlier CLI failed the whole
// command: Go's time.Time refuses to marshal such a year.
func TestJobsListYear10000(t *testing.T) {
	ctx := context.Background()
	dbURL := testdb.NewURL(t)
	pool := testdb.Pool(t, dbURL)
	_, err := pool.Exec(ctx, `INSERT INTO backoff.jobs (queue, run_at, created_at) VALUES ('far', '10000-01-01 00:00:00+00', '2029-01-01')`)
	require.NoError(t, err)
	code, out, errOut := run(t, "jobs", "list", "-o", "json", "--database-url", dbURL)
	require.Equal(t, 0, code, errOut)
	require.Contains(t, out, `"run_at": "10000-01-01T00:00:00Z"`)
	code, out, errOut = run(t, "jobs", "show", "1", "--database-url", dbURL)
	require.Equal(t, 0, code, errOut)
	require.Contains(t, out, "10000-01-01")
}

// TestDLQReplayAllPartial: one dead letter whose dedupe key is taken by a
// live job cannot be replayed; --all replays the others, names the one it
// could not and why, and exits 1. An earlier CLI rolled the whole queue back, so
// one conflict blocked the queue's replay forever.
func TestDLQReplayAllPartial(t *testing.T) {
	ctx := context.Background()
	dbURL := testdb.NewURL(t)
	pool := testdb.Pool(t, dbURL)
	dead := func(key *string) int64 {
		var id int64
		require.NoError(t, pool.QueryRow(ctx, `SELECT backoff.enqueue('mail', p_dedupe_key => $1, p_now => '2029-12-31')`, key).Scan(&id))
		_, err := pool.Exec(ctx, `SELECT FROM backoff.claim('mail', 'w', 1, NULL, '2029-12-31')`)
		require.NoError(t, err)
		_, err = pool.Exec(ctx, `SELECT FROM backoff.fail($1, 1, 'poison', NULL, false, '2029-12-31')`, id)
		require.NoError(t, err)
		return id
	}
	k := "order-7"
	a := dead(nil)
	b := dead(&k)
	c := dead(nil)
	// A new live job took the dead letter's dedupe key.
	var live int64
	require.NoError(t, pool.QueryRow(ctx, `SELECT backoff.enqueue('mail', p_dedupe_key => 'order-7', p_now => '2029-12-31')`).Scan(&live))

	code, out, errOut := run(t, "dlq", "replay", "--queue", "mail", "--all", "--yes", "--database-url", dbURL, "--now", "2030-01-01T00:00:00Z")
	require.Equal(t, 1, code, "some failed: exit 1\n%s%s", out, errOut)
	require.Contains(t, out+errOut, "job 2", "names the job it could not replay")
	require.Contains(t, out+errOut, "order-7", "and why")
	var statuses []string
	require.NoError(t, pool.QueryRow(ctx, `SELECT array_agg(status ORDER BY id) FROM backoff.jobs WHERE id = ANY($1)`, []int64{a, b, c}).Scan(&statuses))
	require.Equal(t, []string{"pending", "dead_lettered", "pending"}, statuses, "the others were replayed")

	code, out, errOut = run(t, "dlq", "replay", "--queue", "mail", "--all", "--yes", "-o", "json", "--database-url", dbURL, "--now", "2030-01-01T00:00:00Z")
	require.Equal(t, 1, code, errOut)
	var res struct {
		Replayed []int64 `json:"replayed"`
		Failed   []struct {
			ID     int64  `json:"id"`
			Reason string `json:"reason"`
		} `json:"not_replayed"`
	}
	require.NoError(t, json.Unmarshal([]byte(out), &res), out)
	require.Empty(t, res.Replayed)
	require.Len(t, res.Failed, 1)
	require.Equal(t, b, res.Failed[0].ID)
	require.True(t, strings.Contains(res.Failed[0].Reason, "order-7"), res.Failed[0].Reason)
}
