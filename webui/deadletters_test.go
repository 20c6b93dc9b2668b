package webui_test

import (
	"context"
	"html"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/pgbackoff/pgbackoff/internal/testdb"
	"github.com/pgbackoff/pgbackoff/webui"
)

// TestDeadLettersSample: with more dead letters than the sample, the page
// says that its signature groups cover only the most recent ones, keeps
// the counts per reason exact, and "Replay group…" confirms and replays
// every dead letter of the group, those outside the sample too.
func TestDeadLettersSample(t *testing.T) {
	dbURL := testdb.NewURL(t)
	admin := testdb.Pool(t, dbURL)
	ctx := context.Background()
	// mail: 30 "order N failed" (max_attempts) dead-lettered at minutes
	// 1..30, 3 "smtp down" (non_retryable) at minutes 10..12. The 5 most
	// recent are orders 26..30.
	_, err := admin.Exec(ctx, `
INSERT INTO backoff.jobs (queue, status, attempts, run_at, created_at, completed_at, last_error, dead_letter_reason)
SELECT 'mail', 'dead_lettered', 1, now(), now(), now() - interval '1 day' + i * interval '1 minute',
       CASE WHEN i <= 30 THEN 'order ' || (1000 + i) || ' failed' ELSE 'smtp down' END,
       CASE WHEN i <= 30 THEN 'max_attempts' ELSE 'non_retryable' END
FROM generate_series(1, 33) AS i`)
	require.NoError(t, err)
	_, err = admin.Exec(ctx, `UPDATE backoff.jobs SET completed_at = completed_at - interval '21 minutes' WHERE last_error = 'smtp down'`)
	require.NoError(t, err)

	srv, c := serve(t, dbURL, webui.Options{AllowActions: true, DeadLetterSample: 5})
	hc := noRedirect()
	code, body, _ := get(t, hc, srv.URL+"/dead-letters")
	require.Equal(t, 200, code, body)
	require.Contains(t, body, `id="sampled"`)
	require.Contains(t, body, "only the most recent 5 dead letters (of 33)")
	reasons := section(t, body, `id="reasons"`)
	require.Regexp(t, `attempts used up</td>\s*<td class="n"><a href="[^"]+">30</a>`, reasons)
	require.Regexp(t, `not retryable</td>\s*<td class="n"><a href="[^"]+">3</a>`, reasons)
	groups := section(t, body, `id="groups"`)
	require.Contains(t, groups, "order N failed")
	require.Regexp(t, `>5</a>`, groups, "the group's count within the sample")
	require.NotContains(t, groups, "smtp down", "outside the sample")

	// Replay the sampled group from its link: the confirmation names the
	// whole group, and the replay reaches its 25 older dead letters too.
	m := regexp.MustCompile(`href="([^"]+)">Replay group…`).FindAllStringSubmatch(groups, -1)
	require.Len(t, m, 1)
	code, body, _ = get(t, hc, srv.URL+html.UnescapeString(m[0][1]))
	require.Equal(t, 200, code, body)
	require.Contains(t, body, `<strong id="count">30</strong>`)
	form := url.Values{}
	for _, f := range regexp.MustCompile(`<input type="hidden" name="([^"]+)" value="([^"]*)">`).FindAllStringSubmatch(body, -1) {
		form.Add(f[1], html.UnescapeString(f[2]))
	}
	require.Equal(t, "order N failed", form.Get("signature"))
	code, body = post(t, hc, srv.URL+"/bulk", form, nil)
	require.Equal(t, 200, code, body)
	require.Regexp(t, `id="done">30<`, body)
	var left, smtp int
	require.NoError(t, admin.QueryRow(ctx, `SELECT count(*) FILTER (WHERE dead_letter_reason = 'max_attempts'),
		count(*) FILTER (WHERE dead_letter_reason = 'non_retryable')
		FROM backoff.jobs WHERE status = 'dead_lettered'`).Scan(&left, &smtp))
	require.Zero(t, left, "every dead letter of the group, sampled or not")
	require.Equal(t, 3, smtp, "other groups untouched")

	// Three dead letters fit the sample: no note, the counts are whole.
	code, body, _ = get(t, hc, srv.URL+"/dead-letters")
	require.Equal(t, 200, code, body)
	require.NotContains(t, body, `id="sampled"`)
	require.Regexp(t, `smtp down</span></td>\s*<td class="n"><a href="[^"]+">3</a>`, body)

	// A dead letter without a reason (written by hand) with the same
	// signature: its group offers no replay, which a filter could only
	// write as "any reason" and so take the non_retryable ones with it.
	_, err = admin.Exec(ctx, `INSERT INTO backoff.jobs (queue, status, attempts, run_at, created_at, completed_at, last_error)
		VALUES ('mail', 'dead_lettered', 1, now(), now(), now(), 'smtp down')`)
	require.NoError(t, err)
	code, body, _ = get(t, hc, srv.URL+"/dead-letters")
	require.Equal(t, 200, code, body)
	groups = section(t, body, `id="groups"`)
	require.Equal(t, 2, strings.Count(groups, "smtp down</span>"), groups)
	require.Equal(t, 1, strings.Count(groups, "Replay group…"), groups)

	_, err = webui.New(c, opsOf(c), webui.Options{DeadLetterSample: -1})
	require.ErrorContains(t, err, "dead-letter sample -1")
	code, _, _ = get(t, http.DefaultClient, srv.URL+"/dead-letters?queue=nobody")
	require.Equal(t, 200, code)
}

// section is the part of body from the element marked by attr to the end
// of its table.
func section(t *testing.T, body, attr string) string {
	t.Helper()
	i := strings.Index(body, attr)
	require.GreaterOrEqual(t, i, 0, body)
	j := strings.Index(body[i:], "</table>")
	require.GreaterOrEqual(t, j, 0, body)
	return body[i : i+j]
}
