package webui_test

import (
	"context"
	"net/http"
	"net/url"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

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
	require.Contains(t, body, `<dd id="schedule"><a href="/schedules">nightly-report</a>, slot 2030-01-01 07:30:00Z</dd>`)
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
