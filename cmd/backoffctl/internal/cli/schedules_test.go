package cli

import (
	"testing"

	"github.com/pgbackoff/pgbackoff/internal/testdb"
)

// TestGoldenSchedules: the schedules commands on a database whose
// schedules fired at fixed times; --now makes the transcript exact.
func TestGoldenSchedules(t *testing.T) {
	t.Parallel()
	url := testdb.NewURL(t)
	s := newTranscript(t, url)
	s.run("schedules", "list")
	sqlExec(t, url, `SELECT backoff.put_schedule('nightly-report', 'reports', p_cron => '30 2 * * *',
		p_time_zone => 'America/New_York', p_payload => '{"format": "pdf"}', p_max_attempts => 3,
		p_now => '2029-12-30 00:00+00')`)
	sqlExec(t, url, `SELECT backoff.put_schedule('heartbeat', 'pings', p_every => '5 minutes', p_catch_up => 'all',
		p_catch_up_limit => 10, p_skip_if_running => true, p_now => '2029-12-31 23:40+00')`)
	// A schedule nothing has fired since 23:01 is overdue at 00:00.
	sqlExec(t, url, `SELECT backoff.put_schedule('stale', 'pings', p_every => '1 minute', p_now => '2029-12-31 23:00+00')`)
	sqlExec(t, url, `SELECT count(*) FROM backoff.fire_schedules(p_now => '2029-12-31 23:59+00')`)
	sqlExec(t, url, `UPDATE backoff.schedules SET next_fire_at = '2029-12-31 23:01+00', fired = 0, missed = 0, last_slot = NULL,
		last_missed_at = NULL WHERE name = 'stale'`)
	sqlExec(t, url, `DELETE FROM backoff.jobs WHERE schedule = 'stale'`)
	// Outcomes for the last jobs of `show`: the report's slot is
	// dead-lettered, the heartbeat's completes.
	sqlExec(t, url, `SELECT backoff.fail(c.id, c.attempts, 'template missing', p_retryable => false, p_now => '2029-12-31 23:59:30+00')
		FROM backoff.claim('reports', 'w1', p_now => '2029-12-31 23:59:10+00') AS c`)
	sqlExec(t, url, `SELECT backoff.complete(c.id, c.attempts, p_now => '2029-12-31 23:59:40+00')
		FROM backoff.claim('pings', 'w1', p_now => '2029-12-31 23:59:20+00') AS c`)
	s.run("schedules", "list")
	s.run("schedules", "show", "nightly-report")
	s.run("schedules", "show", "heartbeat", "--output", "json")
	s.run("schedules", "pause", "heartbeat")
	s.run("schedules", "pause", "heartbeat")
	s.run("schedules", "list", "--output", "json")
	s.run("schedules", "trigger", "heartbeat")
	s.run("schedules", "resume", "heartbeat")
	s.run("schedules", "resume", "heartbeat", "--output", "json")
	s.run("schedules", "show", "heartbeat")
	s.run("schedules", "show", "stale")
	s.run("schedules", "show", "nope")
	s.run("schedules", "trigger", "nope")
	s.run("schedules", "pause")
	s.run("jobs", "list", "--queue", "pings")
	// Times to the second: an interval of seconds fires twice a minute.
	sqlExec(t, url, `SELECT backoff.put_schedule('probe', 'pings', p_every => '45 seconds',
		p_time_zone => 'Asia/Kolkata', p_now => '2029-12-31 23:59:50+00')`)
	s.run("schedules", "show", "probe")
	s.check("schedules")
}
