package cli

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/pgbackoff/pgbackoff/internal/testdb"
)

const schedulesConfig = `version = 1

[schedules.nightly-report]
queue = "reports"
cron = "30 2 * * *"
time_zone = "America/New_York"
payload = { format = "pdf" }
max_attempts = 3

[schedules.heartbeat]
queue = "pings"
every = "5m"
catch_up = "all"
catch_up_limit = 10
skip_if_running = true
`

// TestGoldenConfigSchedules: [schedules.NAME] through config validate,
// diff and apply: added, applied again with no change, changed field by
// field (a new timing, a new queue, enabled = false), pruned.
func TestGoldenConfigSchedules(t *testing.T) {
	t.Parallel()
	url := testdb.NewURL(t)
	dir := t.TempDir()
	file := filepath.Join(dir, "backoff.toml")
	write := func(src string) { require.NoError(t, os.WriteFile(file, []byte(src), 0o644)) }
	s := newTranscript(t, url)
	s.replace[dir] = "DIR"

	write(schedulesConfig)
	s.run("config", "validate", "--config", file)
	s.run("config", "diff", "--config", file)
	code, _ := s.run("config", "apply", "--config", file)
	require.Equal(t, 0, code)
	code, _ = s.run("config", "apply", "--config", file)
	require.Equal(t, 0, code)
	s.run("schedules", "list")

	// An operator's pause is kept when the file does not say enabled.
	s.run("schedules", "pause", "heartbeat")
	s.run("config", "diff", "--config", file)

	write(`version = 1

[schedules.nightly-report]
queue = "exports"
cron = "0 3 * * mon-fri"
time_zone = "America/New_York"
payload = '{"format": "csv"}'

[schedules.heartbeat]
queue = "pings"
every = "5m"
catch_up = "all"
catch_up_limit = 10
skip_if_running = true
enabled = true
`)
	s.run("config", "diff", "--config", file)
	s.run("config", "apply", "--config", file)
	s.run("schedules", "list")

	write("version = 1\n")
	s.run("config", "diff", "--config", file)
	s.run("config", "apply", "--config", file, "--prune")
	s.run("schedules", "list")

	write("version = 1\n[schedules.bad]\nqueue = \"q\"\ncron = \"0 0 * * * *\"\ntimezone = \"UTC\"\n")
	s.run("config", "validate", "--config", file)
	s.check("config_schedules")
}
