package webui_test

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/pgbackoff/pgbackoff/client"
	"github.com/pgbackoff/pgbackoff/internal/testdb"
	"github.com/pgbackoff/pgbackoff/webui"
)

// TestSchedulesPage: the Schedules page lists each schedule (queue, timing
// and zone, next fire, last fire and its job, paused), escapes what an
// admin wrote, pauses and resumes with the CSRF token (and not without it,
// nor in a read-only UI); a job page names its schedule and slot, or says
// it was a manual fire.
func TestSchedulesPage(t *testing.T) {
	dbURL := testdb.NewURL(t)
	ctx := context.Background()
	conn := testdb.Pool(t, dbURL)
	t0 := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	_, err := conn.Exec(ctx, `SELECT backoff.put_schedule('nightly-report', 'reports', p_cron => '30 2 * * *',
		p_time_zone => 'America/New_York', p_now => $1)`, t0)
	require.NoError(t, err)
	_, err = conn.Exec(ctx, `SELECT backoff.put_schedule('<b>hi</b>', 'pings', p_every => '5 minutes', p_now => $1)`, t0)
	require.NoError(t, err)
	var slotJob int64
	require.NoError(t, conn.QueryRow(ctx, `SELECT job_id FROM backoff.fire_schedules(p_now => $1) WHERE schedule = 'nightly-report'`,
		t0.Add(8*time.Hour)).Scan(&slotJob))

	srv, c := serve(t, dbURL, webui.Options{AllowActions: true})
	hc := noRedirect()
	code, body, _ := get(t, hc, srv.URL+"/schedules")
	require.Equal(t, 200, code, body)
	require.Contains(t, body, `href="/schedules" class="on">Schedules</a>`)
	require.Contains(t, body, "<code>30 2 * * *</code> <span class=\"hint\">America/New_York</span>")
	require.Contains(t, body, "<code>every 5m</code>")
	require.Contains(t, body, "2030-01-01 07:30:00Z", "the slot fired")
	require.Contains(t, body, "2030-01-02 07:30:00Z", "the next fire")
	require.Contains(t, body, `href="/jobs/`+strconv.FormatInt(slotJob, 10)+`"`)
	require.Contains(t, body, "&lt;b&gt;hi&lt;/b&gt;")
	require.NotContains(t, body, "<b>hi</b>")
	code, overview, _ := get(t, hc, srv.URL+"/")
	require.Equal(t, 200, code)
	require.Contains(t, overview, `href="/schedules"`, "linked from the overview's nav")

	tok := csrfField.FindStringSubmatch(body)
	require.NotNil(t, tok)
	paused := func() bool {
		s, found, err := c.ScheduleByName(ctx, "nightly-report")
		require.NoError(t, err)
		require.True(t, found)
		return s.Paused
	}
	code, _ = post(t, hc, srv.URL+"/schedules/pause", url.Values{"schedule": {"nightly-report"}}, nil)
	require.Equal(t, http.StatusForbidden, code, "no CSRF token")
	require.False(t, paused())
	code, body = post(t, hc, srv.URL+"/schedules/pause", url.Values{"csrf": {tok[1]}, "schedule": {"nightly-report"}}, nil)
	require.Equal(t, http.StatusSeeOther, code, body)
	require.True(t, paused())
	_, body, _ = get(t, hc, srv.URL+"/schedules")
	require.Contains(t, body, `action="/schedules/resume"`)
	code, body = post(t, hc, srv.URL+"/schedules/resume", url.Values{"csrf": {tok[1]}, "schedule": {"nightly-report"}}, nil)
	require.Equal(t, http.StatusSeeOther, code, body)
	require.False(t, paused())

	// The job pages: a slot's job and a manual fire.
	_, body, _ = get(t, hc, srv.URL+"/jobs/"+strconv.FormatInt(slotJob, 10))
	require.Contains(t, body, `<dd id="schedule"><a href="/schedules/nightly-report">nightly-report</a>, slot 2030-01-01 07:30:00Z</dd>`)
	manual, found, err := c.TriggerSchedule(ctx, "nightly-report")
	require.NoError(t, err)
	require.True(t, found)
	_, body, _ = get(t, hc, srv.URL+"/jobs/"+strconv.FormatInt(manual, 10))
	require.Contains(t, body, "a manual fire (triggered, no slot)")
	j, err := c.Enqueue(ctx, "plain", nil)
	require.NoError(t, err)
	_, body, _ = get(t, hc, srv.URL+"/jobs/"+strconv.FormatInt(j, 10))
	require.NotContains(t, body, `id="schedule"`)

	// A read-only UI shows the page without forms and refuses the action.
	ro, _ := serve(t, dbURL, webui.Options{})
	code, body, _ = get(t, http.DefaultClient, ro.URL+"/schedules")
	require.Equal(t, 200, code)
	require.NotContains(t, body, `action="/schedules/pause"`)
	code, _ = post(t, noRedirect(), ro.URL+"/schedules/pause", url.Values{"csrf": {tok[1]}, "schedule": {"nightly-report"}}, nil)
	require.NotEqual(t, http.StatusSeeOther, code)
	require.False(t, paused())
}

// TestSchedulePage: a schedule's page shows its settings, its next ten
// fires on a time axis and as a list (from its next fire time, with the
// wall time in its zone), and its last jobs newest first with their
// outcome (a slot's completed job, a dead letter, a manual fire); a
// schedule with no jobs says so; a name with markup and path characters
// is escaped in the page and in its link; a paused schedule says what its
// fires mean and is resumed from its page; the list shows the next three
// fires of each schedule.
func TestSchedulePage(t *testing.T) {
	dbURL := testdb.NewURL(t)
	ctx := context.Background()
	conn := testdb.Pool(t, dbURL)
	t0 := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	_, err := conn.Exec(ctx, `SELECT backoff.put_schedule('nightly-report', 'reports', p_cron => '30 2 * * *',
		p_time_zone => 'America/New_York', p_max_attempts => 2, p_now => $1)`, t0)
	require.NoError(t, err)

	// Two slots and a manual fire, on a clock of their own: the first
	// slot's job completes, the second's is dead-lettered.
	clock := t0
	cc, err := client.New(ctx, conn, client.WithClock(func() time.Time { return clock }))
	require.NoError(t, err)
	settle := func(at time.Time, fail bool) int64 {
		clock = at
		fired, err := cc.FireSchedules(ctx, 0)
		require.NoError(t, err)
		require.Len(t, fired, 1)
		jobs, err := cc.Claim(ctx, "reports", 1, time.Minute)
		require.NoError(t, err)
		require.Len(t, jobs, 1)
		require.Equal(t, fired[0].JobID, jobs[0].ID)
		if fail {
			_, err = cc.Fail(ctx, jobs[0].ID, jobs[0].Token, "report store down", client.NonRetryable())
		} else {
			_, err = cc.Complete(ctx, jobs[0].ID, jobs[0].Token)
		}
		require.NoError(t, err)
		return jobs[0].ID
	}
	done := settle(t0.Add(8*time.Hour), false)
	dead := settle(t0.Add(32*time.Hour), true)
	manual, found, err := cc.TriggerSchedule(ctx, "nightly-report")
	require.NoError(t, err)
	require.True(t, found)
	hostile := "<b>hi</b>/x?y"
	_, err = conn.Exec(ctx, `SELECT backoff.put_schedule($1, 'pings', p_every => '5 minutes', p_now => $2)`, hostile, t0)
	require.NoError(t, err)

	srv, _ := serve(t, dbURL, webui.Options{AllowActions: true})
	hc := noRedirect()
	code, body, _ := get(t, hc, srv.URL+"/schedules/nightly-report")
	require.Equal(t, 200, code, body)
	require.Contains(t, body, `href="/schedules" class="on">Schedules</a>`)
	require.Contains(t, body, `<h1>Schedule nightly-report <span class="tag ok" id="state">active</span></h1>`)
	require.Contains(t, body, "<code>30 2 * * *</code> <span class=\"hint\">America/New_York</span>")
	require.Contains(t, body, "<dt>Max attempts</dt><dd>2</dd>")
	require.Contains(t, body, "<dt>Fired</dt><dd>2</dd>")
	// The fires ahead: ten, from the next fire time (2030-01-03 07:30 UTC,
	// 02:30 in New York), on the axis and in the list.
	fires := regexp.MustCompile(`<li>([0-9-]+ [0-9:]+Z) <span class="hint">([^<]+)</span></li>`).FindAllStringSubmatch(body, -1)
	require.Len(t, fires, 10)
	require.Equal(t, "2030-01-03 07:30:00Z", fires[0][1])
	require.Contains(t, fires[0][2], "2030-01-03 02:30 America/New_York, in ")
	require.Equal(t, "2030-01-12 07:30:00Z", fires[9][1])
	require.Equal(t, 10, strings.Count(body, `<circle cx=`), "one mark a fire")
	require.Contains(t, body, `id="fires-axis"`)
	require.Contains(t, body, "2030-01-12 07:30:00: ")
	// The last jobs, newest first: the manual fire, the dead letter, the
	// completed slot.
	ids := regexp.MustCompile(`<tr data-id="(\d+)">`).FindAllStringSubmatch(body, -1)
	require.Len(t, ids, 3)
	require.Equal(t, []string{fmt.Sprint(manual), fmt.Sprint(dead), fmt.Sprint(done)}, []string{ids[0][1], ids[1][1], ids[2][1]})
	rows := strings.Split(body[strings.Index(body, `id="schedule-jobs"`):], "<tr data-id=")[1:]
	require.Contains(t, rows[0], `<span class="tag manual">manual</span>`)
	require.Contains(t, rows[0], `<span class="tag pending">pending</span>`)
	require.Contains(t, rows[1], "2030-01-02 07:30:00Z")
	require.Contains(t, rows[1], `<span class="tag dead_lettered">dead_lettered</span> <span class="hint">not retryable</span>`)
	require.Contains(t, rows[1], `<td class="n">1/2</td>`, "the counted attempt of max_attempts")
	require.Contains(t, rows[1], `<td class="n">1/2</td>`)
	require.Contains(t, rows[2], `<span class="tag completed">completed</span>`)
	require.Contains(t, rows[2], "<td>2030-01-01 08:00:00Z</td>", "finished when completed")
	require.Contains(t, rows[2], fmt.Sprintf(`href="/jobs/%d"`, done))
	// The job page links back to its schedule's page.
	_, body, _ = get(t, hc, srv.URL+"/jobs/"+strconv.FormatInt(done, 10))
	require.Contains(t, body, `<a href="/schedules/nightly-report">nightly-report</a>, slot 2030-01-01 07:30:00Z`)

	// The list: the next three fires, and a link to each schedule's page
	// with its name escaped as a path segment.
	_, body, _ = get(t, hc, srv.URL+"/schedules")
	require.Contains(t, body, `<td class="fires">2030-01-03 07:30:00Z<br>2030-01-04 07:30:00Z<br>2030-01-05 07:30:00Z</td>`)
	link := "/schedules/" + url.PathEscape(hostile)
	require.Contains(t, body, `<a href="`+link+`">&lt;b&gt;hi&lt;/b&gt;/x?y</a>`)
	code, body, _ = get(t, hc, srv.URL+link)
	require.Equal(t, 200, code, body)
	require.Contains(t, body, "<h1>Schedule &lt;b&gt;hi&lt;/b&gt;/x?y ")
	require.NotContains(t, body, "<b>hi</b>")
	require.Contains(t, body, `id="no-jobs"`)
	require.Contains(t, body, "<code>every 5m</code>")
	require.Equal(t, 10, strings.Count(body, "<li>"))
	require.Contains(t, body, "<li>2030-01-01 00:05:00Z", "from its next fire time")

	code, body, _ = get(t, hc, srv.URL+"/schedules/nope")
	require.Equal(t, http.StatusNotFound, code)
	require.Contains(t, body, `no schedule &#34;nope&#34;`)

	// Paused: the page says so, still previews the fires a resume now
	// would bring, and resumes back to itself.
	_, err = conn.Exec(ctx, `SELECT backoff.pause_schedule('nightly-report')`)
	require.NoError(t, err)
	_, body, _ = get(t, hc, srv.URL+"/schedules/nightly-report")
	require.Contains(t, body, `<span class="tag paused" id="state">paused</span>`)
	require.Contains(t, body, `id="paused-note"`)
	require.Contains(t, body, "<dt>Next fire</dt><dd>when resumed (paused)</dd>")
	require.Equal(t, 10, strings.Count(body, "<li>"))
	require.Contains(t, body, `<input type="hidden" name="back" value="schedule">`)
	tok := csrfField.FindStringSubmatch(body)
	require.NotNil(t, tok)
	req, err := http.NewRequest(http.MethodPost, srv.URL+"/schedules/resume", strings.NewReader(url.Values{
		"csrf": {tok[1]}, "schedule": {"nightly-report"}, "back": {"schedule"}}.Encode()))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	resp, err := hc.Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusSeeOther, resp.StatusCode)
	require.Equal(t, "/schedules/nightly-report", resp.Header.Get("Location"))
	_, body, _ = get(t, hc, srv.URL+"/schedules")
	require.NotContains(t, body, `<span class="tag paused">`)
}

// TestSchedulesOverdue: with no worker running, a schedule whose next
// fire is past by more than its interval shows a red "overdue" tag on the
// Schedules page and its own page, never the green "active" one; a
// schedule due later stays active; the missed slots are shown.
func TestSchedulesOverdue(t *testing.T) {
	dbURL := testdb.NewURL(t)
	ctx := context.Background()
	conn := testdb.Pool(t, dbURL)
	// Put an hour ago with nothing firing since: due 55 minutes ago.
	_, err := conn.Exec(ctx, `SELECT backoff.put_schedule('stale', 'pings', p_every => '5 minutes', p_now => now() - interval '1 hour')`)
	require.NoError(t, err)
	_, err = conn.Exec(ctx, `SELECT backoff.put_schedule('fresh', 'pings', p_every => '24 hours', p_now => now())`)
	require.NoError(t, err)
	_, err = conn.Exec(ctx, `UPDATE backoff.schedules SET missed = 7 WHERE name = 'stale'`)
	require.NoError(t, err)

	srv, _ := serve(t, dbURL, webui.Options{})
	hc := noRedirect()
	code, body, _ := get(t, hc, srv.URL+"/schedules")
	require.Equal(t, 200, code, body)
	rowOf := func(name string) string {
		t.Helper()
		m := regexp.MustCompile(`(?s)<tr>\s*<td><a href="/schedules/` + name + `">.*?</tr>`).FindString(body)
		require.NotEmpty(t, m, name)
		return m
	}
	stale := rowOf("stale")
	require.Contains(t, stale, `<span class="tag overdue"`)
	require.NotContains(t, stale, `tag ok`)
	require.Contains(t, stale, `<td>7</td>`, "its missed slots")
	fresh := rowOf("fresh")
	require.Contains(t, fresh, `<span class="tag ok">active</span>`)
	require.NotContains(t, fresh, `overdue`)

	code, body, _ = get(t, hc, srv.URL+"/schedules/stale")
	require.Equal(t, 200, code, body)
	require.Contains(t, body, `<span class="tag overdue" id="state">overdue</span>`)
	require.Contains(t, body, `id="overdue"`)
	require.NotContains(t, body, `id="state">active`)
	require.Contains(t, body, `<dd id="missed">7</dd>`)
}
