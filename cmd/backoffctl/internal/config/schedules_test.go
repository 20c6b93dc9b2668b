package config

import (
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

const schedulesExample = `version = 1

[schedules.nightly-report]
queue = "reports"
cron = "30 2 * * *"
time_zone = "Europe/Berlin"
payload = { format = "pdf", pages = [1, 2], draft = false }
policy = "conservative"
priority = 5
max_attempts = 3
skip_if_running = true

[schedules.heartbeat]
queue = "pings"
every = "5m"
payload = '{"b": 1, "a": {"y": 2.50, "x": null}}'
catch_up = "all"
catch_up_limit = 10
catch_up_window = "1h"
enabled = false

[env.test.schedules.heartbeat]
every = "1s"
`

func TestSchedules(t *testing.T) {
	t.Parallel()
	c, err := parse(t, schedulesExample, "")
	require.NoError(t, err)
	require.Len(t, c.Schedules, 2)
	off := false
	require.Equal(t, Schedule{Name: "heartbeat", Queue: "pings", Payload: `{"a":{"x":null,"y":2.50},"b":1}`,
		Every: 5 * time.Minute, TimeZone: "UTC", CatchUp: "all", CatchUpWindow: time.Hour, CatchUpLimit: 10,
		Enabled: &off}, c.Schedules[0])
	require.Equal(t, Schedule{Name: "nightly-report", Queue: "reports", Payload: `{"draft":false,"format":"pdf","pages":[1,2]}`,
		Cron: "30 2 * * *", TimeZone: "Europe/Berlin", Policy: "conservative", Priority: 5, MaxAttempts: 3,
		CatchUp: "latest", CatchUpLimit: 100, SkipIfRunning: true}, c.Schedules[1])

	test, err := parse(t, schedulesExample, "test")
	require.NoError(t, err)
	require.Equal(t, time.Second, test.Schedules[0].Every, "the overlay changes one key")
	require.Equal(t, "all", test.Schedules[0].CatchUp)

	// config show writes what Parse reads back to the same schedules.
	var b strings.Builder
	require.NoError(t, Write(&b, c))
	back, err := Parse("shown.toml", []byte(b.String()), "")
	require.NoError(t, err, b.String())
	require.Equal(t, c.Schedules, back.Schedules)
}

func TestScheduleProblems(t *testing.T) {
	t.Parallel()
	s := func(body string) string { return "version = 1\n[schedules.s]\nqueue = \"q\"\n" + body }
	cases := []struct {
		name, src string
		want      []string
	}{
		{"no timing", s(""), []string{
			`backoff.toml:2: schedules.s: a schedule needs cron = "MIN HOUR DAY MONTH WEEKDAY" or every = "DURATION"`}},
		{"both timings", s("cron = \"* * * * *\"\nevery = \"1m\"\n"), []string{
			`backoff.toml:5: schedules.s.every: a schedule has cron or every, not both`}},
		{"bad cron", s("cron = \"61 * * * *\"\n"), []string{
			`backoff.toml:4: schedules.s.cron: cron "61 * * * *": minute field "61" is outside 0-59`}},
		{"six fields", s("cron = \"0 0 * * * *\"\n"), []string{
			`backoff.toml:4: schedules.s.cron: cron "0 0 * * * *": want 5 fields (minute hour day-of-month month day-of-week), got 6`}},
		{"short every", s("every = \"500ms\"\n"), []string{
			`backoff.toml:4: schedules.s.every: must be 1s to 876600h, got "500ms"`}},
		{"every in days", s("every = \"1d\"\n"), []string{
			`backoff.toml:4: schedules.s.every: bad duration "1d": there is no day unit, write hours (e.g. "48h")`}},
		{"zone", s("every = \"1h\"\ntime_zone = \"Mars/Olympus\"\n"), []string{
			`backoff.toml:5: schedules.s.time_zone: "Mars/Olympus" is not a name of the IANA time zone database (such as UTC or Europe/Berlin)`}},
		{"payload array", s("every = \"1h\"\npayload = [1]\n"), []string{
			`backoff.toml:5: schedules.s.payload: must be an inline table such as { report = "daily" } or a JSON object string such as '{"report": "daily"}'`}},
		{"payload bad json", s("every = \"1h\"\npayload = '{\"a\": '\n"), []string{
			`backoff.toml:5: schedules.s.payload: must be an inline table such as { report = "daily" } or a JSON object string such as '{"report": "daily"}'`}},
		{"unknown policy", s("every = \"1h\"\npolicy = \"moderat\"\n"), []string{
			`backoff.toml:5: schedules.s.policy: no policy "moderat" (did you mean "moderate"?); defined: aggressive, conservative, moderate`}},
		{"priority", s("every = \"1h\"\npriority = 40000\n"), []string{
			`backoff.toml:5: schedules.s.priority: must be between -32768 and 32767, got 40000`}},
		{"catch up", s("every = \"1h\"\ncatch_up = \"every\"\n"), []string{
			`backoff.toml:5: schedules.s.catch_up: unknown missed-slot policy "every"; want one of latest | all`}},
		{"limit without all", s("every = \"1h\"\ncatch_up_limit = 5\n"), []string{
			`backoff.toml:5: schedules.s.catch_up_limit: is used only with catch_up = "all" ("latest" fires one slot)`}},
		{"hinted key", s("every = \"1h\"\ntimezone = \"UTC\"\n"), []string{
			`backoff.toml:5: schedules.s.timezone: unknown key (did you mean "time_zone"?); a schedule has queue, cron, every, time_zone, payload, policy, priority, max_attempts, catch_up, catch_up_window, catch_up_limit, skip_if_running, enabled`}},
		{"enabled string", s("every = \"1h\"\nenabled = \"yes\"\n"), []string{
			`backoff.toml:5: schedules.s.enabled: must be true or false, got the string "yes"`}},
		{"no queue", "version = 1\n[schedules.s]\nevery = \"1h\"\n", []string{
			`backoff.toml:2: schedules.s.queue: missing: a schedule must name the queue its jobs go to`}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			require.Equal(t, tc.want, problemsOf(t, tc.src, ""))
		})
	}
}

// TestSchedulesDocExample: the backoff.toml example of docs/schedules.md
// is valid and says what the page says of it.
func TestSchedulesDocExample(t *testing.T) {
	t.Parallel()
	page, err := os.ReadFile("../../../../docs/schedules.md")
	require.NoError(t, err)
	m := regexp.MustCompile("(?s)<!-- example: parsed by internal/config \\(TestSchedulesDocExample\\) -->\n```toml\n(.*?)```").FindSubmatch(page)
	require.NotNil(t, m, "docs/schedules.md has no tested backoff.toml example")
	c, err := Parse("schedules.md", m[1], "")
	require.NoError(t, err)
	require.Len(t, c.Schedules, 2)
	require.Equal(t, "heartbeat", c.Schedules[0].Name)
	require.Equal(t, 5*time.Minute, c.Schedules[0].Every)
	require.Equal(t, "all", c.Schedules[0].CatchUp)
	require.Equal(t, `{"format":"pdf"}`, c.Schedules[1].Payload)
	require.Equal(t, "America/New_York", c.Schedules[1].TimeZone)
}
